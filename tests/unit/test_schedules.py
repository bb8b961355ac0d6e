"""Schedules (issue 25.4): EventBridge Scheduler expressions validated at load (a bad one
names the file, the schedule and the field) and their next firing times, in the schedule's
time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from shepherd import schedules
from shepherd.definitions import parse_definition
from shepherd.errors import DefinitionError

T = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # a Friday, two days before Paris moves to CEST


def nxt(expression: str, tz: str = "UTC", count: int = 3, after: datetime = T) -> list[str]:
    found = schedules.next_firings(schedules.parse(expression), schedules.zone(tz), after, count)
    return [f.strftime("%Y-%m-%dT%H:%M") for f in found]


@pytest.mark.parametrize(
    ("expression", "tz", "expected"),
    [
        ("cron(0 2 * * ? *)", "UTC", ["2026-03-28T02:00", "2026-03-29T02:00", "2026-03-30T02:00"]),
        # 02:00 in Paris: 01:00 UTC in winter, then 00:00 UTC from the 29th (02:00 is skipped
        # that night: the clock jumps to 03:00, which is 01:00 UTC).
        (
            "cron(0 2 * * ? *)",
            "Europe/Paris",
            ["2026-03-28T01:00", "2026-03-29T01:00", "2026-03-30T00:00"],
        ),
        (
            "cron(*/20 13 * * ? *)",
            "UTC",
            ["2026-03-27T13:00", "2026-03-27T13:20", "2026-03-27T13:40"],
        ),
        (
            "cron(0 9 ? * MON-FRI *)",
            "UTC",
            ["2026-03-30T09:00", "2026-03-31T09:00", "2026-04-01T09:00"],
        ),
        ("cron(0 0 L * ? *)", "UTC", ["2026-03-31T00:00", "2026-04-30T00:00", "2026-05-31T00:00"]),
        # The weekday nearest the 15th: Mon 13 Apr (15 Apr is a Wednesday: itself), Fri 15 May.
        (
            "cron(0 0 15W * ? *)",
            "UTC",
            ["2026-04-15T00:00", "2026-05-15T00:00", "2026-06-15T00:00"],
        ),
        (
            "cron(0 0 ? * 6#2 *)",
            "UTC",
            ["2026-04-10T00:00", "2026-05-08T00:00", "2026-06-12T00:00"],
        ),
        ("cron(0 0 ? * 2L *)", "UTC", ["2026-03-30T00:00", "2026-04-27T00:00", "2026-05-25T00:00"]),
        ("cron(30 6 1 JAN,JUL ? 2027)", "UTC", ["2027-01-01T06:30", "2027-07-01T06:30"]),
        ("at(2026-04-01T08:00:00)", "America/New_York", ["2026-04-01T12:00"]),
        ("at(2020-01-01T00:00:00)", "UTC", []),
    ],
)
def test_next_firings(expression: str, tz: str, expected: list[str]) -> None:
    assert nxt(expression, tz) == expected


def test_a_rate_fires_every_period_from_its_anchor() -> None:
    rate = schedules.parse("rate(15 minutes)")
    anchor = datetime(2026, 3, 27, 11, 50, tzinfo=UTC)
    found = schedules.next_firings(rate, schedules.zone("UTC"), T, 2, anchor=anchor)
    assert [f.strftime("%H:%M") for f in found] == ["12:05", "12:20"]


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ({"Expression": "cron(0 2 * * * *)"}, "Expression: cron(...): one of day-of-month"),
        ({"Expression": "cron(0 2 * * ?)"}, "Expression: cron(...) takes 6 fields"),
        ({"Expression": "cron(0 24 * * ? *)"}, "Expression: hours: '24' is not in 0-23"),
        (
            {"Expression": "cron(0 2 ? * FUNDAY *)"},
            "Expression: day-of-week: 'FUNDAY' is not in 1-7",
        ),
        ({"Expression": "cron(0 2 ? * 2#6 *)"}, "Expression: day-of-week: cannot read '2#6'"),
        ({"Expression": "rate(0 minutes)"}, "Expression: rate(...) takes a value of at least 1"),
        ({"Expression": "rate(2 hour)"}, "Expression: rate(2 hour): 1 takes a singular unit"),
        ({"Expression": "rate(1 week)"}, "Expression: rate(...) takes a value and a unit"),
        ({"Expression": "at(2026-04-01 08:00)"}, "Expression: at(...) takes yyyy-mm-ddThh:mm:ss"),
        ({"Expression": "every night"}, "Expression: must be cron(...), rate(...) or at(...)"),
        ({"Timezone": "Europe/Atlantis"}, "Timezone: unknown time zone 'Europe/Atlantis'"),
        # Issue 35.1: names ZoneInfo opens that are no IANA zone (the host's own, tzdata's "-00").
        ({"Timezone": "localtime"}, "Timezone: unknown time zone 'localtime'"),
        ({"Timezone": "Factory"}, "Timezone: unknown time zone 'Factory'"),
        ({"Timezone": "posix/Europe/Paris"}, "Timezone: unknown time zone 'posix/Europe/Paris'"),
        (
            {"Expression": "at(\uff12\uff10\uff12\uff16-01-01T00:00:00)"},
            "Expression: at(...) takes yyyy-mm-dd",
        ),
        ({"Input": {"amount": "lots"}}, "Input: Input.amount must be number"),
        ({"Enabled": "yes"}, "Enabled: must be true or false"),
    ],
)
def test_a_bad_schedule_names_the_file_the_schedule_and_the_field(
    schedule: dict[str, Any], expected: str
) -> None:
    data = {
        "Name": "nightly_report",
        "InputSchema": {"type": "object", "properties": {"amount": {"type": "number"}}},
        "Steps": [{"Name": "hold", "Wait": {"Seconds": 1}}],
        "Schedules": [
            {"Name": "nightly", "Expression": "cron(0 2 * * ? *)", "Input": {}, **schedule}
        ],
    }
    with pytest.raises(DefinitionError) as err:
        parse_definition(data, "nightly_report.yaml")
    assert f"nightly_report.yaml: Schedules[0] (nightly).{expected}" in str(err.value)


@pytest.mark.parametrize(
    ("expression", "tz"),
    [
        ("at(9999-12-31T23:59:59)", "America/Los_Angeles"),  # year 10000 in UTC
        ("at(0001-01-01T00:00:00)", "Asia/Tokyo"),  # year 0 in UTC
        ("at(2199-12-31T23:59:59)", "America/Los_Angeles"),  # 2200 in UTC: no cron year
        ("at(1970-01-01T00:00:00)", "Europe/Paris"),  # 1969 in UTC
    ],
)
def test_a_schedule_whose_firing_no_reader_could_compute_is_refused(
    expression: str, tz: str
) -> None:
    """Issue 35.1: these passed validation, and then every caller's GET /schedules was a 500,
    a resume answered 500 after it was saved, and the local schedule clock died."""
    data = {
        "Name": "wf",
        "Steps": [{"Name": "hold", "Wait": {"Seconds": 1}}],
        "Schedules": [{"Name": "edge", "Expression": expression, "Timezone": tz}],
    }
    with pytest.raises(DefinitionError) as err:
        parse_definition(data, "wf.yaml")
    message = str(err.value)
    assert message.startswith("wf.yaml: Schedules[0] (edge)")
    assert "Expression: at(...) must fall in the years 1970-2199" in message


@pytest.mark.parametrize(
    ("expression", "tz"),
    [
        ("at(2199-12-31T23:59:59)", "Pacific/Kiritimati"),  # +14: the latest UTC instant
        ("at(1970-01-01T00:00:00)", "UTC"),
        ("cron(59 23 31 12 ? 2199)", "Pacific/Pago_Pago"),  # -11: into 2200 in UTC
        ("cron(0 0 1 1 ? 1970)", "Pacific/Kiritimati"),  # into 1969 in UTC
        ("rate(999999 days)", "UTC"),
    ],
)
def test_every_firing_an_accepted_schedule_can_produce_is_computable(
    expression: str, tz: str
) -> None:
    """The edges validation accepts: every reader computes their firings without raising."""
    data = {
        "Name": "wf",
        "Steps": [{"Name": "hold", "Wait": {"Seconds": 1}}],
        "Schedules": [{"Name": "edge", "Expression": expression, "Timezone": tz}],
    }
    spec = parse_definition(data, "wf.yaml").schedules[0]
    parsed = schedules.parse(spec.expression)
    for after in (datetime(1969, 1, 1, tzinfo=UTC), T, datetime(2199, 12, 1, tzinfo=UTC)):
        for count in (1, 3, 50):
            schedules.next_firings(parsed, schedules.zone(tz), after, count)
    # A rate's far future ends the list rather than overflowing.
    late = datetime(9000, 1, 1, tzinfo=UTC)
    assert (
        len(
            schedules.next_firings(
                schedules.parse("rate(999999 days)"), schedules.zone("UTC"), late, 3, anchor=late
            )
        )
        < 3
    )


def test_schedules_are_part_of_the_version_and_named_once() -> None:
    base = {"Name": "wf", "Steps": [{"Name": "hold", "Wait": {"Seconds": 1}}]}
    plain = parse_definition(base, "wf.yaml")
    nightly = {"Name": "nightly", "Expression": "cron(0 2 * * ? *)", "Timezone": "Europe/Paris"}
    scheduled = parse_definition({**base, "Schedules": [nightly]}, "wf.yaml")
    assert scheduled.content_hash != plain.content_hash
    assert scheduled.schedules[0].enabled and scheduled.schedules[0].input is None
    again = parse_definition(__import__("json").loads(scheduled.canonical_json), "snapshot")
    assert again.content_hash == scheduled.content_hash
    with pytest.raises(DefinitionError) as err:
        parse_definition({**base, "Schedules": [nightly, nightly]}, "wf.yaml")
    assert "Schedules[1] (nightly).Name: a schedule of this name is defined twice" in str(err.value)
