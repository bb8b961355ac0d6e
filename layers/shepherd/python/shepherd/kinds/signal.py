"""The WaitForSignal kind (`WaitForSignal`, issue 37): rests WAITING until a signal of its
name comes (`engine.signals`), taking the oldest one kept; a look takes one a sender kept but
did not hand over, and after `TimeoutSeconds` fails it with `States.Timeout`."""

from __future__ import annotations

from typing import Any

from shepherd.decisions.actions import Action, TakeSignal, TimeOutSignal
from shepherd.definitions import StepSpec
from shepherd.kinds.base import Resting
from shepherd.model import StepRecord


class Signal(Resting):
    name = "signal"

    def matches(self, spec: StepSpec) -> bool:
        return spec.wait_for_signal is not None

    def rest_until(self, spec: StepSpec, now: int, ready_at: int, document: Any) -> int | str:
        assert spec.wait_for_signal is not None
        return now + spec.wait_for_signal.timeout_seconds * 1000

    def deadline_label(self, spec: StepSpec) -> str:
        assert spec.wait_for_signal is not None
        return f"signal {spec.wait_for_signal.name} timeout"

    def at_deadline(self, rec: StepRecord, late_ms: int) -> Action:
        return TimeOutSignal(rec, late_ms)

    def while_resting(self, rec: StepRecord) -> list[Action]:
        return [TakeSignal(rec)]
