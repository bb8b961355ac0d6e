"""A step's `Repeat` (issue 42.5) as a definition says it: what loads, each mistake as one line
naming the file, the step and the field, and the pure decision after each iteration."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import limits
from shepherd.decisions import repeat
from shepherd.definitions import parse_definition
from shepherd.errors import DefinitionError

UNTIL = {"Variable": "$.steps.poll.output.status", "StringEquals": "DONE"}


def _poll(**fields: Any) -> dict[str, Any]:
    return {"Name": "poll", "Agent": "check", "Pool": "p", "TimeoutSeconds": 30, **fields}


def _load(*steps: dict[str, Any]) -> Any:
    return parse_definition({"Name": "loops", "Steps": list(steps)}, "loops.yaml")


def _error(*steps: dict[str, Any]) -> str:
    with pytest.raises(DefinitionError) as err:
        _load(*steps)
    return str(err.value)


def test_a_repeat_step_loads_with_its_interval_and_limit() -> None:
    definition = _load(_poll(Repeat={"Until": UNTIL, "IntervalSeconds": 60, "MaxIterations": 100}))
    spec = definition.by_name["poll"].repeat
    assert spec is not None
    assert (spec.interval_seconds, spec.max_iterations) == (60, 100)


def test_the_rest_between_iterations_counts_in_the_watch_reach() -> None:
    """An iteration's end rests the next one `IntervalSeconds` unsent: a deadline an agent's
    write creates, so the step's reach gap (the deadline rule) is at most the interval, and
    the watch entry is never due after the iteration's time."""
    long = {"TimeoutSeconds": 3600}
    looped = _load(
        _poll(**long, Repeat={"Until": UNTIL, "IntervalSeconds": 10, "MaxIterations": 5})
    )
    assert looped.reach_gap_ms["poll"] == 10_000
    plain = _load(_poll(**long))
    assert plain.reach_gap_ms["poll"] == 60_000  # the dispatch grace alone
    at_once = _load(_poll(**long, Repeat={"Until": UNTIL, "MaxIterations": 5}))
    assert at_once.reach_gap_ms["poll"] == 60_000  # sent at once: its dispatch grace counts


@pytest.mark.parametrize(
    ("repeat_fields", "expected"),
    [
        ({"Until": UNTIL}, "loops.yaml: Steps[0] (poll).Repeat.MaxIterations: is required"),
        ({"MaxIterations": 3}, "loops.yaml: Steps[0] (poll).Repeat.Until: is required"),
        (
            {"Until": UNTIL, "MaxIterations": limits.MAX_REPEAT_ITERATIONS + 1},
            f"Steps[0] (poll).Repeat.MaxIterations: must be at most {limits.MAX_REPEAT_ITERATIONS}",
        ),
        ({"Until": UNTIL, "MaxIterations": 0}, "Steps[0] (poll).Repeat.MaxIterations"),
        (
            {"Until": UNTIL, "MaxIterations": 3, "IntervalSeconds": -1},
            "Steps[0] (poll).Repeat.IntervalSeconds",
        ),
        (
            {"Until": UNTIL, "MaxIterations": 3, "Intervl": 5},
            "Steps[0] (poll).Repeat.Intervl: unknown field; did you mean 'IntervalSeconds'?",
        ),
        (
            {
                "Until": {"Variable": "$.steps.poll.output.n", "NumericEquals": "x"},
                "MaxIterations": 3,
            },
            "Steps[0] (poll).Repeat.Until.NumericEquals: must be a number",
        ),
        (
            {
                "Until": {"Variable": "$.steps.other.output.s", "StringEquals": "x"},
                "MaxIterations": 3,
            },
            "Steps[0] (poll): Repeat.Until: '$.steps.other.output.s' reads step 'other'",
        ),
    ],
)
def test_each_mistake_names_the_file_the_step_and_the_field(
    repeat_fields: dict[str, Any], expected: str
) -> None:
    assert expected in _error(_poll(Repeat=repeat_fields))


def test_a_task_or_a_child_workflow_step_repeats_and_no_other() -> None:
    repeat_fields = {"Until": UNTIL, "MaxIterations": 3}
    wait = {"Name": "poll", "Wait": {"Seconds": 5}, "Repeat": repeat_fields}
    assert "Steps[0] (poll): a Wait step names no Repeat" in _error(wait)
    child = {"Name": "poll", "Workflow": "body", "TimeoutSeconds": 30, "Repeat": repeat_fields}
    assert _load(child).by_name["poll"].repeat is not None
    detached = {**child, "Detached": True}
    assert "Steps[0] (poll): Repeat: a step with Detached cannot repeat" in _error(detached)
    mapped = _poll(Map={"ItemsPath": "$.input.items"}, Repeat=repeat_fields)
    assert "Steps[0] (poll): Repeat: a step with Map cannot repeat" in _error(mapped)


def test_a_definition_without_repeat_keeps_its_version() -> None:
    """`Repeat` is left out of the canonical JSON when absent: no running workflow's
    definition version changes with this field's arrival."""
    assert "Repeat" not in _load(_poll()).canonical_json


def test_the_decision_after_each_iteration() -> None:
    spec = _load(_poll(Repeat={"Until": UNTIL, "IntervalSeconds": 7, "MaxIterations": 3}))
    rules = spec.by_name["poll"].repeat
    assert rules is not None

    def after(iteration: int, status: str) -> repeat.Decision:
        document = repeat.document("poll", {}, {"status": status})
        return repeat.decide(rules, iteration=iteration, document=document)

    assert after(1, "DONE") == repeat.Done()
    assert after(1, "RUNNING") == repeat.Again(7_000)
    assert after(2, "RUNNING") == repeat.Again(7_000)
    assert isinstance(after(3, "RUNNING"), repeat.LimitReached)
    assert after(3, "DONE") == repeat.Done()  # Until wins at the last iteration


def test_a_repeated_child_workflow_may_declare_no_compensation(tmp_path: Any) -> None:
    """Only a repeated child step's last child undoes itself when its workflow unwinds: a
    body that declares a compensation (here two levels down) is refused at load, naming the
    file, the step and the field; one that declares none loads."""
    import yaml
    from shepherd.definitions import load_directory

    def write(name: str, steps: list[dict[str, Any]]) -> None:
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"Name": name, "Steps": steps}))

    task = {"Agent": "a", "Pool": "p", "TimeoutSeconds": 5}
    chase = {
        "Name": "rounds",
        "Workflow": "body",
        "TimeoutSeconds": 60,
        "Repeat": {"Until": {"Variable": "$.input.x", "IsPresent": True}, "MaxIterations": 3},
    }
    write("chase", [{"Name": "first", **task}, chase])
    write(
        "body",
        [{"Name": "send", **task}, {"Name": "inner", "Workflow": "deep", "TimeoutSeconds": 9}],
    )
    write("deep", [{"Name": "charge", **task}])
    assert set(load_directory(tmp_path)) == {"chase", "body", "deep"}
    write("deep", [{"Name": "charge", **task, "Compensation": task}])
    with pytest.raises(DefinitionError) as err:
        load_directory(tmp_path)
    assert (
        f"{tmp_path / 'chase.yaml'}: Steps[1] (rounds).Repeat: its child workflow declares a "
        "compensation ('deep' Steps[0] (charge).Compensation)"
    ) in str(err.value)
