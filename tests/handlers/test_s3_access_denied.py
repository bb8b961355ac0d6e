"""S3 answers 403 to a role that may not read (or list) the bucket: a permission mistake (a
policy, a key policy, an SCP). Issue 35.1: it used to be read as "missing", failing a start
(400 UploadMissing) or a step (PayloadMissing) for good. The deployed roles may list the
bucket, so a missing object is a 404; a 403 is a store error: 503 StoreUnavailable to a
caller, who retries, and a step that cannot read its payload is not failed for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_stack import PAYLOAD_BUCKET, Stack
from s3_without_list import with_list_bucket, without_list_bucket
from shepherd.keys import WF_SK, wf_pk
from shepherd.payloads import ref_of
from support import ORDER


@pytest.fixture
def denied(stack: Stack) -> Iterator[Stack]:
    """The stack, with every S3 client the engine makes from now on seeing 403 for a key
    that does not exist (the engine's clients come from boto3's default session)."""
    from shepherd_handlers import runtime

    session = boto3.DEFAULT_SESSION
    assert session is not None
    without_list_bucket(session)
    runtime.engine.cache_clear()
    try:
        yield stack
    finally:
        with_list_bucket(session)
        runtime.engine.cache_clear()


def _view(stack: Stack, workflow_id: str) -> Any:
    return stack.api("GET", f"/workflows/{workflow_id}")[2]


def test_a_start_whose_upload_is_denied_is_retryable_never_missing(denied: Stack) -> None:
    status, _, upload = denied.api("POST", "/payloads", body={"size": 20})
    assert status == 201
    status, _, reply = denied.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input_upload": upload["upload_id"]}
    )
    assert status == 503, reply
    assert reply["error"]["code"] == "StoreUnavailable"


def test_a_callback_whose_upload_is_denied_is_retryable_never_missing(
    denied: Stack, callback_ship: list[str]
) -> None:
    status, _, _ = denied.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    assert status == 202
    denied.run_agents()
    (token,) = callback_ship
    status, _, upload = denied.api("POST", "/payloads", body={"size": 2})
    assert status == 201
    code, reply = denied.callback(token, "success", {"output_upload": upload["upload_id"]})
    assert code == 503, reply
    assert reply["error"]["code"] == "StoreUnavailable"


def test_a_denied_payload_never_fails_its_step(denied: Stack) -> None:
    padded = {**ORDER, "pad": "p" * 20_000}  # offloaded to the bucket
    status, _, accepted = denied.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": padded}
    )
    assert status == 202
    item = denied.clients["dynamodb"].get_item(
        TableName="shepherd",
        Key={"pk": {"S": wf_pk(accepted["workflow_id"])}, "sk": {"S": WF_SK}},
    )["Item"]
    ref = ref_of(item["input"]["S"])
    assert ref is not None
    # The object is gone and S3 says 403, as to a role denied by mistake.
    denied.clients["s3"].delete_object(Bucket=PAYLOAD_BUCKET, Key=ref.key)
    denied.run_agents()  # the attempt meets a store error: the message is retried
    view = _view(denied, accepted["workflow_id"])
    (first,) = [s for s in view["steps"] if s["name"] == "reserve_inventory"]
    assert first["status"] != "FAILED", first
    assert (first.get("error") or {}).get("type") != "PayloadMissing", first
    assert view["status"] not in ("FAILED", "COMPENSATING", "COMPENSATED"), view["status"]
