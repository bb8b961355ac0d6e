"""Time comes from an injected clock so the engine can run under simulated time.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Source of the current time, in epoch milliseconds, and of waiting (a backoff)."""

    def now_ms(self) -> int: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to; thread-safe so agents and tests can share it."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        # Reading one attribute is atomic: the lock keeps writes whole, a read needs none
        # (the engine reads the clock thousands of times a run; issue 36).
        return self._now

    def advance(self, seconds: float) -> int:
        with self._lock:
            self._now += round(seconds * 1000)
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms

    def sleep(self, seconds: float) -> None:
        """A wait under a manual clock passes at once: the clock moves by it."""
        self.advance(seconds)


def to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def iso(ms: int | None) -> str | None:
    """ISO-8601 UTC with milliseconds, or None."""
    if ms is None:
        return None
    return to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
