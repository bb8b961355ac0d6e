"""Supervisor: invoked every minute, it sweeps every few seconds for the whole minute.

EventBridge schedules fire at most once a minute; sweeping every `interval` seconds for the
whole of that minute (0, 5, ..., 55 s, then the next invocation at 60 s) bounds detection lag
by the sweep interval instead of the schedule. How the sweeps after the first are timed:

* **Ticks** (deployed, `SHEPHERD_SWEEP_TICKS_URL` set): the scheduled invocation sends one
  delayed message per later sweep of its minute to the supervisor's tick queue (SQS delays of
  5, 10, ..., 55 s, two batch requests), sweeps once and returns; each tick invokes the
  function through its event source mapping and sweeps once. Nothing sleeps: an idle minute
  costs 12 short invocations instead of one that lasts the minute (docs/benchmarks.md, fixed
  monthly cost). A lost or failed tick costs one sweep; the next one is 5 s later.
* **Sleeping** (unset: the local stack, tests): the invocation sweeps, sleeps until the next
  sweep, and so on up to the window.

Two sweeps may overlap; that is safe, every action is a conditional write. A run that cannot
start within a minute is dropped rather than queued (see infra/shepherd_infra/supervisor.py),
so overlaps never pile up.
"""

from __future__ import annotations

import math
import time
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd import wiring
from shepherd.engine.pools import pool_states
from shepherd.engine.supervisor import SweepReport
from shepherd.errors import DeliveryError
from shepherd.observability import Metric

from shepherd_handlers.runtime import engine, logger, metrics, tracer

SAFETY_MARGIN_MS = 10_000  # stop sweeping this long before the Lambda timeout
SQS_MAX_DELAY_S = 900
SQS_BATCH = 10


def tick_delays(interval: float, window: float) -> list[int]:
    """The SQS delays (whole seconds) of a minute's sweeps after the first: interval, 2 x
    interval, ... up to `window`. Rounded up, so a tick never sweeps before its moment."""
    planned = 1 + int(window / interval + 1e-9)
    return [min(SQS_MAX_DELAY_S, math.ceil(k * interval - 1e-9)) for k in range(1, planned)]


def send_ticks(queue_url: str, delays: list[int]) -> int:
    """Send the minute's ticks (at most 10 per request); returns how many were accepted.

    A tick that could not be sent costs its sweep only: logged, never raised, so the
    scheduled invocation still sweeps.
    """
    sqs = wiring.client("sqs")
    sent = 0
    for first in range(0, len(delays), SQS_BATCH):
        entries = [
            {"Id": str(i), "MessageBody": f'{{"tick":{d}}}', "DelaySeconds": d}
            for i, d in enumerate(delays[first : first + SQS_BATCH], start=first)
        ]
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


def record(report: SweepReport) -> None:
    # A sweep with nothing due takes a few index queries: its duration is only emitted when it
    # had work, so an idle stack pays for one custom metric (SupervisorRan), not two.
    if report.due or report.actions:
        metrics.add_metric(
            name=Metric.SWEEP_DURATION, unit=MetricUnit.Milliseconds, value=report.duration_ms
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


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = engine().settings
    interval = settings.sweep_interval_seconds
    window = settings.sweep_window_seconds
    ticks_url = settings.sweep_ticks_url
    records = event.get("Records")
    if isinstance(records, list):  # ticks from the queue: one sweep, however many arrived
        return _sweep_once(interval, {"ticks": len(records)})
    metrics.add_metric(name=Metric.SUPERVISOR_RAN, unit=MetricUnit.Count, value=1)
    hold_paused_pools()
    if ticks_url:
        sent = send_ticks(ticks_url, tick_delays(interval, window))
        return _sweep_once(interval, {"ticks_sent": sent})
    return _sweep_window(interval, window, context)


def _sweep_once(interval: float, extra: dict[str, Any]) -> dict[str, Any]:
    supervisor = engine().supervisor
    supervisor.sweep_interval_ms = round(interval * 1000)  # the next sweep comes this soon
    report = supervisor.sweep()
    record(report)
    acted = sum(report.actions.values())
    if report.actions:
        logger.info("sweep acted", extra={"actions": dict(report.actions), "due": report.due})
    return {"sweeps": 1, "due": report.due, "actions": acted, **extra}


def _sweep_window(interval: float, window: float, context: LambdaContext) -> dict[str, Any]:
    started = time.monotonic()
    # Sweeps start at 0, interval, 2 x interval, ... up to `window` seconds in (inclusive).
    planned = 1 + int(window / interval + 1e-9)
    sweeps, acted, due = 0, 0, 0
    supervisor = engine().supervisor
    supervisor.sweep_interval_ms = round(interval * 1000)  # the next sweep comes this soon
    while True:
        report = supervisor.sweep()
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
        next_at = started + sweeps * interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    return {"sweeps": sweeps, "due": due, "actions": acted}
