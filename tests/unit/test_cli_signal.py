"""`shepherd signal ID NAME [--payload JSON] [--signal-id X]` (issue 37): the CLI posts the
signal to POST /workflows/{id}/signals/{name} and says what became of it."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd_cli import main as cli


class FakeApi:
    calls: list[tuple[str, str, Any]] = []
    reply: dict[str, Any] = {}

    def __init__(self, base_url: str, caller: str | None = None) -> None:
        self.caller = caller

    def call(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        FakeApi.calls.append((method, path, body))
        return FakeApi.reply


@pytest.fixture(autouse=True)
def fake_api(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeApi.calls = []
    monkeypatch.setattr(cli, "Api", FakeApi)


def test_signal_posts_the_payload_and_the_id(capsys: pytest.CaptureFixture[str]) -> None:
    FakeApi.reply = {"name": "amended", "sequence": 0, "duplicate": False, "taken_by": "amend"}
    code = cli.main(["signal", "wf-1", "amended", "--payload", '{"qty": 3}', "--signal-id", "a-1"])
    assert code == 0
    assert FakeApi.calls == [
        ("POST", "/workflows/wf-1/signals/amended", {"payload": {"qty": 3}, "signal_id": "a-1"})
    ]
    assert capsys.readouterr().out.strip() == "amended #0: taken by amend"


def test_a_kept_or_repeated_signal_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    FakeApi.reply = {"name": "amended", "sequence": 2, "duplicate": False, "taken_by": None}
    assert cli.main(["signal", "wf-1", "amended"]) == 0
    assert FakeApi.calls == [("POST", "/workflows/wf-1/signals/amended", {})]
    assert "kept until a step waits for it" in capsys.readouterr().out
    FakeApi.reply = {"name": "amended", "sequence": 2, "duplicate": True}
    assert cli.main(["signal", "wf-1", "amended", "--signal-id", "x"]) == 0
    assert "already sent" in capsys.readouterr().out
    assert cli.main(["signal", "wf-1", "amended", "--payload", "{nope"]) == 1
