"""DynamoDB Streams read the way Lambda's event source mapping reads them, for the local stack
and the tests (moto keeps a table's stream but runs no consumer).

`StreamReader` follows every shard of a stream in order and remembers where it is.
`StreamMapping` delivers what it reads to a handler in batches, as the mapping configured in
`infra/` does: the same event filters (`shepherd.changes.STREAM_FILTERS`), partial batch
responses, a failed record and everything after it retried (in
order), a record that keeps failing bisected out and handed to the on-failure destination
after `max_retries`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shepherd.changes import STREAM_FILTERS, passes_filters
from shepherd.topology import RELAY_BATCH_SIZE

from shepherd_cli.lambda_kit import stream_event

logger = logging.getLogger("shepherd.streams")

Record = dict[str, Any]
Handler = Callable[[dict[str, Any]], Any]


def stream_arn(dynamodb: Any, table: str) -> str:
    arn = dynamodb.describe_table(TableName=table)["Table"].get("LatestStreamArn")
    if not arn:
        raise RuntimeError(f"table {table} has no stream: create it with a StreamSpecification")
    return str(arn)


class StreamReader:
    """Every record of a stream, each once, in order per shard."""

    def __init__(
        self,
        streams: Any,
        arn: str,
        *,
        start: str = "TRIM_HORIZON",
        after: dict[str, str] | None = None,
    ) -> None:
        self.streams = streams
        self.arn = arn
        self.start = start
        self._iterators: dict[str, str | None] = {}
        # Per shard, the last sequence number read: a reader made with it (`after`) goes on
        # from there, as an event source mapping goes on from its checkpoint.
        self.positions: dict[str, str] = dict(after or {})

    def _discover(self) -> None:
        shards = self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                where: dict[str, str] = {"ShardIteratorType": self.start}
                if shard_id in self.positions:
                    where = {
                        "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                        "SequenceNumber": self.positions[shard_id],
                    }
                self._iterators[shard_id] = self.streams.get_shard_iterator(
                    StreamArn=self.arn, ShardId=shard_id, **where
                )["ShardIterator"]

    def read(self, limit: int = 1000) -> list[Record]:
        """The records written since the last read (at most `limit` per shard)."""
        self._discover()
        out: list[Record] = []
        for shard_id, iterator in list(self._iterators.items()):
            if iterator is None:
                continue  # a closed shard, read to its end
            page = self.streams.get_records(ShardIterator=iterator, Limit=limit)
            self._iterators[shard_id] = page.get("NextShardIterator")
            for record in page["Records"]:
                record["eventSourceARN"] = self.arn
                out.append(record)
                self.positions[shard_id] = record["dynamodb"]["SequenceNumber"]
        return out


@dataclass
class StreamMapping:
    """A stream -> handler mapping with the retry rules of the deployed one."""

    reader: StreamReader
    handler: Handler
    batch_size: int = RELAY_BATCH_SIZE
    max_retries: int = 3
    filters: tuple[dict[str, Any], ...] = STREAM_FILTERS
    on_failure: Callable[[Record], None] | None = None
    pending: list[Record] = field(default_factory=list)
    _tries: dict[str, int] = field(default_factory=dict)
    delivered: int = 0
    failed: list[Record] = field(default_factory=list)

    def poll(self) -> int:
        """Read what is new and deliver it; how many records were delivered for good."""
        records = self.reader.read()
        self.pending += [r for r in records if passes_filters(r, self.filters)]
        done = 0
        while self.pending:
            batch = self.pending[: self.batch_size]
            reply = self.handler(stream_event(batch)) or {}
            failures = [f["itemIdentifier"] for f in reply.get("batchItemFailures", [])]
            if not failures:
                self.pending = self.pending[len(batch) :]
                done += len(batch)
                continue
            # Lambda's checkpoint: everything before the first failure is done; the failed
            # record and the ones after it come again, in order.
            numbers = [r["dynamodb"]["SequenceNumber"] for r in batch]
            first = min(numbers.index(f) for f in failures if f in numbers)
            done += first
            self.pending = self.pending[first:]
            head = self.pending[0]
            key = head["dynamodb"]["SequenceNumber"]
            self._tries[key] = self._tries.get(key, 0) + 1
            if self._tries[key] <= self.max_retries:
                break  # retried on the next poll
            # Retries exhausted: the record goes to the on-failure destination, the rest go on.
            logger.error("stream record sent to the on-failure destination", extra={"seq": key})
            self.failed.append(head)
            if self.on_failure is not None:
                self.on_failure(head)
            self.pending = self.pending[1:]
            self._tries.pop(key, None)
        self.delivered += done
        return done


def replay(streams: Any, batch_info: dict[str, Any], publish: Callable[[Record], int]) -> int:
    """Read back, from the stream, the records an on-failure message names (its
    `DDBStreamBatchInfo`: stream, shard, first and last sequence numbers) and hand each to
    `publish`; how many records were replayed. The stream keeps records 24 hours."""
    first, last = int(batch_info["startSequenceNumber"]), int(batch_info["endSequenceNumber"])
    iterator = streams.get_shard_iterator(
        StreamArn=batch_info["streamArn"],
        ShardId=batch_info["shardId"],
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=batch_info["startSequenceNumber"],
    )["ShardIterator"]
    replayed = 0
    while iterator:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        records = page["Records"]
        if not records:
            break
        for record in records:
            number = int(record["dynamodb"]["SequenceNumber"])
            if number > last:
                return replayed
            if number >= first:
                record["eventSourceARN"] = batch_info["streamArn"]
                publish(record)
                replayed += 1
        iterator = page.get("NextShardIterator")
    return replayed


def replay_failures(
    sqs: Any, streams: Any, queue_url: str, publish: Callable[[Record], int], *, limit: int = 1000
) -> tuple[int, int]:
    """Drain the relay's on-failure queue: replay each message's records, then delete it (a
    message whose replay raises stays for the next try). (messages, records) replayed."""
    messages = records = 0
    while messages < limit:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        batch = got.get("Messages", [])
        if not batch:
            break
        for message in batch:
            info = json.loads(message["Body"])["DDBStreamBatchInfo"]
            records += replay(streams, info, publish)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            messages += 1
    return messages, records
