"""Callbacks through the handler: tokens (forged 404 in any state, stale 409 only when
genuine), the agents' caps on outputs, details and errors, strict JSON."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from aws_stack import PAYLOAD_BUCKET, Stack
from shepherd import limits
from shepherd.limits import (
    MAX_CALLBACK_BODY_BYTES,
    MAX_DETAILS_BYTES,
    MAX_ERROR_CAUSE,
    MAX_ERROR_NAME,
    MAX_JSON_DEPTH,
)
from support import ORDER

KB = 1024


def waiting(stack: Stack) -> str:
    _, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    stack.run_agents()
    return str(accepted["workflow_id"])


def ship(stack: Stack, workflow_id: str) -> dict[str, Any]:
    view = stack.api("GET", f"/workflows/{workflow_id}")[2]
    return dict(next(s for s in view["steps"] if s["name"] == "ship_order"))


def forge(token: str) -> str:
    """The same attempt's coordinates with another secret."""
    return token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")


def raw_callback(token: str, action: str, raw: str) -> tuple[int, dict[str, Any]]:
    from aws_stack import LambdaContext, rest_event
    from shepherd.routes import TASK_TOKEN_HEADER
    from shepherd_handlers import callbacks

    event = rest_event(
        "POST",
        f"/tasks/{action}",
        resource=f"/tasks/{action}",
        headers={TASK_TOKEN_HEADER: token},
        raw_body=raw,
    )
    reply = callbacks.handler(event, LambdaContext())
    return int(reply["statusCode"]), json.loads(reply["body"])


def test_a_290_kb_heartbeat_then_a_290_kb_success_are_kept_by_reference(
    stack: Stack, callback_ship: list[str]
) -> None:
    wf = waiting(stack)
    (token,) = callback_ship
    big = "x" * (290 * KB)
    code, _ = stack.callback(token, "heartbeat", {"details": {"log": big}})
    assert code == 200
    step = ship(stack, wf)
    # Large details are in the payload bucket; the view links them instead of carrying them.
    assert step["details"] is None and step["details_ref"]["size"] > 290 * KB
    details = json.dumps({"log": big}, separators=(",", ":")).encode()
    assert step["details_ref"]["sha256"] == hashlib.sha256(details).hexdigest()
    code, reply = stack.callback(token, "success", {"output": {"label": big, "tracking": "T"}})
    assert code == 200 and reply["status"] == "SUCCEEDED"
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}")[2]
    assert view["status"] == "SUCCEEDED"
    link = view["output_ref"]["ship_order"]
    output = json.dumps({"label": big, "tracking": "T"}, separators=(",", ":")).encode()
    assert link["size"] == len(output) and link["sha256"] == hashlib.sha256(output).hexdigest()
    assert "ship_order" not in view["output"]  # small outputs inline, large ones linked
    assert view["output"]["reserve_inventory"] is not None
    s3 = stack.clients["s3"]
    listed = s3.list_objects_v2(Bucket=PAYLOAD_BUCKET, Prefix=f"wf/{wf}/step/ship_order/1/")
    keys = sorted(o["Key"].split("/")[5] for o in listed["Contents"])
    assert keys == ["details", "output"]


def test_a_callback_body_over_its_cap_is_413_and_the_attempt_still_completes(
    stack: Stack, callback_ship: list[str]
) -> None:
    wf = waiting(stack)
    (token,) = callback_ship
    big = "x" * MAX_CALLBACK_BODY_BYTES
    code, reply = stack.callback(token, "heartbeat", {"details": {"log": big}})
    assert code == 413 and reply["error"]["code"] == "BodyTooLarge", reply
    code, reply = stack.callback(token, "success", {"output": {"label": big}})
    assert code == 413 and reply["error"]["code"] == "BodyTooLarge", reply
    assert ship(stack, wf)["status"] == "WAITING"
    # The workflow still reads, and the attempt still completes normally.
    code, reply = stack.callback(token, "success", {"output": {"tracking": "T-1"}})
    assert code == 200 and reply["status"] == "SUCCEEDED"
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}")
    assert view[0] == 200 and view[2]["status"] == "SUCCEEDED"


def test_details_over_their_cap_are_413_and_write_nothing(
    stack: Stack, callback_ship: list[str]
) -> None:
    wf = waiting(stack)
    (token,) = callback_ship
    details = {"log": "x" * (MAX_DETAILS_BYTES + 1)}
    assert len(json.dumps({"details": details})) < MAX_CALLBACK_BODY_BYTES  # passes the body cap
    code, reply = stack.callback(token, "heartbeat", {"details": details})
    assert code == 413 and reply["error"]["code"] == "DetailsTooLarge", reply
    assert reply["error"]["field"] == "details"
    step = ship(stack, wf)
    assert step["status"] == "WAITING" and step["attempt"] == 1
    code, _ = stack.callback(token, "heartbeat", {"details": {"log": "fits"}})
    assert code == 200


def test_an_output_over_its_cap_is_413_and_fails_the_attempt_for_good(
    stack: Stack, callback_ship: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real cap (100 MiB) is beyond any request body; an uploaded output meets it.
    monkeypatch.setattr(limits, "MAX_OUTPUT_BYTES", 100 * KB)
    wf = waiting(stack)
    (token,) = callback_ship
    output = {"label": "x" * (limits.MAX_OUTPUT_BYTES + 1)}
    assert len(json.dumps({"output": output})) < MAX_CALLBACK_BODY_BYTES
    code, reply = stack.callback(token, "success", {"output": output})
    assert code == 413 and reply["error"]["code"] == "OutputTooLarge", reply
    step = ship(stack, wf)
    assert step["status"] == "FAILED" and step["error"]["type"] == "OutputTooLarge"
    assert step["output"] is None and len(callback_ship) == 1  # not retried
    stack.run_agents()
    assert stack.api("GET", f"/workflows/{wf}")[2]["status"] == "COMPENSATED"
    code, reply = stack.callback(token, "success", {"output": {"tracking": "late"}})
    assert code == 409 and reply["error"]["code"] == "TaskTokenStale"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ('{"output": {"amount": NaN}}', "NonFiniteNumber"),
        ('{"output": {"n": 1e400}}', "NumberOutOfRange"),
        ('{"output": "\\udc00"}', "InvalidUnicode"),
        ('{"output": ' + "[" * 100 + "]" * 100 + "}", "JsonTooDeep"),
        ('{"output": ', "InvalidJson"),
    ],
)
def test_callback_payloads_are_strict_json(
    stack: Stack, callback_ship: list[str], raw: str, code: str
) -> None:
    wf = waiting(stack)
    (token,) = callback_ship
    status, reply = raw_callback(token, "success", raw)
    assert status == 400 and reply["error"]["code"] == code, reply
    assert ship(stack, wf)["status"] == "WAITING"


def test_failure_fields_obey_the_error_caps(stack: Stack, callback_ship: list[str]) -> None:
    wf = waiting(stack)
    (token,) = callback_ship
    for body, field in (
        ({"error": "E" * (MAX_ERROR_NAME + 1)}, "error"),
        ({"error": "Carrier", "cause": "c" * (MAX_ERROR_CAUSE + 1)}, "cause"),
        ({"error": ""}, "error"),
    ):
        code, reply = stack.callback(token, "failure", body)
        assert code == 400 and reply["error"]["field"] == field, reply
    assert ship(stack, wf)["status"] == "WAITING"
    code, reply = stack.callback(
        token, "failure", {"error": "E" * MAX_ERROR_NAME, "cause": "c" * MAX_ERROR_CAUSE}
    )
    assert code == 200 and reply["attempt"] == 2


def test_a_forged_token_is_404_in_every_state_of_its_attempt(
    stack: Stack, callback_ship: list[str]
) -> None:
    wf = waiting(stack)
    (first,) = callback_ship
    for action in ("heartbeat", "success", "failure"):  # attempt 1 waiting
        code, reply = stack.callback(forge(first), action, {})
        assert code == 404 and reply["error"]["code"] == "TaskTokenInvalid"
    assert stack.callback(first, "failure", {"error": "CarrierBusy"})[0] == 200
    # Attempt 1 is over (superseded by a retry): the genuine token is stale, a forged one
    # is still unknown, so it learns nothing about the attempt.
    code, reply = stack.callback(first, "heartbeat", {})
    assert code == 409 and reply["error"]["code"] == "TaskTokenStale"
    code, reply = stack.callback(forge(first), "heartbeat", {})
    assert code == 404 and reply["error"]["code"] == "TaskTokenInvalid"
    assert ship(stack, wf)["attempt"] == 2


def test_a_callback_output_may_nest_as_deep_as_an_agent_output(
    stack: Stack, callback_ship: list[str]
) -> None:
    wf = waiting(stack)
    (token,) = callback_ship
    too_deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    status, reply = raw_callback(token, "success", '{"output": ' + too_deep + "}")
    assert status == 400 and reply["error"]["code"] == "JsonTooDeep"
    assert str(MAX_JSON_DEPTH) in reply["error"]["message"]
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    status, reply = raw_callback(token, "success", '{"output": ' + at_limit + "}")
    assert status == 200 and reply["status"] == "SUCCEEDED", reply
    assert ship(stack, wf)["output"] == json.loads(at_limit)


def test_a_flood_of_heartbeats_is_throttled_per_token_and_leaves_no_orphans(
    stack: Stack, callback_ship: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile caller: 30 heartbeats with 300 KB details in a few seconds used to write 30
    details objects, 29 of them referenced by nothing. Now a token gets one heartbeat a
    second (429 with Retry-After, nothing stored), and the details a heartbeat replaces are
    deleted once it has won: the bucket holds one details object, the one the step names."""
    from shepherd.clock import SystemClock

    wf = waiting(stack)
    (token,) = callback_ship
    now = [SystemClock().now_ms()]
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: now[0])
    accepted, refused = 0, []
    for i in range(30):
        now[0] += 170  # 30 heartbeats in about 5 s
        code, reply = stack.callback(
            token, "heartbeat", {"details": {"n": i, "log": "x" * 300 * KB}}
        )
        if code == 200:
            accepted += 1
        else:
            refused.append((code, reply["error"]["code"]))
    assert 5 <= accepted <= 6  # one a second
    assert set(refused) == {(429, "HeartbeatTooSoon")}
    keys = [
        o["Key"]
        for o in stack.clients["s3"].list_objects_v2(Bucket=PAYLOAD_BUCKET).get("Contents", [])
        if "/details/" in o["Key"]
    ]
    step = ship(stack, wf)
    assert len(keys) == 1 and step["details_ref"]["sha256"] in keys[0]
    # The refusal says when to come back, in the error shape.
    from aws_stack import TASK_TOKEN_HEADER, LambdaContext, rest_event
    from shepherd_handlers import callbacks

    event = rest_event(
        "POST",
        "/tasks/heartbeat",
        resource="/tasks/heartbeat",
        body={"details": {"n": "again"}},
        headers={TASK_TOKEN_HEADER: token},
    )
    reply = callbacks.handler(event, LambdaContext())
    headers = {
        **reply.get("headers", {}),
        **{k: v[-1] for k, v in reply.get("multiValueHeaders", {}).items()},
    }
    assert reply["statusCode"] == 429 and headers["Retry-After"] == "1", reply
    now[0] += 1000
    assert stack.callback(token, "heartbeat", {"details": {"n": "later"}})[0] == 200
