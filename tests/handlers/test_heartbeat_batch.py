"""POST /tasks/heartbeats: an external worker holding many attempts keeps them alive in one
request (issue 23.7), each entry answered as POST /tasks/heartbeat would have answered it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_stack import LambdaContext, Stack, rest_event
from shepherd.clock import SystemClock
from shepherd.limits import MAX_HEARTBEAT_BATCH, MAX_HEARTBEAT_BATCH_BODY_BYTES
from support import ORDER


def _post(body: Any = None, raw: str | None = None) -> tuple[int, Any]:
    from shepherd_handlers import callbacks

    event = rest_event(
        "POST", "/tasks/heartbeats", resource="/tasks/heartbeats", body=body, raw_body=raw
    )
    reply = callbacks.handler(event, LambdaContext())
    return int(reply["statusCode"]), json.loads(reply["body"])


def _waiting(stack: Stack, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        _, _, accepted = stack.api(
            "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
        )
        ids.append(str(accepted["workflow_id"]))
    stack.run_agents()
    return ids


def _ship(stack: Stack, workflow_id: str) -> dict[str, Any]:
    view = stack.api("GET", f"/workflows/{workflow_id}")[2]
    return dict(next(s for s in view["steps"] if s["name"] == "ship_order"))


def test_each_heartbeat_is_answered_on_its_own_and_a_refusal_changes_nothing_else(
    stack: Stack, callback_ship: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _waiting(stack, 2)
    one, two = callback_ship
    now = [SystemClock().now_ms() + 5_000]
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: now[0])
    forged = one[:-4] + ("AAAA" if not one.endswith("AAAA") else "BBBB")
    status, reply = _post(
        {
            "heartbeats": [
                {"token": one, "details": {"done": 3}},
                {"token": forged, "details": {"done": 99}},
                {"token": two, "details": {"done": 7}},
                {"token": one, "details": {"done": 4}},  # the same token again: too soon
            ]
        }
    )
    assert status == 200, reply
    results = reply["results"]
    assert [r["status"] for r in results] == [200, 404, 200, 429]
    assert results[0]["task"]["workflow_id"] == first
    assert results[2]["task"]["workflow_id"] == second
    assert results[1]["error"]["code"] == "TaskTokenInvalid"
    assert results[3]["error"]["code"] == "HeartbeatTooSoon"
    # What was accepted is recorded; neither refusal wrote anything.
    assert _ship(stack, first)["details"] == {"done": 3}
    assert _ship(stack, second)["details"] == {"done": 7}
    assert _ship(stack, first)["status"] == _ship(stack, second)["status"] == "WAITING"
    # A second later the same token is accepted again.
    now[0] += 1_000
    status, reply = _post({"heartbeats": [{"token": one, "details": {"done": 5}}]})
    assert [r["status"] for r in reply["results"]] == [200]
    assert _ship(stack, first)["details"] == {"done": 5}


def test_a_batch_over_its_caps_is_refused_whole_naming_the_field(
    stack: Stack, callback_ship: list[str]
) -> None:
    (workflow_id,) = _waiting(stack, 1)
    (token,) = callback_ship
    status, reply = _post({"heartbeats": [{"token": token}] * (MAX_HEARTBEAT_BATCH + 1)})
    assert status == 400
    assert reply["error"]["field"] == "heartbeats"
    status, reply = _post({"heartbeats": []})
    assert status == 400 and reply["error"]["field"] == "heartbeats"
    big = {"heartbeats": [{"token": token, "details": "x" * MAX_HEARTBEAT_BATCH_BODY_BYTES}]}
    status, reply = _post(raw=json.dumps(big))
    assert status == 413, reply
    status, reply = _post({"heartbeats": [{"token": token, "detail": 1}]})  # misspelt
    assert status == 400 and reply["error"]["field"] == "heartbeats[0].detail"
    assert _ship(stack, workflow_id)["details"] is None  # nothing of these was recorded
