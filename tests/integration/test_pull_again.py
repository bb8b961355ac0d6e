"""A callback's answer pulls the watch entry before its state write (the deadline rule), and
again after it: a supervisor's look that read the workflow between the pull and the write
planned on the state before it (the step still WAITING), and its move, guarded by the pulled
entry it saw, won, putting the entry back after the deadline the answer created. Found by the
fault simulator (seed 12 of the outage run: a Wait's wake found 700 ms late)."""

from __future__ import annotations

from typing import Any

from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry, Pending
from shepherd.model import StepStatus
from shepherd.testing import MemoryStore
from support import Harness

DEFINITION = parse_definition(
    {
        "Name": "pull_again",
        "DispatchTimeoutSeconds": 2,
        "Steps": [
            {"Name": "ask", "Agent": "ask", "Pool": "p", "TimeoutSeconds": 60},
            {
                "Name": "after",
                "DependsOn": ["ask"],
                "Agent": "after",
                "Pool": "p",
                "TimeoutSeconds": 60,
            },
        ],
    },
    "test.pull_again",
)


def test_a_look_between_the_pull_and_the_answer_does_not_leave_the_entry_late() -> None:
    tokens: list[str] = []

    def ask(ctx: AgentContext) -> Any:
        tokens.append(ctx.task_token())
        return Pending("external")

    agents = AgentRegistry()
    agents.register("ask", ask)
    agents.register("after", lambda ctx: {"ok": True})
    h = Harness(MemoryStore(), definitions={"pull_again": DEFINITION}, agents=agents)
    wf = h.start("pull_again", {})
    h.pump()
    assert h.step(wf, "ask").status is StepStatus.WAITING and tokens

    pull_due = h.scheduler.pull_due
    looked: list[int] = []

    def pull_then_a_look(*args: Any, **kwargs: Any) -> int:
        pulled = pull_due(*args, **kwargs)
        if not looked:  # the pulled entry comes due; a look reads `ask` still WAITING
            h.clock.advance(2.5)
            h.sweep()
            looked.append(h.state(wf).workflow.due_at or 0)
        return pulled

    h.scheduler.pull_due = pull_then_a_look  # type: ignore[method-assign]
    h.callbacks.callback(tokens[0], "success", output={"answer": 42})

    assert h.sent(wf, "after") == [1]  # sent without an item of its own (lazy steps)
    finished_at = h.step(wf, "ask").finished_at
    assert finished_at is not None
    lost_at = finished_at + 2000  # a lost message of `after` is due then
    assert looked[0] > lost_at  # the look's move, planned on the state before the answer
    due_at = h.state(wf).workflow.due_at
    assert due_at is not None and due_at <= lost_at
