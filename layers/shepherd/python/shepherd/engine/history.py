"""A workflow's authoritative history (issue 29.4): its lifecycle events as the relay
published them, kept per workflow in the table and read page by page.

The relay is the only writer (it has just published them): one idempotent put per event,
keyed by the event's time and id, in the workflow's own `EV#<id>` partition (apart from the
workflow's partition, whose reads never grow with its history). A redelivered stream record
writes the same item again; an operator's action is in it as the event it announced, with
who did it when the item says so (a pause's `by`, an input replacement's `by`).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shepherd.errors import ConditionFailed
from shepherd.keys import event_sk, events_pk
from shepherd.model import DomainEvent
from shepherd.ports import Store

MAX_PAGE = 100


def at_ms(event: DomainEvent, fallback_ms: int) -> int:
    """The event's time: its detail's `at` (ISO 8601; workflow events), else the time of
    the change that announced it (a step event: its ended attempt's time)."""
    text = str(event.detail.get("at") or "")
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return fallback_ms


def change_ms(item: Mapping[str, Any] | None) -> int:
    """When a change happened, from its new image alone (so a redelivered record gives the
    same time, and the same history key): the latest ended attempt's time on a step item,
    else the item's `updated_at`."""
    if not item:
        return 0
    ended = [int(e["t"]) for e in item.get("history") or () if isinstance(e, Mapping) and "t" in e]
    if ended:
        return max(ended)
    return int(item.get("updated_at") or item.get("finished_at") or 0)


def record(
    store: Store, events: Sequence[DomainEvent], expires_at: int, fallback_ms: int = 0
) -> int:
    """Keep each event in its workflow's history (idempotent); how many were new."""
    written = 0
    for event in events:
        workflow_id = event.detail.get("workflow_id")
        event_id = event.detail.get("event_id")
        if not workflow_id or not event_id:
            continue
        at = at_ms(event, fallback_ms)
        item = {
            "pk": events_pk(str(workflow_id)),
            "sk": event_sk(at, str(event_id)),
            "at": at,
            "detail_type": event.detail_type,
            "detail": json.dumps(event.detail, sort_keys=True, default=str),
            "expires_at": expires_at,
        }
        try:
            store.put_new(item)
            written += 1
        except ConditionFailed:  # a redelivered record: already kept
            continue
    return written


@dataclass(frozen=True)
class HistoryPage:
    events: list[tuple[str, int, dict[str, Any]]]  # (detail-type, time ms, detail), oldest first
    last_sk: str | None  # where the next page starts, when there may be more


def page(store: Store, workflow_id: str, *, after_sk: str = "", limit: int = 50) -> HistoryPage:
    """One page of a workflow's history, oldest first (one Query)."""
    got = store.query_after(events_pk(workflow_id), after_sk, min(limit, MAX_PAGE))
    events = [
        (str(i["detail_type"]), int(i.get("at", 0)), json.loads(str(i["detail"])))
        for i in got.items
    ]
    last = str(got.items[-1]["sk"]) if got.items and got.cursor is not None else None
    return HistoryPage(events, last)
