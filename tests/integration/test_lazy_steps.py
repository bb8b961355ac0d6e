"""Step items created when first needed (issue 16), on the in-memory store and DynamoDB (moto).

A start writes the workflow item alone; a step's item is created by the first write the step
needs (its claim, a join's dispatch, a cancel, a pause's hold, a replacement input); reads show
a step with no item as PENDING. Each of those writes, planned on a step read with no item, is
guarded by exactly that: whoever created the item first wins, the other loses its condition.
"""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.decisions import transitions as tx
from shepherd.engine.agent import AgentContext, Outcome
from shepherd.errors import ConditionFailed
from shepherd.keys import wf_pk
from shepherd.model import StepRecord, StepStatus, WorkflowStatus
from support import ENV, ORDER, Harness, registry_with


def _items(h: Harness, workflow_id: str) -> dict[str, dict[str, Any]]:
    return {i["sk"]: i for i in h.store.load(wf_pk(workflow_id))}


def test_a_start_writes_the_workflow_item_alone_and_sends_its_roots(harness: Harness) -> None:
    wf = harness.start("provision_environment", ENV, idempotency_key="env-1")
    assert list(_items(harness, wf)) == ["#WF"]
    state = harness.state(wf)
    assert {n: (r.status, r.attempt, r.stored) for n, r in state.steps.items()} == {
        n: (StepStatus.PENDING, 0, False)
        for n in harness.definitions["provision_environment"].by_name
    }
    assert harness.sent(wf, "create_network") == [1]  # the root, with the start
    # A replay of the same start finds the workflow item: nothing new is written or sent.
    again = harness.scheduler.start("provision_environment", ENV, idempotency_key="env-1")
    assert (again.workflow_id, again.created) == (wf, False)
    assert list(_items(harness, wf)) == ["#WF"] and harness.sent(wf, "create_network") == [1]


def test_the_first_claim_creates_the_step_item(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    seen: list[dict[str, Any]] = []

    def reserve(ctx: AgentContext) -> dict[str, Any]:
        seen.append(_items(harness, wf)["S#reserve_inventory"])
        return {"reservation_id": "r-1"}

    with registry_with(reserve_inventory=reserve) as agents:
        harness.runtime.agents = agents
        (message,) = harness.receive()
        assert harness.runtime.handle(message.task).outcome is Outcome.SUCCEEDED
    (claimed,) = seen
    assert claimed["status"] == "RUNNING" and claimed["attempt"] == 1
    assert claimed["wf_type"] == "order_fulfilment"
    assert claimed["first_claimed_at"] == claimed["claimed_at"]
    items = _items(harness, wf)
    assert items["S#reserve_inventory"]["status"] == "SUCCEEDED"
    assert "S#charge_payment" not in items  # sent, not yet claimed: still no item
    assert harness.step(wf, "charge_payment").status is StepStatus.PENDING
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    # A skip is written too (one conditional write: PENDING or no item -> SKIPPED).
    assert {sk: i["status"] for sk, i in _items(harness, wf).items() if sk != "#WF"} == {
        "S#reserve_inventory": "SUCCEEDED",
        "S#fraud_review": "SKIPPED",
        "S#charge_payment": "SUCCEEDED",
        "S#ship_order": "SUCCEEDED",
        "S#notify_customer": "SUCCEEDED",
        "S#until_reminder": "SKIPPED",
        "S#send_reminder": "SKIPPED",
    }


def _unstored(h: Harness, wf: str, name: str) -> StepRecord:
    rec = h.step(wf, name)
    assert not rec.stored
    return rec


def _apply(h: Harness, write: tx.Write) -> dict[str, Any]:
    return h.store.update(write.pk, write.sk, write.update, write.condition)


def test_a_claim_and_a_cancel_planned_on_a_missing_item_race_fairly(harness: Harness) -> None:
    """Whichever lands first creates the item; the other finds it and loses."""
    now = harness.clock.now_ms()
    first = harness.start("order_fulfilment", ORDER)
    rec = _unstored(harness, first, "reserve_inventory")
    created = _apply(harness, tx.claim(rec, 1, now, "agent"))
    assert (created["status"], created["wf_type"]) == ("RUNNING", "order_fulfilment")
    with pytest.raises(ConditionFailed):
        _apply(harness, tx.cancel(rec, now, 0))

    second = harness.start("order_fulfilment", {**ORDER, "order_id": "o-2"})
    rec = _unstored(harness, second, "reserve_inventory")
    cancelled = _apply(harness, tx.cancel(rec, now, 0))
    assert (cancelled["status"], cancelled["attempt"]) == ("CANCELLED", 0)
    with pytest.raises(ConditionFailed):
        _apply(harness, tx.claim(rec, 1, now, "agent"))


def test_a_joins_dispatch_creates_its_item_once(harness: Harness) -> None:
    """Two dependencies finishing together both plan the join's dispatch: one write wins."""
    wf = harness.start("provision_environment", ENV)
    rec = _unstored(harness, wf, "create_compute")
    now = harness.clock.now_ms()
    queued = _apply(harness, tx.dispatch(rec, now))
    assert (queued["status"], queued["attempt"], queued["dispatches"]) == ("QUEUED", 1, 1)
    with pytest.raises(ConditionFailed):
        _apply(harness, tx.dispatch(rec, now))
    assert harness.step(wf, "create_compute").dispatches == 1


def test_a_hold_on_a_missing_item_stops_a_late_claim(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    rec = _unstored(harness, wf, "reserve_inventory")
    now = harness.clock.now_ms()
    hold = tx.unwatch_paused(harness.state(wf).workflow, [rec], now)[1]
    held = _apply(harness, hold)
    assert (held["status"], held["attempt"], held["held_at"]) == ("PENDING", 0, now)
    with pytest.raises(ConditionFailed):
        _apply(harness, tx.claim(rec, 1, now, "late-agent"))  # read before the pause
    released = _apply(harness, tx.release(harness.step(wf, "reserve_inventory")))
    assert "held_at" not in released
    assert _apply(harness, tx.claim(rec, 1, now, "agent"))["status"] == "RUNNING"


def test_cancelling_before_any_claim_leaves_nothing_to_compensate(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    for m in harness.receive():
        harness.queue.delete(m.receipt)  # the root's message never arrives
    harness.operations.cancel(wf)
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.CANCELLED
    assert state.compensations == {}
    assert {r.status for r in state.steps.values()} == {StepStatus.CANCELLED}
    assert all(r.first_claimed_at is None for r in state.steps.values())


def test_a_paused_look_that_moves_the_entry_to_the_pause_timeout_holds_claimable_steps(
    harness: Harness,
) -> None:
    """Nothing in flight, a pause timeout an hour away: the look moves the entry there and,
    in the same transaction, holds the roots (creating their items), so a claim read before the
    pause cannot start an attempt nobody would watch for an hour (simulator seed 1380)."""
    wf = harness.start("provision_environment", ENV)
    # The roots' tasks; an agent reads the workflow for one of them before the pause.
    (message,) = [m for m in harness.receive() if m.task.step == "create_network"]
    harness.operations.pause(wf)
    harness.clock.advance(60)
    report = harness.sweep()
    assert report.moved == 1
    state = harness.state(wf)
    timeout = harness.definitions["provision_environment"].pause_timeout_seconds
    assert timeout is not None
    assert state.workflow.due_at == state.workflow.paused_at + timeout * 1000
    roots = [
        r
        for n, r in state.steps.items()
        if not harness.definitions["provision_environment"].by_name[n].depends_on
    ]
    assert roots and all(r.stored and r.status is StepStatus.PENDING for r in roots)
    assert all(r.held_at is not None for r in roots)
    root = state.steps["create_network"]
    with pytest.raises(ConditionFailed):  # the late claim loses
        _apply(harness, tx.claim(_unstored_view(root), 1, harness.clock.now_ms(), "late"))
    assert harness.runtime.handle(message.task).outcome is not Outcome.SUCCEEDED
    harness.operations.resume(wf)  # lifts the holds and sends the roots again
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED


def _unstored_view(rec: StepRecord) -> StepRecord:
    """The step as an agent read it before the hold created its item."""
    return StepRecord.unstored(rec.workflow_id, rec.name, rec.wf_type or "")
