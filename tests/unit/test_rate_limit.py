"""The per-pool rate limiter: GCRA buckets sharded over N items, under a ManualClock.

Proves the arithmetic that keeps a 5,000/s pool off any hot item, that a bucket grants its
burst and then exactly its rate, that a held task waits a bounded, spread delay, and that the
policy is read with errors that name the pool and the field."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from shepherd.clock import ManualClock
from shepherd.decisions.ratelimit import SHARD_RATE, Buckets, hold_seconds
from shepherd.engine.executor import Executor
from shepherd.engine.limiter import PoolLimiter
from shepherd.keys import RATE_PREFIX
from shepherd.pool_policy import RateLimit, parse_policies
from shepherd.settings import ENV_POOL_POLICIES, Settings
from shepherd.testing import MemoryStore


class _Ports:
    def __init__(self, store: Any) -> None:
        self.store = store


class CountingStore(MemoryStore):
    """Counts writes per item: the limiter's heat."""

    def __init__(self) -> None:
        super().__init__()
        self.per_item: Counter[str] = Counter()

    def update(self, pk: str, sk: str, update: Any, condition: Any) -> Any:
        self.per_item[pk] += 1
        return super().update(pk, sk, update, condition)


def limiter(store: Any, clock: ManualClock, per_second: float, burst: int) -> PoolLimiter:
    policies = parse_policies(
        {"pay": {"RateLimit": {"PerSecond": per_second, "Burst": burst}}}, source="test"
    )
    return PoolLimiter(Executor(_Ports(store)), clock, random.Random(3), policies)


def test_a_5000_per_second_pool_is_spread_over_shards_none_hotter_than_its_share() -> None:
    buckets = Buckets.of(RateLimit(per_second=5000, burst=100))
    assert buckets.shards == 20 and buckets.shards * SHARD_RATE >= 5000
    assert buckets.interval_us == 4000  # 250 grants a second per shard
    assert buckets.burst == 5
    # Under DynamoDB's 1,000 write units a second per item, with room for denials.
    assert 1_000_000 / buckets.interval_us <= 1000 / 4
    small = Buckets.of(RateLimit(per_second=10, burst=1))
    assert (small.shards, small.interval_us, small.burst) == (1, 100_000, 1)


def test_a_bucket_grants_its_burst_at_once_then_one_token_per_interval() -> None:
    clock = ManualClock()
    pool = limiter(MemoryStore(), clock, per_second=10, burst=5)
    granted = [pool.take("pay") for _ in range(8)]
    assert granted[:5] == [0] * 5  # the burst
    assert all(hold >= 1 for hold in granted[5:])  # then held, with a delay
    clock.advance(0.1)  # one interval: one more token
    assert pool.take("pay") == 0
    assert pool.take("pay") > 0
    assert pool.take("other-pool") == 0  # a pool without a limit is never held


def test_the_achieved_rate_is_the_limit_and_no_shard_takes_more_than_its_share() -> None:
    """Many claims every millisecond for 10 simulated seconds against 2,000/s: grants are
    within 1 % of 2,000/s plus the burst, and the writes per item stay under 1,000 a second."""
    clock = ManualClock()
    store = CountingStore()
    pool = limiter(store, clock, per_second=2000, burst=40)
    seconds, granted = 10, 0
    for _ in range(seconds * 1000):
        for _ in range(4):  # 4,000 asks a second, twice the limit
            if pool.take("pay") == 0:
                granted += 1
        clock.advance(0.001)
    expected = 2000 * seconds + 40
    assert abs(granted - expected) / expected < 0.01
    shards = [pk for pk in store.per_item if pk.startswith(RATE_PREFIX)]
    assert len(shards) == 8  # ceil(2000 / 250)
    assert max(store.per_item[pk] for pk in shards) / seconds < 1000


def test_a_process_that_knows_every_shard_is_full_holds_without_writing() -> None:
    clock = ManualClock()
    store = CountingStore()
    pool = limiter(store, clock, per_second=10, burst=1)
    assert pool.take("pay") == 0
    assert pool.take("pay") > 0  # learns the shard is full
    writes = sum(store.per_item.values())
    for _ in range(50):
        assert pool.take("pay") > 0
    assert sum(store.per_item.values()) == writes  # no write while it knows


def test_a_limiter_shared_by_processes_through_the_store() -> None:
    """Two agent processes (two limiters, one table) share one budget."""
    clock = ManualClock()
    store = MemoryStore()
    a, b = limiter(store, clock, 5, 2), limiter(store, clock, 5, 2)
    grants = sum(1 for _ in range(10) for p in (a, b) if p.take("pay") == 0)
    assert grants == 2


def test_hold_seconds_is_the_wait_then_a_spread_that_grows_with_denials() -> None:
    assert hold_seconds(0, 1, 0.0) == 1  # SQS delays are whole seconds: at least one
    assert hold_seconds(2_500_000, 1, 0.0) == 3
    assert hold_seconds(0, 1, 0.99) == 2  # spread 2 on a first denial
    assert hold_seconds(0, 10, 0.99) == 60  # up to a minute
    assert hold_seconds(10**12, 1, 0.5) == 900  # SQS's longest delay


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"pay": {"RateLimit": {"PerSecond": 0}}}, "pool 'pay': RateLimit.PerSecond"),
        ({"pay": {"RateLimit": {"PerSecond": 10, "Burst": 0}}}, "pool 'pay': RateLimit.Burst"),
        ({"pay": {"RateLimit": {"PerSecond": 10, "Brust": 3}}}, "RateLimit.Brust"),
        ({"pay": {"RateLimit": {"PerSecond": 200_000}}}, "RateLimit.PerSecond"),
        ("[1]", "must be an object"),
        ("{", "not JSON"),
    ],
)
def test_a_bad_policy_names_the_pool_and_the_field(body: Any, says: str) -> None:
    with pytest.raises(ValueError, match=f"{ENV_POOL_POLICIES}: .*{says}"):
        parse_policies(
            body if isinstance(body, str) else __import__("json").dumps(body),
            source=ENV_POOL_POLICIES,
        )


def test_settings_read_and_write_the_policies_variable() -> None:
    env = {
        "SHEPHERD_TABLE": "t-1",
        ENV_POOL_POLICIES: '{"pay":{"RateLimit":{"PerSecond":50,"Burst":10}}}',
    }
    settings = Settings.from_env(env)
    limit = settings.pool_policies["pay"].rate_limit
    assert limit is not None and (limit.per_second, limit.burst) == (50, 10)
    assert Settings.from_env(settings.to_env()).pool_policies == settings.pool_policies
    assert ENV_POOL_POLICIES not in Settings.from_env({"SHEPHERD_TABLE": "t-1"}).to_env()
