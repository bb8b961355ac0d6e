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
