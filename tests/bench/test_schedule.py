"""The supervisor's sweep schedule as the bench models it (mirrors the handler's rule)."""

from __future__ import annotations

from shepherd_bench.schedule import MINUTE_MS, Schedule, deployed


def test_sweeps_start_at_every_interval_up_to_the_window_inclusive() -> None:
    schedule = Schedule.from_window("s", 5, 55)
    assert schedule.sweeps == 12
    assert schedule.offsets_s[-1] == 55
    assert Schedule.from_window("s", 5, 45).sweeps == 10
    assert Schedule.from_window("s", 5, 0).sweeps == 1


def test_the_next_sweep_waits_for_the_next_invocation_after_the_last_one() -> None:
    schedule = Schedule.from_window("s", 5, 45)  # sweeps at :00 ... :45
    minute = 10 * MINUTE_MS
    assert schedule.next_sweep(minute) == minute + 5_000
    assert schedule.next_sweep(minute + 4_999) == minute + 5_000
    assert schedule.next_sweep(minute + 45_000) == minute + MINUTE_MS  # the 15 s gap
    full = Schedule.from_window("s", 5, 55)
    assert full.next_sweep(minute + 50_000) == minute + 55_000
    assert full.next_sweep(minute + 55_000) == minute + MINUTE_MS


def test_the_deployed_schedule_comes_from_the_cdk_config() -> None:
    schedule = deployed()
    assert schedule.interval_ms > 0
    assert 1 <= schedule.sweeps <= MINUTE_MS // schedule.interval_ms
