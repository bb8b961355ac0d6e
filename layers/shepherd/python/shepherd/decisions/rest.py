"""Whether the supervisor ticks: the pure half of `shepherd.engine.wakeup`.

The supervisor's scheduled run (once a minute) probes the watch index for any entry at all.
It stops sending the minute's ticks only after finding the index empty twice, at least
`DROWSY_MS` apart (awake -> drowsy -> asleep, each one conditional write on one item), and a
writer that puts work in the index while the supervisor is not awake wakes it (drowsy or
asleep -> awake). Why two probes `DROWSY_MS` apart: a writer that saw the supervisor awake
trusts that for `SEEN_AWAKE_MS` (one read per process and period, not one per start, which
would make the item hot), so its entry may be written up to `SEEN_AWAKE_MS` after the
supervisor went drowsy; the probe that puts it to sleep comes at least `DROWSY_MS` after that,
which leaves the index `DROWSY_MS - SEEN_AWAKE_MS` (40 s) to show the entry (a GSI usually
shows a write within a second). And whatever happens, the scheduled run still probes every
minute while asleep: an entry it finds wakes it, so no entry is ever left unswept; a start
that wakes it costs no wait at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shepherd.conditions import Cond, Eq, Missing, all_of, any_of

AWAKE, DROWSY, ASLEEP = "awake", "drowsy", "asleep"
STATE, SINCE = "state", "since"
DROWSY_MS = 50_000  # the scheduled run a minute later qualifies (runs are 60 s apart)
SEEN_AWAKE_MS = 10_000  # how long a writer trusts a read that found the supervisor awake


@dataclass(frozen=True)
class Rest:
    """The supervisor's state as its item records it (no item: awake, as before issue 35)."""

    state: str = AWAKE
    since: int = 0

    @classmethod
    def of(cls, item: Mapping[str, Any] | None) -> Rest:
        if not item or item.get(STATE) not in (AWAKE, DROWSY, ASLEEP):
            return cls()
        return cls(str(item[STATE]), int(item.get(SINCE, 0)))

    def guard(self) -> Cond:
        """The condition a write moving from this state holds to: nobody moved it since."""
        if self.state == AWAKE:
            return any_of(Missing(STATE), Eq(STATE, AWAKE))
        return all_of(Eq(STATE, self.state), Eq(SINCE, self.since))


@dataclass(frozen=True)
class Plan:
    """What a scheduled run does: the state to write (None: keep it), and whether it sweeps
    and sends the minute's ticks (an asleep run sweeps nothing: the probe found nothing)."""

    to: str | None
    ticks: bool


def plan(rest: Rest, watched: bool, now: int) -> Plan:
    """The scheduled run's decision from the state it read and its probe of the index."""
    if watched:
        return Plan(None if rest.state == AWAKE else AWAKE, True)
    if rest.state == AWAKE:
        return Plan(DROWSY, True)
    if rest.state == DROWSY:
        if now - rest.since >= DROWSY_MS:
            return Plan(ASLEEP, False)
        return Plan(None, True)
    return Plan(None, False)
