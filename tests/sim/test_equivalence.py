"""Behaviour unchanged, proven (issue 40.4): the simulator's per-seed digests and a
WaitForSignal step's items are what `tests/sim/equivalence.json` recorded before the step kinds
moved into `shepherd.kinds`. A digest covers the run's trace of events, every item written
and the fake service's effects, so any change of what the engine writes, sends or decides on
these seeds fails here. A change meant to alter behaviour re-records the fixture
(`python -m shepherd_sim.equivalence --write`) and says so in its commit."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from shepherd_sim.equivalence import FIXTURE, KINDS, SEEDS, seed_evidence, signal_evidence

RECORDED = json.loads(FIXTURE.read_text())


def test_the_recorded_seeds_end_every_kind_and_skip_by_a_condition() -> None:
    assert set(RECORDED["sim"]) == {str(s) for s in SEEDS}
    steps: Counter[str] = Counter()
    for seed in RECORDED["sim"].values():
        steps.update(seed["steps"])
    for kind in KINDS:
        assert steps[f"steps_succeeded_{kind}"] > 0, kind
    assert steps["steps_skipped_by_a_condition"] > 0
    assert RECORDED["signal"]["taken"]["steps"]["amend"] == "SUCCEEDED"
    assert RECORDED["signal"]["timed out"]["steps"]["amend"] == "FAILED"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seed_runs_exactly_as_recorded(seed: int) -> None:
    assert seed_evidence(seed) == RECORDED["sim"][str(seed)]


def test_a_wait_for_signal_step_writes_exactly_as_recorded() -> None:
    assert signal_evidence() == RECORDED["signal"]
