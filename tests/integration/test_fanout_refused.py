"""Until a map of child workflows runs (issue 24: `Map` with `Workflow`, the Distributed Map
shape), a definition that uses one is validated but never started: a start is refused before
anything is written, so such a step is never silently run as something else. (Map steps and
child-workflow steps run: tests/integration/test_maps.py, test_children.py.)"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest
from shepherd.definitions import parse_definition
from shepherd.errors import StepKindNotSupported
from shepherd.testing import MemoryEngine

TASK = {"Agent": "do", "Pool": "p", "TimeoutSeconds": 10}


def engine_with(*steps: dict[str, Any]) -> MemoryEngine:
    child = parse_definition({"Name": "child", "Steps": [{"Name": "x", **TASK}]}, "child")
    parent = parse_definition({"Name": "parent", "Steps": list(steps)}, "parent")
    return MemoryEngine({"parent": parent, "child": child}, overrides={"do": lambda ctx: 1})


@pytest.mark.parametrize(
    ("step", "field"),
    [
        (
            {
                "Name": "mc",
                "Map": {"ItemsPath": "$.input.xs"},
                "Workflow": "child",
                "TimeoutSeconds": 60,
            },
            "Map with Workflow",
        ),
    ],
)
def test_a_start_is_refused_and_writes_nothing(step: dict[str, Any], field: str) -> None:
    engine = engine_with({"Name": "first", **TASK}, {**step, "DependsOn": ["first"]})
    before = list(engine.store.items())
    with pytest.raises(StepKindNotSupported) as info:
        engine.start("parent", {"xs": [1, 2]})
    assert (info.value.step, info.value.field) == (step["Name"], field)
    assert f"step '{step['Name']}' uses {field}" in str(info.value)
    assert list(engine.store.items()) == before
    assert engine.queue.sent == []  # no task was sent either
    # The child alone, which uses none of it, still runs.
    assert engine.run(engine.start("child", {})).status.value == "SUCCEEDED"


def test_the_api_answers_400_in_the_one_error_shape() -> None:
    from shepherd_handlers.errors import translate

    reply = translate(StepKindNotSupported("parent", "m", "Map with Workflow"))
    assert reply.status_code == HTTPStatus.BAD_REQUEST
    body = json.loads(str(reply.body))["error"]
    assert body["code"] == "StepKindNotSupported" and body["field"] == "type"
    assert "step 'm' uses Map with Workflow" in body["message"]
