"""The table's change stream -> lifecycle events on the bus, at least once.

DynamoDB Streams -> this function (Lambda event source mapping: partial batch responses, a
failing batch bisected, a record that cannot be published sent to the on-failure destination
after its retries). Each change is turned into the events it announces by the pure
`shepherd.changes.events_of`; a record whose events cannot be published is reported as a
batch item failure, so Lambda retries from it: nothing announced is lost, and a subscriber
drops the duplicates a retry may bring by `detail.event_id`.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.adapters.dynamodb import change_of_record
from shepherd.changes import Change, events_of
from shepherd.engine import history

from shepherd_handlers.runtime import count_events, count_throttles, engine, logger, metrics, tracer

processor = BatchProcessor(
    event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
)


def change_of(record: DynamoDBRecord) -> Change:
    return change_of_record(record.raw_event)


def publish_change(change: Change) -> int:
    """Publish the events one change announces (raises DeliveryError if they cannot be):
    the relay's per-record work, and what `shepherd events replay` does for a record."""
    events = events_of(change)
    if events:
        engine().publisher.publish(events)  # DeliveryError: a batch item failure, retried
        # The workflow's history (GET /workflows/{id}/events): each event as published, one
        # idempotent put; a failure is a batch item failure too, so it is retried.
        ports, config = engine().ports, engine().scheduler.config
        history.record(
            ports.store,
            events,
            ports.clock.now_ms() // 1000 + config.retention_seconds,
            history.change_ms(change.new),
        )
        count_events(events)
        logger.info(
            "events published",
            extra={
                "workflow_id": events[0].detail.get("workflow_id"),
                "events": [e.detail_type for e in events],
            },
        )
    return len(events)


@tracer.capture_method
def record_handler(record: DynamoDBRecord) -> int:
    return publish_change(change_of(record))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@count_throttles
def handler(event: dict[str, Any], context: LambdaContext) -> Any:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
