"""Least privilege: each function's role, statement by statement."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import (
    Synth,
    actions,
    allowed_on,
    flatten,
    granted,
    iam_matches,
    index_resource,
    queue_arn_of,
    refers_to,
    render,
    resources,
)
from shepherd.topology import TABLE

RECEIVE = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility")
# What a pool's event source mapping needs of its function's role (Lambda's SQS execution role).
CONSUME = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
# Actions that take no resource, and the function allowed to call them on Resource '*'.
STAR_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
STAR_API_ACTIONS = {"lambda:ListEventSourceMappings"}


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
                star = STAR_ACTIONS | (STAR_API_ACTIONS if name in ("api", "supervisor") else set())
                assert set(actions(statement)) <= star, (name, statement)
            assert "index/*" not in flatten(statement), (name, statement)
            assert not {"dynamodb:Scan", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} & set(
                actions(statement)
            )


TICK_SENDERS = {"supervisor", "api", "events"}


def test_every_engine_function_reads_writes_the_table_and_sends_and_none_publishes(
    shepherd: Synth,
) -> None:
    table = {"Fn::GetAtt": [_table_id(shepherd), "Arn"]}
    for name, fn_id in shepherd.function_ids().items():
        statements = shepherd.statements(fn_id)
        for action in (
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        ):
            assert table in list(granted(statements, action)), (name, action)
        # The engine writes no ConditionCheck item (test_infra_iam_calls.py fails on a grant
        # no call uses).
        assert not list(granted(statements, "dynamodb:ConditionCheckItem")), name
        for pool in shepherd.construct.pools.values():
            queue, dlq = queue_arn_of(shepherd, pool.queue), queue_arn_of(shepherd, pool.dlq)
            assert allowed_on(shepherd, statements, "sqs:SendMessage", queue), (name, queue)
            assert not allowed_on(shepherd, statements, "sqs:SendMessage", dlq), (name, dlq)
        sent = [flatten(r) for r in granted(statements, "sqs:SendMessage")]
        failures = shepherd.logical_id(shepherd.construct.relay.failures)
        ticks = shepherd.logical_id(shepherd.construct.supervisor.ticks)
        assert not any(failures in r for r in sent), name  # the relay's alone
        assert any(ticks in r for r in sent) == (name in TICK_SENDERS), name
        assert list(granted(statements, "events:PutEvents")) == [], name  # the relay does


def test_only_the_relay_publishes_and_it_touches_nothing_but_its_stream(shepherd: Synth) -> None:
    relay = shepherd.construct.relay
    statements = shepherd.statements(shepherd.logical_id(relay.function))
    bus = {"Fn::GetAtt": [shepherd.logical_id(shepherd.construct.events.bus), "Arn"]}
    assert list(granted(statements, "events:PutEvents")) == [bus]
    stream = {"Fn::GetAtt": [_table_id(shepherd), "StreamArn"]}
    for action in ("dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:DescribeStream"):
        assert list(granted(statements, action)) == [stream], action
    for action in ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query", *RECEIVE):
        assert not list(granted(statements, action)), action
    # It keeps each event it published in the workflow's history: PutItem on the table, and
    # only on items whose partition key is EV#<id> (the condition IAM evaluates per item).
    puts = [st for st in statements if "dynamodb:PutItem" in actions(st)]
    assert len(puts) == 1 and resources(puts[0]) == [{"Fn::GetAtt": [_table_id(shepherd), "Arn"]}]
    assert puts[0]["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["EV#*"]}}
    failures = {"Fn::GetAtt": [shepherd.logical_id(relay.failures), "Arn"]}
    assert list(granted(statements, "sqs:SendMessage")) == [failures]


def test_api_cannot_receive_or_read_the_watch_index(shepherd: Synth) -> None:
    table_id = _table_id(shepherd)
    statements = shepherd.statements(shepherd.logical_id(shepherd.construct.api.api_function))
    for action in RECEIVE:
        assert not list(granted(statements, action)), action
    assert sorted(_index_queries(statements)) == sorted(
        flatten(index_resource(table_id, index.name))
        for index in (*TABLE.list_indexes, TABLE.inbox_index, TABLE.key_index)
    )
    assert index_resource(table_id, TABLE.watch_index.name) not in list(
        granted(statements, "dynamodb:Query")
    )


@pytest.mark.parametrize("part", ["callbacks", "events"])
def test_callbacks_and_events_functions_query_no_index_and_receive_nothing(
    shepherd: Synth, part: str
) -> None:
    """The events function queries by_key alone (a Signal event naming a match, issue 37.3);
    the callbacks function no index."""
    statements = shepherd.statements(shepherd.function_ids()[part])
    table_id = _table_id(shepherd)
    wanted = [] if part == "callbacks" else [index_resource(table_id, TABLE.key_index.name)]
    assert sorted(_index_queries(statements)) == sorted(flatten(i) for i in wanted)
    for action in RECEIVE:
        assert not list(granted(statements, action)), action


def test_agents_consume_only_their_own_queue_and_query_no_index(shepherd: Synth) -> None:
    queues = _queue_ids(shepherd)
    dlqs = {shepherd.logical_id(pool.dlq) for pool in shepherd.construct.pools.values()}
    for name, pool in shepherd.construct.pools.items():
        statements = shepherd.statements(shepherd.logical_id(pool.function))
        for action in CONSUME:
            assert list(granted(statements, action)) == [{"Fn::GetAtt": [queues[name], "Arn"]}], (
                name,
                action,
            )
        # Its own queue only: a record it leaves unclaimed comes back at once.
        assert list(granted(statements, "sqs:ChangeMessageVisibility")) == [
            {"Fn::GetAtt": [queues[name], "Arn"]}
        ], name
        assert _index_queries(statements) == [], name
        assert not any(refers_to(r, dlq) for s in statements for r in resources(s) for dlq in dlqs)
        others = [p for p in shepherd.construct.pools.values() if p is not pool]
        for other in others:  # the patterns it may send to do not let it receive anything
            arn = queue_arn_of(shepherd, other.queue)
            assert not any(allowed_on(shepherd, statements, a, arn) for a in CONSUME), (name, arn)


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
                # The relay reads the stream (ListStreams takes no resource) and puts its
                # history items (EV#*, checked above).
                assert "dynamodb:Query" not in text and "dynamodb:GetItem" not in text
                continue
            assert "dynamodb:" not in text, policy


def test_scheduler_role_invokes_only_the_supervisor(shepherd: Synth) -> None:
    fn_id = shepherd.logical_id(shepherd.construct.supervisor.function)
    schedule = shepherd.resources[shepherd.logical_id(shepherd.construct.supervisor.schedule)]
    role_id = schedule["Properties"]["Target"]["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in shepherd.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert {a for s in statements for a in actions(s)} == {"lambda:InvokeFunction"}
    assert all(refers_to(r, fn_id) for s in statements for r in resources(s))


def test_only_the_api_and_the_supervisor_switch_pools_and_only_their_own_mappings(
    shepherd: Synth,
) -> None:
    """The API (pause, resume) and the supervisor (holding paused pools paused after a deploy)
    find a pool's mapping by its function's name (no list of ids in any environment) and may
    update only mappings of this deployment's pool functions."""
    from shepherd.settings import ENV_POOL_FUNCTION_PREFIX, ENV_POOL_MAPPINGS

    api_id = shepherd.logical_id(shepherd.construct.api.api_function)
    switchers = {api_id, shepherd.logical_id(shepherd.construct.supervisor.function)}
    for name, fn_id in shepherd.function_ids().items():
        statements = shepherd.statements(fn_id)
        updates = [s for s in statements if "lambda:UpdateEventSourceMapping" in actions(s)]
        if fn_id not in switchers:
            assert updates == [], name
            assert not list(granted(statements, "lambda:ListEventSourceMappings")), name
            continue
        (update,) = updates
        (mappings,) = resources(update)
        assert render(mappings).endswith(":event-source-mapping:*")
        (function_pattern,) = update["Condition"]["ArnLike"].values()
        assert list(update["Condition"]["ArnLike"]) == ["lambda:FunctionArn"]
        prefix = render(shepherd.function_env(api_id)[ENV_POOL_FUNCTION_PREFIX])
        for pool_name, pool in shepherd.construct.pools.items():
            function_name = render(
                shepherd.props(shepherd.logical_id(pool.function))["FunctionName"]
            )
            assert function_name == prefix + pool_name  # what the API looks the mapping up by
            arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
            assert iam_matches(render(function_pattern), arn), arn
        for other in ("api", "callbacks", "events", "supervisor"):
            other_name = render(
                shepherd.props(shepherd.function_ids()[other]).get("FunctionName", "")
            )
            assert not other_name, other  # CloudFormation names them: outside the pattern
    for fn_id in shepherd.function_ids().values():
        assert ENV_POOL_MAPPINGS not in shepherd.function_env(fn_id)
