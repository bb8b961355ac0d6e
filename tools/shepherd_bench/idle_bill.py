"""The idle bill: what a Shepherd costs a month with no caller, computed from its synthesized
CloudFormation template as deployed (issue 35 point 4), at the list prices of
`shepherd_bench.prices` (copied, with their sources, from shared/reference/aws-limits-and-
prices.md and reliability-security-cost.md).

Everything that varies between deployments is read from the template: the supervisor's
schedule (its rate), its sweep interval, window, groups and the watch index's shard count
(its environment), whether the functions that start workflows can wake it (their environment
names the tick queue: then it sleeps while the index is empty, `shepherd.engine.wakeup`),
every SQS event source mapping (each polled while idle), every enabled schedule of the
definitions (each firing is a workflow, and wakes the supervisor), the alarms, dashboards, KMS
keys and the supervisor's tracing and system logs (`shepherd_bench.idle`). What is modelled
(not read) is said where it is used: the SQS pollers' idle requests (third-party), a call's
latency, how long a woken supervisor ticks, and a bound on what one scheduled workflow costs.

Run it: `python -m shepherd_bench.idle_bill` prints the example app's bill and one pool's;
`make bench` prints the same and writes it to docs/benchmarks.json.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from shepherd import schedules
from shepherd.decisions.rest import DROWSY_MS
from shepherd.definitions import Definition
from shepherd.observability import HANDLER_SUPERVISOR
from shepherd.settings import (
    ENV_SWEEP_GROUPS,
    ENV_SWEEP_INTERVAL,
    ENV_SWEEP_TICKS,
    ENV_SWEEP_WINDOW,
    ENV_WATCH_SHARDS,
    Settings,
)

from shepherd_bench import idle
from shepherd_bench.prices import usd

MONTH_HOURS = 730  # AWS's month
MINUTES = MONTH_HOURS * 60
CALL_MS = 8  # assumed in-region latency of one DynamoDB or SQS call
OVERHEAD_MS = 20  # assumed: a warm invocation's own time besides its calls
SUPERVISOR_GB = 0.25  # 256 MB arm64 (infra/shepherd_infra/config.py, WORKER_MEMORY_MB)
EVENTS_GB = 0.25
# The SQS event source's idle polling: 5 long pollers (20 s) per queue (3P: the Lambda docs
# say "five concurrent batches"), 3 requests a minute each.
POLLERS, POLLS_PER_MINUTE = 5, 3
# What one workflow a schedule starts costs at most, per step, all in (DynamoDB, SQS, agent
# and relay invocations, events out): the worst of the example's measured scenarios is $10.40
# per million steps (provision compensated, docs/benchmarks.md); `make bench` fails if a
# measured scenario exceeds the bound (`check_bound`).
WORKFLOW_USD_PER_STEP_BOUND = 12.0 / 1e6
# How long a firing keeps the supervisor ticking: the workflow's own run (the example's take
# under 2 s; a minute assumed), then the scheduled run that finds the index empty (drowsy, up
# to a minute later) and the one that puts it to sleep (`DROWSY_MS` later: the next minute).
WORKFLOW_MINUTES = 1
AWAKE_MINUTES_PER_FIRING = WORKFLOW_MINUTES + 1 + math.ceil(DROWSY_MS / 60_000)
EVENTS_CALLS = 6  # a start from a firing: the schedule's state, the definition, the put, ...
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_STARTS = re.compile(r"^Start an? (\S+) workflow \(Shepherd schedule (\S+)\)$")


@dataclass(frozen=True)
class Firing:
    """An enabled schedule of a definition, as deployed."""

    name: str
    workflow_type: str
    expression: str
    timezone: str
    per_month: float
    steps: int


@dataclass(frozen=True)
class Deployment:
    """What the idle bill depends on, read from a synthesized template."""

    supervisor_runs: float  # a month, from its schedule's rate
    sweep_interval_s: float
    sweep_window_s: float
    sweep_groups: int
    watch_shards: int
    sleeps: bool  # the start path can wake it: it sleeps while the watch index is empty
    polled_queues: int
    log_groups: int
    firings: list[Firing] = field(default_factory=list)
    monitoring: idle.IdleMonitoring | None = None

    def describe(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ticks_per_minute(self) -> int:
        """Ticks a scheduled run sends per group (5, 10, ..., 55 s: 11)."""
        planned = 1 + int(self.sweep_window_s / self.sweep_interval_s + 1e-9)
        return planned - 1


def _resources(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _env(function: Mapping[str, Any]) -> dict[str, Any]:
    return dict(function["Properties"].get("Environment", {}).get("Variables", {}))


def _rate_minutes(expression: str) -> float:
    got = _RATE.match(expression)
    if got is None:
        raise ValueError(f"the supervisor's schedule is not a rate: {expression!r}")
    n, unit = int(got.group(1)), got.group(2)
    return n * {"minute": 1, "hour": 60, "day": 1440}[unit.rstrip("s")]


def firings_per_month(expression: str, timezone: str) -> float:
    """How many times a schedule fires in 730 hours (from 2026-01-01, a month of 31 days
    cut to 730 hours; an `at()` fires once at most, counted as once)."""
    parsed = schedules.parse(expression)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(hours=MONTH_HOURS)
    times = schedules.next_firings(
        parsed, schedules.zone(timezone), start, count=MINUTES + 1, anchor=start
    )
    return float(sum(1 for t in times if t <= end)) or (1.0 if expression.startswith("at(") else 0)


def from_template(
    template: Mapping[str, Any], definitions: Mapping[str, Definition], emf_bytes: int = 0
) -> Deployment:
    functions = _resources(template, "AWS::Lambda::Function")
    (supervisor_id,) = [
        k for k, f in functions.items() if f["Properties"]["Handler"] == HANDLER_SUPERVISOR
    ]
    env = _env(functions[supervisor_id])
    defaults = Settings.model_fields
    schedules_ = _resources(template, "AWS::Scheduler::Schedule")
    (own,) = [
        s
        for s in schedules_.values()
        if s["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [supervisor_id, "Arn"]}
    ]
    runs = MINUTES / _rate_minutes(own["Properties"]["ScheduleExpression"])
    # The functions that start workflows know the tick queue: they wake a sleeping supervisor.
    wakers = [k for k, f in functions.items() if k != supervisor_id and ENV_SWEEP_TICKS in _env(f)]
    queues = set(_resources(template, "AWS::SQS::Queue"))
    polled = sum(
        1
        for m in _resources(template, "AWS::Lambda::EventSourceMapping").values()
        if (m["Properties"].get("EventSourceArn") or {}).get("Fn::GetAtt", [None])[0] in queues
    )
    firings = []
    for s in schedules_.values():
        props = s["Properties"]
        if "GroupName" not in props or props.get("State", "ENABLED") != "ENABLED":
            continue
        named = _STARTS.match(props.get("Description", ""))
        if named is None:
            raise ValueError(f"a schedule Shepherd did not make: {props.get('Description')}")
        wf_type, name = named.groups()
        timezone = props.get("ScheduleExpressionTimezone", "UTC")
        firings.append(
            Firing(
                name,
                wf_type,
                props["ScheduleExpression"],
                timezone,
                firings_per_month(props["ScheduleExpression"], timezone),
                len(definitions[wf_type].steps),
            )
        )
    return Deployment(
        supervisor_runs=runs,
        sweep_interval_s=float(
            env.get(ENV_SWEEP_INTERVAL, defaults["sweep_interval_seconds"].default)
        ),
        sweep_window_s=float(env.get(ENV_SWEEP_WINDOW, defaults["sweep_window_seconds"].default)),
        sweep_groups=int(env.get(ENV_SWEEP_GROUPS) or 1),
        watch_shards=int(env.get(ENV_WATCH_SHARDS, defaults["watch_shards"].default)),
        sleeps=bool(wakers),
        polled_queues=polled,
        log_groups=len(_resources(template, "AWS::Logs::LogGroup")),
        firings=sorted(firings, key=lambda f: f.name),
        monitoring=idle.from_template(template, emf_bytes),
    )


def _item(units: float, key: str, why: str) -> dict[str, Any]:
    return {"units": units, "usd": usd(key, units), "why": why}


def monthly(d: Deployment) -> dict[str, dict[str, Any]]:
    """The bill, item by item: units a month, dollars, and where the units come from."""
    groups, shards = d.sweep_groups, d.watch_shards
    ticks = d.ticks_per_minute * groups + (groups - 1)  # a minute's ticks, every group
    fired = sum(f.per_month for f in d.firings)
    awake = (
        d.supervisor_runs
        if not d.sleeps
        else min(d.supervisor_runs, fired * AWAKE_MINUTES_PER_FIRING)
    )
    runs = d.supervisor_runs
    # Every scheduled run: the rest state (a consistent read, when it can sleep), the probe
    # of every shard (an empty index: each shard's query finds nothing, 0.5 RRU), the pool
    # states (held paused: one consistent query). Awake, it sends the minute's ticks (10 per
    # request) and each tick sweeps its group's shards once.
    run_reads = (1 + shards if d.sleeps else 0) + 1
    run_rru = ((1 + 0.5 * shards) if d.sleeps else 0) + 1
    sends = math.ceil(ticks / 10)
    sweeps = 1 + ticks  # the run's own and one per tick
    sweep_ms = (shards / groups) * CALL_MS + OVERHEAD_MS
    run_ms = run_reads * CALL_MS + OVERHEAD_MS
    awake_ms = awake * (sends * CALL_MS + sweeps * sweep_ms)
    invocations = runs + awake * ticks
    index_rru = awake * sweeps * shards * 0.5
    polls = d.polled_queues * POLLERS * POLLS_PER_MINUTE * MINUTES
    steps = sum(f.per_month * f.steps for f in d.firings)
    bill = {
        # The scheduled run, every minute whether awake or asleep.
        "scheduler_supervisor_runs": _item(runs, "scheduler_invocation", "its schedule's rate"),
        "supervisor_run_invocations": _item(runs, "lambda_request", "one a run"),
        "supervisor_run_duration_gb_s": _item(
            runs * run_ms / 1000 * SUPERVISOR_GB,
            "lambda_gb_s_arm",
            f"{run_reads} calls x {CALL_MS} ms + {OVERHEAD_MS} ms, 256 MB arm64",
        ),
        "supervisor_state_and_pool_reads_rru": _item(
            runs * run_rru, "dynamodb_rru", f"each run: its state, {shards} shard probes, the pools"
        ),
        # The minutes it is awake: its ticks and their sweeps.
        "supervisor_tick_invocations": _item(
            awake * ticks, "lambda_request", f"{awake:,.0f} awake minutes x {ticks} ticks"
        ),
        "supervisor_awake_duration_gb_s": _item(
            awake_ms / 1000 * SUPERVISOR_GB,
            "lambda_gb_s_arm",
            f"{sweeps} sweeps of {shards // groups} shards and {sends} sends a minute",
        ),
        "supervisor_awake_minutes_index_rru": _item(
            index_rru,
            "dynamodb_rru",
            f"{awake:,.0f} awake minutes x {sweeps} sweeps x {shards} shards",
        ),
        "supervisor_tick_requests": _item(
            awake * (sends + 2 * ticks), "sqs_request", "sends, and each tick's receive and delete"
        ),
        "idle_event_source_polls": _item(
            polls,
            "sqs_request",
            f"{d.polled_queues} queues x {POLLERS} pollers x {POLLS_PER_MINUTE}/min (3P)",
        ),
        "scheduled_firings": _item(
            fired, "scheduler_invocation", ", ".join(f.name for f in d.firings) or "none enabled"
        ),
        "scheduled_starts_lambda": _item(
            fired, "lambda_request", "the events function, once a firing"
        ),
        "scheduled_starts_gb_s": _item(
            fired * (EVENTS_CALLS * CALL_MS + OVERHEAD_MS) / 1000 * EVENTS_GB,
            "lambda_gb_s_arm",
            f"{EVENTS_CALLS} calls a start",
        ),
        "scheduled_workflows_steps": {
            "units": steps,
            "usd": steps * WORKFLOW_USD_PER_STEP_BOUND,
            "why": f"at most ${WORKFLOW_USD_PER_STEP_BOUND * 1e6:.2f} per million steps, all in",
        },
    }
    if d.monitoring is not None:
        for key, row in idle.monthly(d.monitoring, int(invocations), int(runs)).items():
            bill[key] = {**row, "why": "read from the template (shepherd_bench.idle)"}
    return bill


def total(bill: Mapping[str, Mapping[str, Any]], items: tuple[str, ...] | None = None) -> float:
    """The bill's dollars, or those of some of its items (`RUN_ITEMS`, `AWAKE_ITEMS`, ...)."""
    return float(sum(row["usd"] for key, row in bill.items() if items is None or key in items))


# The parts the README names: the supervisor's scheduled run (every minute, asleep or not),
# its awake minutes (ticks and their sweeps), and the scheduled workflows themselves.
RUN_ITEMS = (
    "scheduler_supervisor_runs",
    "supervisor_run_invocations",
    "supervisor_run_duration_gb_s",
    "supervisor_state_and_pool_reads_rru",
)
AWAKE_ITEMS = (
    "supervisor_tick_invocations",
    "supervisor_awake_duration_gb_s",
    "supervisor_awake_minutes_index_rru",
    "supervisor_tick_requests",
)
WORKFLOW_ITEMS = (
    "scheduled_firings",
    "scheduled_starts_lambda",
    "scheduled_starts_gb_s",
    "scheduled_workflows_steps",
)


def invocations(bill: Mapping[str, Mapping[str, Any]]) -> float:
    """The supervisor's invocations a month."""
    return float(
        bill["supervisor_run_invocations"]["units"] + bill["supervisor_tick_invocations"]["units"]
    )


def check_bound(scenarios: list[dict[str, Any]]) -> list[str]:
    """The scenarios whose measured all-in cost per step passes the bound the bill uses."""
    return [
        s["scenario"]
        for s in scenarios
        if s["worst"]["usd_per_million_steps"]["all_in"] / 1e6 > WORKFLOW_USD_PER_STEP_BOUND
    ]


def example_bills() -> dict[str, dict[str, Any]]:
    """The example app as deployed by default, with every paid option on, and one pool: each
    its deployment (what was read) and its bill."""
    from shepherd.definitions import load_directory
    from shepherd_infra import config

    definitions = load_directory(config.DEFINITIONS_DIR)
    emf = idle.emf_record_bytes("Shepherd-Shepherd")
    out = {}
    for name, template in idle.example_templates().items():
        deployment = from_template(template, definitions, emf)
        bill = monthly(deployment)
        out[name] = {"deployment": deployment.describe(), "bill": bill, "total": total(bill)}
    return out


def render(name: str, entry: Mapping[str, Any]) -> str:
    lines = [f"idle bill, {name}: ${entry['total']:.2f} a month"]
    for key, row in entry["bill"].items():
        lines.append(f"  {key:40s} {row['units']:>14,.2f}  ${row['usd']:7.3f}  {row['why']}")
    return "\n".join(lines)


# Issue 35's targets, a month at list price: one pool, and the example app as deployed.
TARGETS = {"one pool": 3.0, "default": 5.0}


def missed(bills: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [
        f"{name}: ${bills[name]['total']:.2f} > ${limit:.2f}"
        for name, limit in TARGETS.items()
        if round(bills[name]["total"], 2) > limit
    ]


def main() -> int:
    """Print the bills; exit 1 if a target is missed (each named)."""
    bills = example_bills()
    for name, entry in bills.items():
        print(render(name, entry))
    failed = missed(bills)
    for line in failed:
        print(f"idle target missed: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
