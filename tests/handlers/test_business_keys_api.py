"""Business keys through the handlers on moto (issue 37.3, 37.5): `POST /signals` sends a
signal by its match to every open workflow of the caller waiting on it (through the by_key
index on DynamoDB's own adapter), a `Signal` event naming a match does the same as its
source's owner; a start's `tags` show on the workflow and its list row, and `GET
/workflows?tag=key:value` lists the caller's tagged workflows, newest first, page by page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_stack import ALICE, LambdaContext, Stack, stack_with_definitions
from shepherd_cli import lambda_kit

BOB = "arn:aws:iam::123456789012:user/bob"

AMEND = """\
Name: order_amend
Comment: A test definition (handlers) - reserve, wait for the amendment of its order, reserve.
Steps:
  - Name: first
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
  - Name: amend
    DependsOn: [first]
    WaitForSignal: {Name: amended, TimeoutSeconds: 3600, Match: {order_id: $.input.order_id}}
  - Name: after
    DependsOn: [amend]
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
"""


def order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "customer": "ada", "amount": 1, "items": [{"sku": "A", "qty": 1}]}


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    with stack_with_definitions(monkeypatch, tmp_path, {"order_amend.yaml": AMEND}) as running:
        yield running


def _start(stack: Stack, order_id: str, caller: str = ALICE, **body: Any) -> str:
    status, _, reply = stack.api(
        "POST",
        "/workflows",
        body={"type": "order_amend", "input": order(order_id), **body},
        caller=caller,
    )
    assert status == 202, reply
    return str(reply["workflow_id"])


def _status(stack: Stack, wf: str, step: str, caller: str = ALICE) -> str:
    view = stack.api("GET", f"/workflows/{wf}", caller=caller)[2]
    return str({s["name"]: s for s in view["steps"]}[step]["status"])


def test_a_signal_by_its_match_reaches_the_callers_open_workflows_waiting_on_it(
    stack: Stack,
) -> None:
    one, two = _start(stack, "o-1"), _start(stack, "o-1")
    other = _start(stack, "o-2")
    bobs = _start(stack, "o-1", caller=BOB)
    stack.run_agents()
    body = {"name": "amended", "match": {"order_id": "o-1"}, "payload": {"qty": 2}}
    status, _, reply = stack.api("POST", "/signals", body=body, caller=ALICE)
    assert status == 202, reply
    assert reply["name"] == "amended"
    assert sorted(s["workflow_id"] for s in reply["signals"]) == sorted([one, two])
    assert all(s["taken_by"] == "amend" for s in reply["signals"])
    stack.run_agents()
    for wf in (one, two):
        assert stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]["status"] == "SUCCEEDED"
    assert _status(stack, other, "amend") == "WAITING"
    assert _status(stack, bobs, "amend", caller=BOB) == "WAITING"
    # Nobody waits on it: 202 and no signals; a bad match is the API's 400.
    status, _, reply = stack.api(
        "POST", "/signals", body={**body, "match": {"order_id": "o-9"}}, caller=ALICE
    )
    assert status == 202 and reply["signals"] == []
    for bad in ({"order_id": ["a"]}, {}, {"bad key": "x"}):
        status, _, reply = stack.api("POST", "/signals", body={**body, "match": bad}, caller=ALICE)
        assert status == 400 and set(reply) == {"error"}, (bad, reply)


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


def test_a_signal_event_naming_a_match_reaches_its_sources_owners_workflows(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.settings import ENV_EVENT_OWNERS
    from shepherd_handlers import events, runtime

    monkeypatch.setenv(ENV_EVENT_OWNERS, json.dumps({"acme.shop": ALICE}))
    runtime.engine.cache_clear()
    wf = _start(stack, "o-1")
    stack.run_agents()
    detail = {"match": {"order_id": "o-1"}, "name": "amended", "payload": {"eta": "2d"}}
    accepted = events.handler(_event(detail, "acme.shop"), LambdaContext())
    assert accepted == {"status": "accepted", "name": "amended", "workflow_ids": [wf]}
    assert _status(stack, wf, "amend") == "SUCCEEDED"
    both = events.handler(_event({**detail, "workflow_id": wf}, "acme.shop"), LambdaContext())
    assert both["status"] == "rejected" and both["code"] == "InvalidEvent"


def test_tags_show_on_the_workflow_and_list_it_by_tag_newest_first(stack: Stack) -> None:
    tagged = [_start(stack, f"o-{i}", tags={"customer": "ada", "i": str(i)}) for i in range(5)]
    _start(stack, "x", tags={"customer": "bob"})
    _start(stack, "y")
    view = stack.api("GET", f"/workflows/{tagged[0]}", caller=ALICE)[2]
    assert view["tags"] == {"customer": "ada", "i": "0"}
    listed: list[str] = []
    query: dict[str, Any] = {"tag": "customer:ada", "limit": "2"}
    while True:
        status, _, page = stack.api("GET", "/workflows", query=query, caller=ALICE)
        assert status == 200, page
        listed += [row["workflow_id"] for row in page["items"]]
        assert all(row["tags"]["customer"] == "ada" for row in page["items"])
        if not page.get("next_token"):
            break
        query = {**query, "next_token": page["next_token"]}
    assert sorted(listed) == sorted(tagged) and len(listed) == 5
    # A token is bound to its tag; another caller sees none of alice's.
    status, _, page = stack.api("GET", "/workflows", query={"tag": "customer:ada"}, caller=BOB)
    assert status == 200 and page["items"] == []
    for bad in ({"tag": "nocolon"}, {"tag": "a:b", "status": "RUNNING"}, {"tag": "a b:c"}):
        status, _, reply = stack.api("GET", "/workflows", query=bad, caller=ALICE)
        assert status == 400 and reply["error"]["field"] == "tag", (bad, reply)
    status, _, reply = stack.api(
        "POST",
        "/workflows",
        body={
            "type": "order_amend",
            "input": order("z"),
            "tags": {f"k{i}": "v" for i in range(11)},
        },
        caller=ALICE,
    )
    assert status == 400, reply
