"""The event relay: moto's DynamoDB stream of a real run, through the real handler (fed as the
event source mapping feeds it), puts each lifecycle event on the bus, at least once, each with
its deterministic id; a failure is contained to its record; a writer that dies right after
its write still gets its event out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_stack import LambdaContext, Stack

ORDER = {"order_id": "o-9", "customer": "ada", "amount": 10, "items": [{"sku": "A", "qty": 1}]}


def stream_records(stack: Stack) -> list[dict[str, Any]]:
    """Every record of the table's stream so far, as the event source mapping delivers them
    (before its filters)."""
    import boto3
    from shepherd_cli.streams import StreamReader, stream_arn

    reader = StreamReader(
        boto3.client("dynamodbstreams", region_name="us-east-1"),
        stream_arn(stack.clients["dynamodb"], "shepherd"),
    )
    return reader.read()


# What a small order naming no remind_at announces between its start and its end.
SKIPS = ["StepSkipped"] * 3


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["detail-type"] for e in events]


def test_a_run_s_events_reach_the_bus_from_the_stream_alone(stack: Stack) -> None:
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
    assert stack.published(relay=False) == []  # no writer publishes
    records = stream_records(stack)
    reply = stream.handler({"Records": records}, LambdaContext())
    assert reply == {"batchItemFailures": []}
    events = stack.published(relay=False)
    assert _types(events) == [
        "WorkflowStarted",
        "StepSkipped",  # a small order's fraud review
        "StepFailed",
        "StepCompensated",
        "StepCompensated",
        "StepCompensated",
        "WorkflowCompensated",
    ]
    details = [e["detail"] for e in events]
    assert all(d["event_id"] and d["sequence"] for d in details)
    sequences = [int(d["sequence"]) for d in details]
    assert sequences == sorted(sequences)  # one workflow's events in the order of its writes
    # A redelivered batch (the mapping retries) publishes the same ids again: a subscriber
    # deduplicates on them.
    stream.handler({"Records": records}, LambdaContext())
    again = [e["detail"]["event_id"] for e in stack.published(relay=False)[len(events) :]]
    assert again == [d["event_id"] for d in details]


def test_a_record_that_cannot_be_published_fails_alone(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.adapters.dynamodb import change_of_record
    from shepherd.changes import events_of
    from shepherd.errors import DeliveryError
    from shepherd_handlers import stream
    from shepherd_handlers.runtime import engine

    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    stack.run_agents()
    records = stream_records(stack)
    announcing = [r for r in records if events_of(change_of_record(r))]
    assert len(announcing) >= 2
    poisoned = {e.detail["event_id"] for e in events_of(change_of_record(announcing[0]))}
    real = engine().publisher.publish
    out: list[str] = []

    def flaky(events: Any) -> None:  # any call carrying the first record's events fails
        if poisoned & {e.detail["event_id"] for e in events}:
            raise DeliveryError("throttled")
        real(events)
        out.extend(e.detail["event_id"] for e in events)

    monkeypatch.setattr(engine().publisher, "publish", flaky)
    reply = stream.handler({"Records": records}, LambdaContext())
    (failure,) = reply["batchItemFailures"]
    assert failure["itemIdentifier"] == announcing[0]["dynamodb"]["SequenceNumber"]
    # Its neighbours were still published, each once.
    others = [e.detail["event_id"] for r in announcing[1:] for e in events_of(change_of_record(r))]
    assert out == others
    assert json.dumps(reply)


def test_events_go_out_ten_to_a_call_across_records(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay packs consecutive records' events into PutEvents calls of up to 10 entries
    (issue 23.7): one call per record before."""
    from shepherd.adapters.dynamodb import change_of_record
    from shepherd.changes import events_of
    from shepherd_handlers import stream

    for n in range(8):
        order = {**ORDER, "order_id": f"o-{n}"}
        stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": order})
    stack.run_agents()
    records = stream_records(stack)
    announced = sum(len(events_of(change_of_record(r))) for r in records)
    assert announced >= 16
    calls: list[int] = []
    real = stack.clients["events"].put_events

    def counted(**kwargs: Any) -> Any:
        calls.append(len(kwargs["Entries"]))
        return real(**kwargs)

    from shepherd_handlers.runtime import engine

    monkeypatch.setattr(engine().publisher._client, "put_events", counted)
    reply = stream.handler({"Records": records}, LambdaContext())
    assert reply["batchItemFailures"] == []
    assert sum(calls) == announced and max(calls) <= 10
    # Packed: a record announces at most 2 here, so every call but the last carries 9 or 10.
    assert len(calls) <= announced // 9 + 1, calls
    assert len(calls) < len([r for r in records if events_of(change_of_record(r))])


def test_the_mapping_retries_a_failed_record_until_its_event_is_out(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Lambda's mapping does: the failed record and the ones after it come again; nothing
    announced is lost, and what was published before the failure is not published twice."""
    from shepherd.errors import DeliveryError
    from shepherd_handlers.runtime import engine

    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    stack.run_agents()
    real = engine().publisher.publish
    down = [True]

    def flaky(events: Any) -> None:
        if down[0] and any(e.detail_type == "WorkflowSucceeded" for e in events):
            raise DeliveryError("throttled")
        real(events)

    monkeypatch.setattr(engine().publisher, "publish", flaky)
    # A small order naming no remind_at skips its fraud review and its reminder's two steps.
    before = ["WorkflowStarted", *SKIPS]
    stack.relay()  # the finish fails
    assert _types(stack.published(relay=False)) == before
    stack.relay()  # and fails again
    assert _types(stack.published(relay=False)) == before
    down[0] = False
    stack.relay()  # then goes out
    assert _types(stack.published(relay=False)) == [*before, "WorkflowSucceeded"]
    assert stack.stream.failed == []


def test_a_writer_killed_right_after_its_write_still_gets_its_event_delivered(
    stack: Stack,
) -> None:
    """The agent that finishes the workflow dies the instant its write lands (before it could
    send or publish anything): the finish is announced all the same, from the table."""
    from shepherd.engine.executor import Executor

    class Killed(BaseException):
        """The sandbox dies: nothing after the write runs."""

    real = Executor.workflow

    def write_then_die(self: Executor, state: Any, write: Any) -> bool:
        won = real(self, state, write)
        if won and state is not None and state.workflow.status.terminal:
            raise Killed
        return won

    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Executor, "workflow", write_then_die)
        with pytest.raises(Killed):
            stack.run_agents()
    view = stack.api("GET", "/workflows")[2]["items"][0]
    assert view["status"] == "SUCCEEDED"  # the write landed; its writer never got further
    assert _types(stack.published()) == ["WorkflowStarted", *SKIPS, "WorkflowSucceeded"]


def test_what_the_relay_gave_up_on_is_replayed_from_its_failure_queue(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lambda's on-failure message for a stream names the batch (shard, first and last
    sequence number), not its records: `shepherd events replay` reads them back."""
    from shepherd_cli import main as cli

    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    stack.run_agents()
    records = stream_records(stack)
    arn = records[0]["eventSourceARN"]
    sqs = stack.clients["sqs"]
    queue = sqs.create_queue(QueueName="relay-failures")["QueueUrl"]
    import boto3

    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    batch = {
        "shardId": shard["ShardId"],
        "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
        "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
        "streamArn": arn,
        "batchSize": len(records),
    }
    sqs.send_message(
        QueueUrl=queue,
        MessageBody=json.dumps({"version": "1.0", "DDBStreamBatchInfo": batch}),
    )
    assert cli.main(["events", "replay", "--queue", queue, "--bus", "shepherd-bus"]) == 0
    assert f"replayed {len(records)} stream records from 1 failure messages" in (
        capsys.readouterr().out
    )
    assert _types(stack.published(relay=False)) == ["WorkflowStarted", *SKIPS, "WorkflowSucceeded"]
    assert "Messages" not in sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0)
