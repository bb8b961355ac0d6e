"""Read models for the API: one workflow with its steps, and an owner's workflows, filtered.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shepherd.conditions import Item
from shepherd.engine.listing import ListFilter, Position, list_page
from shepherd.ids import derived_id
from shepherd.keys import WF_SK, wf_pk, workflow_id_of
from shepherd.model import loads
from shepherd.ports import Store


@dataclass(frozen=True)
class WorkflowSummary:
    """A list row: what triage needs without opening the workflow (issue 29.2)."""

    workflow_id: str
    wf_type: str
    status: str
    created_at: int
    finished_at: int | None
    updated_at: int | None = None
    idempotency_key: str | None = None
    error: dict[str, Any] | None = None  # type, message, step (a failure, or why it paused)
    tags: dict[str, str] | None = None


@dataclass(frozen=True)
class WorkflowList:
    items: list[WorkflowSummary]
    next_position: Position | None


def _summary(item: Item) -> WorkflowSummary:
    error = loads(item.get("error")) if item.get("error") else None
    if error is None and item.get("pause"):
        pause = loads(item["pause"]) or {}
        cause = pause.get("error") or {}
        error = {
            "type": cause.get("type", "Paused"),
            "message": cause.get("message", f"paused by {pause.get('by', 'an operator')}"),
            "step": pause.get("step"),
        }
    row = None
    if isinstance(error, dict):
        row = {k: error[k] for k in ("type", "message", "step", "operator_needed") if k in error}
    return WorkflowSummary(
        workflow_id=workflow_id_of(str(item["pk"])),
        wf_type=str(item.get("wf_type", "")),
        status=str(item.get("status", "")),
        created_at=int(item.get("created_at", 0)),
        finished_at=item.get("finished_at"),
        updated_at=item.get("updated_at"),
        idempotency_key=item.get("idempotency_key"),
        error=row,
        tags=loads(item["tags"]) if item.get("tags") else None,
    )


def list_workflows(
    store: Store,
    owner: str,
    filters: ListFilter,
    *,
    limit: int,
    after: Position | None = None,
) -> WorkflowList:
    """The owner's matching workflows, one page, through the list indexes (never a scan):
    full unless the matches run out (shepherd.engine.listing)."""
    page = list_page(store, owner, filters, limit=limit, after=after)
    return WorkflowList([_summary(item) for item in page.items], page.next_position)


def find_by_idempotency_key(store: Store, owner: str, key: str) -> WorkflowSummary | None:
    """The owner's workflow started with this idempotency key, or None: one strongly consistent
    read of the item whose id the key derives (no index), so another owner's key finds nothing."""
    item = store.get(wf_pk(derived_id(owner, key)), WF_SK)
    if item is None or item.get("owner") != owner or item.get("idempotency_key") != key:
        return None
    return _summary(item)
