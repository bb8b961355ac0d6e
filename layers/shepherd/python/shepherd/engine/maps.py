"""The map runtime (issue 24): a map step's items as units of their own.

A map step is sent to its pool like any step; the agent that claims it opens the map instead
of running an agent (`Maps.open`): it reads the items `ItemsPath` selects, keeps them in
pages of `MAP_ITEM_PAGE`, and writes the map's counters and first window on the step's unit.
Each item is then a unit in the map's own partitions (`keys.map_item_key`) with a step's
transitions (claim, heartbeat, result, retry, timeout, cancel); the process that ends an item
counts it on the map's unit and sends the item that enters the window in its place
(`Maps.account`). A look reads the window's units, never more (`Maps.with_windows`). When the
counters decide the map and its window has drained, the step ends (`Maps.finish`): its output
is the item outputs in item order. Unwinding undoes the items that may have acted, through a
map of its own over their order (`Maps.open_compensation`). docs/architecture.md, "Map steps
and child workflows", is the contract.

Below the scheduler: it takes the executor and the ports, and returns the task messages its
writes announce for the caller to send.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from shepherd import fanout as paths
from shepherd import jsonsafe, limits
from shepherd.conditions import Eq, Exists, Item, Missing, Update, all_of
from shepherd.decisions import fanout as fo
from shepherd.decisions import transitions as tx
from shepherd.definitions import MAX_SQS_DELAY, Definition
from shepherd.engine.executor import Executor
from shepherd.errors import MapItemsInvalid, MapTooLarge
from shepherd.keys import (
    ITEM_PREFIX,
    MAP_ITEM_PAGE,
    MAP_PREFIX,
    Kind,
    map_item_key,
    map_shard_count,
    map_shard_of,
)
from shepherd.model import (
    PAGES,
    MapState,
    OutgoingTask,
    StepRecord,
    StepStatus,
    TaskMessage,
    WorkflowState,
    dumps,
)
from shepherd.payloads import Payloads, payload_key, stored_size
from shepherd.ports import MAX_BATCH_GET, Store

logger = logging.getLogger("shepherd.maps")

PAGE_SK = "P"  # an items page: pk MAP#<wf>#<step>#<page>, `v` the page's values (stored)
ORDER_SK = "O"  # a map compensation's order page: `v` the item indexes of its positions
PAGE_INPUT = "in"  # on an items page: the map step's replacement input (an operator's), if any
PAGE_SHARDS = "k"  # on an items page: the map's window shards (absent: window on its unit)
HALTED = "MapHalted"
ITEM_COMPENSATION_FAILED = "ItemCompensationFailed"
_PAGE_CACHE = 32  # resolved items pages kept per process (a claim reads its item's page)


def page_pk(workflow_id: str, step: str, page: int) -> str:
    return f"{MAP_PREFIX}{workflow_id}#{step}#{page}"


class _Ports(Protocol):
    store: Store
    clock: Any
    payloads: Payloads


ITEM_SCAN = 1000  # indexes a filtered page of items reads at most


@dataclass(frozen=True)
class ItemRow:
    """One item as a page of a map's items shows it (`unit`: None until it was written)."""

    index: int
    status: str
    unit: StepRecord | None


@dataclass(frozen=True)
class Accounted:
    """An item's end counted on its map (None: it had been counted already): the map as
    the write left it, and the unit that entered its window in its place (its message, for
    a map of agents; a map of child workflows starts its child instead)."""

    map_rec: StepRecord
    tasks: list[OutgoingTask]
    entered: tuple[int, ...] = ()


class Maps:
    """Opens maps, counts their items, decides and ends them, and undoes their items."""

    def __init__(self, executor: Executor, ports: _Ports, expires: Callable[[int], int]) -> None:
        self.executor = executor
        self.ports = ports
        self.expires = expires
        self._pages: OrderedDict[str, list[Any]] = OrderedDict()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------- reading

    def with_windows(self, state: WorkflowState) -> WorkflowState:
        """Read the units in the windows of the workflow's running maps (one BatchGetItem
        per 100, at most MaxConcurrency per map): what a look and a full advance plan on.
        An entry whose unit is not written yet is an unstored record sent when it entered."""
        wanted: list[tuple[StepRecord, int, tuple[str, str]]] = []
        for rec in (*state.steps.values(), *state.compensations.values()):
            m = rec.fanout
            if m is None or rec.status is not StepStatus.RUNNING:
                continue
            state.windows[(rec.kind, rec.name)] = {}
            for position in sorted(m.window):
                key = map_item_key(rec.workflow_id, rec.name, m.index_of(position), rec.kind)
                wanted.append((rec, position, key))
        if not wanted:
            return state
        found: dict[tuple[str, str], Item] = {}
        keys = [key for _, _, key in wanted]
        for start in range(0, len(keys), MAX_BATCH_GET):
            for got in self.ports.store.get_many(keys[start : start + MAX_BATCH_GET]):
                found[(got["pk"], got["sk"])] = got
        for rec, position, key in wanted:
            m = rec.fanout
            assert m is not None
            item = found.get(key)
            compensation = rec.kind == "compensation"
            unit = (
                StepRecord.from_item(item)
                if item is not None
                else StepRecord.unstored_item(
                    rec.workflow_id,
                    rec.name,
                    m.index_of(position),
                    state.workflow.wf_type,
                    m.window[position],
                    rec.kind,
                    position if compensation else None,
                )
            )
            if compensation and unit.position is None:
                unit = replace(unit, position=position)
            state.windows[(rec.kind, rec.name)][position] = unit
        return state

    def item_value(self, page_item: Item | None, index: int) -> Any:
        """Item `index`'s value from its page (a large page fetched once per process)."""
        if page_item is None:
            raise MapItemsInvalid(f"the page of item {index} is missing")
        stored = str(page_item["v"])
        with self._lock:
            values = self._pages.get(stored)
            if values is not None:
                self._pages.move_to_end(stored)
        if values is None:
            values = self.ports.payloads.value(stored)
            assert isinstance(values, list)
            with self._lock:
                self._pages[stored] = values
                while len(self._pages) > _PAGE_CACHE:
                    self._pages.popitem(last=False)
        return values[index % MAP_ITEM_PAGE]

    def units(self, workflow_id: str, step: str, pages: int) -> Iterable[StepRecord]:
        """Every item unit of a map, page by page (consistent reads): what its output and its
        compensation's order are made of, read once per map."""
        for page in range(pages):
            after = ITEM_PREFIX
            while True:
                batch = self.ports.store.query_after(page_pk(workflow_id, step, page), after, 1000)
                items = [i for i in batch.items if str(i["sk"]).startswith(ITEM_PREFIX)]
                for item in items:
                    yield StepRecord.from_item(item)
                if len(items) < len(batch.items) or not batch.items or batch.cursor is None:
                    break
                after = str(batch.items[-1]["sk"])

    def item_page(
        self, map_rec: StepRecord, start: int, limit: int, status: str | None = None
    ) -> tuple[list[ItemRow], int | None]:
        """Items `start`, `start + 1`, ... of a map as `GET .../steps/{step}/items` shows them,
        at most `limit`, and the index to go on from (None: the last). Reads the item
        partitions over at most `limit` indexes (`ITEM_SCAN` with a `status` filter, so a
        filtered page may hold fewer than `limit`): bounded whatever the item count. An item
        with no unit yet is QUEUED in the window, PENDING before it, CANCELLED once the map
        stopped without sending it."""
        m = map_rec.fanout
        if m is None or start >= m.total:
            return [], None
        end = min(m.total, start + (ITEM_SCAN if status else limit))
        units = self._units_between(map_rec, start, end)
        rows: list[ItemRow] = []
        stopped = m.status in ("FAILED", "CANCELLED")
        for index in range(start, end):
            found = units.get(index)
            if found is not None:
                shown = found.status.value
            elif index in m.window:
                shown = StepStatus.QUEUED.value
            else:
                shown = (StepStatus.CANCELLED if stopped else StepStatus.PENDING).value
            if status is not None and shown != status:
                continue
            rows.append(ItemRow(index, shown, found))
            if len(rows) == limit:
                return rows, (index + 1 if index + 1 < m.total else None)
        return rows, (end if end < m.total else None)

    def _units_between(self, map_rec: StepRecord, start: int, end: int) -> dict[int, StepRecord]:
        """The item units of indexes [start, end) that exist (consistent, page by page)."""
        units: dict[int, StepRecord] = {}
        for page in range(start // MAP_ITEM_PAGE, (end - 1) // MAP_ITEM_PAGE + 1):
            first = max(start, page * MAP_ITEM_PAGE)
            after = f"{ITEM_PREFIX}{first - 1:06d}" if first else ITEM_PREFIX
            pk = page_pk(map_rec.workflow_id, map_rec.name, page)
            while True:
                batch = self.ports.store.query_after(pk, after, min(1000, end - first + 1))
                fresh = [
                    StepRecord.from_item(i)
                    for i in batch.items
                    if str(i["sk"]).startswith(ITEM_PREFIX)
                ]
                done = len(fresh) < len(batch.items) or not batch.items
                for unit in fresh:
                    if unit.index is not None and unit.index < end:
                        units[unit.index] = unit
                    else:
                        done = True
                if done or batch.cursor is None:
                    break
                after = str(batch.items[-1]["sk"])
        return units

    # ------------------------------------------------------------------------- opening

    def open(
        self, state: WorkflowState, definition: Definition, rec: StepRecord, *, claimed: bool = True
    ) -> tuple[StepRecord | None, list[OutgoingTask]]:
        """Open the map of step `rec` (claimed by this process: RUNNING at its attempt):
        select its items, keep their pages, write its counters and first window, and return
        the messages of the items that entered. Raises MapItemsInvalid / MapTooLarge (its
        step then fails for good) before anything is written. None: another process opened
        it (a duplicate); its messages are that process's to send."""
        spec = definition.by_name[rec.name]
        assert spec.map is not None
        items = self._select(state, rec, spec.map.items_path)
        wf_id = rec.workflow_id
        pages = math.ceil(len(items) / MAP_ITEM_PAGE)
        for page in range(pages):
            chunk = items[page * MAP_ITEM_PAGE : (page + 1) * MAP_ITEM_PAGE]
            text = jsonsafe.dumps(chunk, what="map items")
            stored = self.ports.payloads.keep(
                text, payload_key(wf_id, "map", rec.name, "items", page)
            )
            # Idempotent: a second opener writes the same values (the items are read from
            # recorded values), and nothing reads a page before the map's open write. An
            # operator's replacement input for the map step (stored before it opened, fixed
            # while it runs) goes on each page: an item's claim reads its page, not the
            # map's unit, and every item is given it as `ctx.input`.
            fields: dict[str, Any] = {
                "v": stored,
                "t": len(items),
                PAGE_SHARDS: map_shard_count(spec.map.max_concurrency),
            }
            if rec.input is not None:
                fields[PAGE_INPUT] = rec.input
            self.ports.store.update(
                page_pk(wf_id, rec.name, page), PAGE_SK, Update(set=fields), None
            )
        now = self.ports.clock.now_ms()
        values, entered = fo.open_values(len(items), spec.map.max_concurrency, now)
        if claimed:  # a map of agents: its own message was claimed (RUNNING at its attempt)
            write = tx.Write(
                *rec.key,
                Update(set={**values, PAGES: pages}),
                all_of(
                    Eq("status", StepStatus.RUNNING.value),
                    Eq("attempt", rec.attempt),
                    Missing(fo.TOTAL),
                ),
            )
        else:  # a map of child workflows: opened by whoever saw it ready, as a child starts
            write = tx.open_directly(rec, now, {**values, PAGES: pages})
        opened = self.executor.step(state, write)
        if opened is None:
            return None, []
        tasks = (
            []
            if _children(definition, opened)
            else [self.task(definition, opened, i) for i in entered]
        )
        current, more = self.enter_rest(state, definition, opened, tasks)
        return current, more

    def enter_rest(
        self,
        state: WorkflowState,
        definition: Definition,
        rec: StepRecord,
        tasks: list[OutgoingTask] | None = None,
        index_of: Callable[[int], int] | None = None,
    ) -> tuple[StepRecord | None, list[OutgoingTask]]:
        """Enter the first window's remaining chunks (`fo.open_more`), by its opener or by a
        look when its opener died between chunks."""
        tasks = tasks or []
        current: StepRecord | None = rec
        while current is not None and current.fanout is not None:
            more = fo.open_more(current.key, current.fanout, self.ports.clock.now_ms(), index_of)
            if more is None:
                break
            if current.fanout.shards:  # a window shard created (or found created)
                new, found = self.executor.raw_or_current(more.write)
                if new is None and found is None:
                    break  # pragma: no cover - a store that returned nothing
                state.put_shard(current.kind, current.name, new or found or {})
                if new is not None and not _children(definition, current):
                    after = state.record(current.kind, current.name) or current
                    tasks += [self.task(definition, after, p) for p in more.entered]
                current = state.record(current.kind, current.name)
                continue
            written = self.executor.step(state, more.write)
            if written is None:
                return state.record(rec.kind, rec.name), tasks  # another process entered it
            if not _children(definition, written):
                tasks += [self.task(definition, written, p) for p in more.entered]
            current = written
        return current, tasks

    def _select(self, state: WorkflowState, rec: StepRecord, items_path: str) -> list[Any]:
        """The items `ItemsPath` selects: in the step's input (an operator's replacement, or
        the workflow's) or in the output of a step it depends on."""
        path = paths.parse_path(items_path)  # validated at load
        if path.step is None:
            value = self.ports.payloads.value(rec.input or state.workflow.input)
        else:
            dep = state.steps.get(path.step)
            stored = dep.output if dep is not None and dep.stored else self._output(rec, path.step)
            value = self.ports.payloads.value(stored)
        try:
            selected = paths.select(path, value)
        except paths.PathError as exc:
            raise MapItemsInvalid(f"Map.ItemsPath {items_path}: {exc}") from None
        if not isinstance(selected, list):
            raise MapItemsInvalid(
                f"Map.ItemsPath {items_path} selects a {type(selected).__name__}, not an array"
            )
        if len(selected) > limits.MAX_MAP_ITEMS:
            raise MapTooLarge(
                f"Map.ItemsPath {items_path} selects {len(selected)} items; a map takes at "
                f"most {limits.MAX_MAP_ITEMS}"
            )
        return selected

    def _output(self, rec: StepRecord, step: str) -> str | None:
        item = self.ports.store.get(*StepRecord.unstored(rec.workflow_id, step, "").key)
        return None if item is None else item.get("output")

    # ---------------------------------------------------------------------- accounting

    def account(
        self,
        state: WorkflowState,
        definition: Definition,
        map_rec: StepRecord,
        position: int,
        outcome: str,
    ) -> Accounted | None:
        """Count the end of the unit at `position` of a map's window and, while the map runs,
        bring the next of its stripe into the window (whose message is returned). Needs no
        read: the write returns the counters. None if it was counted already."""
        seen = map_rec
        refill = True
        spec = definition.by_name[map_rec.name].map if map_rec.kind == "step" else None
        for _ in range(2):  # a refill that met a stopped (or decided) map: again without it
            m = seen.fanout
            if m is None:
                return None
            follower = position + m.stride
            follower_index = None
            if seen.kind == "compensation" and m.status == "RUNNING" and follower < m.total:
                follower_index = self.order_index(seen.workflow_id, seen.name, follower)
            now = self.ports.clock.now_ms()
            acc = fo.account(
                seen.key,
                m,
                position,
                outcome,  # type: ignore[arg-type]
                now,
                follower_index,
                tolerated_failures=fo.tolerated(m.total, spec),
                refill=refill,
            )
            new, current = self.executor.raw_or_current(acc.write)
            sharded = m.shards > 0
            if new is not None:
                if sharded:
                    state.put_shard(seen.kind, seen.name, new)
                    rec = self._after_shard(state, definition, seen, position, new, outcome)
                else:
                    rec = StepRecord.from_item(new)
                    state.put(rec)
                window = state.windows.get((rec.kind, rec.name))
                if window is not None:
                    window.pop(position, None)
                    for p in acc.entered:
                        window[p] = StepRecord.unstored_item(
                            rec.workflow_id,
                            rec.name,
                            follower_index if follower_index is not None else p,
                            state.workflow.wf_type,
                            now,
                            rec.kind,
                            p if rec.kind == "compensation" else None,
                        )
                tasks = (
                    []
                    if _children(definition, rec)
                    else [self.task(definition, rec, p) for p in acc.entered]
                )
                return Accounted(rec, tasks, acc.entered)
            if current is None:
                return None
            if sharded:
                state.put_shard(seen.kind, seen.name, current)
                seen = state.record(seen.kind, seen.name) or seen
            else:
                seen = StepRecord.from_item(current)
                state.put(seen)
            fresh = seen.fanout
            if fresh is None or position not in fresh.window:
                return None  # counted already (a duplicate, a late result, a racing look)
            refill = False  # its entry holds: the refill's condition lost
        return None

    def _after_shard(
        self,
        state: WorkflowState,
        definition: Definition,
        seen: StepRecord,
        position: int,
        shard_item: Item,
        outcome: str,
    ) -> StepRecord:
        """After an accounting on a window shard: the map as far as this process knows it.
        The shard's own counts are lower bounds of the map's, enough for most verdicts; when
        the shard has accounted all its items it is marked done on the unit (a SET), and when
        that made every shard done, or a failure may pass a tolerance the shard alone does
        not, every shard is read (K keys) for the map's exact counts."""
        rec = state.record(seen.kind, seen.name) or seen
        m = rec.fanout
        assert m is not None
        shard = map_shard_of(position, m.stride, m.shards)
        mine = sum(int(shard_item.get(c, 0)) for c in (fo.SUCCEEDED, fo.FAILED, fo.CANCELLED))
        whole = False
        if mine >= m.shard_items(shard) and shard not in m.done:
            marked = self.executor.step(state, fo.mark_done(rec.key, shard))
            rec = state.record(seen.kind, seen.name) or rec
            whole = (
                marked is not None
                and marked.fanout is not None
                and len(marked.fanout.done) >= m.shards
            )
        elif outcome == "failed" and m.shards > 1 and m.status == "RUNNING":
            spec = definition.by_name[rec.name].map if rec.kind == "step" else None
            whole = 0 < int(shard_item.get(fo.FAILED, 0)) <= fo.tolerated(m.total, spec)
        if whole:
            self.with_shards(state, [(rec.kind, rec.name)])
            rec = state.record(seen.kind, seen.name) or rec
        return rec

    def with_shards(
        self, state: WorkflowState, maps: Iterable[tuple[Kind, str]] | None = None
    ) -> WorkflowState:
        """Read every window shard of the state's sharded maps whose shards were not read with
        it (or of `maps`): one BatchGetItem of K keys a map (K = MaxConcurrency / 32, up)."""
        named = None if maps is None else set(maps)
        wanted: list[tuple[Kind, str]] = []
        for rec in (*state.steps.values(), *state.compensations.values()):
            m = rec.fanout
            if m is None or not m.shards or rec.status.terminal:
                continue
            if (named is None and not m.loaded) or (named and (rec.kind, rec.name) in named):
                wanted.append((rec.kind, rec.name))
        for kind, name in wanted:
            got = state.record(kind, name)
            assert got is not None
            assert got.fanout is not None
            keys = [fo.shard_key(got.key, s) for s in range(got.fanout.shards)]
            found: list[Item] = []
            for start in range(0, len(keys), MAX_BATCH_GET):
                found += self.ports.store.get_many(keys[start : start + MAX_BATCH_GET])
            state.shards[(kind, name)] = {}
            state.shards_whole.add((kind, name))
            for item in found:
                state.put_shard(kind, name, item)
            state.put(got)
        return state

    def order_index(self, workflow_id: str, step: str, position: int) -> int:
        """The item a map compensation's `position` undoes (its order page, one read)."""
        page = position // MAP_ITEM_PAGE
        item = self.ports.store.get(page_pk(workflow_id, step, page), ORDER_SK)
        if item is None:
            raise RuntimeError(f"order page {page} of '{step}' is missing")
        return int(item["v"][position % MAP_ITEM_PAGE])

    def decide(self, state: WorkflowState, map_rec: StepRecord, verdict: str) -> bool:
        """RUNNING -> `verdict` on the map's own status (SUCCEEDED, FAILED, or CANCELLED: a
        halt), once. A sharded map's shards are closed first (FAILED, CANCELLED: no refill
        lands after it; a SUCCEEDED map has nothing left to refill)."""
        m = map_rec.fanout
        if m is not None and m.shards and verdict != "SUCCEEDED":
            for close in fo.close_shards(map_rec.key, m, verdict):  # type: ignore[arg-type]
                new, _ = self.executor.raw_or_current(close)
                if new is not None:
                    state.put_shard(map_rec.kind, map_rec.name, new)
        write = tx.Write(*map_rec.key, Update(set={fo.STATUS: verdict}), Eq(fo.STATUS, "RUNNING"))
        return self.executor.step(state, write) is not None

    # -------------------------------------------------------------------------- ending

    def finish(self, state: WorkflowState, definition: Definition, map_rec: StepRecord) -> bool:
        """End a decided map whose window drained: SUCCEEDED with the item outputs in item
        order (read once, page by page), or FAILED with why."""
        m = map_rec.fanout
        assert m is not None
        now = self.ports.clock.now_ms()
        expires = self.expires(now)
        for shard in range(m.shards):  # its window shards expire with it (K small writes)
            key = fo.shard_key(map_rec.key, shard)
            self.executor.raw_or_current(
                tx.Write(*key, Update(set={"expires_at": expires}), Exists(fo.STATUS))
            )
        if m.status == "SUCCEEDED":
            output: str | None
            if map_rec.kind == "compensation":
                output = dumps({"compensated": m.succeeded})
            else:
                output = self._output_of(map_rec, m)
                if output is None:
                    error = tx.error_json(
                        "OutputTooLarge",
                        f"the map's outputs together pass {limits.MAX_OUTPUT_BYTES} bytes",
                    )
                    write = tx.finish_map(
                        map_rec, now, expires, seen_status="SUCCEEDED", error=error
                    )
                    return self.executor.step(state, write) is not None
            write = tx.finish_map(map_rec, now, expires, seen_status="SUCCEEDED", output=output)
            return self.executor.step(state, write) is not None
        if m.status == "FAILED":
            error = self._failure(definition, map_rec, m)
            write = tx.finish_map(map_rec, now, expires, seen_status="FAILED", error=error)
        else:
            error = tx.error_json(
                HALTED,
                f"the workflow unwound while the map ran ({m.succeeded} items succeeded, "
                f"{m.failed} failed, {m.cancelled} cancelled, {m.pending} never sent)",
            )
            write = tx.finish_map(
                map_rec, now, expires, seen_status=m.status, error=error, reason="unwinding"
            )
        return self.executor.step(state, write) is not None

    def _failure(self, definition: Definition, map_rec: StepRecord, m: MapState) -> str:
        if map_rec.kind == "compensation":
            return tx.error_json(
                ITEM_COMPENSATION_FAILED,
                f"the compensation of {m.failed} of {m.total} items failed for good",
            )
        spec = definition.by_name[map_rec.name].map
        assert spec is not None
        given = [
            f"{alias} {value:g}"
            for alias, value in (
                ("ToleratedFailureCount", spec.tolerated_failure_count),
                ("ToleratedFailurePercentage", spec.tolerated_failure_percentage),
            )
            if value is not None
        ]
        allowed = fo.tolerated(m.total, spec)
        tolerance = f"{allowed} tolerated ({', '.join(given)})" if given else "none tolerated"
        return tx.error_json(
            fo.EXCEEDED,
            f"{m.failed} of {m.total} items failed, {tolerance}" + self._first_failure(map_rec, m),
        )

    def _first_failure(self, map_rec: StepRecord, m: MapState) -> str:
        """`; item 3: CardDeclined: ...`: the error of the first failed item, what a person
        fixes (the map's own error only counts them). Reads item pages until it finds one."""
        for unit in self.units(map_rec.workflow_id, map_rec.name, m.pages):
            if unit.status is StepStatus.FAILED and unit.error:
                cut = json.loads(unit.error)
                return f"; item {unit.index}: {cut.get('type', 'Error')}: {cut.get('message', '')}"
        return ""

    def _output_of(self, map_rec: StepRecord, m: MapState) -> str | None:
        """The step's output as stored: every item's output in item order (None for an item
        the tolerance let fail), kept in the payload bucket when large; None when over the
        output cap."""
        outputs: dict[int, Any] = {}
        size = 2
        for unit in self.units(map_rec.workflow_id, map_rec.name, m.pages):
            if unit.status is StepStatus.SUCCEEDED and unit.index is not None:
                size += stored_size(unit.output) + 1
                if size > limits.MAX_OUTPUT_BYTES:
                    return None
                outputs[unit.index] = self.ports.payloads.value(unit.output)
        text = jsonsafe.dumps(fo.output_list(m.total, outputs), what="map output")
        key = payload_key(map_rec.workflow_id, "step", map_rec.name, map_rec.attempt, "output")
        return self.ports.payloads.keep(text, key)

    # ----------------------------------------------------------------- item compensation

    def open_compensation(
        self, state: WorkflowState, definition: Definition, name: str
    ) -> tuple[bool, list[OutgoingTask]]:
        """Start undoing a map step's items: read its units once, choose those that may have
        acted (`When`) in the order they are undone (`fo.to_compensate`), keep the order in
        pages, and create the compensation's unit `C#<step>` with its counters and first
        window over positions in that order (one at a time under `CompensationOrder:
        REVERSE`, MaxConcurrency at a time under PARALLEL). False: it exists already."""
        spec = definition.by_name[name]
        assert spec.compensation is not None or spec.workflow is not None
        assert spec.map is not None
        forward = state.steps[name]
        m = forward.fanout
        assert m is not None
        views = [
            fo.ItemView(
                u.index,
                u.status.value,
                u.attempt,
                u.dispatched_at,
                u.finished_at,
                u.first_claimed_at,
            )
            for u in self.units(forward.workflow_id, name, m.pages)
            if u.index is not None
        ]
        compensation = spec.compensation
        when = "SUCCEEDED" if compensation is None else compensation.when
        order = fo.to_compensate(views, when)
        wf = state.workflow
        for page in range(math.ceil(len(order) / MAP_ITEM_PAGE)):
            chunk = order[page * MAP_ITEM_PAGE : (page + 1) * MAP_ITEM_PAGE]
            self.ports.store.update(
                page_pk(wf.workflow_id, name, page), ORDER_SK, Update(set={"v": chunk}), None
            )
        stride = 1 if definition.compensation_order == "REVERSE" else spec.map.max_concurrency
        now = self.ports.clock.now_ms()
        values, entered = fo.open_values(len(order), stride, now, order.__getitem__)
        item = tx.new_compensation(wf.workflow_id, wf.wf_type, name, now)
        item.update(
            status=StepStatus.RUNNING.value,
            attempt=1,
            claimed_at=now,
            first_claimed_at=now,
            **values,
        )
        item[PAGES] = math.ceil(len(order) / MAP_ITEM_PAGE)
        if not self.executor.create_step(state, item):
            return False, []
        rec = state.compensations[name]
        tasks = (
            [] if _children(definition, rec) else [self.task(definition, rec, p) for p in entered]
        )
        _, tasks = self.enter_rest(state, definition, rec, tasks, order.__getitem__)
        return True, tasks

    # -------------------------------------------------------------------------- messages

    @staticmethod
    def task(definition: Definition, map_rec: StepRecord, position: int) -> OutgoingTask:
        """The message of the unit at `position` of a map's window (attempt 1: it enters)."""
        m = map_rec.fanout
        assert m is not None
        kind: Kind = map_rec.kind
        compensation = kind == "compensation"
        message = TaskMessage(
            map_rec.workflow_id,
            map_rec.name,
            1,
            kind,
            item=m.index_of(position),
            position=position if compensation else None,
        )
        return OutgoingTask(definition.spec(kind, map_rec.name).pool, message)


def _children(definition: Definition, rec: StepRecord) -> bool:
    """A map of child workflows: its units start children instead of getting messages."""
    return definition.by_name[rec.name].workflow is not None


def unit_task(definition: Definition, unit: StepRecord, delay: int = 0) -> OutgoingTask:
    """A map unit's message for its current attempt (a re-send, a retry)."""
    message = TaskMessage(
        unit.workflow_id,
        unit.name,
        max(unit.attempt, 1),
        unit.kind,
        item=unit.index,
        position=unit.position,
    )
    return OutgoingTask(
        definition.spec(unit.kind, unit.name).pool, message, min(delay, MAX_SQS_DELAY)
    )


def outcome_of(unit: StepRecord) -> str:
    return {
        StepStatus.SUCCEEDED: "succeeded",
        StepStatus.FAILED: "failed",
    }.get(unit.status, "cancelled")
