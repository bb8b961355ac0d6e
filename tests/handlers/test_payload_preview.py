"""GET /workflows/{id}/preview (issue 29.6): the first bytes of a payload as text, a large one
read from the payload bucket with a ranged GET (moto's S3 here) so a preview never pulls the
whole object; the caller's workflows only; bad input refused in the error shape."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from aws_stack import ALICE, BOB, Stack
from shepherd import jsonsafe
from shepherd.engine.agent import AgentContext
from shepherd.limits import PAYLOAD_INLINE_BYTES
from shepherd_examples.agents import registry
from support import ORDER

MIB = 1024 * 1024


def _start(stack: Stack, payload: Any, caller: str = ALICE) -> str:
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": payload}, caller=caller
    )
    assert status == 202, reply
    return str(reply["workflow_id"])


def _preview(stack: Stack, workflow_id: str, caller: str = ALICE, **query: str) -> Any:
    return stack.api("GET", f"/workflows/{workflow_id}/preview", query=query, caller=caller)


@pytest.fixture
def s3_reads(stack: Stack) -> Iterator[list[dict[str, Any]]]:
    """Every GetObject the API's engine makes: the Range it asked for, the bytes S3 sent."""
    from shepherd_handlers import runtime

    client = runtime.engine().ports.payloads.store._client
    reads: list[dict[str, Any]] = []

    def before(params: dict[str, Any], **_: Any) -> None:
        reads.append({"range": params.get("Range"), "sent": None})

    def after(parsed: dict[str, Any], **_: Any) -> None:
        reads[-1]["sent"] = parsed.get("ContentLength")

    client.meta.events.register("before-parameter-build.s3.GetObject", before, "preview-before")
    client.meta.events.register("after-call.s3.GetObject", after, "preview-after")
    yield reads
    client.meta.events.unregister("before-parameter-build.s3.GetObject", unique_id="preview-before")
    client.meta.events.unregister("after-call.s3.GetObject", unique_id="preview-after")


def test_a_large_input_is_previewed_from_its_first_bytes_only(
    stack: Stack, s3_reads: list[dict[str, Any]]
) -> None:
    # 3 MiB of input, with a character of 3 UTF-8 bytes across the 4 KiB boundary.
    payload = {**ORDER, "a": "x" * 4000, "note": "€" * 200, "pad": "p" * (3 * MIB)}
    data = jsonsafe.dumps(payload).encode()
    workflow_id = _start(stack, payload)
    view = stack.api("GET", f"/workflows/{workflow_id}")[2]
    assert view["input"] is None and view["input_ref"]["size"] == len(data)
    s3_reads.clear()

    status, _, got = _preview(stack, workflow_id, field="input")
    assert status == 200, got
    assert got["kind"] == "workflow" and got["step"] is None and got["field"] == "input"
    assert got["size"] == len(data) and got["sha256"] == hashlib.sha256(data).hexdigest()
    assert got["large"] is True and got["truncated"] is True
    # The first 4 KiB, cut back to a whole character; the same bytes as the payload's start.
    assert got["bytes"] <= 4096 and got["bytes"] > 4096 - 3
    assert got["text"].encode() == data[: got["bytes"]]
    assert got["text"].startswith("{") and got["text"].endswith("€")
    # One ranged read of the object: S3 sent 4 KiB, not 3 MiB.
    assert s3_reads == [{"range": "bytes=0-4095", "sent": 4096}]

    s3_reads.clear()
    status, _, bigger = _preview(stack, workflow_id, field="input", bytes="65536")
    assert status == 200 and bigger["text"].encode() == data[: bigger["bytes"]]
    assert 65536 - 3 <= bigger["bytes"] <= 65536
    assert s3_reads == [{"range": "bytes=0-65535", "sent": 65536}]


def test_a_small_payload_is_previewed_whole_and_read_from_no_bucket(
    stack: Stack, s3_reads: list[dict[str, Any]]
) -> None:
    workflow_id = _start(stack, ORDER)
    stack.run_agents()
    s3_reads.clear()
    status, _, got = _preview(stack, workflow_id, field="input")
    data = jsonsafe.dumps(ORDER).encode()
    assert status == 200, got
    assert got["text"] == data.decode() and got["size"] == got["bytes"] == len(data)
    assert got["large"] is False and got["truncated"] is False
    status, _, out = _preview(stack, workflow_id, field="output", step="reserve_inventory")
    assert status == 200 and out["kind"] == "step" and out["step"] == "reserve_inventory"
    assert out["truncated"] is False and out["text"].startswith("{")
    assert s3_reads == []


def test_a_large_step_output_is_previewed_as_its_link_names_it(stack: Stack) -> None:
    original = registry.get("ship_order")
    assert original is not None

    def ship(ctx: AgentContext) -> Any:
        return {"tracking": "T-9", "label": "<script>L</script>" * PAYLOAD_INLINE_BYTES}

    registry.register("ship_order", ship)
    try:
        workflow_id = _start(stack, ORDER)
        stack.run_agents()
    finally:
        registry.register("ship_order", original)
    view = stack.api("GET", f"/workflows/{workflow_id}")[2]
    link = view["output_ref"]["ship_order"]
    status, _, got = _preview(stack, workflow_id, field="output", step="ship_order", bytes="100")
    assert status == 200, got
    assert got["size"] == link["size"] and got["sha256"] == link["sha256"]
    assert got["large"] is True and got["truncated"] is True and got["bytes"] == 100
    # Data, as text: whatever it holds is the client's to show as text.
    assert got["text"].startswith('{"label":"<script>L</script>')


def test_only_the_callers_own_workflows_are_previewed(stack: Stack) -> None:
    workflow_id = _start(stack, {**ORDER, "pad": "p" * (2 * PAYLOAD_INLINE_BYTES)})
    status, _, reply = _preview(stack, workflow_id, caller=BOB, field="input")
    assert status == 404 and reply["error"]["code"] == "WorkflowNotFound"
    assert "text" not in reply
    status, _, reply = _preview(stack, "nope", field="input")
    assert status == 404 and reply["error"]["code"] == "WorkflowNotFound"


def test_bad_requests_are_refused_in_the_error_shape(stack: Stack) -> None:
    workflow_id = _start(stack, ORDER)
    stack.run_agents()
    refused = [
        ({}, 400, "ValidationError", "field"),
        ({"field": "secrets"}, 400, "ValidationError", "field"),
        ({"field": "input", "bytes": "0"}, 400, "ValidationError", "bytes"),
        ({"field": "input", "bytes": "65537"}, 400, "ValidationError", "bytes"),
        ({"field": "output"}, 400, "ValidationError", "step"),
        (
            {"field": "input", "step": "a", "compensation": "b"},
            400,
            "ValidationError",
            "compensation",
        ),
        ({"field": "input", "step": "../x"}, 400, "ValidationError", "step"),
        ({"field": "input", "offset": "5"}, 400, "ValidationError", "offset"),
        ({"field": "output", "step": "no_such_step"}, 404, "StepNotFound", "step"),
        ({"field": "output", "compensation": "ship_order"}, 404, "StepNotFound", "compensation"),
        ({"field": "details", "step": "ship_order"}, 404, "PayloadNotFound", "field"),
        ({"field": "error", "step": "ship_order"}, 404, "PayloadNotFound", "field"),
    ]
    for query, status, code, field in refused:
        got_status, _, reply = _preview(stack, workflow_id, **query)
        assert (got_status, reply["error"]["code"], reply["error"]["field"]) == (
            status,
            code,
            field,
        ), query
        assert reply["error"]["request_id"], query


def test_a_missing_object_is_an_error_not_an_empty_preview(stack: Stack) -> None:
    from aws_stack import PAYLOAD_BUCKET

    workflow_id = _start(stack, {**ORDER, "pad": "p" * (2 * PAYLOAD_INLINE_BYTES)})
    s3 = stack.clients["s3"]
    for obj in s3.list_objects_v2(Bucket=PAYLOAD_BUCKET, Prefix=f"wf/{workflow_id}/")["Contents"]:
        s3.delete_object(Bucket=PAYLOAD_BUCKET, Key=obj["Key"])
    status, _, reply = _preview(stack, workflow_id, field="input")
    assert status == 500 and reply["error"]["code"] == "PayloadMissing"
