"""`make bench`'s slow step (issue 41.4): a step that runs 6 s and reports progress every 0.5 s
(HeartbeatSeconds 3, TimeoutSeconds 8) runs once and succeeds while the supervisor sweeps on
its deployed schedule, looking ahead. The sweeps run in the harness's one thread: one that
sleeps until its next entry is due must not hold the agent's heartbeats and its result back
meanwhile (it did: every workflow compensated, its attempts superseded)."""

from __future__ import annotations

from collections import Counter

from shepherd_bench.cost import SCENARIOS, run_scenarios


def test_a_heartbeating_step_runs_once_while_the_supervisor_looks_ahead() -> None:
    slow = next(s for s in SCENARIOS if s.slow_step is not None)
    assert slow.slow_seconds > 3  # longer than HeartbeatSeconds: it lives on its heartbeats
    (run,) = run_scenarios(3, scenarios=(slow,))
    assert run.statuses == Counter({"SUCCEEDED": 3})
    assert run.step_attempts == 3 * run.steps_per_workflow  # no attempt superseded
    assert run.sweeps >= 3  # a sweep (5 s apart) came while each 6 s step ran
