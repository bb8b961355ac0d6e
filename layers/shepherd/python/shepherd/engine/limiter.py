"""A pool's rate limiter: a token now, or a reserved slot to come back at.

Applies `decisions.ratelimit` through the executor: one conditional write per task on a
random shard of the pool's buckets (docs/architecture.md, the rate limiter). A task that
comes back with its ticket (the slot reserved for it) runs without a write.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from shepherd.clock import Clock
from shepherd.decisions import transitions as tx
from shepherd.decisions.ratelimit import MAX_DELAY_S, TAT, Buckets, admission
from shepherd.engine.executor import Executor
from shepherd.keys import rate_pk
from shepherd.pool_policy import PoolPolicy
from shepherd.ports import MAX_BATCH_GET

TRIES = 3  # writes one take makes at most (a race with another take on the same shard)


@dataclass(frozen=True)
class Admission:
    """Run at `ticket` (`delay_seconds` 0: now, or within a second, waited for in the
    invocation), or come back in `delay_seconds` with `ticket` (epoch ms; None: ask again
    then, no slot was reserved)."""

    delay_seconds: int = 0
    ticket: int | None = None

    @property
    def run(self) -> bool:
        return self.delay_seconds == 0

    def wait_ms(self, now_ms: int) -> int:
        """How long a task that runs waits for its slot first."""
        return 0 if self.ticket is None else max(0, self.ticket - now_ms)


RUN = Admission()


class PoolLimiter:
    """Every rate-limited pool's buckets, shared by all agent invocations through the table."""

    def __init__(
        self,
        executor: Executor,
        clock: Clock,
        rng: random.Random,
        policies: Mapping[str, PoolPolicy],
    ) -> None:
        self._executor = executor
        self._clock = clock
        self._rng = rng
        self._buckets = {
            pool: Buckets.of(policy.rate_limit)
            for pool, policy in policies.items()
            if policy.rate_limit is not None
        }
        self._lock = threading.Lock()

    def limits(self, pool: str) -> bool:
        return pool in self._buckets

    def reserved_until(self, pool: str) -> int | None:
        """The furthest slot `pool`'s buckets have reserved (epoch ms: the largest `tat`, which
        no reservation passes), one batch read of its items per 100 shards; None without a
        limit or a bucket yet. What the supervisor waits for before a held task looks lost."""
        buckets = self._buckets.get(pool)
        if buckets is None:
            return None
        keys = [rate_pk(pool, shard) for shard in range(buckets.shards)]
        tats = [
            int(item[TAT])
            for first in range(0, len(keys), MAX_BATCH_GET)
            for item in self._executor.store.get_many(keys[first : first + MAX_BATCH_GET])
            if item.get(TAT) is not None
        ]
        return -(-max(tats) // 1000) if tats else None

    def admit(self, pool: str, ticket: int | None = None) -> Admission:
        """Whether a task of `pool` may be claimed now; a task holding a `ticket` whose slot
        has come runs without a write."""
        buckets = self._buckets.get(pool)
        if buckets is None:
            return RUN
        now_ms = self._clock.now_ms()
        if ticket is not None:  # its slot was reserved: wait for it, never ask again
            return Admission(*admission(ticket, now_ms))
        now_us = now_ms * 1000
        with self._lock:
            shard = self._rng.randrange(buckets.shards)
        pk, sk = rate_pk(pool, shard)
        for _ in range(TRIES):
            item, current = self._executor.raw_or_current(
                tx.Write(pk, sk, *buckets.busy_take(now_us))
            )
            if item is None and Buckets.idle(current, now_us):
                item, current = self._executor.raw_or_current(
                    tx.Write(pk, sk, *buckets.idle_take(now_us))
                )
            if item is not None:
                slot = buckets.slot_us(int(item["tat"]))
                if slot <= now_us:
                    return RUN
                return Admission(*admission(-(-slot // 1000), now_ms))
            if Buckets.full(current, now_us):
                # Reserved past the horizon: wait the longest delay, ask again then.
                return Admission(MAX_DELAY_S)
            # Lost a race (another take moved `tat` first, an idle take's too): the bucket
            # is busy now, and the next busy take gets the next slot.
        return Admission(1)  # lost every race: ask again in a second
