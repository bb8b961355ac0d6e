"""Test your workflows in memory: `MemoryEngine` runs your definitions and agents under a
manual clock, in milliseconds, with the real engine.

Public (`__all__`): `MemoryEngine`, `ManualClock`, and what a run gives back, a typed view of
the workflow: `Outcome` (its `WorkflowStatus`, output, steps), `StepResult` (a step's or a
compensation's `StepStatus`, decoded output, error and `Attempt`s), `Attempt` (its
`AttemptOutcome` and `StepError`: name, message and traceback). The in-memory ports below
(`MemoryStore`, `MemoryQueue`, ...) are internal: they ship with the core and pass the same
contract tests as the AWS adapters, so tests and simulations built on them cannot drift from AWS.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import json
import random
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from shepherd.changes import Change
from shepherd.clock import ManualClock, to_datetime
from shepherd.conditions import Cond, Item, Update, evaluate
from shepherd.engine.agent import AgentRegistry
from shepherd.errors import ConditionFailed, ItemTooLarge, TransactionConflict
from shepherd.keys import workflow_id_of
from shepherd.limits import DYNAMODB_ITEM_LIMIT, item_size
from shepherd.model import (
    DomainEvent,
    OutgoingTask,
    StepRecord,
    StepStatus,
    TaskMessage,
    WorkflowStatus,
)
from shepherd.ports import MAX_BATCH_GET, Backlog, DueEntry, DuePage, ListPage
from shepherd.suggest import did_you_mean
from shepherd.topology import TABLE, IndexSpec

if TYPE_CHECKING:
    from shepherd.definitions import Definition
    from shepherd.engine.agent import AgentFunction
    from shepherd.payloads import MemoryPayloadStore

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "ManualClock",
    "MemoryEngine",
    "Outcome",
    "StepError",
    "StepResult",
    "StepStatus",
    "WorkflowStatus",
]


def _fits(item: Item) -> None:
    """DynamoDB rejects a write whose resulting item exceeds 400 KB, and applies nothing."""
    size = item_size(item)
    if size > DYNAMODB_ITEM_LIMIT:
        raise ItemTooLarge(
            f"item {item.get('pk')}/{item.get('sk')} would be {size} bytes; "
            f"DynamoDB's limit is {DYNAMODB_ITEM_LIMIT}"
        )


# What an item's values are made of, besides dicts and lists: immutable, so never copied.
_ATOMIC = frozenset({str, int, float, bool, type(None), bytes, Decimal})


def _copied(value: Any) -> Any:
    """`copy.deepcopy` of an item or an item's value, several times faster on what items are
    made of (dicts, lists, scalars): every read, every write and the stream copy each item,
    which made deepcopy the largest cost of the simulator's map runs. Anything else (a tuple,
    a set, a dict subclass) is handed to deepcopy itself."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind in _ATOMIC:
        return value
    return copy.deepcopy(value)


class MemoryStore:
    """A dict-backed table with DynamoDB's conditional-write semantics and both indexes.

    Strict where moto is not: a write that would make an item exceed 400 KB fails whole
    (`ItemTooLarge`), as on DynamoDB; moto half-applies such an update (docs/architecture.md).
    """

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], Item] = {}
        # The same items by partition (pk -> sk -> item), so reading one partition does not
        # scan the whole table; items are never deleted, so the two always hold the same.
        self._parts: dict[str, dict[str, Item]] = {}
        self._lock = threading.RLock()
        self.writes = 0
        self.reads = 0
        # The table's change stream (DynamoDB Streams, NEW_AND_OLD_IMAGES): every write that
        # took effect, in order, with a sequence number that only grows.
        self.changes: list[Change] = []

    def _changed(self, old: Item | None, new: Item) -> None:
        self.changes.append(Change(_copied(old), _copied(new), f"{len(self.changes) + 1:021d}"))

    def _put(self, pk: str, sk: str, item: Item) -> None:
        self._items[(pk, sk)] = item
        self._parts.setdefault(pk, {})[sk] = item

    def create(self, items: Sequence[Item]) -> None:
        with self._lock:
            for i, item in enumerate(items):
                existing = self._items.get((item["pk"], item["sk"]))
                if existing is not None:
                    raise TransactionConflict(i, _copied(existing))
                _fits(item)
            for item in items:
                self._put(item["pk"], item["sk"], _copied(item))
                self._changed(None, item)
            self.writes += len(items)

    def put_new(self, item: Item) -> None:
        with self._lock:
            key = (item["pk"], item["sk"])
            self.writes += 1
            if key in self._items:
                raise ConditionFailed(_copied(self._items[key]))
            _fits(item)
            self._put(*key, _copied(item))
            self._changed(None, item)

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        with self._lock:
            self.writes += len(writes)
            for i, (pk, sk, _, condition) in enumerate(writes):
                current = self._items.get((pk, sk))
                if not evaluate(condition, current):
                    raise TransactionConflict(i, _copied(current))
            applied = []
            for pk, sk, update, _ in writes:
                new = update.apply(self._items.get((pk, sk)) or {"pk": pk, "sk": sk})
                _fits(new)
                applied.append(((pk, sk), new))
            for key, new in applied:
                self._changed(self._items.get(key), new)
            for (pk, sk), new in applied:
                self._put(pk, sk, new)

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        with self._lock:
            self.writes += 1
            current = self._items.get((pk, sk))
            if condition is not None and not evaluate(condition, current):
                raise ConditionFailed(_copied(current))
            new = update.apply(current or {"pk": pk, "sk": sk})
            _fits(new)
            self._changed(current, new)
            self._put(pk, sk, new)
            copied: Item = _copied(new)
            return copied

    def load(self, pk: str) -> list[Item]:
        with self._lock:
            self.reads += 1
            found = [_copied(v) for v in self._parts.get(pk, {}).values()]
        return sorted(found, key=lambda i: i["sk"])

    def get(self, pk: str, sk: str) -> Item | None:
        with self._lock:
            self.reads += 1
            item = self._items.get((pk, sk))
            return _copied(item) if item is not None else None

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        if len(keys) > MAX_BATCH_GET:
            raise ValueError(f"at most {MAX_BATCH_GET} keys in one batch read")
        with self._lock:
            self.reads += 1
            found = (self._items.get((pk, sk)) for pk, sk in dict.fromkeys(keys))
            return [_copied(item) for item in found if item is not None]

    def query_due(
        self, shard: str, until_ms: int, limit: int, cursor: dict[str, object] | None
    ) -> DuePage:
        idx = TABLE.watch_index
        with self._lock:
            rows = sorted(
                (item[idx.sort_key], item["pk"])
                for item in self._items.values()
                if item.get(idx.partition_key) == shard
                and idx.sort_key in item
                and item[idx.sort_key] <= until_ms
            )
        after = (cursor["due_at"], cursor["pk"]) if cursor else None
        if after is not None:
            rows = [r for r in rows if r > after]
        page = rows[:limit]
        next_cursor: dict[str, object] | None = None
        if len(rows) > limit:
            next_cursor = {"due_at": page[-1][0], "pk": page[-1][1]}
        entries = [DueEntry(workflow_id_of(pk), due) for due, pk in page]
        return DuePage(entries, next_cursor, len(page))

    def _range(self, index: IndexSpec, partition: str, low: str, high: str) -> list[Item]:
        """The index's entries in [low, high], projected as the index projects them (its
        keys and the table's, plus an INCLUDE index's attributes)."""
        names = ("pk", "sk", index.partition_key, index.sort_key, *index.non_key_attributes)
        with self._lock:
            return sorted(
                (
                    {name: item[name] for name in names if name in item}
                    for item in self._items.values()
                    if item.get(index.partition_key) == partition
                    and isinstance(item.get(index.sort_key), str)
                    and low <= item[index.sort_key] <= high
                ),
                key=lambda i: str(i[index.sort_key]),
            )

    def query_range(
        self,
        index: IndexSpec,
        partition: str,
        low: str,
        high: str,
        *,
        limit: int,
        newest_first: bool,
        cursor: dict[str, object] | None,
    ) -> ListPage:
        rows = self._range(index, partition, low, high)
        if newest_first:
            rows.reverse()
        if cursor:
            last = str(cursor[index.sort_key])
            rows = [
                r
                for r in rows
                if (r[index.sort_key] < last if newest_first else r[index.sort_key] > last)
            ]
        page = rows[:limit]
        next_cursor = dict(page[-1]) if len(rows) > limit else None
        return ListPage(page, next_cursor)

    def query_after(self, pk: str, after_sk: str, limit: int) -> ListPage:
        with self._lock:
            rows = sorted(
                (
                    _copied(item)
                    for item in self._parts.get(pk, {}).values()
                    if str(item["sk"]) > after_sk
                ),
                key=lambda i: str(i["sk"]),
            )
        page = rows[:limit]
        return ListPage(page, {"sk": page[-1]["sk"]} if len(rows) > limit else None)

    def count_range(self, index: IndexSpec, partition: str, low: str, high: str, cap: int) -> int:
        return min(len(self._range(index, partition, low, high)), cap)

    # Test helpers, not part of the port.
    def items(self) -> list[Item]:
        with self._lock:
            return [_copied(v) for v in self._items.values()]


@dataclass(order=True)
class _Queued:
    visible_at: int
    seq: int
    message_id: str = field(compare=False)
    body: str = field(compare=False)
    receives: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Received:
    message_id: str
    receipt: str
    body: str
    receive_count: int

    @property
    def task(self) -> TaskMessage:
        return TaskMessage.from_body(self.body)


class MemoryQueue:
    """SQS-like queues per pool under an injected clock: delays, visibility timeouts, a DLQ."""

    def __init__(self, clock: Any, *, visibility_ms: int = 30_000, max_receives: int = 5) -> None:
        self.removed: set[str] = set()  # pools with no queue (tests of a removed pool)
        self._clock = clock
        self._visibility_ms = visibility_ms
        self._max_receives = max_receives
        self._queues: dict[str, list[_Queued]] = {}
        self._inflight: dict[str, tuple[str, _Queued]] = {}
        self.dead: dict[str, list[str]] = {}
        self.sent: list[OutgoingTask] = []
        self.paused: set[str] = set()  # pools whose consumers are stopped
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def send(self, tasks: Sequence[OutgoingTask]) -> None:
        with self._lock:
            now = self._clock.now_ms()
            for task in tasks:
                self.sent.append(task)
                entry = _Queued(
                    now + task.delay_seconds * 1000,
                    next(self._seq),
                    uuid.uuid4().hex,
                    task.message.to_body(),
                )
                heapq.heappush(self._queues.setdefault(task.pool, []), entry)

    def receive(self, pool: str, max_messages: int = 10) -> list[Received]:
        with self._lock:
            now = self._clock.now_ms()
            self._expire_inflight(now)
            if pool in self.paused:  # a disabled event source mapping receives nothing
                return []
            queue = self._queues.setdefault(pool, [])
            out: list[Received] = []
            while queue and queue[0].visible_at <= now and len(out) < max_messages:
                entry = heapq.heappop(queue)
                entry.receives += 1
                if entry.receives > self._max_receives:
                    self.dead.setdefault(pool, []).append(entry.body)
                    continue
                receipt = uuid.uuid4().hex
                entry.visible_at = now + self._visibility_ms
                self._inflight[receipt] = (pool, entry)
                out.append(Received(entry.message_id, receipt, entry.body, entry.receives))
            return out

    def delete(self, receipt: str) -> None:
        with self._lock:
            self._inflight.pop(receipt, None)

    def has(self, pool: str) -> bool:
        """Every pool has a queue here, but those `removed` (a deployment that dropped one)."""
        return pool not in self.removed

    def release(self, receipt: str) -> None:
        """Make an in-flight message visible again at once (a failed batch item)."""
        with self._lock:
            found = self._inflight.pop(receipt, None)
            if found:
                pool, entry = found
                entry.visible_at = self._clock.now_ms()
                heapq.heappush(self._queues[pool], entry)

    def set_enabled(self, pool: str, enabled: bool) -> None:
        """The PoolControl port: stop or start the pool's consumers."""
        with self._lock:
            if enabled:
                self.paused.discard(pool)
            else:
                self.paused.add(pool)

    def backlog(self, pool: str) -> Backlog:
        with self._lock:
            now = self._clock.now_ms()
            queued = self._queues.get(pool, [])
            return Backlog(
                visible=sum(1 for e in queued if e.visible_at <= now),
                in_flight=sum(1 for p, _ in self._inflight.values() if p == pool),
                delayed=sum(1 for e in queued if e.visible_at > now),
            )

    def depth(self, pool: str) -> int:
        with self._lock:
            return len(self._queues.get(pool, [])) + sum(
                1 for p, _ in self._inflight.values() if p == pool
            )

    def _expire_inflight(self, now: int) -> None:
        for receipt, (pool, entry) in list(self._inflight.items()):
            if entry.visible_at <= now:
                del self._inflight[receipt]
                heapq.heappush(self._queues[pool], entry)


class MemoryEvents:
    def __init__(self) -> None:
        self.published: list[DomainEvent] = []

    def publish(self, events: Sequence[DomainEvent]) -> None:
        self.published.extend(events)

    def types(self) -> list[str]:
        return [e.detail_type for e in self.published]


class StreamedEvents:
    """What subscribers are told: every change the table's stream reports, turned into events
    by `shepherd.changes.events_of`, as the stream consumer does in AWS. `source` returns the
    changes not read yet (the in-memory store's, or a DynamoDB stream's)."""

    def __init__(self, source: Callable[[], Sequence[Change]]) -> None:
        self._source = source
        self._published: list[DomainEvent] = []

    @classmethod
    def of(cls, store: MemoryStore) -> StreamedEvents:
        read = 0

        def new_changes() -> Sequence[Change]:
            nonlocal read
            changes = store.changes[read:]
            read += len(changes)
            return changes

        return cls(new_changes)

    @property
    def published(self) -> list[DomainEvent]:
        from shepherd.changes import events_of  # noqa: PLC0415 - keeps `shepherd.testing` light

        for change in self._source():
            self._published.extend(events_of(change))
        return self._published

    def types(self) -> list[str]:
        return [e.detail_type for e in self.published]


class SequentialIds:
    """Deterministic ids for simulations and tests."""

    def __init__(self, prefix: str = "wf") -> None:
        self._counter = itertools.count(1)
        self._prefix = prefix

    def new_id(self) -> str:
        return f"{self._prefix}{next(self._counter):06d}"


# ------------------------------------------------------------------ the in-memory engine


class AttemptOutcome(StrEnum):
    """How one attempt of a step ended."""

    SUCCEEDED = "SUCCEEDED"
    """The agent returned (or a callback answered success): the step's result is recorded."""
    FAILED = "FAILED"
    """The agent raised (or a callback answered failure): retried by the step's `Retry`, unless
    the error is permanent or the retries are spent."""
    TIMED_OUT = "TIMED_OUT"
    """The supervisor ended it after `TimeoutSeconds` (`States.Timeout`)."""
    HEARTBEAT_TIMED_OUT = "HEARTBEAT_TIMED_OUT"
    """The supervisor ended it when no heartbeat came for `HeartbeatSeconds`
    (`States.HeartbeatTimeout`)."""


# What the step's history records for an attempt's end, and what a test reads.
_OUTCOMES = {
    "ok": AttemptOutcome.SUCCEEDED,
    "error": AttemptOutcome.FAILED,
    "timeout": AttemptOutcome.TIMED_OUT,
    "heartbeat_timeout": AttemptOutcome.HEARTBEAT_TIMED_OUT,
}


@dataclass(frozen=True)
class StepError:
    """Why an attempt failed: the error's name (the exception's class, a `PermanentError`'s
    `name`, or `States.Timeout`), its whole message and, for an agent's exception, its
    traceback."""

    name: str
    message: str
    traceback: str | None = None


@dataclass(frozen=True)
class Attempt:
    """One ended attempt of a step (or a compensation), oldest first."""

    number: int
    outcome: AttemptOutcome
    ended_at: datetime
    started_at: datetime | None = None  # when its agent claimed it
    error: StepError | None = None  # None when it succeeded


@dataclass(frozen=True)
class StepResult:
    """A step or a compensation as it is now.

    `output` and `details` are plain values (large ones fetched from the payload store);
    `error` says why the step FAILED (None otherwise: a retried error is in its attempt);
    `attempts` are the ended attempts, oldest first (the last 20 of them)."""

    name: str
    kind: Literal["step", "compensation"]
    status: StepStatus
    output: Any
    error: StepError | None
    attempts: tuple[Attempt, ...]
    details: Any = None
    # When it ended (succeeded, failed, was skipped or cancelled); None while it has not.
    finished_at: datetime | None = None


@dataclass(frozen=True)
class Outcome:
    """A workflow as a test sees it.

    `output` is the succeeded workflow's output (each step's output by step name; None until
    then); `error` says why it unwound or failed (`type`, `message`, `step`); `steps` and
    `compensations` are keyed by step name; `events` are the lifecycle events it announced, by
    detail-type, in order.

    `path` is the steps that ran to an end (succeeded or failed), in the order they ended
    (steps that ended at the same instant: in the definition's order); `skipped` the steps
    whose `Condition` was false; `undone` the compensations that succeeded, in their order:

        assert outcome.path == ("reserve_inventory", "fraud_review", "charge_payment")
        assert outcome.skipped == ("fraud_review",)"""

    workflow_id: str
    workflow_type: str
    status: WorkflowStatus
    output: Any
    error: dict[str, Any] | None
    steps: Mapping[str, StepResult]
    compensations: Mapping[str, StepResult]
    events: tuple[str, ...]
    path: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    undone: tuple[str, ...] = ()


def _error_texts(store: MemoryPayloadStore, rec: StepRecord) -> dict[int, dict[str, Any]]:
    """Each attempt's whole error (message and traceback) as the engine kept it: an object
    under `wf/<id>/<kind>/<step>/<attempt>/error/` in the payload store."""
    prefix = f"wf/{rec.workflow_id}/{rec.kind}/{rec.name}/"
    found: dict[int, dict[str, Any]] = {}
    for key, data in list(store.objects.items()):
        attempt, _, rest = key.removeprefix(prefix).partition("/")
        if key.startswith(prefix) and rest.startswith("error/") and attempt.isdigit():
            found[int(attempt)] = json.loads(data)
    return found


def _step_error(
    name: str, full: dict[str, Any] | None, cut: dict[str, Any] | None, start: str | None = None
) -> StepError:
    """The whole text when it was kept, else the item's (cut) message, else the start of the
    message its history entry kept, else only the name."""
    if full is not None:
        return StepError(name, str(full.get("message", name)), full.get("traceback") or None)
    if cut is not None and cut.get("type") == name:
        return StepError(name, str(cut.get("message", name)))
    return StepError(name, start or name)


def _step_result(rec: StepRecord, value: Callable[[str | None], Any], texts: Any) -> StepResult:
    cut = json.loads(rec.error) if rec.error else None
    attempts = []
    for entry in rec.history:
        outcome = _OUTCOMES.get(entry.get("o", ""))
        if outcome is None:  # not an attempt (an operator replaced the step's input)
            continue
        number = int(entry["a"])
        latest = number == max(int(h["a"]) for h in rec.history)
        error = None
        if outcome is not AttemptOutcome.SUCCEEDED:
            name = str(entry.get("e") or outcome.value)
            error = _step_error(name, texts.get(number), cut if latest else None, entry.get("m"))
        started = entry.get("c")
        attempts.append(
            Attempt(
                number=number,
                outcome=outcome,
                ended_at=to_datetime(int(entry["t"])),
                started_at=to_datetime(int(started)) if started is not None else None,
                error=error,
            )
        )
    failed = None
    if rec.status is StepStatus.FAILED and cut is not None:
        name = str(cut.get("type", "Error"))
        failed = _step_error(name, texts.get(rec.attempt), cut)
    return StepResult(
        name=rec.name,
        kind=rec.kind,
        status=rec.status,
        output=value(rec.output),
        error=failed,
        attempts=tuple(attempts),
        details=value(rec.details),
        finished_at=to_datetime(rec.finished_at) if rec.finished_at is not None else None,
    )


_RAN = (StepStatus.SUCCEEDED, StepStatus.FAILED)


def _in_order(results: Sequence[StepResult], statuses: Sequence[StepStatus]) -> tuple[str, ...]:
    """The names of `results` with one of `statuses`, by when they ended (a stable sort: the
    given order breaks ties)."""
    chosen = [r for r in results if r.status in statuses and r.finished_at is not None]
    return tuple(r.name for r in sorted(chosen, key=lambda r: r.finished_at or datetime.min))


class _WithOverrides(AgentRegistry):
    """The user's registry, read live, with one test's agents in front of it: the user's
    registry itself is never changed, so no other test sees the fakes."""

    def __init__(
        self, registry: AgentRegistry | None, overrides: Mapping[str, AgentFunction]
    ) -> None:
        super().__init__()
        self._registry = registry
        self._overrides = dict(overrides)

    def get(self, name: str) -> AgentFunction | None:
        if name in self._overrides:
            return self._overrides[name]
        return self._registry.get(name) if self._registry is not None else None

    def names(self) -> set[str]:
        mine = self._registry.names() if self._registry is not None else set()
        return mine | set(self._overrides)


class MemoryEngine:
    """Your definitions and your agents, run in memory under a manual clock, in milliseconds.

    The real engine (the one factory, `shepherd.engine.build`), over in-memory ports that pass
    the same contract tests as the AWS adapters: messages are delivered by `deliver()`, time
    moves only with `advance()`, the supervisor runs on `sweep()`; `run()` does all three until
    the workflow ends (or pauses). Agents run in the calling thread, heartbeating inline.

        engine = MemoryEngine.from_project()      # [tool.shepherd] of your pyproject.toml
        outcome = engine.run(engine.start("order_fulfilment", {"order_id": "o-1"}))
        assert outcome.status is WorkflowStatus.SUCCEEDED

    Every kind of step is driven from a test: `approve`/`reject` answer an Approval step (or
    `run(wf, approvals={"review": "approve"})`), `fire_wait` wakes a Wait step at its time,
    `run(wf, until_resting=True)` stops where either waits, and `Outcome.path`, `skipped` and
    `undone` tell the path taken (docs/testing.md).

    `overrides` replace agents by name for this engine only (a fake payment service in one
    test), without touching your registry. `pool_policies` gives pools a rate limit or a
    circuit breaker, as the construct's `pool_settings` do (`{"payments": {"RateLimit":
    {"PerSecond": 5, "Burst": 5}}}`).
    """

    def __init__(
        self,
        definitions: Mapping[str, Definition],
        *,
        agents: AgentRegistry | None = None,
        overrides: Mapping[str, AgentFunction] | None = None,
        start_ms: int = 1_767_225_600_000,
        owner: str = "test",
        pool_policies: Mapping[str, Any] | None = None,
    ) -> None:
        from shepherd.engine.build import build_engine  # noqa: PLC0415
        from shepherd.engine.scheduler import Ports  # noqa: PLC0415
        from shepherd.payloads import MemoryPayloadStore, Payloads  # noqa: PLC0415
        from shepherd.pool_policy import parse_policies  # noqa: PLC0415

        self.definitions = dict(definitions)
        named = {t.agent for d in self.definitions.values() for t in d.tasks}
        for name in overrides or {}:
            if name not in named:
                raise ValueError(
                    f"override '{name}': no definition names that agent{did_you_mean(name, named)}"
                )
        self.clock = ManualClock(start_ms)
        self.store = MemoryStore()
        self.payload_store = MemoryPayloadStore()  # the payload bucket (large payloads)
        self.queue = MemoryQueue(self.clock, visibility_ms=300_000)
        self.events = StreamedEvents.of(self.store)
        self.owner = owner
        ports = Ports(
            self.store,
            self.queue,
            self.clock,
            SequentialIds(),
            random.Random(),
            Payloads(self.payload_store),
        )
        self.engine = build_engine(
            ports,
            self.definitions,
            agents=_WithOverrides(agents, overrides) if overrides else agents,
            pool_control=self.queue,
            worker_id="memory",
            background_heartbeats=False,
            pool_policies=parse_policies(pool_policies or {}, source="pool_policies"),
        )

    @classmethod
    def from_directory(
        cls,
        directory: str | Path,
        *,
        agents: AgentRegistry | None = None,
        overrides: Mapping[str, AgentFunction] | None = None,
    ) -> MemoryEngine:
        """Every definition in `directory` (YAML or JSON), run with `agents`."""
        from shepherd.definitions import load_directory  # noqa: PLC0415

        return cls(load_directory(Path(directory)), agents=agents, overrides=overrides)

    @classmethod
    def from_project(
        cls,
        start: str | Path | None = None,
        *,
        overrides: Mapping[str, AgentFunction] | None = None,
    ) -> MemoryEngine:
        """The definitions and agent modules your `pyproject.toml`'s `[tool.shepherd]` names
        (the nearest one from `start`, default the working directory): the same ones
        `shepherd validate`, `shepherd local` and the CDK app's `AgentCode.from_project` use."""
        from shepherd.definitions import load_directory  # noqa: PLC0415
        from shepherd.project import Project  # noqa: PLC0415
        from shepherd.user_code import load_agents  # noqa: PLC0415

        project = Project.find(Path(start) if start is not None else None)
        agents = load_agents(project.agent_modules)
        definitions = load_directory(
            project.definitions_dir, asl_pool=project.asl_pool, asl_pools=dict(project.asl_pools)
        )
        return cls(definitions, agents=agents, overrides=overrides)

    # ------------------------------------------------------------------------- driving

    def start(
        self,
        wf_type: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """Start a workflow as the API would (with its `tags`, if any); its id. Nothing runs
        until `deliver`/`run`."""
        result = self.engine.scheduler.start(
            wf_type, payload, idempotency_key=idempotency_key, owner=self.owner, tags=tags
        )
        return result.workflow_id

    def deliver(self, *, rounds: int = 100) -> int:
        """Deliver every visible task message to the agents; how many were handled."""
        handled = 0
        pools = sorted({t.pool for d in self.definitions.values() for t in d.tasks})
        for _ in range(rounds):
            messages = [m for pool in pools for m in self.queue.receive(pool, 10)]
            if not messages:
                break
            for message in messages:
                self.engine.agent_runtime.handle(message.task)
                self.queue.delete(message.receipt)
                handled += 1
        return handled

    def advance(self, seconds: float) -> None:
        """Move the manual clock forward (nothing else happens until `deliver` or `sweep`)."""
        self.clock.advance(seconds)

    def sweep(self) -> Any:
        """One supervisor sweep: retries, timeouts and compensations that are due now."""
        return self.engine.supervisor.sweep()

    def run(
        self,
        workflow_id: str,
        *,
        step_seconds: float = 1.0,
        max_seconds: float = 86_400,
        approvals: Mapping[str, Literal["approve", "reject"]] | None = None,
        until_resting: bool = False,
    ) -> Outcome:
        """Deliver, advance and sweep until the workflow ends or pauses (or time runs out).

        An Approval step named in `approvals` is answered (`"approve"` or `"reject"`, as the
        workflow's owner) as soon as it waits for a person. With `until_resting`, `run`
        returns as soon as an Approval step waits (for the test to `approve` or `reject` it)
        or a Wait step rests (to `fire_wait` it), then `run` again. Otherwise an unanswered
        Approval waits, as deployed, until its `TimeoutSeconds` pass (`ApprovalTimedOut`),
        and a Wait until its time, a `step_seconds` at a time."""
        answers = dict(approvals or {})
        unknown = sorted(set(answers) - self._approval_steps(workflow_id))
        if unknown:
            _, definition = self._loaded(workflow_id)
            raise ValueError(
                f"approvals: '{unknown[0]}' is not an Approval step of {definition.name}"
                + did_you_mean(unknown[0], self._approval_steps(workflow_id))
            )
        elapsed = 0.0
        while True:
            self.deliver()
            outcome = self.outcome(workflow_id)
            if outcome.status.terminal or outcome.status is WorkflowStatus.PAUSED:
                return outcome
            waiting = self.awaiting_approval(workflow_id)
            answered = [step for step in waiting if step in answers]
            for step in answered:
                self._answer(workflow_id, step, answers[step] == "approve")
            if answered:
                continue
            if until_resting and (waiting or self.resting(workflow_id)):
                return outcome
            if elapsed >= max_seconds:
                raise TimeoutError(f"{workflow_id} still {outcome.status} after {max_seconds}s")
            self.advance(step_seconds)
            elapsed += step_seconds
            self.sweep()

    # ------------------------------------------------------- approvals, waits, signals

    def awaiting_approval(self, workflow_id: str) -> tuple[str, ...]:
        """The Approval steps of a workflow that wait for a person now, in definition order."""
        state, definition = self._loaded(workflow_id)
        return tuple(
            name
            for name in definition.topological_order
            if definition.by_name[name].approval is not None
            and state.steps[name].status is StepStatus.WAITING
        )

    def resting(self, workflow_id: str) -> tuple[str, ...]:
        """The Wait steps of a workflow that rest now (`fire_wait` wakes one)."""
        state, definition = self._loaded(workflow_id)
        return tuple(
            name
            for name in definition.topological_order
            if definition.by_name[name].wait is not None
            and state.steps[name].status is StepStatus.WAITING
        )

    def approve(
        self,
        workflow_id: str,
        step: str,
        *,
        comment: str | None = None,
        output: Any = None,
        by: str | None = None,
    ) -> None:
        """Approve a waiting Approval step, as `POST .../steps/{step}/approve` does (`by`:
        who answers, default the workflow's owner; `output`: the step's output, default
        `{approved: true, by, comment}`). The workflow goes on at the next `run`/`deliver`.
        `ApprovalNotPending` when the step does not wait for an answer."""
        self._answer(workflow_id, step, True, comment=comment, output=output, by=by)

    def reject(
        self, workflow_id: str, step: str, *, comment: str | None = None, by: str | None = None
    ) -> None:
        """Reject a waiting Approval step (`Rejected`: the workflow unwinds, as deployed)."""
        self._answer(workflow_id, step, False, comment=comment, by=by)

    def fire_wait(self, workflow_id: str, step: str) -> None:
        """Move the clock to the time a resting Wait step wakes (its `Seconds`, `Until` or
        `UntilPath`) and let the supervisor wake it: a wait of a week takes no week of
        `run`'s steps. `ValueError` when `step` is not a Wait step resting now."""
        state, definition = self._loaded(workflow_id)
        spec = definition.by_name.get(step)
        if spec is None or spec.wait is None:
            waits = [s.name for s in definition.steps if s.wait is not None]
            raise ValueError(
                f"'{step}' is not a Wait step of {definition.name}" + did_you_mean(step, waits)
            )
        rec = state.steps[step]
        if rec.status is not StepStatus.WAITING or rec.wake_at is None:
            raise ValueError(f"Wait step '{step}' is {rec.status.value}, not resting")
        ahead = rec.wake_at - self.clock.now_ms()
        if ahead > 0:
            self.advance(ahead / 1000)
        self.sweep()
        self.deliver()

    def _answer(
        self,
        workflow_id: str,
        step: str,
        approve: bool,
        *,
        comment: str | None = None,
        output: Any = None,
        by: str | None = None,
    ) -> None:
        state, definition = self._loaded(workflow_id)
        if step not in definition.by_name or definition.by_name[step].approval is None:
            raise ValueError(
                f"'{step}' is not an Approval step of {definition.name}"
                + did_you_mean(step, self._approval_steps(workflow_id))
            )
        extra: dict[str, Any] = {} if output is None else {"output": output}
        self.engine.approvals.decide(
            workflow_id,
            step,
            principal=by or state.workflow.owner,
            approve=approve,
            comment=comment,
            **extra,
        )

    def _approval_steps(self, workflow_id: str) -> set[str]:
        _, definition = self._loaded(workflow_id)
        return {s.name for s in definition.steps if s.approval is not None}

    def _loaded(self, workflow_id: str) -> tuple[Any, Definition]:
        loaded = self.engine.scheduler.load(workflow_id)
        if loaded is None:
            raise KeyError(workflow_id)
        return loaded

    # ---------------------------------------------------------------- operator actions

    def pause(self, workflow_id: str) -> None:
        self.engine.operations.pause(workflow_id)

    def resume(self, workflow_id: str, *, step: str | None = None, step_input: Any = None) -> None:
        self.engine.operations.resume(workflow_id, step=step, step_input=step_input)

    def cancel(self, workflow_id: str) -> None:
        self.engine.operations.cancel(workflow_id)

    def compensate(self, workflow_id: str) -> None:
        self.engine.operations.compensate(workflow_id)

    def callback(self, token: str, action: str, **kwargs: Any) -> None:
        self.engine.callbacks.callback(token, action, **kwargs)

    def signal(
        self, workflow_id: str, name: str, payload: Any = None, signal_id: str | None = None
    ) -> Any:
        """Send a signal as the workflow's owner, as `POST /workflows/{id}/signals/{name}`
        would: kept until a WaitForSignal step of that name takes it (at once if one waits).
        The receipt (`shepherd.engine.signals.SignalReceipt`)."""
        return self.engine.signals.send(
            workflow_id, name, payload, principal=self.owner, signal_id=signal_id
        )

    def signal_matching(
        self,
        name: str,
        match: dict[str, Any],
        payload: Any = None,
        signal_id: str | None = None,
    ) -> list[Any]:
        """Send a signal by its business key, as `POST /signals` would: to every open workflow
        of the owner whose WaitForSignal step of `name` names a Match on these values. One
        receipt per workflow reached, newest first."""
        return self.engine.signals.send_matching(
            name, match, payload, principal=self.owner, signal_id=signal_id
        )

    # ---------------------------------------------------------------------------- reads

    def outcome(self, workflow_id: str) -> Outcome:
        """The workflow as it is now (`KeyError` for an unknown id)."""
        from shepherd.changes import public_error  # noqa: PLC0415
        from shepherd.engine.outputs import workflow_output  # noqa: PLC0415

        loaded = self.engine.scheduler.load(workflow_id)
        if loaded is None:
            raise KeyError(workflow_id)
        state, definition = loaded
        payloads = self.engine.ports.payloads

        def result(rec: StepRecord) -> StepResult:
            return _step_result(rec, payloads.value, _error_texts(self.payload_store, rec))

        steps = {n: result(state.steps[n]) for n in definition.topological_order}
        compensations = {n: result(r) for n, r in state.compensations.items()}
        ordered = [steps[s.name] for s in definition.steps]  # ties: the definition's order
        return Outcome(
            workflow_id=workflow_id,
            workflow_type=state.workflow.wf_type,
            status=state.workflow.status,
            output=workflow_output(state, definition, payloads),
            error=public_error(state.workflow.error),
            steps=steps,
            compensations=compensations,
            events=tuple(
                e.detail_type
                for e in self.events.published
                if e.detail.get("workflow_id") == workflow_id
            ),
            path=_in_order(ordered, _RAN),
            skipped=_in_order(ordered, (StepStatus.SKIPPED,)),
            undone=_in_order(list(compensations.values()), (StepStatus.SUCCEEDED,)),
        )
