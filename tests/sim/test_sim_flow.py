"""Catch, Choice and branch scoping in the fault simulator (issue 42.5).

`sim_flow` (`shepherd_sim.sim.FLOW`): `triage` fails for good now and then and its Catch sends
the failure to `declined` or `rescue` instead of unwinding; else the Choice `route` picks
`wide` (and `wide_more`) or `narrow`, the other branch out of scope, and `join` runs after
whichever ran. `check_catches_and_choices` holds on every seed: a catch names the catcher that
takes the error, no workflow unwinds for a failure its Catch takes, and a step a Next names is
claimed only after that step sent it there. Each is then shown to catch its bug put back, on a
seed that is clean without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from shepherd.decisions import scope
from shepherd_sim import Faults, SimConfig, run_seed

FLOW = SimConfig(workflow_types=("sim_flow",))
FAULTS = Faults(permanent=0.3)  # triage fails for good often enough to be caught


def test_catches_and_choices_hold_under_faults_and_every_path_is_taken() -> None:
    taken: dict[str, int] = {"caught": 0, "wide": 0, "narrow": 0, "unwound": 0}
    for seed in range(30):
        result = run_seed(seed, FAULTS, FLOW)
        assert result.violations == [], [str(v) for v in result.violations]
        for _, line in result.trace:
            taken["caught"] += "update S#triage caught_by" in line
            taken["wide"] += "update S#wide status=RUNNING" in line
            taken["narrow"] += "update S#narrow status=RUNNING" in line
        taken["unwound"] += result.outcomes.get("COMPENSATED", 0)
    assert all(n > 0 for n in taken.values()), taken


def test_the_default_workload_rolls_flow_workflows_when_asked() -> None:
    """`FAULTS=flow_workload=p`: seeds that roll it run sim_flow beside the draw's types, with
    no violation; off (the default), no seed does."""
    rolled = []
    for seed in range(8):
        result = run_seed(seed, Faults(flow_workload=0.5), SimConfig())
        assert result.violations == [], [str(v) for v in result.violations]
        if result.faults.get("flow_workload", 0):
            rolled.append(seed)
    assert rolled, "no seed rolled a flow workload"
    assert not run_seed(rolled[0], Faults(), SimConfig()).faults.get("flow_workload", 0)


@contextlib.contextmanager
def _caught_failures_unwind() -> Iterator[None]:
    """The planner unwinds for every FAILED step, its Catch or not."""
    real = scope.settled_failure
    scope.settled_failure = lambda *args, **kwargs: False  # type: ignore[assignment]
    try:
        yield
    finally:
        scope.settled_failure = real  # type: ignore[assignment]


@contextlib.contextmanager
def _every_branch_runs() -> Iterator[None]:
    """Scoping forgotten: every step whose inputs settled runs, chosen or not."""
    real = scope.verdict

    def verdict(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)
        return None if got is None else ("run", got[1])

    scope.verdict = verdict  # type: ignore[assignment]
    try:
        yield
    finally:
        scope.verdict = real  # type: ignore[assignment]


def test_the_seed_is_clean_on_the_engine_as_it_is() -> None:
    assert run_seed(0, FAULTS, FLOW).violations == []


def test_the_invariant_catches_a_caught_failure_that_unwinds() -> None:
    with _caught_failures_unwind():
        result = run_seed(0, FAULTS, FLOW)
    assert "catches" in {v.invariant for v in result.violations}


def test_the_invariant_catches_a_branch_run_out_of_scope() -> None:
    with _every_branch_runs():
        result = run_seed(0, FAULTS, FLOW)
    assert "catches" in {v.invariant for v in result.violations}
