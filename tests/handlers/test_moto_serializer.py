"""The handler tests' shortcut through moto's DynamoDB reply serializer
(`aws_stack.plain_attribute_values`, issue 36) writes the bytes moto's own serializer writes:
every attribute type, nested, through every read the engine makes (GetItem, Query, Scan,
BatchGetItem, a write's ALL_OLD return, and the stream's GetRecords)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_stack import _UNSURE, _plain
from moto import mock_aws
from moto.core.serialize import BaseJSONSerializer

ITEM: dict[str, Any] = {
    "pk": {"S": "wf#1"},
    "sk": {"S": "wf"},
    "empty": {"S": ""},
    "unicode": {"S": 'ünïcødé ✓ "quoted" \\ back'},
    "n": {"N": "-12.500"},
    "big": {"N": "123456789012345678901234567890"},
    "b": {"B": b"\x00\x01\xffbinary"},
    "yes": {"BOOL": True},
    "no": {"BOOL": False},
    "null": {"NULL": True},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"\x00", b"\x01\x02"]},
    "m": {
        "M": {
            "inner": {"S": "x"},
            "deep": {"M": {"l": {"L": [{"N": "1"}, {"B": b"\x07"}, {"M": {}}, {"L": []}]}}},
            "empty": {"M": {}},
        }
    },
    "l": {"L": [{"S": "a"}, {"NULL": True}, {"SS": ["z"]}, {"BOOL": False}]},
}


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="t",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        client.put_item(TableName="t", Item=ITEM)
        yield client


def _bodies(client: Any) -> list[Any]:
    """Each read's raw reply body, as the wire carried it (the stream's records parsed, without
    the next iterator, which is new each time)."""
    bodies: list[Any] = []

    def keep(response_dict: dict[str, Any], **_: Any) -> None:
        bodies.append(response_dict["body"])

    client.meta.events.register("before-parse.*.*", keep)
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    streams.meta.events.register("before-parse.*.*", keep)
    try:
        key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
        assert client.get_item(TableName="t", Key=key)["Item"] == ITEM
        assert client.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": ITEM["pk"]},
        )["Items"] == [ITEM]
        assert client.scan(TableName="t")["Items"] == [ITEM]
        got = client.batch_get_item(RequestItems={"t": {"Keys": [key]}})
        assert got["Responses"]["t"] == [ITEM]
        old = client.put_item(TableName="t", Item=ITEM, ReturnValues="ALL_OLD")
        assert old["Attributes"] == ITEM
        arn = client.describe_table(TableName="t")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator, Limit=2)["Records"]
        assert records[0]["dynamodb"]["NewImage"] == ITEM
        assert records[1]["dynamodb"]["OldImage"] == ITEM
    finally:
        client.meta.events.unregister("before-parse.*.*", keep)
        streams.meta.events.unregister("before-parse.*.*", keep)
    reads = bodies[:5]
    records_body = json.loads(bodies[-1])
    records_body.pop("NextShardIterator")
    return [*reads, records_body]


def test_the_shortcut_writes_the_bytes_moto_writes(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    shortcut = BaseJSONSerializer._serialize_type_structure
    assert hasattr(shortcut, "moto_own"), "the handler tests run with the shortcut on"
    # Every attribute of the item takes the shortcut (none is left to moto's serializer).
    for value in ITEM.values():
        assert _plain(value, lambda b: b) is not _UNSURE, value
    with_shortcut = _bodies(dynamodb)
    monkeypatch.setattr(BaseJSONSerializer, "_serialize_type_structure", shortcut.moto_own)
    moto_own = _bodies(dynamodb)
    assert len(with_shortcut) == len(moto_own) == 6
    assert with_shortcut == moto_own
