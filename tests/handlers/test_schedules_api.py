"""GET /schedules (issue 25.4): every schedule of the current definitions with its next
firing times, through the API handler on moto."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aws_stack import ALICE, ROOT, Stack
from moto import mock_aws

NIGHTLY = """\
Name: nightly_check
Steps:
  - Name: hold
    Wait: {Seconds: 1}
Schedules:
  - {Name: nightly, Expression: "cron(0 2 * * ? *)", Timezone: Europe/Paris}
  - {Name: often, Expression: "rate(5 minutes)"}
  - {Name: dormant, Expression: "cron(0 3 * * ? *)", Enabled: false}
"""


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "shepherd")
    definitions = tmp_path / "statemachines"
    shutil.copytree(ROOT / "statemachines", definitions)
    (definitions / "nightly_check.yaml").write_text(NIGHTLY)
    with mock_aws():
        stack = Stack(monkeypatch)
        monkeypatch.setenv("SHEPHERD_DEFINITIONS_DIR", str(definitions))
        from shepherd_handlers import runtime

        runtime.engine.cache_clear()
        yield stack


def test_schedules_are_listed_with_their_next_firing_times(stack: Stack) -> None:
    before = datetime.now(UTC)
    status, _, reply = stack.api("GET", "/schedules", caller=ALICE)
    assert status == 200, reply
    items = {i["name"]: i for i in reply["items"]}
    assert set(items) == {"nightly", "often", "dormant"}
    nightly = items["nightly"]
    assert (nightly["workflow_type"], nightly["timezone"]) == ("nightly_check", "Europe/Paris")
    times = [datetime.strptime(t, "%Y-%m-%dT%H:%M:%S%z") for t in nightly["next"]]
    assert len(times) == 3 and times == sorted(times) and times[0] > before
    # 02:00 in Paris is 00:00 or 01:00 UTC, a day apart.
    assert all(t.hour in (0, 1) and t.minute == 0 for t in times)
    assert items["often"]["next"] == []  # a rate counts from its deploy
    assert items["dormant"]["enabled"] is False and items["dormant"]["next"] == []
