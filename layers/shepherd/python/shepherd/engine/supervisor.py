"""The supervisor: find due workflows through the watch index and drive them forward.

It never runs business logic and never trusts the index: each candidate is re-read with a
consistent query, planned, and acted on only through conditional writes, so two sweeps
running at once cannot double-dispatch or double-compensate.

One workflow can never stall the others: each look runs on its own. A store error that
passes (throttling, a timeout: `StoreUnavailable`) is logged and the workflow is simply looked
at again by the next sweep (its entry stays due). Any other error is unexpected: it is logged
with the workflow id and counted, and later looks back off; after `MAX_FAILED_LOOKS` failed
looks in a row the workflow is parked (FAILED with a reason, out of the watch index,
announced) for a person to see. Either way the sweep goes on with the next workflow.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace

from shepherd import limits
from shepherd.conditions import Item
from shepherd.decisions import transitions as tx
from shepherd.decisions.planner import Dispatch, EndAttempt, next_due
from shepherd.definitions import Definition
from shepherd.engine.pools import pool_states
from shepherd.engine.scheduler import Applied, Scheduler
from shepherd.errors import StoreUnavailable
from shepherd.keys import WF_SK, shard_key, wf_pk, workflow_id_of
from shepherd.model import PoolState, StepStatus, WorkflowState, WorkflowStatus, dumps, loads

logger = logging.getLogger("shepherd.supervisor")

PAGE_SIZE = 100
MAX_FAILED_LOOKS = 8  # consecutive failed looks before a workflow is parked
LOOK_BACKOFF_MS = 5_000  # the first retry of a failed look; doubles each time
MAX_LOOK_BACKOFF_MS = 300_000
PARKED = "SupervisorGaveUp"
# Moving a watch entry writes the workflow item (1 WRU) and its index entry (delete + put: 2
# WRU): at on-demand prices (WRU $0.625, RRU $0.125 per million) the price of 15 consistent
# reads of a small workflow. A look whose next deadline is at most this many sweeps away
# leaves the entry due and lets each sweep re-read the workflow instead.
READS_PER_MOVE = 15


def look_backoff_ms(failures: int) -> int:
    """Delay before the next look after `failures` failed looks in a row (n >= 1).

    `min(LOOK_BACKOFF_MS * 2 ** (n - 1), MAX_LOOK_BACKOFF_MS)`: 5 s, 10 s, ... 5 min, so a
    workflow is parked about 15 minutes after its looks started failing.
    """
    return int(min(LOOK_BACKOFF_MS * 2 ** (failures - 1), MAX_LOOK_BACKOFF_MS))


def pools_unread(last: dict[str, PoolState]) -> dict[str, PoolState]:
    """The pools as a sweep whose read of them failed plans with: every pool running.

    Keeping a stale "paused" would hide a message lost since the pool's resume, found late by
    the view's age (simulator seeds 26 and 5157 at x4). Taken as running, a task waiting in a
    paused pool may be sent again, a duplicate its claim drops; the last known resumes are
    kept (a resume only restarts a grace later), so no deadline comes later than the truth.
    """
    return {name: replace(pool, paused=False) for name, pool in last.items()}


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
    failed_looks: int = 0
    unavailable: int = 0
    backing_off: int = 0
    failed_queries: int = 0
    parked: int = 0
    left_due: int = 0  # looked at, entry left due for the next sweep (no write)
    moved: int = 0  # watch entries moved (a write on the workflow item and its index entry)
    actions: Counter[str] = field(default_factory=Counter)
    lags_ms: list[int] = field(default_factory=list)
    truncated: bool = False
    # The pools could not be read: every pool was taken as running, so a re-send's lag was
    # measured from the earliest deadline it could have had, not its real one (not recorded).
    pools_unread: bool = False

    @property
    def duration_ms(self) -> int:
        return self.finished_at - self.started_at


class Supervisor:
    def __init__(
        self, scheduler: Scheduler, *, max_workflows: int = 1000, sweep_interval_ms: int = 0
    ) -> None:
        self.scheduler = scheduler
        self.max_workflows = max_workflows
        # How often sweeps run (0: unknown). A look whose next deadline is near leaves the
        # entry where it is, still due, so the next sweeps re-read the workflow (1 RRU each)
        # instead of one move (1 WRU + 2 index WRU): always when the deadline falls before
        # the next sweep (the move would buy nothing), and when it is at most READS_PER_MOVE
        # sweeps away while this sweep has budget (a quarter of `max_workflows` such looks:
        # the rest move, so a sweep's work stays bounded however many steps run). An entry
        # earlier than needed is always safe (invariant 3 bounds `due_at` from above only), so
        # a sweep that comes later than promised costs a read, never a missed deadline.
        self.sweep_interval_ms = sweep_interval_ms
        self._pools: dict[str, PoolState] = {}

    def sweep(self, now: int | None = None) -> SweepReport:
        """Look at every workflow whose `due_at <= now`, in every watch shard."""
        clock = self.scheduler.ports.clock
        now = clock.now_ms() if now is None else now
        report = SweepReport(started_at=clock.now_ms())
        shards = self.scheduler.config.watch_shards
        report.shards = shards
        try:  # paused pools: one consistent query per sweep
            self._pools = pool_states(self.scheduler.ports.store)
        except StoreUnavailable:
            logger.warning("pool states not read; every pool taken as running", exc_info=True)
            self._pools = pools_unread(self._pools)
            report.pools_unread = True
        for shard in range(shards):
            self._sweep_shard(shard_key(shard), now, report)
            if report.truncated:
                break
        report.finished_at = clock.now_ms()
        return report

    def _sweep_shard(self, shard: str, now: int, report: SweepReport) -> None:
        cursor: dict[str, object] | None = None
        while True:
            try:
                page = self.scheduler.ports.store.query_due(shard, now, PAGE_SIZE, cursor)
            except Exception:  # a failed index query costs this shard one sweep, no more
                report.failed_queries += 1
                logger.warning("watch index query failed", exc_info=True, extra={"shard": shard})
                return
            report.index_queries += 1
            report.index_items_read += page.items_read
            for entry in page.entries:
                if report.looked_at >= self.max_workflows:
                    report.truncated = True
                    return
                report.due += 1
                try:
                    self.look(entry.workflow_id, now, report)
                except StoreUnavailable:
                    report.unavailable += 1  # passes: the entry stays due for the next sweep
                    logger.warning(
                        "store unavailable during a look",
                        exc_info=True,
                        extra={"workflow_id": entry.workflow_id},
                    )
                except Exception as exc:  # the isolation boundary: see the module docstring
                    self._look_failed(entry.workflow_id, now, exc, report)
            cursor = page.cursor
            if cursor is None:
                return

    def look(self, workflow_id: str, now: int, report: SweepReport) -> None:
        """Re-read one due workflow, act on it, and move its watch deadline."""
        items = self.scheduler.ports.store.load(wf_pk(workflow_id))
        head = next((i for i in items if i.get("sk") == WF_SK), None)
        if head is None:
            report.stale_entries += 1
            return
        failures = int(head.get("look_failures", 0))
        if failures and now < int(head.get("look_failed_at", 0)) + look_backoff_ms(failures):
            report.backing_off += 1  # its last look failed: wait out the backoff
            return
        loaded = self.scheduler.parse(items)
        assert loaded is not None
        state, definition = loaded
        wf = state.workflow
        if wf.status.terminal or wf.due_at is None or wf.due_at > now:
            report.stale_entries += 1  # the index lagged behind the table
            return
        report.looked_at += 1
        acted: list[str] = []
        applied_actions = self.scheduler.run(
            state, definition, supervisor=True, now=now, pools=self._pools
        )
        for applied in applied_actions:
            name = self._record(applied, report)
            if name is not None:
                seen = getattr(applied.action, "seen", None)
                if seen is None:
                    acted.append(name)
                    continue
                # The attempt acted on: a PENDING step's dispatch sends its first.
                first = isinstance(applied.action, Dispatch) and seen.status is StepStatus.PENDING
                acted.append(f"{name}({seen.name}#{1 if first else seen.attempt})")
        if acted:
            logger.info(
                "supervisor acted",
                extra={
                    "workflow_id": workflow_id,
                    "actions": acted,
                    "status": state.workflow.status.value,
                },
            )
        self._move_due(state, definition, now, report)

    def _move_due(
        self, state: WorkflowState, definition: Definition, now: int, report: SweepReport
    ) -> None:
        """Move the watch entry to the next moment the supervisor must look (or leave it)."""
        wf = state.workflow
        if wf.status.terminal:
            return
        due = next_due(state, definition, now, self._pools)
        if due == wf.due_at and not wf.look_failures:
            return
        if due is not None and not wf.look_failures and self._leave_due(due, now, report):
            report.left_due += 1  # the next sweep looks again: no write
            return
        records = [*state.steps.values(), *state.compensations.values()]
        if wf.status is WorkflowStatus.PAUSED and not any(r.status.in_flight for r in records):
            # Watched for nothing but its pause timeout (or not at all): hold what a claim
            # read before the pause could still start.
            unclaimed = [
                rec
                for rec in state.steps.values()
                if rec.status in (StepStatus.PENDING, StepStatus.QUEUED) and rec.held_at is None
            ]
            moved = self.scheduler.executor.together(tx.unwatch_paused(wf, unclaimed, now, due))
        else:
            moved = self.scheduler.executor.workflow(state, tx.move_due(wf, due))
        if moved:
            report.moved += 1
        else:
            # Someone else changed the workflow since: its own write left a valid deadline.
            report.actions["MoveDueLost"] += 1

    def _leave_due(self, due: int, now: int, report: SweepReport) -> bool:
        """Whether re-reading at every sweep until `due` is cheaper than moving the entry."""
        every = self.sweep_interval_ms
        if every <= 0:
            return False
        if due <= now + every:
            return True
        return due <= now + READS_PER_MOVE * every and report.left_due < self.max_workflows // 4

    @staticmethod
    def _record(applied: Applied, report: SweepReport) -> str | None:
        """Count one applied action; its detection lag if it acted on a passed deadline."""
        action = applied.action
        name = type(action).__name__
        if not applied.won:
            report.actions[f"{name}Lost"] += 1
            return None
        if isinstance(action, Dispatch) and action.lost:
            name = "Redispatch"
        if isinstance(action, EndAttempt):
            name = "TimedOut"
        report.actions[name] += 1
        lost = isinstance(action, Dispatch) and action.lost and not report.pools_unread
        timely = isinstance(action, EndAttempt) or lost
        if timely and action.overdue_ms >= 0:  # type: ignore[union-attr]
            report.lags_ms.append(action.overdue_ms)  # type: ignore[union-attr]
        return name

    # ------------------------------------------------------------------- failed looks

    def _look_failed(self, workflow_id: str, now: int, exc: Exception, report: SweepReport) -> None:
        """Count a failed look; retry it with backoff, or park the workflow. Never raises."""
        report.failed_looks += 1
        logger.error(
            "supervisor look failed",
            exc_info=exc,
            extra={"workflow_id": workflow_id, "error": type(exc).__name__},
        )
        store = self.scheduler.ports.store
        try:
            item = store.get(wf_pk(workflow_id), WF_SK)
            if item is None or "due_at" not in item:
                return  # gone, or finished meanwhile: nothing to watch
            failures = int(item.get("look_failures", 0))
            if failures + 1 >= MAX_FAILED_LOOKS:
                self._park(item, failures, now, exc, report)
                return
            # Lost: the workflow moved on (another look, or it finished); that look counts.
            self.scheduler.executor.raw(tx.look_failed(item["pk"], failures, now))
        except Exception:  # recording the failure failed too: the entry stays due, next sweep
            logger.exception("failed look not recorded", extra={"workflow_id": workflow_id})

    def _park(
        self, item: Item, failures: int, now: int, exc: Exception, report: SweepReport
    ) -> None:
        status = str(item.get("status", ""))
        previous = _safe_loads(item.get("error"))
        error: dict[str, object] = {
            "type": PARKED,
            "code": "LookFailed",
            "message": limits.truncate(
                f"the supervisor could not look at this workflow {failures + 1} times in a "
                f"row (last: {type(exc).__name__}: {exc}); it is parked until an operator "
                "retries it",
                limits.MAX_ERROR_MESSAGE,
            ),
            "operator_needed": True,
            "parked_from": status,
        }
        if previous is not None:
            error["cause"] = previous
        expires = now // 1000 + self.scheduler.config.retention_seconds
        if not self.scheduler.executor.raw(
            tx.park(item["pk"], status, failures, now, expires, dumps(error))
        ):
            return
        report.parked += 1
        logger.error(
            "workflow parked: its looks kept failing",
            extra={"workflow_id": workflow_id_of(str(item["pk"])), "looks": failures + 1},
        )


def _safe_loads(text: object) -> object:
    """A stored error, if it still parses (the look may have failed on a broken item)."""
    if not isinstance(text, str):
        return None
    try:
        return loads(text)
    except ValueError:
        return None
