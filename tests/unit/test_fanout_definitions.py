"""Map, Workflow and InputPath in definitions (issue 24): validated at load with errors that
name the file, the step and the field; definitions that use none of them keep their hash."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from shepherd import limits
from shepherd.definitions import load_directory, parse_definition
from shepherd.errors import DefinitionError
from shepherd.fanout import (
    MapSpec,
    PathError,
    parse_path,
    select,
    select_items,
)
from shepherd.fanout import (
    Path as ItemPath,
)
from shepherd.topology import pools

TASK = {"Agent": "do", "Pool": "p", "TimeoutSeconds": 10}


def definition(*steps: dict[str, Any], name: str = "wf") -> dict[str, Any]:
    return {"Name": name, "Steps": [copy.deepcopy(s) for s in steps]}


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(DefinitionError) as info:
        parse_definition(data, "wf.yaml")
    return str(info.value)


SPLIT = {"Name": "split", **TASK}


def test_a_map_step_parses_with_asl_defaults() -> None:
    parsed = parse_definition(
        definition(
            SPLIT,
            {
                "Name": "encode",
                "DependsOn": ["split"],
                "Map": {"ItemsPath": "$.steps.split.output.chunks"},
                **TASK,
            },
        ),
        "wf.yaml",
    )
    spec = parsed.by_name["encode"].map
    assert spec == MapSpec(ItemsPath="$.steps.split.output.chunks")
    assert (spec.max_concurrency, spec.tolerated_failure_count) == (100, None)
    assert spec.tolerated_failure_percentage is None
    assert parsed.by_name["split"].map is None


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (
            {"Map": {"ItemsPath": "$.input.x", "MaxConcurrency": 1001}},
            "wf.yaml: Steps[1] (s).Map.MaxConcurrency: must be at most 1000 (got 1001)",
        ),
        (
            {"Map": {"ItemsPath": "$.input.x", "MaxConcurrency": 0}},
            "wf.yaml: Steps[1] (s).Map.MaxConcurrency: must be at least 1 (got 0)",
        ),
        # Issue 35.1: strict whole numbers, as in ASL (pydantic took "5" and true for 5 and 1).
        (
            {"Map": {"ItemsPath": "$.input.x", "MaxConcurrency": "5"}},
            "wf.yaml: Steps[1] (s).Map.MaxConcurrency: must be a whole number (got '5')",
        ),
        (
            {"Map": {"ItemsPath": "$.input.x", "MaxConcurrency": True}},
            "wf.yaml: Steps[1] (s).Map.MaxConcurrency: must be a whole number (got True)",
        ),
        (
            {"Map": {"ItemsPath": "$.input.x", "ToleratedFailureCount": "2"}},
            "wf.yaml: Steps[1] (s).Map.ToleratedFailureCount: must be a whole number (got '2')",
        ),
        (
            {"Map": {"ItemsPath": "$.input.x", "ToleratedFailurePercentage": 100.5}},
            "wf.yaml: Steps[1] (s).Map.ToleratedFailurePercentage: must be at most 100",
        ),
        (
            {"Map": {"ItemsPath": "$.input.x", "ToleratedFailureCount": -1}},
            "wf.yaml: Steps[1] (s).Map.ToleratedFailureCount: must be at least 0",
        ),
        (
            {"Map": {"ItemsPath": "$.input.x", "MaxConcurency": 3}},
            "wf.yaml: Steps[1] (s).Map.MaxConcurency: unknown field; did you mean 'MaxConcurrency'?",
        ),
        ({"Map": {}}, "wf.yaml: Steps[1] (s).Map.ItemsPath: is required"),
        (
            {"Map": {"ItemsPath": "input.x"}},
            "wf.yaml: Steps[1] (s).Map.ItemsPath: 'input.x' must be $.input",
        ),
        (
            {"Map": {"ItemsPath": "$.input..x"}},
            "wf.yaml: Steps[1] (s).Map.ItemsPath: '$.input..x' must be $.input",
        ),
        (
            {"Map": {"ItemsPath": "$.steps.split.output.chunks"}},
            "wf.yaml: Steps[1] (s).Map.ItemsPath: names step 'split', which step 's' does not "
            "depend on (add it to DependsOn)",
        ),
        (
            {"DependsOn": ["split"], "InputPath": "$.steps.splt.output"},
            "wf.yaml: Steps[1] (s).InputPath: names step 'splt', which step 's' does not depend "
            "on (add it to DependsOn); did you mean 'split'?",
        ),
        (
            {"InputPath": "$.steps.split.result"},
            "wf.yaml: Steps[1] (s).InputPath: '$.steps.split.result' must be $.input",
        ),
    ],
)
def test_map_and_input_path_errors_name_file_step_and_field(
    step: dict[str, Any], expected: str
) -> None:
    assert expected in error_of(definition(SPLIT, {"Name": "s", **TASK, **step}))


def test_a_step_is_a_task_or_a_child_workflow_never_both_never_neither() -> None:
    both = {"Name": "s", "Workflow": "child", **TASK}
    assert "wf.yaml: Steps[0] (s).Agent: a step runs an agent or a child workflow, not both" in (
        error_of(definition(both))
    )
    beat = {"Name": "s", "Workflow": "child", "TimeoutSeconds": 60, "HeartbeatSeconds": 5}
    assert "wf.yaml: Steps[0] (s).HeartbeatSeconds: a Workflow step has no heartbeat" in (
        error_of(definition(beat))
    )
    neither = {"Name": "s", "TimeoutSeconds": 10}  # a task step then: Agent and Pool missing
    assert error_of(definition(neither)).splitlines() == [
        "wf.yaml: Steps[0] (s).Agent: is required",
        "wf.yaml: Steps[0] (s).Pool: is required",
    ]
    no_pool = {"Name": "s", "Agent": "do", "TimeoutSeconds": 10}
    assert "wf.yaml: Steps[0] (s).Pool: is required" in error_of(definition(no_pool))
    bad_name = {"Name": "s", "Workflow": "Child", "TimeoutSeconds": 10}
    assert "wf.yaml: Steps[0] (s).Workflow: 'Child' is not a valid name" in (
        error_of(definition(bad_name))
    )


def test_a_child_workflow_step_names_no_pool_and_no_agent() -> None:
    parsed = parse_definition(
        definition(SPLIT, {"Name": "c", "Workflow": "child", "TimeoutSeconds": 60}), "wf.yaml"
    )
    assert parsed.agents() == {"do"}
    assert set(pools({"wf": parsed})) == {"p"}
    assert not parsed.by_name["c"].runs_agent and parsed.by_name["split"].runs_agent


def test_definitions_without_the_new_fields_keep_their_canonical_json() -> None:
    plain = parse_definition(definition(SPLIT), "wf.yaml")
    body = json.loads(plain.canonical_json)
    assert set(body["Steps"][0]) >= {"Agent", "Pool"}
    assert not {"Map", "Workflow", "InputPath"} & set(body["Steps"][0])


def test_a_snapshot_of_a_map_of_children_round_trips_to_the_same_hash() -> None:
    data = definition(
        {
            "Name": "each",
            "Map": {"ItemsPath": "$.input.regions"},
            "Workflow": "child",
            "TimeoutSeconds": 60,
            "InputPath": "$.input",
        },
    )
    parsed = parse_definition(data, "wf.yaml")
    again = parse_definition(json.loads(parsed.canonical_json), "snapshot")
    assert again == parsed and again.content_hash == parsed.content_hash
    assert "Agent" not in json.loads(parsed.canonical_json)["Steps"][0]
    changed = copy.deepcopy(data)
    changed["Steps"][0]["Map"]["MaxConcurrency"] = 7
    assert parse_definition(changed, "x").content_hash != parsed.content_hash


# ------------------------------------------------------------------------ nesting at load


def write(folder: Path, name: str, *children: str) -> None:
    steps: list[dict[str, Any]] = [{"Name": "work", **TASK}]
    steps += [
        {"Name": f"call_{child}", "Workflow": child, "TimeoutSeconds": 60, "DependsOn": ["work"]}
        for child in children
    ]
    (folder / f"{name}.yaml").write_text(yaml.safe_dump({"Name": name, "Steps": steps}))


def test_a_chain_of_five_levels_loads(tmp_path: Path) -> None:
    chain = ["l1", "l2", "l3", "l4", "l5"]
    for parent, child in itertools.pairwise(chain):
        write(tmp_path, parent, child)
    write(tmp_path, "l5")
    assert set(load_directory(tmp_path)) == set(chain)


def test_six_levels_are_refused_at_the_step_that_makes_them(tmp_path: Path) -> None:
    chain = ["l1", "l2", "l3", "l4", "l5", "l6"]
    for parent, child in itertools.pairwise(chain):
        write(tmp_path, parent, child)
    write(tmp_path, "l6")
    with pytest.raises(DefinitionError) as info:
        load_directory(tmp_path)
    lines = str(info.value).splitlines()
    assert lines == [
        f"{tmp_path / 'l1.yaml'}: Steps[1] (call_l2).Workflow: 'l2' nests 5 levels of "
        "workflows; with 'l1' that is 6, and at most 5 are allowed"
    ]
    assert limits.MAX_WORKFLOW_NESTING == 5


def test_cycles_and_unknown_children_are_refused_naming_file_and_step(tmp_path: Path) -> None:
    write(tmp_path, "a", "b")
    write(tmp_path, "b", "a")
    write(tmp_path, "selfish", "selfish")
    write(tmp_path, "lonely", "nobody", "lonly")
    with pytest.raises(DefinitionError) as info:
        load_directory(tmp_path)
    text = str(info.value)
    # Reported once, at the step that closes the loop (folders are walked by name).
    assert f"{tmp_path / 'b.yaml'}: Steps[1] (call_a).Workflow: workflow cycle a -> b -> a" in text
    assert text.count("workflow cycle") == 2
    assert (
        f"{tmp_path / 'selfish.yaml'}: Steps[1] (call_selfish).Workflow: workflow cycle "
        "selfish -> selfish" in text
    )
    assert (
        f"{tmp_path / 'lonely.yaml'}: Steps[1] (call_nobody).Workflow: unknown workflow "
        "'nobody'" in text
    )
    assert "(call_lonly).Workflow: unknown workflow 'lonly'; did you mean 'lonely'?" in text


# ------------------------------------------------------------------------- paths at run time


def test_paths_select_keys_and_indexes() -> None:
    value = {"a": {"b-c": [10, {"d_e": "x"}]}}
    assert parse_path("$.input") == ItemPath(None, ())
    assert parse_path("$.input.a.b-c[1].d_e") == ItemPath(None, ("a", "b-c", 1, "d_e"))
    assert parse_path("$.steps.split.output.chunks") == ItemPath("split", ("chunks",))
    assert parse_path("$.steps.split.output") == ItemPath("split", ())
    assert select(parse_path("$.input.a.b-c[1].d_e"), value) == "x"
    assert select(parse_path("$.input"), value) is value
    with pytest.raises(PathError, match=r"\.a\.b-c\[2\]: no item 2 here"):
        select(parse_path("$.input.a.b-c[2]"), value)
    with pytest.raises(PathError, match=r"\.a\.z: no key 'z' here"):
        select(parse_path("$.input.a.z"), value)
    for bad in ("$", "$.inputs", "$.steps.Split.output", "$.input.", "$.input[x]", "$.input.a b"):
        with pytest.raises(PathError):
            parse_path(bad)


def test_items_must_be_an_array_of_at_most_the_cap() -> None:
    path = parse_path("$.input.items")
    assert select_items(path, {"items": [1, 2]}) == [1, 2]
    with pytest.raises(PathError, match="selects a dict, not an array"):
        select_items(path, {"items": {"a": 1}})
    with pytest.raises(PathError, match="at most 100000"):
        select_items(path, {"items": [0] * (limits.MAX_MAP_ITEMS + 1)})
    assert len(select_items(path, {"items": [0] * limits.MAX_MAP_ITEMS})) == limits.MAX_MAP_ITEMS


# ---------------------------------------------------------- tools that read every step


def test_a_workflow_step_takes_no_compensation_its_child_undoes_itself() -> None:
    with pytest.raises(
        DefinitionError, match=r"Steps\[1\] \(each\)\.Compensation: a Workflow step"
    ):
        parse_definition(
            definition(
                SPLIT,
                {
                    "Name": "each",
                    "DependsOn": ["split"],
                    "Workflow": "child",
                    "TimeoutSeconds": 60,
                    "Compensation": {"Agent": "undo", "Pool": "q", "TimeoutSeconds": 5},
                },
            ),
            "wf.yaml",
        )


def test_the_synth_check_and_the_graph_know_a_child_workflow_step() -> None:
    from shepherd_cli.render import graph
    from shepherd_infra.agent_check import needed_agents

    parsed = parse_definition(
        definition(
            SPLIT,
            {
                "Name": "each",
                "DependsOn": ["split"],
                "Map": {"ItemsPath": "$.steps.split.output", "MaxConcurrency": 7},
                "Workflow": "child",
                "TimeoutSeconds": 60,
            },
        ),
        "wf.yaml",
    )
    # A child-workflow step needs no agent of its own: its child's steps run theirs.
    assert needed_agents({"wf": parsed}) == {"p": {"do": "wf: Steps[0] (split).Agent"}}
    text = graph(parsed)
    assert 'each["each<br/><small>map ≤7 · workflow child</small>"]' in text
    assert 'split["split<br/><small>p · do</small>"]' in text
