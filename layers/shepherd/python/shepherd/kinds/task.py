"""The task kind: `Agent`, `Pool`, `TimeoutSeconds`; sent to its pool, claimed and run by an
agent under its timeout and heartbeat, retried by its `Retry`, undone by its `Compensation`.
Every default of `StepKind` is a task's answer."""

from __future__ import annotations

from shepherd.definitions import StepSpec
from shepherd.kinds.base import StepKind


class Task(StepKind):
    name = "task"
    runs_agent = True

    def matches(self, spec: StepSpec) -> bool:
        return True  # asked last: a step of no other kind is a task
