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


def test_the_local_stack_benchmark_measures_the_steady_rate_after_the_burst() -> None:
    """`local_rate.summarize`: the first `burst` runs (a full bucket's) are left out, the rate
    is (runs - 1) over the stretch, and whole seconds leave out the partial first and last."""
    from shepherd_bench.local_rate import summarize

    times = [100.0, 100.0] + [100.5 + 0.2 * k for k in range(26)]  # burst 2, then 5/s
    row = summarize(times, per_second=5, burst=2)
    assert row["achieved_per_second"] == 5.0 and row["error_vs_limit"] == 0
    assert (row["whole_seconds"], row["per_second_min"], row["per_second_max"]) == (4, 5, 5)
    slow = summarize([100.0] + [101.0 + 0.25 * k for k in range(9)], per_second=5, burst=1)
    assert slow["achieved_per_second"] == 4.0 and slow["error_vs_limit"] == 0.2
