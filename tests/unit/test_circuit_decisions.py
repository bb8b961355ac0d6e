"""The circuit breaker's pure decisions (issue 26.2): when it opens, probes, closes; which
counter slots a window reads; the conditional writes that move it."""

from __future__ import annotations

from shepherd.conditions import evaluate
from shepherd.decisions import circuit as cb
from shepherd.pool_policy import CircuitBreaker

POLICY = CircuitBreaker(
    failure_ratio=0.5, minimum_attempts=10, window_seconds=60, cooldown_seconds=30, probe_attempts=2
)
NOW = 1_000_000_000


def test_closed_opens_only_with_enough_attempts_and_a_high_enough_failure_ratio() -> None:
    closed = cb.CircuitState()
    assert cb.decide(closed, POLICY, ended=9, failed=9, now=NOW) is None  # too few attempts
    assert cb.decide(closed, POLICY, ended=10, failed=4, now=NOW) is None  # ratio 0.4
    opened = cb.decide(closed, POLICY, ended=10, failed=5, now=NOW)
    assert opened is not None and opened.to == "open" and "5 of 10" in opened.why


def test_open_waits_its_cooldown_then_probes() -> None:
    opened = cb.CircuitState("open", since=NOW)
    assert cb.decide(opened, POLICY, 0, 0, NOW + 29_999) is None
    half = cb.decide(opened, POLICY, 0, 0, NOW + 30_000)
    assert half is not None and half.to == "half_open"


def test_half_open_reopens_on_a_failed_probe_and_closes_when_every_probe_succeeded() -> None:
    assert cb.decide(cb.CircuitState("half_open", NOW, probe_ok=1), POLICY, 0, 0, NOW) is None
    reopened = cb.decide(
        cb.CircuitState("half_open", NOW, probe_ok=1, probe_failed=1), POLICY, 0, 0, NOW
    )
    assert reopened is not None and reopened.to == "open"
    closed = cb.decide(cb.CircuitState("half_open", NOW, probe_ok=2), POLICY, 0, 0, NOW)
    assert closed is not None and closed.to == "closed"


def test_an_operators_forced_mode_wins() -> None:
    forced = cb.CircuitState("closed", mode="open")
    assert cb.decide(forced, POLICY, 0, 0, NOW) == cb.Transition("open", "forced open")
    held = cb.CircuitState("open", since=NOW, mode="open")
    assert cb.decide(held, POLICY, 0, 0, NOW + 10**9) is None  # no cooldown ends it
    shut = cb.CircuitState("open", since=NOW, mode="closed")
    assert cb.decide(shut, POLICY, 100, 100, NOW) == cb.Transition("closed", "forced closed")


def test_the_window_reads_six_slots_and_none_before_the_circuit_closed() -> None:
    size = cb.slot_ms(POLICY)
    assert size == 10_000
    assert len(cb.window_slots(POLICY, NOW, None)) == cb.SLOTS_PER_WINDOW
    # Closed 15 s ago (NOW is a slot's start): only the slots that end after that count.
    last = NOW // size
    assert cb.window_slots(POLICY, NOW, NOW - 15_000) == [last - 2, last - 1, last]


def test_a_transition_lands_only_on_the_state_it_was_decided_on() -> None:
    state = cb.CircuitState("open", since=NOW)
    _, _, update, cond = cb.transition_write(
        "pay", state, cb.Transition("half_open", "x"), POLICY, NOW + 1
    )
    item = {"circuit": "open", "circuit_since": NOW}
    assert evaluate(cond, item)
    assert not evaluate(cond, {**item, "circuit_since": NOW + 1})  # another sweep moved it
    new = update.apply(item)
    assert new["circuit"] == "half_open" and new["probes"] == 2
    assert new["circuit_resumed_at"] == NOW + 1  # held tasks get a fresh dispatch grace
    assert new["circuit_history"][-1]["from"] == "open"
    long = cb.CircuitState("open", since=NOW, history=tuple({"n": i} for i in range(30)))
    _, _, update, _ = cb.transition_write("pay", long, cb.Transition("half_open", "x"), POLICY, NOW)
    assert len(update.apply({})["circuit_history"]) == cb.HISTORY  # capped


def test_a_probe_is_taken_only_while_some_are_left() -> None:
    _, _, update, cond = cb.take_probe("pay", NOW)
    item = {"circuit": "half_open", "circuit_since": NOW, "probes": 1}
    assert evaluate(cond, item)
    assert not evaluate(cond, update.apply(item))  # none left


def test_half_open_whose_probes_never_came_back_probes_again_after_a_cooldown() -> None:
    taken = cb.CircuitState("half_open", NOW, probes=0, probe_ok=1)
    assert cb.decide(taken, POLICY, 0, 0, NOW + 29_999) is None  # a probe may still run
    again = cb.decide(taken, POLICY, 0, 0, NOW + 30_000)
    assert again is not None and again.to == "open"
    waiting = cb.CircuitState("half_open", NOW, probes=1)  # no task came to take it yet
    assert cb.decide(waiting, POLICY, 0, 0, NOW + 10**7) is None
