"""`MemoryEngine` runs every kind of step a definition has, as a user's test drives it: it
answers an Approval (approve or reject), fires a Wait's timer instead of waiting it out, and
tells the path the workflow took (the steps that ran, those skipped, what was undone)."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import AgentContext, AgentRegistry, parse_definition
from shepherd.errors import ApprovalNotPending
from shepherd.testing import MemoryEngine, StepStatus, WorkflowStatus

ORDER = {
    "Name": "order",
    "Steps": [
        {
            "Name": "reserve",
            "Agent": "reserve",
            "Pool": "shop",
            "TimeoutSeconds": 30,
            "Compensation": {"Agent": "release", "Pool": "shop", "TimeoutSeconds": 30},
        },
        {
            "Name": "review",
            "DependsOn": ["reserve"],
            "Condition": {"Variable": "$.input.amount", "NumericGreaterThan": 1000},
            "Approval": {"TimeoutSeconds": 3600},
        },
        {"Name": "charge", "DependsOn": ["review"], "Agent": "charge", "Pool": "shop",
         "TimeoutSeconds": 30},
        {"Name": "a_week", "DependsOn": ["charge"], "Wait": {"Seconds": 7 * 86_400}},
        {"Name": "remind", "DependsOn": ["a_week"], "Agent": "remind", "Pool": "shop",
         "TimeoutSeconds": 30},
    ],
}  # fmt: skip


def _engine() -> MemoryEngine:
    registry = AgentRegistry()

    @registry.agent("reserve")
    def reserve(ctx: AgentContext) -> dict[str, Any]:
        return {"reserved": True}

    @registry.agent("release")
    def release(ctx: AgentContext) -> dict[str, Any]:
        return {"released": True}

    @registry.agent("charge")
    def charge(ctx: AgentContext) -> dict[str, Any]:
        return {"charged": ctx.input["amount"]}

    @registry.agent("remind")
    def remind(ctx: AgentContext) -> dict[str, Any]:
        return {"reminded": True}

    return MemoryEngine({"order": parse_definition(ORDER, "order.yaml")}, agents=registry)


def test_an_approval_is_answered_as_soon_as_it_waits() -> None:
    engine = _engine()
    wf = engine.start("order", {"amount": 5000})
    outcome = engine.run(wf, approvals={"review": "approve"}, until_resting=True, max_seconds=60)
    # Charged without the hour's timeout: the answer came as soon as the review waited.
    assert outcome.steps["charge"].status is StepStatus.SUCCEEDED
    assert outcome.steps["review"].output == {"approved": True, "by": "test", "comment": None}
    assert outcome.path == ("reserve", "review", "charge")
    assert outcome.steps["a_week"].status is StepStatus.WAITING


def test_a_test_answers_an_approval_itself_with_a_comment() -> None:
    engine = _engine()
    wf = engine.start("order", {"amount": 5000})
    waiting = engine.run(wf, until_resting=True)
    assert waiting.status is WorkflowStatus.RUNNING
    assert engine.awaiting_approval(wf) == ("review",)
    engine.reject(wf, "review", comment="card reported stolen")
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.error is not None and outcome.error["type"] == "Rejected"
    assert "card reported stolen" in outcome.error["message"]
    assert outcome.path == ("reserve", "review")
    assert outcome.undone == ("reserve",)
    with pytest.raises(ApprovalNotPending):
        engine.approve(wf, "review")


def test_an_approval_can_set_the_steps_output_and_who_answered() -> None:
    engine = _engine()
    wf = engine.start("order", {"amount": 5000})
    engine.run(wf, until_resting=True)
    engine.approve(wf, "review", output={"limit": 6000}, by="test", comment="known customer")
    engine.deliver()
    assert engine.outcome(wf).steps["review"].output == {"limit": 6000}
    assert engine.outcome(wf).steps["charge"].status is StepStatus.SUCCEEDED


def test_a_wait_is_fired_without_waiting_a_week() -> None:
    engine = _engine()
    wf = engine.start("order", {"amount": 20})
    resting = engine.run(wf, until_resting=True, max_seconds=60)
    assert resting.steps["a_week"].status is StepStatus.WAITING
    assert engine.resting(wf) == ("a_week",)
    before = engine.clock.now_ms()
    engine.fire_wait(wf, "a_week")
    outcome = engine.run(wf, max_seconds=10)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert engine.clock.now_ms() - before >= 7 * 86_400_000 - 10_000
    # The small order skipped its review: the path says so.
    assert outcome.path == ("reserve", "charge", "a_week", "remind")
    assert outcome.skipped == ("review",)
    assert outcome.undone == ()


def test_a_step_that_is_not_of_its_kind_is_refused_with_the_nearest() -> None:
    engine = _engine()
    wf = engine.start("order", {"amount": 5000})
    with pytest.raises(
        ValueError, match="'reveiw' is not an Approval step of order; did you mean 'review'"
    ):
        engine.run(wf, approvals={"reveiw": "approve"})
    with pytest.raises(
        ValueError, match="'a_wek' is not a Wait step of order; did you mean 'a_week'"
    ):
        engine.fire_wait(wf, "a_wek")
    with pytest.raises(ValueError, match="Wait step 'a_week' is PENDING, not resting"):
        engine.fire_wait(wf, "a_week")
