"""The rate-limit benchmark (issue 26.1) measures what it says: every task runs once, every
workflow succeeds with one attempt a step, and each whole second stays within 10 % of the
limit (smaller runs than `make bench`, same code)."""

from __future__ import annotations

from shepherd_bench import pools


def test_the_limiter_at_load_keeps_every_second_within_ten_percent() -> None:
    row = pools.design_load(per_second=1000, burst=20, arrivals_per_ms=2, seconds=3)
    assert row["ran"] == row["tasks"] == 6000
    assert row["error_vs_limit"] <= 0.10
    assert row["held_per_task"] > 0  # tasks did wait in the queue with tickets
    assert row["hottest_item_writes_per_second"] < 1000
    assert row["limiter_writes_per_task"] < 1.05


def test_the_engine_end_to_end_keeps_the_limit_and_spends_no_attempt() -> None:
    row = pools.end_to_end(workflows=250, per_second=50, burst=5)
    assert row["succeeded"] == 250 and row["one_attempt_per_step"]
    assert row["error_vs_limit"] <= 0.10


def test_a_breaker_lets_workflows_ride_out_an_outage_and_consumes_nothing_while_open() -> None:
    """A 30-minute outage of the payments pool: without a breaker every workflow that reached
    it during the outage compensates; with one, nearly all succeed after it, and no payment
    call ran while the circuit was open."""
    without = pools.outage(breaker=False, workflows=80, every_seconds=45)
    with_breaker = pools.outage(breaker=True, workflows=80, every_seconds=45)
    assert without["statuses"].get("COMPENSATED", 0) >= 30  # the outage's share of 80
    assert without["succeeded_share"] <= 0.65
    assert with_breaker["succeeded_share"] >= 0.95
    assert with_breaker["calls_while_open"] == 0
    assert with_breaker["payment_calls_failed"] < without["payment_calls_failed"] / 3
    assert with_breaker["circuit_transitions"] >= 3  # opened, probed, closed
