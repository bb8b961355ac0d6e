"""`shepherd local`'s hot reload says what it did: a refused change is announced, and so is the
change that fixes it (silence after a refusal left a person unsure the fix was taken up)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shepherd.errors import DefinitionError
from shepherd_cli.local import LocalStack
from shepherd_cli.project import Project


def test_a_fixed_definition_is_announced_after_a_refused_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = LocalStack(project=Project(tmp_path, tmp_path / "statemachines"), state_dir=tmp_path)
    results: list[Exception | None] = [
        None,
        DefinitionError("trip.yaml: Steps[0] (book).TimeoutSeconds: is required"),
        None,
        None,
    ]

    def take_up(*, definitions_changed: bool) -> None:
        found = results.pop(0)
        if found is not None:
            raise found

    monkeypatch.setattr(stack, "_take_up", take_up)
    stack._reload(definitions_changed=True)
    assert capsys.readouterr().err == ""  # a good change among good ones: quiet, as before
    stack._reload(definitions_changed=True)
    assert capsys.readouterr().err == (
        "reload refused: trip.yaml: Steps[0] (book).TimeoutSeconds: is required\n"
    )
    stack._reload(definitions_changed=True)
    assert "reload taken up: the refused change is fixed" in capsys.readouterr().err
    stack._reload(definitions_changed=True)
    assert capsys.readouterr().err == ""  # said once
