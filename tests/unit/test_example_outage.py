"""The example's e-mail provider can be down (`make demo`'s outage, issue 26.4): every call
fails with a retryable ServiceDown until the outage ends, in one process or, through the
ledger's SQLite file, across the local stack's worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from shepherd_examples.agents import ledger


@pytest.mark.parametrize("shared", [False, True])
def test_a_service_is_down_until_its_outage_ends(
    shared: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shared:
        monkeypatch.setenv("SHEPHERD_LEDGER", str(tmp_path / "ledger.sqlite"))
    else:
        monkeypatch.delenv("SHEPHERD_LEDGER", raising=False)
    ledger.reset()
    clock = [1000.0]
    monkeypatch.setattr(ledger.time, "time", lambda: clock[0])
    ledger.require_up("payments")  # no outage: up
    assert ledger.start_outage("payments", 12) == 1012.0
    with pytest.raises(ledger.ServiceDown, match="payments is down"):
        ledger.require_up("payments")
    ledger.require_up("shipping")  # only that service
    clock[0] = 1011.9
    with pytest.raises(ledger.ServiceDown):
        ledger.require_up("payments")
    clock[0] = 1012.0
    ledger.require_up("payments")  # back
