"""The Approval kind (`Approval`, issue 25): rests WAITING until a person answers
(`engine.approvals`) or its `TimeoutSeconds` pass, when a look times it out
(`ApprovalTimedOut`)."""

from __future__ import annotations

from typing import Any

from shepherd.decisions import transitions as tx
from shepherd.decisions.actions import Action, TimeOutApproval
from shepherd.definitions import Definition, StepSpec
from shepherd.kinds.base import Resting, RestWrites
from shepherd.model import StepRecord, StepStatus, WorkflowState


class Approval(Resting):
    name = "approval"

    def matches(self, spec: StepSpec) -> bool:
        return spec.approval is not None

    def rest_until(self, spec: StepSpec, now: int, ready_at: int, document: Any) -> int | str:
        assert spec.approval is not None
        return now + spec.approval.timeout_seconds * 1000

    def start_rest(
        self,
        w: RestWrites,
        state: WorkflowState,
        definition: Definition,
        seen: StepRecord,
        now: int,
        wake_at: int,
    ) -> bool:
        """Resting, it is listed in the inbox of whoever may answer, in the same write."""
        spec = definition.by_name[seen.name]
        assert spec.approval is not None
        approvers = spec.approval.approvers
        write = tx.start_wait(seen, now, wake_at, approvers)
        principals = tx.approval_principals(state.workflow.owner, approvers)
        inbox = tx.inbox_entries(state.workflow, seen, principals, now, wake_at)
        return w.step_with(state, seen, write, inbox) is not None

    def leaving_rest(
        self, state: WorkflowState, spec: StepSpec, seen: StepRecord, expires_at: int
    ) -> list[tx.Write]:
        """Out of its approvers' inboxes, in the write that ends its wait."""
        if spec.approval is None or seen.status is not StepStatus.WAITING:
            return []
        principals = tx.approval_principals(state.workflow.owner, spec.approval.approvers)
        return tx.inbox_cleared(seen, principals, expires_at)

    def approvers(self, spec: StepSpec) -> tuple[str, ...] | None:
        assert spec.approval is not None
        return spec.approval.approvers

    def timed_out(self, spec: StepSpec) -> str:
        assert spec.approval is not None
        return f"nobody answered within TimeoutSeconds ({spec.approval.timeout_seconds})"

    def deadline_label(self, spec: StepSpec) -> str:
        return "approval timeout"

    def at_deadline(self, rec: StepRecord, late_ms: int) -> Action:
        return TimeOutApproval(rec, late_ms)
