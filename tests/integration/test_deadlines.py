"""When the supervisor acts on each live step, and why (issue 29.3): the pure rule
(tests/handlers/test_deadline_view.py: the API view that shows it)."""

from __future__ import annotations

from dataclasses import replace

from shepherd.decisions.deadlines import Deadline, next_deadline, pause_timeout_at
from shepherd.model import PoolState, StepStatus, WorkflowStatus
from support import ORDER, memory_harness

DISPATCH_MS = 10_000  # order_fulfilment's DispatchTimeoutSeconds
TIMEOUT_MS, HEARTBEAT_MS = 8_000, 3_000  # reserve_inventory's


def test_each_live_step_says_when_and_why() -> None:
    h = memory_harness()
    wf = h.start("order_fulfilment", ORDER)
    state = h.state(wf)
    definition = h.definitions["order_fulfilment"]
    created = state.workflow.created_at
    root = state.steps["reserve_inventory"]
    now = created + 1_000

    def due(rec: object, pools: dict[str, PoolState] | None = None) -> Deadline | None:
        return next_deadline(state, definition, "step", rec, now, pools or {})  # type: ignore[arg-type]

    # A root sent at the start: lost if unclaimed for the dispatch grace.
    assert due(root) == Deadline(created + DISPATCH_MS, "dispatch")
    # Its pool paused: nothing runs out, it waits for the pool; a resume restarts the grace.
    paused = {"inventory": PoolState("inventory", paused=True, paused_at=created)}
    assert due(root, paused) == Deadline(None, "waiting for pool inventory (paused)")
    resumed = {"inventory": PoolState("inventory", resumed_at=created + 5_000)}
    assert due(root, resumed) == Deadline(created + 5_000 + DISPATCH_MS, "dispatch")
    # A step whose dependency has not succeeded is not reached: no deadline.
    assert due(state.steps["charge_payment"]) is None
    # Running: the heartbeat comes first, then the timeout once heartbeats are recent.
    running = replace(root, status=StepStatus.RUNNING, attempt=1, claimed_at=created)
    assert due(running) == Deadline(created + HEARTBEAT_MS, "heartbeat")
    beating = replace(running, heartbeat_at=created + 6_000)
    assert due(beating) == Deadline(created + TIMEOUT_MS, "timeout")
    # A retry waiting out its backoff.
    backoff = replace(root, status=StepStatus.QUEUED, attempt=2, available_at=now + 700)
    assert due(backoff) == Deadline(now + 700, "backoff")
    sent = replace(backoff, available_at=now - 100, dispatched_at=now - 100)
    assert due(sent) == Deadline(now - 100 + DISPATCH_MS, "dispatch")
    # Finished: nothing to time.
    assert due(replace(root, status=StepStatus.SUCCEEDED)) is None


def test_a_paused_workflow_times_only_its_attempts_in_flight_and_its_pause() -> None:
    h = memory_harness()
    wf = h.start("order_fulfilment", ORDER)
    h.operations.pause(wf)
    state = h.state(wf)
    definition = h.definitions["order_fulfilment"]
    root = state.steps["reserve_inventory"]
    now = state.workflow.created_at + 1
    assert state.workflow.status is WorkflowStatus.PAUSED
    assert next_deadline(state, definition, "step", root, now, {}) is None
    running = replace(root, status=StepStatus.RUNNING, attempt=1, claimed_at=now)
    assert next_deadline(state, definition, "step", running, now, {}) == Deadline(
        now + HEARTBEAT_MS, "heartbeat"
    )
    assert pause_timeout_at(state, definition) == (
        None
        if definition.pause_timeout_seconds is None
        else state.workflow.paused_at + definition.pause_timeout_seconds * 1000  # type: ignore[operator]
    )
    timed = definition.model_copy(update={"pause_timeout_seconds": 60})
    assert pause_timeout_at(state, timed) == state.workflow.paused_at + 60_000  # type: ignore[operator]
