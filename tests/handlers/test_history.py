"""GET /workflows/{id}/events: the workflow's history as the relay published it (issue 29.4),
operator actions included, paged and signed; a redelivered stream record changes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from aws_stack import ALICE, BOB, Stack
from shepherd.clock import SystemClock, iso
from shepherd.errors import PermanentError
from shepherd_examples.agents import registry
from support import ORDER


def history(stack: Stack, workflow_id: str, **query: str) -> tuple[list[dict[str, Any]], int]:
    found: list[dict[str, Any]] = []
    token = None
    pages = 0
    for _ in range(50):
        q = dict(query, **({"next_token": token} if token else {}))
        status, _, reply = stack.api("GET", f"/workflows/{workflow_id}/events", query=q)
        assert status == 200, reply
        found += reply["items"]
        pages += 1
        token = reply["next_token"]
        if token is None:
            break
    return found, pages


def test_pauses_and_resumes_stay_in_the_history_with_who_and_when(stack: Stack) -> None:
    status, _, started = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    assert status == 202
    workflow_id = started["workflow_id"]
    for _ in range(3):
        assert stack.api("POST", f"/workflows/{workflow_id}/pause")[0] == 202
        assert stack.api("POST", f"/workflows/{workflow_id}/resume")[0] == 202
    stack.run_agents()
    stack.relay()
    events, _ = history(stack, workflow_id)
    types = [e["type"] for e in events]
    # As published, in order: the pauses did not vanish once resumed, nothing was invented.
    assert types[0] == "WorkflowStarted" and types[-1] == "WorkflowSucceeded"
    assert types.count("WorkflowPaused") == 3 and types.count("WorkflowResumed") == 3
    assert "StepRetried" not in types
    paused = [e["detail"] for e in events if e["type"] == "WorkflowPaused"]
    assert all(p["pause"]["by"] and p["pause"]["reason"] == "operator" for p in paused)
    assert all(e["detail"]["workflow_id"] == workflow_id and e["at"] for e in events)
    ats = [e["at"] for e in events]
    assert ats == sorted(ats)
    # What the bus got, the history holds: the same event ids.
    published = {
        e["detail"]["event_id"]
        for e in stack.published(relay=False)
        if e["detail"].get("workflow_id") == workflow_id
    }
    assert {e["detail"]["event_id"] for e in events} == published

    # Paged, signed, bound to the caller and the workflow.
    paged, pages = history(stack, workflow_id, limit="2")
    assert paged == events and pages == -(-len(events) // 2)
    first = stack.api("GET", f"/workflows/{workflow_id}/events", query={"limit": "2"})[2]
    token = first["next_token"]
    assert (
        stack.api(
            "GET", f"/workflows/{workflow_id}/events", query={"next_token": token}, caller=BOB
        )[0]
        == 404
    )
    other = stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})[2]
    status, _, reply = stack.api(
        "GET", f"/workflows/{other['workflow_id']}/events", query={"next_token": token}
    )
    assert status == 400 and reply["error"]["field"] == "next_token"


def test_a_redelivered_record_writes_the_same_history(stack: Stack) -> None:
    from shepherd_handlers import stream

    status, _, started = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    assert status == 202
    workflow_id = started["workflow_id"]
    stack.relay()
    before, _ = history(stack, workflow_id)
    assert [e["type"] for e in before] == ["WorkflowStarted"]
    from shepherd.changes import Change

    item = stack.clients["dynamodb"].get_item(
        TableName="shepherd", Key={"pk": {"S": f"WF#{workflow_id}"}, "sk": {"S": "#WF"}}
    )["Item"]
    from shepherd.adapters.dynamodb import from_attr

    again = Change(old=None, new=from_attr(item), sequence="1")
    stream.publish_change(again)  # as a retried batch would
    after, _ = history(stack, workflow_id)
    assert len(after) == 1


def test_a_retried_step_is_in_the_history_between_the_start_and_the_end(stack: Stack) -> None:
    flaky = {**ORDER, "faults": {"reserve_inventory": {"mode": "error", "times": 1}}}
    status, _, started = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": flaky}
    )
    assert status == 202
    workflow_id = started["workflow_id"]
    for _ in range(20):  # the retry's backoff (at most 0.5 s, jittered) passes between rounds
        time.sleep(0.3)
        stack.run_agents()
        stack.sweep()
        if stack.api("GET", f"/workflows/{workflow_id}")[2]["status"] == "SUCCEEDED":
            break
    stack.relay()
    events, _ = history(stack, workflow_id)
    types = [e["type"] for e in events]
    assert types[0] == "WorkflowStarted" and types[-1] == "WorkflowSucceeded", types
    retried = [e for e in events if e["type"] == "StepRetried"]
    assert len(retried) == 1
    assert retried[0]["detail"]["step"] == "reserve_inventory"
    assert retried[0]["detail"]["attempt"] == 1 and retried[0]["at"]
    ats = [e["at"] for e in events]
    assert ats == sorted(ats)


@pytest.fixture
def refunds_down() -> Iterator[None]:
    """refund_payment fails for good (a compensation exhausted: the workflow ends FAILED)."""
    original = registry.get("refund_payment")

    def down(ctx: Any) -> Any:
        raise PermanentError("refunds are switched off", name="RefundsDisabled")

    registry.register("refund_payment", down)
    yield
    registry.register("refund_payment", original)


def test_every_operator_action_is_in_the_history_with_who_did_it_and_when(
    stack: Stack, refunds_down: None
) -> None:
    """Issue 29.4: cancel, pause, resume (with a replacement input), give up (compensate) and
    retry each stay in GET /workflows/{id}/events as the event they announced, with the
    caller's principal and the time of the action, after the workflow moved on."""

    def started(body: Any = None) -> str:
        payload = body or {"type": "order_fulfilment", "input": ORDER}
        status, _, reply = stack.api("POST", "/workflows", body=payload)
        assert status == 202, reply
        return str(reply["workflow_id"])

    def act(workflow_id: str, action: str, **kwargs: Any) -> tuple[str, str]:
        """When the action was asked for: between its request's start and its reply."""
        before = iso(SystemClock().now_ms())
        status, _, reply = stack.api("POST", f"/workflows/{workflow_id}/{action}", **kwargs)
        assert status == 202, reply
        return str(before), str(iso(SystemClock().now_ms()))

    cancelled, given_up, resumed = started(), started(), started()
    acted_at = {"WorkflowCancelRequested": act(cancelled, "cancel")}
    act(given_up, "pause")
    acted_at["WorkflowCompensationRequested"] = act(given_up, "compensate")
    act(resumed, "pause")
    acted_at["WorkflowResumed"] = act(
        resumed, "resume", body={"step": "charge_payment", "input": {**ORDER, "amount": 7}}
    )
    failing = started(
        {
            "type": "order_fulfilment",
            "input": {**ORDER, "faults": {"ship_order": {"mode": "permanent"}}},
        }
    )
    stack.run_agents()
    assert stack.api("GET", f"/workflows/{failing}")[2]["status"] == "FAILED"
    acted_at["WorkflowRetried"] = act(failing, "retry")
    stack.run_agents()
    stack.relay()

    for workflow_id, detail_type in (
        (cancelled, "WorkflowCancelRequested"),
        (given_up, "WorkflowCompensationRequested"),
        (resumed, "WorkflowResumed"),
        (failing, "WorkflowRetried"),
    ):
        events, _ = history(stack, workflow_id)
        (event,) = [e for e in events if e["type"] == detail_type]
        assert event["detail"]["by"] == ALICE, event
        earliest, latest = acted_at[detail_type]
        assert event["at"] == event["detail"]["at"], event
        assert earliest <= event["at"] <= latest, (event, earliest, latest)
        # The workflow moved on (it ended): the action is still there, before the end.
        assert events[-1]["type"] != detail_type
    paused = [e for e in history(stack, given_up)[0] if e["type"] == "WorkflowPaused"]
    assert [p["detail"]["pause"]["by"] for p in paused] == [ALICE]
