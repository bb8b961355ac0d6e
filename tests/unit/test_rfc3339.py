"""`Wait.UntilPath` reads a timestamp as Step Functions' `TimestampPath` does (issue 35.1):
RFC 3339 with an uppercase `T` and `Z` or a numeric offset, nothing else; Python's ISO 8601
reader took a trailing NUL, a space for `T` and a basic-format date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from shepherd.timestamps import rfc3339


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T02:00:00Z", datetime(2026, 3, 1, 2, tzinfo=UTC)),
        ("2026-03-01T03:00:00+01:00", datetime(2026, 3, 1, 2, tzinfo=UTC)),
        ("2026-03-01T02:00:00.5Z", datetime(2026, 3, 1, 2, 0, 0, 500_000, tzinfo=UTC)),
        ("2026-03-01T02:00:00.123456789Z", datetime(2026, 3, 1, 2, 0, 0, 123_456, tzinfo=UTC)),
        (
            "2026-03-01T02:00:00-05:30",
            datetime(2026, 3, 1, 2, tzinfo=timezone(-timedelta(hours=5, minutes=30))),
        ),
    ],
)
def test_an_rfc3339_timestamp_is_read(text: str, expected: datetime) -> None:
    assert rfc3339(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-01T02:00:00Z\x00",
        "2026-03-01T02:00:00Z\n",
        " 2026-03-01T02:00:00Z",
        "2026-03-01 02:00:00Z",
        "2026-03-01t02:00:00z",
        "2026-03-01T02:00:00",
        "2026-03-01T02:00Z",
        "20260301T020000Z",
        "2026-03-01T02:00:00+0100",
        "2026-03-01T02:00:00+01",
        "2026-02-30T02:00:00Z",
        "2026-03-01T24:00:00Z",
        "2026-03-01T02:00:60Z",
        "2026-03-01T02:00:00+24:00",
        "\uff12026-03-01T02:00:00Z",
        "2026-03-01T02:00:00." + "1" * 100 + "Z",
    ],
)
def test_anything_else_is_refused(text: str) -> None:
    assert rfc3339(text) is None
