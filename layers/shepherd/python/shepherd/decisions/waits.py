"""Wait steps: when a ready `Wait` wakes. Pure (docs/architecture.md, waits).

`Seconds` counts from the moment the step became ready (its last dependency's end, or the
start), so every planner computes the same time; `Until` is absolute; `UntilPath` reads an
RFC 3339 timestamp (with its offset, as Step Functions' `TimestampPath`) from the workflow
input. A time in the past wakes at
once; one more than a year after the step became ready is refused, as an unreadable one is.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from typing import Any

from shepherd.decisions import choice
from shepherd.definitions import ONE_YEAR, WaitSpec
from shepherd.timestamps import rfc3339

RUNTIME_ERROR = "States.Runtime"


def wake_time(wait: WaitSpec, ready_at: int, document: Any) -> int | str:
    """The wake time (epoch ms), or why there is none (a message for `States.Runtime`).
    `document` is what a condition reads (`choice.document`: the input, the dependencies'
    outputs), which `UntilPath` and `SecondsPath` read."""
    if wait.seconds is not None:
        return ready_at + wait.seconds * 1000
    if wait.seconds_path is not None:
        return _seconds_at(wait.seconds_path, ready_at, document)
    if wait.until is not None:
        at = int(wait.until.timestamp() * 1000)
    else:
        assert wait.until_path is not None
        value = choice.resolve(wait.until_path, document)
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


def _seconds_at(path: str, ready_at: int, document: Any) -> int | str:
    """`SecondsPath`: a whole number of seconds, 0 to a year, after the step became ready
    (as Step Functions' `SecondsPath`, a non-negative integer)."""
    value = choice.resolve(path, document)
    if value is choice.MISSING:
        return f"SecondsPath {path} is absent"
    integral = isinstance(value, float) and value.is_integer()
    if isinstance(value, bool) or not (isinstance(value, int) or integral):
        return f"SecondsPath {path} is not a whole number of seconds ({value!r:.40})"
    seconds = int(value)
    if seconds < 0:
        return f"SecondsPath {path} is negative ({seconds})"
    if seconds > ONE_YEAR:
        return f"the wait ends more than a year ({ONE_YEAR} s) after it started"
    return ready_at + seconds * 1000
