"""The child-workflow kind (`Workflow`, issue 24): each attempt starts a child workflow and
rests WAITING on it; the child's end ends the attempt. Undone by the child's own
compensations, so only a child that SUCCEEDED has anything left to undo (one that failed or
was cancelled undid itself before the step ended)."""

from __future__ import annotations

from shepherd.definitions import StepSpec
from shepherd.kinds.base import StepKind
from shepherd.model import StepRecord, StepStatus


class Child(StepKind):
    name = "child"

    def matches(self, spec: StepSpec) -> bool:
        return spec.workflow is not None and spec.map is None

    def starts_children(self, spec: StepSpec) -> bool:
        return True

    def compensated(self, spec: StepSpec, rec: StepRecord) -> bool:
        return rec.status is StepStatus.SUCCEEDED
