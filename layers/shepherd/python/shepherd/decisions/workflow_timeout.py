"""A native workflow's own `TimeoutSeconds` (issue 42.5): a workflow still RUNNING that long
after its start fails with `States.Timeout`, and then unwinds or pauses by its definition's
`OnFailure`, as any failure does.

Pure. The deadline is `created_at + TimeoutSeconds`, a time known from the workflow item
alone: it costs no write per step. It joins the watch entry's candidates (`planner.next_due`)
and the start's first `due_at` (`Definition.start_gap_ms`), so the supervisor finds it through
the watch index at its time, never before: only the supervisor acts on it (any other planner
that reads the workflow past its deadline does nothing, so nothing new is sent). The look at
it fences every agent attempt in flight (it fails for good, `States.Timeout`: a late result
or heartbeat of that attempt is refused) and, in the same plan, writes the workflow
COMPENSATING or PAUSED with `timed_out_at` set: a timeout fires once, so a workflow an
operator resumes afterwards runs on with no workflow deadline.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from dataclasses import replace

from shepherd.decisions import retry
from shepherd.decisions import transitions as tx
from shepherd.decisions.actions import Action, EndAttempt, TimeOutWorkflow
from shepherd.definitions import Definition
from shepherd.kinds import kind_of
from shepherd.model import WorkflowState, WorkflowStatus, dumps

TIMEOUT = "States.Timeout"


def deadline(state: WorkflowState, definition: Definition) -> int | None:
    """When a running workflow times out, or None: no `TimeoutSeconds`, not RUNNING (a
    paused workflow has its PauseTimeoutSeconds; an unwinding one is ending), or its timeout
    already fired once."""
    wf = state.workflow
    seconds = definition.timeout_seconds
    if seconds is None or wf.status is not WorkflowStatus.RUNNING or wf.timed_out_at is not None:
        return None
    return wf.created_at + seconds * 1000


def overdue(state: WorkflowState, definition: Definition, now: int) -> bool:
    """Whether the workflow's deadline has come (a plan then does only `actions`)."""
    at = deadline(state, definition)
    return at is not None and now >= at


def error_of(definition: Definition) -> str:
    """The workflow's error (as stored) when its timeout fires."""
    return dumps(
        {
            "type": TIMEOUT,
            "message": (
                f"the workflow did not end within its TimeoutSeconds ({definition.timeout_seconds})"
            ),
        }
    )


def actions(state: WorkflowState, definition: Definition, now: int) -> list[Action]:
    """The look at a workflow past its deadline: every agent attempt in flight fenced (fails
    for good, first), then the workflow's own write (unwind or pause)."""
    at = deadline(state, definition)
    assert at is not None
    assert now >= at
    out: list[Action] = []
    give_up = retry.GiveUp("unwinding")
    for name in definition.topological_order:
        rec = state.steps.get(name)
        if rec is None or not kind_of(definition.by_name[name]).fenced_by_timeout(rec):
            continue
        message = (
            f"attempt {rec.attempt} was in flight when the workflow passed its TimeoutSeconds "
            f"({definition.timeout_seconds})"
        )
        out.append(EndAttempt(rec, TIMEOUT, message, give_up, "timeout", now - at))
    out.append(TimeOutWorkflow(error_of(definition), now - at))
    return out


def marked(write: tx.Write, now: int) -> tx.Write:
    """The workflow's unwind or pause write, marked as its timeout's (`timed_out_at`)."""
    update = replace(write.update, set={**write.update.set, "timed_out_at": now})
    return replace(write, update=update)
