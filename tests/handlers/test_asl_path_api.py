"""`GET /workflows/{id}/path` (issue 42.4): a state machine's path through the API handler on
moto: every state entered, in order, with its visit, input and output; paged with a signed
token bound to the caller and the workflow; the owner's only; a native workflow has none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_stack import ALICE, stack_with_definitions

CAROL = "arn:aws:iam::123456789012:user/carol"

# A loop of control states only (no Lambda): Init, then Inc and More? three times, then Done.
COUNT_UP = {
    "Comment": "counts to three",
    "StartAt": "Init",
    "States": {
        "Init": {"Type": "Pass", "Parameters": {"n": 0, "label.$": "$.label"}, "Next": "Inc"},
        "Inc": {
            "Type": "Pass",
            "Parameters": {"n.$": "States.MathAdd($.n, 1)", "label.$": "$.label"},
            "Next": "More?",
        },
        "More?": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.n", "NumericLessThan": 3, "Next": "Inc"}],
            "Default": "Done",
        },
        "Done": {"Type": "Succeed"},
    },
}


def test_the_path_lists_each_state_entered_with_its_visit_and_data_paged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = {"count_up.asl.json": json.dumps(COUNT_UP)}
    with stack_with_definitions(monkeypatch, tmp_path, files) as stack:
        status, _, reply = stack.api(
            "POST", "/workflows", body={"type": "count_up", "input": {"label": "x"}}, caller=ALICE
        )
        assert status == 202, reply
        wf = reply["workflow_id"]
        view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
        assert view["status"] == "SUCCEEDED" and view["output"] == {"n": 3, "label": "x"}

        entries, token, pages = [], None, 0
        while True:
            query = {"limit": "3", **({"next_token": token} if token else {})}
            status, _, page = stack.api("GET", f"/workflows/{wf}/path", caller=ALICE, query=query)
            assert status == 200, page
            assert len(page["items"]) <= 3
            entries += page["items"]
            pages += 1
            token = page.get("next_token")
            if token is None:
                break
        assert pages == 3  # 8 entries, 3 a page
        assert [(e["state"], e["visit"]) for e in entries] == [
            ("Init", 1),
            ("Inc", 1),
            ("More?", 1),
            ("Inc", 2),
            ("More?", 2),
            ("Inc", 3),
            ("More?", 3),
            ("Done", 1),
        ]
        assert [e["number"] for e in entries] == list(range(8))
        second_inc = entries[3]
        assert second_inc["input"] == {"n": 1, "label": "x"}
        assert second_inc["output"] == {"n": 2, "label": "x"}
        assert entries[0]["input"] == {"label": "x"}
        assert all(e["entered_at"] and e["exited_at"] for e in entries)


def test_the_path_is_the_owners_and_a_native_workflow_has_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = {"count_up.asl.json": json.dumps(COUNT_UP)}
    with stack_with_definitions(monkeypatch, tmp_path, files) as stack:
        wf = stack.api(
            "POST", "/workflows", body={"type": "count_up", "input": {"label": "y"}}, caller=ALICE
        )[2]["workflow_id"]
        status, _, reply = stack.api("GET", f"/workflows/{wf}/path", caller=CAROL)
        assert status == 404 and reply["error"]["code"] == "WorkflowNotFound"

        status, _, page = stack.api(
            "GET", f"/workflows/{wf}/path", caller=ALICE, query={"limit": "2"}
        )
        assert status == 200 and page["next_token"]
        # The token is bound to its caller and its workflow.
        status, _, reply = stack.api(
            "GET", f"/workflows/{wf}/path", caller=CAROL, query={"next_token": page["next_token"]}
        )
        assert status == 404
        other = stack.api(
            "POST", "/workflows", body={"type": "count_up", "input": {"label": "z"}}, caller=ALICE
        )[2]["workflow_id"]
        status, _, reply = stack.api(
            "GET",
            f"/workflows/{other}/path",
            caller=ALICE,
            query={"next_token": page["next_token"]},
        )
        assert status == 400 and reply["error"]["field"] == "next_token"

        order = {"order_id": "o-1", "amount": 10, "items": [{"sku": "a", "qty": 1}]}
        native = stack.api(
            "POST", "/workflows", body={"type": "order_fulfilment", "input": order}, caller=ALICE
        )
        assert native[0] == 202, native
        status, _, reply = stack.api(
            "GET", f"/workflows/{native[2]['workflow_id']}/path", caller=ALICE
        )
        assert status == 404 and reply["error"]["code"] == "PathNotFound"


def test_shepherd_path_prints_every_state_entered_through_every_page(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shepherd_cli import main as cli

    files = {"count_up.asl.json": json.dumps(COUNT_UP)}
    with stack_with_definitions(monkeypatch, tmp_path, files) as stack:
        wf = stack.api(
            "POST", "/workflows", body={"type": "count_up", "input": {"label": "c"}}, caller=ALICE
        )[2]["workflow_id"]
        asked: list[dict[str, object]] = []

        class HandlerApi:
            """The CLI's client, answered by the API handler on moto (as ALICE)."""

            def __init__(self, base_url: str, caller: str | None = None) -> None:
                pass

            def call(self, method: str, path: str, body: object = None, **kw: object) -> object:
                query = {k: str(v) for k, v in dict(kw.get("query") or {}).items() if v}
                asked.append(query)
                status, _, reply = stack.api(method, path, caller=ALICE, query=query)
                assert status == 200, reply
                return reply

        monkeypatch.setattr(cli, "Api", HandlerApi)
        assert cli.main(["path", wf, "--limit", "5"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split()[1] for line in lines[:5]] == ["Init", "Inc", "More?", "Inc", "More?"]
        assert "visit 2" in lines[3] and '{"label":"c","n":2}' in lines[3]
        assert lines[5] == "(the first 5 states; --limit for more)"
        assert cli.main(["path", wf, "--json"]) == 0
        entries = json.loads(capsys.readouterr().out)
        assert [e["number"] for e in entries] == list(range(8))
        assert entries[-1]["state"] == "Done"
