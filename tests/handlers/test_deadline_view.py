"""GET /workflows/{id} gives each live step its next deadline and why (issue 29.3)."""

from __future__ import annotations

from aws_stack import Stack
from support import ORDER


def test_the_api_view_gives_each_live_step_its_deadline(stack: Stack) -> None:
    status, _, started = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    assert status == 202
    view = stack.api("GET", f"/workflows/{started['workflow_id']}")[2]
    steps = {s["name"]: s for s in view["steps"]}
    assert steps["reserve_inventory"]["next_deadline"]["why"] == "dispatch"
    assert steps["reserve_inventory"]["next_deadline"]["at"] is not None
    assert steps["charge_payment"].get("next_deadline") is None
    stack.run_agents()
    done = stack.api("GET", f"/workflows/{started['workflow_id']}")[2]
    assert done["status"] == "SUCCEEDED"
    assert all(s.get("next_deadline") is None for s in done["steps"])


def test_a_steps_full_error_and_traceback_are_served_as_text(stack: Stack) -> None:
    declined = {**ORDER, "faults": {"charge_payment": {"mode": "permanent", "times": 1}}}
    status, _, started = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": declined}
    )
    assert status == 202
    workflow_id = started["workflow_id"]
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{workflow_id}")[2]
    charge = next(s for s in view["steps"] if s["name"] == "charge_payment")
    assert charge["status"] == "FAILED"
    status, _, error = stack.api("GET", f"/workflows/{workflow_id}/steps/charge_payment/error")
    assert status == 200, error
    assert error["kind"] == "step" and error["step"] == "charge_payment"
    assert error["type"] == charge["error"]["type"]
    assert error["message"].startswith(charge["error"]["message"].rstrip("…"))
    # The traceback is text with real newlines, naming the agent's frame.
    assert error["traceback"] and "\n" in error["traceback"] and "Traceback" in error["traceback"]
    # A step that did not fail has no error; another caller's workflow is not found.
    missing = stack.api("GET", f"/workflows/{workflow_id}/steps/reserve_inventory/error")
    assert missing[0] == 404 and missing[2]["error"]["code"] == "ErrorNotFound"
    from aws_stack import BOB

    other = stack.api("GET", f"/workflows/{workflow_id}/steps/charge_payment/error", caller=BOB)
    assert other[0] == 404
    bad = stack.api("GET", f"/workflows/{workflow_id}/steps/Not-A-Name/error")
    assert bad[0] == 400
