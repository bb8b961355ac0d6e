"""The Wait kind (`Wait`, issue 25): rests WAITING until its time (`decisions.waits`), with no
Lambda running, then a look wakes it (it succeeds). An `UntilPath` reads the workflow input
from its document; a time it cannot read fails it (`States.Runtime`)."""

from __future__ import annotations

from typing import Any

from shepherd.decisions import waits
from shepherd.decisions.actions import Action, Wake
from shepherd.definitions import StepSpec
from shepherd.kinds.base import Resting
from shepherd.model import StepRecord, StepStatus


class Wait(Resting):
    name = "wait"

    def matches(self, spec: StepSpec) -> bool:
        return spec.wait is not None

    def reads_document(self, spec: StepSpec) -> bool:
        return spec.wait is not None and spec.wait.until_path is not None

    def needs_document(self, spec: StepSpec, rec: StepRecord) -> bool:
        """Its condition, or its `UntilPath`, while PENDING or QUEUED (a resume's start)."""
        reads = spec.condition is not None or self.reads_document(spec)
        return reads and rec.status in (StepStatus.PENDING, StepStatus.QUEUED)

    def rest_until(self, spec: StepSpec, now: int, ready_at: int, document: Any) -> int | str:
        return wake_time(spec, ready_at, document)

    def deadline_label(self, spec: StepSpec) -> str:
        return "wake"

    def at_deadline(self, rec: StepRecord, late_ms: int) -> Action:
        return Wake(rec, late_ms)


def wake_time(spec: StepSpec, ready_at: int, document: Any) -> int | str:
    """When a ready Wait step wakes, or why it cannot (`waits.wake_time`)."""
    assert spec.wait is not None
    input_value = None if document is None else document.get("input")
    return waits.wake_time(spec.wait, ready_at, input_value)
