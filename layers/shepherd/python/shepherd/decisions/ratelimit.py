"""A pool's rate limiter as pure decisions: GCRA buckets sharded over N items.

The limit `PerSecond` is split over `N = ceil(PerSecond / SHARD_RATE)` independent buckets
of rate `PerSecond / N` and burst `max(1, round(Burst / N))`; a claim picks one at random, so
no item takes more than SHARD_RATE grants a second (a quarter of DynamoDB's 1,000 write units
a second per item: the rest is for denied conditional writes). State per bucket: `tat`, the
GCRA theoretical arrival time in epoch microseconds. Nothing here does I/O: `engine.limiter`
applies these writes (docs/architecture.md, the rate limiter).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shepherd.conditions import Cond, Ge, Item, Lt, Missing, Update, all_of, any_of
from shepherd.pool_policy import RateLimit

SHARD_RATE = 250  # grants a second one bucket item takes at most
TAT = "tat"


@dataclass(frozen=True)
class Buckets:
    """How a pool's limit is spread: `shards` buckets, each granting one token every
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
        """A busy bucket (its `tat` not in the past) with room: `tat += T`. One write, no
        read: the common case under load."""
        return Update(add={TAT: self.interval_us}), all_of(
            Ge(TAT, now_us), Lt(TAT, now_us + self.tolerance_us + 1)
        )

    def idle_take(self, now_us: int) -> tuple[Update, Cond]:
        """An idle bucket (never used, or its `tat` in the past): `tat = now + T`."""
        return Update(set={TAT: now_us + self.interval_us}), any_of(Missing(TAT), Lt(TAT, now_us))

    def wait_us(self, item: Item | None, now_us: int) -> int | None:
        """After a lost write, the bucket as it now is: None if it is idle (take it with
        `idle_take`), 0 if it has room (try `busy_take` again), else how long until it has."""
        tat = None if item is None else item.get(TAT)
        if tat is None or int(tat) < now_us:
            return None
        return max(0, int(tat) - now_us - self.tolerance_us)


def hold_seconds(wait_us: int, denials: int, jitter: float) -> int:
    """How long a task that found no token waits in its queue (SQS DelaySeconds, whole
    seconds up to 900): the bucket's wait, then a spread that doubles with the denials this
    process saw in a row (up to a minute), so a backlog's retries do not all come back at once.
    `jitter` is uniform in [0, 1)."""
    spread = min(60, 2 ** min(denials, 6))
    return min(900, max(1, math.ceil(wait_us / 1_000_000)) + int(jitter * spread))
