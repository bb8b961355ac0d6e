"""Schedules' state: paused or not (docs/architecture.md, schedules).

A definition's schedules fire on EventBridge Scheduler deployed (the local stack's clock
locally); what the table records (`pk = SCHEDULES`, `sk = <workflow type>#<name>`, absent
until first paused) is the truth every firing reads, as a pool's item is for its agents. So a
paused schedule stays paused across deploys: no `UpdateSchedule` call, nothing a redeploy of
the `AWS::Scheduler::Schedule` could undo. Names are unique across a deployment's definitions
(checked at load), so a name alone finds a schedule.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shepherd.conditions import Item
from shepherd.decisions import transitions as tx
from shepherd.definitions import ScheduleSpec
from shepherd.errors import ScheduleNotFound
from shepherd.keys import SCHEDULES_PK, schedule_sk

if TYPE_CHECKING:  # the API's views read a schedule's state without the engine
    from shepherd.engine.scheduler import Scheduler


@dataclass(frozen=True)
class ScheduleState:
    """A schedule of the current definitions and what the table records of it."""

    workflow_type: str
    spec: ScheduleSpec
    paused: bool = False
    by: str | None = None  # who last paused or resumed it
    at: int | None = None  # when (epoch ms)


class Schedules:
    """List, pause and resume the current definitions' schedules; ask whether one is paused."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._store = scheduler.executor.store

    def list(self) -> list[ScheduleState]:
        """Every schedule of the current definitions, with its state (one query)."""
        items = {str(i["sk"]): i for i in self._store.load(SCHEDULES_PK)}
        catalog = self._scheduler.catalog
        out = []
        for wf_type in catalog.names():
            for spec in catalog.current(wf_type).schedules:
                item = items.get(schedule_sk(wf_type, spec.name), {})
                out.append(_state(wf_type, spec, item))
        return out

    def get(self, name: str) -> ScheduleState:
        """One schedule by its name, or ScheduleNotFound."""
        catalog = self._scheduler.catalog
        for wf_type in catalog.names():
            for spec in catalog.current(wf_type).schedules:
                if spec.name == name:
                    item = self._store.get(SCHEDULES_PK, schedule_sk(wf_type, name)) or {}
                    return _state(wf_type, spec, item)
        raise ScheduleNotFound(name)

    def pause(self, name: str, *, by: str) -> ScheduleState:
        """Its firings start nothing from now on, until a resume. Idempotent."""
        return self._set(name, paused=True, by=by)

    def resume(self, name: str, *, by: str) -> ScheduleState:
        """Its next firings start workflows again (those it missed while paused do not).
        Idempotent."""
        return self._set(name, paused=False, by=by)

    def paused(self, workflow_type: str, name: str) -> bool:
        """What a firing asks before it starts anything (one consistent read)."""
        item = self._store.get(SCHEDULES_PK, schedule_sk(workflow_type, name))
        return bool(item and item.get("paused"))

    def _set(self, name: str, *, paused: bool, by: str) -> ScheduleState:
        current = self.get(name)
        now = self._scheduler.ports.clock.now_ms()
        self._scheduler.executor.raw(
            tx.schedule_paused(current.workflow_type, name, paused, now, by)
        )
        return ScheduleState(current.workflow_type, current.spec, paused, by, now)


def _state(workflow_type: str, spec: ScheduleSpec, item: Item) -> ScheduleState:
    at, by = item.get("at"), item.get("by")
    return ScheduleState(
        workflow_type,
        spec,
        paused=bool(item.get("paused", False)),
        by=None if by is None else str(by),
        at=None if at is None else int(at),
    )


__all__ = ["ScheduleState", "Schedules"]
