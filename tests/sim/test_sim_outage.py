"""A downstream outage (issue 26): pool `sim-b`'s service fails every call for a while, its
circuit breaker opens, probes and closes, and the workflows it held succeed. Then the breaker
is broken on purpose ("the bug put back", as in test_sim_regressions.py) and the invariants
must catch it: a claim while the circuit is open, a move the state machine does not allow."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from shepherd.decisions import circuit as cb
from shepherd.engine.circuit import CircuitBreakers
from shepherd.keys import POOLS_PK
from shepherd_sim import Faults, SimConfig
from shepherd_sim.sim import OUTAGE_POOLS, Simulation

# Outages only, and every workflow type of the time spelled out (in the order the default
# draws from), so fault kinds and definitions added later do not move the seed.
OUTAGES = Faults.parse("none,outage=0.05")
TYPES = SimConfig(
    workflow_types=(
        "order_fulfilment",
        "provision_environment",
        "sim_branch",
        "sim_fan",
        "sim_flash",
        "sim_hold",
    )
)
SEED = 21


def _run(seed: int = SEED, config: SimConfig = TYPES) -> tuple[Any, Simulation]:
    sim = Simulation(seed, OUTAGES, config=config)
    return sim.run(), sim


def test_an_outage_opens_the_breaker_which_probes_closes_and_the_workflow_succeeds() -> None:
    result, sim = _run()
    assert result.violations == [], [str(v) for v in result.violations]
    assert result.faults["outage"] >= 1 and result.stats["calls_failed_by_outage"] >= 1
    pool = sim.memory.peek(POOLS_PK, OUTAGE_POOLS[0]) or {}
    moves = [(h["from"], h["to"]) for h in pool["circuit_history"]]
    assert moves[0] == ("closed", "open"), moves
    assert ("open", "half_open") in moves and ("half_open", "closed") in moves, moves
    # Every claim the breaker let through while not closed was a half-open probe.
    assert result.stats["claimed_while_circuit_half_open_as_a_probe"] >= 1
    assert result.stats["claimed_while_circuit_open_on_an_earlier_read"] == 0
    # A workflow the outage caught (it uses the pool and was live during it) succeeded.
    assert result.stats["outage_affected_succeeded"] >= 1
    assert result.outcomes["SUCCEEDED"] >= 1


def test_without_the_breaker_the_same_outage_is_only_failed_calls() -> None:
    result, sim = _run(config=SimConfig(workflow_types=TYPES.workflow_types, breaker=False))
    assert result.violations == [], [str(v) for v in result.violations]
    assert result.faults["outage"] >= 1 and result.stats["calls_failed_by_outage"] >= 1
    assert sim.memory.peek(POOLS_PK, OUTAGE_POOLS[0]) is None  # no breaker, no pool item
    assert not [k for k in result.stats if k.startswith(("circuit_to", "claimed_while_circ"))]


def test_the_pools_consumers_left_running_the_claim_still_holds_while_open() -> None:
    """The breaker's admission alone keeps the promise: with the pool's consumers never
    stopped (a mapping update that failed), every task met while open is held."""
    real = CircuitBreakers._switch
    CircuitBreakers._switch = lambda self, *args: None  # type: ignore[method-assign]
    try:
        result, _ = _run()
    finally:
        CircuitBreakers._switch = real  # type: ignore[method-assign]
    assert result.violations == [], [str(v) for v in result.violations]
    assert result.stats["circuit_to_open"] >= 1


@contextlib.contextmanager
def _claims_ignore_the_circuit() -> Iterator[None]:
    """The bug put back: the pool's consumers are not stopped and the claim does not look
    at the circuit (open or half-open, every task is claimed)."""
    admit, switch = CircuitBreakers.admit, CircuitBreakers._switch
    CircuitBreakers.admit = lambda self, pool: 0  # type: ignore[method-assign]
    CircuitBreakers._switch = lambda self, *args: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        CircuitBreakers.admit, CircuitBreakers._switch = admit, switch  # type: ignore[method-assign]


def test_a_claim_that_ignores_an_open_circuit_is_caught() -> None:
    with _claims_ignore_the_circuit():
        result, _ = _run()
    found = [v for v in result.violations if v.invariant == "circuit"]
    assert found, [str(v) for v in result.violations]
    assert any("circuit was open" in v.message for v in found), [str(v) for v in found]


@contextlib.contextmanager
def _cooldown_closes_without_a_probe() -> Iterator[None]:
    """The bug put back: after the cooldown the breaker closes at once (open -> closed), with
    no half-open probe."""
    real = cb.decide

    def decide(*args: Any) -> cb.Transition | None:
        change = real(*args)
        if change is not None and change.to == "half_open":
            return cb.Transition("closed", "cooldown over")
        return change

    cb.decide = decide  # type: ignore[assignment]
    try:
        yield
    finally:
        cb.decide = real  # type: ignore[assignment]


def test_a_move_the_breakers_state_machine_does_not_allow_is_caught() -> None:
    with _cooldown_closes_without_a_probe():
        result, _ = _run()
    found = [str(v) for v in result.violations if v.invariant == "circuit"]
    assert any("open -> closed" in v for v in found), [str(v) for v in result.violations]
