"""The child-workflow kind (`Workflow`, issue 24): each attempt starts a child workflow and
rests WAITING on it; the child's end ends the attempt. Undone by the child's own
compensations, so only a child that SUCCEEDED has anything left to undo (one that failed or
was cancelled undid itself before the step ended)."""

from __future__ import annotations

from typing import Any

from shepherd.decisions.actions import Action, StartChild
from shepherd.definitions import Definition, StepSpec
from shepherd.kinds.base import Compensations, Planning, StepKind
from shepherd.model import OutgoingTask, StepRecord, StepStatus, WorkflowState


class Child(StepKind):
    name = "child"

    def matches(self, spec: StepSpec) -> bool:
        return spec.workflow is not None and spec.map is None

    def fenced_by_timeout(self, rec: StepRecord) -> bool:
        return False  # its child is asked to cancel by the unwinding (a pause leaves it running)

    def starts_children(self, spec: StepSpec) -> bool:
        return True

    def inputs_also_for(self, spec: StepSpec) -> tuple[str, ...]:
        """Its child starts with its input: the child's InputSchema is this step's own."""
        assert spec.workflow is not None
        return (spec.workflow,)

    def plan_ready(
        self, p: Planning, rec: StepRecord, spec: StepSpec, ready_at: int
    ) -> list[Action]:
        return p.ready_child(rec, ready_at)

    def plan_resend(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action]:
        return [StartChild(rec)]  # a queued child step starts its child

    def plan_at_start(
        self, rec: StepRecord, spec: StepSpec, created_at: int, document: Any
    ) -> Action:
        return StartChild(rec)

    def start_compensation(
        self,
        c: Compensations,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool:
        """Its child undoes itself (the child's own compensations)."""
        return c.child(state, name, now)

    def compensated(self, spec: StepSpec, rec: StepRecord) -> bool:
        # A detached child (issue 37.6) lives on its own: never undone with its parent.
        return rec.status is StepStatus.SUCCEEDED and not spec.detached
