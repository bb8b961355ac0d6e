"""A pool's rate limiter as pure decisions: GCRA buckets sharded over N items, with
reservations.

The limit `PerSecond` is split over `N = ceil(PerSecond / SHARD_RATE)` independent buckets
of rate `PerSecond / N` and burst `max(1, round(Burst / N))`; a task picks one at random. State
per bucket: `tat`, the GCRA theoretical arrival time in epoch microseconds. A task that asks
always gets a slot with one write: `tat` moves on by one interval and the task's slot is the
new `tat` less an interval and the burst tolerance. A slot now or past runs at once; one
within a second is waited for in the invocation; a later one is a *reservation* (a ticket):
the task goes back to its queue for the whole seconds before its slot, then waits the rest
and runs without asking again. So the tokens of a second are handed out exactly once, whatever
the queue's whole-second delays do to when tasks come back, and a held task costs one write
and one re-send, never a second denial. Reservations reach at most HORIZON ahead (SQS delays
a message 900 s at most); past it a task waits without a reservation. Nothing here does I/O:
`engine.limiter` applies these writes (docs/architecture.md, the rate limiter).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shepherd.conditions import Cond, Ge, Item, Lt, Missing, Update, all_of, any_of
from shepherd.pool_policy import RateLimit

SHARD_RATE = 250  # tokens a second one bucket item hands out at most
MAX_DELAY_S = 900  # SQS's longest DelaySeconds
PACE_MS = 1000  # a slot this close is waited for in the invocation, not in the queue
HORIZON_US = (MAX_DELAY_S - 1) * 1_000_000  # how far ahead a reservation may reach
TAT = "tat"


@dataclass(frozen=True)
class Buckets:
    """How a pool's limit is spread: `shards` buckets, each handing out one token every
    `interval_us` with `burst` at most at once."""

    shards: int
    interval_us: int
    burst: int

    @classmethod
    def of(cls, limit: RateLimit) -> Buckets:
        shards = max(1, math.ceil(limit.per_second / SHARD_RATE))
        per_shard = limit.per_second / shards
        return cls(
            shards=shards,
            interval_us=max(1, round(1_000_000 / per_shard)),
            burst=max(1, round(limit.burst / shards)),
        )

    @property
    def tolerance_us(self) -> int:
        """How far ahead of now a bucket's `tat` may be and still grant: (burst - 1) x T."""
        return (self.burst - 1) * self.interval_us

    def busy_take(self, now_us: int) -> tuple[Update, Cond]:
        """A busy bucket (its `tat` not in the past, within the horizon): `tat += T`. One
        write, no read: the common case under load."""
        return Update(add={TAT: self.interval_us}), all_of(
            Ge(TAT, now_us), Lt(TAT, now_us + HORIZON_US)
        )

    def idle_take(self, now_us: int) -> tuple[Update, Cond]:
        """An idle bucket (never used, or its `tat` in the past): `tat = now + T`."""
        return Update(set={TAT: now_us + self.interval_us}), any_of(Missing(TAT), Lt(TAT, now_us))

    def slot_us(self, new_tat: int) -> int:
        """The slot a take that moved `tat` to `new_tat` got: when it conforms."""
        return new_tat - self.interval_us - self.tolerance_us

    @staticmethod
    def idle(item: Item | None, now_us: int) -> bool:
        """After a lost busy take: whether the bucket is idle (take it with `idle_take`)."""
        tat = None if item is None else item.get(TAT)
        return tat is None or int(tat) < now_us

    @staticmethod
    def full(item: Item | None, now_us: int) -> bool:
        """After a lost take: whether the bucket is reserved past the horizon (no slot to
        give). Any other lost take lost a race, and the next take gets the next slot."""
        tat = None if item is None else item.get(TAT)
        return tat is not None and int(tat) >= now_us + HORIZON_US


def admission(slot_ms: int, now_ms: int) -> tuple[int, int]:
    """What a task whose slot is `slot_ms` does now: (0, slot) runs at its slot, pacing the
    rest of a second in its invocation (SQS delays only whole seconds, and a task that ran at
    the next whole second would bunch a second's tokens); (seconds, slot) goes back to its
    queue for the whole seconds before its slot, with its ticket."""
    ahead = slot_ms - now_ms
    if ahead <= PACE_MS:
        return 0, slot_ms
    return min(MAX_DELAY_S, ahead // 1000), slot_ms
