"""Agent pool: SQS batch -> claim, run, record, advance. One Lambda per pool.

A poison message (not a task) becomes a batch item failure, never a failed batch; after
`maxReceiveCount` it lands in the pool's DLQ. Duplicates and stale messages are acknowledged.

A record that could not be claimed goes back as a batch item failure, visible again soon
(not after the queue's visibility timeout, six times the function's): when the store is
throttled (a second later) or when the time left in this invocation cannot hold the step's
longest attempt (at once, for another invocation). Nothing was claimed: no attempt spent.
A task its pool holds (no rate-limit token) was sent back with a delay and is acknowledged.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.engine.agent import Outcome
from shepherd.errors import AgentNotFound, DeliveryError, NotEnoughTime, StoreUnavailable
from shepherd.model import TaskMessage
from shepherd.observability import Metric

from shepherd_handlers.runtime import count_throttles, engine, logger, metrics, tracer


def _sqs() -> Any:
    """The engine's SQS client, made by the wiring (imported with the engine, on first use:
    the handler's cold import stays its own, issue 40.6)."""
    from shepherd import wiring  # noqa: PLC0415

    return wiring.client("sqs")


# A batch whose every record failed is still reported item by item, never as a failed
# invocation: Lambda then redrives only those records and never backs off the whole pool.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

_OUTCOME_METRICS = {
    Outcome.DROPPED: Metric.DUPLICATES_DROPPED,
    Outcome.FENCED: Metric.FENCED_WRITES,
    Outcome.HELD: Metric.TASKS_HELD,
}
# Outcomes that ran no attempt.
_NO_ATTEMPT = frozenset({Outcome.DROPPED, Outcome.HELD})


THROTTLED_RETRY_SECONDS = 1


@tracer.capture_method
def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> str:
    task = TaskMessage.from_body(record.body)  # ValueError: poison -> batch item failure
    logger.append_keys(
        workflow_id=task.workflow_id, step=task.step, attempt=task.attempt, kind=task.kind
    )
    time_left = None if lambda_context is None else lambda_context.get_remaining_time_in_millis
    try:
        result = engine().agent_runtime.handle(task, time_left_ms=time_left)
    except NotEnoughTime:
        _back_soon(record, 0)
        metrics.add_metric(name=Metric.RECORDS_DEFERRED, unit=MetricUnit.Count, value=1)
        raise
    except (StoreUnavailable, DeliveryError):  # a held task whose re-send failed, too
        _back_soon(record, THROTTLED_RETRY_SECONDS)
        raise
    if result.outcome not in _NO_ATTEMPT:
        metrics.add_metric(name=Metric.STEP_ATTEMPTS, unit=MetricUnit.Count, value=1)
    extra = _OUTCOME_METRICS.get(result.outcome)
    if extra is not None:
        metrics.add_metric(name=extra, unit=MetricUnit.Count, value=1)
    if result.error_type == AgentNotFound.__name__:  # a deploy that dropped an agent
        metrics.add_metric(name=Metric.AGENTS_NOT_FOUND, unit=MetricUnit.Count, value=1)
    logger.info("task handled", extra={"outcome": result.outcome.value, "reason": result.reason})
    logger.remove_keys(["workflow_id", "step", "attempt", "kind"])
    return result.outcome.value


def _back_soon(record: SQSRecord, seconds: int) -> None:
    """Make an unclaimed record visible again in `seconds` (best effort: otherwise it comes
    back after the queue's visibility timeout, as any batch item failure does)."""
    name = record.event_source_arn.rsplit(":", 1)[-1]
    urls = [u for u in engine().settings.queue_urls.values() if u.rsplit("/", 1)[-1] == name]
    if not urls:
        return
    try:
        _sqs().change_message_visibility(
            QueueUrl=urls[0], ReceiptHandle=record.receipt_handle, VisibilityTimeout=seconds
        )
    except Exception:
        logger.warning("record left for its visibility timeout", exc_info=True)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@count_throttles
def handler(event: dict[str, Any], context: LambdaContext) -> Any:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
