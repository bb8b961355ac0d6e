"""The happy path never waits on the supervisor (issue 40.5): with no fault injected, across
seeds whose workflows run every kind (task, map, child workflow, wait, approval, condition),
no supervisor look makes a dispatch or a close the happy path owns (`planner.takes_over`), and
the simulator's summary prints that count."""

from __future__ import annotations

import functools
from collections import Counter

from shepherd_sim import Faults, SimConfig
from shepherd_sim.runner import Totals, report, run_many

NO_FAULTS = Faults.parse("none", Faults())
SEEDS = range(150)
KINDS = ("task", "map", "child", "wait", "approval")


@functools.cache
def totals() -> Totals:
    out = Totals()
    for summary in run_many(SEEDS, NO_FAULTS, SimConfig()):
        out.add(summary)
        if summary.stats["supervisor_took_over"]:
            out.stats[f"took_over_in_seed_{summary.seed}"] += 1
    return out


def test_no_supervisor_look_takes_over_the_happy_path() -> None:
    t = totals()
    assert sum(t.faults.values()) == 0, t.faults
    assert not t.failed
    seeds = sorted(k for k in t.stats if k.startswith("took_over_in_seed_"))
    assert t.stats["supervisor_took_over"] == 0, (
        f"replay with make sim SEED=<n> FAULTS=none: {seeds}"
    )


def test_the_run_covers_every_kind() -> None:
    stats: Counter[str] = totals().stats
    for kind in KINDS:
        assert stats[f"steps_succeeded_{kind}"] > 0, (kind, stats)
    assert stats["steps_skipped_by_a_condition"] > 0, stats


def test_the_summary_prints_the_count() -> None:
    text = report(totals(), NO_FAULTS)
    line = next(x for x in text.splitlines() if "taken over by the supervisor" in x)
    assert line.split()[-1] == "0"
