"""Agent pool: SQS batch -> claim, run, record, advance. One Lambda per pool.

A poison message (not a task) becomes a batch item failure, never a failed batch; after
`maxReceiveCount` it lands in the pool's DLQ. Duplicates and stale messages are acknowledged.
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
from shepherd.errors import AgentNotFound
from shepherd.model import TaskMessage
from shepherd.observability import Metric

from shepherd_handlers.runtime import engine, logger, metrics, tracer

# A batch whose every record failed is still reported item by item, never as a failed
# invocation: Lambda then redrives only those records and never backs off the whole pool.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

_OUTCOME_METRICS = {
    Outcome.DROPPED: Metric.DUPLICATES_DROPPED,
    Outcome.FENCED: Metric.FENCED_WRITES,
}


@tracer.capture_method
def record_handler(record: SQSRecord) -> str:
    task = TaskMessage.from_body(record.body)  # ValueError: poison -> batch item failure
    logger.append_keys(
        workflow_id=task.workflow_id, step=task.step, attempt=task.attempt, kind=task.kind
    )
    result = engine().agent_runtime.handle(task)
    if result.outcome is not Outcome.DROPPED:
        metrics.add_metric(name=Metric.STEP_ATTEMPTS, unit=MetricUnit.Count, value=1)
    extra = _OUTCOME_METRICS.get(result.outcome)
    if extra is not None:
        metrics.add_metric(name=extra, unit=MetricUnit.Count, value=1)
    if result.error_type == AgentNotFound.__name__:  # a deploy that dropped an agent
        metrics.add_metric(name=Metric.AGENTS_NOT_FOUND, unit=MetricUnit.Count, value=1)
    logger.info("task handled", extra={"outcome": result.outcome.value, "reason": result.reason})
    logger.remove_keys(["workflow_id", "step", "attempt", "kind"])
    return result.outcome.value


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> Any:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
