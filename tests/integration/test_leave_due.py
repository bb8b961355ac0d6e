"""A look whose next deadline falls before the next sweep leaves the watch entry due instead
of moving it (the move would buy nothing: the next sweep looks either way). The entry stays
earlier than needed, which invariant 3 allows. Any later deadline moves the entry, and so does
every look of a sweep under pressure: an entry left due keeps its old `due_at`, sorts first,
and would be re-read by every sweep (issue 23: no entry is re-read forever).
"""

from __future__ import annotations

import pytest
from shepherd.engine.supervisor import PRESSURE_SHARE, Supervisor
from shepherd.keys import WF_SK, wf_pk
from support import ORDER, Harness


def _lost_roots(h: Harness, count: int) -> list[str]:
    """Workflows whose first message was lost: live, due every g, nothing to do for a while."""
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
    gap = harness.definitions["order_fulfilment"].start_gap_ms
    harness.clock.advance(gap / 1000 + 0.5)
    before = _due_at(harness, wf)
    supervisor = Supervisor(harness.scheduler, sweep_interval_ms=gap * 2)
    report = supervisor.sweep()
    assert (report.looked_at, report.left_due, report.moved) == (1, 1, 0)
    assert _due_at(harness, wf) == before  # no write: still due, the next sweep reads it


def test_without_a_known_sweep_interval_the_entry_moves(harness: Harness) -> None:
    (wf,) = _lost_roots(harness, 1)
    gap = harness.definitions["order_fulfilment"].start_gap_ms
    harness.clock.advance(gap / 1000 + 0.5)
    report = Supervisor(harness.scheduler).sweep()
    assert (report.left_due, report.moved) == (0, 1)
    due = _due_at(harness, wf)
    assert due is not None and due > harness.clock.now_ms()


def test_a_deadline_beyond_the_next_sweep_moves_the_entry(harness: Harness) -> None:
    """Changed on purpose (issue 23): a deadline up to 15 sweeps away used to leave the entry
    due, re-read by every sweep until then; under load those entries sorted first forever."""
    (wf,) = _lost_roots(harness, 1)
    gap = harness.definitions["order_fulfilment"].start_gap_ms
    harness.clock.advance(gap / 1000 + 0.5)
    report = Supervisor(harness.scheduler, sweep_interval_ms=gap // 4).sweep()
    assert (report.looked_at, report.left_due, report.moved) == (1, 0, 1)
    due = _due_at(harness, wf)
    assert due is not None and due > harness.clock.now_ms() + gap // 4


def test_a_sweep_under_pressure_moves_every_entry_it_looks_at(harness: Harness) -> None:
    ids = _lost_roots(harness, 4)
    gap = harness.definitions["order_fulfilment"].start_gap_ms
    harness.clock.advance(gap / 1000 + 0.5)
    # Every next deadline falls before the next sweep, but 4 entries due is pressure for a
    # sweep of at most 8 looks: leaving them due would make them sort first next time.
    assert 8 // PRESSURE_SHARE <= 4
    supervisor = Supervisor(harness.scheduler, max_workflows=8, sweep_interval_ms=gap * 2)
    report = supervisor.sweep()
    assert (report.looked_at, report.left_due, report.moved) == (4, 0, 4)
    now = harness.clock.now_ms()
    assert all((_due_at(harness, wf) or 0) > now for wf in ids)


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
