"""A worker that has no agent registered under a step's `Agent` fails the step at once with a
non-retryable `AgentNotFound`, logged; it never leaves the message to be redelivered."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from shepherd import AgentContext, AgentRegistry, parse_definition
from shepherd.testing import AttemptOutcome, MemoryEngine, StepStatus, WorkflowStatus

TRIP = parse_definition(
    {
        "Name": "trip",
        "Steps": [
            {
                "Name": "book",
                "Agent": "book",
                "Pool": "travel",
                "TimeoutSeconds": 30,
                "Compensation": {"Agent": "cancel_booking", "Pool": "travel", "TimeoutSeconds": 30},
            },
            {
                "Name": "pay",
                "Agent": "pay",
                "Pool": "billing",
                "TimeoutSeconds": 30,
                "DependsOn": ["book"],
                "Retry": {"MaxAttempts": 5, "IntervalSeconds": 1},
            },
        ],
    },
    "trip.yaml",
)


def test_a_missing_agent_fails_its_step_for_good_and_the_workflow_unwinds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a worker whose modules register every agent but `pay` (retried up to 5 times)
    registry = AgentRegistry()
    registry.register("book", lambda ctx: {"booking": "b-1"})
    registry.register("cancel_booking", lambda ctx: {"cancelled": True})
    engine = MemoryEngine({"trip": TRIP}, agents=registry)

    # When the workflow runs
    with caplog.at_level(logging.ERROR, logger="shepherd.agent"):
        outcome = engine.run(engine.start("trip", {}))

    # Then `pay` failed on its first attempt, without a retry, and the booking was undone
    pay = outcome.steps["pay"]
    assert pay.status is StepStatus.FAILED
    assert [a.outcome for a in pay.attempts] == [AttemptOutcome.FAILED]
    assert pay.error is not None and pay.error.name == "AgentNotFound"
    assert pay.error.message == (
        "agent 'pay' is not registered in this worker (registered: book, cancel_booking)"
    )
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.compensations["book"].status is StepStatus.SUCCEEDED
    # nothing is left to be redelivered
    assert engine.queue.depth("billing") == 0 and not engine.queue.dead
    # And the worker logged it once, with the agent and the step
    (logged,) = [r for r in caplog.records if r.name == "shepherd.agent"]
    assert logged.levelno == logging.ERROR
    assert (logged.agent, logged.step) == ("pay", "pay")  # type: ignore[attr-defined]


def test_a_missing_compensation_agent_fails_the_workflow_for_an_operator() -> None:
    # Given a worker without the undo of `book`, and a payment that fails for good
    registry = AgentRegistry()
    registry.register("book", lambda ctx: {"booking": "b-1"})

    def pay(ctx: AgentContext) -> Any:
        raise ValueError("declined")

    registry.register("pay", pay)
    engine = MemoryEngine({"trip": TRIP}, agents=registry)

    # When the payment's retries are spent and the booking must be undone
    outcome = engine.run(engine.start("trip", {}))

    # Then the compensation failed at once and the workflow waits for an operator
    cancel = outcome.compensations["book"]
    assert cancel.status is StepStatus.FAILED and len(cancel.attempts) == 1
    assert cancel.error is not None and cancel.error.name == "AgentNotFound"
    assert outcome.status is WorkflowStatus.FAILED
