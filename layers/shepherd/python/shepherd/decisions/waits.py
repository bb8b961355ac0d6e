"""Wait steps: when a ready `Wait` wakes. Pure (docs/architecture.md, waits).

`Seconds` counts from the moment the step became ready (its last dependency's end, or the
start), so every planner computes the same time; `Until` is absolute; `UntilPath` reads an
RFC 3339 timestamp (with its offset, as Step Functions' `TimestampPath`) from the workflow
input. A time in the past wakes at
once; one more than a year after the step became ready is refused, as an unreadable one is.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from shepherd.decisions import choice
from shepherd.definitions import ONE_YEAR, WaitSpec

RUNTIME_ERROR = "States.Runtime"
# Step Functions' Timestamp: RFC 3339 with an uppercase `T` and `Z` (or a numeric offset);
# ASCII digits only, nothing before or after. Linear: no nested repetition.
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
    r"(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)
MAX_TIMESTAMP_CHARS = 64


def rfc3339(text: str) -> datetime | None:
    """`text` as an aware datetime if it is an RFC 3339 timestamp as Step Functions takes one
    (`2026-03-01T02:00:00Z`, `2026-03-01T03:00:00.5+01:00`), else None: no space for `T`, no
    lower-case `t` or `z`, no missing offset, no trailing byte (a NUL once passed)."""
    if len(text) > MAX_TIMESTAMP_CHARS:
        return None
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zulu, sign, oh, om = match.groups()
    try:
        offset = (
            UTC
            if zulu
            else timezone((-1 if sign == "-" else 1) * timedelta(hours=int(oh), minutes=int(om)))
        )
        micros = int((fraction or "0").ljust(6, "0")[:6])
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, offset
        )
    except ValueError:  # a day, hour or offset out of range (February 30th, 24:00, +25:00)
        return None


def wake_time(wait: WaitSpec, ready_at: int, input_value: Any) -> int | str:
    """The wake time (epoch ms), or why there is none (a message for `States.Runtime`)."""
    if wait.seconds is not None:
        return ready_at + wait.seconds * 1000
    if wait.until is not None:
        at = int(wait.until.timestamp() * 1000)
    else:
        assert wait.until_path is not None
        value = choice.resolve(wait.until_path, {"input": input_value})
        if not isinstance(value, str):
            shown = "absent" if value is choice.MISSING else f"not a string ({value!r:.40})"
            return f"UntilPath {wait.until_path} is {shown}"
        parsed = rfc3339(value)
        if parsed is None and rfc3339(value + "Z") is not None:
            return f"UntilPath {wait.until_path} has no time zone offset ({value!r:.40})"
        if parsed is None:
            return (
                f"UntilPath {wait.until_path} is not an RFC 3339 timestamp such as "
                f"2026-03-01T02:00:00Z ({value!r:.40})"
            )
        at = int(parsed.timestamp() * 1000)
    if at > ready_at + ONE_YEAR * 1000:
        return f"the wait ends more than a year ({ONE_YEAR} s) after it started"
    return at
