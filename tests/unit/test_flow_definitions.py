"""`Catch` and `Choice` in native definitions (issue 42.5): what loads, and every mistake
refused when the definition loads, naming the file, the step and the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from shepherd.definitions import parse_definition
from shepherd.errors import DefinitionError


def _task(name: str, *deps: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"Name": name, "Agent": "work", "Pool": "p", "TimeoutSeconds": 5}
    if deps:
        out["DependsOn"] = list(deps)
    out.update(extra)
    return out


BIG = {"Variable": "$.steps.quote.output.total", "NumericGreaterThan": 1000}
BASE: dict[str, Any] = {
    "Name": "flow",
    "Steps": [
        _task(
            "quote",
            Catch=[
                {"ErrorEquals": ["QuoteRefused"], "Next": "apologise"},
                {"ErrorEquals": ["States.ALL"], "Next": "escalate"},
            ],
        ),
        _task("apologise"),
        _task("escalate"),
        {
            "Name": "size",
            "DependsOn": ["quote"],
            "Choice": {"Choices": [{"Condition": BIG, "Next": "deposit"}], "Default": "waive"},
        },
        _task("deposit"),
        _task("waive"),
        _task("confirm", "deposit", "waive"),
    ],
}


def test_a_definition_with_catch_and_choice_loads_and_its_next_steps_are_no_roots() -> None:
    definition = parse_definition(BASE, "flow.yaml")
    assert definition.roots == ("quote",)  # the steps a Next names never start with it
    assert definition.entered_from == {
        "apologise": "quote",
        "escalate": "quote",
        "deposit": "size",
        "waive": "size",
    }
    order = definition.topological_order
    assert order.index("quote") < order.index("apologise")
    assert order.index("size") < order.index("deposit") < order.index("confirm")
    assert definition.inputs("deposit") == ("size",)
    assert "apologise" in definition.dependents_closure["quote"]
    assert definition.tasks  # a Choice is no task: no pool, no agent
    assert all(t.agent == "work" for t in definition.tasks)
    assert '"Catch"' in definition.canonical_json  # part of its version
    # Left out when absent: an existing definition keeps its content hash (its version).
    plain = {"Name": "plain", "Steps": [_task("a"), _task("b", "a")]}
    assert '"Catch"' not in parse_definition(plain, "plain.yaml").canonical_json
    assert '"Choice"' not in parse_definition(plain, "plain.yaml").canonical_json


def _with(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    change(data["Steps"])
    return data


CASES = [
    (
        lambda s: s[1].update(DependsOn=["quote"]),
        "Steps[1] (apologise).DependsOn: a step named by a Next (Steps[0] (quote).Catch[0].Next)"
        " runs only when that step sends it there; it has no DependsOn",
    ),
    (
        lambda s: s[0]["Catch"][0].update(Next="apologize"),
        "Steps[0] (quote).Catch[0].Next: unknown step 'apologize'; did you mean 'apologise'?",
    ),
    (
        lambda s: s[0]["Catch"][0].update(Next="quote"),
        "Steps[0] (quote).Catch[0].Next: names its own step",
    ),
    (
        lambda s: s[3]["Choice"].update(Default="apologise"),
        "Steps[3] (size).Choice.Default: 'apologise' is already named by a Next of step 'quote';"
        " a step is named by one Next at most",
    ),
    (
        lambda s: s[0]["Catch"][1].update(Next="apologise"),
        "Steps[0] (quote).Catch[1].Next: 'apologise' is named by another Next of this step",
    ),
    (
        lambda s: s[0]["Catch"][0].update(ErrorEquals=["States.ALL"]),
        "Steps[0] (quote).Catch[0].ErrorEquals: States.ALL must be in the last catcher",
    ),
    (
        lambda s: s[0]["Catch"][1].update(ErrorEquals=["States.ALL", "Other"]),
        "Steps[0] (quote).Catch[1].ErrorEquals: States.ALL must appear alone in ErrorEquals",
    ),
    (
        lambda s: s[0]["Catch"][1].update(ErrorEquals=[]),
        "Steps[0] (quote).Catch[1].ErrorEquals: must have at least 1 item",
    ),
    (
        lambda s: s[0]["Catch"][1].pop("Next"),
        "Steps[0] (quote).Catch[1].Next: is required",
    ),
    (
        lambda s: s[3].update(Agent="work"),
        "Steps[3] (size): a Choice step names no Agent",
    ),
    (
        lambda s: s[3].update(Wait={"Seconds": 1}),
        "Steps[3] (size): a step is a Wait or a Choice, not both",
    ),
    (
        lambda s: s[3]["Choice"]["Choices"][0].update(Next="confirm"),
        "Steps[6] (confirm).DependsOn: a step named by a Next (Steps[3] (size).Choice.Choices[0]"
        ".Next) runs only when that step sends it there; it has no DependsOn",
    ),
    (
        lambda s: s[3]["Choice"]["Choices"][0]["Condition"].update(
            Variable="$.steps.escalate.output.x"
        ),
        "Steps[3] (size).Choice.Choices[0].Condition: '$.steps.escalate.output.x' reads step "
        "'escalate', which is not in its DependsOn",
    ),
    (
        lambda s: s[3]["Choice"].update(Choices=[]),
        "Steps[3] (size).Choice.Choices: must have at least 1 item",
    ),
    (
        # Two steps that enter each other: neither can ever run.
        lambda s: s[2].update(Catch=[{"ErrorEquals": ["States.ALL"], "Next": "quote"}]),
        "Steps: dependency cycle",
    ),
]


@pytest.mark.parametrize(("change", "expected"), CASES)
def test_mistakes_are_refused_naming_the_file_the_step_and_the_field(
    change: Any, expected: str
) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(_with(change), "statemachines/flow.yaml")
    assert f"statemachines/flow.yaml: {expected}" in str(err.value)


def test_a_fallback_s_condition_may_read_the_step_that_enters_it() -> None:
    data = _with(
        lambda s: s[1].update(
            Condition={"Variable": "$.steps.quote.output.Error", "StringEquals": "QuoteRefused"}
        )
    )
    parse_definition(data, "flow.yaml")  # no error: its Catch's step is its way in
