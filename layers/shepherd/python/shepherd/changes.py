"""Lifecycle events derived from the table's changes (its DynamoDB stream).

Pure: one change (the item before and after one write, and the stream's sequence number) ->
the events that write announces. Deriving events from the table instead of publishing them
after each write means a process that dies between its write and its publish loses nothing:
the stream holds the write, and its consumer retries until the events are out (at least once).

Every event carries `event_id`, deterministic from the workflow, the transition and what
makes that transition unique (an attempt number, a redrive count; for a pause or a resume,
which may repeat, the write's stream position), so a subscriber deduplicates on it; and
`sequence`, the stream record's sequence number, which grows with every write to one workflow
(its items share a partition), so a subscriber can order one workflow's events.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shepherd.clock import iso
from shepherd.conditions import Item
from shepherd.keys import COMP_PREFIX, POOLS_PK, STEP_PREFIX, WF_SK, workflow_id_of
from shepherd.model import DomainEvent, StepStatus, WorkflowStatus, loads

WORKFLOW_ENDS = {
    WorkflowStatus.SUCCEEDED.value: "WorkflowSucceeded",
    WorkflowStatus.COMPENSATED.value: "WorkflowCompensated",
    WorkflowStatus.CANCELLED.value: "WorkflowCancelled",
    WorkflowStatus.FAILED.value: "WorkflowFailed",
}
TIMEOUTS = ("timeout", "heartbeat_timeout")


@dataclass(frozen=True)
class Change:
    """One write, as the stream reports it (None: the item did not exist / was removed)."""

    old: Mapping[str, Any] | None
    new: Mapping[str, Any] | None
    sequence: str


# What the stream consumer is given (Lambda event filtering: records that match none of these
# are dropped before an invocation, at no charge). A step write whose new status is RUNNING or
# WAITING (a claim, a heartbeat, a callback armed) never ends an attempt, so it announces
# nothing, and neither does a write that creates a step's item (its claim, a join's dispatch,
# a cancel, a hold: no attempt had ended yet); every workflow item write and every other step
# write may. The CDK app and the local
# stack's stream mapping read this one list; a test proves no announcing change is filtered out.
STREAM_FILTERS: tuple[dict[str, Any], ...] = (
    {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {"sk": {"S": [WF_SK]}}}},
    {
        "eventName": ["MODIFY"],
        "dynamodb": {
            "NewImage": {
                "sk": {"S": [{"prefix": STEP_PREFIX}, {"prefix": COMP_PREFIX}]},
                "status": {
                    "S": [{"anything-but": [StepStatus.RUNNING.value, StepStatus.WAITING.value]}]
                },
            }
        },
    },
    # A pool's circuit that is open or closed after the write (its breaker's transitions).
    {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {"NewImage": {"pk": {"S": [POOLS_PK]}, "circuit": {"S": ["open", "closed"]}}},
    },
    # An Approval step starts waiting for a person (issue 25): ApprovalRequested.
    {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {
            "NewImage": {
                "sk": {"S": [{"prefix": STEP_PREFIX}]},
                "status": {"S": [StepStatus.WAITING.value]},
                "approval": {"BOOL": [True]},
            }
        },
    },
    # A skip may create its step's item (issue 25): an INSERT that announces StepSkipped.
    {
        "eventName": ["INSERT"],
        "dynamodb": {
            "NewImage": {
                "sk": {"S": [{"prefix": STEP_PREFIX}]},
                "status": {"S": [StepStatus.SKIPPED.value]},
            }
        },
    },
)


def passes_filters(record: Mapping[str, Any], filters: tuple[dict[str, Any], ...]) -> bool:
    """Lambda's event filtering for the pattern forms STREAM_FILTERS uses (exact values,
    `prefix`, `anything-but`), for the local stack and the tests."""
    return any(_matches(record, pattern) for pattern in filters)


def _matches(value: Any, pattern: Any) -> bool:
    if isinstance(pattern, dict):
        return isinstance(value, Mapping) and all(
            _matches(value.get(key), sub) for key, sub in pattern.items()
        )
    return value is not None and any(_accepts(value, rule) for rule in pattern)


def _accepts(value: Any, rule: Any) -> bool:
    if isinstance(rule, dict):
        if "prefix" in rule:
            return isinstance(value, str) and value.startswith(rule["prefix"])
        if "anything-but" in rule:
            return value not in rule["anything-but"]
        raise ValueError(f"unsupported filter rule {rule}")
    return bool(value == rule)


def event_id(workflow_id: str, detail_type: str, *unique: object) -> str:
    """The same transition always gets the same id; different transitions never share one."""
    text = "|".join((workflow_id, detail_type, *(str(u) for u in unique)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _accepted(
    event: Callable[..., DomainEvent],
    kind: str,
    new: Mapping[str, Any],
    attempt: int,
    error: Mapping[str, Any],
) -> list[DomainEvent]:
    """What an attempt whose result was accepted announces: a compensation's, its undo done;
    a `Repeat` step's last allowed iteration that failed it for good (its result accepted,
    the step FAILED at that attempt: `States.LoopLimitExceeded`), StepFailed; else nothing
    (a success is announced by its workflow's end; an iteration by nothing)."""
    if kind == "compensation":
        return [event("StepCompensated", attempt)]
    failed = new.get("status") == StepStatus.FAILED.value
    if failed and int(new.get("attempt", 0)) == attempt:
        return [event("StepFailed", attempt, error=error, reason="permanent")]
    return []


def events_of(change: Change) -> list[DomainEvent]:
    """The lifecycle events one write announces (none for most writes)."""
    item = change.new or change.old
    if item is None or change.new is None:
        return []  # a TTL deletion announces nothing
    sk = str(item.get("sk", ""))
    if item.get("pk") == POOLS_PK:
        return _circuit_events(change.old, change.new, change.sequence)
    if sk == WF_SK:
        if "status" not in change.new:
            # No writer leaves a workflow item without its status; moto does, for a moment:
            # an update that creates an item (a child's start, in a transaction) streams a
            # keys-only INSERT before the INSERT with the whole image. Nothing to announce.
            return []
        return _workflow_events(change.old, change.new, change.sequence)
    if sk.startswith((STEP_PREFIX, COMP_PREFIX)):
        return _step_events(change.old, change.new, change.sequence)
    return []


# ------------------------------------------------------------------------------- pools


def _circuit_events(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], sequence: str
) -> list[DomainEvent]:
    """A pool's breaker opened (from closed or half-open) or closed (from open or half-open)."""
    before = str((old or {}).get("circuit", "closed"))
    after = str(new.get("circuit", "closed"))
    since = new.get("circuit_since")
    if after == before or since is None or after not in ("open", "closed"):
        return []
    detail_type = "PoolCircuitOpened" if after == "open" else "PoolCircuitClosed"
    pool = str(new["sk"])
    history = list(new.get("circuit_history") or [])
    detail: dict[str, Any] = {
        "pool": pool,
        "state": after,
        "from": before,
        "at": iso(int(since)),
        "why": str(history[-1].get("why", "")) if history else "",
        "mode": str(new.get("circuit_mode", "auto")),
        "event_id": event_id(pool, detail_type, since),
        "sequence": sequence,
    }
    return [DomainEvent(detail_type, detail)]


# ---------------------------------------------------------------------------- workflows


def _workflow_event(
    detail_type: str, new: Mapping[str, Any], sequence: str, *unique: object
) -> DomainEvent:
    workflow_id = workflow_id_of(str(new["pk"]))
    detail: dict[str, Any] = {
        "workflow_id": workflow_id,
        "workflow_type": str(new.get("wf_type", "")),
        "status": str(new["status"]),
        "at": iso(int(new.get("updated_at", 0))),
        "event_id": event_id(workflow_id, detail_type, *unique),
        "sequence": sequence,
    }
    if new.get("parent_id"):
        detail["parent_id"] = str(new["parent_id"])
        detail["parent_step"] = str(new.get("parent_step", ""))
    if new.get("error"):
        detail["error"] = public_error(new["error"])
    if new.get("failure"):  # a state machine's Fail state or uncaught error: by design
        detail["failure"] = str(new["failure"])
        detail["cause"] = new.get("asl_cause")
    if new.get("pause") and new["status"] == WorkflowStatus.PAUSED.value:
        detail["pause"] = loads(new["pause"])
    return DomainEvent(detail_type, detail)


def public_error(stored: Any) -> dict[str, Any] | None:
    """An error as events and the API show it: without the internal reference to its full
    text (`full`, an object key; the API links it as `error_ref`)."""
    error = loads(stored)
    if not isinstance(error, dict):
        return None
    return {k: v for k, v in error.items() if k != "full"}


def _workflow_events(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], sequence: str
) -> list[DomainEvent]:
    redrives = int(new.get("redrives", 0))
    if old is None:
        return [_workflow_event("WorkflowStarted", new, sequence)]
    before, after = old.get("status"), new.get("status")
    if before == after:
        return []
    if after in WORKFLOW_ENDS:
        return [_workflow_event(WORKFLOW_ENDS[str(after)], new, sequence, redrives)]
    # A workflow may be paused and resumed any number of times, several in one millisecond
    # (nothing counts them): the write's own stream position makes each one unique, and a
    # redelivered or replayed record keeps it.
    if after == WorkflowStatus.PAUSED.value:
        return [_workflow_event("WorkflowPaused", new, sequence, new.get("paused_at"), sequence)]
    action = _acted(new)
    if before == WorkflowStatus.PAUSED.value and after == WorkflowStatus.RUNNING.value:
        event = _workflow_event("WorkflowResumed", new, sequence, new.get("updated_at"), sequence)
    elif before == WorkflowStatus.FAILED.value:
        event = _workflow_event("WorkflowRetried", new, sequence, redrives)
    elif after == WorkflowStatus.CANCELLING.value:
        event = _workflow_event("WorkflowCancelRequested", new, sequence, sequence)
    elif after == WorkflowStatus.COMPENSATING.value and action.get("action") == "compensate":
        event = _workflow_event("WorkflowCompensationRequested", new, sequence, sequence)
    else:
        return []  # a step's failure unwinding it: its StepFailed says so
    if action:
        event.detail["by"] = action["by"]
    return [event]


def _acted(new: Mapping[str, Any]) -> dict[str, Any]:
    """Who asked for this write (`transitions.acted`), if a person did: `{action, by, at}`
    when the write carries it (its `at` is the write's own `updated_at`), else `{}`."""
    acted = loads(new.get("acted"))
    if not isinstance(acted, dict) or acted.get("at") != new.get("updated_at"):
        return {}
    return acted


# -------------------------------------------------------------------------------- steps


def _answered(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """A person's answer to a waiting Approval, if this write recorded it (the step's
    `decision`, written by `transitions.decide` as it ends the wait): `{verdict, by, at,
    comment?}`, else `{}`. An approval is an operator action like a cancel: the history says
    who answered and when, even when the step's own end announces nothing (a success)."""
    if (old or {}).get("status") != StepStatus.WAITING.value or not new.get("decision"):
        return {}
    decision = loads(new["decision"])
    if not isinstance(decision, dict) or not decision.get("by"):
        return {}
    answer = {
        "verdict": str(decision.get("verdict", "")),
        "by": str(decision["by"]),
        "at": iso(int(decision.get("at") or new.get("finished_at") or 0)),
    }
    if decision.get("comment"):
        answer["comment"] = str(decision["comment"])
    return answer


def _ended(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Item]:
    """The history entries of the attempts this write ended (usually one, or none)."""
    count = int(new.get("attempts_total", 0)) - int((old or {}).get("attempts_total", 0))
    if count <= 0:
        return []
    history = [h for h in new.get("history", []) if h.get("o") != "input_replaced"]
    return [dict(h) for h in history[-count:]]


def _step_events(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], sequence: str
) -> list[DomainEvent]:
    workflow_id = workflow_id_of(str(new["pk"]))
    sk = str(new["sk"])
    kind = "step" if sk.startswith(STEP_PREFIX) else "compensation"
    base = {
        "workflow_id": workflow_id,
        "workflow_type": str(new.get("wf_type", "")),
        "step": sk[len(STEP_PREFIX) :],
        "kind": kind,
    }

    def event(detail_type: str, attempt: int, **extra: Any) -> DomainEvent:
        unique = event_id(workflow_id, detail_type, kind, base["step"], attempt)
        detail = {**base, "attempt": attempt, **extra, "event_id": unique, "sequence": sequence}
        return DomainEvent(detail_type, detail)

    out: list[DomainEvent] = []
    waiting = StepStatus.WAITING.value
    if new.get("approval") and new.get("status") == waiting:
        if (old or {}).get("status") == waiting:
            return []  # a later write of the same wait
        attempt = int(new.get("attempt", 1))
        return [
            event(
                "ApprovalRequested",
                attempt,
                approvers=[str(a) for a in new.get("approvers", [])],
                timeout_at=iso(int(new["wake_at"])),
            )
        ]
    skipped = StepStatus.SKIPPED.value
    if new.get("status") == skipped and (old or {}).get("status") != skipped:
        return [event("StepSkipped", 0)]  # its condition was false: never ran, no attempt
    answer = _answered(old, new)
    if answer:
        out.append(event("ApprovalAnswered", int(new.get("attempt", 1)), **answer))
    error = public_error(new.get("error")) or {"type": "Unknown", "message": "no details"}
    for entry in _ended(old, new):
        attempt = int(entry["a"])
        if entry.get("o") == "ok":
            out += _accepted(event, kind, new, attempt, error)
            continue
        if entry.get("o") in TIMEOUTS:
            out.append(event("StepTimedOut", attempt, error=error))
        status, now_attempt = new.get("status"), int(new.get("attempt", 0))
        if status == StepStatus.QUEUED.value and now_attempt > attempt:
            delay = max(0, int(new.get("available_at", entry["t"])) - int(entry["t"]))
            out.append(
                event("StepRetried", attempt, error=error, next_attempt=now_attempt, delay_ms=delay)
            )
        elif status == StepStatus.FAILED.value:
            reason = str(new.get("fail_reason", "exhausted"))
            out.append(event("StepFailed", attempt, error=error, reason=reason))
    return out
