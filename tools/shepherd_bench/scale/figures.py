"""What a run measured, as numbers at the design load's full size.

A run holds a fraction `f` of the design load (whole shard groups); a count over the subset
is divided by `f` to read as the whole system's, except what the run modelled at full size
already (the supervisor's tick fan-out and its invocations, the shared partitions'
utilization). Per-group figures are divided by the number of modelled groups instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from shepherd_bench.prices import usd
from shepherd_bench.scale.capacity import key_pattern
from shepherd_bench.scale.kernel import percentile
from shepherd_bench.scale.lambdas import Function
from shepherd_bench.scale.model import DESIGN_LOAD, SAMPLE_MS, SIZE_SAMPLE, START_MS, Run
from shepherd_bench.scale.whatif import engine_shards_list

RELAY_BATCH = 100  # stream records per relay invocation (shepherd.topology)
RELAY_MS = 150  # a relay invocation's duration (*estimate*: PutEvents per record)
ITEM_OVERHEAD_BYTES = 100  # DynamoDB's per-item storage overhead
WATCH_ENTRY_BYTES = 100
LIST_ENTRY_BYTES = 250
DAYS_PER_MONTH = 730 / 24


def _s(ms: float) -> float:
    return round(ms / 1000, 2)


def _dist(values: list[float]) -> dict[str, float]:
    return {
        "count": len(values),
        "p50": _s(percentile(values, 50)),
        "p99": _s(percentile(values, 99)),
        "max": _s(max(values, default=0.0)),
    }


def detection(run: Run) -> dict[str, Any]:
    """Dead attempts (packers: HeartbeatSeconds 60; Lambda hangs and crashes: TimeoutSeconds
    20) and when the supervisor timed each out, from its last sign of life. One still not
    found at the end, though its deadline passed, counts with the time from its death to the
    end (a lower bound of its lag); `missed`: not found `grace` after its deadline (a
    minute, or the supervisor's backlog if longer); `by_shard` counts those and the found."""
    heartbeat_s = run.definition.by_name["pack_order"].heartbeat_seconds or 0
    timeout_s = run.definition.by_name["check_order"].timeout_seconds
    end = run.end_ms
    # A dead attempt is missed if its deadline passed a minute before the end, or longer than
    # the supervisor's backlog (its oldest due entry's age, p99) when it is behind.
    ages = [float(r.oldest_due_age_ms) for r in run.supervision.log.reports if r.lease != "busy"]
    grace = max(60_000.0, percentile(ages, 99))
    out: dict[str, Any] = {"by_shard": {}, "grace_s": _s(grace)}
    lags: dict[str, list[float]] = {"packer": [], "lambda": []}
    missed: Counter[str] = Counter()
    unfound: Counter[str] = Counter()
    by_shard: dict[str, list[int]] = {}
    for key, death in run.world.stats.deaths.items():
        kind = "packer" if death.how == "packer" else "lambda"
        liveness = heartbeat_s if kind == "packer" else timeout_s
        row = by_shard.setdefault(death.shard, [0, 0])
        found = run.detections.get(key)
        if found is not None:
            lags[kind].append(found.acted_at - found.last_sign)
            row[0] += 1
            row[1] += 1
            continue
        if death.died_at + liveness * 1000 < end:
            # Not found, though its deadline passed: its lag is at least the time to the end
            # of the run (from its death: its last sign came no later), a censored sample.
            lags[kind].append(end - death.died_at)
            unfound[kind] += 1
        if death.died_at + liveness * 1000 + grace < end:
            missed[kind] += 1  # its deadline passed longer before the end than the backlog
            row[0] += 1
    deaths = Counter(
        "packer" if d.how == "packer" else "lambda" for d in run.world.stats.deaths.values()
    )
    dead_keys = set(run.world.stats.deaths)
    out["packer"] = {
        "deaths": deaths["packer"],
        "found": len(lags["packer"]) - unfound["packer"],
        "not_found_yet": unfound["packer"],
        "missed": missed["packer"],
        "last_sign_to_acted_s": _dist(lags["packer"]),
        "target_s": heartbeat_s + 5,
    }
    out["lambda"] = {
        "deaths": deaths["lambda"],
        "found": len(lags["lambda"]) - unfound["lambda"],
        "not_found_yet": unfound["lambda"],
        "missed": missed["lambda"],
        "last_sign_to_acted_s": _dist(lags["lambda"]),
        "target_s": timeout_s + 5,
    }
    out["live_attempts_timed_out"] = sum(1 for k in run.detections if k not in dead_keys)
    out["by_shard"] = {s: {"dead": v[0], "found": v[1]} for s, v in sorted(by_shard.items())}
    out["shards_all_found"] = all(v[0] == v[1] for v in by_shard.values())
    engine_lags = [float(x) for r in run.supervision.log.reports for x in r.lags_ms]
    out["engine_detection_lag_s"] = _dist(engine_lags)
    return out


def supervisor(run: Run) -> dict[str, Any]:
    log = run.supervision.log
    reports = log.reports
    groups = len(run.config.modelled)
    seconds = run.config.minutes * 60
    ticks = seconds / run.deployed.interval_s
    held = [r for r in reports if r.lease != "busy"]
    actions: Counter[str] = Counter()
    for r in reports:
        actions.update(r.actions)
    looked = sum(r.looked_at for r in reports)
    return {
        "interval_s": run.deployed.interval_s,
        "sweeps_per_group": round(len(reports) / groups, 1),
        "sweeps_expected_per_group": round(ticks, 1),
        "looks_per_second_per_group": round(looked / seconds / groups, 1),
        "looks_per_second": round(looked / seconds / run.config.fraction),
        "due_per_sweep": _count_dist([r.due for r in held]),
        "truncated_share": round(sum(r.truncated for r in held) / max(1, len(held)), 3),
        "oldest_due_age_s": _dist([float(r.oldest_due_age_ms) for r in held]),
        "sweep_duration_s": _dist([float(r.duration_ms) for r in held]),
        "lease_busy": sum(r.lease == "busy" for r in reports),
        "stale_entries": sum(r.stale_entries for r in reports),
        "left_due": sum(r.left_due for r in reports),
        "looked_ahead": sum(r.looked_ahead for r in reports),
        "sweep_wait_s": _dist([float(r.waited_ms) for r in held]),
        "moved": sum(r.moved for r in reports),
        "unavailable_looks": sum(r.unavailable for r in reports),
        "failed_looks": sum(r.failed_looks for r in reports),
        "parked": sum(r.parked for r in reports),
        "actions": dict(sorted(actions.items())),
        "invocations_per_tick": round(len(log.invocations) / ticks, 2),
        "groups_per_invocation": round(
            sum(n for _, _, n in log.invocations) / max(1, len(log.invocations)), 2
        ),
        "stand_in_sweeps": log.stand_ins,
        "tick_batch": run.supervision.mapping.batch_size,
        "tick_concurrency": run.supervision.mapping.max_concurrency,
        "ticks_expired": run.supervision.ticks.stats.expired,
        "max_workflows": run.engine.supervisor.max_workflows
        if run.config.max_workflows is None
        else run.config.max_workflows,
    }


def _count_dist(values: list[int]) -> dict[str, float]:
    return {
        "mean": round(sum(values) / max(1, len(values)), 1),
        "p99": percentile([float(v) for v in values], 99),
        "max": max(values, default=0),
    }


def dynamodb(run: Run) -> dict[str, Any]:
    f = run.config.fraction
    seconds = run.config.minutes * 60
    stats = run.store.stats
    index, key = run.capacity.hottest_key
    return {
        "hottest_partition_utilization": round(run.capacity.hottest, 3),
        "hottest_partition": f"{index}:{key}",
        "by_kind": {
            k: {n: round(v, 3) for n, v in row.items()} for k, row in run.capacity.by_kind().items()
        },
        "throttled_requests": round(sum(stats.throttled_attempts.values()) / f),
        "throttled_requests_by_operation": dict(stats.throttled_attempts),
        "unavailable": round(sum(stats.unavailable.values()) / f),
        "unavailable_by_operation": dict(stats.unavailable),
        "wru_per_second": round((stats.wru_table + stats.wru_index) / seconds / f),
        "rru_per_second": round(stats.rru / seconds / f),
        "wru_index_share": round(stats.wru_index / max(1.0, stats.wru_table + stats.wru_index), 3),
        "requests": dict(stats.requests),
    }


SAMPLE_S = SAMPLE_MS // 1000
WINDOW_S = 10  # a rate limit is judged on 10-second means (a subset's second is noisy)


def _means(per_second: Mapping[int, float], first: int, last: int) -> list[tuple[int, float]]:
    """(start second, mean a second) of each whole WINDOW_S window from `first` to `last`."""
    return [
        (s, sum(per_second.get(t, 0.0) for t in range(s, s + WINDOW_S)) / WINDOW_S)
        for s in range(first, last - WINDOW_S + 1, WINDOW_S)
    ]


def limits(run: Run) -> dict[str, Any]:
    """What the run asked of the limits outside the engine, at full size, against the
    deployment's configured values (`model.Deployment`): the table's and each index's units a
    second, API Gateway's requests a second, Lambda's concurrency; a partition's own limit
    is `dynamodb`'s. Each with the first second (from the run's start) it was exceeded."""
    deployment = run.config.deployment
    f = run.config.fraction
    first = int(START_MS // 1000)
    last = int(run.end_ms // 1000)
    rates = run.capacity.rates
    table: dict[str, Any] = {}
    over: dict[str, int] = {}
    for index in rates.indexes():
        row: dict[str, Any] = {}
        for kind, limit in (("wru", deployment.table_wru), ("rru", deployment.table_rru)):
            means = _means(rates.per_second(index, kind), first, last)
            peak = max((m for _, m in means), default=0.0)
            row[kind] = {"peak": round(peak), "limit": limit}
            late = next((s for s, m in means if m > limit), None)
            if late is not None:
                over[f"{index} {kind.upper()} a second over {limit:,.0f}"] = late - first
        table[index] = row
    api = {s: n / f for s, n in run.world.stats.api_per_second.items()}
    api_means = _means(api, first, last)
    api_peak = max((m for _, m in api_means), default=0.0)
    late = next((s for s, m in api_means if m > deployment.api_rate_limit), None)
    if late is not None:
        over[f"API requests a second over the stage throttle {deployment.api_rate_limit:,.0f}"] = (
            late - first
        )
    concurrency = [c / f for c in run.samples.concurrency]
    at_limit = next(
        (
            i * SAMPLE_S
            for i, c in enumerate(concurrency)
            if c >= deployment.account_concurrency * 0.999
        ),
        None,
    )
    if run.account.throttles and at_limit is not None:
        over[f"Lambda concurrency at the account's {deployment.account_concurrency:,}"] = at_limit
    throttle = run.capacity.first_throttle
    if throttle is not None:
        second, index, key = throttle
        over[f"partition {index}:{key_pattern(key)} over its limit ({index}:{key})"] = (
            second - first
        )
    first_over = min(over.items(), key=lambda kv: kv[1]) if over else None
    return {
        "deployment": deployment.name,
        "table_units_per_second": table,
        "api_requests_per_second": {
            "peak": round(api_peak),
            "limit": deployment.api_rate_limit,
        },
        "lambda_concurrency": {
            "peak": round(run.account.peak / f),
            "limit": deployment.account_concurrency,
            "throttles": round(run.account.throttles / f),
        },
        "exceeded_at_s": dict(sorted(over.items(), key=lambda kv: kv[1])),
        "first_bottleneck": None if first_over is None else first_over[0],
    }


def lambdas(run: Run) -> dict[str, Any]:
    f = run.config.fraction
    out: dict[str, Any] = {"account_peak_concurrency": round(run.account.peak / f)}
    out["supervisor_peak_concurrency"] = run.supervision.mapping.peak
    out["account_throttles"] = run.account.throttles
    for name, mapping in run.mappings.items():
        fn = mapping.function
        batches = mapping.batches
        records = sum(n * c for n, c in batches.items())
        out[name] = {
            "invocations": fn.stats.invocations,
            "mean_batch": round(records / max(1, sum(batches.values())), 2),
            "peak_concurrency": round(mapping.peak / f),
            "duration_s": _dist(fn.stats.duration_ms),
            "timeouts": fn.stats.timeouts,
            "dead_lettered": run.queues[name].stats.dead_lettered,
        }
    return out


def stall(run: Run) -> dict[str, Any] | None:
    if run.config.stall is None:
        return None
    pool, at_s, seconds = run.config.stall
    start = START_MS + at_s * 1000
    stop = start + seconds * 1000
    sends = run.queue_port.sends[pool]
    first = run.queue_port.first_sent
    tasks = [k for k in sends if start <= first[k] < stop]
    messages = sum(sends[k] for k in tasks)
    return {
        "pool": pool,
        "stalled_seconds": seconds,
        "tasks": len(tasks),
        "messages": messages,
        "extra_messages_per_task": round((messages - len(tasks)) / max(1, len(tasks)), 3),
        "all_tasks_extra": round((sum(sends.values()) - len(sends)) / max(1, len(sends)), 3),
    }


RATE_WARMUP_S = 5  # seconds left out at the start: the buckets' burst, the first asks


def rate_limit(run: Run) -> dict[str, Any] | None:
    """A limited pool's claims a second against its limit, at full size (subset counts / f):
    over the whole seconds after the first RATE_WARMUP_S, and the limiter's cost per task."""
    if run.config.rate_limit is None:
        return None
    pool, per_second, burst = run.config.rate_limit
    f = run.config.fraction
    last = int((run.end_ms - START_MS) // 1000)  # the last second is partial
    whole = [run.limited_claims[s] / f for s in range(RATE_WARMUP_S, last)]
    achieved = sum(whole) / max(1, len(whole))
    # A subset's second holds ~2 slots a shard (a whole-system shard: 250): per second its
    # counts / f carry a quantization the whole system does not have. Ten seconds hold ~20.
    tens = [sum(whole[i : i + 10]) / 10 for i in range(0, len(whole) - 9, 10)]
    minutes = [sum(whole[i : i + 60]) / 60 for i in range(0, len(whole) - 59, 60)]
    sends = run.queue_port.sends[pool]
    tasks = len(sends)
    buckets = run.subset_buckets()
    return {
        "pool": pool,
        "per_second": per_second,
        "burst": burst,
        "shards": buckets.shards,
        "whole_seconds": len(whole),
        "achieved_per_second": round(achieved),
        "error_vs_limit": round(abs(achieved - per_second) / per_second, 4),
        "per_second_min": round(min(whole, default=0)),
        "per_second_max": round(max(whole, default=0)),
        "worst_second_error": round(
            max((abs(w - per_second) / per_second for w in whole), default=0), 4
        ),
        "per_10s_min": round(min(tens, default=0)),
        "per_10s_max": round(max(tens, default=0)),
        "per_minute": [round(m) for m in minutes],
        "tasks": round(tasks / f),
        "messages_per_task": round(sum(sends.values()) / max(1, tasks), 3),
        "limiter_writes_per_task": round(run.limiter_writes / max(1, tasks), 3),
        "held": round(run.outcomes["held"] / f),
        "dropped": round(run.outcomes["dropped"] / f),
    }


def _function_usd(fn: Function) -> float:
    return usd("lambda_request", fn.stats.invocations) + usd("lambda_gb_s_arm", fn.stats.gb_seconds)


def cost(run: Run) -> dict[str, Any]:
    """Dollars an hour at the design load, by what is billed; the subset's share divided by
    f, what ran at full size (the supervisor's invocations and ticks, the schedule) as is."""
    f = run.config.fraction
    per_hour = 60 / run.config.minutes
    stats = run.store.stats
    queues = list(run.queues.values())
    sqs_agent = sum(
        q.stats.send_requests
        + q.stats.receive_requests
        + q.stats.delete_requests
        + q.stats.attribute_reads
        for q in queues
    )
    ticks = run.supervision.ticks.stats
    relay_invocations = run.stream_records / RELAY_BATCH
    api_requests = sum(run.world.stats.api_requests.values())
    scaled = {
        "dynamodb_writes": usd("dynamodb_wru", stats.wru_table + stats.wru_index),
        "dynamodb_reads": usd("dynamodb_rru", stats.rru),
        "sqs_agents": usd("sqs_request", sqs_agent),
        "lambda_agents": sum(_function_usd(fn) for fn in run.functions.values()),
        "lambda_api_and_callbacks": _function_usd(run.api) + _function_usd(run.callbacks),
        "api_gateway": usd("apigw_rest_request", api_requests),
        "eventbridge_events": usd("eventbridge_event", run.events_out),
        "lambda_relay": usd("lambda_request", relay_invocations)
        + usd("lambda_gb_s_arm", relay_invocations * RELAY_MS / 1000 * 0.25),
        "s3_puts": usd("s3_put", run.payload_store.puts),
    }
    full = {
        "lambda_supervisor": _function_usd(run.supervision.function),
        "sqs_ticks": usd(
            "sqs_request", ticks.send_requests + ticks.receive_requests + ticks.delete_requests
        ),
        "scheduler": usd("scheduler_invocation", run.supervision.scheduled),
    }
    by_kind = {k: v / f * per_hour for k, v in scaled.items()}
    by_kind.update({k: v * per_hour for k, v in full.items()})
    total = sum(by_kind.values())
    steps_per_hour = run.steps_succeeded / f * per_hour
    ingress = by_kind["api_gateway"] + by_kind["lambda_api_and_callbacks"]
    return {
        "usd_per_hour": round(total, 2),
        "usd_per_hour_by_kind": {k: round(v, 2) for k, v in sorted(by_kind.items())},
        "steps_per_hour": round(steps_per_hour),
        "usd_per_million_steps": round(total / max(1.0, steps_per_hour) * 1e6, 2),
        "usd_per_million_steps_without_ingress": round(
            (total - ingress) / max(1.0, steps_per_hour) * 1e6, 2
        ),
        "waiting_workflow_day": waiting_day(run, by_kind),
    }


def waiting_day(run: Run, by_kind: dict[str, float]) -> dict[str, Any]:
    """One workflow waiting a day on a callback: the looks the deadline rule gives it (the
    one when its wait begins, measured per wait, and the one at its TimeoutSeconds), priced at
    what a look cost in this run, and a day of its storage."""
    f = run.config.fraction
    stats = run.store.stats
    looks = sum(r.looked_at + r.stale_entries for r in run.supervision.log.reports) / f
    per_hour = 60 / run.config.minutes
    dynamo = (
        (
            usd("dynamodb_wru", stats.wru_by["supervisor"])
            + usd("dynamodb_rru", stats.rru_by["supervisor"])
        )
        / f
        * per_hour
    )
    supervisor = by_kind["lambda_supervisor"] + by_kind["sqs_ticks"] + by_kind["scheduler"]
    per_look = (dynamo + supervisor) / max(1.0, looks * per_hour)
    per_wait = run.waiting_looks / max(1, run.waits_begun)  # the look when a wait begins
    timeout_days = run.definition.by_name["take_payment"].timeout_seconds / 86400
    looks_per_day = per_wait + 1 / timeout_days  # and the one at its TimeoutSeconds
    size = run.waiting_bytes / max(1, run.waiting_items) + ITEM_OVERHEAD_BYTES
    items = run.waiting_items / max(1, min(run.waiting_workflows, SIZE_SAMPLE))
    gb = (size * items + WATCH_ENTRY_BYTES + LIST_ENTRY_BYTES) / 1024**3
    storage = usd("dynamodb_gb_month", gb) / DAYS_PER_MONTH
    return {
        "looks_when_a_wait_begins": round(per_wait, 3),
        "looks_per_day": round(looks_per_day, 3),
        "usd_per_look": per_look,
        "storage_usd_per_day": storage,
        "usd": looks_per_day * per_look + storage,
    }


def workflows(run: Run) -> dict[str, Any]:
    f = run.config.fraction
    seconds = run.config.minutes * 60
    stats = run.world.stats
    lost = run.lost()
    statuses = Counter(s for s, _ in run.terminal.values())
    new = len(stats.accepted) - run.seeded
    overdue = run.overdue()
    return {
        "open_workflows": round(sum(run.samples.open) / max(1, len(run.samples.open)) / f),
        "open_at_start": round(run.seeded / f),
        "open_at_end": round(run.samples.open[-1] / f) if run.samples.open else 0,
        "running_steps": round(sum(run.samples.running) / max(1, len(run.samples.running)) / f),
        # Counted from the store (the workflow items the engine created), not the offered.
        "starts_per_second": round(run.created / seconds / f),
        "accepted_starts_per_second": round(new / seconds / f),
        "offered_starts_per_second": round(stats.offered / seconds),
        "refused_starts": round(stats.refused / f),
        "start_retries": round(stats.api_retries / f),
        "api_throttled": round(stats.api_throttled / f),
        "callback_errors": dict(stats.callback_errors),
        "lost_workflows": round(sum(len(v) for v in lost.values()) / f),
        "lost_by_cause": {k: len(v) for k, v in lost.items()},
        "finished": dict(sorted(statuses.items())),
        "steps_succeeded_per_second": round(run.steps_succeeded / seconds / f),
        "agent_outcomes": dict(run.outcomes),
        "overdue_at_end_s": _dist(overdue),
        "overdue_over_a_minute": round(sum(1 for x in overdue if x > 60_000) / f),
        "heartbeats_per_second": round(stats.heartbeats / seconds / f),
    }


def summary(run: Run, wall_s: float) -> dict[str, Any]:
    config = run.config
    return {
        "config": {
            "name": config.name,
            "seed": config.seed,
            "simulated_minutes": config.minutes,
            "watch_shards": config.shards,
            "sweep_groups": config.groups,
            "modelled_groups": list(config.modelled),
            "fraction": config.fraction,
            "pool_max_concurrency": config.pool_concurrency,
            "account_concurrency": config.deployment.account_concurrency,
            "deployment": {
                "name": config.deployment.name,
                "api_rate_limit": config.deployment.api_rate_limit,
                "table_wru": config.deployment.table_wru,
                "table_rru": config.deployment.table_rru,
            },
            "breakers": list(config.breakers),
            "load_factor": round(config.load.starts_per_second / DESIGN_LOAD.starts_per_second, 3),
            "stall": config.stall,
            "rate_limit": config.rate_limit,
            "single_caller": True,  # every start and callback is load.OWNER's
            "list_sharded_what_if": run.list_patched,
            "list_sharded_by_engine": engine_shards_list(),
            "tick_batch": run.supervision.mapping.batch_size,
            "tick_concurrency": run.supervision.mapping.max_concurrency,
        },
        "workflows": workflows(run),
        "detection": detection(run),
        "supervisor": supervisor(run),
        "dynamodb": dynamodb(run),
        "lambda": lambdas(run),
        "limits": limits(run),
        "hot_keys": run.capacity.hot_keys(),
        "stall": stall(run),
        "rate_limit": rate_limit(run),
        "cost": cost(run),
        "wall_seconds": round(wall_s, 1),
        "events": run.kernel.events,
    }
