"""`shepherd local`'s schedule clock (issue 25.4): each enabled schedule fires on its own
clock, a rate every period from the stack's start, with the deployed firing's event and key;
bounded and stoppable. A fake clock, never a minute's sleep. The CLI's `shepherd schedules`."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from shepherd import schedules
from shepherd.definitions import Definition, parse_definition
from shepherd_cli import main as cli
from shepherd_cli.local_schedules import MAX_FIRINGS_PER_TICK, ScheduleClock

START = datetime(2026, 11, 26, 9, 0, 0, 250_000, tzinfo=UTC)  # mid-second: keys are to the second
DEFINITION = """\
Name: nightly_check
Steps:
  - {Name: hold, Wait: {Seconds: 1}}
Schedules:
  - {Name: every_minute, Expression: "rate(1 minute)", Input: {n: 1}}
  - {Name: at_ten, Expression: "cron(0 10 * * ? *)"}
  - {Name: dormant, Expression: "rate(1 minute)", Enabled: false}
"""


class FakeClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


def _parse(text: str) -> Definition:
    return parse_definition(yaml.safe_load(text), "nightly_check.yaml")


def _clock(
    text: str = DEFINITION, start: datetime = START
) -> tuple[ScheduleClock, FakeClock, list[dict[str, Any]], dict[str, Definition]]:
    definitions = {"nightly_check": _parse(text)}
    fired: list[dict[str, Any]] = []
    now = FakeClock(start)
    clock = ScheduleClock(
        lambda: definitions,
        fired.append,
        anchor=start,
        account="000000000000",
        region="us-east-1",
        now=now,
    )
    return clock, now, fired, definitions


def _keys(fired: list[dict[str, Any]]) -> list[str]:
    return [e["detail"]["idempotency_key"] for e in fired]


def test_a_rate_fires_every_period_from_the_stacks_start() -> None:
    clock, now, fired, _ = _clock()
    assert clock.tick() == 0  # nothing is due at the start
    now.advance(seconds=59)
    assert clock.tick() == 0
    now.advance(seconds=1)
    assert clock.tick() == 1
    assert clock.tick() == 0  # a tick at the same time fires nothing twice
    now.advance(minutes=2, seconds=30)
    assert clock.tick() == 2
    assert _keys(fired) == [
        "schedule:every_minute:2026-11-26T09:01:00Z",
        "schedule:every_minute:2026-11-26T09:02:00Z",
        "schedule:every_minute:2026-11-26T09:03:00Z",
    ]
    assert clock.fired == _keys(fired)


def test_a_firing_is_the_deployed_schedules_event() -> None:
    clock, now, fired, _ = _clock()
    now.advance(minutes=1)
    clock.tick()
    (event,) = fired
    expected = schedules.firing_event(
        "nightly_check",
        "every_minute",
        {"n": 1},
        account="000000000000",
        region="us-east-1",
        scheduled_time="2026-11-26T09:01:00Z",
        execution_id=event["id"],
        schedule_arn=event["resources"][0],
    )
    assert event == expected
    assert event["source"] == "shepherd.schedule" and event["time"] == "2026-11-26T09:01:00Z"


def test_a_cron_fires_at_its_time_and_a_disabled_schedule_never() -> None:
    clock, now, fired, _ = _clock()
    clock.tick()
    now.advance(hours=1)  # 10:00:00.25
    clock.tick()
    assert "schedule:at_ten:2026-11-26T10:00:00Z" in _keys(fired)
    assert not [k for k in _keys(fired) if ":dormant:" in k]


def test_catching_up_is_bounded() -> None:
    """A laptop asleep: a firing more than an hour late is dropped (Scheduler's maximum event
    age), and one tick fires at most MAX_FIRINGS_PER_TICK of a schedule."""
    clock, now, fired, _ = _clock()
    clock.tick()
    now.advance(hours=3)
    assert clock.tick() == MAX_FIRINGS_PER_TICK
    # None more than an hour late: 09:01 to 11:00 and at_ten's 10:00 are dropped, not fired.
    assert _keys(fired)[0] == "schedule:every_minute:2026-11-26T11:01:00Z"
    assert not [k for k in _keys(fired) if ":at_ten:" in k]
    fired.clear()
    for _ in range(10):
        clock.tick()
    assert len(fired) == 60 - MAX_FIRINGS_PER_TICK  # the rest of the hour, ten a tick
    assert clock.tick() == 0


def test_a_reloaded_definition_is_taken_up_from_now() -> None:
    clock, now, fired, definitions = _clock()
    clock.tick()
    now.advance(minutes=30)
    clock.tick()
    fired.clear()
    definitions["nightly_check"] = _parse(
        DEFINITION.replace("rate(1 minute)", "rate(5 minutes)", 1)
    )
    now.advance(minutes=1)  # 09:31: a 1-minute rate would fire, the 5-minute one not yet
    assert clock.tick() == 0
    now.advance(minutes=4)  # 09:35: the rate still counts from the stack's start
    assert clock.tick() == 1
    assert _keys(fired) == ["schedule:every_minute:2026-11-26T09:35:00Z"]


def test_one_bad_schedule_never_stops_the_others() -> None:
    """Issue 35.1: an `at` whose instant is past year 9999 in UTC (accepted by an older
    release) and a firing that fails: the clock keeps firing every other schedule, and a
    schedule whose firing failed is tried again at the next tick."""
    from shepherd.definitions import ScheduleSpec

    clock, now, fired, definitions = _clock()
    good = definitions["nightly_check"]
    doomsday = ScheduleSpec.model_construct(
        name="doomsday",
        expression="at(9999-12-31T23:59:59)",
        timezone="America/Los_Angeles",
        input=None,
        enabled=True,
    )
    definitions["aaa_first"] = good.model_copy(update={"schedules": (doomsday,)})
    clock.tick()
    now.advance(minutes=1)
    assert clock.tick() == 1
    assert _keys(fired) == ["schedule:every_minute:2026-11-26T09:01:00Z"]

    failing = [True]

    def fire(event: dict[str, Any]) -> None:
        if failing and ":every_minute:" in event["detail"]["idempotency_key"]:
            failing.pop()
            raise RuntimeError("the events handler is down")
        fired.append(event)

    clock._fire = fire  # type: ignore[method-assign]
    now.advance(hours=1)  # 10:01: at_ten is due and every_minute's next firing fails
    clock.tick()
    assert "schedule:at_ten:2026-11-26T10:00:00Z" in _keys(fired)
    clock.tick()  # every_minute's failed firing is fired again, not lost
    assert "schedule:every_minute:2026-11-26T09:02:00Z" in _keys(fired)


def test_the_clock_stops_with_the_stack() -> None:
    clock, now, fired, _ = _clock()
    stop = threading.Event()
    thread = threading.Thread(target=clock.run, args=(stop, 0.01))
    thread.start()
    now.advance(minutes=1)
    for _ in range(200):
        if fired:
            break
        threading.Event().wait(0.01)
    stop.set()
    thread.join(timeout=2)
    assert not thread.is_alive()
    assert _keys(fired) == ["schedule:every_minute:2026-11-26T09:01:00Z"]


# ------------------------------------------------------------------ shepherd schedules


class FakeApi:
    calls: list[tuple[str, str]] = []

    def __init__(self, base_url: str, caller: str | None = None) -> None:
        pass

    def call(self, method: str, path: str, body: Any = None, **_: Any) -> Mapping[str, Any]:
        FakeApi.calls.append((method, path))
        item = {
            "name": "nightly",
            "workflow_type": "nightly_check",
            "expression": "cron(0 2 * * ? *)",
            "timezone": "UTC",
            "enabled": True,
            "paused": path.endswith("/pause"),
            "next": [] if path.endswith("/pause") else ["2026-11-27T02:00:00Z"],
        }
        return {"items": [item]} if method == "GET" else item


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeApi.calls = []
    monkeypatch.setattr(cli, "Api", FakeApi)


def test_the_cli_lists_pauses_and_resumes_schedules(
    fake_api: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["schedules"]) == 0
    assert FakeApi.calls == [("GET", "/schedules")]
    out = capsys.readouterr().out
    assert "nightly" in out and "running" in out and "2026-11-27T02:00:00Z" in out
    FakeApi.calls = []
    assert cli.main(["schedules", "pause", "nightly"]) == 0
    assert FakeApi.calls == [("POST", "/schedules/nightly/pause"), ("GET", "/schedules")]
    FakeApi.calls = []
    assert cli.main(["schedules", "resume", "nightly"]) == 0
    assert FakeApi.calls[0] == ("POST", "/schedules/nightly/resume")
    assert cli.main(["schedules", "pause"]) == 1  # a name is needed
    assert "needs a schedule name" in capsys.readouterr().err
