"""The supervisor: find due workflows through the watch index and drive them forward.

It never runs business logic and never trusts the index: each candidate is re-read with a
consistent query, planned, and acted on only through conditional writes, so two sweeps
running at once cannot double-dispatch or double-compensate.

**Partitioned** (docs/architecture.md, the supervisor at load): the watch index's shards are
dealt into `groups` (shard `s` belongs to group `s % groups`); each tick sweeps every group
once, each in its own invocation, under a lease per group (an item `LEASE#sweep / <group>`)
so a duplicate or late tick exits and a dead sweeper is replaced when its lease runs out.
The lease is for efficiency only: safety stays with the conditional writes. A sweep reads
each of its shards' due entries, oldest first across the shards (its shards in a rotating
order), and looks at them on a bounded pool (`LookRunner`) until its budget (`max_workflows`
looks, or its deadline) runs out: past its capacity every shard falls behind evenly, and
`SweepReport.oldest_due_age_ms` says by how much.

**Looking ahead** (`until_ms`, a little before the next sweep): a sweep also reads the entries
due by then and looks at each one at its due time, sleeping on the clock in between, so a
deadline is acted on a look's latency after it passes instead of up to a sweep interval later.
A look at an entry before its deadline does nothing, as any early look; nothing due by then,
the sweep makes the same reads as without.

One workflow can never stall the others: each look runs on its own. A store error that
passes (throttling, a timeout: `StoreUnavailable`) is logged and the workflow is simply looked
at again by the next sweep (its entry stays due). Any other error is unexpected: it is logged
with the workflow id and counted, and later looks back off; after `MAX_FAILED_LOOKS` failed
looks in a row the workflow is parked (FAILED with a reason, out of the watch index,
announced) for a person to see. Either way the sweep goes on with the next workflow.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol

from shepherd import limits
from shepherd.conditions import Eq, Item, Lt, Missing, Update, any_of
from shepherd.decisions import transitions as tx
from shepherd.decisions.planner import Dispatch, EndAttempt, next_due, takes_over
from shepherd.definitions import Definition
from shepherd.engine.circuit import CircuitBreakers
from shepherd.engine.limiter import PoolLimiter
from shepherd.engine.pools import pool_states
from shepherd.engine.scheduler import Applied, Scheduler
from shepherd.errors import ConditionFailed, StoreUnavailable
from shepherd.keys import WF_SK, lease_pk, shard_key, watch_config_key, wf_pk, workflow_id_of
from shepherd.model import PoolState, StepStatus, WorkflowState, WorkflowStatus, dumps, loads
from shepherd.ports import DueEntry

logger = logging.getLogger("shepherd.supervisor")

PAGE_SIZE = 100
MAX_FAILED_LOOKS = 8  # consecutive failed looks before a workflow is parked
LOOK_BACKOFF_MS = 5_000  # the first retry of a failed look; doubles each time
MAX_LOOK_BACKOFF_MS = 300_000
PARKED = "SupervisorGaveUp"
# A sweep under pressure (this many due entries in its shards' first pages, or more) moves
# every entry it looks at: an entry left due keeps its old due_at and sorts first.
PRESSURE_SHARE = 2  # max_workflows // PRESSURE_SHARE
# A sweep that looks ahead stops this long before the next sweep comes (a tenth of the interval
# at most), so it has released its group's lease when that one starts: an entry due in the
# margin waits for the next sweep, at most this long.
LOOK_AHEAD_MARGIN_MS = 500


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


def look_ahead_until(next_sweep_ms: int, interval_ms: int) -> int:
    """The horizon of a sweep whose next sweep comes at `next_sweep_ms` (`until_ms` of
    `Supervisor.sweep_group`): `LOOK_AHEAD_MARGIN_MS` before it, a tenth of the interval at
    most."""
    return next_sweep_ms - min(LOOK_AHEAD_MARGIN_MS, interval_ms // 10)


def group_shards(shards: int, groups: int, group: int) -> list[int]:
    """The watch shards group `group` sweeps: every shard `s` with `s % groups == group`."""
    return [s for s in range(shards) if s % groups == group]


class LookRunner(Protocol):
    """Runs a sweep's looks: one after another (the simulator, tests) or overlapped on a
    bounded pool of threads (Lambda: a look is mostly waiting for DynamoDB)."""

    def run(self, looks: Sequence[Callable[[], None]]) -> None: ...


class SequentialLooks:
    def run(self, looks: Sequence[Callable[[], None]]) -> None:
        for look in looks:
            look()


class ThreadedLooks:
    """At most `workers` looks at a time (the boto3 clients are thread-safe)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def run(self, looks: Sequence[Callable[[], None]]) -> None:
        if len(looks) <= 1 or self.workers <= 1:
            SequentialLooks().run(looks)
            return
        with ThreadPoolExecutor(max_workers=min(self.workers, len(looks))) as pool:
            for future in [pool.submit(look) for look in looks]:
                future.result()


@dataclass
class SweepReport:
    """What one sweep saw and did: the numbers behind the supervisor's metrics."""

    started_at: int
    group: int = 0
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
    # Dispatches and closes its looks made that the happy path owns (`planner.takes_over`):
    # what a lost message or a dead writer left undone. 0 with no fault (issue 40.5).
    took_over: int = 0
    # Looking ahead (a sweep with a horizon, `until_ms`): entries taken at their due time,
    # after the sweep started (not yet due when it read them, or left due by one of its looks
    # with a deadline before the horizon), and how long it slept waiting for them (part of
    # its duration).
    looked_ahead: int = 0
    waited_ms: int = 0
    # It was to look ahead, but a pool was paused when it read them: it did not (see
    # `sweep_groups`).
    held_back: bool = False
    actions: Counter[str] = field(default_factory=Counter)
    lags_ms: list[int] = field(default_factory=list)
    truncated: bool = False
    # How long the oldest entry this sweep found due had been due (0: nothing was due): how
    # far behind the supervisor is, shard by shard evenly once it is past its capacity. An
    # entry it found not yet due (looking ahead) is not late and never counts.
    oldest_due_age_ms: int = 0
    # The lease of the group: "held" (this sweep held it), "busy" (another sweeper held it:
    # this sweep did nothing), "none" (no lease asked for, or nothing was due).
    lease: str = "none"
    # The pools could not be read: every pool was taken as running, so a re-send's lag was
    # measured from the earliest deadline it could have had, not its real one (not recorded).
    pools_unread: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _again: list[tuple[int, str]] = field(default_factory=list, repr=False, compare=False)

    @property
    def duration_ms(self) -> int:
        return self.finished_at - self.started_at

    def add(self, name: str, value: int = 1) -> None:
        """Count something a look did (looks may run on several threads)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + value)

    def act(self, name: str, lag_ms: int | None = None) -> None:
        with self._lock:
            self.actions[name] += 1
            if lag_ms is not None:
                self.lags_ms.append(lag_ms)

    def leave_due(self, workflow_id: str, due: int) -> None:
        """A look left the entry due (no write): its next deadline, `due`, comes before the
        next sweep. A sweep looking ahead looks at it again then if that is before its
        horizon; otherwise the next sweep finds it due."""
        with self._lock:
            self.left_due += 1
            self._again.append((due, workflow_id))

    def take_again(self) -> list[tuple[int, str]]:
        """The entries left due since the last call, with their next deadlines."""
        with self._lock:
            out, self._again = self._again, []
        return out


SUMMED = (
    "shards", "index_queries", "index_items_read", "due", "looked_at", "stale_entries",
    "failed_looks", "unavailable", "backing_off", "failed_queries", "parked", "left_due",
    "moved", "looked_ahead", "waited_ms",
)  # fmt: skip


def total_report(reports: Sequence[SweepReport]) -> SweepReport:
    """Several groups' sweeps as one report: counts added up, the oldest age the largest."""
    total = reports[0]
    for report in reports[1:]:
        for name in SUMMED:
            setattr(total, name, getattr(total, name) + getattr(report, name))
        total.actions.update(report.actions)
        total.lags_ms += report.lags_ms
        total.truncated = total.truncated or report.truncated
        total.pools_unread = total.pools_unread or report.pools_unread
        total.held_back = total.held_back or report.held_back
        total.oldest_due_age_ms = max(total.oldest_due_age_ms, report.oldest_due_age_ms)
        total.finished_at = max(total.finished_at, report.finished_at)
    return total


@dataclass
class _Shard:
    """One shard's due entries as the sweep reads them, page by page."""

    key: str
    cursor: dict[str, object] | None = None
    done: bool = False


AGAIN = -1  # the "shard" of an entry a look left due, queued again by its sweep


class _DueQueue:
    """The due entries of a group's shards, earliest first across them; a shard's next page
    is read when its last entry read so far is taken (one page per shard at a time), so the
    head is always the earliest entry the shards hold."""

    def __init__(self, first: list[tuple[DueEntry, int]]) -> None:
        self._heap = [(e.due_at, i, n, e.workflow_id) for n, (e, i) in enumerate(first)]
        heapq.heapify(self._heap)
        self._left = Counter(i for _, i in first)
        self._count = len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def head(self) -> int | None:
        """The earliest `due_at` left (None: none left)."""
        return self._heap[0][0] if self._heap else None

    def pop(
        self, n: int, next_page: Callable[[int], list[DueEntry]], upto: int | None = None
    ) -> list[str]:
        """Up to `n` entries, earliest first (with `upto`: only those due by then)."""
        out: list[str] = []
        while self._heap and len(out) < n and (upto is None or self._heap[0][0] <= upto):
            _, shard, _, workflow_id = heapq.heappop(self._heap)
            out.append(workflow_id)
            if shard == AGAIN:
                continue
            self._left[shard] -= 1
            if self._left[shard] == 0:
                for entry in next_page(shard):
                    self._count += 1
                    heapq.heappush(
                        self._heap, (entry.due_at, shard, self._count, entry.workflow_id)
                    )
                    self._left[shard] += 1
        return out

    def push(self, due_at: int, workflow_id: str) -> None:
        """Queue an entry again, to be taken at `due_at` (a look left it due)."""
        self._count += 1
        heapq.heappush(self._heap, (due_at, AGAIN, self._count, workflow_id))


@dataclass
class _Pass:
    """One group's sweep under way (an invocation may have several at once, see
    `Supervisor.sweep_groups`)."""

    group: int
    report: SweepReport
    shards: list[_Shard]
    now: int  # when it started: the entries due by then are its backlog
    until: int | None  # its horizon: it looks ahead at entries due up to then (None: no)
    owner: str | None = None
    due: _DueQueue | None = None
    pressed: bool = False
    renewed_at: int = 0
    open: bool = False
    again: Counter[str] = field(default_factory=Counter)

    @property
    def upto(self) -> int:
        """How far its index queries read."""
        return self.now if self.until is None else self.until

    def limit(self, t: int) -> int:
        """The latest `due_at` it may take at time `t`: its backlog always; while looking
        ahead (up to its horizon), whatever is due by `t`."""
        if self.until is not None and t <= self.until:
            return max(self.now, t)
        return self.now


MAX_AGAIN = 3  # looks of one workflow a sweep queues again after it left the entry due


class Supervisor:
    def __init__(
        self,
        scheduler: Scheduler,
        *,
        max_workflows: int = 1000,
        sweep_interval_ms: int = 0,
        groups: int = 1,
        looks: LookRunner | None = None,
        lease_ms: int = 10_000,
        breakers: CircuitBreakers | None = None,
        limiter: PoolLimiter | None = None,
    ) -> None:
        self.scheduler = scheduler
        # Pools' circuit breakers: evaluated by group 0's sweep, fed with timeouts.
        self.breakers = breakers
        # Rate-limited pools' buckets: how far ahead a held task's slot may be.
        self.limiter = limiter
        self.max_workflows = max_workflows
        # How often sweeps run (0: unknown). A look whose next deadline falls before the next
        # sweep leaves the entry where it is, still due (the move would buy nothing), unless
        # the sweep is under pressure: an entry earlier than needed is always safe
        # (invariant 3 bounds `due_at` from above only).
        self.sweep_interval_ms = sweep_interval_ms
        self.groups = groups
        self.looks: LookRunner = looks or SequentialLooks()
        # How long a group's lease lasts unless renewed: a dead sweeper's group is swept
        # again within this. A sweep renews it at half of it while it works.
        self.lease_ms = lease_ms
        self._pools: dict[str, PoolState] = {}
        self._backlogs: dict[str, int | None] = {}  # read this sweep (see _with_backlogs)
        self._reserved: dict[str, int | None] = {}  # read this sweep (see _with_backlogs)
        self._backlog_lock = threading.Lock()
        self._turn = 0
        self._shard_span: int | None = None

    # ---------------------------------------------------------------------------- sweeps

    def sweep(
        self,
        now: int | None = None,
        *,
        deadline_ms: int | None = None,
        until_ms: int | None = None,
    ) -> SweepReport:
        """Every group, with no lease: one sweeper for the whole index (the local stack,
        tests). The report adds the groups' numbers up. Looking ahead (`until_ms`), the
        groups are swept together (see `sweep_groups`), else one after another."""
        if until_ms is None:
            reports = [
                self.sweep_group(group, now=now, deadline_ms=deadline_ms)
                for group in range(self.groups)
            ]
        else:
            reports = self.sweep_groups(
                range(self.groups), now=now, deadline_ms=deadline_ms, until_ms=until_ms
            )
        return total_report(reports)

    def sweep_group(
        self,
        group: int,
        *,
        owner: str | None = None,
        now: int | None = None,
        deadline_ms: int | None = None,
        until_ms: int | None = None,
    ) -> SweepReport:
        """Look at the due workflows of one group's shards, oldest first, until the budget
        runs out. With `owner`, only under the group's lease (another holder: nothing).

        With `until_ms` (a little before the next sweep comes) it also looks ahead: it reads
        the entries due up to then as well, and looks at each one at its due time, sleeping
        on the clock in between, so a deadline is acted on a look's latency after it passes
        instead of up to a sweep interval later (docs/architecture.md, the supervisor at
        load). Nothing due by then: the same reads as without."""
        (report,) = self.sweep_groups(
            [group], owner=owner, now=now, deadline_ms=deadline_ms, until_ms=until_ms
        )
        return report

    def sweep_groups(
        self,
        groups: Iterable[int],
        *,
        owner: str | None = None,
        now: int | None = None,
        deadline_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[SweepReport]:
        """Sweep several groups together, a report each (an invocation whose ticks name
        several): each group's first pages and lease in turn, then their entries earliest
        first across all of them, each group within its own budget, so one group's wait for
        its next entry never delays another's. Each lease is released when its group is
        done. One group: `sweep_group`."""
        clock = self.scheduler.ports.clock
        now = clock.now_ms() if now is None else now
        until = until_ms if until_ms is not None and until_ms > now else None
        passes: list[_Pass] = []
        for group in groups:
            report = SweepReport(started_at=clock.now_ms(), group=group)
            if group == 0 and self.breakers is not None:
                for pool, to in self.breakers.evaluate().items():
                    report.act(f"Circuit:{pool}:{to}")
            shards = self._shards(group)
            report.shards = len(shards)
            run = _Pass(group, report, shards, now, until, owner)
            passes.append(run)
            first = self._first_pages(shards, run.upto, report)
            if not first:
                report.finished_at = clock.now_ms()
                continue
            due_now = [e.due_at for e, _ in first if e.due_at <= now]
            report.oldest_due_age_ms = max(0, now - min(due_now)) if due_now else 0
            if owner is not None and not self._lease(group, owner, now, report):
                report.finished_at = clock.now_ms()
                continue
            run.due = _DueQueue(first)
            run.pressed = len(due_now) >= self.max_workflows // PRESSURE_SHARE
            run.renewed_at = clock.now_ms()
            run.open = True
        working = [run for run in passes if run.open]
        try:
            if working:
                self._read_pools(working)
                if until is not None and any(pool.paused for pool in self._pools.values()):
                    # A look plans with the pools as this sweep read them, and watches a
                    # paused pool's tasks every g from its own `now`: that must not be later
                    # than the read (a resume since started their dispatch grace earlier).
                    # Looking ahead, a look's `now` is its own time; so while a pool is
                    # paused, the sweep takes what was due when it started, as before.
                    for run in working:
                        run.until = None
                        run.report.held_back = True
                self._work(working, deadline_ms)
        finally:
            for run in working:
                self._close(run)
        for run in passes:
            if not run.report.finished_at:
                run.report.finished_at = clock.now_ms()
        return [run.report for run in passes]

    def _shards(self, group: int) -> list[_Shard]:
        """The group's shards, starting at a shard that turns with every sweep (fair among
        entries due at the same moment)."""
        numbers = group_shards(self.shard_span(), self.groups, group)
        self._turn += 1
        turn = self._turn % max(1, len(numbers))
        return [_Shard(shard_key(n)) for n in numbers[turn:] + numbers[:turn]]

    def shard_span(self) -> int:
        """How many shards to sweep: the configured count, or more if a deployment before
        used more (docs/architecture.md: changing the shard count loses no entry). Recorded
        once per process in `CONFIG#watch` (the largest count any deployment used)."""
        if self._shard_span is not None:
            return self._shard_span
        shards = self.scheduler.config.watch_shards
        store = self.scheduler.ports.store
        pk, sk = watch_config_key()
        try:
            item = store.update(
                pk,
                sk,
                Update(set={"max_shards": shards}),
                any_of(Missing("max_shards"), Lt("max_shards", shards)),
            )
            recorded = int(item["max_shards"])
        except ConditionFailed as lost:
            recorded = int((lost.current or {}).get("max_shards", shards))
        self._shard_span = max(shards, recorded)
        return self._shard_span

    def _first_pages(
        self, shards: list[_Shard], upto: int, report: SweepReport
    ) -> list[tuple[DueEntry, int]]:
        out: list[tuple[DueEntry, int]] = []
        for i, shard in enumerate(shards):
            out += [(e, i) for e in self._page(shard, upto, report)]
        return out

    def _page(self, shard: _Shard, upto: int, report: SweepReport) -> list[DueEntry]:
        """The shard's next page of entries due by `upto` (none once it is read to its end)."""
        if shard.done:
            return []
        try:
            page = self.scheduler.ports.store.query_due(shard.key, upto, PAGE_SIZE, shard.cursor)
        except Exception:  # a failed index query costs this shard one sweep, no more
            report.failed_queries += 1
            logger.warning("watch index query failed", exc_info=True, extra={"shard": shard.key})
            shard.done = True
            return []
        report.index_queries += 1
        report.index_items_read += page.items_read
        shard.cursor = page.cursor
        shard.done = page.cursor is None
        return page.entries

    def _read_pools(self, runs: list[_Pass]) -> None:
        self._backlogs = {}
        self._reserved = {}
        try:  # paused pools: one consistent query per sweep
            self._pools = pool_states(self.scheduler.ports.store)
        except StoreUnavailable:
            logger.warning("pool states not read; every pool taken as running", exc_info=True)
            self._pools = pools_unread(self._pools)
            for run in runs:
                run.report.pools_unread = True

    def _work(self, runs: list[_Pass], deadline_ms: int | None) -> None:
        """Earliest due first across the sweeps, in batches the look runner overlaps, each
        sweep until its budget (`max_workflows` looks, or the deadline: a Lambda's remaining
        time) or, looking ahead, its horizon. Between entries not yet due it sleeps until the
        next one is. Each lease is renewed at half its length; a sweep that lost it stops."""
        clock = self.scheduler.ports.clock
        batch_size = max(1, getattr(self.looks, "workers", 1))
        while True:
            t = clock.now_ms()
            for run in runs:
                if run.open and self._spent(run, t, deadline_ms):
                    self._close(run)
            live = [run for run in runs if run.open]
            if not live:
                return
            batch = self._batch(live, t, batch_size)
            if batch:
                self.looks.run(
                    [self._guarded(wf, now, run.report, run.pressed) for run, wf, now in batch]
                )
                for run in live:
                    self._queue_again(run)
            else:
                self._wait(live, t, deadline_ms)
            for run in live:
                self._renew(run)

    def _spent(self, run: _Pass, t: int, deadline_ms: int | None) -> bool:
        """Whether a sweep is done: nothing left to take now or later, its budget or the
        deadline spent (truncated if something due was left)."""
        assert run.due is not None
        head = run.due.head()
        if head is None:
            return True
        if run.report.due >= self.max_workflows or (deadline_ms is not None and t >= deadline_ms):
            run.report.truncated = head <= max(run.now, t)
            return True
        # Nothing due in its backlog, and its horizon passed or not reached by the next entry
        # (or it slept as long as its horizon allows: a clock that stood still meanwhile).
        return head > run.now and (
            run.until is None
            or t > run.until
            or head > run.until
            or run.report.waited_ms > run.until - run.now
        )

    def _batch(self, live: list[_Pass], t: int, size: int) -> list[tuple[_Pass, str, int]]:
        """Up to `size` entries due by `t` (each sweep's backlog regardless), earliest first
        across the sweeps, each within its budget; with the `now` each look plans with (the
        sweep's start, or looking ahead, the time it is taken)."""
        out: list[tuple[_Pass, str, int]] = []
        while len(out) < size:
            best: _Pass | None = None
            best_at = 0
            for run in live:
                assert run.due is not None
                head = run.due.head()
                if head is None or head > run.limit(t) or run.report.due >= self.max_workflows:
                    continue
                if best is None or head < best_at:
                    best, best_at = run, head
            if best is None:
                return out
            assert best.due is not None
            report = best.report
            (workflow_id,) = best.due.pop(1, self._pager(best))
            report.due += 1
            if best_at > best.now:
                report.looked_ahead += 1
            out.append((best, workflow_id, best.now if best.until is None else max(best.now, t)))
        return out

    def _pager(self, run: _Pass) -> Callable[[int], list[DueEntry]]:
        """Reads the next page of one of the sweep's shards (by its place in the sweep)."""
        return lambda i: self._page(run.shards[i], run.upto, run.report)

    def _queue_again(self, run: _Pass) -> None:
        """An entry one of its looks left due, whose next deadline comes before its horizon:
        taken again then (a few times per workflow at most)."""
        assert run.due is not None
        for due, workflow_id in run.report.take_again():
            if run.until is None or due > run.until or run.again[workflow_id] >= MAX_AGAIN:
                continue
            run.again[workflow_id] += 1
            run.due.push(max(due, run.now + 1), workflow_id)

    def _wait(self, live: list[_Pass], t: int, deadline_ms: int | None) -> None:
        """Nothing is due yet: sleep until the next entry is (or a lease needs renewing, or
        the deadline)."""
        wake: list[int] = []
        for run in live:
            assert run.due is not None
            head = run.due.head()
            if head is not None:
                wake.append(head)
            if run.owner is not None:
                wake.append(run.renewed_at + self.lease_ms // 2)
        if deadline_ms is not None:
            wake.append(deadline_ms)
        pause = min(wake) - t
        if pause > 0:
            self.scheduler.ports.clock.sleep(pause / 1000)
            for run in live:
                run.report.waited_ms += pause

    def _renew(self, run: _Pass) -> None:
        if not run.open or run.owner is None:
            return
        clock = self.scheduler.ports.clock
        if clock.now_ms() - run.renewed_at < self.lease_ms // 2:
            return
        run.renewed_at = clock.now_ms()
        if not self.renew(run.group, run.owner):
            assert run.due is not None
            head = run.due.head()  # another sweeper has the group now
            run.report.truncated = head is not None and head <= max(run.now, clock.now_ms())
            run.open = False
            run.report.finished_at = clock.now_ms()

    def _close(self, run: _Pass) -> None:
        """Done: its lease released (the next tick's sweeper may take the group at once)."""
        if not run.open:
            return
        run.open = False
        if run.owner is not None:
            self._release(run.group, run.owner)
        run.report.finished_at = self.scheduler.ports.clock.now_ms()

    def _guarded(
        self, workflow_id: str, now: int, report: SweepReport, pressed: bool
    ) -> Callable[[], None]:
        def run() -> None:
            try:
                self.look(workflow_id, now, report, pressed=pressed)
            except StoreUnavailable:
                report.add("unavailable")  # passes: the entry stays due for the next sweep
                logger.warning(
                    "store unavailable during a look",
                    exc_info=True,
                    extra={"workflow_id": workflow_id},
                )
            except Exception as exc:  # the isolation boundary: see the module docstring
                self._look_failed(workflow_id, now, exc, report)

        return run

    # ---------------------------------------------------------------------------- leases

    def _lease(self, group: int, owner: str, now: int, report: SweepReport) -> bool:
        """Take the group's lease (free, expired, or already ours); False if another sweeper
        holds it. A duplicate or late tick then does nothing."""
        pk, sk = lease_pk(group)
        write = Update(set={"owner": owner, "expires_at": now + self.lease_ms})
        free = any_of(Missing("owner"), Lt("expires_at", now + 1), Eq("owner", owner))
        try:
            self.scheduler.ports.store.update(pk, sk, write, free)
        except ConditionFailed:
            report.lease = "busy"
            return False
        report.lease = "held"
        return True

    def renew(self, group: int, owner: str) -> bool:
        """Extend the lease while sweeping (False: it was lost to another sweeper)."""
        now = self.scheduler.ports.clock.now_ms()
        pk, sk = lease_pk(group)
        try:
            self.scheduler.ports.store.update(
                pk, sk, Update(set={"expires_at": now + self.lease_ms}), Eq("owner", owner)
            )
        except ConditionFailed:
            return False
        return True

    def _release(self, group: int, owner: str) -> None:
        """Done: the next tick's sweeper may take the group at once."""
        pk, sk = lease_pk(group)
        # Lost to another sweeper, or the write failed: it lapses on its own.
        with contextlib.suppress(ConditionFailed, StoreUnavailable):
            self.scheduler.ports.store.update(
                pk, sk, Update(remove=("owner", "expires_at")), Eq("owner", owner)
            )

    # ----------------------------------------------------------------------------- looks

    def look(
        self, workflow_id: str, now: int, report: SweepReport, *, pressed: bool = False
    ) -> None:
        """Re-read one due workflow, act on it, and move its watch deadline."""
        items = self.scheduler.ports.store.load(wf_pk(workflow_id))
        head = next((i for i in items if i.get("sk") == WF_SK), None)
        if head is None:
            report.add("stale_entries")
            return
        failures = int(head.get("look_failures", 0))
        if failures and now < int(head.get("look_failed_at", 0)) + look_backoff_ms(failures):
            report.add("backing_off")  # its last look failed: wait out the backoff
            return
        if self.scheduler.catalog.version(head["wf_type"], head["def_hash"]).state_machine:
            self._look_at_machine(head, now, report)
            return
        loaded = self.scheduler.parse(items)
        assert loaded is not None
        state, definition = loaded
        wf = state.workflow
        if wf.status.terminal or wf.due_at is None or wf.due_at > now:
            report.add("stale_entries")  # the index lagged behind the table
            return
        report.add("looked_at")
        pools = self._with_backlogs(state, definition, now)
        if self.scheduler.take_parked(state, definition, now, pools):
            # A result its agent could not write was recorded (and advanced after): plan on
            # the workflow as it is now.
            report.act("ParkedResult")
            reloaded = self.scheduler.parse(self.scheduler.ports.store.load(wf_pk(workflow_id)))
            assert reloaded is not None
            state, definition = reloaded
            if state.workflow.status.terminal:
                return
            pools = self._with_backlogs(state, definition, now)
        acted: list[str] = []
        applied_actions = self.scheduler.run(
            state, definition, supervisor=True, now=now, pools=pools
        )
        for applied in applied_actions:
            self._count_timeout(applied, definition)
            if applied.won and applied.looked and takes_over(applied.action):
                report.add("took_over")
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
        self._move_due(state, definition, now, report, pressed, pools)

    def _look_at_machine(self, head: Item, now: int, report: SweepReport) -> None:
        """A state machine's look (`shepherd.asl.engine`): its own cursor says what is due."""
        status = WorkflowStatus(head["status"])
        due = head.get("due_at")
        if status.terminal or due is None or int(due) > now:
            report.add("stale_entries")
            return
        report.add("looked_at")
        acted = self.scheduler.asl.look(head, now)
        if acted is not None:
            report.act(acted, now - int(due))
            logger.info(
                "supervisor acted",
                extra={"workflow_id": workflow_id_of(head["pk"]), "actions": [acted]},
            )

    def _with_backlogs(
        self, state: WorkflowState, definition: Definition, now: int
    ) -> dict[str, PoolState]:
        """The pools as this look plans with: for a pool where a task that was sent twice
        looks lost again, how many messages its queue holds (read once per sweep and pool,
        only then: a backlog read costs an SQS request); for a rate-limited pool with a task
        not claimed yet, how far its limiter has reserved (read once per sweep and pool)."""
        pools = self._pools
        grace = definition.dispatch_timeout_seconds * 1000
        for kind, rec in (
            *(("step", r) for r in state.steps.values()),
            *(("compensation", r) for r in state.compensations.values()),
            *((k, u) for (k, _), units in state.windows.items() for u in units.values()),
        ):
            limited = self._limited_pool(definition, kind, rec.name)
            if limited is not None and rec.status in (StepStatus.QUEUED, StepStatus.PENDING):
                pool = pools.get(limited, PoolState(limited))
                if pool.reserved_until is None:
                    if pools is self._pools:
                        pools = dict(self._pools)
                    pools[limited] = replace(pool, reserved_until=self._reserved_until(limited))
            if rec.status is not StepStatus.QUEUED or rec.resent_at is None:
                continue
            if rec.dispatched_at is None or now < rec.dispatched_at + grace:
                continue
            name = definition.spec(kind, rec.name).pool
            pool = pools.get(name, PoolState(name))
            if pool.paused or pool.waiting is not None:
                continue
            if pools is self._pools:
                pools = dict(self._pools)
            pools[name] = replace(pool, waiting=self._waiting(name))
        return pools

    def _limited_pool(self, definition: Definition, kind: str, step: str) -> str | None:
        """The rate-limited pool a task unit runs in, if it is one."""
        spec = definition.by_name.get(step)
        if self.limiter is None or spec is None:
            return None
        task = spec if kind == "step" else spec.compensation
        if task is None or (task is spec and not spec.is_task):
            return None
        return task.pool if self.limiter.limits(task.pool) else None

    def _reserved_until(self, pool: str) -> int | None:
        assert self.limiter is not None
        with self._backlog_lock:
            if pool not in self._reserved:
                try:
                    self._reserved[pool] = self.limiter.reserved_until(pool)
                except StoreUnavailable:  # unknown: the grace alone, as before (a copy at worst)
                    logger.warning("rate limiter not read: pool %s", pool, exc_info=True)
                    self._reserved[pool] = None
            return self._reserved[pool]

    def _waiting(self, pool: str) -> int | None:
        with self._backlog_lock:
            if pool not in self._backlogs:
                backlog = self.scheduler.ports.queue.backlog(pool)
                self._backlogs[pool] = (
                    None
                    if backlog is None
                    else backlog.visible + backlog.in_flight + backlog.delayed
                )
            return self._backlogs[pool]

    def _move_due(
        self,
        state: WorkflowState,
        definition: Definition,
        now: int,
        report: SweepReport,
        pressed: bool = False,
        pools: dict[str, PoolState] | None = None,
    ) -> None:
        """Move the watch entry to the next moment the supervisor must look (or leave it)."""
        wf = state.workflow
        if wf.status.terminal:
            return
        due = next_due(state, definition, now, self._pools if pools is None else pools)
        shard = self.scheduler.shard(wf.workflow_id)
        rehome = wf.watch_shard is not None and wf.watch_shard != shard
        if due == wf.due_at and not wf.look_failures and not rehome:
            return
        if due is not None and not wf.look_failures and not rehome and not pressed:
            every = self.sweep_interval_ms
            if every > 0 and due <= now + every:
                report.leave_due(wf.workflow_id, due)  # looked at again in time: no write
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
            writes = tx.unwatch_paused(wf, unclaimed, now, due, shard=shard)
            moved = self.scheduler.executor.together(writes, wf)
        else:
            moved = self.scheduler.executor.workflow(state, tx.move_due(wf, due, shard=shard))
        if moved:
            report.add("moved")
        else:
            # Someone else changed the workflow since: its own write left a valid deadline.
            report.act("MoveDueLost")

    def _count_timeout(self, applied: Applied, definition: Definition) -> None:
        """A timeout or a lost heartbeat is a retryable failure of its pool's breaker."""
        action = applied.action
        if self.breakers is None or not applied.won or not isinstance(action, EndAttempt):
            return
        if action.outcome in ("timeout", "heartbeat_timeout") and action.seen.child_id is None:
            pool = definition.spec(action.seen.kind, action.seen.name).pool
            self.breakers.record(pool, failed=True)

    @staticmethod
    def _record(applied: Applied, report: SweepReport) -> str | None:
        """Count one applied action; its detection lag if it acted on a passed deadline."""
        action = applied.action
        name = type(action).__name__
        if not applied.won:
            report.act(f"{name}Lost")
            return None
        if isinstance(action, Dispatch) and action.lost:
            name = "Redispatch"
        if isinstance(action, EndAttempt):
            name = "TimedOut"
        lost = isinstance(action, Dispatch) and action.lost and not report.pools_unread
        timely = isinstance(action, EndAttempt) or lost
        overdue = getattr(action, "overdue_ms", -1)
        report.act(name, overdue if timely and overdue >= 0 else None)
        return name

    # ------------------------------------------------------------------- failed looks

    def _look_failed(self, workflow_id: str, now: int, exc: Exception, report: SweepReport) -> None:
        """Count a failed look; retry it with backoff, or park the workflow. Never raises."""
        report.add("failed_looks")
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
            tx.park(item["pk"], status, failures, now, expires, dumps(error)), item
        ):
            return
        report.add("parked")
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
