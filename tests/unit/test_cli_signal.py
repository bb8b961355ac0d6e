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


def test_signal_by_match_posts_to_signals_and_lists_each_workflow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    FakeApi.reply = {
        "name": "amended",
        "signals": [
            {"workflow_id": "wf-2", "name": "amended", "sequence": 0, "taken_by": "amend"},
            {"workflow_id": "wf-1", "name": "amended", "sequence": 1, "taken_by": None},
        ],
    }
    code = cli.main(
        ["signal", "amended", "--match", "order_id=o-1", "--match", "shop=eu", "--signal-id", "s"]
    )
    assert code == 0
    assert FakeApi.calls == [
        (
            "POST",
            "/signals",
            {"name": "amended", "match": {"order_id": "o-1", "shop": "eu"}, "signal_id": "s"},
        )
    ]
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "amended: sent to 2 workflows",
        "wf-2  #0: taken by amend",
        "wf-1  #1: kept until a step waits for it",
    ]


def test_a_match_as_json_keeps_its_types_and_a_bad_one_is_refused_before_any_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    FakeApi.reply = {"name": "amended", "signals": []}
    assert cli.main(["signal", "amended", "--match", '{"order_id": 7}', "--payload", "3"]) == 0
    assert FakeApi.calls == [
        ("POST", "/signals", {"name": "amended", "match": {"order_id": 7}, "payload": 3})
    ]
    assert "sent to 0 workflows" in capsys.readouterr().out
    FakeApi.calls = []
    assert cli.main(["signal", "amended", "--match", "no-equals-sign"]) == 1
    assert cli.main(["signal", "wf-1", "amended", "--match", "a=b"]) == 1  # an id and a match
    assert cli.main(["signal", "wf-1"]) == 1  # neither a name nor a match
    assert FakeApi.calls == []


def test_list_by_tag_and_start_with_tags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeApi.reply = {
        "items": [
            {
                "workflow_id": "wf-1",
                "type": "order",
                "status": "RUNNING",
                "created_at": "2026-01-01T00:00:00Z",
                "tags": {"customer": "ada"},
            }
        ]
    }
    calls: list[Any] = []

    def call(self: Any, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        calls.append((method, path, body, kw.get("query")))
        return FakeApi.reply

    def start(self: Any, wf_type: str, payload: Any, key: Any = None, **kw: Any) -> Any:
        calls.append(("start", wf_type, payload, kw.get("tags")))
        return {"workflow_id": "wf-9"}

    monkeypatch.setattr(FakeApi, "call", call)
    monkeypatch.setattr(FakeApi, "start", start, raising=False)
    assert cli.main(["list", "--tag", "customer:ada"]) == 0
    assert calls[-1][3]["tag"] == "customer:ada"
    assert "customer:ada" in capsys.readouterr().out
    assert cli.main(["list", "--tag", "customer:ada", "--status", "RUNNING"]) == 1
    assert cli.main(["list", "--tag", "no-colon"]) == 1
    assert len(calls) == 1  # refused before any call
    assert cli.main(["start", "order", "--tag", "customer:ada", "--tag", "url:a:b"]) == 0
    assert calls[-1] == ("start", "order", {}, {"customer": "ada", "url": "a:b"})
