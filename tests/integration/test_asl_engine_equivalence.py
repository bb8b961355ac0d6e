"""The engine and the in-process runner drive the same interpreter: a machine run on the
engine (each Task an agent's fenced attempt, each branch a child workflow) ends as
`shepherd asl run` ends it, with the same output or the same error."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.asl import parse, run_state_machine
from test_asl_branches import PARALLEL_THEN_MAP
from test_asl_engine import CATCH, FAIL, FN, LOOP, World

ITEMS = {
    "StartAt": "Each",
    "States": {
        "Each": {
            "Type": "Map",
            "ItemsPath": "$.xs",
            "ItemSelector": {"x.$": "$$.Map.Item.Value", "i.$": "$$.Map.Item.Index"},
            "ItemProcessor": {
                "StartAt": "Tag",
                "States": {
                    "Tag": {
                        "Type": "Pass",
                        "Parameters": {"tagged.$": "$.x", "at.$": "$.i"},
                        "Next": "Double",
                    },
                    "Double": {"Type": "Task", "Resource": f"{FN}Double", "End": True},
                },
            },
            "ResultPath": "$.out",
            "End": True,
        }
    },
}


def _double(value: Any) -> Any:
    if isinstance(value, dict) and "items" in value:
        return {"items": [v * 2 for v in value["items"]]}
    if isinstance(value, dict) and "tagged" in value:
        return {**value, "tagged": value["tagged"] * 2}
    return value * 2


class CardDeclined(Exception):
    pass


def _charge(value: Any) -> Any:
    raise CardDeclined("insufficient funds")


FUNCTIONS = {
    "Double": _double,
    "Inc": lambda v: {"n": v["n"] + 1},
    "Charge": _charge,
    "Ship": lambda v: "shipped",
}


@pytest.mark.parametrize(
    ("machine", "payload"),
    [
        (LOOP, {"times": 4}),
        (CATCH, {"order": 1}),
        (PARALLEL_THEN_MAP, {"items": [1, 2, 3]}),
        (ITEMS, {"xs": [5, 6]}),
        (FAIL, {"ok": False}),
        (FAIL, {"ok": True}),
    ],
    ids=["loop", "catch", "parallel-then-map", "map-item", "fail", "succeed"],
)
def test_the_engine_ends_a_machine_as_the_runner_does(
    machine: dict[str, Any], payload: Any
) -> None:
    expected = run_state_machine(parse(machine, "m"), payload, functions=FUNCTIONS)

    def agent(fn: Any) -> Any:
        return lambda ctx: fn(ctx.input)

    w = World(machine, **{name: agent(fn) for name, fn in FUNCTIONS.items()})
    wf = w.start(payload)
    w.h.pump()
    status = w.item(wf)["status"]
    view = w.view(wf)
    assert status == expected.status
    if expected.status == "SUCCEEDED":
        assert view["output"] == expected.output
    else:
        assert (view["error"], view["cause"]) == (expected.error, expected.cause)
