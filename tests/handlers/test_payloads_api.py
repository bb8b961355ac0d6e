"""Large payloads through the API (issue 12): a start's input up to 5 MiB straight through,
small payloads inline in `GET /workflows/{id}`, large ones as a presigned download in the
field's `_ref` twin; the objects live in the payload bucket (moto's S3)."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import requests
from aws_stack import ALICE, BOB, PAYLOAD_BUCKET, Stack
from shepherd import jsonsafe
from shepherd.engine.agent import AgentContext
from shepherd.keys import UPLOAD_SK, upload_pk
from shepherd.limits import MAX_INPUT_BYTES, MAX_UPLOAD_BYTES, MIB, PAYLOAD_INLINE_BYTES
from shepherd_examples.agents import registry
from shepherd_handlers.runtime import owner_from_arn
from support import ORDER


def _sized(base: dict[str, Any], size: int) -> dict[str, Any]:
    empty = jsonsafe.size(jsonsafe.dumps({**base, "pad": ""}))
    return {**base, "pad": "p" * (size - empty)}


def _start(stack: Stack, payload: Any) -> tuple[int, Any]:
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": payload}
    )
    return status, reply


def test_an_input_of_exactly_5_mib_is_accepted_linked_and_read_by_the_agents(
    stack: Stack,
) -> None:
    payload = _sized(ORDER, MAX_INPUT_BYTES)
    status, accepted = _start(stack, payload)
    assert status == 202, accepted
    wf = accepted["workflow_id"]
    stack.run_agents()
    status, _, view = stack.api("GET", f"/workflows/{wf}")
    assert status == 200 and view["status"] == "SUCCEEDED"
    assert view["input"] is None
    data = jsonsafe.dumps(payload).encode()
    assert view["input_ref"]["size"] == MAX_INPUT_BYTES == len(data)
    assert view["input_ref"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert view["input_ref"]["url"].startswith("https://")
    # The presigned URL names the object the server keyed; the object is the input.
    s3 = stack.clients["s3"]
    key = f"wf/{wf}/input/{hashlib.sha256(data).hexdigest()}"
    assert key in view["input_ref"]["url"]
    assert s3.get_object(Bucket=PAYLOAD_BUCKET, Key=key)["Body"].read() == data
    # One byte more is refused, and nothing is written for it.
    status, reply = _start(stack, _sized(ORDER, MAX_INPUT_BYTES + 1))
    assert status == 413 and reply["error"]["code"] == "InputTooLarge"
    assert s3.list_objects_v2(Bucket=PAYLOAD_BUCKET)["KeyCount"] == 1


def test_small_payloads_are_inline_and_large_step_outputs_are_linked(stack: Stack) -> None:
    original = registry.get("ship_order")
    assert original is not None

    def ship(ctx: AgentContext) -> Any:  # an agent returning a large value: no special code
        return {"tracking": "T-9", "label": "L" * (2 * PAYLOAD_INLINE_BYTES)}

    registry.register("ship_order", ship)
    try:
        _, accepted = _start(stack, ORDER)
        stack.run_agents()
    finally:
        registry.register("ship_order", original)
    view = stack.api("GET", f"/workflows/{accepted['workflow_id']}")[2]
    assert view["status"] == "SUCCEEDED"
    assert view["input"] == ORDER and view["input_ref"] is None
    assert set(view["output"]) == {"reserve_inventory", "charge_payment", "notify_customer"}
    assert set(view["output_ref"]) == {"ship_order"}
    step = next(s for s in view["steps"] if s["name"] == "ship_order")
    assert step["output"] is None and step["output_ref"] == view["output_ref"]["ship_order"]
    assert step["output_ref"]["size"] > 2 * PAYLOAD_INLINE_BYTES
    notify = next(s for s in view["steps"] if s["name"] == "notify_customer")
    assert notify["output"]["tracking"] == "T-9"  # the next step read it from the bucket
    assert notify["output_ref"] is None


# ------------------------------------------------------------------- POST /payloads uploads


def _upload(stack: Stack, data: bytes, *, sha256: bool = True, caller: str = ALICE) -> Any:
    """POST /payloads, then the presigned POST itself (the form, then the file) to moto's S3."""
    body: dict[str, Any] = {"size": len(data)}
    if sha256:
        body["sha256"] = hashlib.sha256(data).hexdigest()
    status, _, upload = stack.api("POST", "/payloads", body=body, caller=caller)
    assert status == 201, upload
    reply = requests.post(
        upload["url"], data=upload["fields"], files={"file": ("input.json", data)}, timeout=10
    )
    assert reply.status_code in (200, 201, 204), reply.text
    return upload


def _expire(stack: Stack, upload_id: str) -> None:
    """Its 15 minutes have passed (the item's expiry moved into the past)."""
    stack.clients["dynamodb"].update_item(
        TableName="shepherd",
        Key={"pk": {"S": upload_pk(upload_id)}, "sk": {"S": UPLOAD_SK}},
        UpdateExpression="SET upload_expires_at = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )


def _start_upload(
    stack: Stack, upload_id: str, *, caller: str = ALICE, key: str | None = None
) -> tuple[int, Any]:
    body: dict[str, Any] = {"type": "order_fulfilment", "input_upload": upload_id}
    if key is not None:
        body["idempotency_key"] = key
    status, _, reply = stack.api("POST", "/workflows", body=body, caller=caller)
    return status, reply


def test_a_20_mib_input_is_uploaded_presigned_then_started_once(stack: Stack) -> None:
    payload = _sized(ORDER, 20 * MIB)
    data = jsonsafe.dumps(payload).encode()
    upload = _upload(stack, data)
    owner_hash = hashlib.sha256(owner_from_arn(ALICE).encode()).hexdigest()[:32]
    assert upload["key"] == f"uploads/{owner_hash}/{upload['upload_id']}"
    assert upload["fields"]["key"] == upload["key"]
    s3 = stack.clients["s3"]
    assert s3.get_object(Bucket=PAYLOAD_BUCKET, Key=upload["key"])["Body"].read() == data
    status, accepted = _start_upload(stack, upload["upload_id"])
    assert status == 202, accepted
    wf = accepted["workflow_id"]
    # The input now lives under the workflow's own key; the upload object is gone.
    digest = hashlib.sha256(data).hexdigest()
    assert (
        s3.get_object(Bucket=PAYLOAD_BUCKET, Key=f"wf/{wf}/input/{digest}")["Body"].read() == data
    )
    assert s3.list_objects_v2(Bucket=PAYLOAD_BUCKET, Prefix="uploads/")["KeyCount"] == 0
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}")[2]
    assert view["status"] == "SUCCEEDED"
    assert view["input_ref"]["size"] == len(data) and view["input_ref"]["sha256"] == digest
    # Single use: a second start naming it is a 409 in the error shape.
    status, reply = _start_upload(stack, upload["upload_id"], key="another")
    assert status == 409 and reply["error"]["code"] == "UploadUsed"
    assert reply["error"]["field"] == "input_upload"


def test_an_idempotent_replay_of_an_upload_start_returns_the_same_workflow(stack: Stack) -> None:
    upload = _upload(stack, jsonsafe.dumps(ORDER).encode())
    status, first = _start_upload(stack, upload["upload_id"], key="big-1")
    assert status == 202 and first["created"] is True
    status, again = _start_upload(stack, upload["upload_id"], key="big-1")
    assert status == 202 and again["created"] is False
    assert again["workflow_id"] == first["workflow_id"]
    # Without a key, a repeat of the same start is a replay too (the id derives from the upload).
    other = _upload(stack, jsonsafe.dumps(ORDER).encode())
    _, one = _start_upload(stack, other["upload_id"])
    status, two = _start_upload(stack, other["upload_id"])
    assert status == 202 and two["workflow_id"] == one["workflow_id"] and two["created"] is False
    # The same key with an inline input is a different request.
    status, _, reply = stack.api(
        "POST",
        "/workflows",
        body={"type": "order_fulfilment", "input": ORDER, "idempotency_key": "big-1"},
    )
    assert status == 409 and reply["error"]["code"] == "IdempotencyConflict"


def test_another_callers_upload_is_not_found_and_stays_usable(stack: Stack) -> None:
    upload = _upload(stack, jsonsafe.dumps(ORDER).encode())
    status, reply = _start_upload(stack, upload["upload_id"], caller=BOB)
    assert status == 404 and reply["error"]["code"] == "UploadNotFound"
    status, reply = _start_upload(stack, "0" * 32)
    assert status == 404 and reply["error"]["code"] == "UploadNotFound"
    assert _start_upload(stack, upload["upload_id"])[0] == 202


def test_an_expired_upload_is_gone(stack: Stack) -> None:
    upload = _upload(stack, jsonsafe.dumps(ORDER).encode())
    _expire(stack, upload["upload_id"])
    status, reply = _start_upload(stack, upload["upload_id"])
    assert status == 410 and reply["error"]["code"] == "UploadExpired"


def test_nothing_uploaded_a_size_or_hash_mismatch_and_bad_json_are_400(stack: Stack) -> None:
    data = jsonsafe.dumps(ORDER).encode()
    status, _, upload = stack.api("POST", "/payloads", body={"size": len(data)})
    assert status == 201 and upload["sha256"] is None
    status, reply = _start_upload(stack, upload["upload_id"])
    assert status == 400 and reply["error"]["code"] == "UploadMissing"
    # The presigned POST's policy allows exactly the declared length, this one key, 15 minutes
    # (S3 enforces it; moto does not, so a wrong length that gets through is caught below).
    policy = json.loads(base64.b64decode(upload["fields"]["policy"]))
    assert ["content-length-range", len(data), len(data)] in policy["conditions"]
    assert {"key": upload["key"]} in policy["conditions"]
    expires = datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
    assert 890 <= (expires - datetime.now(UTC)).total_seconds() <= 900
    s3 = stack.clients["s3"]
    # A hash mismatch (the object written around the POST, as a hostile writer could).
    status, _, hashed = stack.api("POST", "/payloads", body={"size": len(data), "sha256": "0" * 64})
    s3.put_object(Bucket=PAYLOAD_BUCKET, Key=hashed["key"], Body=data)
    status, reply = _start_upload(stack, hashed["upload_id"])
    assert status == 400 and reply["error"]["code"] == "UploadMismatch"
    # A size mismatch.
    s3.put_object(Bucket=PAYLOAD_BUCKET, Key=upload["key"], Body=data + b"  ")
    status, reply = _start_upload(stack, upload["upload_id"])
    assert status == 400 and reply["error"]["code"] == "UploadMismatch"
    # Not strict JSON (NaN), and JSON that fails the InputSchema: 400 InvalidInput.
    for bad in (b'{"order_id": NaN}', b'{"order_id": 1}'):
        bad_upload = _upload(stack, bad)
        status, reply = _start_upload(stack, bad_upload["upload_id"])
        assert status == 400 and reply["error"]["code"] == "InvalidInput", reply
    # A failed start leaves the upload unused: fixed, it starts.
    s3.put_object(Bucket=PAYLOAD_BUCKET, Key=upload["key"], Body=data)
    assert _start_upload(stack, upload["upload_id"])[0] == 202


def test_the_upload_size_cap_and_the_request_shape(stack: Stack) -> None:
    status, _, upload = stack.api("POST", "/payloads", body={"size": MAX_UPLOAD_BYTES})
    assert status == 201 and upload["size"] == MAX_UPLOAD_BYTES
    # An integer as JSON Schema means it: 10.0 is one, "10" and true are not.
    status, _, integral = stack.api("POST", "/payloads", body={"size": 10.0})
    assert status == 201 and integral["size"] == 10
    for body in (
        {"size": MAX_UPLOAD_BYTES + 1},
        {"size": 0},
        {"size": 1, "sha256": "xyz"},
        {"size": "10"},
        {"size": True},
        {"size": 1.5},
        {},
    ):
        status, _, reply = stack.api("POST", "/payloads", body=body)
        assert status == 400 and reply["error"]["code"] == "ValidationError", body
    status, _, reply = stack.api(
        "POST",
        "/workflows",
        body={"type": "order_fulfilment", "input": ORDER, "input_upload": upload["upload_id"]},
    )
    assert status == 400 and reply["error"]["code"] == "ValidationError"


# -------------------------------------------------- a callback's output through an upload


def test_a_callback_succeeds_with_a_20_mib_uploaded_output(
    stack: Stack, callback_ship: list[str]
) -> None:
    _, accepted = _start(stack, ORDER)
    stack.run_agents()
    (token,) = callback_ship
    result = _sized({"tracking": "T-20"}, 20 * MIB)
    data = jsonsafe.dumps(result).encode()
    upload = _upload(stack, data)
    # Another caller's upload is not found, and both output fields at once are refused.
    code, reply = stack.callback(
        token, "success", {"output_upload": upload["upload_id"]}, caller=BOB
    )
    assert code == 404 and reply["error"]["code"] == "UploadNotFound"
    assert reply["error"]["field"] == "output_upload"
    code, reply = stack.callback(
        token, "success", {"output": {}, "output_upload": upload["upload_id"]}
    )
    assert code == 400 and reply["error"]["code"] == "ValidationError"
    code, reply = stack.callback(token, "success", {"output_upload": upload["upload_id"]})
    assert code == 200 and reply["status"] == "SUCCEEDED", reply
    s3 = stack.clients["s3"]
    assert s3.list_objects_v2(Bucket=PAYLOAD_BUCKET, Prefix="uploads/")["KeyCount"] == 0
    stack.run_agents()
    wf = accepted["workflow_id"]
    view = stack.api("GET", f"/workflows/{wf}")[2]
    assert view["status"] == "SUCCEEDED"
    link = view["output_ref"]["ship_order"]
    digest = hashlib.sha256(data).hexdigest()
    assert link["size"] == len(data) and link["sha256"] == digest
    key = f"wf/{wf}/step/ship_order/1/output/{digest}"
    assert s3.get_object(Bucket=PAYLOAD_BUCKET, Key=key)["Body"].read() == data
    # Single use: the same upload cannot start a workflow now.
    status, reply = _start_upload(stack, upload["upload_id"])
    assert status == 409 and reply["error"]["code"] == "UploadUsed"


def test_a_callback_upload_error_is_in_the_error_shape_and_leaves_the_step_waiting(
    stack: Stack, callback_ship: list[str]
) -> None:
    _, accepted = _start(stack, ORDER)
    stack.run_agents()
    (token,) = callback_ship
    status, _, upload = stack.api("POST", "/payloads", body={"size": 2})
    assert status == 201
    code, reply = stack.callback(token, "success", {"output_upload": upload["upload_id"]})
    assert code == 400 and reply["error"]["code"] == "UploadMissing"
    assert reply["error"]["field"] == "output_upload"
    _expire(stack, upload["upload_id"])
    code, reply = stack.callback(token, "success", {"output_upload": upload["upload_id"]})
    assert code == 410 and reply["error"]["code"] == "UploadExpired"
    view = stack.api("GET", f"/workflows/{accepted['workflow_id']}")[2]
    ship = next(s for s in view["steps"] if s["name"] == "ship_order")
    assert ship["status"] == "WAITING" and ship["output"] is None


# ---------------------------------------------------------- an agent error's full text


def test_an_agent_errors_full_text_is_linked_and_never_leaves_as_a_key(stack: Stack) -> None:
    """`error` keeps the name and the cut message; `error_ref` links the whole message and
    the traceback; neither the view nor an event carries the internal reference."""
    original = registry.get("charge_payment")
    assert original is not None
    long_message = "declined: " + "x" * 5000

    def charge(ctx: AgentContext) -> Any:
        raise LookupError(long_message)

    registry.register("charge_payment", charge)
    try:
        _, accepted = _start(stack, {**ORDER, "order_id": "o-err"})
        stack.run_agents()
    finally:
        registry.register("charge_payment", original)
    view = stack.api("GET", f"/workflows/{accepted['workflow_id']}")[2]
    step = next(s for s in view["steps"] if s["name"] == "charge_payment")
    assert set(step["error"]) == {"type", "message"} and step["error"]["type"] == "LookupError"
    link = step["error_ref"]
    full = requests.get(link["url"], timeout=10).content
    assert len(full) == link["size"] and hashlib.sha256(full).hexdigest() == link["sha256"]
    text = json.loads(full)
    assert text["message"] == long_message and "raise LookupError" in text["traceback"]
    failures = [
        e["detail"]["error"]
        for e in stack.published()
        if e["detail-type"] in ("StepRetried", "StepFailed")
        and e["detail"].get("step") == "charge_payment"
    ]
    assert failures and all(set(error) == {"type", "message"} for error in failures)
