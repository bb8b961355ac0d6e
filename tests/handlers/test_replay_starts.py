"""No lost starts (issue 35.3): a start that failed waits in a queue and `shepherd
replay-starts` makes it, once: a replay of a start that was in fact made starts nothing new."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_stack import LambdaContext, Stack
from shepherd import schedules
from shepherd.settings import ENV_EVENT_OWNERS, ENV_SCHEDULE_OWNER
from shepherd_cli import lambda_kit
from shepherd_cli.starts import event_of, replay_starts
from support import ORDER

ACME = "arn:aws:iam::123456789012:role/acme-orders"
OWNER = "arn:aws:iam::123456789012:role/Ops"


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch, stack: Stack) -> Any:
    from shepherd_handlers import events, runtime

    monkeypatch.setenv(ENV_EVENT_OWNERS, json.dumps({"acme.orders": ACME}))
    monkeypatch.setenv(ENV_SCHEDULE_OWNER, OWNER)
    runtime.engine.cache_clear()
    return events


def _start_event(event_id: str, detail: dict[str, Any]) -> dict[str, Any]:
    return lambda_kit.eventbridge_event(
        "StartWorkflow",
        detail,
        source="acme.orders",
        account="123456789012",
        region="us-east-1",
        at="2026-12-06T17:00:00Z",
        resources=[],
        event_id=event_id,
    )


def _on_failure_record(event: dict[str, Any]) -> str:
    """What Lambda puts on an on-failure destination after its retries."""
    return json.dumps(
        {
            "version": "1.0",
            "timestamp": "2026-12-06T17:03:00.000Z",
            "requestContext": {
                "requestId": "e4b46cbf-b738-4f7c-bd6c-4e1b3d7a2f4e",
                "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:events:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": 3,
            },
            "requestPayload": event,
            "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
            "responsePayload": {"errorMessage": "StoreUnavailable"},
        }
    )


def _queue(stack: Stack, name: str, bodies: list[str]) -> str:
    sqs = stack.clients["sqs"]
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    return str(url)


def _invoke(events: Any, calls: list[dict[str, Any]]) -> Any:
    def invoke(event: dict[str, Any]) -> dict[str, Any] | None:
        calls.append(event)
        return events.handler(event, LambdaContext())  # type: ignore[no-any-return]

    return invoke


def test_an_event_without_a_key_starts_one_workflow_however_often_it_comes(
    events: Any, stack: Stack
) -> None:
    """Its key follows from its id: Lambda's retries and a replay return the same workflow;
    another event with the same content is another start."""
    detail = {"type": "order_fulfilment", "input": ORDER}
    first = events.handler(_start_event("id-1", detail), LambdaContext())
    again = events.handler(_start_event("id-1", detail), LambdaContext())
    other = events.handler(_start_event("id-2", detail), LambdaContext())
    assert first["created"] is True and again["created"] is False
    assert again["workflow_id"] == first["workflow_id"] != other["workflow_id"]
    assert events.start_key(None, "id-1") == "event:id-1"
    assert events.start_key("mine", "id-1") == "mine"


def test_replay_starts_makes_each_failed_start_once(events: Any, stack: Stack) -> None:
    made = _start_event("made-before", {"type": "order_fulfilment", "input": ORDER})
    # Its workflow was started, then the invocation failed (a timeout after the write).
    before = events.handler(made, LambdaContext())["workflow_id"]
    lost = _start_event("never-made", {"type": "order_fulfilment", "input": {**ORDER}})
    bad = _start_event("bad", {"type": "no_such_type", "input": {}})
    # A real firing of the example's own schedule (a forged one is refused: issue 35.1):
    # cron(0 2 * * ? *) in Europe/Paris fires at 01:00 UTC in December, with its Input.
    firing = schedules.firing_event(
        "provision_environment",
        "nightly-staging",
        {"env_name": "staging-nightly", "region": "eu-west-1", "size": "medium"},
        account="123456789012",
        region="us-east-1",
        scheduled_time="2026-12-06T01:00:00Z",
        execution_id="exec-1",
        schedule_arn="arn:aws:scheduler:us-east-1:123456789012:schedule/g/nightly-staging",
    )
    failures = _queue(
        stack,
        "start-failures",
        [
            _on_failure_record(made),
            json.dumps(lost),  # the rule target's DLQ holds the event itself
            _on_failure_record(bad),
            "not json",
        ],
    )
    dead_letters = _queue(stack, "schedule-dead-letters", [json.dumps(firing)])
    calls: list[dict[str, Any]] = []
    report = replay_starts(stack.clients["sqs"], [failures, dead_letters], _invoke(events, calls))
    assert (report.started, report.already, report.rejected, report.unreadable) == (2, 1, 1, 1)
    assert report.failed == 0 and report.messages == 5 and len(calls) == 4
    assert any(before in line and "already" in line for line in report.lines)
    # The scheduled workflow belongs to the schedule owner, who lists it.
    mine = stack.api("GET", "/workflows", caller=OWNER)[2]["items"]
    assert [w["idempotency_key"] for w in mine] == ["schedule:nightly-staging:2026-12-06T01:00:00Z"]
    # Replayed again (the same messages, were they redelivered): nothing new is started.
    again = _queue(stack, "again", [_on_failure_record(made), json.dumps(lost)])
    report = replay_starts(stack.clients["sqs"], [again], _invoke(events, []))
    assert (report.started, report.already) == (0, 2)
    # Answered messages are gone; the unreadable one is kept for a person to look at.
    sqs = stack.clients["sqs"]
    for url, left in ((failures, 1), (dead_letters, 0)):
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        kept = int(attrs["ApproximateNumberOfMessages"]) + int(
            attrs["ApproximateNumberOfMessagesNotVisible"]
        )
        assert kept == left


def test_a_start_that_fails_again_stays_in_its_queue(events: Any, stack: Stack) -> None:
    lost = _start_event("never-made", {"type": "order_fulfilment", "input": ORDER})
    url = _queue(stack, "start-failures", [_on_failure_record(lost)])
    report = replay_starts(stack.clients["sqs"], [url], lambda event: None)
    assert (report.failed, report.messages) == (1, 1)
    attrs = stack.clients["sqs"].get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"


def test_event_of_reads_every_shape_a_failure_takes() -> None:
    event = _start_event("x", {"type": "t"})
    assert event_of(_on_failure_record(event)) == event
    assert event_of(json.dumps(event)) == event
    assert event_of("[]") is None and event_of("{}") is None and event_of("nope") is None
