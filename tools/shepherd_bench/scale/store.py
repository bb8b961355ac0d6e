"""The state store at load: `shepherd.ports.Store` over DynamoDB's partitions.

The same conditional-write semantics as `shepherd.testing.MemoryStore` (`conditions.evaluate`,
`Update.apply`, the 400 KB item limit), held per item collection and per index partition so a
million items cost O(1) per request, plus what the in-memory store leaves out:

* units per request (`capacity`): a write 1 WRU per started KB of the larger image (twice in
  a transaction), a lost condition the existing item's size, each index entry the write adds
  or removes 1 and one whose key changes 2; a consistent read 1 RRU per started 4 KB (per
  item in a BatchGetItem), an index query 0.5;
* throttling: a request over its partition's budget fails as DynamoDB's does, and the SDK's
  standard retry mode retries it (5 attempts, `rand(0, 1) * min(2^i, 20)` s apart) in
  simulated time; what is still throttled is `StoreUnavailable(throttled=True)`, as the
  engine's adapter reports it. A transaction is not retried by the SDK (botocore does not
  retry TransactionCanceledException); the adapter's own retries are modelled instead;
* latency per request, from a stated distribution, spent by the calling task;
* index propagation: an index sees a write after a delay, in order per item, so a sweep may
  read an entry the table has already moved (the engine re-reads before acting).

Partition keys are read from the items through `shepherd.topology.TABLE`, never assumed.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shepherd.adapters.dynamodb import TRANSACTION_BACKOFF_MS, TRANSACTION_RETRIES
from shepherd.conditions import Cond, Item, Update, evaluate
from shepherd.errors import ConditionFailed, ItemTooLarge, StoreUnavailable, TransactionConflict
from shepherd.keys import workflow_id_of
from shepherd.limits import DYNAMODB_ITEM_LIMIT, attribute_size, item_size
from shepherd.ports import DueEntry, DuePage, ListPage
from shepherd.topology import TABLE, IndexSpec
from shepherd_bench.scale.capacity import TABLE_NAME, Capacity, Partition, read_units, write_units
from shepherd_bench.scale.kernel import Kernel, LogNormal, wait_call

SDK_MAX_ATTEMPTS = 5  # the engine's clients: retries={"mode": "standard", "max_attempts": 5}
SDK_MAX_BACKOFF_S = 20.0
INDEX_ENTRY_BYTES = 100  # a KEYS_ONLY watch entry: table keys + index keys, names included
GET_LATENCY = LogNormal(3.0, 0.4)  # milliseconds: median, spread of the logarithm
QUERY_LATENCY = LogNormal(4.0, 0.4)
WRITE_LATENCY = LogNormal(5.0, 0.5)
TRANSACT_LATENCY = LogNormal(10.0, 0.5)
BATCH_GET_LATENCY = LogNormal(6.0, 0.4)
PROPAGATION = LogNormal(100.0, 0.6)  # an index sees a write this long after it


@dataclass(frozen=True)
class StoreLatency:
    """Request latencies (lognormal; DynamoDB's single-digit-millisecond reads and writes)
    and the client's CPU per call on one full core (measured here: 0.3-0.65 ms per boto3
    call, shared/reference/scale-and-load.md)."""

    get: LogNormal = GET_LATENCY
    query: LogNormal = QUERY_LATENCY
    write: LogNormal = WRITE_LATENCY
    transact: LogNormal = TRANSACT_LATENCY
    batch_get: LogNormal = BATCH_GET_LATENCY
    propagation: LogNormal = PROPAGATION
    client_cpu_ms: float = 0.4


@dataclass
class StoreStats:
    requests: Counter[str] = field(default_factory=Counter)
    throttled_attempts: Counter[str] = field(default_factory=Counter)  # SDK retries included
    unavailable: Counter[str] = field(default_factory=Counter)  # StoreUnavailable raised
    conditional_failures: int = 0
    wru_table: float = 0.0
    wru_index: float = 0.0
    rru: float = 0.0
    wru_by: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    rru_by: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))


class _Throttled:
    """A request DynamoDB rejected for capacity (nothing was applied or consumed)."""


THROTTLED = _Throttled()
Outcome = tuple[Any, BaseException | None] | _Throttled


def _index_key(index: IndexSpec, item: Item | None) -> tuple[str, Any] | None:
    if item is None:
        return None
    part = item.get(index.partition_key)
    sort = item.get(index.sort_key)
    return None if part is None or sort is None else (part, sort)


class PartitionedStore:
    """The table, its two indexes and their partitions (see the module docstring)."""

    def __init__(
        self,
        kernel: Kernel,
        capacity: Capacity,
        latency: StoreLatency | None = None,
    ) -> None:
        self.kernel = kernel
        self.capacity = capacity
        self.latency = latency or StoreLatency()
        self.stats = StoreStats()
        self._rng = kernel.rng
        self._table: dict[str, dict[str, Item]] = {}
        self._sizes: dict[tuple[str, str], int] = {}
        # The indexes as a reader sees them: watch shard -> sorted (due_at, pk); list
        # partition -> sorted (list_sk, pk) and each entry's projection.
        self._watch: dict[str, list[tuple[Any, str]]] = {}
        self._list: dict[str, list[tuple[Any, str]]] = {}
        self._projected: dict[str, Item] = {}
        self._pending: list[tuple[float, int, str, str, Item | None, Item | None]] = []
        self._pending_seq = 0
        self._last_apply: dict[tuple[str, str], float] = {}
        self.observers: list[Callable[[Item | None, Item], None]] = []
        self.load_observers: list[Callable[[str, list[Item]], None]] = []

    def actor(self) -> str:
        """Which function the current request comes from (its invocation's name)."""
        inv = self.kernel.invocation()
        return "setup" if inv is None else inv.name.split("-", 1)[0]

    # ------------------------------------------------------------------------ requests

    def _request(self, op: str, latency: LogNormal, attempt: Callable[[], Outcome]) -> Any:
        """One SDK call: tries under the standard retry mode, each taking its latency."""
        self.stats.requests[op] += 1
        tries = 1 if op == "TransactWriteItems" else SDK_MAX_ATTEMPTS
        kernel = self.kernel
        for i in range(1, tries + 1):
            outcome = attempt()
            wait_call(kernel, latency.sample(self._rng), self.latency.client_cpu_ms)
            if not isinstance(outcome, _Throttled):
                value, error = outcome
                if error is not None:
                    raise error
                return value
            self.stats.throttled_attempts[op] += 1
            if i < tries:
                kernel.sleep(self._rng.random() * min(2.0 ** (i - 1), SDK_MAX_BACKOFF_S))
        self.stats.unavailable[op] += 1
        raise StoreUnavailable(f"{op}: throttled after {tries} attempts", throttled=True)

    def _transaction(self, attempt: Callable[[], Outcome]) -> None:
        """The adapter's retries of a transaction cancelled for throttling (botocore retries
        none), with its full-jitter backoff; then StoreUnavailable."""
        for i in range(TRANSACTION_RETRIES):
            try:
                self._request("TransactWriteItems", self.latency.transact, attempt)
                return
            except StoreUnavailable:
                if i == TRANSACTION_RETRIES - 1:
                    raise
                self.kernel.sleep(self._rng.uniform(0, TRANSACTION_BACKOFF_MS * 2**i) / 1000)

    def _part(self, index: str, key: str) -> Partition:
        return self.capacity.partition(index, key)

    # -------------------------------------------------------------------------- writes

    def _write_cost(
        self, old: Item | None, new: Item, size: int, factor: int = 1
    ) -> list[tuple[Partition, float]]:
        """The partitions a successful write consumes from, and how much (index entries
        included: 1 to add or remove one, 2 when its key changes, 1 for a projected change)."""
        pk = new["pk"]
        before = self._sizes.get((pk, new["sk"]), 0)
        base = write_units(before, size) * factor
        out = [(self._part(TABLE_NAME, pk), float(base))]
        for index in TABLE.indexes:
            was, now = _index_key(index, old), _index_key(index, new)
            if was == now:
                if now is not None and any(
                    (old or {}).get(a) != new.get(a) for a in index.non_key_attributes
                ):
                    out.append((self._part(index.name, str(now[0])), 1.0))
                continue
            if was is not None:
                out.append((self._part(index.name, str(was[0])), 1.0))
            if now is not None:
                out.append((self._part(index.name, str(now[0])), 1.0))
        return out

    def _condition_lost(self, pk: str, current: Item | None) -> Outcome:
        """A lost condition costs the existing item's size in WRU (at least 1)."""
        units = float(write_units(self._sizes.get((pk, (current or {}).get("sk", "")), 0), 0))
        if not self.capacity.admit(self.kernel.now, [(self._part(TABLE_NAME, pk), units)], []):
            return THROTTLED
        self.stats.conditional_failures += 1
        self.stats.wru_table += units
        self.stats.wru_by[self.actor()] += units
        return (None, ConditionFailed(dict(current) if current is not None else None))

    def _admit_writes(self, costs: list[tuple[Partition, float]]) -> bool:
        if not self.capacity.admit(self.kernel.now, costs, []):
            return False
        for part, units in costs:
            if part.index == TABLE_NAME:
                self.stats.wru_table += units
            else:
                self.stats.wru_index += units
        self.stats.wru_by[self.actor()] += sum(units for _, units in costs)
        return True

    def _size_after(self, old: Item | None, new: Item, names: Iterable[str]) -> int:
        """The new image's size, from the old one's and the attributes the write touched
        (a full walk of the item only when there is no old image)."""
        before = None if old is None else self._sizes.get((new["pk"], new["sk"]))
        if old is None or before is None:
            return item_size(new)
        size = before
        for name in names:
            if name in old:
                size -= len(name) + attribute_size(old[name])
            if name in new:
                size += len(name) + attribute_size(new[name])
        return size

    def _apply(self, old: Item | None, new: Item, size: int) -> None:
        pk, sk = new["pk"], new["sk"]
        self._table.setdefault(pk, {})[sk] = new
        self._sizes[(pk, sk)] = size
        for index in TABLE.indexes:
            was, now = _index_key(index, old), _index_key(index, new)
            changed = any((old or {}).get(a) != new.get(a) for a in index.non_key_attributes)
            if was != now or (now is not None and changed):
                self._propagate(index.name, pk, sk, old, new)
        for observer in self.observers:
            observer(old, new)

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        def attempt() -> Outcome:
            current = self._table.get(pk, {}).get(sk)
            if condition is not None and not evaluate(condition, current):
                return self._condition_lost(pk, current)
            new = update.apply(current or {"pk": pk, "sk": sk})
            size = self._size_after(current, new, update.names())
            if size > DYNAMODB_ITEM_LIMIT:
                return (None, ItemTooLarge(f"item {pk}/{sk} would exceed 400 KB"))
            if not self._admit_writes(self._write_cost(current, new, size)):
                return THROTTLED
            self._apply(current, new, size)
            return (dict(new), None)

        result: Item = self._request("UpdateItem", self.latency.write, attempt)
        return result

    def put_new(self, item: Item) -> None:
        pk, sk = item["pk"], item["sk"]

        def attempt() -> Outcome:
            current = self._table.get(pk, {}).get(sk)
            if current is not None:
                return self._condition_lost(pk, current)
            size = item_size(item)
            if size > DYNAMODB_ITEM_LIMIT:
                return (None, ItemTooLarge(f"item {pk}/{sk} would exceed 400 KB"))
            if not self._admit_writes(self._write_cost(None, item, size)):
                return THROTTLED
            self._apply(None, dict(item), size)
            return (None, None)

        self._request("PutItem", self.latency.write, attempt)

    def create(self, items: Sequence[Item]) -> None:
        def attempt() -> Outcome:
            for i, item in enumerate(items):
                existing = self._table.get(item["pk"], {}).get(item["sk"])
                if existing is not None:
                    return (None, TransactionConflict(i, dict(existing)))
            sizes = [item_size(item) for item in items]
            if max(sizes, default=0) > DYNAMODB_ITEM_LIMIT:
                return (None, ItemTooLarge("an item would exceed 400 KB"))
            costs = [
                c
                for item, size in zip(items, sizes, strict=True)
                for c in self._write_cost(None, item, size, factor=2)
            ]
            if not self._admit_writes(costs):
                return THROTTLED
            for item, size in zip(items, sizes, strict=True):
                self._apply(None, dict(item), size)
            return (None, None)

        self._transaction(attempt)

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        def attempt() -> Outcome:
            olds: list[Item | None] = []
            for i, (pk, sk, _, condition) in enumerate(writes):
                current = self._table.get(pk, {}).get(sk)
                if not evaluate(condition, current):
                    return (None, TransactionConflict(i, dict(current) if current else None))
                olds.append(current)
            news = [
                update.apply(old or {"pk": pk, "sk": sk})
                for old, (pk, sk, update, _) in zip(olds, writes, strict=True)
            ]
            sizes = [
                self._size_after(old, new, w[2].names())
                for old, new, w in zip(olds, news, writes, strict=True)
            ]
            if max(sizes, default=0) > DYNAMODB_ITEM_LIMIT:
                return (None, ItemTooLarge("a transaction's item would exceed 400 KB"))
            costs = [
                c
                for old, new, size in zip(olds, news, sizes, strict=True)
                for c in self._write_cost(old, new, size, 2)
            ]
            if not self._admit_writes(costs):
                return THROTTLED
            for old, new, size in zip(olds, news, sizes, strict=True):
                self._apply(old, new, size)
            return (None, None)

        self._transaction(attempt)

    # --------------------------------------------------------------------------- reads

    def _read(self, pk: str, units: float) -> bool:
        if not self.capacity.admit(self.kernel.now, [], [(self._part(TABLE_NAME, pk), units)]):
            return False
        self._read_units(units)
        return True

    def _read_units(self, units: float) -> None:
        self.stats.rru += units
        self.stats.rru_by[self.actor()] += units

    def load(self, pk: str) -> list[Item]:
        def attempt() -> Outcome:
            found = self._table.get(pk, {})
            size = sum(self._sizes.get((pk, sk), 0) for sk in found)
            if not self._read(pk, read_units(size)):
                return THROTTLED
            items = [dict(found[sk]) for sk in sorted(found)]
            for observer in self.load_observers:
                observer(self.actor(), items)
            return (items, None)

        result: list[Item] = self._request("Query", self.latency.query, attempt)
        return result

    def get(self, pk: str, sk: str) -> Item | None:
        def attempt() -> Outcome:
            item = self._table.get(pk, {}).get(sk)
            if not self._read(pk, read_units(self._sizes.get((pk, sk), 0))):
                return THROTTLED
            return (None if item is None else dict(item), None)

        result: Item | None = self._request("GetItem", self.latency.get, attempt)
        return result

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        """A consistent BatchGetItem: the items that exist, in the order asked; each item
        rounded up to 4 KB on its own. Throttled whole (the SDK retries it as one call)."""

        def attempt() -> Outcome:
            costs: dict[str, float] = {}
            for pk, sk in keys:
                units = read_units(self._sizes.get((pk, sk), 0))
                costs[pk] = costs.get(pk, 0.0) + units
            reads = [(self._part(TABLE_NAME, pk), u) for pk, u in costs.items()]
            if not self.capacity.admit(self.kernel.now, [], reads):
                return THROTTLED
            self._read_units(sum(costs.values()))
            found = [self._table.get(pk, {}).get(sk) for pk, sk in keys]
            return ([dict(item) for item in found if item is not None], None)

        result: list[Item] = self._request("BatchGetItem", self.latency.batch_get, attempt)
        return result

    # ------------------------------------------------------------------------- indexes

    def _propagate(self, index: str, pk: str, sk: str, old: Item | None, new: Item) -> None:
        """The index sees this write after a propagation delay, in order per item."""
        key = (index, pk + "\x00" + sk)
        when = max(
            self.kernel.now + self.latency.propagation.sample(self._rng),
            self._last_apply.get(key, 0.0),
        )
        self._last_apply[key] = when
        self._pending_seq += 1
        heapq.heappush(self._pending, (when, self._pending_seq, index, pk, old, new))

    def settle(self) -> None:
        """Apply the index changes whose propagation delay has passed."""
        pending = self._pending
        now = self.kernel.now
        watch, listing = TABLE.watch_index, TABLE.list_index
        while pending and pending[0][0] <= now:
            _, _, index, pk, old, new = heapq.heappop(pending)
            if index not in (watch.name, listing.name):
                continue  # the filter indexes: their units are counted, no run reads them
            spec = watch if index == watch.name else listing
            rows = self._watch if spec is watch else self._list
            was, key = _index_key(spec, old), _index_key(spec, new)
            if was is not None and was != key:
                entries = rows.get(str(was[0]), [])
                at = bisect.bisect_left(entries, (was[1], pk))
                if at < len(entries) and entries[at] == (was[1], pk):
                    del entries[at]
            if key is not None and was != key:
                bisect.insort(rows.setdefault(str(key[0]), []), (key[1], pk))
            if spec is listing:
                if key is None or new is None:
                    self._projected.pop(pk, None)
                else:
                    names = (
                        "pk",
                        "sk",
                        spec.partition_key,
                        spec.sort_key,
                        *spec.non_key_attributes,
                    )
                    self._projected[pk] = {n: new[n] for n in names if n in new}

    def query_due(
        self, shard: str, until_ms: int, limit: int, cursor: dict[str, object] | None
    ) -> DuePage:
        def attempt() -> Outcome:
            self.settle()
            entries = self._watch.get(shard, [])
            start = 0
            if cursor is not None:
                start = bisect.bisect_right(entries, (cursor["due_at"], cursor["pk"]))
            stop = bisect.bisect_right(entries, (until_ms, "\U0010ffff"))
            page = entries[start : min(stop, start + limit)]
            units = read_units(len(page) * INDEX_ENTRY_BYTES, consistent=False)
            part = self._part(TABLE.watch_index.name, shard)
            if not self.capacity.admit(self.kernel.now, [], [(part, units)]):
                return THROTTLED
            self._read_units(units)
            more = start + limit < stop
            next_cursor = {"due_at": page[-1][0], "pk": page[-1][1]} if more and page else None
            found = [DueEntry(workflow_id_of(pk), int(due)) for due, pk in page]
            return (DuePage(found, next_cursor, len(page)), None)

        result: DuePage = self._request("Query", self.latency.query, attempt)
        return result

    def query_list(
        self, list_pk: str, limit: int, cursor: dict[str, object] | None, newest_first: bool
    ) -> ListPage:
        spec = TABLE.list_index

        def attempt() -> Outcome:
            self.settle()
            rows = self._list.get(list_pk, [])
            ordered = list(reversed(rows)) if newest_first else rows
            if cursor:
                last = cursor[spec.sort_key]
                ordered = [r for r in ordered if (r[0] < last if newest_first else r[0] > last)]
            page = [self._projected[pk] for _, pk in ordered[:limit]]
            units = read_units(sum(item_size(i) for i in page), consistent=False)
            if not self.capacity.admit(
                self.kernel.now, [], [(self._part(spec.name, list_pk), units)]
            ):
                return THROTTLED
            self._read_units(units)
            more = len(ordered) > limit
            next_cursor = {spec.sort_key: page[-1][spec.sort_key]} if more and page else None
            return (ListPage([dict(i) for i in page], next_cursor), None)

        result: ListPage = self._request("Query", self.latency.query, attempt)
        return result

    # The filtered list queries, a workflow's history and the counts (GET /workflows with
    # filters, /events, /counts) are reads no run of the model makes: its load is starts,
    # agents, callbacks and sweeps. They are refused rather than answered unmodelled.
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
        raise NotImplementedError("the scale model serves no list queries")

    def query_after(self, pk: str, after_sk: str, limit: int) -> ListPage:
        raise NotImplementedError("the scale model serves no history reads")

    def count_range(self, index: IndexSpec, partition: str, low: str, high: str, cap: int) -> int:
        raise NotImplementedError("the scale model serves no counts")

    # ----------------------------------------------------------------- model's own view

    def peek(self, pk: str) -> list[Item]:
        """A workflow's items as they are, for the model's own bookkeeping (no request)."""
        found = self._table.get(pk, {})
        return [found[sk] for sk in sorted(found)]

    def evict(self, pk: str) -> None:
        """Forget a finished workflow's collection (memory): nothing reads it again but a
        late duplicate, which finds nothing instead of a finished workflow (both drop)."""
        for sk in self._table.pop(pk, {}):
            self._sizes.pop((pk, sk), None)
            for index in TABLE.indexes:
                self._last_apply.pop((index.name, pk + "\x00" + sk), None)
        self._projected.pop(pk, None)

    def seed(self, items: Sequence[Item]) -> None:
        """Load items that exist before the run (the open population), indexes settled,
        no request, no units."""
        for item in items:
            old = self._table.get(item["pk"], {}).get(item["sk"])
            self._table.setdefault(item["pk"], {})[item["sk"]] = item
            self._sizes[(item["pk"], item["sk"])] = item_size(item)
            for index in TABLE.indexes:
                self._pending_seq += 1
                heapq.heappush(
                    self._pending, (0.0, self._pending_seq, index.name, item["pk"], old, item)
                )
        self.settle()

    def collections(self) -> int:
        return len(self._table)

    def watch_entries(self) -> int:
        self.settle()
        return sum(len(v) for v in self._watch.values())
