"""The map's pure decisions (issue 24): opening, exactly-once accounting with stripe refill,
the ASL tolerance, the verdict, the window's look, item compensation order, and the ids.
Writes are applied to the strict in-memory store, so their conditions are what is tested."""

from __future__ import annotations

import pytest
from shepherd.decisions import fanout as fo
from shepherd.decisions.transitions import Write
from shepherd.errors import ConditionFailed
from shepherd.fanout import MapSpec
from shepherd.keys import MAP_ITEM_PAGE, map_item_key, map_item_of
from shepherd.testing import MemoryStore

KEY = ("WF#w", "S#m")


def spec(c: int = 3, count: int | None = None, pct: float | None = None) -> MapSpec:
    return MapSpec(
        ItemsPath="$.input.xs",
        MaxConcurrency=c,
        ToleratedFailureCount=count,
        ToleratedFailurePercentage=pct,
    )


def apply(store: MemoryStore, write: Write) -> fo.MapState:
    after = store.update(write.pk, write.sk, write.update, write.condition)
    state = fo.MapState.from_item(after)
    assert state is not None
    return state


def opened(store: MemoryStore, total: int, s: MapSpec) -> fo.MapState:
    result = fo.open_map(KEY, total, s, now=10)
    state = apply(store, result.write)
    assert result.entered == tuple(range(min(total, s.max_concurrency, fo.OPEN_CHUNK)))
    return state


def test_opening_puts_one_item_per_stripe_in_the_window_once() -> None:
    store = MemoryStore()
    state = opened(store, 7, spec(3))
    assert state.window == {0: 10, 1: 10, 2: 10}
    assert state.counts() == {
        "total": 7,
        "pending": 4,
        "running": 3,
        "succeeded": 0,
        "failed": 0,
        "cancelled": 0,
        "compensated": 0,
    }
    with pytest.raises(ConditionFailed):  # a duplicate opener
        apply(store, fo.open_map(KEY, 7, spec(3), now=99).write)
    assert fo.MapState.from_item(store.get(*KEY) or {}) == state


def test_an_empty_map_has_succeeded_and_a_small_one_sends_every_item() -> None:
    assert opened(MemoryStore(), 0, spec(3)).status == "SUCCEEDED"
    assert opened(MemoryStore(), 2, spec(3)).window == {0: 10, 1: 10}


def test_an_item_is_accounted_once_and_brings_its_stripes_next() -> None:
    store = MemoryStore()
    seen = opened(store, 7, spec(3))
    first = fo.account(KEY, seen, 1, "succeeded", now=20)
    assert first.entered == (4,)
    state = apply(store, first.write)
    assert state.window == {0: 10, 2: 10, 4: 20} and state.succeeded == 1
    # The same end again (a duplicate message, a racing look): its entry is gone.
    with pytest.raises(ConditionFailed):
        apply(store, fo.account(KEY, seen, 1, "succeeded", now=21).write)
    # Two items ending "at once" on the same stale read do not contend.
    state = apply(store, fo.account(KEY, seen, 0, "failed", now=22).write)
    state = apply(store, fo.account(KEY, seen, 2, "succeeded", now=22).write)
    assert state.window == {3: 22, 4: 20, 5: 22}
    assert (state.succeeded, state.failed, state.pending) == (2, 1, 1)
    # The last stripe ends without a follower beyond the total.
    assert fo.account(KEY, state, 5, "succeeded", now=30).entered == ()


def test_a_map_that_stopped_running_is_accounted_without_a_refill() -> None:
    store = MemoryStore()
    seen = opened(store, 9, spec(3))
    after = apply(store, fo.account(KEY, seen, 0, "failed", now=20).write)
    verdict = fo.decide(KEY, after, spec(3))
    assert verdict is not None and verdict[1] == "FAILED"
    failed = apply(store, verdict[0])
    assert fo.decide(KEY, failed, spec(3)) is None  # decided once
    # A stale reader's refill loses; re-read, it counts the item and sends nothing.
    with pytest.raises(ConditionFailed):
        apply(store, fo.account(KEY, seen, 1, "succeeded", now=30).write)
    late = fo.account(KEY, failed, 1, "succeeded", now=30)
    assert late.entered == ()
    state = apply(store, late.write)
    assert state.window == {2: 10, 3: 20} and state.succeeded == 1 and state.pending == 0
    state = apply(store, fo.account(KEY, state, 2, "cancelled", now=31).write)
    assert state.cancelled == 1 and state.window == {3: 20}


@pytest.mark.parametrize(
    ("count", "pct", "failed", "total", "over"),
    [
        (None, None, 0, 10, False),
        (None, None, 1, 10, True),  # neither given: any failure
        (2, None, 2, 10, False),
        (2, None, 3, 10, True),
        (None, 25, 2, 8, False),  # exactly 25 %
        (None, 25, 3, 8, True),
        (5, 10, 2, 10, True),  # both given: exceeding either fails
        (1, 50, 2, 10, True),
        (0, None, 1, 10, True),
        (None, 100, 10, 10, False),
    ],
)
def test_the_tolerance_follows_asl(
    count: int | None, pct: float | None, failed: int, total: int, over: bool
) -> None:
    assert fo.exceeded(failed, total, spec(3, count, pct)) is over


@pytest.mark.parametrize(
    ("count", "pct", "total", "most"),
    [
        (None, None, 10, 0),
        (2, None, 10, 2),
        (None, 25, 8, 2),
        (None, 33.3, 10, 3),
        (5, 10, 10, 1),
        (None, 100, 10, 10),
        (20, None, 4, 4),
    ],
)
def test_tolerated_is_the_most_failures_within_the_tolerance(
    count: int | None, pct: float | None, total: int, most: int
) -> None:
    s = spec(3, count, pct)
    assert fo.tolerated(total, s) == most
    assert fo.tolerated(total, None) == 0  # a map's compensation tolerates none
    assert not fo.exceeded(most, total, s) or most == 0
    assert most == total or fo.exceeded(most + 1, total, s)


def test_the_failure_that_decides_a_map_refills_nothing() -> None:
    """A failure refills its stripe only while the failures stay within the tolerance after
    it (a condition on m_failed as it is); the one that passes it is counted without."""
    store = MemoryStore()
    s = spec(3, count=1)
    seen = opened(store, 9, s)
    most = fo.tolerated(9, s)
    first = fo.account(KEY, seen, 0, "failed", now=20, tolerated_failures=most)
    assert first.entered == (3,)  # within the tolerance after it: its stripe goes on
    state = apply(store, first.write)
    second = fo.account(KEY, seen, 1, "failed", now=21, tolerated_failures=most)
    with pytest.raises(ConditionFailed):  # the read it planned on was older: m_failed is 1
        apply(store, second.write)
    again = fo.account(KEY, state, 1, "failed", now=21, tolerated_failures=most, refill=False)
    assert again.entered == ()
    state = apply(store, again.write)
    assert state.failed == 2 and 4 not in state.window and fo.verdict(state, s) == "FAILED"
    strict = fo.account(KEY, state, 2, "failed", now=22, tolerated_failures=0)
    assert strict.entered == ()  # no tolerance: no failure refills


def test_the_verdict_waits_for_every_item_unless_the_tolerance_is_passed() -> None:
    s = spec(2, count=1)
    running = fo.MapState(total=4, stride=2, succeeded=2, failed=1, window={3: 0})
    assert fo.verdict(running, s) == "RUNNING"
    done = fo.MapState(total=4, stride=2, succeeded=3, failed=1)
    assert fo.verdict(done, s) == "SUCCEEDED"
    early = fo.MapState(total=4, stride=2, failed=2, window={2: 0, 3: 0})
    assert fo.verdict(early, s) == "FAILED"


def test_a_look_reads_only_the_window_and_finds_ended_and_lost_items() -> None:
    state = fo.MapState(total=100, stride=4, window={0: 0, 1: 0, 2: 1_000, 3: 0})
    views = {
        0: fo.ItemView(0, "SUCCEEDED", 1, finished_at=50),  # its process died before accounting
        1: fo.ItemView(1),  # no unit: its message may be lost
        2: fo.ItemView(2),  # no unit, sent recently
        3: fo.ItemView(3, "RUNNING", 1),
    }
    look = fo.look(state, views, now=2_500, grace_ms=2_000)
    assert look.to_account == ((0, "succeeded"),)
    assert look.to_resend == (1,)
    assert look.next_due == 3_000
    keys = fo.window_keys("w", "m", state)
    assert keys == [map_item_key("w", "m", i) for i in range(4)]
    queued = fo.look(state, {1: fo.ItemView(1, "QUEUED", 2, dispatched_at=2_000)}, 2_500, 2_000)
    assert 1 not in queued.to_resend  # its retry was sent 500 ms ago


def test_items_that_may_have_acted_are_compensated_latest_first() -> None:
    items = [
        fo.ItemView(0, "SUCCEEDED", 1, finished_at=100, first_claimed_at=10),
        fo.ItemView(1, "FAILED", 3, finished_at=300, first_claimed_at=20),  # ambiguous
        fo.ItemView(2, "SUCCEEDED", 1, finished_at=200, first_claimed_at=30),
        fo.ItemView(3, "CANCELLED", 0),  # never claimed: never compensated
        fo.ItemView(4, "SUCCEEDED", 1, finished_at=200, first_claimed_at=40),
    ]
    assert fo.to_compensate(items, "ATTEMPTED") == [4, 2, 0, 1]
    assert fo.to_compensate(items, "SUCCEEDED") == [4, 2, 0]


def test_item_keys_ids_and_output() -> None:
    assert fo.item_idempotency_key("w", "m", 3) == fo.item_idempotency_key("w", "m", 3)
    keys = {fo.item_idempotency_key("w", "m", i) for i in range(100)}
    assert len(keys) == 100
    assert fo.item_idempotency_key("w", "m", 3, "compensation") != fo.item_idempotency_key(
        "w", "m", 3
    )
    same = fo.child_id("p", "s", 1, 2)
    assert same == fo.child_id("p", "s", 1, 2) and len(same) == 32
    others = {
        fo.child_id("p", "s", 1, 3),
        fo.child_id("p", "s", 2, 2),
        fo.child_id("p", "s", None, 2),
        fo.child_id("p", "t", 1, 2),
        fo.child_id("q", "s", 1, 2),
    }
    assert same not in others and len(others) == 5
    assert fo.output_list(3, {0: "a", 2: "c"}) == ["a", None, "c"]


def test_items_live_in_pages_of_their_own_partitions() -> None:
    first = map_item_key("w", "m", 0)
    last_of_page = map_item_key("w", "m", MAP_ITEM_PAGE - 1)
    next_page = map_item_key("w", "m", MAP_ITEM_PAGE)
    assert first[0] == last_of_page[0] != next_page[0]
    assert not first[0].startswith("WF#")  # never in the workflow's own partition
    assert map_item_of(*map_item_key("w#x", "m", 12345, "compensation")) == (
        "w#x",
        "m",
        12345,
        "compensation",
    )
    from shepherd import limits

    assert limits.MAP_ITEM_PAGE == MAP_ITEM_PAGE


def test_a_wide_window_opens_in_chunks_each_entered_once() -> None:
    store = MemoryStore()
    s = spec(300)
    state = opened(store, 1_000, s)
    assert state.opened == fo.OPEN_CHUNK == len(state.window)
    more = fo.open_more(KEY, state, now=20)
    assert more is not None
    assert more.entered == tuple(range(fo.OPEN_CHUNK, 2 * fo.OPEN_CHUNK))
    after = apply(store, more.write)
    with pytest.raises(ConditionFailed):  # a racing look entering the same chunk
        apply(store, more.write)
    last = fo.open_more(KEY, after, now=30)
    assert last is not None and last.entered == tuple(range(2 * fo.OPEN_CHUNK, 300))
    done = apply(store, last.write)
    assert done.running == 300 and done.opened == 300
    assert fo.open_more(KEY, done, now=40) is None
    # A map that failed enters nothing more.
    assert fo.open_more(KEY, fo.MapState(total=1_000, stride=300, status="FAILED"), 50) is None


@pytest.mark.parametrize("running", ["RUNNING", "PAUSED", "COMPENSATING", "CANCELLING"])
def test_a_child_that_has_not_ended_keeps_its_step_waiting(running: str) -> None:
    assert fo.child_end("c1", running, None) is None


def test_a_childs_end_maps_to_its_steps_attempt() -> None:
    assert fo.child_end("c1", "SUCCEEDED", None) == fo.ChildEnd(True)
    failed = fo.child_end("c1", "COMPENSATED", {"type": "CardDeclined", "message": "no funds"})
    assert failed == fo.ChildEnd(
        False, "CardDeclined", "child workflow c1 ended COMPENSATED: no funds"
    )
    cancelled = fo.child_end("c2", "CANCELLED", None)
    assert cancelled == fo.ChildEnd(
        False, "ChildWorkflowCancelled", "child workflow c2 ended CANCELLED"
    )
    long = fo.child_end("c3", "FAILED", {"type": "E" * 500, "message": "m" * 5000})
    assert long is not None and long.error_type is not None and long.message is not None
    assert len(long.error_type) <= 128 and len(long.message) <= 2000
