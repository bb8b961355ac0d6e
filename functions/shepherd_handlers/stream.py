"""The table's change stream -> lifecycle events on the bus, at least once.

DynamoDB Streams -> this function (Lambda event source mapping: partial batch responses, a
failing batch bisected, a record that cannot be published sent to the on-failure destination
after its retries). Each change is turned into the events it announces by the pure
`shepherd.changes.events_of`; a record whose events cannot be published is reported as a
batch item failure, so Lambda retries from it: nothing announced is lost, and a subscriber
drops the duplicates a retry may bring by `detail.event_id`.

Events go out in `PutEvents` calls of up to 10 entries (EventBridge's most), packed across
consecutive records: a batch of 100 records announcing one event each is 10 calls, not 100.
A call that fails is tried again record by record, so only a record whose own events cannot be
published is reported (and what its neighbours announced is not held back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.adapters.dynamodb import change_of_record
from shepherd.adapters.eventbridge import PUT_EVENTS_BATCH
from shepherd.changes import Change, events_of
from shepherd.engine import history
from shepherd.model import DomainEvent

from shepherd_handlers.runtime import count_events, count_throttles, engine, logger, metrics, tracer

Announced = tuple[str, list[DomainEvent], Change]  # a record's sequence, events, change


def _publish(events: Sequence[DomainEvent]) -> None:
    engine().publisher.publish(events)  # DeliveryError: the caller decides what failed
    count_events(events)


def _chunks(announced: list[Announced]) -> list[list[Announced]]:
    """Consecutive records whose events fit in one PutEvents call (a record announcing more
    than 10 goes alone; the publisher splits it)."""
    chunks: list[list[Announced]] = []
    size = PUT_EVENTS_BATCH
    for record in announced:
        if not chunks or size + len(record[1]) > PUT_EVENTS_BATCH:
            chunks.append([])
            size = 0
        chunks[-1].append(record)
        size += len(record[1])
    return chunks


def _keep(change: Change, events: Sequence[DomainEvent]) -> None:
    """The workflow's history (GET /workflows/{id}/events): each event as published, one
    idempotent put; a failure fails the record, so it is retried."""
    ports, config = engine().ports, engine().scheduler.config
    history.record(
        ports.store,
        events,
        ports.clock.now_ms() // 1000 + config.retention_seconds,
        history.change_ms(change.new),
    )


def publish_records(records: Sequence[dict[str, Any]]) -> list[str]:
    """Publish what each stream record announces and keep it in its workflow's history; the
    sequence numbers of the records that could not be (or could not be read)."""
    failed: list[str] = []
    announced: list[Announced] = []
    for record in records:
        sequence = str(record["dynamodb"]["SequenceNumber"])
        try:
            change = change_of_record(record)
            events = events_of(change)
        except Exception:  # a record we cannot read: reported, retried, then its DLQ
            logger.exception("stream record unreadable", extra={"sequence": sequence})
            failed.append(sequence)
            continue
        if events:
            announced.append((sequence, events, change))
    published: list[Announced] = []
    for chunk in _chunks(announced):
        try:
            _publish([e for _, events, _ in chunk for e in events])
            published.extend(chunk)
            continue
        except Exception as exc:
            if len(chunk) == 1:
                logger.warning("events not published", extra={"error": str(exc)})
                failed.append(chunk[0][0])
                continue
        for one in chunk:  # find the records that cannot go out
            try:
                _publish(one[1])
                published.append(one)
            except Exception as exc:
                logger.warning(
                    "events not published", extra={"sequence": one[0], "error": repr(exc)}
                )
                failed.append(one[0])
    for sequence, events, change in published:
        try:
            _keep(change, events)
        except Exception as exc:
            logger.warning("history not kept", extra={"sequence": sequence, "error": repr(exc)})
            failed.append(sequence)
    logger.info("stream batch relayed", extra={"records": len(records), "failed": len(failed)})
    return failed


def publish_change(change: Change) -> int:
    """Publish the events one change announces and keep them in the workflow's history
    (raises DeliveryError if they cannot be published): what `shepherd events replay` does
    for a record."""
    events = events_of(change)
    if events:
        _publish(events)
        _keep(change, events)
    return len(events)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@count_throttles
def handler(event: dict[str, Any], context: LambdaContext) -> Any:
    failed = publish_records(event.get("Records", []))
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
