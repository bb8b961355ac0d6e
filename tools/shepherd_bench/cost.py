"""What a step costs: the example workflows through the real handlers, every request metered.

One workflow runs at a time under a simulated clock (so each sees AWS-like timing, not the
queueing of a single-threaded driver): the start goes through the API handler, every task
message through the agent handler (one message per invocation, as at low load), and the
supervisor handler sweeps on its deployed schedule (`shepherd_bench.schedule`), so a workflow that lives longer than its watch gap gets the supervisor looks it would
get on AWS. Request counts and units are measured; dollars are modelled from them.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import greenlet  # type: ignore[import-untyped]
from shepherd.clock import ManualClock
from shepherd.definitions import Definition
from shepherd.engine.agent import AgentContext
from shepherd.model import StepStatus, WorkflowState
from shepherd.topology import DEFAULT_BATCH_SIZE, RELAY_BATCH_SIZE

from shepherd_bench import idle
from shepherd_bench.idle import IdleMonitoring
from shepherd_bench.meter import Meter, Tally
from shepherd_bench.prices import usd
from shepherd_bench.schedule import deployed
from shepherd_bench.stack import AlarmClock, HandlerStack, handler_stack

HOP_MS = 50  # SQS -> Lambda delivery of one message (assumption; only moves supervisor looks)
SCHEDULE = deployed()
SIM_LIMIT_MS = 15 * 60_000
EXPRESS_MEMORY_GB = 64 / 1024
SUPERVISOR_MEMORY_GB = 256 / 1024
AGENT_MEMORY_GB = 256 / 1024
CALL_LATENCY_MS = 8  # assumed in-region latency of one DynamoDB/SQS/EventBridge call
PROGRESS_MS = 500  # how often the slow step reports progress

ORDER = {
    "order_id": "o-10042",
    "customer": "ada@example.com",
    "amount": 129.5,
    "items": [{"sku": "BOOK-1", "qty": 1}, {"sku": "PEN-7", "qty": 3}],
}
ENVIRONMENT = {"env_name": "team-blue", "region": "eu-west-1", "size": "small"}


@dataclass(frozen=True)
class Scenario:
    name: str
    wf_type: str
    payload: dict[str, Any]
    expect: str
    slow_step: str | None = None  # this step runs `slow_seconds`, heartbeating meanwhile
    slow_seconds: int = 0


SCENARIOS = (
    Scenario("order clean", "order_fulfilment", ORDER, "SUCCEEDED"),
    Scenario(
        "order, 1 retry",
        "order_fulfilment",
        {**ORDER, "faults": {"charge_payment": {"mode": "error", "times": 1}}},
        "SUCCEEDED",
    ),
    Scenario(
        "order compensated",
        "order_fulfilment",
        {**ORDER, "faults": {"ship_order": {"mode": "permanent"}}},
        "COMPENSATED",
    ),
    Scenario(
        "order, a 6 s step",
        "order_fulfilment",
        ORDER,
        "SUCCEEDED",
        slow_step="charge_payment",
        slow_seconds=6,
    ),
    Scenario("provision clean", "provision_environment", ENVIRONMENT, "SUCCEEDED"),
    Scenario(
        "provision, 1 retry",
        "provision_environment",
        {**ENVIRONMENT, "faults": {"create_storage": {"mode": "error", "times": 1}}},
        "SUCCEEDED",
    ),
    Scenario(
        "provision compensated",
        "provision_environment",
        {**ENVIRONMENT, "faults": {"verify": {"mode": "permanent"}}},
        "COMPENSATED",
    ),
)


# A map (issue 24): the transcode example, 8 chunks encoded 3 at a time. Not in SCENARIOS:
# its items are not steps, so a cost per step would say nothing; what an item costs is
# `shepherd_bench.maps`'s (docs/benchmarks.md, Map items). Its clean run's requests are pinned
# like the other examples' (tests/bench/test_handler_accounting.py).
VIDEO = {"video_id": "v-2048", "duration_seconds": 47, "chunk_seconds": 6, "profile": "720p"}
# Child workflows: the onboard example, a primary provision_environment child, then one
# replica's (a map of children); each child is priced as the workflow it is.
TENANT = {
    "tenant_id": "acme",
    "contact": "ops@acme.example",
    "primary": {"env_name": "acme-eu", "region": "eu-west-1", "size": "small"},
    "replicas": [{"env_name": "acme-us", "region": "us-east-1", "size": "small"}],
}
MAP_SCENARIOS = (
    Scenario("transcode clean", "transcode_video", VIDEO, "SUCCEEDED"),
    Scenario("onboard clean", "onboard_tenant", TENANT, "SUCCEEDED"),
)


KIB = 1024
# Large payloads (docs/architecture.md, Large payloads): one step returns a large value with no
# change to its agent (the demo agents' `output_bytes`); its object is written once and read by
# the next step and by the workflow's readers. Not in SCENARIOS: `python -m
# shepherd_bench.payloads` prices them (docs/benchmarks.md, Large payloads).
PAYLOAD_SCENARIOS = (
    Scenario(
        "order, a 100 KiB output",
        "order_fulfilment",
        {**ORDER, "output_bytes": {"charge_payment": 100 * KIB}},
        "SUCCEEDED",
    ),
    Scenario(
        "order, a 1 MiB output",
        "order_fulfilment",
        {**ORDER, "output_bytes": {"charge_payment": 1024 * KIB}},
        "SUCCEEDED",
    ),
)
# How long a payload object is stored (and billed): the default retention after a workflow
# finishes (the lifecycle rule keeps it up to `PAYLOAD_LIVE_DAYS` more if it ran that long).
PAYLOAD_STORED_MONTHS = 1.0


@dataclass
class ScenarioRun:
    scenario: Scenario
    workflows: int
    steps_per_workflow: int
    tally: Tally
    statuses: Counter[str] = field(default_factory=Counter)
    step_attempts: int = 0
    compensation_attempts: int = 0
    sfn_transitions: int = 0
    agent_messages: int = 0
    api_requests: int = 0
    sweeps: int = 0
    durations_ms: list[int] = field(default_factory=list)
    agent_calls: int = 0
    relay_records: int = 0  # stream records that passed the relay's filters
    components: dict[str, Any] = field(default_factory=dict)
    payload_bytes_stored: int = 0  # bytes put in the payload bucket


def next_sweep(now: int) -> int:
    """The first sweep of the deployed schedule after `now`."""
    return SCHEDULE.next_sweep(now)


def steps_run(definition: Definition) -> int:
    """The steps a scenario's workflow runs: its unconditional ones. The scenarios start small
    orders naming no reminder, so the order's conditional steps (its fraud review, its
    reminder's wait and step) are skipped: their skips are priced, spread over the steps run."""
    return sum(1 for s in definition.steps if s.condition is None)


def parallel_states(definition: Definition) -> int:
    """Parallel states an ASL translation needs: one per join (its branches meet there)."""
    return sum(1 for s in definition.steps if len(s.depends_on) > 1)


def sfn_transitions(state: WorkflowState, definition: Definition) -> int:
    """State transitions the same run costs on Step Functions Standard.

    One per Task attempt (retries count), one per compensation Task attempt, one per Parallel
    state entered, one for the Fail state a saga ends in after compensating.
    """
    attempts = sum(r.attempt for r in state.steps.values())
    attempts += sum(r.attempt for r in state.compensations.values())
    ran_joins = sum(
        1
        for s in definition.steps
        if len(s.depends_on) > 1 and state.steps[s.name].status is not StepStatus.PENDING
    )
    unwound = state.workflow.status.value in {"COMPENSATED", "FAILED"}
    return attempts + ran_joins + (1 if unwound else 0)


@dataclass
class Timeline:
    """Simulated time of one workflow, with the supervisor sweeping on schedule.

    On an `AlarmClock` each sweep runs in a greenlet of its own: when it sleeps (looking
    ahead, until its next entry is due) it parks, and the harness goes on (delivers messages,
    runs agents, rings their alarms) until the sweep's wake time comes, as a sweep in its own
    Lambda would let it. `next_at` is the next moment the supervisor acts: a parked sweep's
    wake time or the next sweep's start. On a plain ManualClock a sweep runs to its end in
    the harness's thread, its sleeps moving the clock."""

    stack: HandlerStack
    sweep_at: int
    parked: list[tuple[int, int, Any]] = field(default_factory=list)  # (wake, seq, greenlet)
    _seq: int = 0
    _sweeps: set[Any] = field(default_factory=set)  # the greenlets that are sweeps
    _draining: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.stack.clock, AlarmClock):
            self.stack.clock.parker = self._park

    @property
    def next_at(self) -> int:
        return min([self.sweep_at, *(wake for wake, _, _ in self.parked)])

    def sweep_until(self, until: int) -> None:
        """Run every sweep due up to `until` and resume every parked one whose wake time
        comes by then (also while an agent runs), then stop there; on an `AlarmClock`, what
        happens meanwhile (its alarms) happens on the way."""
        clock = self.stack.clock
        if not isinstance(clock, AlarmClock):
            while self.sweep_at <= until:
                clock.set(max(clock.now_ms(), self.sweep_at))
                self.stack.sweep()
                self.sweep_at = next_sweep(clock.now_ms())
            clock.set(max(clock.now_ms(), until))
            return
        while (at := self.next_at) <= until:
            clock.run_until(at)
            if self.parked and self.parked[0][0] == at:
                self._resume(heapq.heappop(self.parked)[2])
            else:
                self.sweep_at = next_sweep(at)
                sweep = greenlet.greenlet(self._sweep)
                sweep.gr_context = contextvars.copy_context()  # the meter's pause, if any
                self._sweeps.add(sweep)
                self._resume(sweep)
        clock.run_until(until)

    def finish(self) -> None:
        """Let every parked sweep run to its end, its sleeps now moving the clock (the
        workflow is over; the next one gets a timeline of its own)."""
        self._draining = True
        try:
            while self.parked:
                self._resume(heapq.heappop(self.parked)[2])
        finally:
            self._draining = False
            clock = self.stack.clock
            if isinstance(clock, AlarmClock) and clock.parker == self._park:
                clock.parker = None

    def _sweep(self) -> None:
        self.stack.sweep()

    def _resume(self, sweep: Any) -> None:
        wake = sweep.switch()
        if sweep.dead:
            self._sweeps.discard(sweep)
            return
        self._seq += 1
        heapq.heappush(self.parked, (int(wake), self._seq, sweep))

    def _park(self, wake: int) -> bool:
        """Called by the clock's sleep: a sweep parks until `wake` (the harness resumes it);
        anyone else, or a sweep while draining, sleeps on the clock."""
        current = greenlet.getcurrent()
        if self._draining or current not in self._sweeps:
            return False
        current.parent.switch(wake)
        return True


def _move(clock: ManualClock, to: int) -> None:
    """Forward to `to` (never back), ringing an AlarmClock's alarms on the way."""
    if isinstance(clock, AlarmClock):
        clock.run_until(to)
    else:
        clock.set(max(clock.now_ms(), to))


def run_workflow(
    stack: HandlerStack,
    scenario: Scenario,
    timelines: list[Timeline] | None = None,
    *,
    outside: Callable[[], bool] | None = None,
) -> tuple[str, int]:
    """Start one workflow and drive it to a terminal state in simulated time. `outside` is
    what the world outside does when no message is in flight and the workflow has not ended
    (a callback's answer): it says whether it did something."""
    clock = stack.clock
    started = clock.now_ms()
    workflow_id = stack.start(scenario.wf_type, scenario.payload)
    held: list[Any] = []
    timeline = Timeline(stack, next_sweep(clock.now_ms()))
    if timelines is not None:
        timelines[:] = [timeline]
    while clock.now_ms() - started < SIM_LIMIT_MS:
        held += stack.receive()
        if not held and stack.status(workflow_id) in TERMINAL:
            took = clock.now_ms() - started
            timeline.finish()  # a sweep still looking ahead
            stack.relay()  # its events, from the table's stream
            return workflow_id, took
        if not held and outside is not None and outside():
            continue
        first = min(held, key=lambda h: h.visible_at) if held else None
        deliver_at = max(clock.now_ms(), first.visible_at) + HOP_MS if first else None
        if deliver_at is None or timeline.next_at <= deliver_at:
            timeline.sweep_until(timeline.next_at)
            continue
        assert first is not None
        _move(clock, deliver_at)
        held.remove(first)
        stack.deliver(first.pool, [first.message])
    raise RuntimeError(f"{scenario.name}: workflow {workflow_id} did not finish")


@contextlib.contextmanager
def slow_agent(
    stack: HandlerStack, scenario: Scenario, timelines: list[Timeline]
) -> Iterator[None]:
    """Make the scenario's slow step run `slow_seconds` of simulated time, reporting progress
    every 0.5 s (the runtime turns that into a heartbeat write every HeartbeatSeconds/3) while
    the supervisor keeps sweeping.

    The sweeps run in the agent's call (the bench has one thread), and one that looks ahead
    sleeps on the clock until its next entry is due, up to most of an interval: the progress
    reports are the clock's alarms (`AlarmClock`), so they go on while it sleeps, as the agent
    in its own Lambda would. Reported from the agent's loop instead, they would wait for the
    sweep to return, and a look at the heartbeat deadline would find none."""
    if scenario.slow_step is None:
        yield
        return
    from shepherd_examples.agents import registry

    clock = stack.clock
    if not isinstance(clock, AlarmClock):
        raise TypeError("a slow step needs the stack's clock to be an AlarmClock")
    name = stack.definitions[scenario.wf_type].by_name[scenario.slow_step].agent
    original = registry.get(name)
    assert original is not None
    seconds = scenario.slow_seconds

    def slow(ctx: AgentContext) -> Any:
        end = clock.now_ms() + seconds * 1000

        def progress() -> None:
            with stack.meter.component("agent"):  # rung inside a sweep too: the agent's
                ctx.report_progress({"done_ms": seconds * 1000 - (end - clock.now_ms())})
            if clock.now_ms() + PROGRESS_MS <= end:
                clock.alarm(clock.now_ms() + PROGRESS_MS, progress)

        clock.alarm(clock.now_ms() + PROGRESS_MS, progress)
        timelines[0].sweep_until(end)  # its work: the supervisor sweeps meanwhile
        return original(ctx)

    registry.register(name, slow)
    try:
        yield
    finally:
        registry.register(name, original)


TERMINAL = {"SUCCEEDED", "COMPENSATED", "FAILED", "CANCELLED"}


def run_scenarios(
    workflows: int, seed: int = 7, scenarios: tuple[Scenario, ...] | None = None
) -> list[ScenarioRun]:
    rng = random.Random(seed)
    meter = Meter()
    clock = AlarmClock()
    runs: list[ScenarioRun] = []
    with handler_stack(meter, clock) as stack:
        for scenario in SCENARIOS if scenarios is None else scenarios:
            timelines: list[Timeline] = []
            with slow_agent(stack, scenario, timelines):
                run = _run_scenario(stack, meter, scenario, workflows, rng, timelines)
            if run.statuses != Counter({scenario.expect: workflows}):
                raise RuntimeError(f"{scenario.name}: unexpected outcomes {dict(run.statuses)}")
            runs.append(run)
    return runs


def _run_scenario(
    stack: HandlerStack,
    meter: Meter,
    scenario: Scenario,
    workflows: int,
    rng: random.Random,
    timelines: list[Timeline],
) -> ScenarioRun:
    definition = stack.definitions[scenario.wf_type]
    with meter.paused():  # the definition snapshot: once per sandbox, not per workflow
        stack.forget(run_workflow(stack, scenario, timelines)[0])
        stack.sweep()  # the supervisor records the shard count once per process (CONFIG#watch)
    meter.reset()
    before_bytes = stack.payload_bytes()
    before = (
        stack.api_requests,
        sum(stack.agent_messages.values()),
        stack.sweeps,
        stack.relay_records,
    )
    run = ScenarioRun(scenario, workflows, steps_run(definition), Tally())
    for _ in range(workflows):
        stack.clock.advance(rng.uniform(0, 60))  # a random phase against the sweep schedule
        workflow_id, took = run_workflow(stack, scenario, timelines)
        state = WorkflowState.from_items(stack.items(workflow_id))
        assert state is not None
        state.complete(definition.topological_order)
        run.statuses[state.workflow.status.value] += 1
        run.step_attempts += sum(r.attempt for r in state.steps.values())
        run.compensation_attempts += sum(r.attempt for r in state.compensations.values())
        run.sfn_transitions += sfn_transitions(state, definition)
        run.durations_ms.append(took)
        stack.forget(workflow_id)
    run.tally = meter.total()
    run.api_requests = stack.api_requests - before[0]
    run.agent_messages = sum(stack.agent_messages.values()) - before[1]
    run.sweeps = stack.sweeps - before[2]
    run.relay_records = stack.relay_records - before[3]
    run.agent_calls = sum(meter.tally("agent").requests.values())
    run.payload_bytes_stored = stack.payload_bytes() - before_bytes
    run.components = {k: v.as_dict() for k, v in sorted(meter.tallies.items())}
    return run


# ------------------------------------------------------------------------------- dollars

FIXED_LABELS = {"query index watch"}  # idle sweeps: paid every 5 s whether or not work exists


def per_workflow_units(run: ScenarioRun, *, full_batches: bool) -> dict[str, float]:
    """Billed units per workflow, by kind (the supervisor's index queries are a fixed cost)."""
    t, n = run.tally, run.workflows
    index_rru = sum(v for k, v in t.rru.items() if k in FIXED_LABELS)
    invocations = _agent_invocations(run, full_batches=full_batches)
    return {
        "dynamodb_wru_table": sum(t.wru.values()) / n,
        "dynamodb_wru_index": sum(t.gsi_wru.values()) / n,
        "dynamodb_rru": (t.total_rru - index_rru) / n,
        "sqs_send": (t.sqs["SendMessageBatch"] + t.sqs["SendMessage"]) / n,
        # the event source's ReceiveMessage and DeleteMessageBatch per invocation
        "sqs_event_source": 2 * invocations / n,
        "lambda_agent": invocations / n,
        "eventbridge_events_out": sum(t.events.values()) / n,
        # The relay: one invocation per record that passes its filters (worst), or full
        # batches of RELAY_BATCH_SIZE (best); its reads of the stream are free.
        "lambda_relay": run.relay_records / (RELAY_BATCH_SIZE if full_batches else 1) / n,
        "apigw_requests": run.api_requests / n,
        "lambda_api": run.api_requests / n,
        # The payload bucket: a put per large payload, a get per read of one.
        "s3_put": t.requests["s3.PutObject"] / n,
        "s3_get": t.requests["s3.GetObject"] / n,
        "s3_gb_month": run.payload_bytes_stored / 2**30 * PAYLOAD_STORED_MONTHS / n,
    }


def _agent_invocations(run: ScenarioRun, *, full_batches: bool) -> float:
    if not full_batches:
        return float(run.agent_messages)
    return run.agent_messages / DEFAULT_BATCH_SIZE  # amortised: a full batch of 10 per call


PRICE_OF = {
    "dynamodb_wru_table": "dynamodb_wru",
    "dynamodb_wru_index": "dynamodb_wru",
    "dynamodb_rru": "dynamodb_rru",
    "sqs_send": "sqs_request",
    "sqs_event_source": "sqs_request",
    "lambda_agent": "lambda_request",
    "eventbridge_events_out": "eventbridge_event",
    "lambda_relay": "lambda_request",
    "apigw_requests": "apigw_rest_request",
    "lambda_api": "lambda_request",
    "s3_put": "s3_put",
    "s3_get": "s3_get",
    "s3_gb_month": "s3_gb_month",
}
CORE = (
    "dynamodb_wru_table",
    "dynamodb_wru_index",
    "dynamodb_rru",
    "sqs_send",
    "sqs_event_source",
    "lambda_agent",
    "s3_put",
    "s3_get",
    "s3_gb_month",
)
EVENTS = ("eventbridge_events_out", "lambda_relay")
INGRESS = ("apigw_requests", "lambda_api")


def dollars(run: ScenarioRun, *, full_batches: bool) -> dict[str, float]:
    """Modelled dollars per workflow, by kind."""
    units = per_workflow_units(run, full_batches=full_batches)
    return {k: usd(PRICE_OF[k], v) for k, v in units.items()}


def summary(run: ScenarioRun) -> dict[str, Any]:
    """Everything the report shows about one scenario (per workflow, per step, per million)."""
    steps = run.steps_per_workflow
    out: dict[str, Any] = {
        "scenario": run.scenario.name,
        "workflow_type": run.scenario.wf_type,
        "workflows": run.workflows,
        "steps_per_workflow": steps,
        "step_attempts_per_workflow": run.step_attempts / run.workflows,
        "compensation_attempts_per_workflow": run.compensation_attempts / run.workflows,
        "outcomes": dict(run.statuses),
        "sweeps": run.sweeps,
        "median_duration_ms": sorted(run.durations_ms)[len(run.durations_ms) // 2],
        "requests": dict(run.tally.requests),
        "tally": run.tally.as_dict(),
    }
    for case, full in (("worst", False), ("best", True)):
        units = per_workflow_units(run, full_batches=full)
        cost = dollars(run, full_batches=full)
        core = sum(cost[k] for k in CORE)
        events = sum(cost[k] for k in EVENTS)
        ingress = sum(cost[k] for k in INGRESS)
        out[case] = {
            "units_per_workflow": units,
            "units_per_step": {k: v / steps for k, v in units.items()},
            "usd_per_million_steps_by_kind": {k: v * 1e6 / steps for k, v in cost.items()},
            "usd_per_million_steps": {
                "core": core * 1e6 / steps,
                "core_and_events": (core + events) * 1e6 / steps,
                "all_in": (core + events + ingress) * 1e6 / steps,
            },
            "usd_per_million_workflows": {
                "core": core * 1e6,
                "core_and_events": (core + events) * 1e6,
                "all_in": (core + events + ingress) * 1e6,
            },
        }
    transitions = run.sfn_transitions / run.workflows
    task_invocations = (run.step_attempts + run.compensation_attempts) / run.workflows
    express_seconds = sum(_round_up(d, 100) for d in run.durations_ms) / 1000 / run.workflows
    standard = usd("sfn_standard_transition", transitions)
    lambda_tasks = usd("lambda_request", task_invocations)
    express = usd("sfn_express_request", 1) + usd(
        "sfn_express_gb_s", express_seconds * EXPRESS_MEMORY_GB
    )
    ours = out["worst"]["usd_per_million_workflows"]["core_and_events"] / 1e6
    out["step_functions"] = {
        "transitions_per_workflow": transitions,
        "task_invocations_per_workflow": task_invocations,
        "express_billed_seconds_per_workflow": express_seconds,
        "standard_usd_per_million_steps": standard * 1e6 / steps,
        "standard_with_lambda_usd_per_million_steps": (standard + lambda_tasks) * 1e6 / steps,
        "express_usd_per_million_steps": express * 1e6 / steps,
        "express_with_lambda_usd_per_million_steps": (express + lambda_tasks) * 1e6 / steps,
        "standard_usd_per_million_workflows": standard * 1e6,
        "express_usd_per_million_workflows": express * 1e6,
        "ratio_standard_to_ours": standard / ours,
        "ratio_standard_with_lambda_to_ours": (standard + lambda_tasks) / ours,
    }
    # Not in the totals: the agent functions' time spent on orchestration calls (not the
    # business logic), at an assumed latency per call.
    seconds = run.agent_calls / run.workflows * CALL_LATENCY_MS / 1000
    out["agent_calls_per_workflow"] = run.agent_calls / run.workflows
    out["lambda_duration_estimate_usd_per_million_steps"] = (
        usd("lambda_gb_s_arm", seconds * AGENT_MEMORY_GB) * 1e6 / steps
    )
    out["by_component"] = run.components
    return out


def _round_up(ms: int, to: int) -> int:
    return -(-ms // to) * to


INVOCATION_OVERHEAD_MS = 20  # assumed: a warm invocation's own time besides its AWS calls


def fixed_monthly(
    pools: int, watch_shards: int = 8, monitoring: IdleMonitoring | None = None
) -> dict[str, dict[str, float]]:
    """What Shepherd costs per month with no workflow at all (730 hours).

    The supervisor as deployed: EventBridge Scheduler invokes it every minute; that run sends
    the minute's later sweeps as delayed ticks (`SCHEDULE.sweeps - 1` messages, 10 per
    request) and sweeps; each tick is delivered by the tick queue's event source mapping
    (a receive and a delete) and sweeps once. An idle sweep reads the pool states and queries
    every watch shard (0.5 RRU each, the minimum of an index query; the pool states are one
    consistent query, 1 RRU); its duration is those calls at
    CALL_LATENCY_MS each plus INVOCATION_OVERHEAD_MS, at 256 MB arm64. With `monitoring`
    (read from the synthesized template: `shepherd_bench.idle`), CloudWatch, X-Ray and KMS too.
    """
    minutes = 730 * 60
    sweeps = minutes * SCHEDULE.sweeps
    ticks = minutes * (SCHEDULE.sweeps - 1)
    tick_sends = minutes * -(-(SCHEDULE.sweeps - 1) // 10)
    sweep_calls = watch_shards + 1  # the watch shards, and the pool states
    call_ms = sweeps * (sweep_calls * CALL_LATENCY_MS + INVOCATION_OVERHEAD_MS)
    call_ms += tick_sends * CALL_LATENCY_MS
    gb_s = call_ms / 1000 * SUPERVISOR_MEMORY_GB
    queries = sweeps * watch_shards
    # SQS event source: 5 long pollers (20 s) per queue while idle, per the Lambda docs (3P):
    # every pool's queue and the supervisor's tick queue.
    polls = (pools + 1) * 5 * 3 * minutes
    return {
        "scheduler_invocations": {"units": minutes, "usd": usd("scheduler_invocation", minutes)},
        "supervisor_invocations": {"units": sweeps, "usd": usd("lambda_request", sweeps)},
        "supervisor_duration_gb_s": {"units": gb_s, "usd": usd("lambda_gb_s_arm", gb_s)},
        "supervisor_tick_sends": {"units": tick_sends, "usd": usd("sqs_request", tick_sends)},
        "supervisor_tick_receive_and_delete": {
            "units": 2 * ticks,
            "usd": usd("sqs_request", 2 * ticks),
        },
        "idle_sweep_index_queries_rru": {
            "units": queries * 0.5,
            "usd": usd("dynamodb_rru", queries * 0.5),
        },
        "idle_sweep_pool_state_reads_rru": {  # one consistent query: 1 RRU
            "units": sweeps * 1.0,
            "usd": usd("dynamodb_rru", sweeps * 1.0),
        },
        "idle_event_source_polls": {"units": polls, "usd": usd("sqs_request", polls)},
        **(idle.monthly(monitoring, sweeps, minutes) if monitoring is not None else {}),
    }
