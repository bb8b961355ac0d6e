"""Cancels that never wait (issue 37.4), on the real engine over in-memory ports: a cancel
fences an attempt waiting for its callback at once (compensation starts without the
callback's answer or timeout, and a late answer is stale, 409), so the workflow reaches
CANCELLED within one sweep plus its compensations; an agent running when the cancel comes
sees it at its next heartbeat (`ctx.cancel_requested`) and may stop early."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import AgentRegistry, Pending
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.errors import TaskTokenStale
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine

DEFINITION = parse_definition(
    {
        "Name": "ship",
        "Steps": [
            {
                "Name": "book",
                "Agent": "book",
                "Pool": "p",
                "TimeoutSeconds": 10,
                "Compensation": {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
            },
            {
                "Name": "carrier",
                "DependsOn": ["book"],
                "Agent": "carrier",
                "Pool": "p",
                "TimeoutSeconds": 86_400,  # the carrier may take a day to answer
                "HeartbeatSeconds": 3600,
                "Compensation": {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
            },
        ],
    },
    "ship.yaml",
)


class Run:
    def __init__(self, carrier: Any = None) -> None:
        self.tokens: list[str] = []
        self.undone: list[str] = []
        self.seen_cancel: list[bool] = []
        registry = AgentRegistry()

        @registry.agent("book")
        def book(ctx: AgentContext) -> dict[str, Any]:
            return {"booked": True}

        @registry.agent("carrier")
        def hand_off(ctx: AgentContext) -> Any:
            if carrier is not None:
                return carrier(self, ctx)
            self.tokens.append(ctx.task_token())
            return Pending("sent to the carrier")

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            self.undone.append(ctx.step)

        self.engine = MemoryEngine({"ship": DEFINITION}, agents=registry, owner="alice")
        self.wf = self.engine.start("ship", {})


def test_a_cancel_fences_a_waiting_callback_at_once_and_compensates_without_its_answer() -> None:
    run = Run()
    run.engine.deliver()  # book succeeds; carrier hands off and waits for its callback
    assert run.engine.outcome(run.wf).steps["carrier"].status is StepStatus.WAITING
    run.engine.cancel(run.wf)
    carrier = run.engine.outcome(run.wf).steps["carrier"]
    assert carrier.status is StepStatus.FAILED  # fenced by the cancel itself, not a timeout
    assert carrier.error is not None and carrier.error.name == "WorkflowCancelled"
    run.engine.deliver()  # the compensations (carrier first: it may have acted; then book)
    run.engine.advance(1)
    run.engine.sweep()  # one sweep at most
    run.engine.deliver()
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.CANCELLED
    assert run.undone == ["carrier", "book"]
    with pytest.raises(TaskTokenStale):  # the carrier answers late: its attempt is over
        run.engine.callback(run.tokens[0], "success", output={"tracking": "T-1"})
    assert run.engine.outcome(run.wf).status is WorkflowStatus.CANCELLED


def test_an_agent_sees_the_cancel_at_its_next_heartbeat_and_stops_early() -> None:
    def carrier(run: Run, ctx: AgentContext) -> Any:
        run.seen_cancel.append(ctx.cancel_requested)
        run.engine.cancel(run.wf)  # an operator cancels while this attempt runs
        run.seen_cancel.append(ctx.cancel_requested)  # not told yet: no heartbeat since
        run.engine.advance(1801)  # half its HeartbeatSeconds: the next report heartbeats
        ctx.report_progress({"stage": 1})
        run.seen_cancel.append(ctx.cancel_requested)
        return {"stopped_early": ctx.cancel_requested}

    run = Run(carrier)
    run.engine.deliver()
    assert run.seen_cancel == [False, False, True]
    run.engine.advance(1)
    run.engine.sweep()
    run.engine.deliver()
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.CANCELLED
    assert outcome.steps["carrier"].output == {"stopped_early": True}
    assert run.undone == ["carrier", "book"]  # its result landed: undone like any success


def test_a_callback_armed_after_the_cancel_is_fenced_as_it_starts_waiting() -> None:
    """The agent was running when the cancel came and hands off after it: its wait is fenced
    by its own write's follow-up, not left to its heartbeat or timeout."""

    def carrier(run: Run, ctx: AgentContext) -> Any:
        run.engine.cancel(run.wf)
        run.tokens.append(ctx.task_token())
        return Pending("sent to the carrier after the cancel")

    run = Run(carrier)
    run.engine.deliver()
    carrier_step = run.engine.outcome(run.wf).steps["carrier"]
    assert carrier_step.status is StepStatus.FAILED
    run.engine.advance(1)
    run.engine.sweep()
    run.engine.deliver()
    assert run.engine.outcome(run.wf).status is WorkflowStatus.CANCELLED
    with pytest.raises(TaskTokenStale):
        run.engine.callback(run.tokens[0], "success", output={})
