"""The child-workflow example (issue 24.5), on its real definitions and agents, with the inputs
`make demo` starts (shepherd_cli.scenarios): a tenant whose primary and two replicas are
provision_environment children, which succeeds; one whose replica's child fails `verify`,
which unwinds and tears down its primary's child, which had succeeded. Each test asserts what
the demo promises, under a manual clock."""

from __future__ import annotations

import contextlib

import pytest
from shepherd.decisions.fanout import child_id
from shepherd.model import StepStatus, WorkflowState, WorkflowStatus
from shepherd_cli.scenarios import ONBOARD_SCENARIOS, ChildExpect
from shepherd_examples.agents import ledger
from shepherd_examples.agents.faults import SimulatedCrash, SimulatedHang
from support import Harness, memory_harness

SCENARIO = {s.label: s for s in ONBOARD_SCENARIOS}


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    ledger.reset()


def _drive(h: Harness, wf: str, *, max_rounds: int = 400) -> WorkflowState:
    for _ in range(max_rounds):
        with contextlib.suppress(SimulatedHang, SimulatedCrash):
            h.pump()
        state = h.state(wf)
        if state.workflow.status.terminal:
            return state
        h.clock.advance(0.5)
        h.sweep()
    raise AssertionError(f"{wf} did not finish: {h.state(wf).workflow.status}")


def _children(h: Harness, wf: str, expects: tuple[ChildExpect, ...]) -> list[WorkflowState]:
    """Each expected child (first attempt's id), checked against the scenario."""
    states = []
    for c in expects:
        child = h.state(child_id(wf, c.step, c.index, 1))
        assert child.workflow.status.value == c.status, (c, child.workflow.status)
        assert (child.workflow.parent_id, child.workflow.parent_item) == (wf, c.index)
        states.append(child)
    return states


def test_a_tenant_gets_its_primary_then_its_replicas_as_children() -> None:
    s = SCENARIO["tenant-onboarded"]
    h = memory_harness()
    wf = h.start(s.wf_type, s.payload)
    state = _drive(h, wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    for name, status in s.steps:
        assert state.steps[name].status.value == status
    children = _children(h, wf, s.children)
    # The children ran their own steps; the tenant was told each one's endpoint, primary first.
    assert all(c.steps["verify"].status is StepStatus.SUCCEEDED for c in children)
    sent = h.state(wf).steps["notify_tenant"]
    assert sent.status is StepStatus.SUCCEEDED
    names = [s.payload["primary"]["env_name"], *(r["env_name"] for r in s.payload["replicas"])]
    assert ledger.find("email", f"{wf}:notify_tenant")["endpoints"] == [  # type: ignore[index]
        f"https://{n}.example.internal" for n in names
    ]


def test_a_failing_replica_unwinds_the_tenant_and_its_primary_child() -> None:
    s = SCENARIO["tenant-replica-fails"]
    h = memory_harness()
    wf = h.start(s.wf_type, s.payload)
    state = _drive(h, wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    for name, status in s.steps:
        assert state.steps[name].status.value == status
    primary, replica = _children(h, wf, s.children)
    # The primary's child had succeeded (its verify too) and was undone by the tenant's unwinding;
    # the replica's failed its verify and undid itself. Nothing either created is left.
    assert primary.steps["verify"].status is StepStatus.SUCCEEDED
    assert replica.steps["verify"].status is StepStatus.FAILED
    for child in (primary, replica):
        left = [
            key
            for service, key, _ in ledger.effects(child.workflow.workflow_id)
            if not key.endswith(":compensate")  # an undo's own record
            and "undone_by" not in (ledger.find(service, key) or {})
        ]
        assert left == [], left
    assert len(ledger.effects(primary.workflow.workflow_id)) == 8  # 4 created, 4 undone
