"""The supervisor sleeps on an empty watch index and a writer wakes it (issue 35 point 4,
shepherd.engine.wakeup): the decisions, and the races between a scheduled run putting it to
sleep and a start putting work in the index."""

from __future__ import annotations

import pytest
from shepherd.clock import ManualClock
from shepherd.conditions import Update
from shepherd.decisions.rest import (
    ASLEEP,
    AWAKE,
    DROWSY,
    DROWSY_MS,
    SEEN_AWAKE_MS,
    Plan,
    Rest,
    plan,
)
from shepherd.engine.wakeup import Wakeup
from shepherd.keys import WF_SK, shard_key, supervisor_rest_key, wf_pk
from shepherd.testing import MemoryStore

SHARDS = 4


@pytest.mark.parametrize(
    ("rest", "watched", "expected"),
    [
        (Rest(), True, Plan(None, True)),
        (Rest(), False, Plan(DROWSY, True)),  # the first empty probe still ticks
        (Rest(DROWSY, 0), False, Plan(None, True)),  # not long enough
        (Rest(DROWSY, 0), True, Plan(AWAKE, True)),
        (Rest(ASLEEP, 0), False, Plan(None, False)),  # asleep: no tick
        (Rest(ASLEEP, 0), True, Plan(AWAKE, True)),  # the probe finds work: awake
    ],
)
def test_the_plan(rest: Rest, watched: bool, expected: Plan) -> None:
    assert plan(rest, watched, DROWSY_MS - 1) == expected


def test_asleep_only_after_two_empty_probes_far_enough_apart() -> None:
    assert plan(Rest(DROWSY, 1_000), False, 1_000 + DROWSY_MS) == Plan(ASLEEP, False)
    # A writer's trust in an "awake" it read must end well before the supervisor can sleep.
    assert SEEN_AWAKE_MS * 4 <= DROWSY_MS


def _watch(store: MemoryStore, workflow_id: str, shard: int, due: int) -> None:
    store.put_new(
        {"pk": wf_pk(workflow_id), "sk": WF_SK, "watch_shard": shard_key(shard), "due_at": due}
    )


class Bell:
    def __init__(self) -> None:
        self.rings = 0

    def __call__(self) -> None:
        self.rings += 1


def _asleep(wakeup: Wakeup, clock: ManualClock) -> None:
    assert wakeup.scheduled(SHARDS).ticks  # drowsy
    clock.advance(60)
    assert not wakeup.scheduled(SHARDS).ticks
    assert wakeup.read().state == ASLEEP


def test_an_empty_index_puts_it_to_sleep_and_a_start_wakes_it_with_one_ring() -> None:
    store, clock, bell = MemoryStore(), ManualClock(), Bell()
    wakeup = Wakeup(store, clock, ring=bell)
    _asleep(wakeup, clock)
    clock.advance(60)
    assert not wakeup.scheduled(SHARDS).ticks  # stays asleep, minute after minute
    assert bell.rings == 0
    _watch(store, "w1", 2, clock.now_ms() + 10_000)
    starter = Wakeup(store, clock, ring=bell)  # another process (the API function)
    starter.watched()
    assert bell.rings == 1 and wakeup.read().state == AWAKE
    starter.watched()
    assert bell.rings == 1  # trusted for SEEN_AWAKE_MS: no read, no second ring
    assert wakeup.scheduled(SHARDS) == Plan(None, True)


def test_a_start_while_drowsy_keeps_it_awake() -> None:
    """The race: the scheduled run found the index empty (drowsy); a start writes its workflow
    before the next run. Its wake wins: the run that would put it to sleep loses its write and
    ticks, even if the index does not show the entry yet."""
    store, clock, bell = MemoryStore(), ManualClock(), Bell()
    wakeup = Wakeup(store, clock, ring=bell)
    assert wakeup.scheduled(SHARDS).ticks
    assert wakeup.read().state == DROWSY
    Wakeup(store, clock, ring=bell).watched()  # the entry itself not (yet) in the index
    assert wakeup.read().state == AWAKE and bell.rings == 0  # it was ticking: no ring
    clock.advance(60)
    assert wakeup.scheduled(SHARDS).ticks  # empty again: drowsy, not asleep
    assert wakeup.read().state == DROWSY


def test_the_run_that_would_sleep_loses_to_a_wake_in_between() -> None:
    """A start's wake lands between the run's read and its write: the write loses, it ticks."""
    store, clock, bell = MemoryStore(), ManualClock(), Bell()
    wakeup = Wakeup(store, clock, ring=bell)
    wakeup.scheduled(SHARDS)
    clock.advance(60)
    real = wakeup.probe

    def probe_then_a_start(shards: int) -> bool:
        found = real(shards)
        Wakeup(store, clock, ring=bell).watched()
        return found

    wakeup.probe = probe_then_a_start  # type: ignore[method-assign]
    assert wakeup.scheduled(SHARDS).ticks
    assert wakeup.read().state == AWAKE


def test_the_probe_wakes_it_when_a_wake_was_lost() -> None:
    """A writer whose wake failed (or an index slower than allowed): the scheduled run's probe
    finds the entry within a minute and ticks again."""
    store, clock = MemoryStore(), ManualClock()
    wakeup = Wakeup(store, clock)
    _asleep(wakeup, clock)
    _watch(store, "w1", 3, clock.now_ms())
    clock.advance(60)
    assert wakeup.scheduled(SHARDS) == Plan(AWAKE, True)


def test_a_wake_that_fails_never_fails_the_start() -> None:
    store, clock = MemoryStore(), ManualClock()

    def broken() -> None:
        raise RuntimeError("queue unavailable")

    wakeup = Wakeup(store, clock, ring=broken)
    _asleep(wakeup, clock)
    Wakeup(store, clock, ring=broken).watched()  # logged, not raised
    assert wakeup.read().state == AWAKE  # and the scheduled run ticks again next minute


def test_a_stack_from_before_has_no_item_and_is_awake() -> None:
    store, clock = MemoryStore(), ManualClock()
    assert Wakeup(store, clock).read() == Rest()
    store.update(*supervisor_rest_key(), Update(set={"state": "bogus"}), None)
    assert Wakeup(store, clock).read() == Rest()
