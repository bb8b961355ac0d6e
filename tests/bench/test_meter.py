"""The request hook on real requests to moto: units from the items it reads before and after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from shepherd_bench.meter import Meter
from shepherd_cli.resources import create_table

TABLE = "bench"


def s(text: str) -> dict[str, Any]:
    return {"S": text}


def n(number: int) -> dict[str, Any]:
    return {"N": str(number)}


def item(pk: str, sk: str, size: int, **extra: Any) -> dict[str, Any]:
    """An item of `size` bytes before `extra`: pk (2+len) + sk (2+len) + data (4+pad)."""
    pad = size - (2 + len(pk)) - (2 + len(sk)) - 4
    return {"pk": s(pk), "sk": s(sk), "data": s("x" * pad), **extra}


@pytest.fixture
def metered() -> Iterator[tuple[Meter, Any]]:
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        client = session.client("dynamodb")
        create_table(client, TABLE)
        meter = Meter(
            reader=lambda: boto3.session.Session(region_name="us-east-1").client("dynamodb")
        )
        meter.install(client.meta.events)
        yield meter, client


def test_a_put_of_3_5_kb_costs_4_wru(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    with meter.component("api"):
        client.put_item(TableName=TABLE, Item=item("a", "b", 3584))
    tally = meter.total()
    assert tally.wru == {"item put: create": 4}
    assert tally.requests == {"dynamodb.PutItem": 1}
    assert meter.tallies.keys() == {"api"}


def test_a_transactional_put_of_two_half_kb_items_costs_4_wru(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": item("WF#1", "#WF", 512)}},
            {"Put": {"TableName": TABLE, "Item": item("WF#1", "S#a", 512)}},
        ]
    )
    assert meter.total().total_wru == 4


def test_an_update_moving_the_watch_key_costs_1_plus_2(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    with meter.paused():
        client.put_item(
            TableName=TABLE,
            Item=item("WF#1", "#WF", 300, watch_shard=s("W#0"), due_at=n(1000)),
        )
    client.update_item(
        TableName=TABLE,
        Key={"pk": s("WF#1"), "sk": s("#WF")},
        UpdateExpression="SET due_at = :d",
        ExpressionAttributeValues={":d": n(5000)},
    )
    tally = meter.total()
    assert sum(tally.wru.values()) == 1
    assert tally.gsi_wru == {"watch move": 2}


def test_finishing_a_listed_workflow_removes_the_watch_entry_and_moves_its_status_keys(
    metered: tuple[Meter, Any],
) -> None:
    meter, client = metered
    live = item(
        "WF#1", "#WF", 300, status=s("RUNNING"), watch_shard=s("W#0"), due_at=n(1000),
        list_pk=s("OWNER#a#3"), list_sk=s("1#1"), type_sk=s("t#1#1"),
        status_sk=s("RUNNING#1#1"), type_status_sk=s("t#RUNNING#1#1"),
    )  # fmt: skip
    client.put_item(TableName=TABLE, Item=live)
    client.update_item(
        TableName=TABLE,
        Key={"pk": s("WF#1"), "sk": s("#WF")},
        UpdateExpression="SET #s = :s, status_sk = :a, type_status_sk = :b "
        "REMOVE watch_shard, due_at",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={
            ":s": s("SUCCEEDED"),
            ":a": s("SUCCEEDED#1#1"),
            ":b": s("t#SUCCEEDED#1#1"),
        },
        ReturnValues="ALL_NEW",
    )
    tally = meter.total()
    assert tally.wru == {"workflow put: create": 1, "workflow update: RUNNING->SUCCEEDED": 1}
    # the put added every index entry; the finish removed the watch entry and moved the two
    # status keys (delete + put each); the keys-only by_owner and by_type are not written
    assert tally.gsi_wru == {
        "watch add": 1,
        "by_owner add": 1,
        "by_status add": 1,
        "by_type add": 1,
        "by_type_status add": 1,
        "watch remove": 1,
        "by_status move": 2,
        "by_type_status move": 2,
    }


def test_a_failed_conditional_write_still_costs_1_wru(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    with meter.paused():
        client.put_item(TableName=TABLE, Item=item("WF#1", "S#a", 200, status=s("RUNNING")))
    with pytest.raises(ClientError):
        client.update_item(
            TableName=TABLE,
            Key={"pk": s("WF#1"), "sk": s("S#a")},
            UpdateExpression="SET #s = :new",
            ConditionExpression="#s = :old",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":new": s("RUNNING"), ":old": s("QUEUED")},
        )
    tally = meter.total()
    assert tally.wru == {"step update: condition failed": 1}
    assert tally.gsi_wru == {}
    assert tally.failed_writes == 1


def test_a_consistent_query_of_9_kb_costs_3_rru(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    with meter.paused():
        for sk in ("#WF", "S#a", "S#b"):
            client.put_item(TableName=TABLE, Item=item("WF#1", sk, 3072))
    with meter.component("agent"):
        got = client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": s("WF#1")},
            ConsistentRead=True,
        )
    assert len(got["Items"]) == 3
    tally = meter.tallies["agent"]
    assert tally.rru == {"query table": 3.0}
    assert tally.items_read == {"query table": 3}


def test_an_index_query_is_eventually_consistent_and_reads_only_keys(
    metered: tuple[Meter, Any],
) -> None:
    meter, client = metered
    with meter.paused():
        for i in range(3):
            client.put_item(
                TableName=TABLE,
                Item=item(f"WF#{i}", "#WF", 3000, watch_shard=s("W#0"), due_at=n(i)),
            )
    client.query(
        TableName=TABLE,
        IndexName="watch",
        KeyConditionExpression="watch_shard = :s AND due_at <= :t",
        ExpressionAttributeValues={":s": s("W#0"), ":t": n(1)},
    )
    tally = meter.total()
    assert tally.items_read == {"query index watch": 2}
    assert tally.rru == {"query index watch": 0.5}  # two tiny keys-only entries


def test_sqs_and_eventbridge_requests() -> None:
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        meter = Meter(reader=lambda: None)
        meter.install(session.events)  # every client made from the session afterwards
        sqs, events = session.client("sqs"), session.client("events")
        url = sqs.create_queue(QueueName="shepherd-cloud")["QueueUrl"]
        entries = [{"Id": str(i), "MessageBody": "x" * 7 * 1024} for i in range(10)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
        events.put_events(
            Entries=[
                {"Source": "shepherd", "DetailType": "WorkflowStarted", "Detail": json.dumps({})}
            ]
        )
        tally = meter.total()
        assert tally.sqs["SendMessageBatch"] == 2  # 70 KB: two 64 KB chunks, one call
        assert tally.sqs["CreateQueue"] == 1
        assert tally.sqs_messages == {"shepherd-cloud": 10}
        assert tally.events == {"WorkflowStarted": 1}
        meter.uninstall()
        sqs2 = session.client("sqs")
        sqs2.send_message(QueueUrl=url, MessageBody="after uninstall")
        assert meter.total().sqs_messages == {"shepherd-cloud": 10}
