"""The approval routes (issue 25.3) through the API handler on moto: POST
/workflows/{id}/steps/{step}/approve and /reject, who may call them (the owner and the step's
Approvers; others 404), the decision shown in the workflow's view, and the error shape of a
second answer (409) or a bad body (400)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_stack import ALICE, BOB, Stack, stack_with_definitions
from shepherd.clock import iso

OPERATORS_ROLE = "arn:aws:iam::123456789012:role/Operators"  # BOB's sessions map to it
CAROL = "arn:aws:iam::123456789012:user/carol"

REVIEW = f"""\
Name: order_review
Comment: A test definition (handlers) - reserve, a person signs off, reserve again.
Steps:
  - Name: first
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
    Compensation: {{Agent: release_inventory, Pool: inventory, TimeoutSeconds: 10}}
  - Name: sign_off
    DependsOn: [first]
    Approval:
      TimeoutSeconds: 3600
      Approvers: ["{OPERATORS_ROLE}"]
  - Name: after
    DependsOn: [sign_off]
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
"""
ORDER = {"order_id": "o-1", "customer": "ada", "amount": 42.5, "items": [{"sku": "A", "qty": 1}]}


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    with stack_with_definitions(monkeypatch, tmp_path, {"order_review.yaml": REVIEW}) as running:
        yield running


def _waiting(stack: Stack) -> str:
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "order_review", "input": ORDER}, caller=ALICE
    )
    assert status == 202, reply
    wf = str(reply["workflow_id"])
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
    steps = {s["name"]: s for s in view["steps"]}
    assert steps["sign_off"]["status"] == "WAITING", view["steps"]
    assert steps["sign_off"]["wake_at"]
    return wf


def test_an_approver_approves_and_the_decision_is_shown(stack: Stack) -> None:
    wf = _waiting(stack)
    path = f"/workflows/{wf}/steps/sign_off/approve"
    status, _, reply = stack.api("POST", path, body={"comment": "fine"}, caller=CAROL)
    assert status == 404 and reply["error"]["code"] == "WorkflowNotFound"
    status, _, reply = stack.api("POST", path, body={"comment": "fine"}, caller=BOB)
    assert status == 200, reply
    assert reply["status"] == "SUCCEEDED"
    assert reply["output"] == {"approved": True, "by": OPERATORS_ROLE, "comment": "fine"}
    assert reply["decision"]["verdict"] == "approved" and reply["decision"]["by"] == OPERATORS_ROLE
    # A second answer changes nothing and says why.
    status, _, reply = stack.api("POST", f"/workflows/{wf}/steps/sign_off/reject", caller=ALICE)
    assert status == 409 and reply["error"]["code"] == "ApprovalNotPending"
    assert reply["error"]["field"] == "step"
    stack.run_agents()
    view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
    assert view["status"] == "SUCCEEDED"
    sign_off = next(s for s in view["steps"] if s["name"] == "sign_off")
    assert sign_off["decision"]["comment"] == "fine"


def test_the_owner_rejects_and_the_workflow_unwinds(stack: Stack) -> None:
    wf = _waiting(stack)
    status, _, reply = stack.api(
        "POST", f"/workflows/{wf}/steps/sign_off/reject", body={"comment": "no"}, caller=ALICE
    )
    assert status == 200, reply
    assert reply["status"] == "FAILED" and reply["error"]["type"] == "Rejected"
    view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
    assert view["status"] in ("COMPENSATING", "COMPENSATED")


def test_who_answered_and_when_stays_in_the_history(stack: Stack) -> None:
    """Issue 29.4: an answer is an operator action; GET /workflows/{id}/events keeps it
    (ApprovalAnswered: verdict, who, when, comment) after the workflow ended, an approval
    included, whose step's success announces nothing of its own."""
    answered = {}
    for action, verdict, caller in (("approve", "approved", BOB), ("reject", "rejected", ALICE)):
        wf = _waiting(stack)
        status, _, reply = stack.api(
            "POST",
            f"/workflows/{wf}/steps/sign_off/{action}",
            body={"comment": "ok"},
            caller=caller,
        )
        assert status == 200, reply
        answered[wf] = (verdict, reply["decision"])
    stack.run_agents()
    stack.relay()
    for wf, (verdict, decision) in answered.items():
        status, _, reply = stack.api("GET", f"/workflows/{wf}/events", caller=ALICE)
        assert status == 200, reply
        types = [e["type"] for e in reply["items"]]
        assert types[-1] in ("WorkflowSucceeded", "WorkflowCompensated"), types
        (event,) = [e for e in reply["items"] if e["type"] == "ApprovalAnswered"]
        assert event["detail"]["verdict"] == verdict == decision["verdict"]
        assert event["detail"]["by"] == decision["by"]
        assert event["detail"]["comment"] == "ok" and event["detail"]["step"] == "sign_off"
        assert event["at"] == event["detail"]["at"] == iso(decision["at"])  # the view: ms
    assert [d["by"] for _, d in answered.values()] == [OPERATORS_ROLE, ALICE]


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("steps/first/approve", None, 404, "StepNotFound"),
        ("steps/sign_off/approve", {"comment": "x" * 1001}, 400, "ValidationError"),
        ("steps/sign_off/approve", {"verdict": "yes"}, 400, "ValidationError"),
        ("steps/sign_off/reject", {"output": {}}, 400, "ValidationError"),
        ("steps/Bad-Name/approve", None, 400, "ValidationError"),
    ],
)
def test_bad_answers_are_refused_in_the_error_shape(
    stack: Stack, path: str, body: Any, status: int, code: str
) -> None:
    wf = _waiting(stack)
    kwargs = {} if body is None else {"body": body}
    got, _, reply = stack.api("POST", f"/workflows/{wf}/{path}", caller=ALICE, **kwargs)
    assert (got, reply["error"]["code"]) == (status, code), reply
    view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
    assert next(s for s in view["steps"] if s["name"] == "sign_off")["status"] == "WAITING"


# ------------------------------------------------------------------ GET /approvals (the inbox)


def _inbox(stack: Stack, caller: str, **query: Any) -> tuple[int, Any]:
    status, _, reply = stack.api("GET", "/approvals", caller=caller, query=query or None)
    return status, reply


def test_the_inbox_lists_a_pending_approval_to_whoever_may_answer_it(stack: Stack) -> None:
    wf = _waiting(stack)
    for who in (ALICE, BOB):  # the owner, and a session of the listed role
        status, reply = _inbox(stack, who)
        assert status == 200, reply
        (row,) = reply["items"]
        assert row["workflow_id"] == wf and row["step"] == "sign_off"
        assert row["type"] == "order_review"
        assert row["requested_at"].endswith("Z") and row["due_at"].endswith("Z")
        assert row["due_at"] > row["requested_at"]
        assert reply["next_token"] is None
    assert _inbox(stack, CAROL) == (200, {"items": [], "next_token": None})
    # Answered: gone from every inbox.
    stack.api("POST", f"/workflows/{wf}/steps/sign_off/approve", caller=BOB)
    assert _inbox(stack, ALICE)[1]["items"] == []
    assert _inbox(stack, BOB)[1]["items"] == []


def test_the_inbox_pages_newest_first_with_a_token_bound_to_its_caller(stack: Stack) -> None:
    started = {_waiting(stack) for _ in range(3)}
    status, first = _inbox(stack, ALICE, limit="2")
    assert status == 200 and len(first["items"]) == 2 and first["next_token"]
    status, second = _inbox(stack, ALICE, limit="2", next_token=first["next_token"])
    assert status == 200 and len(second["items"]) == 1 and second["next_token"] is None
    rows = first["items"] + second["items"]
    assert {r["workflow_id"] for r in rows} == started
    keys = [(r["requested_at"], r["workflow_id"]) for r in rows]
    assert keys == sorted(keys, reverse=True)
    # Another caller's token, a forged one, an edited one: 400 in the error shape.
    token = first["next_token"]
    payload, mac = token.split(".")
    for bad, who in ((token, BOB), ("x.y", ALICE), (f"{payload}.{mac[:-2]}AA", ALICE)):
        status, reply = _inbox(stack, who, next_token=bad)
        assert status == 400, reply
        assert reply["error"]["code"] == "ValidationError"
        assert reply["error"]["field"] == "next_token"
    # A list token is not an inbox token.
    wf_token = stack.api("GET", "/workflows", caller=ALICE, query={"limit": "1"})[2]["next_token"]
    assert wf_token and _inbox(stack, ALICE, next_token=wf_token)[0] == 400


@pytest.mark.parametrize(
    "query", [{"limit": "0"}, {"limit": "101"}, {"limit": "ten"}, {"next_token": ""}, {"x": "1"}]
)
def test_a_bad_inbox_query_is_refused_in_the_error_shape(
    stack: Stack, query: dict[str, str]
) -> None:
    status, reply = _inbox(stack, ALICE, **query)
    assert status == 400, reply
    assert reply["error"]["code"] == "ValidationError"
