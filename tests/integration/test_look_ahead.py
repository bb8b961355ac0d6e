"""A sweep that looks ahead (issue 23's detection lag): given a horizon a little before the
next sweep (`until_ms`), it also reads the watch entries due by then and looks at each one at
its due time, sleeping on the clock in between, so a deadline is acted on when it passes
instead of up to a sweep interval later. A look before a deadline does nothing; an idle sweep
makes exactly the reads it made before; an entry a look leaves due is looked at again at its
next deadline if that comes before the horizon.
"""

from __future__ import annotations

import itertools
from typing import Any

from shepherd.engine.supervisor import Supervisor
from shepherd.keys import WF_SK, lease_pk, wf_pk
from support import ORDER, Harness, memory_harness

INTERVAL = 5_000
MARGIN = 500  # the horizon: the next sweep's moment less this


def _lost_root(h: Harness, order_id: str = "o-1") -> str:
    """A workflow whose first message was lost: re-sent `DispatchTimeoutSeconds` (10 s) after
    its start, by the supervisor."""
    wf = h.start("order_fulfilment", {**ORDER, "order_id": order_id})
    for m in h.receive():
        h.queue.delete(m.receipt)
    return wf


def _deadline(h: Harness, wf: str) -> int:
    definition = h.definitions["order_fulfilment"]
    return h.state(wf).workflow.created_at + definition.dispatch_timeout_seconds * 1000


def _due_at(h: Harness, wf: str) -> int:
    item = h.store.get(wf_pk(wf), WF_SK)
    assert item is not None
    return int(item["due_at"])


def _watched_at_deadline(h: Harness, *ids: str) -> None:
    """Sweep (no look-ahead, every look moving its entry) whenever one of them is due until
    every entry is due exactly at its re-send's deadline (the workflows must start within
    2 s, G, of each other: no sweep may reach a deadline)."""
    while pending := [wf for wf in ids if _due_at(h, wf) < _deadline(h, wf)]:
        h.clock.set(max(h.clock.now_ms(), min(_due_at(h, wf) for wf in pending)))
        assert h.clock.now_ms() < min(_deadline(h, wf) for wf in ids)
        Supervisor(h.scheduler).sweep()
    assert all(_due_at(h, wf) == _deadline(h, wf) for wf in ids)


def _redispatched_at(h: Harness, wf: str) -> int | None:
    return h.step(wf, "reserve_inventory").resent_at


def test_an_entry_due_during_the_interval_is_looked_at_when_due_by_that_sweep(
    harness: Harness,
) -> None:
    h = harness  # in memory and on DynamoDB (moto): the index read up to a future moment
    wf = _lost_root(h)
    _watched_at_deadline(h, wf)
    deadline = _deadline(h, wf)
    h.clock.set(deadline - 3_000)  # the sweep starts 3 s before the deadline
    supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL)
    report = supervisor.sweep(until_ms=h.clock.now_ms() + INTERVAL - MARGIN)
    assert report.actions["Redispatch"] == 1
    # At its due time. Without a horizon this sweep does not see it, and the next one, 5 s
    # later, acts 2 s after the deadline.
    assert _redispatched_at(h, wf) == deadline
    assert report.lags_ms == [0]
    assert (report.looked_ahead, report.waited_ms) == (1, 3_000)
    assert report.oldest_due_age_ms == 0  # nothing was late when the sweep started
    assert report.duration_ms == 3_000


def test_an_entry_left_due_is_looked_at_again_at_its_deadline() -> None:
    """A look whose next deadline falls before the next sweep leaves the entry due (no
    write); looking ahead, the sweep looks at it again at that deadline."""
    h = memory_harness()
    wf = _lost_root(h)
    deadline = _deadline(h, wf)
    h.clock.set(deadline - 3_000)  # its entry (due at G) has been due for 5 s
    supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL)
    report = supervisor.sweep(until_ms=h.clock.now_ms() + INTERVAL - MARGIN)
    assert report.left_due >= 1 and report.moved == 0
    assert _redispatched_at(h, wf) == deadline
    assert report.actions["Redispatch"] == 1


def test_an_entry_due_after_the_horizon_waits_for_the_next_sweep() -> None:
    h = memory_harness()
    wf = _lost_root(h)
    _watched_at_deadline(h, wf)
    deadline = _deadline(h, wf)
    h.clock.set(deadline - INTERVAL + MARGIN // 2)  # due between the horizon and the next sweep
    start = h.clock.now_ms()
    report = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL).sweep(
        until_ms=start + INTERVAL - MARGIN
    )
    assert report.due == 0 and report.waited_ms == 0 and h.clock.now_ms() == start
    assert _redispatched_at(h, wf) is None


def test_a_look_ahead_never_acts_before_a_deadline() -> None:
    """Workflows started 0.3 s apart: each re-send happens at its own deadline, never before,
    and every look plans with the clock's time, never a moment before the entry was due."""
    h = memory_harness()
    ids = []
    for i in range(6):
        ids.append(_lost_root(h, f"o-{i}"))
        h.clock.advance(0.3)
    _watched_at_deadline(h, *ids)
    h.clock.set(min(_deadline(h, wf) for wf in ids) - 1_000)
    supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL)
    seen: list[tuple[str, int, int, int]] = []
    real_look = Supervisor.look

    def look(self: Supervisor, workflow_id: str, now: int, *args: Any, **kwargs: Any) -> None:
        seen.append((workflow_id, now, h.clock.now_ms(), _due_at(h, workflow_id)))
        real_look(self, workflow_id, now, *args, **kwargs)

    Supervisor.look = look  # type: ignore[method-assign]
    try:
        report = supervisor.sweep(until_ms=h.clock.now_ms() + INTERVAL - MARGIN)
    finally:
        Supervisor.look = real_look  # type: ignore[method-assign]
    assert report.actions["Redispatch"] == 6
    for wf in ids:
        assert _redispatched_at(h, wf) == _deadline(h, wf)
    assert all(now == clock and due <= now for _, now, clock, due in seen)
    assert all(lag == 0 for lag in report.lags_ms)


def test_an_idle_sweep_makes_the_same_reads_with_a_horizon() -> None:
    def calls(until: bool) -> list[str]:
        h = memory_harness()
        made: list[str] = []
        store = h.scheduler.ports.store
        for name in ("query_due", "update", "get", "load", "transact", "put_new"):
            real = getattr(store, name)

            def counted(*args: Any, _name: str = name, _real: Any = real, **kw: Any) -> Any:
                made.append(_name if _name != "query_due" else f"query_due:{args[0]}")
                return _real(*args, **kw)

            setattr(store, name, counted)
        supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL)
        start = h.clock.now_ms()
        horizon = start + INTERVAL - MARGIN if until else None
        report = supervisor.sweep_group(0, owner="tick", until_ms=horizon)
        assert (report.lease, report.due, report.waited_ms) == ("none", 0, 0)
        assert h.clock.now_ms() == start  # no waiting
        return made

    assert calls(until=True) == calls(until=False)


def test_every_group_swept_together_is_looked_at_on_time() -> None:
    """Groups swept by one invocation wait together: one group's next entry does not delay
    another's (one after another, the second would start after the first's horizon)."""
    h = memory_harness()
    supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL, groups=2)
    ids: list[str] = []
    i = 0
    while len({int(h.scheduler.shard(wf)[2:]) % 2 for wf in ids}) < 2:
        ids.append(_lost_root(h, f"o-{i}"))  # 4 shards in 2 groups: W#0, W#2 and W#1, W#3
        h.clock.advance(0.3)
        i += 1
    _watched_at_deadline(h, *ids)
    h.clock.set(min(_deadline(h, wf) for wf in ids) - 500)
    reports = supervisor.sweep_groups(
        [0, 1], owner="tick", until_ms=max(_deadline(h, wf) for wf in ids)
    )
    assert [r.lease for r in reports] == ["held", "held"]
    for wf in ids:
        assert _redispatched_at(h, wf) == _deadline(h, wf)
    assert sum(r.actions["Redispatch"] for r in reports) == len(ids)
    for group in (0, 1):  # both released: the next tick's sweeper takes them at once
        lease = h.store.get(*lease_pk(group))
        assert lease is not None and "owner" not in lease


def test_waiting_renews_the_lease_and_a_lost_lease_stops_the_sweep() -> None:
    h = memory_harness()
    wf = _lost_root(h)
    _watched_at_deadline(h, wf)
    deadline = _deadline(h, wf)
    h.clock.set(deadline - 4_000)
    supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL, lease_ms=2_000)
    renewals: list[int] = []
    real_renew = Supervisor.renew

    def renew(self: Supervisor, group: int, owner: str) -> bool:
        renewals.append(h.clock.now_ms())
        return real_renew(self, group, owner)

    Supervisor.renew = renew  # type: ignore[method-assign]
    try:
        report = supervisor.sweep_group(0, owner="a", until_ms=deadline + 500)
        assert report.lease == "held" and _redispatched_at(h, wf) == deadline
        assert renewals and all(b - a >= 1_000 for a, b in itertools.pairwise(renewals))
        # Another sweeper takes the lease over while this one waits: it stops, acts on nothing.
        wf2 = _lost_root(h, "o-2")
        _watched_at_deadline(h, wf2)
        h.clock.set(_deadline(h, wf2) - 3_000)

        def stolen(self: Supervisor, group: int, owner: str) -> bool:
            return False

        Supervisor.renew = stolen  # type: ignore[method-assign]
        lost = supervisor.sweep_group(0, owner="a", until_ms=_deadline(h, wf2) + 500)
    finally:
        Supervisor.renew = real_renew  # type: ignore[method-assign]
    assert lost.lease == "held" and lost.due == 0 and not lost.truncated
    assert _redispatched_at(h, wf2) is None
    assert h.clock.now_ms() < _deadline(h, wf2)


def test_the_deadline_stops_the_wait() -> None:
    """A Lambda's remaining time (`deadline_ms`) bounds the wait as it bounds the looks."""
    h = memory_harness()
    wf = _lost_root(h)
    _watched_at_deadline(h, wf)
    deadline = _deadline(h, wf)
    h.clock.set(deadline - 3_000)
    start = h.clock.now_ms()
    report = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL).sweep(
        deadline_ms=start + 1_000, until_ms=start + INTERVAL - MARGIN
    )
    assert report.due == 0 and not report.truncated
    assert h.clock.now_ms() == start + 1_000
    assert _redispatched_at(h, wf) is None


def test_the_backlog_comes_first_and_the_budget_counts_what_is_looked_at_ahead() -> None:
    h = memory_harness()
    late = [_lost_root(h, f"late-{i}") for i in range(2)]
    h.clock.advance(1.5)
    soon = [_lost_root(h, f"soon-{i}") for i in range(2)]
    _watched_at_deadline(h, *late, *soon)
    h.clock.set(_deadline(h, late[0]) + 1_000)  # the late ones overdue, the others 0.5 s ahead
    start = h.clock.now_ms()
    supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL, max_workflows=3)
    report = supervisor.sweep(until_ms=start + INTERVAL - MARGIN)
    assert report.due == 3 and report.looked_ahead == 1
    assert all(_redispatched_at(h, wf) == start for wf in late)
    assert report.oldest_due_age_ms == 1_000
    done = [wf for wf in soon if _redispatched_at(h, wf) is not None]
    assert len(done) == 1 and _redispatched_at(h, done[0]) == _deadline(h, done[0])


def test_no_look_ahead_while_a_pool_is_paused() -> None:
    """A look watches a paused pool's tasks every g from its `now`, which must not be later
    than the sweep's read of the pools (a resume since starts their dispatch grace earlier:
    `make sim` seed 10008 at x4, a sweep that read a pool paused looked 0.7 s later, after
    its resume, and moved an entry past the re-sent task's deadline). So while a pool is
    paused a sweep takes only what was due when it started, as without a horizon."""
    h = memory_harness()
    wf = _lost_root(h)
    _watched_at_deadline(h, wf)
    h.pools.pause("payments", by="ops")  # any pool
    deadline = _deadline(h, wf)
    h.clock.set(deadline - 3_000)
    start = h.clock.now_ms()
    supervisor = Supervisor(h.scheduler, sweep_interval_ms=INTERVAL)
    report = supervisor.sweep(until_ms=start + INTERVAL - MARGIN)
    assert report.held_back and report.due == 0 and report.waited_ms == 0
    assert h.clock.now_ms() == start and _redispatched_at(h, wf) is None
    h.pools.resume("payments", by="ops")
    report = supervisor.sweep(until_ms=start + INTERVAL - MARGIN)
    assert not report.held_back and _redispatched_at(h, wf) == deadline
