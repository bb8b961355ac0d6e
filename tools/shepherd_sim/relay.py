"""The table's change stream and the event relay that consumes it, simulated.

Every write the shared store takes goes into the stream (DynamoDB Streams, NEW_AND_OLD_IMAGES,
as a stream record: `shepherd.adapters.dynamodb.record_of_change`). Each workflow's items
share a partition key, so its records land in one *lane* (a shard, or a parallelization slot
of one: the deployed mapping keeps the records of one partition key in order) and are
consumed in order. The relay is the production path: the mapping's event filters
(`shepherd.changes.STREAM_FILTERS` through `passes_filters`), then the stream function's work
for one record (`change_of_record`, then `events_of`), then a publish. What can go wrong is
seeded, from the relay's own random stream (so the engine's run is the same with or without
it):

* `relay_delay`: a poll comes late (the consumer falls behind: the iterator age grows);
* `relay_crash`: an invocation dies after publishing some (or all) of its batch, before the
  checkpoint: the batch comes again from the last checkpoint (duplicates), bisected;
* `relay_fail`: a record's publish fails (a batch item failure): the records before it are
  checkpointed, it and the rest come again; after `retries` tries it goes to the on-failure
  queue, and the on-call operator replays it (`shepherd events replay`) later.

Deliveries are recorded with the moment they went out and how (`relay` or `replay`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from shepherd.adapters.dynamodb import change_of_record, record_of_change
from shepherd.changes import STREAM_FILTERS, Change, events_of, passes_filters

RELAY_FAULTS = ("relay_delay", "relay_crash", "relay_fail")
LANES = 4  # shards x parallelization factor: 2 x 2
BATCH_SIZE = 100  # shepherd.topology.RELAY_BATCH_SIZE (not imported: keeps the model explicit)
RETRIES = 10  # infra: the mapping's retry attempts before the on-failure destination

Record = dict[str, Any]


@dataclass(frozen=True)
class Delivery:
    """One event put on the bus: when, how (`relay` or `replay`), and the event itself."""

    at: int
    detail_type: str
    detail: dict[str, Any]
    via: str = "relay"


@dataclass
class Lane:
    records: list[Record] = field(default_factory=list)
    checkpoint: int = 0  # records before it are done for good
    polling: bool = False  # a poll is scheduled (or a retry is waiting)
    tries: int = 0  # failed invocations of the batch at the checkpoint
    bisect: int = BATCH_SIZE  # the next batch's size (halved after each failed invocation)


class Host(Protocol):
    """What the relay needs from the simulation (the scheduler, the fault dice, the trace)."""

    def now(self) -> int: ...

    def schedule(self, at: int, kind: str, data: Any = None) -> None: ...

    def roll(self, kind: str) -> bool: ...

    def fault(
        self, kind: str, workflow_id: str | None, text: str, *, delay_s: float = 0
    ) -> None: ...

    def trace(self, workflow_id: str | None, text: str) -> None: ...


def lane_of(pk: str) -> int:
    """Stable across processes (never Python's salted `hash`)."""
    return int(hashlib.sha256(pk.encode()).hexdigest()[:8], 16) % LANES


def workflow_of(record: Record) -> str | None:
    pk = str(record["dynamodb"]["Keys"]["pk"].get("S", ""))
    return pk[3:] if pk.startswith("WF#") else None


class Relay:
    """The stream and its consumer. `append` takes every change as it lands; the simulation
    calls `poll(lane)` and `replay()` when the events `append` and the relay schedule come."""

    def __init__(self, host: Host, rng: random.Random, *, retries: int = RETRIES) -> None:
        self.host = host
        self.rng = rng
        self.retries = retries
        self.lanes = [Lane() for _ in range(LANES)]
        self.changes: list[Change] = []
        self.deliveries: list[Delivery] = []
        self.failed: list[Record] = []  # the on-failure queue, not yet replayed
        self.replays_pending = 0
        self.invocations = 0
        self.filtered = 0
        self.lag_ms: list[int] = []  # write -> first publish, per announcing record
        self._written_at: dict[str, int] = {}
        self._published: set[str] = set()
        self.observe: Callable[[Delivery], None] | None = None

    # ------------------------------------------------------------------------ the stream

    def append(self, change: Change) -> None:
        self.changes.append(change)
        record = record_of_change(change)
        self._written_at[change.sequence] = self.host.now()
        lane = self.lanes[lane_of(str((change.new or change.old or {}).get("pk", "")))]
        lane.records.append(record)
        if not lane.polling:
            self._poll_later(lane, self.rng.uniform(0.05, 1.2))

    def _poll_later(self, lane: Lane, seconds: float) -> None:
        lane.polling = True
        if self.host.roll("relay_delay"):
            extra = self.rng.uniform(2, 30)
            self.host.fault("relay_delay", None, f"relay falls behind {extra:.1f}s")
            seconds += extra
        self.host.schedule(self.host.now() + max(1, round(seconds * 1000)), "relay", lane)

    @property
    def idle(self) -> bool:
        """Everything written is published (or queued for a replay that is scheduled)."""
        return all(not lane.polling for lane in self.lanes) and self.replays_pending == 0

    # ----------------------------------------------------------------------- the consumer

    def _publish(self, record: Record, via: str) -> None:
        """The stream function's work for one record: the change -> its events -> the bus."""
        events = events_of(change_of_record(record))
        seq = str(record["dynamodb"]["SequenceNumber"])
        if events and seq not in self._published:
            self._published.add(seq)
            self.lag_ms.append(self.host.now() - self._written_at[seq])
        for event in events:
            delivery = Delivery(self.host.now(), event.detail_type, dict(event.detail), via)
            self.deliveries.append(delivery)
            if self.observe is not None:
                self.observe(delivery)

    def poll(self, lane: Lane) -> None:
        """One invocation of the stream function for the batch at the lane's checkpoint."""
        batch = lane.records[lane.checkpoint : lane.checkpoint + lane.bisect]
        if not batch:
            lane.polling = False
            return
        # The mapping's filters drop records before the invocation (the checkpoint moves on).
        passing = [r for r in batch if passes_filters(r, STREAM_FILTERS)]
        self.filtered += len(batch) - len(passing)
        if not passing:
            self._done(lane, len(batch))
            return
        self.invocations += 1
        if self.host.roll("relay_crash"):
            published = self.rng.randint(0, len(passing))
            for record in passing[:published]:
                self._publish(record, "relay")
            wf = workflow_of(passing[0])
            self.host.fault(
                "relay_crash",
                wf,
                f"relay invocation dies after publishing {published} of {len(passing)} "
                "record(s), before its checkpoint",
            )
            self._failed(lane, batch, len(batch))
            return
        for record in passing:
            if self.host.roll("relay_fail"):
                seq = record["dynamodb"]["SequenceNumber"]
                self.host.fault(
                    "relay_fail", workflow_of(record), f"relay cannot publish record {seq}"
                )
                # A batch item failure: what came before it is checkpointed, it comes again.
                before = next(n for n, r in enumerate(batch) if r is record)
                self._done(lane, before, more=True)
                self._failed(lane, [record], 1)
                return
            self._publish(record, "relay")
        self._done(lane, len(batch))

    def _done(self, lane: Lane, count: int, *, more: bool = False) -> None:
        """`count` records at the checkpoint are done: move past them and poll again."""
        if count:
            lane.checkpoint += count
            lane.tries = 0
            lane.bisect = BATCH_SIZE
        if more:
            return
        if lane.checkpoint < len(lane.records):
            self._poll_later(lane, self.rng.uniform(0.01, 0.2))
        else:
            lane.polling = False

    def _failed(self, lane: Lane, batch: list[Record], size: int) -> None:
        """The invocation of `batch` (at the checkpoint) failed: retry it, bisected, or after
        `retries` send its records to the on-failure queue and move on."""
        lane.tries += 1
        if lane.tries > self.retries:
            for record in batch:
                self.host.trace(
                    workflow_of(record),
                    f"relay   record {record['dynamodb']['SequenceNumber']} to the on-failure "
                    "queue",
                )
            self.failed += batch
            self.replays_pending += 1
            # The on-failure queue alarms; the on-call operator runs `shepherd events replay`.
            self.host.schedule(
                self.host.now() + round(self.rng.uniform(10, 120) * 1000), "relay_replay"
            )
            self._done(lane, len(batch))
            return
        lane.bisect = max(1, size // 2)
        self._poll_later(lane, self.rng.uniform(0.1, 2.0))

    def replay(self) -> None:
        """`shepherd events replay`: every record the on-failure queue names, published again
        from the stream through the same path."""
        self.replays_pending -= 1
        records, self.failed = self.failed, []
        for record in records:
            self.host.trace(
                workflow_of(record),
                f"relay   record {record['dynamodb']['SequenceNumber']} replayed",
            )
            self._publish(record, "replay")
