"""`shepherd local`'s clock for the definitions' schedules: what EventBridge Scheduler does
deployed (docs/architecture.md, schedules).

Each enabled schedule's next firing time comes from `shepherd.schedules.next_firings` (a
`rate` every period from the local stack's start, the anchor); when it is due, the clock hands
the events handler the very event a deployed schedule's target would
(`shepherd.schedules.firing_event`: source `shepherd.schedule`, idempotency key
`schedule:<name>:<scheduled time>`), so the start, its owner and the pause check are the
deployed ones. Bounded as Scheduler is: a firing more than an hour late (a laptop asleep) is
dropped, as Scheduler's maximum event age drops it, and a tick fires at most
`MAX_FIRINGS_PER_TICK` times per schedule.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from shepherd import schedules
from shepherd.definitions import Definition, ScheduleSpec

MAX_EVENT_AGE = timedelta(hours=1)  # = the deployed retry policy's MaximumEventAgeInSeconds
MAX_FIRINGS_PER_TICK = 10
LOCAL_GROUP = "shepherd-local"
_JUST = timedelta(microseconds=1)
_log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ScheduleClock:
    """Fires the enabled schedules of `definitions()` (read on every tick: a reload's new
    definitions are taken up) through `fire`, on the clock `now`."""

    def __init__(
        self,
        definitions: Callable[[], Mapping[str, Definition]],
        fire: Callable[[dict[str, Any]], object],
        *,
        anchor: datetime,
        account: str,
        region: str,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._definitions = definitions
        self._fire = fire
        self._anchor = anchor.astimezone(UTC).replace(microsecond=0)
        self._account = account
        self._region = region
        self._now = now
        # (type, name, expression, time zone) -> its next firing (None: it fires no more). A
        # changed expression or zone is another key: computed afresh.
        self._next: dict[tuple[str, str, str, str], datetime | None] = {}
        self._since: datetime | None = None  # the first tick: firings after it are ours
        self.fired: list[str] = []  # the idempotency keys fired, oldest first (last 1,000)

    def tick(self) -> int:
        """Fire every firing due by now; how many were fired."""
        now = self._now().astimezone(UTC)
        first = self._since is None
        if self._since is None:  # the stack's start, or as long ago as a firing may be late
            self._since = min(now, max(self._anchor, now - MAX_EVENT_AGE))
        fired = 0
        seen = set()
        for wf_type, definition in sorted(self._definitions().items()):
            for spec in definition.schedules:
                if not spec.enabled:
                    continue
                key = (wf_type, spec.name, spec.expression, spec.timezone)
                seen.add(key)
                try:
                    fired += self._tick_one(key, wf_type, spec, now, first)
                except Exception:  # one bad schedule never stops the others (issue 35.1)
                    _log.exception("schedule %s of %s: firing failed", spec.name, wf_type)
        for gone in set(self._next) - seen:  # removed, disabled or changed by a reload
            del self._next[gone]
        return fired

    def _tick_one(
        self,
        key: tuple[str, str, str, str],
        wf_type: str,
        spec: ScheduleSpec,
        now: datetime,
        first: bool,
    ) -> int:
        assert self._since is not None
        fired = 0
        if key not in self._next:  # at the first tick: since the start; later: from now
            self._next[key] = self._after(spec, self._since if first else now)
        due = self._next[key]
        if due is not None and now - due > MAX_EVENT_AGE:  # too late: dropped
            due = self._next[key] = self._after(spec, now - MAX_EVENT_AGE - _JUST)
        for _ in range(MAX_FIRINGS_PER_TICK):
            due = self._next[key]
            if due is None or due > now:
                break
            self._fire(self._event(wf_type, spec, due))
            fired += 1
            self._next[key] = self._after(spec, due)
        return fired

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Tick every `interval` seconds until `stop` is set (the local stack stopping)."""
        while not stop.wait(interval):
            self.tick()

    def _after(self, spec: ScheduleSpec, after: datetime) -> datetime | None:
        """Its next firing after `after`; None when it fires no more, or when its firings
        cannot be computed (logged: validation refuses such a schedule now)."""
        try:
            found = schedules.next_firings(
                schedules.parse(spec.expression),
                schedules.zone(spec.timezone),
                after,
                1,
                anchor=self._anchor,
            )
        except (ValueError, OverflowError):
            _log.exception("schedule %s: its firings cannot be computed", spec.name)
            return None
        return found[0] if found else None

    def _event(self, wf_type: str, spec: ScheduleSpec, due: datetime) -> dict[str, Any]:
        scheduled_time = due.strftime(schedules.TIME_FORMAT)
        event = schedules.firing_event(
            wf_type,
            spec.name,
            spec.input,
            account=self._account,
            region=self._region,
            scheduled_time=scheduled_time,
            execution_id=str(uuid.uuid4()),
            schedule_arn=(
                f"arn:aws:scheduler:{self._region}:{self._account}:schedule/"
                f"{LOCAL_GROUP}/{spec.name}"
            ),
        )
        self.fired = [*self.fired[-999:], event["detail"]["idempotency_key"]]
        return event


__all__ = ["MAX_EVENT_AGE", "MAX_FIRINGS_PER_TICK", "ScheduleClock"]
