"""A rate-limited pool through the deployed handlers (issue 26.1): `GET /pools` shows the
limit; the agent handler acknowledges a held task (a delayed copy is back in its queue, no
batch item failure, so waiting never counts towards maxReceiveCount) and counts `TasksHeld`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_stack import LambdaContext, Stack, sqs_event
from shepherd.settings import ENV_POOL_POLICIES


@pytest.fixture
def limited(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    from shepherd_handlers import runtime

    monkeypatch.setenv(
        ENV_POOL_POLICIES,
        json.dumps(
            {
                "inventory": {"RateLimit": {"PerSecond": 0.2, "Burst": 1}},
                "shipping": {"BatchSize": 1, "MaxConcurrency": 200},
            }
        ),
    )
    runtime.engine.cache_clear()
    return stack


def _order(i: int) -> dict[str, Any]:
    return {"order_id": f"o-{i}", "amount": 5, "items": [{"sku": "A", "qty": 1}]}


def test_get_pools_shows_each_pools_rate_limit(limited: Stack) -> None:
    status, _, pools = limited.api("GET", "/pools")
    assert status == 200
    by_name = {p["name"]: p for p in pools["items"]}
    assert by_name["inventory"]["rate_limit"] == {"per_second": 0.2, "burst": 1}
    assert by_name["payments"].get("rate_limit") is None
    # Each pool's event source as deployed (issue 23.7): its own settings, else the defaults.
    assert (by_name["shipping"]["batch_size"], by_name["shipping"]["max_concurrency"]) == (1, 200)
    assert (by_name["payments"]["batch_size"], by_name["payments"]["max_concurrency"]) == (10, 10)


def test_a_held_task_is_acknowledged_and_back_in_its_queue_with_a_delay(
    limited: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    from shepherd_handlers import agent

    for i in range(3):
        body = {"type": "order_fulfilment", "input": _order(i)}
        assert limited.api("POST", "/workflows", body=body)[0] == 202
    messages = limited.receive("inventory")
    assert len(messages) == 3
    reply = agent.handler(
        sqs_event(
            [(m["MessageId"], m["Body"]) for m in messages],
            "arn:aws:sqs:us-east-1:123456789012:inventory",
        ),
        LambdaContext(),
    )
    assert reply["batchItemFailures"] == []  # held tasks are acknowledged, not failed
    assert '"TasksHeld":[1.0,1.0]' in capsys.readouterr().out
    attrs = limited.clients["sqs"].get_queue_attributes(
        QueueUrl=limited.queues["inventory"].url,
        AttributeNames=["ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    assert int(attrs["ApproximateNumberOfMessagesDelayed"]) == 2  # the two held, delayed
