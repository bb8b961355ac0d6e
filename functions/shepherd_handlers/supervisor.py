"""Supervisor: invoked every minute, it sweeps several times within one invocation.

EventBridge schedules fire at most once a minute; sweeping every few seconds for the whole of
that minute (0, 5, ..., 55 s, then the next invocation at 60 s) bounds detection lag by the
sweep interval instead of the schedule. Two invocations may overlap for a few seconds (the
timeout is a little longer than the period); that is safe, every action is a conditional write.
A run that cannot start within a minute is dropped rather than queued (see
infra/shepherd_infra/supervisor.py), so overlaps never pile up.
"""

from __future__ import annotations

import os
import time
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.engine.supervisor import SweepReport
from shepherd.observability import ENV_SWEEP_INTERVAL, ENV_SWEEP_WINDOW, Metric

from shepherd_handlers.runtime import engine, logger, metrics, tracer

SAFETY_MARGIN_MS = 10_000  # stop sweeping this long before the Lambda timeout


def record(report: SweepReport) -> None:
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


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    metrics.add_metric(name=Metric.SUPERVISOR_RAN, unit=MetricUnit.Count, value=1)
    interval = float(os.environ.get(ENV_SWEEP_INTERVAL, "5"))
    window = float(os.environ.get(ENV_SWEEP_WINDOW, "0"))
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
