"""The REST API through the real handler, with API Gateway proxy event shapes, on moto."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_stack import ALICE, BOB, Stack
from shepherd.errors import PermanentError
from shepherd.limits import MAX_INPUT_BYTES, MAX_START_BODY_BYTES
from shepherd_examples.agents import registry
from support import ENV, ORDER, view_step

BOB_ROLE = "arn:aws:iam::123456789012:role/Operators"  # what BOB's session maps to


@pytest.fixture
def swap_agent() -> Iterator[Any]:
    original: dict[str, Any] = {}

    def swap(name: str, fn: Any) -> None:
        original.setdefault(name, registry.get(name))
        registry.register(name, fn)

    yield swap
    for name, fn in original.items():
        registry.register(name, fn)


def start(stack: Stack, payload: Any = None, **kwargs: Any) -> dict[str, Any]:
    body = payload if payload is not None else {"type": "order_fulfilment", "input": ORDER}
    status, headers, reply = stack.api("POST", "/workflows", body=body, **kwargs)
    assert status == 202, reply
    assert headers["Location"] == f"/workflows/{reply['workflow_id']}"
    return reply


def test_start_run_and_read_a_workflow(stack: Stack) -> None:
    accepted = start(stack)
    assert accepted["status"] == "RUNNING" and accepted["created"] is True
    assert stack.run_agents() == 4
    status, _, view = stack.api("GET", accepted["location"])
    assert status == 200
    assert view["status"] == "SUCCEEDED" and view["type"] == "order_fulfilment"
    # A small order skips the fraud review; one that names no remind_at, the reminder.
    assert [(s["name"], s["status"]) for s in view["steps"]] == [
        ("reserve_inventory", "SUCCEEDED"),
        ("fraud_review", "SKIPPED"),
        ("charge_payment", "SUCCEEDED"),
        ("ship_order", "SUCCEEDED"),
        ("notify_customer", "SUCCEEDED"),
        ("until_reminder", "SKIPPED"),
        ("send_reminder", "SKIPPED"),
    ]
    charge = view_step(view, "charge_payment")
    assert charge["status"] == "SUCCEEDED" and charge["attempt"] == 1
    assert charge["output"]["amount"] == ORDER["amount"]
    assert charge["started_at"].endswith("Z") and charge["attempts"][0]["outcome"] == "ok"
    assert view["output"]["ship_order"]["tracking"].startswith("TRK")
    text = json.dumps(view)
    for internal in (
        "lease_owner",
        "watch_shard",
        "due_at",
        "callback_token",
        "request_hash",
        "list_pk",
        "WF#",
    ):
        assert internal not in text


def test_idempotency_key_in_body_or_header(stack: Stack) -> None:
    first = start(
        stack, {"type": "order_fulfilment", "input": ORDER, "idempotency_key": "order-77"}
    )
    replay = start(
        stack, {"type": "order_fulfilment", "input": ORDER}, headers={"Idempotency-Key": "order-77"}
    )
    assert replay["workflow_id"] == first["workflow_id"] and replay["created"] is False
    status, _, error = stack.api(
        "POST",
        "/workflows",
        body={"type": "order_fulfilment", "input": {**ORDER, "amount": 1}},
        headers={"Idempotency-Key": "order-77"},
    )
    assert status == 409
    assert (
        error["error"]["code"] == "IdempotencyConflict"
        and error["error"]["field"] == "idempotency_key"
    )


@pytest.mark.parametrize(
    ("body", "raw", "code", "field"),
    [
        ({"input": ORDER}, None, "ValidationError", "type"),
        (
            {"type": "order_fulfilment", "input": ORDER, "extra": 1},
            None,
            "ValidationError",
            "extra",
        ),
        ({"type": "nope", "input": {}}, None, "UnknownWorkflowType", "type"),
        (
            {"type": "order_fulfilment", "input": {**ORDER, "items": []}},
            None,
            "InvalidInput",
            "input.items",
        ),
        ({"type": "order_fulfilment", "input": {"order_id": "x"}}, None, "InvalidInput", "input"),
        (None, "{not json", "InvalidJson", "body"),
        ({"type": 5, "input": {}}, None, "ValidationError", "type"),
    ],
)
def test_bad_bodies_get_400_naming_the_field(
    stack: Stack, body: Any, raw: str | None, code: str, field: str
) -> None:
    status, _, reply = stack.api("POST", "/workflows", body=body, raw_body=raw)
    assert status == 400, reply
    assert reply["error"]["code"] == code
    assert reply["error"]["field"] == field
    assert reply["error"]["message"]
    status, _, listing = stack.api("GET", "/workflows")
    assert listing["items"] == []  # nothing was accepted


def test_an_invalid_input_lists_every_problem_with_its_path(stack: Stack) -> None:
    """Issue 39: every schema error of a start input, not the first only (`problems`, each
    with its path; `field` the first's), and a misspelt type answered with the nearest."""
    bad = {**ORDER, "amount": -5, "items": [{"sku": "A", "qty": 0}, {"qty": 1}]}
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": bad}
    )
    assert status == 400, reply
    error = reply["error"]
    assert (error["code"], error["field"]) == ("InvalidInput", "input.amount")
    assert [p["field"] for p in error["problems"]] == [
        "input.amount",
        "input.items[0].qty",
        "input.items[1]",
    ]
    assert all(p["message"].startswith(p["field"]) for p in error["problems"])
    assert error["message"].endswith("(3 problems)")
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilmnet", "input": ORDER}
    )
    assert status == 400 and reply["error"]["code"] == "UnknownWorkflowType"
    assert reply["error"]["message"].endswith("did you mean 'order_fulfilment'?")


def test_too_large_input_and_body_get_413(stack: Stack) -> None:
    big = {**ORDER, "note": "x" * MAX_INPUT_BYTES}
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": big}
    )
    assert status == 413 and reply["error"]["code"] == "InputTooLarge"
    huge = {**ORDER, "note": "x" * MAX_START_BODY_BYTES}
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": huge}
    )
    assert status == 413 and reply["error"]["code"] == "BodyTooLarge"


def test_unknown_things_get_404(stack: Stack) -> None:
    assert stack.api("GET", "/workflows/doesnotexist")[0] == 404
    assert stack.api("POST", "/workflows/doesnotexist/cancel")[0] == 404
    assert stack.api("GET", "/definitions/nope")[2]["error"]["code"] == "DefinitionNotFound"
    status, _, reply = stack.api("GET", "/nowhere")
    assert status == 404 and reply["error"]["code"] == "NotFound"
    status, _, reply = stack.api("GET", "/workflows", query={"limit": "0"})
    assert status == 400 and reply["error"]["field"] == "limit"
    status, _, reply = stack.api("GET", "/workflows", query={"next_token": "garbage!"})
    assert status == 400 and reply["error"]["field"] == "next_token"


def test_callers_only_see_their_own_workflows(stack: Stack) -> None:
    mine = start(stack, caller=ALICE)
    theirs = start(stack, caller=BOB)
    assert stack.api("GET", f"/workflows/{mine['workflow_id']}", caller=BOB)[0] == 404
    assert stack.api("POST", f"/workflows/{mine['workflow_id']}/cancel", caller=BOB)[0] == 404
    assert stack.api("GET", f"/workflows/{theirs['workflow_id']}", caller=BOB)[0] == 200
    alice_list = stack.api("GET", "/workflows", caller=ALICE)[2]["items"]
    assert [w["workflow_id"] for w in alice_list] == [mine["workflow_id"]]
    # The same idempotency key from another caller is another workflow.
    a = start(
        stack, {"type": "order_fulfilment", "input": ORDER, "idempotency_key": "k"}, caller=ALICE
    )
    b = start(
        stack, {"type": "order_fulfilment", "input": ORDER, "idempotency_key": "k"}, caller=BOB
    )
    assert a["workflow_id"] != b["workflow_id"]
    # Sessions of one role are one owner.
    other_session = BOB.replace("bob-session", "another-session")
    assert stack.api("GET", f"/workflows/{theirs['workflow_id']}", caller=other_session)[0] == 200


def test_list_is_newest_first_paginated_and_filtered(stack: Stack) -> None:
    ids = [start(stack)["workflow_id"] for _ in range(3)]
    env = start(stack, {"type": "provision_environment", "input": ENV})["workflow_id"]
    stack.run_agents()
    page1 = stack.api("GET", "/workflows", query={"limit": "2"})[2]
    assert [w["workflow_id"] for w in page1["items"]] == [env, ids[2]]
    page2 = stack.api("GET", "/workflows", query={"limit": "2", "next_token": page1["next_token"]})[
        2
    ]
    assert [w["workflow_id"] for w in page2["items"]] == [ids[1], ids[0]]
    only_env = stack.api("GET", "/workflows", query={"type": "provision_environment"})[2]["items"]
    assert [w["workflow_id"] for w in only_env] == [env]
    succeeded = stack.api("GET", "/workflows", query={"status": "SUCCEEDED"})[2]["items"]
    assert len(succeeded) == 4
    assert stack.api("GET", "/workflows", query={"status": "RUNNING"})[2]["items"] == []
    assert stack.api("GET", "/workflows", query={"status": "BOGUS"})[0] == 400


def test_lookup_by_idempotency_key_finds_only_the_callers_own(stack: Stack) -> None:
    keyed = {"type": "order_fulfilment", "input": ORDER, "idempotency_key": "order-9"}
    mine = start(stack, keyed)["workflow_id"]
    theirs = start(stack, keyed, caller=BOB)["workflow_id"]
    start(stack)  # another of ALICE's, without the key

    def lookup(key: str, caller: str = ALICE, **query: str) -> list[str]:
        status, _, reply = stack.api(
            "GET", "/workflows", query={"idempotency_key": key, **query}, caller=caller
        )
        assert status == 200, reply
        assert reply["next_token"] is None
        return [w["workflow_id"] for w in reply["items"]]

    assert lookup("order-9") == [mine]
    assert lookup("order-9", caller=BOB) == [theirs]
    assert lookup("order-10") == []
    assert lookup("order-9", type="order_fulfilment", status="RUNNING") == [mine]
    assert lookup("order-9", type="provision_environment") == []
    assert lookup("order-9", status="SUCCEEDED") == []
    status, _, reply = stack.api(
        "GET", "/workflows", query={"idempotency_key": "order-9", "next_token": "x"}
    )
    assert status == 400 and reply["error"]["field"] == "next_token"


def test_cancel_compensates_what_succeeded_and_ends_cancelled(stack: Stack) -> None:
    wf = start(stack)["workflow_id"]
    from aws_stack import LambdaContext, sqs_event
    from shepherd_handlers import agent

    (reserve,) = stack.receive("inventory")
    agent.handler(sqs_event([(reserve["MessageId"], reserve["Body"])], "arn:q"), LambdaContext())
    stack.clients["sqs"].delete_message(
        QueueUrl=stack.queues["inventory"].url, ReceiptHandle=reserve["ReceiptHandle"]
    )
    status, _, reply = stack.api("POST", f"/workflows/{wf}/cancel")
    assert status == 202 and reply["status"] == "CANCELLING"
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}")[2]
    assert view["status"] == "CANCELLED"
    assert [c["name"] for c in view["compensations"]] == ["reserve_inventory"]
    assert {s["name"]: s["status"] for s in view["steps"]}["charge_payment"] == "CANCELLED"
    status, _, reply = stack.api("POST", f"/workflows/{wf}/cancel")
    assert status == 409 and reply["error"]["code"] == "InvalidTransition"


def test_compensations_are_listed_in_the_order_they_are_undone(stack: Stack) -> None:
    """Not by their dispatch times: a look writes its sweep's `now`, which can be earlier
    than an undo an agent started meanwhile (an e2e run listed reserve before charge)."""
    from shepherd.conditions import Update
    from shepherd.keys import item_sk, wf_pk
    from shepherd_handlers import runtime

    body = {
        "type": "order_fulfilment",
        "input": {**ORDER, "faults": {"ship_order": {"mode": "permanent"}}},
    }
    wf = start(stack, body)["workflow_id"]
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}")[2]
    assert view["status"] == "COMPENSATED"
    undone = [c["name"] for c in view["compensations"]]
    assert undone[-2:] == ["charge_payment", "reserve_inventory"]
    store = runtime.engine().ports.store
    for at, name in enumerate(reversed(undone)):  # the first undone dispatched last
        store.update(
            wf_pk(wf), item_sk("compensation", name), Update(set={"dispatched_at": at}), None
        )
    again = stack.api("GET", f"/workflows/{wf}")[2]
    assert [c["name"] for c in again["compensations"]] == undone


def test_retry_redrives_a_failed_workflow_from_its_failed_compensation(
    stack: Stack, swap_agent: Any
) -> None:
    def refund_down(ctx: Any) -> Any:
        raise PermanentError("refunds are switched off", name="RefundsDisabled")

    swap_agent("refund_payment", refund_down)
    wf = start(
        stack,
        {
            "type": "order_fulfilment",
            "input": {**ORDER, "faults": {"ship_order": {"mode": "permanent"}}},
        },
    )["workflow_id"]
    stack.run_agents()
    failed = stack.api("GET", f"/workflows/{wf}")[2]
    assert failed["status"] == "FAILED" and failed["error"]["operator_needed"] is True
    assert stack.api("POST", f"/workflows/{wf}/cancel")[0] == 409
    swap_agent("refund_payment", registry.get("release_inventory") and _refund_ok)
    status, _, reply = stack.api("POST", f"/workflows/{wf}/retry")
    assert status == 202 and reply["status"] == "COMPENSATING"
    stack.run_agents()
    done = stack.api("GET", f"/workflows/{wf}")[2]
    assert done["status"] == "COMPENSATED" and done["redrives"] == 1
    refund = next(c for c in done["compensations"] if c["name"] == "charge_payment")
    assert [a["outcome"] for a in refund["attempts"]] == ["error", "ok"] and refund["attempt"] == 2
    # Each attempt says why it failed, after the step's own error moved on (issue 29.5).
    assert [a.get("message") for a in refund["attempts"]] == ["refunds are switched off", None]
    assert done["error"]["step"] == "ship_order"  # the original cause is restored
    assert stack.api("POST", f"/workflows/{wf}/retry")[0] == 409


def test_each_attempt_shows_its_messages_start_and_the_error_route_the_whole(
    stack: Stack, swap_agent: Any
) -> None:
    """Issue 29.5: every ended attempt in the view carries its error's name and its message,
    cut to 100 characters (marked "…"); the step's last error is whole through
    GET /workflows/{id}/steps/{step}/error."""
    long = "the card processor said: " + "declined " * 40
    swap_agent("charge_payment", _raise(PermanentError(long, name="CardDeclined")))
    wf = start(stack)["workflow_id"]
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}")[2]
    charge = view_step(view, "charge_payment")
    (attempt,) = charge["attempts"]
    assert (attempt["outcome"], attempt["error"]) == ("error", "CardDeclined")
    assert attempt["message"] == long[:99] + "…" and len(attempt["message"]) == 100
    status, _, full = stack.api("GET", f"/workflows/{wf}/steps/charge_payment/error")
    assert status == 200 and full["message"] == long and full["type"] == "CardDeclined"


def _raise(exc: Exception) -> Any:
    def agent(ctx: Any) -> Any:
        raise exc

    return agent


def _refund_ok(ctx: Any) -> Any:
    return {"refunded": ctx.step_output["charge_id"]}


def test_definitions_routes(stack: Stack) -> None:
    listing = stack.api("GET", "/definitions")[2]["items"]
    assert {d["name"] for d in listing} == {
        "onboard_tenant",
        "order_amendment",
        "order_fulfilment",
        "provision_environment",
        "transcode_video",
    }
    env = stack.api("GET", "/definitions/provision_environment")[2]
    assert env["steps"] == [
        "create_network",
        "create_storage",
        "create_compute",
        "configure",
        "verify",
    ]
    assert env["pools"] == ["cloud", "config"]
    assert env["definition"]["Steps"][2]["DependsOn"] == ["create_network", "create_storage"]
    assert len(env["hash"]) == 20
    video = stack.api("GET", "/definitions/transcode_video")[2]
    assert video["steps"] == ["split_video", "encode_chunks", "package_video"]
    assert video["pools"] == ["media"]
    assert video["definition"]["Steps"][1]["Map"]["MaxConcurrency"] == 3
    tenant = stack.api("GET", "/definitions/onboard_tenant")[2]
    assert tenant["pools"] == ["config", "notifications"]  # its children's are their own


def test_metrics_are_emitted_as_emf(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    start(stack)
    stack.run_agents()
    stack.relay()  # workflow counts come from the events, which come from the stream
    emitted: dict[str, float] = {}
    for line in capsys.readouterr().out.splitlines():
        if '"_aws"' not in line:
            continue
        blob = json.loads(line)
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "Shepherd" and directive["Dimensions"] == [["service"]]
        for metric in directive["Metrics"]:
            emitted[metric["Name"]] = emitted.get(metric["Name"], 0) + sum(blob[metric["Name"]])
    assert emitted == {"WorkflowsStarted": 1, "StepAttempts": 4, "WorkflowsSucceeded": 1}


def test_log_lines_of_work_carry_workflow_step_and_attempt(stack: Stack) -> None:
    from shepherd_handlers.runtime import logger

    stream = io.StringIO()
    previous = logger.registered_handler.setStream(stream)  # type: ignore[attr-defined]
    level = logger.log_level
    logger.setLevel("INFO")  # the logger is per process; another test may have quietened it
    try:
        wf = start(stack)["workflow_id"]
        stack.run_agents()
    finally:
        logger.registered_handler.setStream(previous)  # type: ignore[attr-defined]
        logger.setLevel(level)
    handled = [
        json.loads(line) for line in stream.getvalue().splitlines() if '"task handled"' in line
    ]
    assert len(handled) == 4
    for line in handled:
        assert line["workflow_id"] == wf and line["attempt"] == 1 and line["step"]
        assert line["service"] == "shepherd" and line["level"] == "INFO"


def test_pause_resume_with_a_replacement_input_and_compensate(
    stack: Stack, swap_agent: Any
) -> None:
    amounts: list[Any] = []

    def charge(ctx: Any) -> Any:
        amounts.append(ctx.input["amount"])
        if ctx.input["amount"] > 100:
            raise PermanentError("over the card limit", name="CardDeclined")
        return {"charge_id": "ch-1", "amount": ctx.input["amount"]}

    swap_agent("charge_payment", charge)
    wf = start(stack, {"type": "order_fulfilment", "input": {**ORDER, "amount": 500}})[
        "workflow_id"
    ]
    status, _, reply = stack.api("POST", f"/workflows/{wf}/pause")
    assert (status, reply["status"]) == (202, "PAUSED")
    assert stack.api("POST", f"/workflows/{wf}/pause")[0] == 202  # idempotent
    stack.run_agents()  # the root's message arrives while paused: dropped
    view = stack.api("GET", f"/workflows/{wf}")[2]
    assert view["status"] == "PAUSED" and view["pause"]["reason"] == "operator"
    assert view["pause"]["by"] == ALICE and view["paused_at"].endswith("Z")
    # Never claimed: it has no item yet, and the view shows it PENDING from the definition.
    assert view["steps"][0]["status"] == "PENDING" and view["steps"][0]["attempt"] == 0
    status, _, reply = stack.api("POST", f"/workflows/{wf}/resume", body={"step": "nope"})
    assert status == 409 and "no step 'nope'" in reply["error"]["message"]
    status, _, reply = stack.api(
        "POST",
        f"/workflows/{wf}/resume",
        body={"step": "charge_payment", "input": {**ORDER, "amount": 90}},
    )
    assert (status, reply["status"]) == (202, "RUNNING")
    stack.run_agents()
    assert amounts == [90]  # the replacement input reached the step
    view = stack.api("GET", f"/workflows/{wf}")[2]
    assert view["status"] == "SUCCEEDED"
    charge_view = view_step(view, "charge_payment")
    assert charge_view["input"]["amount"] == 90
    replaced = [a for a in charge_view["attempts"] if a["outcome"] == "input_replaced"]
    assert replaced and replaced[0]["by"] == ALICE

    other = start(stack)["workflow_id"]
    assert stack.api("POST", f"/workflows/{other}/pause")[0] == 202
    status, _, reply = stack.api("POST", f"/workflows/{other}/compensate")
    assert status == 202 and reply["status"] in ("COMPENSATING", "COMPENSATED")
    stack.run_agents()
    assert stack.api("GET", f"/workflows/{other}")[2]["status"] == "COMPENSATED"
    for action in ("pause", "resume", "compensate"):
        status, _, reply = stack.api("POST", f"/workflows/{other}/{action}")
        assert status == 409 and reply["error"]["code"] == "InvalidTransition"
    assert stack.api("POST", f"/workflows/{wf}/pause", caller=BOB)[0] == 404  # not BOB's


def test_a_resume_whose_replacement_input_misfits_the_schema_is_400_and_writes_nothing(
    stack: Stack,
) -> None:
    """Issue 29.7: the replacement stands in for the workflow input the step reads, so the
    start's InputSchema check (the one validator) refuses it in the error shape, naming the
    field, before any write: still PAUSED, no replacement, no history entry."""
    wf = start(stack)["workflow_id"]
    assert stack.api("POST", f"/workflows/{wf}/pause")[0] == 202
    before = stack.api("GET", f"/workflows/{wf}")[2]
    for bad, field in (
        ({**ORDER, "amount": -5}, "input.amount"),
        ({**ORDER, "items": [{"sku": "A", "qty": 0}]}, "input.items[0].qty"),
        ({"order_id": "o-1"}, "input"),
    ):
        status, _, reply = stack.api(
            "POST", f"/workflows/{wf}/resume", body={"step": "charge_payment", "input": bad}
        )
        assert status == 400, reply
        assert reply["error"]["code"] == "InvalidInput" and reply["error"]["field"] == field
        assert reply["error"]["message"].startswith(field), reply
    assert stack.api("GET", f"/workflows/{wf}")[2] == before  # nothing written
    status, _, reply = stack.api(
        "POST", f"/workflows/{wf}/resume", body={"step": "charge_payment", "input": ORDER}
    )
    assert (status, reply["status"]) == (202, "RUNNING")


def test_pools_list_pause_and_resume(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    from shepherd.settings import ENV_OPERATORS
    from shepherd_handlers import runtime

    monkeypatch.setenv(ENV_OPERATORS, ALICE)
    runtime.engine.cache_clear()
    start(stack)
    status, _, pools = stack.api("GET", "/pools")
    assert status == 200
    by_name = {p["name"]: p for p in pools["items"]}
    assert set(by_name) == {
        "inventory",
        "payments",
        "shipping",
        "notifications",
        "cloud",
        "config",
        "media",
    }
    assert by_name["inventory"]["paused"] is False
    assert by_name["inventory"]["backlog"]["visible"] == 1
    status, _, pool = stack.api("POST", "/pools/inventory/pause")
    assert status == 200 and pool["paused"] is True and pool["by"] == ALICE
    assert stack.api("GET", "/pools")[2]["items"][
        [p["name"] for p in pools["items"]].index("inventory")
    ]["paused"]
    status, _, pool = stack.api("POST", "/pools/inventory/resume")
    assert status == 200 and pool["paused"] is False and pool["resumed_at"].endswith("Z")
    status, _, reply = stack.api("POST", "/pools/no-such-pool/pause")
    assert status == 404 and reply["error"]["code"] == "PoolNotFound"


def test_only_an_operator_may_pause_a_pool_or_see_who_did(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile caller: a pool is shared by every caller's workflows. Any caller could pause
    any pool (stalling everyone's workflows) and read the ARN of whoever paused it; now only
    the operators the deployment names may, and only they see `by`."""
    from shepherd.settings import ENV_OPERATORS
    from shepherd_handlers import runtime

    monkeypatch.setenv(ENV_OPERATORS, BOB_ROLE)
    runtime.engine.cache_clear()
    for action in ("pause", "resume"):
        status, _, reply = stack.api("POST", f"/pools/inventory/{action}")  # as alice
        assert status == 403 and reply["error"]["code"] == "OperatorOnly", reply
    assert not stack.api("GET", "/pools")[2]["items"][0]["paused"]  # nothing changed
    status, _, pool = stack.api("POST", "/pools/inventory/pause", caller=BOB)  # a role session
    assert status == 200 and pool["by"] == BOB_ROLE
    seen_by_alice = {p["name"]: p for p in stack.api("GET", "/pools")[2]["items"]}
    assert seen_by_alice["inventory"]["paused"] is True and seen_by_alice["inventory"]["by"] is None
    seen_by_bob = {p["name"]: p for p in stack.api("GET", "/pools", caller=BOB)[2]["items"]}
    assert seen_by_bob["inventory"]["by"] == BOB_ROLE
    # Each list says whether its caller is an operator (a console offers the actions only
    # then, issue 35.5).
    for route in ("/pools", "/schedules"):
        assert stack.api("GET", route)[2]["operator"] is False
        assert stack.api("GET", route, caller=BOB)[2]["operator"] is True
    # No operator configured: nobody may (the default).
    monkeypatch.delenv(ENV_OPERATORS)
    runtime.engine.cache_clear()
    assert stack.api("POST", "/pools/inventory/resume", caller=BOB)[0] == 403
