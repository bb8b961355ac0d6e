"""Loops in the fault simulator (issue 42.5).

`sim_repeat`'s `poll` step repeats until its output says `done` (at an iteration its input
draws, 1-5, against MaxIterations 4), under every fault: lost, doubled and late messages,
crashes, zombies, callbacks, cancels, redrives. `check_iterations_exact` holds on every
seed, with the other checkers (an iteration is an attempt: fenced, supervised, undone); then
it is shown to catch its bug put back, on seeds that are clean without it.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from shepherd_sim import Faults, SimConfig, run_seed

LOOPS = SimConfig(workflow_types=("sim_repeat",))
SEEDS = range(12)


def test_loops_end_both_ways_and_every_iteration_is_counted_once() -> None:
    stats: Counter[str] = Counter()
    for seed in SEEDS:
        result = run_seed(seed, Faults(), LOOPS)
        assert result.violations == [], [str(v) for v in result.violations]
        stats.update(result.stats)
    assert stats["repeat_loop_limit"] > 0, stats  # MaxIterations reached
    assert stats["repeat_succeeded_after_1"] > 0, stats  # Until at the first iteration
    assert stats["repeat_succeeded_after_3"] > 0, stats  # ... at the third or later


def test_the_default_workload_rolls_loops_in_some_seeds() -> None:
    """Without pinned types and with `repeat_workload` on (off by default: the recorded
    seeds stay as they were), seeds that roll it run sim_repeat among the other types (and
    `check_iterations_exact` with them)."""
    assert Faults().repeat_workload == 0  # tests/sim/equivalence.json's seeds unchanged
    rolled = []
    for seed in range(6):
        result = run_seed(seed, Faults.parse("repeat_workload=0.5"), SimConfig())
        assert result.violations == [], [str(v) for v in result.violations]
        if result.faults["repeat_workload"]:
            rolled.append(seed)
            started = [line for _, line in result.trace if "start sim_repeat accepted" in line]
            assert started, seed
    assert rolled, "no seed rolled a loop workload"


# ------------------------------------------------------------------ bugs put back


@contextlib.contextmanager
def _limit_one_late() -> Iterator[None]:
    """The loop limit checked one iteration late: MaxIterations + 1 iterations run."""
    from shepherd.decisions import repeat

    real = repeat.decide

    def late(spec: Any, *, iteration: int, document: Any) -> repeat.Decision:
        return real(spec, iteration=iteration - 1, document=document)

    repeat.decide = late  # type: ignore[assignment]
    try:
        yield
    finally:
        repeat.decide = real  # type: ignore[assignment]


@contextlib.contextmanager
def _count_lost() -> Iterator[None]:
    """An iteration's end that does not count it: the loop runs past MaxIterations and its
    count disagrees with the results it accepted."""
    from shepherd.decisions import transitions as tx

    real = tx.iterate

    def uncounted(*args: Any, **kwargs: Any) -> tx.Write:
        write = real(*args, **kwargs)
        add = {k: v for k, v in write.update.add.items() if k != "iterations"}
        update = type(write.update)(write.update.set, write.update.remove, add=add)
        return tx.Write(write.pk, write.sk, update, write.condition)

    tx.iterate = uncounted  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.iterate = real  # type: ignore[assignment]


def _caught(bug: Any) -> set[str]:
    found: set[str] = set()
    with bug():
        for seed in SEEDS:
            found |= {v.invariant for v in run_seed(seed, Faults(), LOOPS).violations}
    return found


def test_a_loop_limit_checked_late_is_caught() -> None:
    assert "iterations" in _caught(_limit_one_late)


def test_an_iteration_not_counted_is_caught() -> None:
    assert _caught(_count_lost) & {"iterations", "superseded"}
