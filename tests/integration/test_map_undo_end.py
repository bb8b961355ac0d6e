"""The undo of a map ends with its last item's undo, as the map itself ends with its last item
(issue 24): the process that counts the last item compensation decides the compensation's
map, ends its unit and moves the unwinding on (the next compensation, or the workflow's end),
with no supervisor's look. Before, only a look did (planned only for the supervisor), so every
unwound map waited for its compensation's next deadline: HeartbeatSeconds, or TimeoutSeconds
when it has none (found running the transcode example, whose workflows sat COMPENSATING).
"""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.errors import PermanentError
from shepherd.model import StepStatus, WorkflowStatus
from support import DEFINITIONS, memory_harness

UNDONE = {
    "Name": "undone",
    "Steps": [
        {
            "Name": "prepare",
            "Agent": "prepare",
            "Pool": "work",
            "TimeoutSeconds": 600,
            "Compensation": {"Agent": "unprepare", "Pool": "work", "TimeoutSeconds": 600},
        },
        {
            "Name": "each",
            "DependsOn": ["prepare"],
            "Agent": "each",
            "Pool": "work",
            "TimeoutSeconds": 600,
            "Map": {"ItemsPath": "$.input.items", "MaxConcurrency": 2},
            "Compensation": {"Agent": "undo_each", "Pool": "work", "TimeoutSeconds": 600},
        },
    ],
}


@pytest.mark.parametrize("order", ["REVERSE", "PARALLEL"])
def test_the_last_item_undo_ends_the_maps_undo_and_the_unwinding_goes_on(order: str) -> None:
    undone: list[Any] = []
    agents = AgentRegistry()
    agents.register("prepare", lambda ctx: {"ok": True})
    agents.register("unprepare", lambda ctx: undone.append("prepare"))

    def each(ctx: AgentContext) -> Any:
        if ctx.item == "bad":
            raise PermanentError("a bad item")
        return ctx.item

    def undo_each(ctx: AgentContext) -> Any:
        undone.append(ctx.item_index)

    agents.register("each", each)
    agents.register("undo_each", undo_each)
    definition = parse_definition({**UNDONE, "CompensationOrder": order}, "undone")
    h = memory_harness(definitions={**DEFINITIONS, "undone": definition}, agents=agents)
    wf = h.start("undone", {"items": ["a", "b", "bad", "c"]})
    h.pump(rounds=200)  # messages only: no clock moves, no supervisor's look
    state = h.state(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert state.compensations["each"].status is StepStatus.SUCCEEDED
    assert sorted(i for i in undone if i != "prepare") == [0, 1, 2]  # each item that ran
    assert undone[-1] == "prepare"  # after the map's undo: it depended on prepare
