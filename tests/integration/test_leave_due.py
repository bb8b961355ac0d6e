"""A look whose next deadline is near leaves the watch entry due instead of moving it.

Moving the entry costs 1 WRU on the workflow item and 2 on its index entry; re-reading the
workflow at the next sweeps costs 1 RRU each. The entry stays earlier than needed, which
invariant 3 allows, and the sweep's work stays bounded (a budget per sweep).
"""

from __future__ import annotations

import pytest
from shepherd.engine.supervisor import READS_PER_MOVE, Supervisor
from shepherd.keys import WF_SK, wf_pk
from support import ORDER, Harness


def _lost_roots(h: Harness, count: int) -> list[str]:
    """Workflows whose first message was lost: live, due every G, nothing to do for a while."""
    ids = [h.start("order_fulfilment", ORDER) for _ in range(count)]
    for m in h.receive():
        h.queue.delete(m.receipt)
    return ids


def _due_at(h: Harness, workflow_id: str) -> int | None:
    item = h.store.get(wf_pk(workflow_id), WF_SK)
    assert item is not None
    return None if item.get("due_at") is None else int(item["due_at"])


def test_an_entry_due_again_before_the_next_sweep_is_left_where_it_is(harness: Harness) -> None:
    (wf,) = _lost_roots(harness, 1)
    gap = harness.definitions["order_fulfilment"].watch_gap_ms
    harness.clock.advance(gap / 1000 + 0.5)
    before = _due_at(harness, wf)
    supervisor = Supervisor(harness.scheduler, sweep_interval_ms=gap * 2)
    report = supervisor.sweep()
    assert (report.looked_at, report.left_due, report.moved) == (1, 1, 0)
    assert _due_at(harness, wf) == before  # no write: still due, the next sweep reads it


def test_without_a_known_sweep_interval_the_entry_moves(harness: Harness) -> None:
    (wf,) = _lost_roots(harness, 1)
    gap = harness.definitions["order_fulfilment"].watch_gap_ms
    harness.clock.advance(gap / 1000 + 0.5)
    report = Supervisor(harness.scheduler).sweep()
    assert (report.left_due, report.moved) == (0, 1)
    due = _due_at(harness, wf)
    assert due is not None and due > harness.clock.now_ms()


def test_reads_are_preferred_up_to_a_budget_per_sweep_then_entries_move(
    harness: Harness,
) -> None:
    ids = _lost_roots(harness, 3)
    gap = harness.definitions["order_fulfilment"].watch_gap_ms
    harness.clock.advance(gap / 1000 + 0.5)
    # The next deadline (G away) is beyond the next sweep but within READS_PER_MOVE sweeps.
    every = gap // 2
    assert gap <= READS_PER_MOVE * every
    supervisor = Supervisor(harness.scheduler, max_workflows=8, sweep_interval_ms=every)
    report = supervisor.sweep()
    assert report.looked_at == 3
    assert (report.left_due, report.moved) == (2, 1)  # budget: max_workflows // 4 = 2
    now = harness.clock.now_ms()
    assert sorted((_due_at(harness, wf) or 0) > now for wf in ids) == [False, False, True]


@pytest.mark.parametrize("every_ms", [1_000, 5_000])
def test_an_entry_left_due_is_still_acted_on_in_time(harness: Harness, every_ms: int) -> None:
    (wf,) = _lost_roots(harness, 1)
    definition = harness.definitions["order_fulfilment"]
    supervisor = Supervisor(harness.scheduler, sweep_interval_ms=every_ms)
    # The root is dispatched with the start; it has no item (and no dispatched_at) until a
    # claim or a re-dispatch creates it, so its grace runs from the workflow's creation.
    assert not harness.step(wf, "reserve_inventory").stored
    dispatched = harness.state(wf).workflow.created_at
    deadline = dispatched + definition.dispatch_timeout_seconds * 1000
    redispatched_at = None
    while redispatched_at is None:
        harness.clock.advance(every_ms / 1000)
        if supervisor.sweep().actions.get("Redispatch"):
            redispatched_at = harness.clock.now_ms()
    assert deadline <= redispatched_at < deadline + every_ms
