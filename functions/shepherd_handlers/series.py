"""Starts, successes and failures per time bucket (`GET /workflows/series`): the console's
chart of a time range, read from the list indexes' keys and bounded whatever the caller's
history. docs/architecture.md, The list indexes (Series).

A workflow is counted in the bucket of its creation time (the indexes' sort keys carry it):
`started` is every workflow created in the bucket (`by_owner`, or `by_type` with a type),
`succeeded`, `failed` and `compensated` those of them whose status is that now (`by_status`,
`by_type_status`). No index orders workflows by when they finished, so "a success at 3 a.m."
reads "started at 3 a.m. and has since succeeded".

Cost: per series (4) and shard (32), one keys-only `Query` over the range, newest first, of at
most `ceil(cap / 32)` keys (313 for the cap of 10,000): 128 queries a read, at most 10,000
keys a series. A shard with more matches than that stops at its limit; everything older than
the last key it read is then incomplete, and the buckets from there back say `capped` ("at
least"), as a capped count does. The newest buckets, the ones a person at 3 a.m. looks at, are
the exact ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from shepherd import keys
from shepherd.engine.listing import ListFilter
from shepherd.keys import CREATED_DIGITS, LIST_SHARDS
from shepherd.ports import Store

SERIES_CAP = 10_000  # keys read per series at most, as a status's count stops at 10,000
MAX_BUCKETS = 60
DEFAULT_BUCKETS = 24
# Each series: its name in the reply, and the status it counts (None: every start).
SERIES: tuple[tuple[str, str | None], ...] = (
    ("started", None),
    ("succeeded", "SUCCEEDED"),
    ("failed", "FAILED"),
    ("compensated", "COMPENSATED"),
)


@dataclass(frozen=True)
class Bucket:
    start: int  # epoch ms, inclusive
    end: int  # epoch ms, inclusive
    counts: dict[str, int]
    capped: bool  # some series read stopped before this bucket's start: "at least"


@dataclass(frozen=True)
class Series:
    width_ms: int
    buckets: list[Bucket]
    queries: int  # index queries made (the cost, for tests and the docs)
    keys_read: int


def created_of(entry: dict[str, object], sort_key: str) -> int:
    """The creation time an index entry's sort key ends with (`...<created>#<id>`)."""
    value = str(entry[sort_key])
    tail = len(keys.workflow_id_of(str(entry["pk"]))) + 1
    return int(value[-(tail + CREATED_DIGITS) : -tail])


def bucketed(
    store: Store,
    owner: str,
    filters: ListFilter,
    buckets: int = DEFAULT_BUCKETS,
    *,
    cap: int | None = None,
    shards: int = LIST_SHARDS,
) -> Series:
    """The owner's starts, successes, failures and compensations in `buckets` equal buckets
    of [created_after, created_before] (both set, inclusive; the last bucket may be shorter,
    and a range shorter than `buckets` ms has fewer)."""
    after, before = filters.created_after, filters.created_before
    if after is None or before is None or after > before:
        raise ValueError("a series needs a time range: created_after <= created_before")
    cap = SERIES_CAP if cap is None else cap
    span = before - after + 1
    width = math.ceil(span / buckets)
    count = math.ceil(span / width)
    per_shard = max(1, math.ceil(cap / shards))
    counts = {name: [0] * count for name, _ in SERIES}
    exact_after = after - 1  # every series is complete for creation times after this
    queries = 0
    keys_read = 0
    for name, status in SERIES:
        chosen = replace(filters, status=status, newest_first=True)
        index = chosen.index()
        low, high = chosen.bounds()
        tally = counts[name]
        for shard in range(shards):
            cursor: dict[str, object] | None = None
            read = 0
            while read < per_shard:
                page = store.query_range(
                    index,
                    keys.list_shard_pk(owner, shard),
                    low,
                    high,
                    limit=per_shard - read,
                    newest_first=True,
                    cursor=cursor,
                )
                queries += 1
                oldest = None
                for entry in page.items:
                    oldest = created_of(entry, index.sort_key)
                    if after <= oldest <= before:  # the query's own range (a guard)
                        tally[(oldest - after) // width] += 1
                read += len(page.items)
                cursor = page.cursor
                if cursor is None:
                    break
                if read >= per_shard and oldest is not None:
                    # Stopped at its limit: keys created at `oldest` or before may be unread.
                    exact_after = max(exact_after, oldest)
            keys_read += read
    out = []
    for i in range(count):
        start = after + i * width
        out.append(
            Bucket(
                start=start,
                end=min(start + width - 1, before),
                counts={name: counts[name][i] for name, _ in SERIES},
                capped=start <= exact_after,
            )
        )
    return Series(width_ms=width, buckets=out, queries=queries, keys_read=keys_read)
