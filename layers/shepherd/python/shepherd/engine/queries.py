"""Read models for the API: one workflow with its steps, and an owner's workflows, newest first.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from shepherd import keys
from shepherd.conditions import Item
from shepherd.definitions import Definition
from shepherd.engine.scheduler import derived_id
from shepherd.keys import WF_SK, wf_pk, workflow_id_of
from shepherd.model import StepStatus, WorkflowState, WorkflowStatus, loads
from shepherd.payloads import Payloads
from shepherd.ports import Store
from shepherd.topology import TABLE

MAX_PAGES_PER_LIST = 10


@dataclass(frozen=True)
class WorkflowSummary:
    workflow_id: str
    wf_type: str
    status: str
    created_at: int
    finished_at: int | None


@dataclass(frozen=True)
class WorkflowList:
    items: list[WorkflowSummary]
    next_token: str | None


def stored_output(state: WorkflowState, definition: Definition) -> dict[str, str | None] | None:
    """A succeeded workflow's output as stored: each step's stored output (inline or a payload
    reference) by step name; None before it succeeded.

    Assembled from the step items on every read, never stored on the workflow item, so the
    workflow item does not grow with its steps' outputs (shepherd.limits). A skipped step
    has no output and is not listed.
    """
    if state.workflow.status is not WorkflowStatus.SUCCEEDED:
        return None
    return {
        name: state.steps[name].output
        for name in definition.topological_order
        if name in state.steps and state.steps[name].status is not StepStatus.SKIPPED
    }


def workflow_output(
    state: WorkflowState, definition: Definition, payloads: Payloads | None = None
) -> Any:
    """A succeeded workflow's output as a plain value (large step outputs fetched and verified
    through `payloads`), None before that."""
    stored = stored_output(state, definition)
    if stored is None:
        return None
    resolve = payloads.value if payloads is not None else loads
    return {name: resolve(text) for name, text in stored.items()}


def encode_token(cursor: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursor, sort_keys=True).encode()).decode()


def decode_token(token: str) -> dict[str, object]:
    """Raises ValueError if the token is not one this API issued."""
    try:
        cursor = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ValueError("next_token is not valid") from exc
    if not isinstance(cursor, dict):
        raise ValueError("next_token is not valid")
    return cursor


def _summary(item: Item) -> WorkflowSummary:
    return WorkflowSummary(
        workflow_id=workflow_id_of(str(item["pk"])),
        wf_type=str(item.get("wf_type", "")),
        status=str(item.get("status", "")),
        created_at=int(item.get("created_at", 0)),
        finished_at=item.get("finished_at"),
    )


def list_workflows(
    store: Store,
    owner: str,
    *,
    limit: int,
    next_token: str | None = None,
    status: str | None = None,
    wf_type: str | None = None,
) -> WorkflowList:
    """The owner's workflows, newest first, through the list index (never a scan).

    Filters apply to the index's projected attributes; a page may come back short with a
    `next_token` when many entries are filtered out (at most MAX_PAGES_PER_LIST reads).
    """
    list_pk = keys.list_pk(owner)
    cursor: dict[str, object] | None = decode_token(next_token) if next_token else None
    if cursor is not None and not _has_partition(cursor, list_pk):
        raise ValueError("next_token is not valid")
    found: list[WorkflowSummary] = []
    for _ in range(MAX_PAGES_PER_LIST):
        page = store.query_list(list_pk, limit - len(found), cursor, True)
        for item in page.items:
            if status and item.get("status") != status:
                continue
            if wf_type and item.get("wf_type") != wf_type:
                continue
            found.append(_summary(item))
        cursor = page.cursor
        if cursor is None or len(found) >= limit:
            break
    return WorkflowList(found, encode_token(cursor) if cursor else None)


def find_by_idempotency_key(store: Store, owner: str, key: str) -> WorkflowSummary | None:
    """The owner's workflow started with this idempotency key, or None: one strongly consistent
    read of the item whose id the key derives (no index), so another owner's key finds nothing."""
    item = store.get(wf_pk(derived_id(owner, key)), WF_SK)
    if item is None or item.get("owner") != owner or item.get("idempotency_key") != key:
        return None
    return _summary(item)


def _has_partition(cursor: dict[str, Any], list_pk: str) -> bool:
    """A cursor must belong to this owner's partition (a forged one could read others')."""
    value = cursor.get(TABLE.list_index.partition_key, list_pk)
    if isinstance(value, dict):  # DynamoDB attribute-value form
        value = value.get("S")
    return bool(value == list_pk)
