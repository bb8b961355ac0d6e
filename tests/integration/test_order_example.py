"""The order example's condition, approval and wait (issue 25.6), on its real definition and
agents: a large order waits for a person's fraud review before its card is charged; a small
one skips it; an order naming `remind_at` rests until then, with nothing running, before its
reminder is sent. `make demo` runs the same on the local stack through the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from shepherd.errors import ApprovalNotPending
from shepherd.model import StepStatus, WorkflowStatus, loads
from shepherd_examples.agents import ledger
from support import ORDER, Harness

LARGE = {**ORDER, "order_id": "o-large", "amount": 2500.0}
OWNER = "ada"  # the example names no Approvers: the order's owner answers


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    ledger.reset()


def _settle(h: Harness, wf: str, seconds: float = 5) -> None:
    """Deliver and sweep for a while without ending anything by force."""
    for _ in range(int(seconds * 2)):
        h.pump()
        h.clock.advance(0.5)
        h.sweep()


def _at(h: Harness, seconds: float) -> str:
    moment = datetime.fromtimestamp(h.clock.now_ms() / 1000, UTC) + timedelta(seconds=seconds)
    return moment.isoformat()


def test_a_large_order_waits_for_its_review_and_is_charged_once_approved(
    harness: Harness,
) -> None:
    wf = harness.start("order_fulfilment", LARGE, owner=OWNER)
    _settle(harness, wf)
    review = harness.step(wf, "fraud_review")
    assert review.status is StepStatus.WAITING and review.attempt == 1
    assert harness.step(wf, "reserve_inventory").status is StepStatus.SUCCEEDED
    assert harness.sent(wf, "charge_payment") == []  # nothing charged while it waits
    assert "ApprovalRequested" in harness.events.types()
    harness.engine.approvals.decide(
        wf, "fraud_review", principal=OWNER, approve=True, comment="known customer"
    )
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    review = state.steps["fraud_review"]
    decision = loads(review.decision)
    assert (decision["verdict"], decision["by"], decision["comment"]) == (
        "approved",
        OWNER,
        "known customer",
    )
    output = harness.output(wf)
    assert output["fraud_review"] == {"approved": True, "by": OWNER, "comment": "known customer"}
    assert output["charge_payment"]["amount"] == 2500.0
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "charge", "ship", "send"]
    with pytest.raises(ApprovalNotPending):  # answered once, for good
        harness.engine.approvals.decide(wf, "fraud_review", principal=OWNER, approve=False)


def test_a_rejected_order_is_never_charged_and_its_stock_is_released(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", LARGE, owner=OWNER)
    _settle(harness, wf)
    harness.engine.approvals.decide(
        wf, "fraud_review", principal=OWNER, approve=False, comment="card reported stolen"
    )
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    error = loads(state.workflow.error)
    assert (error["step"], error["type"]) == ("fraud_review", "Rejected")
    assert "card reported stolen" in error["message"]
    assert state.steps["fraud_review"].status is StepStatus.FAILED
    assert state.steps["charge_payment"].attempt == 0  # never claimed, so never refunded
    assert list(state.compensations) == ["reserve_inventory"]
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "release"]


def test_an_unanswered_review_times_out_after_its_hour_and_unwinds(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", LARGE, owner=OWNER)
    _settle(harness, wf)
    harness.clock.advance(3590)
    harness.sweep()
    assert harness.step(wf, "fraud_review").status is StepStatus.WAITING  # not before its hour
    harness.clock.advance(15)
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert loads(state.workflow.error)["type"] == "ApprovalTimedOut"
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "release"]


@pytest.mark.parametrize(("amount", "reviewed"), [(1000, False), (1000.01, True)])
def test_only_an_order_over_1000_is_reviewed(
    harness: Harness, amount: float, reviewed: bool
) -> None:
    wf = harness.start("order_fulfilment", {**ORDER, "amount": amount})
    _settle(harness, wf)
    status = harness.step(wf, "fraud_review").status
    assert status is (StepStatus.WAITING if reviewed else StepStatus.SKIPPED)


def test_a_reminder_rests_until_remind_at_then_is_sent(harness: Harness) -> None:
    remind_at = _at(harness, 60)
    wf = harness.start("order_fulfilment", {**ORDER, "remind_at": remind_at})
    _settle(harness, wf)
    wait = harness.step(wf, "until_reminder")
    assert harness.step(wf, "notify_customer").status is StepStatus.SUCCEEDED
    assert wait.status is StepStatus.WAITING
    assert wait.wake_at == int(datetime.fromisoformat(remind_at).timestamp() * 1000)
    harness.clock.advance(50)  # 55 s in: a sweep leaves it resting, nothing is sent
    harness.sweep()
    harness.pump()
    assert harness.step(wf, "until_reminder").status is StepStatus.WAITING
    assert harness.sent(wf, "send_reminder") == []
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    woke = state.steps["until_reminder"].finished_at
    assert woke is not None and wait.wake_at is not None and woke >= wait.wake_at
    assert harness.output(wf)["send_reminder"] == {"reminded": "ada", "remind_at": remind_at}
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "charge", "ship", "send", "remind"]


def test_a_reminder_failing_for_good_pauses_the_order_instead_of_refunding_it(
    harness: Harness,
) -> None:
    faults = {"send_reminder": {"mode": "permanent"}}
    wf = harness.start(
        "order_fulfilment", {**ORDER, "remind_at": _at(harness, 5), "faults": faults}
    )
    _settle(harness, wf, 30)  # past remind_at and every retry of the reminder
    state = harness.state(wf)
    assert state.workflow.status is WorkflowStatus.PAUSED
    assert state.steps["send_reminder"].status is StepStatus.FAILED
    assert state.compensations == {}  # what shipped stays shipped until a person decides
    assert "refund" not in [e[2] for e in ledger.effects(wf)]
