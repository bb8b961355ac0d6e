"""Signals through the handlers on moto (issue 37.1): POST /workflows/{id}/signals/{name}
answers 202 and keeps the signal until a WaitForSignal step takes it (its output the payload),
who may send one (the owner and the definition's SignalSenders; others 404), the 4xx of a bad
one in the API's one error shape, and a `Signal` event sent as its source's owner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_stack import ALICE, LambdaContext, Stack, stack_with_definitions
from shepherd_cli import lambda_kit

CARRIER = "arn:aws:iam::123456789012:role/carrier"
CAROL = "arn:aws:iam::123456789012:user/carol"

AMEND = f"""\
Name: order_amend
Comment: A test definition (handlers) - reserve, wait for the customer's amendment, reserve.
SignalSenders: ["{CARRIER}"]
Steps:
  - Name: first
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
  - Name: amend
    DependsOn: [first]
    WaitForSignal: {{Name: amended, TimeoutSeconds: 3600}}
  - Name: after
    DependsOn: [amend]
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
"""
ORDER = {"order_id": "o-1", "customer": "ada", "amount": 42.5, "items": [{"sku": "A", "qty": 1}]}


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    with stack_with_definitions(monkeypatch, tmp_path, {"order_amend.yaml": AMEND}) as running:
        yield running


def _start(stack: Stack) -> str:
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_amend", "input": ORDER}, caller=ALICE
    )
    assert status == 202, reply
    return str(reply["workflow_id"])


def _steps(stack: Stack, wf: str) -> dict[str, Any]:
    view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
    return {s["name"]: s for s in view["steps"]}


def test_a_signal_is_kept_until_its_step_waits_and_becomes_its_output(stack: Stack) -> None:
    wf = _start(stack)  # `first` has not run: nothing waits yet
    path = f"/workflows/{wf}/signals/amended"
    body = {"payload": {"qty": 3}, "signal_id": "amend-1"}
    status, _, reply = stack.api("POST", path, body=body, caller=ALICE)
    assert status == 202, reply
    assert reply == {
        "workflow_id": wf,
        "name": "amended",
        "sequence": 0,
        "signal_id": "amend-1",
        "duplicate": False,
        "taken_by": None,
    }
    status, _, again = stack.api("POST", path, body=body, caller=ALICE)
    assert status == 202 and again["duplicate"] is True and again["sequence"] == 0
    status, _, reply = stack.api(
        "POST", path, body={"payload": {"qty": 4}, "signal_id": "amend-1"}, caller=ALICE
    )
    assert status == 409 and reply["error"]["code"] == "SignalIdConflict"
    assert reply["error"]["field"] == "signal_id"
    stack.run_agents()  # first succeeds, amend takes the kept signal at once, after runs
    steps = _steps(stack, wf)
    assert steps["amend"]["status"] == "SUCCEEDED" and steps["amend"]["output"] == {"qty": 3}
    assert steps["amend"]["decision"]["signal_id"] == "amend-1"
    view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
    assert view["status"] == "SUCCEEDED"
    status, _, reply = stack.api("POST", path, body={"payload": 1}, caller=ALICE)
    assert status == 409 and reply["error"]["code"] == "InvalidTransition"


def test_a_waiting_step_takes_a_listed_senders_signal_and_others_are_told_nothing(
    stack: Stack,
) -> None:
    wf = _start(stack)
    stack.run_agents()
    assert _steps(stack, wf)["amend"]["status"] == "WAITING"
    path = f"/workflows/{wf}/signals/amended"
    status, _, reply = stack.api("POST", path, body={"payload": {"by": "carol"}}, caller=CAROL)
    assert status == 404 and reply["error"]["code"] == "WorkflowNotFound"
    status, _, reply = stack.api("POST", path, body={"payload": {"n": 1}}, caller=CARRIER)
    assert status == 202 and reply["taken_by"] == "amend", reply
    stack.run_agents()
    assert stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]["status"] == "SUCCEEDED"


def test_bad_signals_get_4xx_in_the_one_error_shape(stack: Stack) -> None:
    wf = _start(stack)
    for path, body, status, code in [
        (f"/workflows/{wf}/signals/nobody", {"payload": 1}, 400, "SignalUnknown"),
        (f"/workflows/{wf}/signals/amended", {"payload": 1, "extra": 2}, 400, "ValidationError"),
        (f"/workflows/{wf}/signals/amended", {"payload": "x" * 70_000}, 413, None),
        (f"/workflows/{wf}/signals/bad%20name", {"payload": 1}, 400, "ValidationError"),
        ("/workflows/nope/signals/amended", {"payload": 1}, 404, "WorkflowNotFound"),
    ]:
        got, _, reply = stack.api("POST", path, body=body, caller=ALICE)
        assert got == status, (path, reply)
        assert set(reply) == {"error"} and reply["error"]["code"]
        if code is not None:
            assert reply["error"]["code"] == code, reply


def _event(detail: Any, source: str) -> dict[str, Any]:
    return lambda_kit.eventbridge_event(
        "Signal",
        detail,
        source=source,
        account="123456789012",
        region="us-east-1",
        at="2026-11-21T17:00:00Z",
        resources=[],
        event_id="6a7e8feb-b491-4cf7-a9f1-bf3703467719",
    )


def test_a_signal_event_is_sent_as_its_sources_owner(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.settings import ENV_EVENT_OWNERS
    from shepherd_handlers import events, runtime

    monkeypatch.setenv(ENV_EVENT_OWNERS, json.dumps({"acme.carrier": CARRIER, "acme.other": CAROL}))
    runtime.engine.cache_clear()
    wf = _start(stack)
    stack.run_agents()
    detail = {"workflow_id": wf, "name": "amended", "payload": {"eta": "2d"}, "signal_id": "e-1"}
    refused = events.handler(_event(detail, "acme.other"), LambdaContext())
    assert refused["status"] == "rejected" and refused["code"] == "WorkflowNotFound"
    unmapped = events.handler(_event(detail, "acme.unmapped"), LambdaContext())
    assert unmapped["status"] == "rejected" and unmapped["code"] == "SourceNotMapped"
    claimed = events.handler(_event({**detail, "owner": ALICE}, "acme.other"), LambdaContext())
    assert claimed["status"] == "rejected" and claimed["code"] == "OwnerNotAccepted"
    accepted = events.handler(_event(detail, "acme.carrier"), LambdaContext())
    assert accepted["status"] == "accepted" and accepted["duplicate"] is False
    again = events.handler(_event(detail, "acme.carrier"), LambdaContext())
    assert again["status"] == "accepted" and again["duplicate"] is True
    assert _steps(stack, wf)["amend"]["output"] == {"eta": "2d"}
    bad = events.handler(_event({"workflow_id": wf}, "acme.carrier"), LambdaContext())
    assert bad["status"] == "rejected" and bad["code"] == "InvalidEvent"


def test_a_workflows_pending_signals_are_listed_for_who_may_send_them(stack: Stack) -> None:
    """GET /workflows/{id}/signals (issue 37.8, the console's view): the names its steps wait
    for and the signals kept and not taken yet, oldest first; a taken one leaves the list;
    anyone who may not send it signals gets 404."""
    wf = _start(stack)  # `first` has not run: nothing waits, so signals are kept
    for n in (1, 2):
        path = f"/workflows/{wf}/signals/amended"
        assert stack.api("POST", path, body={"payload": {"n": n}}, caller=ALICE)[0] == 202
    status, _, view = stack.api("GET", f"/workflows/{wf}/signals", caller=ALICE)
    assert status == 200, view
    assert view["waits"] == {"amended": ["amend"]}
    assert [(p["sequence"], p["payload"]) for p in view["pending"]] == [
        (0, {"n": 1}),
        (1, {"n": 2}),
    ]
    assert all(p["name"] == "amended" and p["sent_at"] for p in view["pending"])
    assert stack.api("GET", f"/workflows/{wf}/signals", caller=CARRIER)[0] == 200
    assert stack.api("GET", f"/workflows/{wf}/signals", caller=CAROL)[0] == 404
    stack.run_agents()  # first runs, amend takes signal 0
    view = stack.api("GET", f"/workflows/{wf}/signals", caller=ALICE)[2]
    assert [p["sequence"] for p in view["pending"]] == [1]
