"""Approvals: a person answers an Approval step (docs/architecture.md, approvals).

The step rests WAITING (attempt `a`, its timeout in `wake_at`) from the moment it became
ready; an answer is one conditional write guarded by exactly that, so an approval answered
twice, or answered as the supervisor times it out, ends once. Who may answer: the workflow's
owner or a principal the step lists in `Approvers`; anyone else is told the workflow does not
exist, as for any workflow they cannot see.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from typing import Any

from shepherd import jsonsafe, limits
from shepherd.decisions import transitions as tx
from shepherd.engine.scheduler import Scheduler, output_problem
from shepherd.errors import (
    ApprovalNotPending,
    InputInvalid,
    StepNotFound,
    WorkflowNotFound,
)
from shepherd.kinds import kind_of
from shepherd.model import StepRecord, StepStatus, dumps

REJECTED = "Rejected"
_NO_OUTPUT: Any = object()


class Approvals:
    """Approve or reject a waiting Approval step."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def decide(
        self,
        workflow_id: str,
        step: str,
        *,
        principal: str,
        approve: bool,
        comment: str | None = None,
        output: Any = _NO_OUTPUT,
    ) -> StepRecord:
        """Record `principal`'s answer and advance the workflow; the step as it now is.

        WorkflowNotFound (404) for a workflow `principal` may not answer, StepNotFound for a
        step that is not an Approval, InputInvalid for a comment or output over its cap,
        ApprovalNotPending (409) when the step is not waiting for an answer (not yet ready,
        answered, timed out, cancelled)."""
        loaded = self.scheduler.load(workflow_id)
        if loaded is None:
            raise WorkflowNotFound(workflow_id)
        state, definition = loaded
        spec = definition.by_name.get(step)
        approvers = None if spec is None else kind_of(spec).approvers(spec)
        if principal not in tx.approval_principals(state.workflow.owner, approvers or ()):
            raise WorkflowNotFound(workflow_id)
        if spec is None or approvers is None:
            raise StepNotFound(workflow_id, step)
        if comment is not None and len(comment) > limits.MAX_APPROVAL_COMMENT_CHARS:
            raise InputInvalid(
                f"comment is {len(comment)} characters; the limit is "
                f"{limits.MAX_APPROVAL_COMMENT_CHARS}",
                "comment",
            )
        rec = state.steps[step]
        if rec.status is not StepStatus.WAITING or rec.wake_at is None:
            raise ApprovalNotPending(step, rec.status.value)
        verdict = "approved" if approve else "rejected"
        stored_output = error = None
        if approve:
            if output is _NO_OUTPUT:
                output = {"approved": True, "by": principal, "comment": comment}
            try:
                text = jsonsafe.dumps(output, what="output")
            except jsonsafe.JsonRejected as exc:
                raise InputInvalid(exc.message, "output") from None
            problem = output_problem(self.scheduler.whole_if_large(state, text), rec, text)
            if problem is not None:
                raise InputInvalid(problem, "output")
            stored_output = self.scheduler.keep_for(rec, "output", text)
        else:
            said = f": {comment}" if comment else ""
            error = tx.error_json(REJECTED, f"rejected by {principal}{said}")
        # The answer makes successors ready (or unwinds): no agent's reach covered it. Its
        # time is read after the pull, so what it starts is due no earlier than the pulled
        # entry (read before, a slow pull left a successor's dispatch deadline behind the
        # entry by its latency: the fault simulator, seeds 4888 and 6944).
        pulled = self.scheduler.pull_due(state, "step", step)
        now = self.scheduler.ports.clock.now_ms()
        decision = dumps({"verdict": verdict, "by": principal, "at": now, "comment": comment})
        write = tx.decide(
            rec,
            now,
            approved=approve,
            decision=decision,
            output=stored_output,
            error=error,
            expires_at=self.scheduler.expires(now),
        )
        cleared = self.scheduler.inbox_cleared(state, definition, rec, now)
        updated = self.scheduler.executor.step_with(state, rec, write, cleared)
        if updated is None:
            current = state.steps[step]
            raise ApprovalNotPending(step, current.status.value)
        self.scheduler.advance_after(rec, definition, failed=not approve)
        self.scheduler.pull_due_again(state, "step", step, pulled)
        return updated
