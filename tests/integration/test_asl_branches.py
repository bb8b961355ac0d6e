"""Parallel and Map on the engine (issue 42, point 4): each branch and each map item is a
child workflow running its states list with a visit's guarantees (its own cursor, units and
supervision); the parent rests with nothing running until its children end, then moves on with
their outputs in order; a failed branch fails the state (Catch sees it) and stops the others;
a Map's tolerated failures count every item."""

from __future__ import annotations

from typing import Any

from shepherd.engine.agent import AgentContext
from shepherd.keys import WF_SK, wf_pk
from shepherd.model import WorkflowStatus
from test_asl_engine import FN, World

PARALLEL_THEN_MAP = {
    "StartAt": "Both",
    "States": {
        "Both": {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": "A",
                    "States": {"A": {"Type": "Task", "Resource": f"{FN}Double", "End": True}},
                },
                {"StartAt": "B", "States": {"B": {"Type": "Pass", "Result": "pass", "End": True}}},
            ],
            "Next": "Each",
        },
        "Each": {
            "Type": "Map",
            "ItemsPath": "$[0].items",
            "ItemProcessor": {
                "StartAt": "D",
                "States": {"D": {"Type": "Task", "Resource": f"{FN}Double", "End": True}},
            },
            "End": True,
        },
    },
}


def _double(ctx: AgentContext) -> Any:
    x = ctx.input
    return {"items": [v * 2 for v in x["items"]]} if isinstance(x, dict) else x * 2


def _children(w: World, wf: str) -> dict[str, dict[str, Any]]:
    return {
        pk.removeprefix("WF#"): item
        for (pk, sk), item in w.h.store._items.items()
        if sk == WF_SK and pk.startswith(f"WF#{wf}-")
    }


def test_branches_and_items_run_as_children_and_the_parent_gets_their_outputs_in_order() -> None:
    w = World(PARALLEL_THEN_MAP, Double=_double)
    wf = w.start({"items": [1, 2, 3]})
    parent = w.h.store.get(wf_pk(wf), WF_SK)
    assert parent is not None and "due_at" in parent  # resting on its children, watched
    w.h.pump()
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert w.view(wf)["output"] == [4, 8, 12]
    children = _children(w, wf)
    assert len(children) == 5  # two branches, three items
    assert {c["status"] for c in children.values()} == {"SUCCEEDED"}
    assert {c["parent_id"] for c in children.values()} == {wf}
    # One message per Task visit, each to its child; the Pass branch sent none.
    steps = sorted(t.message.step for t in w.h.queue.sent)
    assert steps == ["V#A#1", "V#D#1", "V#D#1", "V#D#1"]
    assert w.path(wf) == [("Both", 1), ("Each", 1)]


CAUGHT = {
    "StartAt": "Both",
    "States": {
        "Both": {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": "Slow",
                    "States": {"Slow": {"Type": "Wait", "Seconds": 3600, "End": True}},
                },
                {
                    "StartAt": "Boom",
                    "States": {"Boom": {"Type": "Fail", "Error": "Boom", "Cause": "no"}},
                },
            ],
            "Catch": [{"ErrorEquals": ["Boom"], "ResultPath": "$.error", "Next": "Handled"}],
            "End": True,
        },
        "Handled": {"Type": "Pass", "End": True},
    },
}


def test_a_failed_branch_fails_the_state_stops_the_others_and_a_catch_sees_it() -> None:
    w = World(CAUGHT)
    wf = w.start({"x": 1})
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert w.view(wf)["output"] == {"x": 1, "error": {"Error": "Boom", "Cause": "no"}}
    statuses = sorted(c["status"] for c in _children(w, wf).values())
    assert statuses == ["CANCELLED", "FAILED"]  # the waiting branch was stopped


def test_a_child_nobody_began_is_begun_by_the_supervisor_and_the_parent_by_a_look() -> None:
    w = World(PARALLEL_THEN_MAP, Double=_double)
    begin = w.h.scheduler.asl.begin
    w.h.scheduler.asl.begin = lambda workflow_id: (  # type: ignore[method-assign]
        "-" not in workflow_id and begin(workflow_id)
    )
    wf = w.start({"items": [5]})
    assert all("fv" not in c for c in _children(w, wf).values())
    w.h.scheduler.asl.begin = begin  # type: ignore[method-assign]
    state = w.h.run(wf, step_seconds=30)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert w.view(wf)["output"] == [20]


def test_a_map_that_tolerates_failures_waits_for_every_item() -> None:
    machine = {
        "StartAt": "Each",
        "States": {
            "Each": {
                "Type": "Map",
                "ToleratedFailureCount": 1,
                "ItemProcessor": {
                    "StartAt": "D",
                    "States": {"D": {"Type": "Task", "Resource": f"{FN}Picky", "End": True}},
                },
                "End": True,
            }
        },
    }

    def picky(ctx: AgentContext) -> Any:
        if ctx.input == 0:
            raise ValueError("zero")
        return ctx.input

    w = World(machine, Picky=picky)
    wf = w.start([0, 1, 2])
    w.h.pump()
    output = w.view(wf)["output"]
    assert output[1:] == [1, 2] and output[0]["Error"] == "ValueError"


def test_more_branches_than_the_engine_runs_at_once_fail_plainly() -> None:
    machine = {
        "StartAt": "Each",
        "States": {
            "Each": {
                "Type": "Map",
                "MaxConcurrency": 2,
                "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}},
                "End": True,
            }
        },
    }
    w = World(machine)
    wf = w.start([1, 2, 3])
    assert w.item(wf)["status"] == WorkflowStatus.FAILED.value
    assert w.view(wf)["error"] == "States.Runtime"
    assert _children(w, wf) == {}


def test_a_cancel_of_the_parent_cancels_its_running_children() -> None:
    machine_branches = CAUGHT["States"]["Both"]["Branches"]
    nested = {
        "StartAt": "Outer",
        "States": {
            "Outer": {
                "Type": "Parallel",
                "Branches": [
                    machine_branches[0],
                    {
                        "StartAt": "Inner",
                        "States": {
                            "Inner": {
                                "Type": "Parallel",
                                # A second waiting branch; state names are unique in the
                                # whole state machine (the spec), so this one is SlowToo.
                                "Branches": [
                                    {
                                        "StartAt": "SlowToo",
                                        "States": {
                                            "SlowToo": machine_branches[0]["States"]["Slow"]
                                        },
                                    }
                                ],
                                "End": True,
                            }
                        },
                    },
                ],
                "End": True,
            }
        },
    }
    w = World(nested)
    wf = w.start({})
    children = _children(w, wf)
    assert len(children) == 3 and {c["status"] for c in children.values()} == {"RUNNING"}
    w.h.operations.cancel(wf)
    assert w.item(wf)["status"] == WorkflowStatus.CANCELLED.value
    assert {c["status"] for c in _children(w, wf).values()} == {"CANCELLED"}


def test_the_machines_timeout_stops_its_children_too() -> None:
    waiting_branch = CAUGHT["States"]["Both"]["Branches"][0]  # a Wait of an hour
    machine = {
        "TimeoutSeconds": 60,
        "StartAt": "Both",
        "States": {"Both": {"Type": "Parallel", "Branches": [waiting_branch], "End": True}},
    }
    w = World(machine)
    wf = w.start({})
    assert {c["status"] for c in _children(w, wf).values()} == {"RUNNING"}
    w.h.clock.advance(60)
    w.h.sweep()
    assert w.item(wf)["status"] == WorkflowStatus.FAILED.value
    assert w.view(wf)["error"] == "States.Timeout"
    assert {c["status"] for c in _children(w, wf).values()} == {"CANCELLED"}
