"""The stream consumer: moto's DynamoDB stream of a real run, through the real handler, puts
on the bus exactly the events the writers announce, each with its deterministic id."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from aws_stack import LambdaContext, Stack

ORDER = {"order_id": "o-9", "customer": "ada", "amount": 10, "items": [{"sku": "A", "qty": 1}]}


def stream_records(stack: Stack) -> list[dict[str, Any]]:
    """Every record of the table's stream so far, as the event source mapping delivers them."""
    ddb = stack.clients["dynamodb"]
    arn = ddb.describe_table(TableName="shepherd")["Table"]["LatestStreamArn"]
    import boto3

    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            records += page["Records"]
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    for record in records:
        record["eventSourceARN"] = arn
    return records


def _identity(detail_type: str, detail: dict[str, Any]) -> tuple[Any, ...]:
    return (detail_type, detail.get("workflow_id"), detail.get("step"), detail.get("attempt"))


def test_the_stream_consumer_publishes_what_the_writers_announce(stack: Stack) -> None:
    from shepherd_handlers import stream

    stack.api(
        "POST",
        "/workflows",
        body={
            "type": "order_fulfilment",
            "input": {**ORDER, "faults": {"ship_order": {"mode": "permanent"}}},
        },
    )
    stack.run_agents()
    written = [(e["detail-type"], e["detail"]) for e in stack.published()]
    assert written and all("event_id" not in d for _, d in written)
    records = stream_records(stack)
    reply = stream.handler({"Records": records}, LambdaContext())
    assert reply == {"batchItemFailures": []}
    derived = [(e["detail-type"], e["detail"]) for e in stack.published()[len(written) :]]
    assert Counter(_identity(*e) for e in derived) == Counter(_identity(*e) for e in written)
    assert all(d["event_id"] and d["sequence"] for _, d in derived)
    # A redelivered batch (the mapping retries) publishes the same ids again: a subscriber
    # deduplicates on them.
    stream.handler({"Records": records}, LambdaContext())
    again = [e["detail"]["event_id"] for e in stack.published()[len(written) + len(derived) :]]
    assert again == [d["event_id"] for _, d in derived]


def test_a_record_that_cannot_be_published_fails_alone(stack: Stack, monkeypatch: Any) -> None:
    from shepherd.errors import DeliveryError
    from shepherd_handlers import stream
    from shepherd_handlers.runtime import engine

    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    stack.run_agents()
    records = stream_records(stack)
    calls: list[int] = []

    def flaky(events: Any) -> None:
        calls.append(len(events))
        if len(calls) == 1:
            raise DeliveryError("throttled")

    monkeypatch.setattr(engine().publisher, "publish", flaky)
    reply = stream.handler({"Records": records}, LambdaContext())
    (failure,) = reply["batchItemFailures"]
    first_announcing = next(r for r in records if stream.events_of(stream.change_of_raw(r)))
    assert failure["itemIdentifier"] == first_announcing["dynamodb"]["SequenceNumber"]
    assert len(calls) > 1  # its neighbours were still published
    assert json.dumps(reply)
