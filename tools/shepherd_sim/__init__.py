"""Deterministic fault simulation of the Shepherd engine (docs/simulation.md)."""

from shepherd_sim.faults import FAULT_KINDS, Faults
from shepherd_sim.sim import SimConfig, SimResult, Simulation, run_seed

__all__ = ["FAULT_KINDS", "Faults", "SimConfig", "SimResult", "Simulation", "run_seed"]
