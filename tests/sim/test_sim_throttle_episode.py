"""Throttling episodes in the simulator (issue 41.3): every write to one live workflow's
partition is throttled for 5-300 s. The fault is off by default (every seed's run is as it
was); on, its writes are refused (counted) and the invariants are checked as for any fault."""

from __future__ import annotations

from shepherd_sim import Faults, SimConfig
from shepherd_sim.sim import Simulation

EPISODES = Faults.parse("none,throttle_episode=0.2")
TYPES = SimConfig(workflow_types=("order_fulfilment", "sim_fan"))


def test_the_episode_fault_is_off_by_default() -> None:
    assert Faults().throttle_episode == 0.0


def test_an_episode_refuses_its_partitions_writes_and_nothing_breaks_an_invariant() -> None:
    sim = Simulation(3, EPISODES, config=TYPES)
    result = sim.run()
    assert result.faults["throttle_episode"] >= 1
    assert result.stats["writes_throttled_by_episode"] >= 1
    assert sim.episodes and all(ends > began for _, began, ends in sim.episodes)
    assert result.violations == [], [str(v) for v in result.violations]
    # What the episode cost, printed beside the run's stats (an attempt timed out during it
    # is an attempt consumed: an agent's refused result or heartbeat is parked and taken
    # since issue 41.3, but a callback's or an approval's refused answer, or a wait's
    # TimeoutSeconds passing meanwhile, still times out: a figure, not an invariant).
    assert result.stats["episode_struck_workflows"] >= 1
    assert "episode_attempts_timed_out" in result.stats
