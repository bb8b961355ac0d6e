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
