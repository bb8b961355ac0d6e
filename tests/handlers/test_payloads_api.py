"""Large payloads through the API (issue 12): a start's input up to 5 MiB straight through,
small payloads inline in `GET /workflows/{id}`, large ones as a presigned download in the
field's `_ref` twin; the objects live in the payload bucket (moto's S3)."""

from __future__ import annotations

import hashlib
from typing import Any

from aws_stack import PAYLOAD_BUCKET, Stack
from shepherd import jsonsafe
from shepherd.engine.agent import AgentContext
from shepherd.limits import MAX_INPUT_BYTES, PAYLOAD_INLINE_BYTES
from shepherd_examples.agents import registry
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
