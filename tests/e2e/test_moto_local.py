"""The local stack's moto server applies each DynamoDB request whole, as DynamoDB does.

moto creates an item an UpdateItem names before applying the update to it, and answers in
threads: a Query in between read a step item with keys only (a 500 from GET /workflows/{id}
in `make demo` once step items came with their first write). Both tests widen that window
(moto's update executor sleeps) and read the partition while items are being created: plain
moto shows the half-made items, `shepherd_cli.moto_local`'s serialized requests never do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
from moto.dynamodb.responses import DynamoHandler
from moto.server import ThreadedMotoServer
from shepherd_cli.local import free_port
from shepherd_cli.moto_local import serialized

TABLE = "moto-local-atomicity"
CREATED = 6


@pytest.fixture
def slow_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    real = UpdateExpressionExecutor.execute

    def slow(self: Any, node: Any = None) -> None:
        time.sleep(0.05)  # between moto's keys-only item and the update applied to it
        real(self, node)

    monkeypatch.setattr(UpdateExpressionExecutor, "execute", slow)


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    port = free_port()
    server = ThreadedMotoServer("127.0.0.1", port, verbose=False)
    server.start()
    client = boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    client.create_table(
        TableName=TABLE,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        yield client
    finally:
        client.delete_table(TableName=TABLE)
        server.stop()


def _half_made_items_read(client: Any) -> int:
    """Create step items by UpdateItem (as a claim does) while reading their partition."""

    def create() -> None:
        for i in range(CREATED):
            client.update_item(
                TableName=TABLE,
                Key={"pk": {"S": "WF#1"}, "sk": {"S": f"S#{i}"}},
                UpdateExpression="SET #s = :s, attempt = :a",
                ConditionExpression="attribute_not_exists(pk)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": "RUNNING"}, ":a": {"N": "1"}},
            )

    writer = threading.Thread(target=create)
    writer.start()
    half_made = 0
    deadline = time.monotonic() + 30
    while writer.is_alive() and time.monotonic() < deadline:
        items = client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "WF#1"}},
            ConsistentRead=True,
        )["Items"]
        half_made += sum("status" not in item for item in items)
    writer.join(timeout=30)
    final = client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "WF#1"}},
    )["Items"]
    assert len(final) == CREATED and all("status" in item for item in final)
    return half_made


@pytest.mark.usefixtures("slow_updates")
def test_plain_moto_lets_a_read_see_an_item_an_update_is_still_making(dynamodb: Any) -> None:
    """The gap (if moto closes it, this fails and `moto_local` can go)."""
    assert _half_made_items_read(dynamodb) > 0


@pytest.mark.usefixtures("slow_updates")
def test_the_local_stacks_moto_never_shows_a_half_made_item(
    monkeypatch: pytest.MonkeyPatch, dynamodb: Any
) -> None:
    monkeypatch.setattr(DynamoHandler, "call_action", serialized(DynamoHandler.call_action))
    assert _half_made_items_read(dynamodb) == 0
