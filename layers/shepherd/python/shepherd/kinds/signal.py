"""The WaitForSignal kind (`WaitForSignal`, issue 37): rests WAITING until a signal of its
name comes (`engine.signals`), taking the oldest one kept; a look takes one a sender kept but
did not hand over, and after `TimeoutSeconds` fails it with `States.Timeout`."""

from __future__ import annotations

from typing import Any

from shepherd.decisions import transitions as tx
from shepherd.decisions.actions import Action, TakeSignal, TimeOutSignal
from shepherd.definitions import Definition, StepSpec
from shepherd.kinds.base import Resting, RestWrites
from shepherd.model import StepRecord, WorkflowState


class Signal(Resting):
    name = "signal"

    def matches(self, spec: StepSpec) -> bool:
        return spec.wait_for_signal is not None

    def rest_until(self, spec: StepSpec, now: int, ready_at: int, document: Any) -> int | str:
        assert spec.wait_for_signal is not None
        return now + spec.wait_for_signal.timeout_seconds * 1000

    def start_rest(
        self,
        w: RestWrites,
        state: WorkflowState,
        definition: Definition,
        seen: StepRecord,
        now: int,
        wake_at: int,
    ) -> bool:
        """Resting, it takes the oldest signal of its name kept before it waited, if one came."""
        write = tx.start_wait(seen, now, wake_at, None)
        resting = w.step_with(state, seen, write, [])
        if resting is None:
            return False
        w.take_signal(state, definition, resting)
        return True

    def deadline_label(self, spec: StepSpec) -> str:
        assert spec.wait_for_signal is not None
        return f"signal {spec.wait_for_signal.name} timeout"

    def at_deadline(self, rec: StepRecord, late_ms: int) -> Action:
        return TimeOutSignal(rec, late_ms)

    def while_resting(self, rec: StepRecord) -> list[Action]:
        return [TakeSignal(rec)]
