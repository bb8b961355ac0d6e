"""What a plan asks for: one frozen record per action the executor applies as a conditional
write (`engine.executor`). Kept apart from the planner so the step kinds (`shepherd.kinds`),
which the planner asks what a step does, can name them too.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from dataclasses import dataclass

from shepherd.decisions import retry
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowStatus


@dataclass(frozen=True)
class SendImplicit:
    """Send attempt 1 of a single-dependency step whose dependency this agent just completed.

    No write: only that one completion can make the step ready, so it is sent exactly once.
    """

    name: str


@dataclass(frozen=True)
class Dispatch:
    """Conditional write that marks `seen` dispatched, then send its message.

    Used for join steps (exactly once among racing completions), by the supervisor to re-send
    work whose message was lost (`lost`) or whose long backoff has ended, and by a resume.
    """

    seen: StepRecord
    lost: bool
    overdue_ms: int = 0
    # Lost after its pool was paused (or its circuit opened) and resumed: its message was
    # held back, and the resume's grace is what sends it again (not the happy path's).
    held: bool = False


@dataclass(frozen=True)
class EndAttempt:
    """Attempt `seen.attempt` ended with an error or timeout: retry it or fail the step.

    `dispatch=False` (a paused workflow) queues the retry without sending it: the resume does.
    """

    seen: StepRecord
    error_type: str
    message: str
    decision: retry.RetryDecision
    outcome: str  # "error" | "timeout" | "heartbeat_timeout"
    overdue_ms: int = 0
    token_hash: str | None = None  # set when a callback reports the failure
    details: str | None = None  # progress the attempt reported but did not heartbeat yet
    dispatch: bool = True
    full_error: str | None = None  # a reference to the error's full text (agent errors)


@dataclass(frozen=True)
class Skip:
    """A ready step whose `Condition` is false: PENDING (or no item) -> SKIPPED. Whoever wins
    the write advances the workflow as if the step had completed (its successors)."""

    seen: StepRecord


@dataclass(frozen=True)
class PassThrough:
    """A ready Pass step: PENDING (or no item) -> SUCCEEDED with its output, in one write
    (no message, no Lambda). Whoever wins the write advances the workflow past it."""

    seen: StepRecord


@dataclass(frozen=True)
class StartWait:
    """A ready Wait step rests WAITING until `wake_at` (no message, no Lambda)."""

    seen: StepRecord
    wake_at: int


@dataclass(frozen=True)
class Wake:
    """A Wait step's time came (the supervisor): WAITING -> SUCCEEDED. Whoever wins the write
    advances the workflow past it."""

    seen: StepRecord
    overdue_ms: int = 0


@dataclass(frozen=True)
class TimeOutApproval:
    """An Approval step nobody answered within its TimeoutSeconds: it fails for good
    (`ApprovalTimedOut`), guarded as an answer is, so the two end it once."""

    seen: StepRecord
    overdue_ms: int = 0


@dataclass(frozen=True)
class TellCancel:
    """A cancelled workflow's running agent attempt: marked, so its next heartbeat tells the
    agent (`ctx.cancel_requested`) and it may stop early."""

    seen: StepRecord


@dataclass(frozen=True)
class TakeSignal:
    """A resting WaitForSignal step whose signal may have come while nobody delivered it (its
    sender stopped between recording it and handing it over): the supervisor hands over the
    oldest kept one, if any (engine/signals.py). Guarded as a delivery is."""

    seen: StepRecord


@dataclass(frozen=True)
class TimeOutSignal:
    """A WaitForSignal step's TimeoutSeconds passed: it fails with `States.Timeout`, unless a
    signal kept before its deadline is handed over in the same guarded write's place (one
    that came in time and was not yet delivered). Guarded as a delivery is, so a timed-out
    wait never also takes a signal."""

    seen: StepRecord
    overdue_ms: int = 0


@dataclass(frozen=True)
class FailWait:
    """A ready Wait step whose time cannot be read: it fails for good (`States.Runtime`)."""

    seen: StepRecord
    message: str


@dataclass(frozen=True)
class Cancel:
    """A step not claimed since the workflow began to unwind: this attempt had no effect."""

    seen: StepRecord


@dataclass(frozen=True)
class Unwind:
    """RUNNING -> COMPENSATING because a step failed for good (OnFailure: COMPENSATE)."""

    failed_step: str
    error: str


@dataclass(frozen=True)
class Pause:
    """RUNNING -> PAUSED because a step failed for good (OnFailure: PAUSE)."""

    failed_step: str
    error: str


@dataclass(frozen=True)
class TimeOutWorkflow:
    """RUNNING -> COMPENSATING or PAUSED (by the definition's OnFailure): the workflow did
    not end within its TimeoutSeconds (`decisions.workflow_timeout`)."""

    error: str
    overdue_ms: int = 0


@dataclass(frozen=True)
class GiveUp:
    """PAUSED -> COMPENSATING: the workflow stayed paused past its PauseTimeoutSeconds."""

    error: str
    overdue_ms: int = 0


@dataclass(frozen=True)
class StartCompensation:
    name: str


# ---------------------------------------------------- child-workflow steps (issue 24)


@dataclass(frozen=True)
class StartChild:
    """A ready child-workflow step (or its retry): start its attempt's child workflow and
    move the step to WAITING for it, in one transaction (the child's id derives from the
    attempt, so racing starters make the same put and one wins)."""

    seen: StepRecord


@dataclass(frozen=True)
class CancelChild:
    """Ask a waiting step's child to cancel (it undoes itself), because the step timed out
    (`timeout`) or its parent unwinds (`unwinding`); the step waits for the child's end."""

    seen: StepRecord
    child: WorkflowRecord
    reason: str
    overdue_ms: int = 0


@dataclass(frozen=True)
class ChildSucceeded:
    """The child ended SUCCEEDED: its output becomes the step's (or, for a compensation
    waiting on it, the child's undo ended COMPENSATED)."""

    seen: StepRecord
    child: WorkflowRecord


# --------------------------------------------------------------- map steps (issue 24)
# A map step's items are units of their own (`StepRecord.index`): the step actions above
# (Dispatch, EndAttempt, Cancel) apply to them as to steps; these are the map's own writes
# (docs/architecture.md, "Map steps and child workflows"). `seen` is the map step's unit (or
# its compensation's, `C#<step>`, whose window is over positions in its order).


@dataclass(frozen=True)
class AccountItem:
    """An ended item still in its map's window (its process died between the item's write
    and the map's): count it, refill its stripe while the map runs."""

    seen: StepRecord
    position: int
    outcome: str  # succeeded | failed | cancelled


@dataclass(frozen=True)
class OpenMore:
    """Enter the first window's next chunk (its opener died between chunks)."""

    seen: StepRecord


@dataclass(frozen=True)
class DecideMap:
    """The map's counters decide it: m_status RUNNING -> SUCCEEDED | FAILED, once."""

    seen: StepRecord
    verdict: str


@dataclass(frozen=True)
class HaltMap:
    """The workflow unwinds while the map runs: no item enters its window any more
    (m_status RUNNING -> CANCELLED); queued items are cancelled, running ones waited for."""

    seen: StepRecord


@dataclass(frozen=True)
class FinishMap:
    """A decided map whose window drained: its step ends (SUCCEEDED with the item outputs in
    item order; FAILED past its tolerance or halted)."""

    seen: StepRecord


@dataclass(frozen=True)
class Finish:
    status: WorkflowStatus
    error: str | None = None


Action = (
    SendImplicit
    | Dispatch
    | EndAttempt
    | Cancel
    | Skip
    | PassThrough
    | StartWait
    | Wake
    | FailWait
    | TimeOutApproval
    | TakeSignal
    | TimeOutSignal
    | TellCancel
    | Unwind
    | Pause
    | TimeOutWorkflow
    | GiveUp
    | StartCompensation
    | Finish
    | AccountItem
    | OpenMore
    | DecideMap
    | HaltMap
    | FinishMap
    | StartChild
    | CancelChild
    | ChildSucceeded
)


def takes_over(action: Action) -> bool:
    """Whether a look that plans `action` on the state as others left it does work the happy
    path owns (issue 40.5): a dispatch or a close that whoever ended the unit before it should
    have made in its own write or the next (a lost message, a dead writer). A look's own
    business is time: a timeout, a wake, an approval's timeout, a long backoff's end, a
    pause timeout, a child asked to cancel, a cancel fencing an attempt that waits on its
    callback; none of those counts. With no fault injected, a
    look takes over nothing (the simulator holds the count at 0)."""
    match action:
        case Dispatch(_, lost, held=held):
            # Not lost: a long backoff's end (or a resume's send); held: a paused pool's.
            return lost and not held
        case StartChild(seen):
            return seen.status is StepStatus.PENDING  # QUEUED: a retry's backoff ended
        case EndAttempt(outcome=outcome):
            # A child's end; not a timeout, nor a cancel fencing a callback (issue 37.4).
            return outcome not in ("timeout", "heartbeat_timeout", "cancelled")
        case (
            SendImplicit()
            | Skip()
            | PassThrough()
            | StartWait()
            | ChildSucceeded()
            | AccountItem()
            | OpenMore()
            | DecideMap()
            | FinishMap()
            | Finish()
        ):
            return True
    return False
