"""Engine bugs the simulator found on the deployed trajectories (the default SimConfig: the
supervisor's fan-out under leases, looks leaving near entries due), each with its seed: the
seed holds on the engine as it is and breaks its invariant with the bug put back. The seeds of
`test_sim_regressions.py` replay the older trajectories they were found on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from shepherd.model import WorkflowState
from shepherd_sim import Faults, run_seed


@contextlib.contextmanager
def _whole_read_not_kept() -> Iterator[None]:
    """A large output's whole read (to check the workflow's total) was not kept: an attempt
    that then failed (its output's put failed) decided its retry's dispatch on the workflow as
    claimed, RUNNING, though its whole read had seen the operator's pause."""
    from shepherd.engine.scheduler import Scheduler

    real = Scheduler.whole_if_large

    def old(self: Scheduler, state: WorkflowState, output: str) -> WorkflowState:
        workflow = state.workflow
        fresh = real(self, state, output)
        state.workflow = workflow
        return fresh

    Scheduler.whole_if_large = old  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scheduler.whole_if_large = real  # type: ignore[method-assign]


CASES = [(8144, "paused", _whole_read_not_kept)]


@pytest.mark.parametrize(("seed", "invariant", "bug"), CASES, ids=[f"seed{c[0]}" for c in CASES])
def test_the_seed_holds_and_catches_its_bug(seed: int, invariant: str, bug: object) -> None:
    assert run_seed(seed, Faults()).violations == []
    with bug():  # type: ignore[operator]
        broken = run_seed(seed, Faults())
    assert invariant in {v.invariant for v in broken.violations}
