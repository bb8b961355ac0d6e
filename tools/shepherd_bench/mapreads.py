"""Bounded reads of a map (issue 24): how many keys a supervisor look, an item's claim and
result, `GET /workflows/{id}` and `GET /workflows/{id}/steps/{step}/items` read
(`shepherd_bench.maps` runs the maps).

`KeyCounter` wraps the engine's store port and counts the keys every read request touches
(asked for, for a `BatchGetItem`; returned, for a query) under the kind of operation running
then: `look` (`Supervisor.look`), `claim` (`Scheduler.load_item`, an item message's read),
`result` (`Scheduler.record_result`), `accounting` (`Maps.account`: none, the write returns
the counters), `view` and `items` (the API's two reads, marked by whoever makes them). It
keeps the most keys one operation read (all its requests) and the most one request read.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shepherd.conditions import Cond, Item, Update
from shepherd.ports import DuePage, ListPage, Store
from shepherd.topology import IndexSpec

KINDS = ("look", "claim", "result", "accounting", "view", "items")


class KeyCounter:
    """A store port that counts the keys of every read under the operation running then.
    Writes pass through uncounted (their price is the meter's)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._local = threading.local()
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.operations: Counter[str] = Counter()
            self._most_operation: Counter[str] = Counter()
            self._most_request: Counter[str] = Counter()

    def most_per_operation(self) -> dict[str, int]:
        """The most keys one operation of each kind read (all its read requests)."""
        return {k: self._most_operation[k] for k in KINDS}

    def most_per_request(self) -> dict[str, int]:
        """The most keys one read request of each kind touched."""
        return {k: self._most_request[k] for k in KINDS}

    @contextlib.contextmanager
    def during(self, kind: str) -> Iterator[None]:
        """Count the reads made here as one operation of `kind` (the innermost one wins)."""
        outer = getattr(self._local, "open", None)
        self._local.open = [kind, 0]
        try:
            yield
        finally:
            _, keys = self._local.open
            self._local.open = outer
            with self._lock:
                self.operations[kind] += 1
                self._most_operation[kind] = max(self._most_operation[kind], keys)

    def wrap(self, kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self.during(kind):
                return fn(*args, **kwargs)

        return counted

    def _count(self, keys: int) -> None:
        current = getattr(self._local, "open", None)
        if current is None:
            return
        current[1] += keys
        with self._lock:
            self._most_request[current[0]] = max(self._most_request[current[0]], keys)

    # ------------------------------------------------------------------------ the port

    def create(self, items: Sequence[Item]) -> None:
        self.store.create(items)

    def put_new(self, item: Item) -> None:
        self.store.put_new(item)

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        self.store.transact(writes)

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        return self.store.update(pk, sk, update, condition)

    def load(self, pk: str) -> list[Item]:
        items = self.store.load(pk)
        self._count(len(items))
        return items

    def get(self, pk: str, sk: str) -> Item | None:
        self._count(1)
        return self.store.get(pk, sk)

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        self._count(len(keys))
        return self.store.get_many(keys)

    def query_due(
        self, shard: str, until_ms: int, limit: int, cursor: dict[str, object] | None
    ) -> DuePage:
        page = self.store.query_due(shard, until_ms, limit, cursor)
        self._count(page.items_read)
        return page

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
        page = self.store.query_range(
            index, partition, low, high, limit=limit, newest_first=newest_first, cursor=cursor
        )
        self._count(len(page.items))
        return page

    def query_after(self, pk: str, after_sk: str, limit: int) -> ListPage:
        page = self.store.query_after(pk, after_sk, limit)
        self._count(len(page.items))
        return page

    def count_range(self, index: IndexSpec, partition: str, low: str, high: str, cap: int) -> int:
        found = self.store.count_range(index, partition, low, high, cap)
        self._count(found)
        return found

    def __getattr__(self, name: str) -> Any:  # an adapter's own helpers, uncounted
        return getattr(self.store, name)


def instrument(engine: Any, counter: KeyCounter) -> None:
    """Mark the engine's looks, item claims, results and accountings
    (`shepherd.engine.build.Engine`)."""
    scheduler, supervisor = engine.scheduler, engine.supervisor
    scheduler.load_item = counter.wrap("claim", scheduler.load_item)
    scheduler.record_result = counter.wrap("result", scheduler.record_result)
    scheduler.maps.account = counter.wrap("accounting", scheduler.maps.account)
    supervisor.look = counter.wrap("look", supervisor.look)
