"""Pass steps in a definition (issue 42.5): `Pass: {Result: ...}` or `Pass: {}`, none of a
task's fields, and the planner passes one in a single write whoever sees it ready."""

from __future__ import annotations

import random
from typing import Any

import pytest
from shepherd.decisions.planner import PassThrough, next_due, plan, start_actions
from shepherd.definitions import parse_definition
from shepherd.errors import DefinitionError
from shepherd.kinds import kind_of
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus

T0 = 1_700_000_000_000


def _definition(*steps: dict[str, Any]) -> Any:
    return parse_definition({"Name": "p", "Steps": list(steps)}, "p.yaml")


def _task(name: str, *deps: str) -> dict[str, Any]:
    return {"Name": name, "Agent": "a", "Pool": "q", "TimeoutSeconds": 10, "DependsOn": list(deps)}


def test_a_pass_step_is_valid_with_a_result_or_empty() -> None:
    d = _definition({"Name": "x", "Pass": {"Result": {"k": [1, None]}}}, {"Name": "y", "Pass": {}})
    assert kind_of(d.by_name["x"]).name == "pass"
    assert d.by_name["x"].pass_ is not None and d.by_name["x"].pass_.result == {"k": [1, None]}
    assert d.tasks == ()  # nothing runs an agent
    assert d.by_name["y"].pass_ is not None and d.by_name["y"].pass_.result is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("Agent", "a"),
        ("Pool", "q"),
        ("TimeoutSeconds", 5),
        ("Retry", {"MaxAttempts": 1}),
        ("Compensation", {"Agent": "u", "Pool": "q", "TimeoutSeconds": 5}),
        ("Workflow", "other"),
    ],
)
def test_a_pass_step_names_no_task_field(field: str, value: Any) -> None:
    with pytest.raises(DefinitionError) as err:
        _definition({"Name": "x", "Pass": {}, field: value})
    assert str(err.value) == f"p.yaml: Steps[0] (x): a Pass step names no {field}"


def test_a_pass_with_an_unknown_field_is_named() -> None:
    with pytest.raises(DefinitionError, match=r"Steps\[0\] \(x\)\.Pass\.Reslt: unknown field"):
        _definition({"Name": "x", "Pass": {"Reslt": 1}})


def test_a_pass_and_a_wait_are_not_both() -> None:
    with pytest.raises(DefinitionError, match="a step is a Wait or a Pass, not both"):
        _definition({"Name": "x", "Pass": {}, "Wait": {"Seconds": 1}})


def _state(definition: Any, **steps: StepStatus) -> WorkflowState:
    wf = WorkflowRecord(
        workflow_id="wf",
        wf_type="p",
        def_hash=definition.content_hash,
        status=WorkflowStatus.RUNNING,
        input="{}",
        created_at=T0,
        updated_at=T0,
        owner="o",
        request_hash="h",
    )
    state = WorkflowState(wf)
    for name in definition.topological_order:
        status = steps.get(name, StepStatus.PENDING)
        done = status is StepStatus.SUCCEEDED
        state.put(
            StepRecord(
                "wf",
                "step",
                name,
                status,
                attempt=1 if done else 0,
                finished_at=T0 + 1000 if done else None,
                wf_type="p",
            )
        )
    return state


def test_whoever_sees_a_pass_ready_passes_it_and_a_dead_writer_leaves_it_due() -> None:
    d = _definition(_task("a"), {"Name": "x", "Pass": {"Result": 1}, "DependsOn": ["a"]})
    state = _state(d, a=StepStatus.SUCCEEDED)
    for supervisor in (False, True):
        actions = plan(state, d, T0 + 2000, supervisor=supervisor, rng=random.Random(0))
        assert actions == [PassThrough(state.steps["x"])]
    # Its writer died before the write: the watch entry is due at its ready time.
    assert next_due(state, d, T0 + 2000) == T0 + 1000
    # Not ready: a Pass adds no deadline of its own.
    waiting = _state(d)
    assert [type(a) for a in plan(waiting, d, T0, supervisor=False, rng=random.Random(0))] == []


def test_a_root_pass_passes_with_the_start() -> None:
    d = _definition({"Name": "x", "Pass": {}}, _task("b", "x"))
    state = _state(d)
    assert start_actions(d, state, {}) == [PassThrough(state.steps["x"])]
