"""`shepherd approve|reject ID STEP [--comment] [--output]` (issue 25.3): the CLI posts the
answer to the approval routes and prints the step's end and who decided."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd_cli import main as cli


class FakeApi:
    calls: list[tuple[str, str, Any]] = []

    def __init__(self, base_url: str, caller: str | None = None) -> None:
        self.caller = caller

    def call(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        FakeApi.calls.append((method, path, body))
        verdict = "approved" if path.endswith("/approve") else "rejected"
        status = "SUCCEEDED" if verdict == "approved" else "FAILED"
        return {
            "name": "fraud_review",
            "status": status,
            "decision": {"verdict": verdict, "by": "me"},
        }


@pytest.fixture(autouse=True)
def fake_api(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeApi.calls = []
    monkeypatch.setattr(cli, "Api", FakeApi)


def test_approve_posts_the_comment_and_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["approve", "wf-1", "fraud_review", "--comment", "ok", "--output", '{"limit": 5}']
    )
    assert code == 0
    assert FakeApi.calls == [
        (
            "POST",
            "/workflows/wf-1/steps/fraud_review/approve",
            {"comment": "ok", "output": {"limit": 5}},
        )
    ]
    assert capsys.readouterr().out.strip() == "fraud_review: SUCCEEDED (approved by me)"


def test_reject_posts_only_a_comment(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["reject", "wf-1", "fraud_review", "--comment", "no"]) == 0
    assert FakeApi.calls == [
        ("POST", "/workflows/wf-1/steps/fraud_review/reject", {"comment": "no"})
    ]
    assert "FAILED (rejected by me)" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # reject takes no output
        cli.main(["reject", "wf-1", "fraud_review", "--output", "{}"])


class PagedApi:
    """GET /approvals in pages of two over five pending approvals."""

    queries: list[dict[str, Any]] = []

    def __init__(self, base_url: str, caller: str | None = None) -> None:
        pass

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        assert (method, path) == ("GET", "/approvals")
        query = kw["query"]
        PagedApi.queries.append(query)
        start = int(query.get("next_token", "0"))
        end = min(start + min(2, query["limit"]), 5)
        items = [
            {
                "workflow_id": f"wf-{i}",
                "type": "order_fulfilment",
                "step": "fraud_review",
                "requested_at": f"2026-11-25T09:0{i}:00.000Z",
                "due_at": "2026-11-26T09:00:00.000Z",
            }
            for i in range(start, end)
        ]
        return {"items": items, "next_token": str(end) if end < 5 else None}


def test_approvals_lists_every_page_up_to_the_limit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "Api", PagedApi)
    PagedApi.queries = []
    assert cli.main(["approvals"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == [f"wf-{i}" for i in range(5)]
    assert [q.get("next_token") for q in PagedApi.queries] == [None, "2", "4"]
    PagedApi.queries = []
    assert cli.main(["approvals", "--limit", "3"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    assert [q["limit"] for q in PagedApi.queries] == [3, 1]
