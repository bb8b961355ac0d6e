"""A pool's rate limiter: take a token before a claim, or say how long the task must wait.

Applies `decisions.ratelimit` through the executor: one conditional write per granted token
on a random shard of the pool's buckets (docs/architecture.md, the rate limiter). What this
process learned about a full shard (until when it is full) is kept in memory, so a busy
process holds tasks without writing to a shard it knows has no token.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping

from shepherd.clock import Clock
from shepherd.decisions import transitions as tx
from shepherd.decisions.ratelimit import Buckets, hold_seconds
from shepherd.engine.executor import Executor
from shepherd.keys import rate_pk
from shepherd.pool_policy import PoolPolicy

TRIES = 3  # writes one take makes at most (a race with another claim on the same shard)


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
        self._full_until: dict[tuple[str, int], int] = {}
        self._denials: dict[str, int] = {}
        self._lock = threading.Lock()

    def limits(self, pool: str) -> bool:
        return pool in self._buckets

    def take(self, pool: str) -> int:
        """0 if the pool granted a token (or has no limit), else the whole seconds the task
        should wait in its queue before it asks again."""
        buckets = self._buckets.get(pool)
        if buckets is None:
            return 0
        now_us = self._clock.now_ms() * 1000
        with self._lock:
            open_shards = [
                s for s in range(buckets.shards) if self._full_until.get((pool, s), 0) <= now_us
            ]
            if not open_shards:
                soonest = min(self._full_until[(pool, s)] for s in range(buckets.shards))
                return self._denied(pool, soonest - now_us)
            shard = self._rng.choice(open_shards)
        pk, sk = rate_pk(pool, shard)
        for _ in range(TRIES):
            won, current = self._executor.raw_or_current(
                tx.Write(pk, sk, *buckets.busy_take(now_us))
            )
            if won:
                return self._granted(pool)
            wait = buckets.wait_us(current, now_us)
            if wait is None:  # idle bucket: start it at now
                won, current = self._executor.raw_or_current(
                    tx.Write(pk, sk, *buckets.idle_take(now_us))
                )
                if won:
                    return self._granted(pool)
                wait = buckets.wait_us(current, now_us)
            if wait:
                with self._lock:
                    self._full_until[(pool, shard)] = now_us + wait
                    return self._denied(pool, wait)
            # wait is 0 or None again: another claim moved the bucket between our writes
        with self._lock:
            return self._denied(pool, 0)

    def _granted(self, pool: str) -> int:
        with self._lock:
            self._denials[pool] = 0
        return 0

    def _denied(self, pool: str, wait_us: int) -> int:
        """Caller holds the lock."""
        denials = self._denials.get(pool, 0) + 1
        self._denials[pool] = denials
        return hold_seconds(max(0, wait_us), denials, self._rng.random())
