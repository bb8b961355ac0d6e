"""The partitioned supervisor (issue 23): groups of shards, leases, oldest due first, a budget,
and a shard count that can change on a live table without losing an entry."""

from __future__ import annotations

from shepherd.engine.supervisor import Supervisor, group_shards
from shepherd.keys import WF_SK, watch_shard, wf_pk
from support import ORDER, Harness


def _lost(h: Harness, count: int) -> list[str]:
    """Workflows whose root message was lost: each due `DispatchTimeoutSeconds` after it."""
    ids = [h.start("order_fulfilment", {**ORDER, "order_id": f"o-{i}"}) for i in range(count)]
    _redispatched(h, [])  # every message lost
    return ids


def _redispatched(h: Harness, ids: list[str]) -> set[str]:
    """The workflows among `ids` whose root was sent again (every visible message, taken)."""
    found: set[str] = set()
    while batch := h.receive():
        for m in batch:
            h.queue.delete(m.receipt)
            if m.task.workflow_id in ids:
                found.add(m.task.workflow_id)
    return found


def test_groups_deal_the_shards_out_and_every_group_sweeps_only_its_own(harness: Harness) -> None:
    assert group_shards(8, 3, 1) == [1, 4, 7]
    assert sorted(s for g in range(3) for s in group_shards(8, 3, g)) == list(range(8))
    ids = _lost(harness, 24)
    harness.clock.advance(11)  # past the dispatch grace (10 s)
    supervisor = Supervisor(harness.scheduler, groups=2)
    by_group = {g: supervisor.sweep_group(g) for g in (0, 1)}
    shards = {wf: int(watch_shard(wf, 4)[2:]) for wf in ids}
    for group, report in by_group.items():
        mine = [wf for wf in ids if shards[wf] % 2 == group]
        assert report.looked_at == len(mine) and report.actions["Redispatch"] == len(mine)
    assert _redispatched(harness, ids) == set(ids)


def test_overload_takes_the_oldest_due_first_across_every_shard(harness: Harness) -> None:
    """Past its budget the old sweep (shards in a fixed order, stopping at its budget and
    starting again at the first shard) never reached the last shards under steady overload.
    Now every sweep takes the oldest due entries across all its shards, so overload delays
    every shard evenly, and the report says how long the oldest due entry had waited."""
    ids = []
    for _ in range(12):  # one a second: the first ones are the oldest due
        ids += _lost(harness, 1)
        harness.clock.advance(1)
    shards = [watch_shard(wf, 4) for wf in ids]
    assert "W#0" not in shards[:3] and "W#0" in shards  # the oldest are not in the first shard
    harness.clock.advance(11)
    supervisor = Supervisor(harness.scheduler, max_workflows=3)
    first = supervisor.sweep()
    assert first.truncated and first.looked_at == 3
    assert first.oldest_due_age_ms >= 11_000  # the first workflow's grace ended 11+ s ago
    assert _redispatched(harness, ids) == set(ids[:3])
    while supervisor.sweep().looked_at:  # three at a time, oldest first, every shard
        pass
    assert _redispatched(harness, ids) == set(ids[3:])


def test_a_sweep_stops_at_its_deadline(harness: Harness) -> None:
    _lost(harness, 6)
    harness.clock.advance(11)
    real_look = Supervisor.look
    supervisor = Supervisor(harness.scheduler)

    def slow_look(self: Supervisor, *args: object, **kwargs: object) -> None:
        harness.clock.advance(0.4)  # each look takes 400 ms
        real_look(self, *args, **kwargs)  # type: ignore[arg-type]

    Supervisor.look = slow_look  # type: ignore[method-assign]
    try:
        report = supervisor.sweep(deadline_ms=harness.clock.now_ms() + 1_000)
    finally:
        Supervisor.look = real_look  # type: ignore[method-assign]
    assert report.looked_at == 3 and report.truncated  # started at 0, 400, 800 ms


def test_a_group_is_swept_by_one_lease_holder_at_a_time(harness: Harness) -> None:
    ids = _lost(harness, 4)
    harness.clock.advance(11)
    a = Supervisor(harness.scheduler, lease_ms=10_000)
    b = Supervisor(harness.scheduler, lease_ms=10_000)
    # A takes the lease and dies before it releases it (its sweep never returns).
    assert a._lease(0, "a", harness.clock.now_ms(), a_report := _report())
    assert a_report.lease == "held"
    busy = b.sweep_group(0, owner="b")
    assert busy.lease == "busy" and busy.looked_at == 0
    # Once A's lease runs out, B sweeps the group.
    harness.clock.advance(10.001)
    took = b.sweep_group(0, owner="b")
    assert took.lease == "held" and took.looked_at == len(ids)
    # A finished sweep releases it: the next tick's sweeper does not wait for it to lapse.
    _lost(harness, 2)
    harness.clock.advance(11)
    assert a.sweep_group(0, owner="a").lease == "held"


def test_nothing_due_takes_no_lease(harness: Harness) -> None:
    """An idle tick reads the index and writes nothing (the lease would cost 2 WRU a tick)."""
    writes = harness.store.writes if hasattr(harness.store, "writes") else None
    report = Supervisor(harness.scheduler).sweep_group(0, owner="idle")
    assert report.lease == "none" and report.looked_at == 0
    if writes is not None:
        assert harness.store.writes <= writes + 1  # at most the shard count's record, once


def test_fewer_shards_on_a_live_table_lose_no_entry(harness: Harness) -> None:
    """The supervisor sweeps every shard any deployment used (recorded in CONFIG#watch);
    an entry in a shard beyond the current count moves to its new shard when it moves."""
    ids = _lost(harness, 12)  # written with 4 shards
    old = {wf: harness.store.get(wf_pk(wf), WF_SK)["watch_shard"] for wf in ids}  # type: ignore[index]
    assert {"W#2", "W#3"} & set(old.values())
    Supervisor(harness.scheduler).shard_span()  # a sweeper of the 4-shard deployment ran
    harness.scheduler.config = type(harness.scheduler.config)(watch_shards=2)
    harness.clock.advance(11)
    report = Supervisor(harness.scheduler).sweep()
    assert report.shards == 4 and report.looked_at == 12
    assert _redispatched(harness, ids) == set(ids)
    now = {wf: harness.store.get(wf_pk(wf), WF_SK)["watch_shard"] for wf in ids}  # type: ignore[index]
    assert set(now.values()) <= {"W#0", "W#1"}  # re-homed as they moved


def _report():  # type: ignore[no-untyped-def]
    from shepherd.engine.supervisor import SweepReport

    return SweepReport(started_at=0)
