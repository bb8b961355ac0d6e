"""The map kind (`Map`, issue 24): fans out over items, each run as a task would be (or, with
`Workflow`, as a child workflow), in a window of `MaxConcurrency`; its counters decide it by
its tolerance (`decisions.fanout`). An opened map may have items that acted: its items are
undone one by one (`When` per item), or, for a map of children, each SUCCEEDED item's child
undoes itself; a map never opened has nothing to undo."""

from __future__ import annotations

from typing import Any

from shepherd.decisions.actions import Action, Dispatch, SendImplicit, StartChild
from shepherd.definitions import Definition, StepSpec
from shepherd.kinds.base import Claims, Compensations, Planning, R, StepKind
from shepherd.model import OutgoingTask, StepRecord, WorkflowState


class Map(StepKind):
    name = "map"
    fans_out = True

    def matches(self, spec: StepSpec) -> bool:
        return spec.map is not None

    def fenced_by_timeout(self, rec: StepRecord) -> bool:
        return False  # its items run on: the unwinding halts it, a pause leaves it running

    def starts_children(self, spec: StepSpec) -> bool:
        return spec.workflow is not None

    def on_message(self, c: Claims[R]) -> R:
        """Its message opens the map (no agent runs; its items take their own messages)."""
        return c.open_map()

    def plan_ready(
        self, p: Planning, rec: StepRecord, spec: StepSpec, ready_at: int
    ) -> list[Action]:
        """A map of child workflows opens as a child step starts (by whoever completed its
        last dependency); a map of tasks is sent as a task is."""
        if spec.workflow is not None:
            return p.ready_child(rec, ready_at)
        return p.ready_task(rec, spec, ready_at)

    def plan_resend(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action]:
        return [StartChild(rec) if spec.workflow is not None else Dispatch(rec, lost=False)]

    def plan_at_start(
        self, rec: StepRecord, spec: StepSpec, created_at: int, document: Any
    ) -> Action:
        return StartChild(rec) if spec.workflow is not None else SendImplicit(spec.name)

    def start_compensation(
        self,
        c: Compensations,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool:
        """A map over its items that may have acted (a map of children's: a window of
        children undoing themselves)."""
        children = definition.by_name[name].workflow is not None
        return c.map(state, definition, name, now, tasks, children=children)

    def compensated(self, spec: StepSpec, rec: StepRecord) -> bool:
        if spec.workflow is None and spec.compensation is None:
            return False
        return rec.fanout is not None
