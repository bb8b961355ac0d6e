"""Hypothesis drives the simulator by hand: it chooses which message is delivered and how,
when agents crash or freeze, when the clock moves, when supervisors sweep (or die, or sweep
twice at once), when an operator pauses, resumes (with or without a replacement input),
compensates or cancels a workflow or pauses an agent pool, and shrinks any failing schedule to a minimal one. At the end the run
is drained without faults (an on-call operator ends every pause) and every invariant must
hold."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from shepherd_sim import Faults, SimConfig, Simulation
from shepherd_sim.sim import MANUAL_MODES, sim_caps

TYPES = ("order_fulfilment", "provision_environment", "sim_fan", "sim_flash", "sim_hold")
MAX_WORKFLOWS = 3


class EngineUnderFaults(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sim = Simulation(0, Faults.none(), config=SimConfig(), auto=False)
        self.started: list[str] = []
        self._caps = sim_caps()  # the simulator's caps, as in `Simulation.run`
        self._caps.__enter__()

    @initialize(wf_type=st.sampled_from(TYPES))
    def first_start(self, wf_type: str) -> None:
        self.start(wf_type, twice=False)

    @precondition(lambda self: len(self.started) < MAX_WORKFLOWS)
    @rule(wf_type=st.sampled_from(TYPES), twice=st.booleans())
    def start(self, wf_type: str, twice: bool) -> None:
        if twice:
            self.sim.forced.append("dup")
        wf = self.sim.start_workflow(wf_type)
        if wf is not None:
            self.started.append(wf)

    @rule(index=st.integers(0, 9))
    def deliver(self, index: int) -> None:
        self.sim.deliver_one(index, "handle")

    @rule(index=st.integers(0, 9), mode=st.sampled_from(MANUAL_MODES[1:]))
    def deliver_with_a_fault(self, index: int, mode: str) -> None:
        self.sim.deliver_one(index, mode)

    @rule(seconds=st.sampled_from((0.2, 1.0, 2.5, 4.0, 11.0, 31.0)))
    def advance(self, seconds: float) -> None:
        self.sim.advance(seconds)

    @rule()
    def sweep(self) -> None:
        self.sim.sweep()

    @rule(at=st.integers(1, 10))
    def double_sweep(self, at: int) -> None:
        self.sim.sweep(double_at=at)

    @rule(at=st.integers(1, 10), after=st.booleans())
    def supervisor_dies(self, at: int, after: bool) -> None:
        self.sim.sweep(crash_at=at, crash_after=after)

    @rule(kind=st.sampled_from(("store_before", "store_after", "slow", "index_lag")))
    def next_store_call_fails_or_lags(self, kind: str) -> None:
        """The next store call fails before or after it lands, or takes a while (then anything
        else may happen in the middle), or the next index query reads the index as it was."""
        self.sim.forced.append(kind)

    @precondition(lambda self: bool(self.started))
    @rule(index=st.integers(0, MAX_WORKFLOWS - 1))
    def operator_redrives(self, index: int) -> None:
        wf = self.started[index % len(self.started)]
        if self.sim.statuses().get(wf) == "FAILED":
            self.sim.redrive_workflow(wf)

    @precondition(lambda self: bool(self.started))
    @rule(index=st.integers(0, MAX_WORKFLOWS - 1))
    def cancel(self, index: int) -> None:
        self.sim.cancel_workflow(self.started[index % len(self.started)])

    @rule(seconds=st.sampled_from((5.0, 30.0)))
    def clock_jumps(self, seconds: float) -> None:
        self.sim.jump(seconds)

    @precondition(lambda self: bool(self.started))
    @rule(index=st.integers(0, MAX_WORKFLOWS - 1))
    def operator_pauses(self, index: int) -> None:
        self.sim.pause_workflow(self.started[index % len(self.started)])

    @precondition(lambda self: bool(self.started))
    @rule(index=st.integers(0, MAX_WORKFLOWS - 1), step=st.integers(-1, 5))
    def operator_resumes(self, index: int, step: int) -> None:
        """Resume (refused unless PAUSED), with a replacement input for the `step`-th step that
        may take one (none for -1)."""
        wf = self.started[index % len(self.started)]
        steps = self.sim.replaceable(wf)
        if step < 0 or not steps:
            self.sim.operator_call("resume", wf)
            return
        chosen = steps[step % len(steps)]
        self.sim.operator_call("resume", wf, chosen, self.sim.replacement_input(wf))

    @rule(index=st.integers(0, 9), seconds=st.sampled_from((1.0, 5.0, 20.0)))
    def operator_pauses_a_pool(self, index: int, seconds: float) -> None:
        """Pause an agent pool; it resumes `seconds` later (an event, as time advances)."""
        self.sim.pause_pool(self.sim.pools[index % len(self.sim.pools)], seconds)

    @precondition(lambda self: bool(self.started))
    @rule(index=st.integers(0, MAX_WORKFLOWS - 1))
    def operator_compensates(self, index: int) -> None:
        self.sim.operator_call("compensate", self.started[index % len(self.started)])

    @invariant()
    def overdue_work_is_findable(self) -> None:
        self.sim.check_findable()
        assert not self.sim.online, [str(v) for v in self.sim.online]

    def teardown(self) -> None:
        try:
            self.sim.drain()
            result = self.sim.result()
        finally:
            self.sim.kill_fibers()
            self._caps.__exit__(None, None, None)
        assert not result.violations, "\n".join(
            [str(v) for v in result.violations]
            + result.trace_for(result.violations[0].workflow_id, 200)
        )


EngineUnderFaults.TestCase.settings = settings(
    max_examples=500,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineUnderFaults = EngineUnderFaults.TestCase
