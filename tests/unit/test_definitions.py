"""Definitions: validation names the file and the field; hashes identify versions."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from shepherd.definitions import check_agents, load_directory, load_file, parse_definition
from shepherd.errors import DefinitionError
from support import DEFINITIONS, ROOT

BASE: dict[str, Any] = {
    "Name": "wf",
    "Steps": [
        {"Name": "a", "Agent": "do_a", "Pool": "p", "TimeoutSeconds": 10, "HeartbeatSeconds": 3},
        {"Name": "b", "Agent": "do_b", "Pool": "p", "TimeoutSeconds": 10, "DependsOn": ["a"]},
    ],
}


def variant(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for path, value in changes.items():
        node: Any = data
        *parents, last = path.split("__")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return data


def test_the_examples_load_and_name_only_registered_agents() -> None:
    from shepherd_examples.agents import registry

    assert set(DEFINITIONS) == {
        "onboard_tenant",
        "order_amendment",
        "order_fulfilment",
        "provision_environment",
        "transcode_video",
    }
    for name, definition in DEFINITIONS.items():
        check_agents(definition, registry.names(), name)
    compute = DEFINITIONS["provision_environment"].by_name["create_compute"]
    assert compute.depends_on == ("create_network", "create_storage")
    encode = DEFINITIONS["transcode_video"].by_name["encode_chunks"]
    assert encode.map is not None and encode.map.max_concurrency == 3
    replicas = DEFINITIONS["onboard_tenant"].by_name["provision_replicas"]
    assert replicas.workflow == "provision_environment"
    assert replicas.map is not None and replicas.map.max_concurrency == 2


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            variant(Steps__1__DependsOn=["zzz"]),
            "Steps[1] (b).DependsOn: unknown step 'zzz'",
        ),
        (
            variant(Steps__0__DependsOn=["b"]),
            "Steps: dependency cycle",
        ),
        (
            variant(Steps__1__Name="a"),
            "Steps[1].Name: duplicate step name 'a'",
        ),
        (
            variant(Steps__0__HeartbeatSeconds=10),
            "Steps[0] (a): HeartbeatSeconds (10) must be less than TimeoutSeconds (10)",
        ),
        (
            variant(Steps__0__TimeoutSeconds=-5),
            "Steps[0] (a).TimeoutSeconds: must be at least 1 (got -5)",
        ),
        (
            variant(Steps__0__TimeoutSeconds=10**12),
            "Steps[0] (a).TimeoutSeconds: must be at most 31622400",
        ),
        (
            variant(Steps__0__Retry={"MaxAttempts": 1000}),
            "Steps[0] (a).Retry.MaxAttempts: must be at most 100 (got 1000)",
        ),
        (
            variant(Steps__0__Retry={"BackoffRate": 0.5}),
            "Steps[0] (a).Retry.BackoffRate: must be at least 1.0 (got 0.5)",
        ),
        (
            variant(Steps__0__Retry={"JitterStrategy": "SOME"}),
            "Steps[0] (a).Retry.JitterStrategy: must be one of FULL, NONE (got 'SOME')",
        ),
        (
            variant(Steps__0__Pool="Bad Pool"),
            "Steps[0] (a).Pool: 'Bad Pool' is not a valid name: lowercase letters, digits and -",
        ),
        (
            variant(Steps__0__Timeout=3),
            "Steps[0] (a).Timeout: unknown field; did you mean 'TimeoutSeconds'?",
        ),
        (
            variant(InputSchema={"type": "no-such-type"}),
            "InputSchema: not a valid JSON Schema",
        ),
        (
            variant(Steps__0__Compensation={"Agent": "undo", "Pool": "p", "TimeoutSeconds": 0}),
            "Steps[0] (a).Compensation.TimeoutSeconds: must be at least 1 (got 0)",
        ),
    ],
)
def test_invalid_definitions_name_the_source_and_field(data: Any, expected: str) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(data, "statemachines/wf.yaml")
    assert f"statemachines/wf.yaml: {expected}" in str(err.value)
    assert not PYDANTIC_WORDS.search(str(err.value)), str(err.value)


# What pydantic says, and Shepherd's errors never do.
PYDANTIC_WORDS = re.compile(
    r"Input should|Field required|Extra inputs|String should|validation error|pydantic|type="
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            variant(Steps__0__TimeoutSecond=3),
            "Steps[0] (a).TimeoutSecond: unknown field; did you mean 'TimeoutSeconds'?",
        ),
        (
            variant(Steps__0__Retry={"maxattempts": 2}),
            "Steps[0] (a).Retry.maxattempts: unknown field; did you mean 'MaxAttempts'?",
        ),
        (
            variant(Step=[]),
            "wf.yaml: Step: unknown field; did you mean 'Steps'?",
        ),
        (
            variant(Steps__0__Retry={"JitterStrategy": "FUL"}),
            "Steps[0] (a).Retry.JitterStrategy: must be one of FULL, NONE (got 'FUL'); "
            "did you mean 'FULL'?",
        ),
        (
            variant(Steps__1__DependsOn=["aa"]),
            "Steps[1] (b).DependsOn: unknown step 'aa'; did you mean 'a'?",
        ),
        (
            variant(Steps__0__TimeoutSeconds="ten"),
            "Steps[0] (a).TimeoutSeconds: must be a whole number (got 'ten')",
        ),
        (
            variant(Steps__0__Retry="three"),
            "Steps[0] (a).Retry: must be a mapping (Key: value) (got 'three')",
        ),
        (
            variant(Steps__1__DependsOn="a"),
            "Steps[1] (b).DependsOn: must be a list (got 'a')",
        ),
        (
            variant(Steps__0__Name="Reserve"),
            "Steps[0] (Reserve).Name: 'Reserve' is not a valid name: lowercase letters, digits "
            "and _, starting with a letter",
        ),
        (["not", "a", "mapping"], "wf.yaml: a definition must be a mapping"),
    ],
)
def test_a_mistake_gets_shepherds_words_and_the_nearest_name(data: Any, expected: str) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(data, "statemachines/wf.yaml")
    assert expected in str(err.value)
    assert not PYDANTIC_WORDS.search(str(err.value)), str(err.value)


def test_an_invalid_step_is_not_also_reported_as_a_missing_step() -> None:
    # pydantic adds "Steps: too short after validation" when the only step is invalid.
    one = copy.deepcopy(BASE)
    one["Steps"] = [{**one["Steps"][0], "TimeoutSeconds": "x"}]
    with pytest.raises(DefinitionError) as err:
        parse_definition(one, "wf.yaml")
    assert (
        str(err.value) == "wf.yaml: Steps[0] (a).TimeoutSeconds: must be a whole number (got 'x')"
    )


def test_unknown_agent_names_are_reported_with_the_field() -> None:
    definition = parse_definition(
        variant(Steps__0__Compensation={"Agent": "undo_a", "Pool": "p", "TimeoutSeconds": 5}),
        "wf.yaml",
    )
    with pytest.raises(DefinitionError) as err:
        check_agents(definition, {"do_a"}, "wf.yaml")
    assert "wf.yaml: Steps[1] (b).Agent: unknown agent 'do_b'; did you mean 'do_a'?" in str(
        err.value
    )
    assert "wf.yaml: Steps[0] (a).Compensation.Agent: unknown agent 'undo_a'" in str(err.value)


def test_yaml_duplicate_keys_and_file_name_mismatch_are_errors(tmp_path: Path) -> None:
    dup = tmp_path / "wf.yaml"
    dup.write_text("Name: wf\nName: other\nSteps: []\n")
    with pytest.raises(DefinitionError, match=r"wf.yaml: line 2: duplicate key 'Name'"):
        load_file(dup)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(BASE))
    with pytest.raises(DefinitionError, match=r"other.json: Name: 'wf' must match the file name"):
        load_file(other)


def test_a_directory_reports_every_bad_file_at_once(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text("Name: one\nSteps: [\n")
    (tmp_path / "two.json").write_text("{}")
    with pytest.raises(DefinitionError) as err:
        load_directory(tmp_path)
    text = str(err.value)
    assert re.search(r"one.yaml: line 3, column 1: not valid YAML: [^\n]+\n", text), text
    assert "two.json: Name: is required" in text
    assert "two.json: Steps: is required" in text


def test_content_hash_survives_a_json_round_trip_and_changes_with_content() -> None:
    definition = DEFINITIONS["order_fulfilment"]
    again = parse_definition(json.loads(definition.canonical_json), "snapshot")
    assert again.content_hash == definition.content_hash
    changed = json.loads(definition.canonical_json)
    changed["Steps"][0]["TimeoutSeconds"] += 1
    assert parse_definition(changed, "x").content_hash != definition.content_hash


def test_watch_gap_is_the_smallest_deadline_any_event_can_create() -> None:
    # order_fulfilment: notify_customer has HeartbeatSeconds 2, the smallest of everything.
    assert DEFINITIONS["order_fulfilment"].watch_gap_ms == 2000
    data = variant(DispatchTimeoutSeconds=1)
    assert parse_definition(data, "x").watch_gap_ms == 1000


def test_examples_are_the_files_on_disk() -> None:
    files = sorted(p.stem for p in (ROOT / "statemachines").glob("*.yaml"))
    assert files == sorted(DEFINITIONS)


def test_a_one_second_heartbeat_lease_is_refused() -> None:
    with pytest.raises(
        DefinitionError,
        match=r"Steps\[0\] \(a\)\.HeartbeatSeconds: must be at least 2 \(got 1\)",
    ):
        parse_definition(variant(Steps__0__HeartbeatSeconds=1), "wf.yaml")


def test_a_definition_too_large_for_its_snapshot_item_is_refused() -> None:
    from shepherd import limits

    huge = variant(InputSchema={"description": "d" * limits.MAX_DEFINITION_BYTES})
    with pytest.raises(DefinitionError, match="the limit is"):
        parse_definition(huge, "big.yaml")
