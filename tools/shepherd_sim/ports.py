"""Fault-injecting wrappers around the in-memory ports.

Each engine component (the client API, the agents, each supervisor) gets its own `FaultyStore`
over the one shared `MemoryStore`, labelled with its role, so a fault can be aimed at a sweep
and every write can be traced with who made it. The queue wrapper loses, duplicates and
delays messages on their way into the `MemoryQueue`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from shepherd.conditions import Cond, Item, Update
from shepherd.errors import DeliveryError, StoreUnavailable
from shepherd.keys import POOLS_PK, WF_SK
from shepherd.model import WINDOW, OutgoingTask, TaskMessage
from shepherd.payloads import MemoryPayloadStore, PresignedUpload
from shepherd.ports import Backlog, DuePage, ListPage, Store
from shepherd.testing import MemoryQueue

from shepherd_sim.fibers import current


class _Peek(Protocol):
    def peek(self, pk: str, sk: str) -> Item | None: ...


class SimHooks(Protocol):
    """What the faulty ports ask of the simulation that wraps them (its dice, clock, trace,
    sweep plans and observers): `shepherd_sim.sim.Simulation` is one. A protocol, so the
    simulation imports these ports and they import nothing of it."""

    rng: random.Random
    write_latency: dict[tuple[str, str], int]

    @property
    def memory(self) -> _Peek: ...
    def now(self) -> int: ...
    def sleep(self, seconds: float) -> None: ...
    def trace(self, workflow_id: str | None, text: str) -> None: ...
    def roll(self, kind: str) -> bool: ...
    def partition_throttled(self, pks: Iterable[str]) -> bool: ...
    def fault(
        self, kind: str, workflow_id: str | None, text: str, *, delay_s: float = 0
    ) -> None: ...
    def message_sent(self, pool: str, delay_s: int) -> None: ...
    def current_plan(self) -> SweepPlan | None: ...
    def nested_sweep(self, role: str, op: str, pk: str | None) -> None: ...
    def queue_seen_busy(self, pool: str) -> None: ...
    def observe_read(self, role: str, pk: str) -> None: ...
    def observe_pools_unread(self, role: str) -> None: ...
    def observe_redispatch(self, role: str, item: Item) -> None: ...
    def observe_status(self, role: str, pk: str, before: str | None) -> None: ...
    def observe_claim(self, role: str, item: Item) -> None: ...
    def observe_claim_start(self, role: str) -> None: ...
    def observe_pool_read(self, role: str, pool: str) -> None: ...
    def observe_probe(self, role: str, pool: str) -> None: ...
    def observe_send(self, role: str, message: TaskMessage) -> None: ...


WRITE_OPS = ("create", "put_new", "transact", "update")


class StoreThrottled(StoreUnavailable):
    """The call was rejected before it took effect (ProvisionedThroughputExceeded, 5xx)."""


class StoreTimeout(StoreUnavailable):
    """The write took effect, but its response never arrived (a timeout after the commit)."""


class SupervisorCrash(BaseException):
    """The supervisor's Lambda died mid-sweep (timeout, out of memory)."""


@dataclass
class SweepPlan:
    """Faults aimed at one sweep: the n-th store call of that supervisor crashes it (before or
    after the call) or first runs the other supervisor's whole sweep."""

    role: str
    crash_at: int | None = None
    crash_after: bool = False
    double_at: int | None = None
    calls: int = 0
    group: int | None = None  # the shard group it sweeps under a lease (None: every group)
    dead: bool = False  # crashed: a dead invocation makes no further call (nor releases)


# Attributes a write sets to the writer's clock reading (`now`) when it builds the write.
CLOCK_STAMPS = (
    "dispatched_at",
    "claimed_at",
    "heartbeat_at",
    "finished_at",
    "paused_at",
    "resumed_at",
    "circuit_resumed_at",  # a breaker's half-open or close restarts its pool's dispatch grace
)


# The sort keys of units an agent claims: a step, a compensation, a map item and an item's
# compensation (`shepherd.keys`).
UNIT_PREFIXES = ("S#", "C#", "I#", "IC#")


def workflow_of(pk: str | None) -> str | None:
    if pk and pk.startswith("WF#"):
        return pk[3:]
    if pk and pk.startswith("MAP#"):  # a map's items partition: MAP#<wf>#<step>#<page>
        return pk[4:].split("#", 1)[0]
    return None


def _describe(update: Update) -> str:
    parts = []
    for name in ("status", "attempt", "due_at"):
        if name in update.set:
            parts.append(f"{name}={update.set[name]}")
    if "history" in update.append:
        parts.append("history+=" + ",".join(str(h.get("o")) for h in update.append["history"]))
    if "heartbeat_at" in update.set and len(update.set) <= 2:
        parts.append("heartbeat")
    return " ".join(parts) or ",".join(sorted(update.names()))


class FaultyStore:
    """A Store that fails on the simulator's dice, before a call or after a write."""

    def __init__(self, inner: Store, sim: SimHooks, role: str) -> None:
        self.inner = inner
        self.sim = sim
        self.role = role

    # ---------------------------------------------------------------------- fault points

    def _before(self, op: str, pk: str | None, keys: Sequence[tuple[str, str]] = ()) -> None:
        sim = self.sim
        if current() is not None and sim.roll("slow"):
            wait = sim.rng.choice((0.005, 0.05, 0.3, 1.5))
            sim.fault("slow", workflow_of(pk), f"{self.role} {op} takes {wait}s", delay_s=wait)
            sent = sim.now()
            sim.sleep(wait)
            for key in keys:  # the write lands late, with timestamps taken before it was sent
                sim.write_latency[key] = max(sim.write_latency.get(key, 0), sim.now() - sent)
        plan = sim.current_plan()
        if plan is not None and plan.role == self.role and plan.dead:
            raise SupervisorCrash(f"{self.role} is dead")
        if plan is not None and plan.role == self.role:
            plan.calls += 1
            if plan.double_at == plan.calls:
                plan.double_at = None
                sim.nested_sweep(self.role, op, pk)
            if plan.crash_at == plan.calls and not plan.crash_after:
                sim.fault("sweep_crash", workflow_of(pk), f"{self.role} dies before {op}")
                plan.dead = True
                raise SupervisorCrash(f"{self.role} before {op}")
        if sim.roll("store_before"):
            sim.fault("store_before", workflow_of(pk), f"{self.role} {op} throttled")
            raise StoreThrottled(f"{op} throttled")
        written = [k[0] for k in keys] + ([pk] if pk is not None else [])
        if op in WRITE_OPS and sim.partition_throttled(written):
            sim.trace(workflow_of(pk), f"{self.role:7} {op} throttled (episode)")
            raise StoreThrottled(f"{op} throttled: a throttling episode")

    def _after(self, op: str, pk: str | None) -> None:
        sim = self.sim
        plan = sim.current_plan()
        if plan is not None and plan.role == self.role and plan.crash_at == plan.calls:
            sim.fault("sweep_crash", workflow_of(pk), f"{self.role} dies after {op}")
            plan.dead = True
            raise SupervisorCrash(f"{self.role} after {op}")
        if sim.roll("store_after"):
            sim.fault("store_after", workflow_of(pk), f"{self.role} {op} applied, then timed out")
            raise StoreTimeout(f"{op} timed out after it was applied")

    def _write(self, op: str, pk: str, sk: str, what: str) -> None:
        self.sim.trace(workflow_of(pk), f"{self.role:7} {op} {sk} {what}")

    # ------------------------------------------------------------------- observation

    def _statuses(self, keys: Sequence[tuple[str, str]]) -> dict[str, str | None]:
        """The status of each workflow item among `keys`, as it is now (before a write)."""
        out: dict[str, str | None] = {}
        for pk, sk in keys:
            if sk == WF_SK:
                item = self.sim.memory.peek(pk, sk)
                out[pk] = None if item is None else item.get("status")
        return out

    def _landed(self, before: dict[str, str | None]) -> None:
        """Tell the simulator which workflow items a write changed, with their old status."""
        for pk, status in before.items():
            self.sim.observe_status(self.role, pk, status)

    def _stamped(self, key: tuple[str, str], values: Mapping[str, Any]) -> None:
        """A write carrying the engine's clock readings has landed: how long after them.

        Deadlines are computed from these stamps (a dispatch's grace, a heartbeat's lease, a
        dependency's completion, a pause timeout), so a stamp older than its landing creates
        a deadline earlier than any look could have known (docs/simulation.md, write
        latency): a slow call, or a supervisor run that stamps every write with its look's
        `now` after an earlier slow call in the same run."""
        stamps = [v for k, v in values.items() if k in CLOCK_STAMPS and isinstance(v, int)]
        # A map's window entry (`w_<i>`: when item i entered, the time its message's dispatch
        # grace runs from; a compensation's is [entered_at, index]).
        stamps += [
            v[0] if isinstance(v, list | tuple) else v
            for k, v in values.items()
            if k.startswith(WINDOW) and isinstance(v, int | list | tuple)
        ]
        if stamps:
            late = self.sim.now() - min(stamps)
            latency = self.sim.write_latency
            latency[key] = max(latency.get(key, 0), late)

    # ------------------------------------------------------------------------- the port

    def create(self, items: Sequence[Item]) -> None:
        pk = items[0]["pk"] if items else None
        keys = [(i["pk"], i["sk"]) for i in items]
        self._before("create", pk, keys)
        before = self._statuses(keys)
        self.inner.create(items)
        self._landed(before)
        for key_pk in before:  # the start decides on what it created: a read of it
            self.sim.observe_read(self.role, key_pk)
        self._write("create", pk or "", f"{len(items)} items", "")
        self._after("create", pk)

    def put_new(self, item: Item) -> None:
        self._before("put_new", item["pk"], [(item["pk"], item["sk"])])
        self.inner.put_new(item)
        self._stamped((item["pk"], item["sk"]), item)
        if _waits_for_a_child(item["sk"], item):  # a unit waiting for a child to undo itself
            self.sim.observe_claim(self.role, item)
        self._write("put_new", item["pk"], item["sk"], str(item.get("status", "")))
        self._after("put_new", item["pk"])

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        pk = writes[0][0] if writes else None
        keys = [(w[0], w[1]) for w in writes]
        self._before("transact", pk, keys)
        before = self._statuses(keys)
        self.inner.transact(writes)
        self._landed(before)
        for w_pk, w_sk, w_update, _ in writes:
            self._stamped((w_pk, w_sk), w_update.set)
            if _waits_for_a_child(w_sk, w_update.set):  # a child's start: its attempt's claim
                item = self.sim.memory.peek(w_pk, w_sk)
                assert item is not None
                self.sim.observe_claim(self.role, item)
        for w_pk, sk, update, _ in writes:
            self._write("transact", w_pk, sk, _describe(update))
        self._after("transact", pk)

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        claim = sk.startswith(UNIT_PREFIXES) and update.set.get("status") == "RUNNING"
        if claim:  # what the claimer decided on, before a slow call lets anything happen
            self.sim.observe_claim_start(self.role)
        self._before("update", pk, [(pk, sk)])
        before = self._statuses([(pk, sk)])
        item = self.inner.update(pk, sk, update, condition)
        self._landed(before)
        self._stamped((pk, sk), update.set)
        if pk == POOLS_PK and update.add.get("probes", 0) < 0:
            self.sim.observe_probe(self.role, sk)  # a half-open circuit's probe, taken
        if sk.startswith(UNIT_PREFIXES):
            if claim:
                self.sim.observe_claim(self.role, item)
            elif "dispatches" in update.add and "status" not in update.set:
                self.sim.observe_redispatch(self.role, item)
        self._write("update", pk, sk, _describe(update))
        self._after("update", pk)
        return item

    def load(self, pk: str) -> list[Item]:
        try:
            self._before("load", pk)
        except StoreThrottled:
            if pk == POOLS_PK:
                self.sim.observe_pools_unread(self.role)
            raise
        items = self.inner.load(pk)
        self.sim.observe_read(self.role, pk)
        return items

    def get(self, pk: str, sk: str) -> Item | None:
        self._before("get", pk)
        item = self.inner.get(pk, sk)
        if sk == WF_SK:
            self.sim.observe_read(self.role, pk)
        elif pk == POOLS_PK:
            self.sim.observe_pool_read(self.role, sk)
        return item

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        pks = {pk for pk, _ in keys}
        self._before("get_many", next(iter(pks)) if len(pks) == 1 else None)
        items = self.inner.get_many(keys)
        # The workflows read, in key order (a breaker's window reads 96 keys and no workflow:
        # sorting every key was a cost of its own).
        for pk in sorted({pk for pk, sk in keys if sk == WF_SK}):
            self.sim.observe_read(self.role, pk)
        return items

    def query_due(
        self, shard: str, until_ms: int, limit: int, cursor: dict[str, object] | None
    ) -> DuePage:
        self._before("query_due", None)
        lagged = getattr(self.inner, "lagged_due", None)
        if lagged is not None and self.sim.roll("index_lag"):
            lag = self.sim.rng.uniform(0.05, 2.0)
            self.sim.fault(
                "index_lag", None, f"{self.role} reads the watch index {lag:.2f}s old", delay_s=lag
            )
            page: DuePage = lagged(
                shard, until_ms, limit, cursor, self.sim.now() - round(lag * 1000)
            )
            return page
        return self.inner.query_due(shard, until_ms, limit, cursor)

    def query_range(self, *args: Any, **kwargs: Any) -> ListPage:
        self._before("query_range", None)
        page: ListPage = self.inner.query_range(*args, **kwargs)
        return page

    def query_after(self, pk: str, after_sk: str, limit: int) -> ListPage:
        self._before("query_after", pk)
        page: ListPage = self.inner.query_after(pk, after_sk, limit)
        return page

    def count_range(self, *args: Any) -> int:
        self._before("count_range", None)
        return int(self.inner.count_range(*args))


def _waits_for_a_child(sk: str, values: Mapping[str, Any]) -> bool:
    """A write that moves a unit to WAIT for a child workflow: a child step's (or item's)
    start, in the transaction that creates the child, or a compensation unit created to wait
    for its child to undo itself. Both are the unit's claim: from then on it may have acted."""
    return (
        sk.startswith(UNIT_PREFIXES)
        and values.get("status") == "WAITING"
        and values.get("child_id") is not None
    )


class PayloadUnavailable(StoreUnavailable):
    """The payload bucket refused a call (S3 5xx after the SDK's retries)."""


class FaultyPayloadStore:
    """The payload bucket (one shared `MemoryPayloadStore`) with its own faults: slow calls
    (anything else may happen in the middle), failed puts (nothing stored) and failed gets."""

    def __init__(self, inner: MemoryPayloadStore, sim: SimHooks, role: str) -> None:
        self.inner = inner
        self.sim = sim
        self.role = role

    def _slow(self, op: str, key: str) -> None:
        sim = self.sim
        if current() is not None and sim.roll("payload_slow"):
            wait = sim.rng.choice((0.005, 0.05, 0.3, 1.5))
            sim.fault("payload_slow", _workflow_of_key(key), f"{self.role} {op} {key} {wait}s")
            sim.sleep(wait)

    def put(self, key: str, data: bytes, sha256: str) -> None:
        self._slow("put", key)
        if self.sim.roll("payload_put"):
            self.sim.fault("payload_put", _workflow_of_key(key), f"{self.role} put {key} failed")
            raise PayloadUnavailable(f"payload {key} not written")
        self.inner.put(key, data, sha256)
        self.sim.trace(_workflow_of_key(key), f"{self.role:7} payload put {key.split('/', 2)[2]}")

    def get(self, key: str) -> bytes | None:
        self._slow("get", key)
        if self.sim.roll("payload_get"):
            self.sim.fault("payload_get", _workflow_of_key(key), f"{self.role} get {key} failed")
            raise PayloadUnavailable(f"payload {key} not read")
        return self.inner.get(key)

    def head(self, key: str, length: int) -> tuple[bytes, int] | None:
        return self.inner.head(key, length)

    def url(self, key: str, expires_seconds: int, filename: str | None = None) -> str:
        return str(self.inner.url(key, expires_seconds, filename))

    def presign_upload(self, key: str, size: int, expires_seconds: int) -> PresignedUpload:
        return self.inner.presign_upload(key, size, expires_seconds)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def _workflow_of_key(key: str) -> str | None:
    parts = key.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "wf" else None


class FaultyQueue:
    """Sends into a MemoryQueue, losing, duplicating and delaying messages on the way. One per
    role, so every message is observed with who decided to send it."""

    def __init__(self, inner: MemoryQueue, sim: SimHooks, role: str) -> None:
        self.inner = inner
        self.sim = sim
        self.role = role

    def has(self, pool: str) -> bool:
        return self.inner.has(pool)

    def backlog(self, pool: str) -> Backlog:
        backlog = self.inner.backlog(pool)
        if backlog.visible + backlog.in_flight + backlog.delayed:
            self.sim.queue_seen_busy(pool)  # what the supervisor decided on
        return backlog

    def send(self, tasks: Sequence[OutgoingTask]) -> None:
        sim = self.sim
        for task in tasks:
            m = task.message
            who = f"{m.kind} {m.step if m.item is None else f'{m.step}[{m.item}]'}#{m.attempt}"
            sim.observe_send(self.role, m)
            if sim.roll("lose"):
                if sim.rng.random() < 0.5:
                    sim.fault("lose", m.workflow_id, f"message {who} dropped on send")
                    continue
                sim.fault("lose", m.workflow_id, f"send of {who} raised DeliveryError")
                raise DeliveryError(f"could not send {who}")
            copies = 2 if sim.roll("dup") else 1
            if copies == 2:
                sim.fault("dup", m.workflow_id, f"message {who} sent twice")
            delay = task.delay_seconds
            if sim.roll("delay"):
                extra = sim.rng.randint(1, 12)
                sim.fault("delay", m.workflow_id, f"message {who} delayed {extra}s", delay_s=extra)
                delay = min(900, delay + extra)
            for _ in range(copies):
                self.inner.send([replace(task, delay_seconds=delay)])
                sim.trace(m.workflow_id, f"queue   send {who} to {task.pool} delay={delay}s")
                sim.message_sent(task.pool, delay)


def unwrap(store: Any) -> Any:
    return store.inner if isinstance(store, FaultyStore) else store
