"""The supervisor: find due workflows through the watch index and drive them forward.

It never runs business logic and never trusts the index: each candidate is re-read with a
consistent query, planned, and acted on only through conditional writes, so two sweeps
running at once cannot double-dispatch or double-compensate.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from shepherd.decisions import transitions as tx
from shepherd.decisions.planner import Dispatch, EndAttempt, next_due
from shepherd.engine.scheduler import Scheduler
from shepherd.errors import ConditionFailed

logger = logging.getLogger("shepherd.supervisor")

PAGE_SIZE = 100


@dataclass
class SweepReport:
    """What one sweep saw and did: the numbers behind the supervisor's metrics."""

    started_at: int
    finished_at: int = 0
    shards: int = 0
    index_queries: int = 0
    index_items_read: int = 0
    due: int = 0
    looked_at: int = 0
    stale_entries: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    lags_ms: list[int] = field(default_factory=list)
    truncated: bool = False

    @property
    def duration_ms(self) -> int:
        return self.finished_at - self.started_at


class Supervisor:
    def __init__(self, scheduler: Scheduler, *, max_workflows: int = 1000) -> None:
        self.scheduler = scheduler
        self.max_workflows = max_workflows

    def sweep(self, now: int | None = None) -> SweepReport:
        """Look at every workflow whose `due_at <= now`, in every watch shard."""
        clock = self.scheduler.ports.clock
        now = clock.now_ms() if now is None else now
        report = SweepReport(started_at=clock.now_ms())
        shards = self.scheduler.config.watch_shards
        report.shards = shards
        for shard in range(shards):
            cursor: dict[str, object] | None = None
            while True:
                page = self.scheduler.ports.store.query_due(f"W#{shard}", now, PAGE_SIZE, cursor)
                report.index_queries += 1
                report.index_items_read += page.items_read
                for entry in page.entries:
                    if report.looked_at >= self.max_workflows:
                        report.truncated = True
                        break
                    report.due += 1
                    self.look(entry.workflow_id, now, report)
                cursor = page.cursor
                if cursor is None or report.truncated:
                    break
        report.finished_at = clock.now_ms()
        return report

    def look(self, workflow_id: str, now: int, report: SweepReport) -> None:
        """Re-read one due workflow, act on it, and move its watch deadline."""
        loaded = self.scheduler.load(workflow_id)
        if loaded is None:
            report.stale_entries += 1
            return
        state, definition = loaded
        wf = state.workflow
        if wf.status.terminal or wf.due_at is None or wf.due_at > now:
            report.stale_entries += 1  # the index lagged behind the table
            return
        report.looked_at += 1
        acted: list[str] = []
        for applied in self.scheduler.run(state, definition, supervisor=True, now=now):
            name = type(applied.action).__name__
            if not applied.won:
                report.actions[f"{name}Lost"] += 1
                continue
            action = applied.action
            if isinstance(action, Dispatch) and action.lost:
                name = "Redispatch"
            if isinstance(action, EndAttempt):
                name = "TimedOut"
            report.actions[name] += 1
            seen = getattr(action, "seen", None)
            acted.append(f"{name}({seen.name}#{seen.attempt})" if seen is not None else name)
        if acted:
            logger.info(
                "supervisor acted",
                extra={
                    "workflow_id": workflow_id,
                    "actions": acted,
                    "status": state.workflow.status.value,
                },
            )
            timely = isinstance(action, EndAttempt) or (
                isinstance(action, Dispatch) and action.lost
            )
            if timely and action.overdue_ms >= 0:  # type: ignore[union-attr]
                report.lags_ms.append(action.overdue_ms)  # type: ignore[union-attr]
        wf = state.workflow
        if wf.status.terminal:
            return
        due = next_due(state, definition, now)
        if due is None or due == wf.due_at:
            return
        write = tx.move_due(wf, due)
        try:
            self.scheduler.ports.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed:
            # Someone else changed the workflow since: its own write left a valid deadline.
            report.actions["MoveDueLost"] += 1
