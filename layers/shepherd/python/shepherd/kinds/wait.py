"""The Wait kind (`Wait`, issue 25): rests WAITING until its time (`decisions.waits`), with no
Lambda running, then a look wakes it (it succeeds). An `UntilPath` or a `SecondsPath` reads
the workflow input or a dependency's output from its document; a time it cannot read fails it
(`States.Runtime`)."""

from __future__ import annotations

from typing import Any

from shepherd.decisions import waits
from shepherd.decisions.actions import Action, Wake
from shepherd.definitions import Definition, StepSpec
from shepherd.kinds.base import Resting, RestWrites
from shepherd.model import StepRecord, StepStatus, WorkflowState


class Wait(Resting):
    name = "wait"

    def matches(self, spec: StepSpec) -> bool:
        return spec.wait is not None

    def reads_document(self, spec: StepSpec) -> bool:
        wait = spec.wait
        return wait is not None and (wait.until_path or wait.seconds_path) is not None

    def needs_document(self, spec: StepSpec, rec: StepRecord) -> bool:
        """Its condition, or its `UntilPath`, while PENDING or QUEUED (a resume's start)."""
        reads = spec.condition is not None or self.reads_document(spec)
        return reads and rec.status in (StepStatus.PENDING, StepStatus.QUEUED)

    def rest_until(self, spec: StepSpec, now: int, ready_at: int, document: Any) -> int | str:
        return wake_time(spec, ready_at, document)

    def start_rest(
        self,
        w: RestWrites,
        state: WorkflowState,
        definition: Definition,
        seen: StepRecord,
        now: int,
        wake_at: int,
    ) -> bool:
        """An `Until` or `UntilPath` wake time no reach gap counted pulls the watch entry's
        due first (the deadline rule); a `Seconds` one is counted already."""
        spec = definition.by_name[seen.name]
        if spec.wait is not None and spec.wait.seconds is None:
            w.pull_due_to(state, wake_at)
        return super().start_rest(w, state, definition, seen, now, wake_at)

    def deadline_label(self, spec: StepSpec) -> str:
        return "wake"

    def at_deadline(self, rec: StepRecord, late_ms: int) -> Action:
        return Wake(rec, late_ms)


def wake_time(spec: StepSpec, ready_at: int, document: Any) -> int | str:
    """When a ready Wait step wakes, or why it cannot (`waits.wake_time`)."""
    assert spec.wait is not None
    return waits.wake_time(spec.wait, ready_at, document)
