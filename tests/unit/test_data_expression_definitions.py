"""JSONata data expressions in a native definition (issue 42.5): each `{% %}` string of
`Arguments` and `Output` parsed on load, `$steps.<name>` a dependency, on a task step that runs
an agent or a Pass step only; every mistake names the file, the step and the field."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.definitions import parse_definition
from shepherd.errors import DefinitionError

TASK = {"Name": "a", "Agent": "w", "Pool": "p", "TimeoutSeconds": 5}


def _load(step: dict[str, Any]) -> Any:
    return parse_definition({"Name": "d", "Steps": [TASK, step]}, "d.yaml")


def test_expressions_and_plain_json_are_accepted_and_versioned() -> None:
    step = {
        **TASK,
        "Name": "b",
        "DependsOn": ["a"],
        "Arguments": {"x": "{% $steps.a.total %}", "plain": "{ not an expression }", "n": 3},
        "Output": "{% $states.result.id %}",
    }
    d = _load(step)
    assert d.by_name["b"].arguments["n"] == 3
    plain = parse_definition({"Name": "d", "Steps": [TASK]}, "d.yaml")
    assert "Arguments" not in plain.canonical_json and "Output" not in plain.canonical_json
    assert '"Arguments":{' in d.canonical_json


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (
            {**TASK, "Name": "b", "Arguments": {"x": "{% $states.input.( %}"}},
            "d.yaml: Steps[1] (b).Arguments.x: not a valid JSONata expression",
        ),
        (
            {**TASK, "Name": "b", "Output": ["{% 1 + %}"]},
            "d.yaml: Steps[1] (b).Output[0]: not a valid JSONata expression",
        ),
        (
            {**TASK, "Name": "b", "Arguments": "{% $steps.a %}"},
            "d.yaml: Steps[1] (b).Arguments: reads $steps.a, which is not in its DependsOn",
        ),
        (
            {"Name": "b", "Wait": {"Seconds": 1}, "Output": "{% 1 %}"},
            "d.yaml: Steps[1] (b).Output: only a task step that runs an agent (no Map) or a "
            "Pass step takes data expressions",
        ),
        (
            {**TASK, "Name": "b", "InputPath": "$.input.x", "Arguments": {"a": 1}},
            "d.yaml: Steps[1] (b).Arguments: a step takes Arguments or InputPath, not both",
        ),
        (
            {"Name": "b", "Pass": {"Result": 1}, "Arguments": {"a": 1}},
            "d.yaml: Steps[1] (b).Arguments: a Pass step takes Result or Arguments, not both",
        ),
    ],
)
def test_a_bad_expression_field_names_the_file_the_step_and_the_field(
    step: dict[str, Any], expected: str
) -> None:
    with pytest.raises(DefinitionError) as err:
        _load(step)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            [
                {**TASK, "Name": "b", "Assign": {"total": 1}},
                {**TASK, "Name": "c", "Assign": {"total": 2}},
            ],
            "d.yaml: Steps[2] (c).Assign.total: also assigned by step 'b'; a variable is "
            "assigned by one step",
        ),
        (
            [{**TASK, "Name": "b", "Assign": {"9lives": 1}}],
            "d.yaml: Steps[1] (b).Assign.9lives",
        ),
        (
            [{**TASK, "Name": "b", "Assign": {"states": 1}}],
            "d.yaml: Steps[1] (b).Assign.states: $states is Shepherd's own",
        ),
        (
            [{**TASK, "Name": "b", "Assign": {"x": "{% ) %}"}}],
            "d.yaml: Steps[1] (b).Assign.x: not a valid JSONata expression",
        ),
        (
            [{"Name": "b", "Wait": {"Seconds": 1}, "Assign": {"x": 1}}],
            "d.yaml: Steps[1] (b).Assign: only a task step that runs an agent",
        ),
    ],
)
def test_a_bad_assign_names_the_file_the_step_and_the_field(
    steps: list[dict[str, Any]], expected: str
) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition({"Name": "d", "Steps": [TASK, *steps]}, "d.yaml")
    assert expected in str(err.value)


def test_a_step_sees_the_assigns_of_its_ancestors_only() -> None:
    d = parse_definition(
        {
            "Name": "d",
            "Steps": [
                {**TASK, "Assign": {"x": 1}},
                {**TASK, "Name": "b", "DependsOn": ["a"]},
                {**TASK, "Name": "c", "DependsOn": ["b"], "Assign": {"y": 1}},
                {**TASK, "Name": "side"},
            ],
        },
        "d.yaml",
    )
    assert d.assigners == {"a": (), "b": ("a",), "c": ("a",), "side": ()}
