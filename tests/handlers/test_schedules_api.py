"""GET /schedules (issue 25.4): every schedule of the current definitions with its next
firing times, through the API handler on moto."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aws_stack import ALICE, LambdaContext, Stack, stack_with_definitions

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
    with stack_with_definitions(monkeypatch, tmp_path, {"nightly_check.yaml": NIGHTLY}) as running:
        yield running


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


def test_a_firing_delivered_twice_starts_one_workflow(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schedule starts its workflow through the StartWorkflow path with the idempotency key
    `schedule:<name>:<scheduled time>`: EventBridge Scheduler delivers at least once, and a
    duplicate derives the same workflow id."""
    import json

    from shepherd import schedules
    from shepherd.settings import ENV_EVENT_OWNERS
    from shepherd_cli import lambda_kit
    from shepherd_handlers import events, runtime

    monkeypatch.setenv(ENV_EVENT_OWNERS, json.dumps({schedules.SOURCE: ALICE}))
    runtime.engine.cache_clear()

    def fire(at: str) -> dict[str, object]:
        detail = schedules.start_detail("nightly_check", "nightly", {}, at)
        event = lambda_kit.eventbridge_event(
            "StartWorkflow",
            detail,
            source=schedules.SOURCE,
            account="123456789012",
            region="us-east-1",
            at=at,
            resources=[],
            event_id="0b6c7ad5-1f43-4c3e-9b8e-4a0c1b8e9f10",
        )
        return dict(events.handler(event, LambdaContext()))

    first = fire("2026-11-26T01:00:00Z")
    again = fire("2026-11-26T01:00:00Z")
    assert first["created"] is True and again["created"] is False
    assert again["workflow_id"] == first["workflow_id"]
    next_night = fire("2026-11-27T01:00:00Z")
    assert next_night["created"] is True and next_night["workflow_id"] != first["workflow_id"]
    listed = stack.api("GET", "/workflows", query={"type": "nightly_check"}, caller=ALICE)[2]
    assert len(listed["items"]) == 2


def test_schedule_names_are_unique_across_definitions(tmp_path: Path) -> None:
    from shepherd.definitions import load_directory
    from shepherd.errors import DefinitionError

    (tmp_path / "nightly_check.yaml").write_text(NIGHTLY)
    (tmp_path / "other.yaml").write_text(
        NIGHTLY.replace("nightly_check", "other").split("  - {Name: often")[0]
    )
    with pytest.raises(DefinitionError) as err:
        load_directory(tmp_path)
    assert "other.yaml: Schedules[0] (nightly).Name: also a schedule of 'nightly_check'" in str(
        err.value
    )
