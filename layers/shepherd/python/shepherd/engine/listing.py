"""The list indexes: keeping their status keys true, and reading them (a caller's workflows,
filtered, newest or oldest first, merged across the caller's shards; counts per status).

docs/architecture.md, The list indexes. Every entry a query reads is a match (one index
per filter, each filter a sort-key range), so a page is full unless the matches run out.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shepherd import keys
from shepherd.conditions import Item
from shepherd.decisions.transitions import Write
from shepherd.keys import CREATED_DIGITS, LIST_SHARDS, WF_SK
from shepherd.model import WorkflowRecord, WorkflowStatus
from shepherd.ports import MAX_BATCH_GET, Store
from shepherd.topology import TABLE, IndexSpec

COUNT_CAP = 10_000  # a status's count stops here and is reported as "at least"
_LATEST = 10**CREATED_DIGITS - 1
_AFTER_ANY_ID = "~"  # sorts after every workflow id ([A-Za-z0-9_-])


# ----------------------------------------------------------------- keeping keys true


def keyed(write: Write, listed: WorkflowRecord | Mapping[str, Any] | None) -> Write:
    """The write, with the list indexes' status keys added when it sets a workflow's status.

    `listed` is the workflow the write was decided on (its owner-independent parts: type,
    creation time, id). Only the executor calls this, so no transition knows the layout.
    """
    status = write.update.set.get("status") if write.sk == WF_SK else None
    if status is None:
        return write
    if listed is None:
        raise ValueError("a write that sets a workflow's status needs the workflow it changes")
    if isinstance(listed, WorkflowRecord):
        wf_type, created_at, workflow_id = listed.wf_type, listed.created_at, listed.workflow_id
    elif all(name in listed for name in ("wf_type", "created_at", "pk")):
        wf_type = str(listed["wf_type"])
        created_at = int(listed["created_at"])
        workflow_id = keys.workflow_id_of(str(listed["pk"]))
    else:  # an item too broken to list (a park of what never parsed): its keys stay
        return write
    extra = keys.status_keys(wf_type, str(status), created_at, workflow_id)
    return replace(write, update=replace(write.update, set={**write.update.set, **extra}))


# ------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class ListFilter:
    """What a list or a count is restricted to; times are epoch ms, both inclusive."""

    status: str | None = None
    wf_type: str | None = None
    created_after: int | None = None
    created_before: int | None = None
    newest_first: bool = True
    # A tag `(key, value)`: the by_key index's tag shards instead of the list's (issue 37).
    # Not combined with a status or a type (its entries' sort key is the creation time alone).
    tag: tuple[str, str] | None = None
    # A correlation `(signal name, canonical values)`: the by_key index's match shards (the
    # WaitForSignal steps waiting on these values, engine/signals.py `send_matching`).
    match: tuple[str, str] | None = None

    def index(self) -> IndexSpec:
        if self.tag is not None or self.match is not None:
            return TABLE.key_index
        if self.status and self.wf_type:
            return TABLE.type_status_index
        if self.status:
            return TABLE.status_index
        if self.wf_type:
            return TABLE.type_index
        return TABLE.list_index

    def partitions(self, owner: str) -> list[str]:
        """The index partitions a page merges: the owner's list shards, or the tag's."""
        if self.tag is not None:
            key, value = self.tag
            return [keys.tag_pk(owner, key, value, k) for k in range(keys.KEY_SHARDS)]
        if self.match is not None:
            name, values = self.match
            return [keys.match_pk(owner, name, values, k) for k in range(keys.KEY_SHARDS)]
        return [keys.list_shard_pk(owner, k) for k in range(LIST_SHARDS)]

    def prefix(self, status: str | None = None) -> str:
        if self.tag is not None or self.match is not None:
            return ""
        status = status or self.status
        parts = [p for p in (self.wf_type, status) if p]
        return "".join(f"{p}#" for p in parts)

    def bounds(self, status: str | None = None) -> tuple[str, str]:
        """The sort-key range: [prefix + after, prefix + before + any id]."""
        prefix = self.prefix(status)
        low = min(max(self.created_after or 0, 0), _LATEST)
        before = self.created_before if self.created_before is not None else _LATEST
        high = max(min(before, _LATEST), 0)
        return (
            f"{prefix}{low:0{CREATED_DIGITS}d}",
            f"{prefix}{high:0{CREATED_DIGITS}d}#{_AFTER_ANY_ID}",
        )


@dataclass(frozen=True)
class Position:
    """Where a page ended: its last row's creation time (ms) and workflow id. Every shard
    is ordered by the same (created, id), so this is every shard's position."""

    created_at: int
    workflow_id: str

    @property
    def sort_tail(self) -> str:
        return keys.list_sk(self.created_at, self.workflow_id)


@dataclass(frozen=True)
class ListedPage:
    items: list[Item]  # the workflow items, in page order (as read, consistently)
    next_position: Position | None
    queries: int  # index queries made (the merge's cost, for tests and the meter)


@dataclass
class _Shard:
    partition: str
    low: str
    high: str
    buffer: list[Item] = field(default_factory=list)
    cursor: dict[str, object] | None = None
    done: bool = False


def _tail(entry: Item, index: IndexSpec) -> str:
    """The `<created>#<id>` end of an entry's sort key (what the merge orders by)."""
    value = str(entry[index.sort_key])
    return value[-(CREATED_DIGITS + 1 + len(keys.workflow_id_of(str(entry["pk"])))) :]


def list_page(
    store: Store,
    owner: str,
    filters: ListFilter,
    *,
    limit: int,
    after: Position | None = None,
) -> ListedPage:
    """One page of the owner's matching workflows: a k-way merge of the owner's shards.

    Each shard is asked for about twice its share of the page and refilled only when it
    runs dry before the page is full, so a page costs `shards` queries plus rare refills,
    whatever the filter's rarity. `after` resumes strictly after a previous page's last row.
    """
    index = filters.index()
    low, high = filters.bounds()
    if after is not None:
        prefix = filters.prefix()
        if filters.newest_first:
            high = min(high, prefix + after.sort_tail)
        else:
            low = max(low, prefix + after.sort_tail)
    partitions = filters.partitions(owner)
    share = math.ceil(2 * limit / len(partitions)) + 1
    states = [_Shard(partition, low, high) for partition in partitions]
    queries = 0
    skip = after.sort_tail if after is not None else None

    def fill(shard: _Shard) -> None:
        nonlocal queries
        while not shard.buffer and not shard.done:
            page = store.query_range(
                index,
                shard.partition,
                shard.low,
                shard.high,
                limit=share,
                newest_first=filters.newest_first,
                cursor=shard.cursor,
            )
            queries += 1
            shard.buffer = [e for e in page.items if _tail(e, index) != skip]
            shard.cursor = page.cursor
            shard.done = page.cursor is None

    for shard in states:
        fill(shard)
    chosen: list[Item] = []
    while len(chosen) < limit:
        heads = [s for s in states if s.buffer]
        if not heads:
            break
        pick = (max if filters.newest_first else min)(
            heads, key=lambda s: _tail(s.buffer[0], index)
        )
        chosen.append(pick.buffer.pop(0))
        fill(pick)
    # fill() leaves every shard either holding entries or exhausted, so this is exact:
    # a next page exists iff some shard still holds a match.
    more = any(s.buffer for s in states)
    next_position = None
    if chosen and more:
        last = _tail(chosen[-1], index)
        created, _, workflow_id = last.partition("#")
        next_position = Position(int(created), workflow_id)
    return ListedPage(_read(store, chosen), next_position, queries)


def _read(store: Store, entries: Sequence[Item]) -> list[Item]:
    """The page's workflow items in page order (one BatchGetItem per 100); an entry whose
    item is gone (TTL) is skipped."""
    wanted = [(str(e["pk"]), WF_SK) for e in entries]
    found: dict[str, Item] = {}
    for start in range(0, len(wanted), MAX_BATCH_GET):
        for item in store.get_many(wanted[start : start + MAX_BATCH_GET]):
            found[str(item["pk"])] = item
    return [found[pk] for pk, _ in wanted if pk in found]


@dataclass(frozen=True)
class StatusCount:
    status: str
    count: int
    capped: bool  # True: at least `count` (the count stopped at COUNT_CAP)


def count_by_status(
    store: Store,
    owner: str,
    filters: ListFilter,
    *,
    cap: int | None = None,
    shards: int = LIST_SHARDS,
) -> list[StatusCount]:
    """The owner's workflows per status (type and time filters apply; a status filter does
    not: every status is counted). One COUNT query per status and shard, each stopping at
    what the status still lacks of `cap` (COUNT_CAP): bounded whatever the caller's history."""
    cap = COUNT_CAP if cap is None else cap
    counts: list[StatusCount] = []
    for status in WorkflowStatus:
        per_status = replace(filters, status=status.value)
        index = per_status.index()
        low, high = per_status.bounds()
        total = 0
        for k in range(shards):
            if total >= cap:
                break
            total += store.count_range(index, keys.list_shard_pk(owner, k), low, high, cap - total)
        counts.append(StatusCount(status.value, min(total, cap), total >= cap))
    return counts
