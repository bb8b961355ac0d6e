"""The Approval kind (`Approval`, issue 25): rests WAITING until a person answers
(`engine.approvals`) or its `TimeoutSeconds` pass, when a look times it out
(`ApprovalTimedOut`)."""

from __future__ import annotations

from typing import Any

from shepherd.decisions.actions import Action, TimeOutApproval
from shepherd.definitions import StepSpec
from shepherd.kinds.base import Resting
from shepherd.model import StepRecord


class Approval(Resting):
    name = "approval"

    def matches(self, spec: StepSpec) -> bool:
        return spec.approval is not None

    def rest_until(self, spec: StepSpec, now: int, ready_at: int, document: Any) -> int | str:
        assert spec.approval is not None
        return now + spec.approval.timeout_seconds * 1000

    def deadline_label(self, spec: StepSpec) -> str:
        return "approval timeout"

    def at_deadline(self, rec: StepRecord, late_ms: int) -> Action:
        return TimeOutApproval(rec, late_ms)
