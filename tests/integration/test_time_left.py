"""An agent invocation claims a record only if the step's attempt fits in the time it has left
(issue 23.5) — but a callback step's attempt outlives any invocation (its TimeoutSeconds may be
days): its function part can take at most one invocation, so that is what must fit. Found by
the scale model: every such record was deferred until it reached the DLQ."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext, NotEnoughTime, Outcome, Pending
from shepherd.model import StepStatus
from shepherd.topology import AGENT_OVERHEAD_SECONDS, LAMBDA_MAX_TIMEOUT
from support import memory_harness, registry_with

DAY = 86_400
CARRIER = parse_definition(
    {
        "Name": "ship",
        "Steps": [
            {"Name": "wait", "Agent": "wait", "Pool": "p", "TimeoutSeconds": DAY},
            {"Name": "quick", "Agent": "quick", "Pool": "p", "TimeoutSeconds": 60},
        ],
    },
    "ship.yaml",
)


def _agents() -> Any:
    def wait(ctx: AgentContext) -> Any:
        ctx.task_token()
        return Pending("the carrier answers within a day")

    return registry_with(wait=wait, quick=lambda ctx: "ok")


def test_a_callback_step_longer_than_any_invocation_is_claimed_in_a_fresh_one() -> None:
    h = memory_harness(definitions={"ship": CARRIER})
    wf = h.start("ship", {})
    with _agents() as agents:
        h.runtime.agents = agents
        tasks = {m.task.step: m.task for m in h.receive()}
        # A fresh invocation of the pool (900 s, Lambda's most) claims it and it waits.
        result = h.runtime.handle(tasks["wait"], time_left_ms=lambda: LAMBDA_MAX_TIMEOUT * 1000)
        assert result.outcome is Outcome.WAITING
        assert h.step(wf, "wait").status is StepStatus.WAITING


@pytest.mark.parametrize(
    ("step", "left_s", "claimed"),
    [
        ("quick", 61, False),  # 60 s and the margin do not fit in 61 s
        ("quick", 63, True),
        ("wait", LAMBDA_MAX_TIMEOUT - AGENT_OVERHEAD_SECONDS, False),
        ("wait", LAMBDA_MAX_TIMEOUT - AGENT_OVERHEAD_SECONDS + 3, True),
    ],
)
def test_what_must_fit_is_the_attempt_or_at_most_an_invocation(
    step: str, left_s: int, claimed: bool
) -> None:
    h = memory_harness(definitions={"ship": CARRIER})
    wf = h.start("ship", {})
    with _agents() as agents:
        h.runtime.agents = agents
        tasks = {m.task.step: m.task for m in h.receive()}
        if claimed:
            h.runtime.handle(tasks[step], time_left_ms=lambda: left_s * 1000)
            assert h.step(wf, step).attempt == 1
        else:
            with pytest.raises(NotEnoughTime):
                h.runtime.handle(tasks[step], time_left_ms=lambda: left_s * 1000)
            assert h.step(wf, step).status is StepStatus.PENDING
