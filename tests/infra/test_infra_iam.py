"""Least privilege: each function's role, statement by statement."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import Synth, actions, flatten, granted, index_resource, refers_to, resources
from shepherd.topology import TABLE

RECEIVE = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility")


def _table_id(synth: Synth) -> str:
    return synth.logical_id(synth.construct.store.table)


def _queue_ids(synth: Synth) -> dict[str, str]:
    return {name: synth.logical_id(pool.queue) for name, pool in synth.construct.pools.items()}


def _index_queries(statements: list[dict[str, Any]]) -> list[str]:
    return [flatten(r) for r in granted(statements, "dynamodb:Query") if "/index/" in flatten(r)]


def test_no_wildcards_except_xray(shepherd: Synth) -> None:
    for name, fn_id in shepherd.function_ids().items():
        for statement in shepherd.statements(fn_id):
            assert not any(a.endswith("*") for a in actions(statement)), (name, statement)
            if "*" in resources(statement):
                assert set(actions(statement)) <= {
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                }
            assert "index/*" not in flatten(statement), (name, statement)
            assert not {"dynamodb:Scan", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} & set(
                actions(statement)
            )


def test_every_engine_function_reads_writes_the_table_and_sends_and_none_publishes(
    shepherd: Synth,
) -> None:
    table = {"Fn::GetAtt": [_table_id(shepherd), "Arn"]}
    queues = _queue_ids(shepherd)
    for name, fn_id in shepherd.function_ids().items():
        statements = shepherd.statements(fn_id)
        for action in (
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
        ):
            assert table in list(granted(statements, action)), (name, action)
        sendable = list(granted(statements, "sqs:SendMessage"))
        for queue_id in queues.values():
            assert {"Fn::GetAtt": [queue_id, "Arn"]} in sendable, (name, queue_id)
        assert list(granted(statements, "events:PutEvents")) == [], name  # the relay does


def test_only_the_relay_publishes_and_it_touches_nothing_but_its_stream(shepherd: Synth) -> None:
    relay = shepherd.construct.relay
    statements = shepherd.statements(shepherd.logical_id(relay.function))
    bus = {"Fn::GetAtt": [shepherd.logical_id(shepherd.construct.events.bus), "Arn"]}
    assert list(granted(statements, "events:PutEvents")) == [bus]
    stream = {"Fn::GetAtt": [_table_id(shepherd), "StreamArn"]}
    for action in ("dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:DescribeStream"):
        assert list(granted(statements, action)) == [stream], action
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", *RECEIVE):
        assert not list(granted(statements, action)), action
    failures = {"Fn::GetAtt": [shepherd.logical_id(relay.failures), "Arn"]}
    assert list(granted(statements, "sqs:SendMessage")) == [failures]


def test_api_cannot_receive_or_read_the_watch_index(shepherd: Synth) -> None:
    table_id = _table_id(shepherd)
    statements = shepherd.statements(shepherd.logical_id(shepherd.construct.api.api_function))
    for action in RECEIVE:
        assert not list(granted(statements, action)), action
    assert _index_queries(statements) == [flatten(index_resource(table_id, TABLE.list_index.name))]
    assert index_resource(table_id, TABLE.watch_index.name) not in list(
        granted(statements, "dynamodb:Query")
    )


@pytest.mark.parametrize("part", ["callbacks", "events"])
def test_callbacks_and_events_functions_query_no_index_and_receive_nothing(
    shepherd: Synth, part: str
) -> None:
    statements = shepherd.statements(shepherd.function_ids()[part])
    assert _index_queries(statements) == []
    for action in RECEIVE:
        assert not list(granted(statements, action)), action


def test_agents_consume_only_their_own_queue_and_query_no_index(shepherd: Synth) -> None:
    queues = _queue_ids(shepherd)
    dlqs = {shepherd.logical_id(pool.dlq) for pool in shepherd.construct.pools.values()}
    for name, pool in shepherd.construct.pools.items():
        statements = shepherd.statements(shepherd.logical_id(pool.function))
        for action in RECEIVE:
            assert list(granted(statements, action)) == [{"Fn::GetAtt": [queues[name], "Arn"]}], (
                name,
                action,
            )
        assert _index_queries(statements) == [], name
        assert not any(refers_to(r, dlq) for s in statements for r in resources(s) for dlq in dlqs)


def test_only_the_supervisor_queries_the_watch_index(shepherd: Synth) -> None:
    watch = flatten(index_resource(_table_id(shepherd), TABLE.watch_index.name))
    readers = [
        name
        for name, fn_id in shepherd.function_ids().items()
        if watch in _index_queries(shepherd.statements(fn_id))
    ]
    assert readers == ["supervisor"]
    statements = shepherd.statements(shepherd.function_ids()["supervisor"])
    assert _index_queries(statements) == [watch]
    # It consumes nothing but its own ticks.
    ticks = shepherd.logical_id(shepherd.construct.supervisor.ticks)
    for action in RECEIVE:
        assert all(refers_to(r, ticks) for r in granted(statements, action)), action
    # Nothing outside the function roles can query the table or its indexes either.
    roles = {
        shepherd.props(fn_id)["Role"]["Fn::GetAtt"][0] for fn_id in shepherd.function_ids().values()
    }
    relay_role = shepherd.props(shepherd.logical_id(shepherd.construct.relay.function))["Role"]
    for policy in shepherd.of_type("AWS::IAM::Policy").values():
        if not any(r["Ref"] in roles for r in policy["Properties"]["Roles"]):
            text = flatten(policy)
            if relay_role["Fn::GetAtt"][0] in text:
                # The relay reads the stream only (ListStreams takes no resource).
                assert "dynamodb:Query" not in text and "dynamodb:GetItem" not in text
                continue
            assert "dynamodb:" not in text, policy


def test_scheduler_role_invokes_only_the_supervisor(shepherd: Synth) -> None:
    fn_id = shepherd.logical_id(shepherd.construct.supervisor.function)
    ((_, schedule),) = shepherd.of_type("AWS::Scheduler::Schedule").items()
    role_id = schedule["Properties"]["Target"]["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in shepherd.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert {a for s in statements for a in actions(s)} == {"lambda:InvokeFunction"}
    assert all(refers_to(r, fn_id) for s in statements for r in resources(s))


def test_only_the_api_switches_pools_and_only_their_own_event_source_mappings(
    shepherd: Synth,
) -> None:
    import json as _json

    from shepherd.settings import ENV_POOL_MAPPINGS

    pool_functions = {shepherd.logical_id(p.function) for p in shepherd.construct.pools.values()}
    mappings = {
        mapping_id: mapping
        for mapping_id, mapping in shepherd.of_type("AWS::Lambda::EventSourceMapping").items()
        if mapping["Properties"]["FunctionName"]["Ref"] in pool_functions
    }  # not the event relay's stream mapping
    api_id = shepherd.logical_id(shepherd.construct.api.api_function)
    for name, fn_id in shepherd.function_ids().items():
        allowed = list(granted(shepherd.statements(fn_id), "lambda:UpdateEventSourceMapping"))
        if fn_id != api_id:
            assert allowed == [], name
            continue
        assert len(allowed) == len(mappings) == len(shepherd.construct.pools)
        for mapping_id in mappings:
            assert any(refers_to(resource, mapping_id) for resource in allowed), mapping_id
    env = shepherd.function_env(api_id)[ENV_POOL_MAPPINGS]
    text = _json.dumps(env)
    for name in shepherd.construct.pools:
        assert f'\\"{name}\\":' in text, name  # every pool, mapped to ...
    assert all(mapping_id in text for mapping_id in mappings)  # ... its own mapping


def test_one_policy_per_role(shepherd: Synth, extended: Synth) -> None:
    """Every statement of a role sits in one policy resource: a stack holds 500 resources,
    and a policy per grant (the CDK's way under createNewPoliciesWithAddToRolePolicy) used
    44 of them at 6 pools."""
    for synth in (shepherd, extended):
        roles = synth.of_type("AWS::IAM::Role")
        attached: dict[str, int] = dict.fromkeys(roles, 0)
        for policy in synth.of_type("AWS::IAM::Policy").values():
            for role in policy["Properties"]["Roles"]:
                attached[role["Ref"]] += 1
        assert set(attached.values()) <= {0, 1}, {r: n for r, n in attached.items() if n > 1}
        assert sum(attached.values()) == len(synth.of_type("AWS::IAM::Policy"))
