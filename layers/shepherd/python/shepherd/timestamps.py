"""Step Functions' timestamps (RFC 3339 as it takes one), read alike by a Wait step's
`UntilPath` (`decisions.waits`) and a state machine's Timestamp comparisons (`asl.rules`).
Pure, importing nothing of Shepherd's: both sides import it, neither imports the other.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

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
