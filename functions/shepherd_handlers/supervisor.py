"""Supervisor: invoked every minute, it sweeps every few seconds for the whole minute, one
invocation per group of watch shards (docs/architecture.md, the supervisor at load).

EventBridge schedules fire at most once a minute; sweeping every `interval` seconds for the
whole of that minute (0, 5, ..., 55 s, then the next invocation at 60 s) bounds detection lag
by the sweep interval instead of the schedule. How the sweeps after the first are timed:

* **Ticks** (deployed, `SHEPHERD_SWEEP_TICKS_URL` set): the scheduled invocation sends one
  message per group and per sweep of its minute to the supervisor's tick queue (SQS delays of
  0 — the groups after the first —, 5, 10, ..., 55 s, in batches of ten), sweeps group 0 once
  meanwhile and returns; the ticks invoke the function through its event source mapping (at most
  `groups` at a time), and each sweeps the groups its ticks name, once each, under each
  group's lease. Nothing sleeps: an idle minute costs 12 short invocations per group instead
  of one that lasts the minute (docs/benchmarks.md, fixed monthly cost). A lost or failed
  tick costs one sweep of its group; the next one is 5 s later.
* **Sleeping** (unset: the local stack, tests): the invocation sweeps, sleeps until the next
  sweep, and so on up to the window.

**Asleep** (deployed, shepherd.engine.wakeup): the scheduled run first probes the watch index;
found empty twice, a minute apart, it sends no ticks and sweeps nothing until a start (or an
operator's action) wakes it with a wake tick, which this handler runs as a scheduled run.

**Looking ahead** (`SHEPHERD_SWEEP_LOOK_AHEAD`, on by default): each sweep also reads the watch
entries due before the next sweep and looks at each one at its due time, sleeping in between
(`Supervisor.sweep_group`'s `until_ms`: `LOOK_AHEAD_MARGIN_MS` before its group's next sweep,
which every tick names as `next`: the next tick, or after the minute's last, the next scheduled
run), so a deadline is acted on when it passes instead of up to an interval later. An idle sweep
(nothing due before then) is as short as before; one with something due soon lasts until that
entry's time, up to the interval less the margin.

Two sweeps may overlap; that is safe, every action is a conditional write. A run that cannot
start within a minute is dropped rather than queued (see infra/shepherd_infra/supervisor.py),
so overlaps never pile up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.engine.pools import pool_states
from shepherd.engine.supervisor import SweepReport, look_ahead_until
from shepherd.errors import DeliveryError
from shepherd.observability import NAMESPACE, Metric

if TYPE_CHECKING:
    from shepherd.engine.wakeup import Wakeup

from shepherd_handlers.runtime import count_throttles, engine, logger, metrics, service, tracer


def _sqs() -> Any:
    """The engine's SQS client, made by the wiring (imported with the engine, on first use:
    the handler's cold import stays its own, issue 40.6)."""
    from shepherd import wiring  # noqa: PLC0415

    return wiring.client("sqs")


SAFETY_MARGIN_MS = 10_000  # stop sweeping this long before the Lambda timeout
# EventBridge Scheduler's rate (infra/shepherd_infra/config.py, SUPERVISOR_SCHEDULE): the next
# scheduled run, whose own sweep follows the minute's last tick.
SCHEDULE_PERIOD_MS = 60_000
SQS_MAX_DELAY_S = 900
SQS_BATCH = 10


def tick_delays(interval: float, window: float) -> list[int]:
    """The SQS delays (whole seconds) of a minute's sweeps after the first: interval, 2 x
    interval, ... up to `window`. Rounded up, so a tick never sweeps before its moment."""
    planned = 1 + int(window / interval + 1e-9)
    return [min(SQS_MAX_DELAY_S, math.ceil(k * interval - 1e-9)) for k in range(1, planned)]


def following(delays: list[int]) -> dict[int, int | None]:
    """For each sweep of a minute (delay 0: the scheduled run's own, and the other groups'
    first ticks), the delay of its group's next sweep (None: the next minute's run)."""
    return dict(zip([0, *delays], [*delays, None], strict=True))


def ticks(groups: int, delays: list[int]) -> list[tuple[int, int]]:
    """(group, delay) of every tick a scheduled invocation sends: the groups after the first
    at once (it sweeps the first itself), then every group at each later delay."""
    return [(g, 0) for g in range(1, groups)] + [(g, d) for d in delays for g in range(groups)]


def send_ticks(
    queue_url: str,
    planned: list[tuple[int, int]],
    now: Callable[[], int],
    start_ms: int,
    sqs: Any | None = None,
) -> int:
    """Send the minute's ticks (at most 10 per request); returns how many were accepted.
    Each names its group, the moment it is due (`at`: its request's time plus its delay) and
    the moment its group's next sweep is (`next`: the next tick's delay from the same time,
    which it is sent no earlier than, or the next scheduled run, a minute after `start_ms`),
    from which its sweep knows how far to look ahead.

    A tick that could not be sent costs its sweep only: logged, never raised, so the
    scheduled invocation still sweeps.
    """
    sqs = sqs or _sqs()
    after = following(sorted({d for _, d in planned if d}))
    sent = 0
    for first in range(0, len(planned), SQS_BATCH):
        sent_at = now()
        entries = []
        for i, (g, d) in enumerate(planned[first : first + SQS_BATCH], start=first):
            then = after.get(d)
            body = {
                "tick": d,
                "group": g,
                "at": sent_at + d * 1000,
                "next": start_ms + SCHEDULE_PERIOD_MS if then is None else sent_at + then * 1000,
            }
            entries.append(
                {
                    "Id": str(i),
                    "MessageBody": json.dumps(body, separators=(",", ":")),
                    "DelaySeconds": d,
                }
            )
        try:
            reply = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        except Exception:
            logger.exception("supervisor ticks not sent", extra={"ticks": len(entries)})
            continue
        failed = reply.get("Failed") or []
        if failed:
            logger.error("supervisor ticks not sent", extra={"failed": failed})
        sent += len(entries) - len(failed)
    return sent


def is_wake(record: Any) -> bool:
    """A wake tick (`shepherd.wiring.WAKE_TICK`): a writer found the supervisor asleep."""
    try:
        body = json.loads(record.get("body", "{}"))
    except (ValueError, TypeError, AttributeError):
        return False
    return isinstance(body, dict) and body.get("wake") is True


def groups_of(records: list[Any], groups: int) -> list[int]:
    """The groups a batch of ticks names, each once (a tick from before groups existed, or
    one naming a group this deployment no longer has, sweeps group 0)."""
    return list(planned_at(records, groups))


def planned_at(records: list[Any], groups: int) -> dict[int, int | None]:
    """The groups a batch of ticks names, each once, with the moment its next sweep is
    planned for (`next`, or `at` plus the interval: the tick's `at` + `interval_ms` is left to
    `horizon`, here the latest of the group's ticks; None: a tick from before ticks carried
    either)."""
    out: dict[int, int | None] = {}
    for record in records:
        try:
            body = json.loads(record.get("body", "{}"))
            group = int(body.get("group", 0))
            nxt = body.get("next")
            nxt = int(nxt) if nxt is not None else None
        except (ValueError, TypeError, AttributeError):
            group, nxt = 0, None
        group = group if 0 <= group < groups else 0
        if group not in out:
            out[group] = nxt
        elif nxt is not None:
            out[group] = max(nxt, out[group] or nxt)
    return out


def horizon(following: list[int | None], interval: float, now_ms: int) -> int:
    """How far a sweep looks ahead: to just before the next sweep of its groups (the earliest
    of `following`, their ticks' `next`; a tick without one: an interval from now)."""
    interval_ms = round(interval * 1000)
    nexts = [n if n is not None else now_ms + interval_ms for n in following]
    return look_ahead_until(min(nexts, default=now_ms + interval_ms), interval_ms)


def record(report: SweepReport) -> None:
    # A sweep with nothing due takes a few index queries: its numbers are only emitted when it
    # had work (and a duplicate tick that found its group's lease held did nothing), so an
    # idle stack pays for no custom metric (whether the supervisor runs at all is alarmed on
    # Lambda's own invocation and error metrics of its function, which are free).
    if (report.due or report.actions) and report.lease != "busy":
        metrics.add_metric(
            name=Metric.SWEEP_DURATION, unit=MetricUnit.Milliseconds, value=report.duration_ms
        )
        metrics.add_metric(name=Metric.SWEEP_DUE, unit=MetricUnit.Count, value=report.due)
        metrics.add_metric(
            name=Metric.SWEEP_TRUNCATED, unit=MetricUnit.Count, value=int(report.truncated)
        )
        metrics.add_metric(
            name=Metric.OLDEST_DUE_AGE,
            unit=MetricUnit.Milliseconds,
            value=report.oldest_due_age_ms,
        )
        metrics.add_metric(
            name=Metric.SWEEP_UNAVAILABLE, unit=MetricUnit.Count, value=report.unavailable
        )
    recovered = report.actions.get("Redispatch", 0)
    if recovered:
        metrics.add_metric(
            name=Metric.LOST_MESSAGES_RECOVERED, unit=MetricUnit.Count, value=recovered
        )
    for lag in report.lags_ms:
        metrics.add_metric(name=Metric.DETECTION_LAG, unit=MetricUnit.Milliseconds, value=lag)
    if report.failed_looks:
        metrics.add_metric(
            name=Metric.LOOK_FAILURES, unit=MetricUnit.Count, value=report.failed_looks
        )
    if report.parked:
        metrics.add_metric(name=Metric.WORKFLOWS_PARKED, unit=MetricUnit.Count, value=report.parked)


def hold_paused_pools() -> None:
    """Once a minute (the scheduled run): a pool the table records as paused has its event
    source mapping disabled again. A deploy that updates or replaces a mapping enables it
    (CloudFormation knows nothing of a pause), which would resume the pool silently; this
    re-applies the pause within a minute. Idempotent; the paused pools only."""
    shepherd = engine()
    control = shepherd.pool_control
    if control is None:  # the local stack: its workers read the pool state themselves
        return
    for name, state in pool_states(shepherd.ports.store).items():
        if not state.paused:
            continue
        try:
            control.set_enabled(name, False)
        except DeliveryError:
            logger.exception("paused pool not held", extra={"pool": name})


def circuit_metrics() -> None:
    """Once a minute (the scheduled run): `PoolCircuitOpen` for every pool with a breaker, 1
    while its circuit is open or half-open, with the pool as a dimension (one query)."""
    shepherd = engine()
    guarded = sorted(p for p, x in shepherd.settings.pool_policies.items() if x.circuit_breaker)
    if not guarded:
        return
    states = pool_states(shepherd.ports.store)
    for pool in guarded:
        state = states.get(pool)
        with single_metric(
            name=Metric.POOL_CIRCUIT_OPEN,
            unit=MetricUnit.Count,
            value=0 if state is None or state.circuit == "closed" else 1,
            namespace=NAMESPACE,
            default_dimensions={"service": service},
        ) as metric:
            metric.add_dimension(name="Pool", value=pool)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@count_throttles
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = engine().settings
    interval = settings.sweep_interval_seconds
    window = settings.sweep_window_seconds
    ticks_url = settings.sweep_ticks_url
    records = event.get("Records")
    woken = isinstance(records, list) and any(map(is_wake, records))
    if isinstance(records, list) and not woken:  # ticks: one sweep per group they name
        planned = planned_at(records, settings.sweep_groups)
        return _sweep_groups(interval, planned, context, {"ticks": len(records)})
    # The scheduled run, or a wake (a writer found the supervisor asleep): the minute starts.
    start = _now()  # the minute's first sweep: its ticks are planned from here
    hold_paused_pools()
    try:
        circuit_metrics()
    except Exception:  # a metric never stops the sweeps
        logger.warning("circuit metrics not emitted", exc_info=True)
    if ticks_url:
        shepherd = engine()
        wakeup = shepherd.scheduler.wakeup
        if wakeup is not None and not _ticks(wakeup, shepherd.supervisor.shard_span()):
            # Asleep: the index is empty, so nothing is due and no tick is sent; a start
            # wakes it (shepherd.engine.wakeup), and so does this probe next minute.
            return {"sweeps": 0, "due": 0, "actions": 0, "asleep": True, "ticks_sent": 0}
        delays = tick_delays(interval, window)
        minute = ticks(settings.sweep_groups, delays)
        then = following(delays)[0]  # group 0's next sweep: its first tick, or the next run
        nxt = start + (SCHEDULE_PERIOD_MS if then is None else then * 1000)
        sqs = _sqs()  # made here: boto3 makes clients on one thread at a time
        with ThreadPoolExecutor(max_workers=1) as sender:
            # The minute's ticks go out while group 0 is swept: with many groups they take many
            # requests (154 at 128 groups), which would hold the minute's first sweep back.
            sending = sender.submit(send_ticks, ticks_url, minute, _now, start, sqs)
            swept = _sweep_groups(interval, {0: nxt}, context, {})
            return {**swept, "ticks_sent": sending.result()}
    return _sweep_window(interval, window, context)


def _ticks(wakeup: Wakeup, shards: int) -> bool:
    """Whether this minute ticks: the supervisor's rest state, probed and decided. A state
    or an index that cannot be read ticks: sleeping is an economy, sweeping is the duty."""
    try:
        return wakeup.scheduled(shards).ticks
    except Exception:
        logger.warning("supervisor state not decided; this minute ticks", exc_info=True)
        return True


def _now() -> int:
    return int(engine().supervisor.scheduler.ports.clock.now_ms())


def _budget(context: LambdaContext) -> int:
    """The clock reading after which a sweep takes up no more looks: the invocation's end,
    less a margin for the looks in flight and the metrics."""
    now: int = engine().supervisor.scheduler.ports.clock.now_ms()
    return now + int(context.get_remaining_time_in_millis()) - SAFETY_MARGIN_MS


def _sweep_groups(
    interval: float,
    planned: dict[int, int | None],
    context: LambdaContext,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """Sweep each group once under its lease (this invocation's request id holds it); the
    groups together, looking ahead until just before the next sweep (`planned`: when each
    group's next sweep is planned). The CDK app delivers one tick per invocation when there
    are several groups, so this is one group but for a backlog of ticks."""
    supervisor = engine().supervisor
    supervisor.sweep_interval_ms = round(interval * 1000)  # the next sweep comes this soon
    owner = str(getattr(context, "aws_request_id", "") or "supervisor")
    until = horizon(list(planned.values()), interval, _now()) if _looks_ahead() else None
    reports = supervisor.sweep_groups(
        list(planned), owner=owner, deadline_ms=_budget(context), until_ms=until
    )
    due, acted, busy = 0, 0, 0
    for report in reports:
        group = report.group
        record(report)
        due += report.due
        acted += sum(report.actions.values())
        busy += report.lease == "busy"
        if report.actions or report.truncated:
            logger.info(
                "sweep acted",
                extra={
                    "group": group,
                    "actions": dict(report.actions),
                    "due": report.due,
                    "truncated": report.truncated,
                    "oldest_due_age_ms": report.oldest_due_age_ms,
                    "looked_ahead": report.looked_ahead,
                    "waited_ms": report.waited_ms,
                },
            )
    return {"sweeps": len(reports), "due": due, "actions": acted, "busy": busy, **extra}


def _looks_ahead() -> bool:
    return bool(engine().settings.sweep_look_ahead)


def _sweep_window(interval: float, window: float, context: LambdaContext) -> dict[str, Any]:
    # Timed on the engine's clock, never the wall's: on Lambda they are one, and a harness on a
    # simulated clock gets the same horizons on every run (a wall-clock read here made the
    # bench's pinned request counts vary with the machine's load).
    clock = engine().supervisor.scheduler.ports.clock
    started = _now()
    interval_ms = round(interval * 1000)
    # Sweeps start at 0, interval, 2 x interval, ... up to `window` seconds in (inclusive).
    planned = 1 + int(window / interval + 1e-9)
    sweeps, acted, due = 0, 0, 0
    supervisor = engine().supervisor
    supervisor.sweep_interval_ms = interval_ms  # the next sweep comes this soon
    while True:
        # The next sweep: this window's next one, or (after its last) the next invocation's,
        # taken as an interval away.
        until = None
        if _looks_ahead():
            until = look_ahead_until(max(_now(), started + (sweeps + 1) * interval_ms), interval_ms)
        report = supervisor.sweep(deadline_ms=_budget(context), until_ms=until)
        record(report)
        sweeps += 1
        due += report.due
        acted += sum(report.actions.values())
        if report.actions:
            logger.info("sweep acted", extra={"actions": dict(report.actions), "due": report.due})
        if (
            sweeps >= planned
            or context.get_remaining_time_in_millis() < SAFETY_MARGIN_MS + interval * 1000
        ):
            break
        clock.sleep(max(0, started + sweeps * interval_ms - _now()) / 1000)
    return {"sweeps": sweeps, "due": due, "actions": acted}
