"""The approval inbox: a principal's pending approvals across workflows, newest first.

docs/architecture.md, The approval inbox. Each pending approval has one item per principal
who may answer it, in the sparse `inbox` index under `INBOX#<principal>#<k>` (k: one of
`keys.INBOX_SHARDS`, by workflow id). A page queries every shard once, newest first, each for
one more row than the page holds, and merges: every row a shard holds below the page's end is
then known, so a next page exists exactly when a row was left over. The index is eventually
consistent: an approval answered a moment ago may still be listed (answering it is a 409).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass

from shepherd import keys
from shepherd.definitions import NAME
from shepherd.ports import Store
from shepherd.topology import TABLE

# Every inbox sort key lies in [_LOWEST, _HIGHEST]: 13 digits, then `#<workflow id>#<step>`.
_LOWEST = "0" * keys.REQUESTED_DIGITS
_HIGHEST = "9" * keys.REQUESTED_DIGITS + "#~"
# An inbox sort key as `keys.inbox_sk` writes it (what a page's token may name).
SORT_KEY = re.compile(
    rf"^[0-9]{{{keys.REQUESTED_DIGITS}}}#[A-Za-z0-9_-]{{1,64}}#{NAME.strip('^$')}$"
)


@dataclass(frozen=True)
class PendingApproval:
    """One row: an Approval step waiting for an answer the principal may give."""

    workflow_id: str
    wf_type: str
    step: str
    requested_at: int  # epoch ms: when the step started waiting
    due_at: int  # epoch ms: when it times out (ApprovalTimedOut) unless answered


@dataclass(frozen=True)
class InboxPage:
    items: list[PendingApproval]
    last: str | None  # the last row's sort key when another page follows, else None


def pending(
    store: Store,
    principal: str,
    *,
    limit: int,
    before: str | None = None,
    shards: int = keys.INBOX_SHARDS,
) -> InboxPage:
    """One page of `principal`'s pending approvals, newest first, strictly after (older
    than) the row whose sort key is `before`: `shards` queries, each of at most limit + 1."""
    high = _HIGHEST if before is None else before
    rows: list[tuple[str, PendingApproval]] = []
    for k in range(shards):
        page = store.query_range(
            TABLE.inbox_index,
            keys.inbox_pk(principal, k),
            _LOWEST,
            high,
            limit=limit + 1 + (before is not None),  # the row `before` itself comes back
            newest_first=True,
            cursor=None,
        )
        for entry in page.items:
            sort_key = str(entry[TABLE.inbox_index.sort_key])
            if sort_key != before:
                rows.append((sort_key, _row(entry)))
    newest = heapq.nlargest(limit + 1, rows, key=lambda row: row[0])
    chosen = newest[:limit]
    last = chosen[-1][0] if len(newest) > limit else None
    return InboxPage([row for _, row in chosen], last)


def _row(entry: dict[str, object]) -> PendingApproval:
    return PendingApproval(
        workflow_id=keys.workflow_id_of(str(entry["pk"])),
        wf_type=str(entry.get("wf_type", "")),
        step=str(entry["step"]),
        requested_at=int(str(entry["requested_at"])),
        due_at=int(str(entry["approval_due_at"])),
    )
