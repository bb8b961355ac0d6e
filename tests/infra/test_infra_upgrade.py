"""An upgrade in place from the previous release (docs/upgrading.md): each stage's change to
the table is one DynamoDB applies in one update, and no queue, table or bucket holding data is
replaced.

The previous release's table, queues and bucket are `previous_release.json`, a snapshot of the
template synthesized from commit a420011 (the last commit before the list indexes were sharded
and the inbox added; tests/infra/previous_release.md says how it was made)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, assertions
from infra_support import Synth
from shepherd.topology import TABLE
from shepherd_infra import table_stages
from shepherd_infra.state_store import StateStore

PREVIOUS = json.loads((Path(__file__).parent / "previous_release.json").read_text())

# What replaces a resource when it changes (CloudFormation's "Update requires: Replacement").
REPLACING = {
    "AWS::DynamoDB::Table": ("TableName", "KeySchema", "LocalSecondaryIndexes"),
    "AWS::SQS::Queue": ("QueueName", "FifoQueue"),
    "AWS::S3::Bucket": ("BucketName", "ObjectLockEnabled"),
}


def _table(resources: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, v) for k, v in resources.items() if v["Type"] == "AWS::DynamoDB::Table"]
    return found


def _indexes(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["IndexName"]: i for i in table["Properties"].get("GlobalSecondaryIndexes", [])}


def one_update_problems(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Why DynamoDB (through CloudFormation) could not apply `before` -> `after` in one
    UpdateTable: more than one index created or deleted, an index changed in place (keys or
    projection: CloudFormation refuses), the table's own keys changed."""
    problems = []
    old, new = _indexes(before), _indexes(after)
    created, deleted = sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys())
    if len(created) + len(deleted) > 1:
        problems.append(f"created {created} and deleted {deleted} in one update")
    for name in sorted(old.keys() & new.keys()):
        if old[name] != new[name]:
            problems.append(f"index {name} changed in place: {old[name]} -> {new[name]}")
    for key in REPLACING["AWS::DynamoDB::Table"]:
        if before["Properties"].get(key) != after["Properties"].get(key):
            problems.append(f"table {key} changed (replaces the table)")
    return problems


def _stage_table(stage: int | None) -> dict[str, Any]:
    """The table resource the construct renders at `stage` (the StateStore alone: the rest of
    the stack does not change from stage to stage)."""
    app = App()
    stack = Stack(app, "Stage")
    StateStore(stack, "StateStore", retain=True, indexes=table_stages.indexes_at(stage))
    return _table(assertions.Template.from_stack(stack).to_json()["Resources"])[1]


def test_the_snapshot_is_the_previous_layout_the_stages_start_from() -> None:
    _, table = _table(PREVIOUS["Resources"])
    assert table_stages.stage_of(_layout_of(table)) == 0
    assert table_stages.layout(table_stages.PREVIOUS) == _layout_of(table)


def _layout_of(table: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """A template's table as DescribeTable would show it."""
    props = table["Properties"]
    return table_stages.described_layout(
        {
            "AttributeDefinitions": props["AttributeDefinitions"],
            "GlobalSecondaryIndexes": props.get("GlobalSecondaryIndexes", []),
        }
    )


def test_each_stage_is_one_update_dynamodb_can_apply_and_the_last_is_this_release() -> None:
    _, previous = _table(PREVIOUS["Resources"])
    # The jump an unstaged deploy makes is refused (the bug: four creations and a change).
    assert one_update_problems(previous, _stage_table(None))
    before = previous
    for stage in table_stages.STAGES:
        after = _stage_table(stage.number)
        assert one_update_problems(before, after) == [], stage
        assert table_stages.stage_of(_layout_of(after)) == stage.number
        before = after
    assert _layout_of(before) == table_stages.layout(TABLE.indexes)
    assert table_stages.STAGES[-1].indexes == TABLE.indexes


def test_no_stateful_resource_of_the_previous_release_is_replaced(shepherd: Synth) -> None:
    _assert_nothing_replaced(shepherd.resources)


def _assert_nothing_replaced(now: dict[str, Any]) -> None:
    """Every table, queue and bucket the previous release deployed is in `now` under the same
    logical id with the same replacing properties (a logical id gone would delete or orphan
    it and create an empty one)."""
    for logical_id, old in PREVIOUS["Resources"].items():
        assert logical_id in now, f"{old['Type']} {logical_id} is gone"
        new = now[logical_id]
        assert new["Type"] == old["Type"]
        for key in REPLACING[old["Type"]]:
            assert new["Properties"].get(key) == old["Properties"].get(key), (logical_id, key)
        assert new.get("DeletionPolicy") == old.get("DeletionPolicy"), logical_id


def test_a_new_stack_gets_the_final_layout_and_stages_are_checked() -> None:
    assert table_stages.indexes_at(None) == TABLE.indexes
    assert table_stages.parse_stage(None) is None
    assert table_stages.parse_stage("final") is None
    assert table_stages.parse_stage("3") == 3
    assert table_stages.FINAL == 7  # the by_key index (issue 37) is the last stage
    for bad in ("0", str(table_stages.FINAL + 1), "x"):
        with pytest.raises(ValueError, match="table_stage"):
            table_stages.parse_stage(bad)


def test_the_stack_deploys_the_table_stage_the_context_names() -> None:
    """The context value reaches the table (the rest of the app as a plain synth builds it)."""
    from shepherd_infra.application import build_app

    _, stack = build_app(context={table_stages.CTX_TABLE_STAGE: "1"})
    resources = assertions.Template.from_stack(stack).to_json()["Resources"]
    _, table = _table(resources)
    assert table_stages.stage_of(_layout_of(table)) == 1
    _, previous = _table(PREVIOUS["Resources"])
    assert one_update_problems(previous, table) == []
    _assert_nothing_replaced(resources)
