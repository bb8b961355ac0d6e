"""The map kind (`Map`, issue 24): fans out over items, each run as a task would be (or, with
`Workflow`, as a child workflow), in a window of `MaxConcurrency`; its counters decide it by
its tolerance (`decisions.fanout`). An opened map may have items that acted: its items are
undone one by one (`When` per item), or, for a map of children, each SUCCEEDED item's child
undoes itself; a map never opened has nothing to undo."""

from __future__ import annotations

from shepherd.definitions import StepSpec
from shepherd.kinds.base import StepKind
from shepherd.model import StepRecord


class Map(StepKind):
    name = "map"
    fans_out = True

    def matches(self, spec: StepSpec) -> bool:
        return spec.map is not None

    def starts_children(self, spec: StepSpec) -> bool:
        return spec.workflow is not None

    def compensated(self, spec: StepSpec, rec: StepRecord) -> bool:
        if spec.workflow is None and spec.compensation is None:
            return False
        return rec.fanout is not None
