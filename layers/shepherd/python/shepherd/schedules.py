"""Schedules: EventBridge Scheduler's expressions, parsed and validated when a definition
loads (and at synth), and their next firing times (docs/architecture.md, schedules).

`cron(minutes hours day-of-month month day-of-week year)` with EventBridge's fields and
wildcards (`,` `-` `*` `/`, `?` in one of the two day fields, `L` and `W` in day-of-month,
`L` and `#` in day-of-week; month and weekday names), `rate(N minute|minutes|hour|hours|day|
days)` and `at(yyyy-mm-ddThh:mm:ss)`, each in an IANA time zone. Pure: no AWS call.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from shepherd.observability import START_DETAIL_TYPE
from shepherd.settings import SCHEDULE_SOURCE

MONTHS = {m.upper(): i for i, m in enumerate(calendar.month_abbr) if m}
# EventBridge numbers weekdays 1 (SUN) to 7 (SAT).
WEEKDAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
RATE_UNITS = {"minute": 60, "hour": 3600, "day": 86400}
SEARCH_YEARS = 5  # how far ahead the next firing is looked for (a cron may never fire again)
# The years a firing may fall in, as EventBridge's cron year field allows. An `at(...)` outside
# them is refused at validation: its instant might not exist in UTC (9999-12-31T23:59:59 in
# America/Los_Angeles is in year 10000), and every reader of a schedule computes its firings.
FIRST_YEAR, LAST_YEAR = 1970, 2199
# Names ZoneInfo opens that are no IANA zone of EventBridge Scheduler's: the host's own zone,
# tzdata's placeholder zone ("-00"), and its POSIX-rule aliases.
NOT_ZONES = frozenset({"localtime", "Factory", "posixrules"})
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]{0,31}(?:/[A-Za-z0-9_+-]{1,32}){0,2}")


class ScheduleError(ValueError):
    """An expression or time zone EventBridge Scheduler would refuse; says which part."""


@dataclass(frozen=True)
class _Field:
    values: frozenset[int]
    any: bool  # `*` or `?`: the field does not constrain


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    dom: str  # the day-of-month field as written (L, W forms are resolved per month)
    months: frozenset[int]
    dow: str  # the day-of-week field as written (L, # forms are resolved per month)
    years: _Field


@dataclass(frozen=True)
class Rate:
    seconds: int


@dataclass(frozen=True)
class At:
    when: datetime  # naive: wall-clock time in the schedule's zone


Expression = Cron | Rate | At


def zone(name: str) -> ZoneInfo:
    unknown = ScheduleError(f"unknown time zone '{name}' (an IANA name: Europe/Paris, UTC)")
    if (
        name in NOT_ZONES
        or name.startswith(("posix/", "right/"))
        or _ZONE_NAME.fullmatch(name) is None
    ):
        raise unknown
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise unknown from None


def check(expression: str, timezone: str) -> Expression:
    """The parsed expression if every firing it can produce in `timezone` is computable (an
    instant in UTC within FIRST_YEAR..LAST_YEAR for `at`); ScheduleError otherwise."""
    parsed = parse(expression)
    tz = zone(timezone)
    if isinstance(parsed, At):
        try:
            instant = parsed.when.replace(tzinfo=tz).astimezone(UTC)
        except (OverflowError, ValueError):
            instant = None
        if instant is None or not FIRST_YEAR <= instant.year <= LAST_YEAR:
            raise ScheduleError(
                f"at(...) must fall in the years {FIRST_YEAR}-{LAST_YEAR} in UTC "
                f"(got {expression} in {timezone})"
            )
    return parsed


def parse(expression: str) -> Expression:
    """The parsed expression, or ScheduleError saying what is wrong."""
    text = expression.strip()
    match = re.fullmatch(r"(cron|rate|at)\((.*)\)", text)
    if match is None:
        raise ScheduleError("must be cron(...), rate(...) or at(...)")
    kind, body = match.groups()
    if kind == "rate":
        return _rate(body)
    if kind == "at":
        try:
            if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}", body):
                raise ValueError(body)
            when = datetime.strptime(body, "%Y-%m-%dT%H:%M:%S")
        except ValueError:
            raise ScheduleError("at(...) takes yyyy-mm-ddThh:mm:ss") from None
        if not FIRST_YEAR <= when.year <= LAST_YEAR:
            raise ScheduleError(f"at(...) must fall in the years {FIRST_YEAR}-{LAST_YEAR}")
        return At(when)
    return _cron(body)


def _rate(body: str) -> Rate:
    match = re.fullmatch(r"(\d{1,6}) (minute|minutes|hour|hours|day|days)", body.strip())
    if match is None:
        raise ScheduleError("rate(...) takes a value and a unit: rate(5 minutes), rate(1 day)")
    value, unit = int(match.group(1)), match.group(2)
    if value < 1:
        raise ScheduleError("rate(...) takes a value of at least 1")
    if (value == 1) != (not unit.endswith("s")):
        raise ScheduleError(f"rate({value} {unit}): 1 takes a singular unit, more a plural one")
    return Rate(value * RATE_UNITS[unit.removesuffix("s")])


def _values(text: str, low: int, high: int, names: dict[str, int], what: str) -> _Field:
    if text in ("*", "?"):
        return _Field(frozenset(range(low, high + 1)), True)
    out: set[int] = set()
    for part in text.split(","):
        match = re.fullmatch(r"(\*|[A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?(?:/(\d+))?", part)
        if match is None:
            raise ScheduleError(f"{what}: cannot read '{part}'")
        first, last, step = match.groups()
        start = low if first == "*" else _number(first, low, high, names, what)
        end = (high if first == "*" or step else start) if last is None else None
        if last is not None:
            end = _number(last, low, high, names, what)
        if end is None or start > end:
            raise ScheduleError(f"{what}: range '{part}' runs backwards")
        by = int(step) if step else 1
        if by < 1:
            raise ScheduleError(f"{what}: step '/{step}' must be at least 1")
        out.update(range(start, end + 1, by))
    return _Field(frozenset(out), False)


def _number(text: str, low: int, high: int, names: dict[str, int], what: str) -> int:
    value = names.get(text.upper()) if not text.isdigit() else int(text)
    if value is None or not low <= value <= high:
        raise ScheduleError(f"{what}: '{text}' is not in {low}-{high}")
    return value


def _cron(body: str) -> Cron:
    parts = body.split()
    if len(parts) != 6:
        raise ScheduleError(
            "cron(...) takes 6 fields: minutes hours day-of-month month day-of-week year"
        )
    minutes, hours, dom, month, dow, year = parts
    if (dom == "?") == (dow == "?"):
        raise ScheduleError("cron(...): one of day-of-month and day-of-week must be '?'")
    if dom != "?" and not re.fullmatch(r"L|LW|\d{1,2}W", dom):
        _values(dom, 1, 31, {}, "day-of-month")
    for found in re.findall(r"\d{1,2}(?=W)", dom):
        _number(found, 1, 31, {}, "day-of-month")
    if dow != "?":
        special = re.fullmatch(r"([A-Za-z0-9]+)(L|#([1-5]))", dow)
        if special:
            _number(special.group(1), 1, 7, WEEKDAYS, "day-of-week")
        elif dow != "L":
            _values(dow, 1, 7, WEEKDAYS, "day-of-week")
    return Cron(
        _values(minutes, 0, 59, {}, "minutes").values,
        _values(hours, 0, 23, {}, "hours").values,
        dom,
        _values(month, 1, 12, MONTHS, "month").values,
        dow,
        _values(year, 1970, 2199, {}, "year"),
    )


def _weekday(day: date) -> int:
    """EventBridge's weekday number: 1 = Sunday ... 7 = Saturday."""
    return (day.isoweekday() % 7) + 1


def _nearest_weekday(year: int, month: int, n: int) -> int | None:
    last = calendar.monthrange(year, month)[1]
    if n > last:
        return None
    day = date(year, month, n)
    if day.weekday() == 5:  # Saturday: the Friday before, or the Monday after on the 1st
        return n - 1 if n > 1 else n + 2
    if day.weekday() == 6:  # Sunday: the Monday after, or the Friday before on the last day
        return n + 1 if n < last else n - 2
    return n


def _day_matches(cron: Cron, day: date) -> bool:
    last = calendar.monthrange(day.year, day.month)[1]
    if cron.dom != "?":
        if cron.dom == "L":
            return day.day == last
        if cron.dom == "LW":
            return day.day == _nearest_weekday(day.year, day.month, last)
        if cron.dom.endswith("W"):
            return day.day == _nearest_weekday(day.year, day.month, int(cron.dom[:-1]))
        return day.day in _values(cron.dom, 1, 31, {}, "day-of-month").values
    if cron.dow == "L":
        return _weekday(day) == 7 and day.day > last - 7  # the last Saturday
    special = re.fullmatch(r"([A-Za-z0-9]+)(L|#([1-5]))", cron.dow)
    if special:
        wanted = _number(special.group(1), 1, 7, WEEKDAYS, "day-of-week")
        if _weekday(day) != wanted:
            return False
        if special.group(2) == "L":
            return day.day > last - 7
        return (day.day - 1) // 7 + 1 == int(special.group(3))
    return _weekday(day) in _values(cron.dow, 1, 7, WEEKDAYS, "day-of-week").values


def next_firings(
    expression: Expression,
    tz: ZoneInfo,
    after: datetime,
    count: int = 3,
    anchor: datetime | None = None,
) -> list[datetime]:
    """Up to `count` firing times (aware, UTC) strictly after `after`. A rate fires every
    period from `anchor` (when it was created; default `after`). Total: a firing past what a
    datetime holds (a rate's far future) ends the list rather than raising."""
    try:
        return _next_firings(expression, tz, after, count, anchor)
    except OverflowError:  # defence in depth: `check` refuses what could get here
        return []


def _next_firings(
    expression: Expression, tz: ZoneInfo, after: datetime, count: int, anchor: datetime | None
) -> list[datetime]:
    after = after.astimezone(UTC)
    if isinstance(expression, Rate):
        start = (anchor or after).astimezone(UTC)
        period = timedelta(seconds=expression.seconds)
        passed = max(0, int((after - start) / period) + 1)
        times: list[datetime] = []
        for i in range(count):
            try:
                times.append(start + period * (passed + i))
            except OverflowError:  # past year 9999: that rate fires no more
                break
        return times
    if isinstance(expression, At):
        when = expression.when.replace(tzinfo=tz).astimezone(UTC)
        return [when] if when > after else []
    out: list[datetime] = []
    local = after.astimezone(tz)
    day = local.date()
    end = day + timedelta(days=366 * SEARCH_YEARS)
    while day <= end and len(out) < count:
        if (
            day.month in expression.months
            and day.year in expression.years.values
            and _day_matches(expression, day)
        ):
            for hour in sorted(expression.hours):
                for minute in sorted(expression.minutes):
                    naive = datetime(day.year, day.month, day.day, hour, minute)
                    when = naive.replace(tzinfo=tz).astimezone(UTC)
                    if when > after and (not out or when > out[-1]):
                        out.append(when)
                        if len(out) == count:
                            return out
        day += timedelta(days=1)
    return out


# A schedule starts its workflow through the `StartWorkflow` path (the events function), from
# this source, owned by the deployment's schedule owner (`Settings.owner_of`).
SOURCE = SCHEDULE_SOURCE
# EventBridge Scheduler's context attributes, filled in for each firing: the time it was
# scheduled for (ISO 8601, UTC, to the second), its execution id and the schedule's ARN.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"
SCHEDULE_ARN = "<aws.scheduler.schedule-arn>"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # how Scheduler writes SCHEDULED_TIME (and local firings)
_KEY = re.compile(r"schedule:([A-Za-z0-9_.-]{1,64}):(.+)")


def start_detail(
    workflow_type: str, name: str, input_value: Any, scheduled_time: str
) -> dict[str, Any]:
    """The `StartWorkflow` detail one firing sends. Its idempotency key is
    `schedule:<name>:<scheduled time>` (schedule names are unique across a deployment's
    definitions), so a firing delivered twice derives the same workflow id and starts one
    workflow. Deployed, `scheduled_time` is `SCHEDULED_TIME`, filled in by the Scheduler."""
    return {
        "type": workflow_type,
        "input": input_value,
        "idempotency_key": f"schedule:{name}:{scheduled_time}",
    }


def name_of(idempotency_key: str | None) -> str | None:
    """The schedule a firing's idempotency key names (`schedule:<name>:<time>`), or None."""
    match = _KEY.fullmatch(idempotency_key or "")
    return match.group(1) if match else None


def time_of(idempotency_key: str | None) -> str | None:
    """The scheduled time a firing's idempotency key names (as written), or None."""
    match = _KEY.fullmatch(idempotency_key or "")
    return match.group(2) if match else None


def firing_event(
    workflow_type: str,
    name: str,
    input_value: Any,
    *,
    account: str,
    region: str,
    scheduled_time: str = SCHEDULED_TIME,
    execution_id: str = EXECUTION_ID,
    schedule_arn: str = SCHEDULE_ARN,
) -> dict[str, Any]:
    """What a firing hands the events function: a `StartWorkflow` event shaped as
    EventBridge delivers one (the handler parses it as such). Deployed, the placeholders are
    Scheduler's context attributes (the schedule target's `Input`); the local stack's clock
    passes real values."""
    return {
        "version": "0",
        "id": execution_id,
        "detail-type": START_DETAIL_TYPE,
        "source": SOURCE,
        "account": account,
        "time": scheduled_time,
        "region": region,
        "resources": [schedule_arn],
        "detail": start_detail(workflow_type, name, input_value, scheduled_time),
    }
