"""State machines under faults (issue 42.8, `shepherd_sim.aslsim`): loops, Retry, Catch,
Parallel and Map on the real engine while duplicate deliveries, lost messages, transient
errors and attempts timed out while they run strike their Tasks; each run ends as the
in-process runner ends it with no fault, and the invariants catch their bugs put back."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from shepherd_sim import aslsim

SEEDS = range(120)


def test_state_machines_under_faults_end_as_the_runner_ends_them() -> None:
    results = aslsim.run_asl_seeds(SEEDS)
    violations = [(r.seed, v) for r in results for v in r.violations]
    assert violations == []
    outcomes = Counter((r.machine, r.status) for r in results)
    # Every machine ran, and the catch machine took both ways (shipped; declined, caught).
    assert {m for m, _ in outcomes} == set(aslsim.MACHINES)
    assert outcomes[("sim_catch", "SUCCEEDED")] and outcomes[("sim_catch", "FAILED")]
    struck: Counter[str] = Counter()
    for r in results:
        struck.update(r.faults)
    assert set(struck) == {"dup", "lose", "error", "late"}, struck
    assert min(struck.values()) >= 20, struck


def test_a_seed_replays_to_the_same_digest_and_faults_do_not_change_the_end() -> None:
    for seed in (1, 3, 14, 27):
        first, again = aslsim.run_asl_seed(seed), aslsim.run_asl_seed(seed)
        assert first.digest == again.digest and first.faults == again.faults
        assert sum(first.faults.values()) > 0
        calm = aslsim.run_asl_seed(seed, aslsim.AslFaults.none())
        assert (calm.machine, calm.status) == (first.machine, first.status)


def test_the_invariants_catch_a_claim_that_lost_its_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the bug back: a claim refused for an attempt already claimed hands out the earlier
    claim again, so a duplicate delivery runs the function a second time."""
    from shepherd.asl.engine import AslEngine

    claim = AslEngine.claim
    held: dict[tuple[str, str, int], Any] = {}

    def unfenced(self: AslEngine, message: Any, worker: str) -> Any:
        key = (message.workflow_id, message.step, message.attempt)
        got = claim(self, message, worker)
        if isinstance(got, str) and key in held:
            return held[key]
        held[key] = got
        return got

    monkeypatch.setattr(AslEngine, "claim", unfenced)
    faults = aslsim.AslFaults(dup=1.0, lose=0.0, error=0.0, late=0.0)
    result = aslsim.run_asl_seed(5, faults)  # a loop: every delivery duplicated
    assert any("ran 2 times" in v for v in result.violations), result.violations


def test_the_invariants_catch_an_output_that_differs_from_the_runners(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Put a bug back in a Task: a retried Square answers differently from its first try."""
    square = aslsim.FUNCTIONS["Square"]
    calls: Counter[str] = Counter()

    def flaky(v: Any) -> Any:
        calls[repr(v)] += 1
        out = square(v)
        return {**out, "square": out["square"] + 1} if calls[repr(v)] > 1 else out

    monkeypatch.setitem(aslsim.FUNCTIONS, "Square", flaky)
    faults = aslsim.AslFaults(dup=0.0, lose=0.0, error=0.0, late=1.0)  # every attempt late
    result = aslsim.run_asl_seed(1, faults)  # a Parallel then a Map of four squares
    assert result.machine == "sim_branches"
    assert any(v.startswith("output ") for v in result.violations), result.violations
