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
from shepherd.decisions.ratelimit import SHARD_RATE, Buckets, admission
from shepherd.engine.executor import Executor
from shepherd.engine.limiter import RUN, PoolLimiter
from shepherd.keys import RATE_PREFIX
from shepherd.pool_policy import RateLimit, parse_policies
from shepherd.settings import ENV_POOL_POLICIES, Settings
from shepherd.testing import MemoryStore

START = ManualClock().now_ms()


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


def test_a_bucket_grants_its_burst_then_one_slot_per_interval() -> None:
    clock = ManualClock()
    pool = limiter(MemoryStore(), clock, per_second=10, burst=5)
    now = clock.now_ms()
    admissions = [pool.admit("pay") for _ in range(20)]
    assert admissions[:5] == [RUN] * 5  # the burst, now
    # Then each task has its own slot, one interval (100 ms) after the other: within a
    # second it waits in its invocation; later, it goes back to its queue for the whole
    # seconds before its slot, with the slot as its ticket.
    assert [a.ticket for a in admissions[5:]] == [now + 100 * k for k in range(1, 16)]
    assert all(a.run for a in admissions[5:15])  # slots up to 1 s ahead
    assert [a.wait_ms(now) for a in admissions[5:8]] == [100, 200, 300]
    assert [a.delay_seconds for a in admissions[15:]] == [1, 1, 1, 1, 1]
    assert pool.admit("other-pool") == RUN  # a pool without a limit is never held


def test_a_task_back_with_its_ticket_runs_at_its_slot_without_asking_again() -> None:
    clock = ManualClock()
    store = CountingStore()
    pool = limiter(store, clock, per_second=1, burst=1)
    assert pool.admit("pay").run
    pool.admit("pay")  # slot in 1 s: waits in its invocation
    held = pool.admit("pay")
    assert held.ticket == clock.now_ms() + 2000 and held.delay_seconds == 2
    writes = sum(store.per_item.values())
    clock.advance(1.5)  # comes back early (another agent's clock): waits the rest
    back = pool.admit("pay", held.ticket)
    assert back.run and back.wait_ms(clock.now_ms()) == 500
    assert sum(store.per_item.values()) == writes  # no write: the token was its own
    early = pool.admit("pay", clock.now_ms() + 5_000)
    assert (early.delay_seconds, early.ticket) == (5, clock.now_ms() + 5_000)


def test_the_achieved_rate_is_the_limit_and_no_shard_takes_more_than_its_share() -> None:
    """Tasks arrive at twice the limit for 10 simulated seconds and come back when told: every
    task runs exactly once, at its slot, 2,000 a second (within 1 %) in every whole second,
    and no item is written more than 1,000 times a second."""
    clock = ManualClock()
    store = CountingStore()
    pool = limiter(store, clock, per_second=2000, burst=40)
    waiting: dict[int, list[int]] = {}  # ms -> tickets coming back then
    ran: Counter[int] = Counter()  # second -> tasks run (at their slot)
    seconds = 10
    for ms in range(seconds * 1000 + 20_000):
        now = clock.now_ms()
        arrivals: list[int | None] = [None] * 4 if ms < seconds * 1000 else []
        for ticket in [*arrivals, *waiting.pop(ms, [])]:
            got = pool.admit("pay", ticket)
            if got.run:
                ran[(now + got.wait_ms(now) - START) // 1000] += 1
            else:
                assert got.ticket is not None and got.delay_seconds >= 1
                waiting.setdefault(ms + got.delay_seconds * 1000, []).append(got.ticket)
        clock.advance(0.001)
        if ms >= seconds * 1000 and not waiting:
            break
    assert sum(ran.values()) == 4 * seconds * 1000  # every task ran, once
    # Every whole second while the backlog lasts (the first holds the burst, the last drains).
    busy = [ran[s] for s in sorted(ran)[1:-2]]
    assert len(busy) >= 15 and all(abs(n - 2000) / 2000 < 0.01 for n in busy), str(busy)
    assert max(ran.values()) <= 2000 + 40
    shards = [pk for pk in store.per_item if pk.startswith(RATE_PREFIX)]
    assert len(shards) == 8  # ceil(2000 / 250)
    assert max(store.per_item[pk] for pk in shards) / seconds < 1000


def test_a_limiter_shared_by_processes_through_the_store() -> None:
    """Two agent processes (two limiters, one table) share one budget."""
    clock = ManualClock()
    store = MemoryStore()
    a, b = limiter(store, clock, 5, 2), limiter(store, clock, 5, 2)
    admissions = [p.admit("pay") for _ in range(3) for p in (a, b)]
    assert sum(1 for x in admissions if x == RUN) == 2
    tickets = [x.ticket for x in admissions if x != RUN]
    assert len(set(tickets)) == len(tickets) == 4  # one slot each, none given twice


class RacingStore(MemoryStore):
    """Runs `cut_in` just before the write numbered `at`: another process's take landing
    between this one's lost busy take and its idle take."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at
        self.cut_in: Any = None
        self.calls = 0

    def update(self, pk: str, sk: str, update: Any, condition: Any) -> Any:
        self.calls += 1
        if self.calls == self.at and self.cut_in is not None:
            cut_in, self.cut_in = self.cut_in, None
            cut_in()
        return super().update(pk, sk, update, condition)


def test_a_task_that_loses_the_race_for_an_idle_bucket_gets_the_next_slot() -> None:
    """Two agents find a bucket idle at once: one wins the idle take, the other's idle take
    loses to it. The loser gets the next slot (one interval on), never SQS's longest delay:
    the bucket is busy, not reserved past the horizon (issue 26.1: on the local stack 5 of 100
    tasks were parked 900 s this way, and came back only when the supervisor re-sent them a
    DispatchTimeoutSeconds later)."""
    clock = ManualClock()
    store = RacingStore(at=2)  # write 1: a's busy take (lost: idle); write 2: a's idle take
    a, b = limiter(store, clock, 5, 1), limiter(store, clock, 5, 1)
    other: list[Any] = []
    store.cut_in = lambda: other.append(b.admit("pay"))
    now = clock.now_ms()
    got = a.admit("pay")
    assert other == [RUN]  # b won the idle bucket
    assert got.run and got.ticket == now + 200  # a: the next slot, waited for in-process
    assert got.delay_seconds == 0


def test_reserved_until_is_the_furthest_slot_any_shard_has_handed_out() -> None:
    """What the supervisor waits for before a held task looks lost: no reservation of the
    pool's is later than its largest `tat` (here 2 shards, a slot every 8 ms in each)."""
    clock = ManualClock()
    store = CountingStore()
    pool = limiter(store, clock, per_second=500, burst=2)
    assert pool.reserved_until("pay") is None  # no bucket written yet
    tickets = [pool.admit("pay").ticket for _ in range(2000)]
    furthest = max(t for t in tickets if t is not None)
    until = pool.reserved_until("pay")
    assert until is not None and furthest <= until <= furthest + 8
    assert pool.reserved_until("other-pool") is None


def test_a_slot_within_a_second_is_paced_later_ones_wait_in_the_queue() -> None:
    assert admission(1_000_500, 1_000_000) == (0, 1_000_500)
    assert admission(1_001_000, 1_000_000) == (0, 1_001_000)
    assert admission(1_002_500, 1_000_000) == (2, 1_002_500)  # then 500 ms paced
    assert admission(10**12, 0) == (900, 10**12)  # SQS's longest delay, ticket kept


def test_past_the_horizon_a_task_waits_the_longest_delay_without_a_slot() -> None:
    clock = ManualClock()
    pool = limiter(MemoryStore(), clock, per_second=1, burst=1)
    admissions = [pool.admit("pay") for _ in range(905)]
    assert admissions[0].run
    assert admissions[898].ticket is not None  # slot 898 s ahead: within the horizon
    last = admissions[-1]
    assert last.delay_seconds == 900 and last.ticket is None


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


def test_a_ticket_travels_in_the_message_and_a_bad_one_is_a_poison_message() -> None:
    from shepherd.model import TaskMessage

    message = TaskMessage("wf-1", "charge", 2, ticket=1_767_225_601_000)
    assert TaskMessage.from_body(message.to_body()) == message
    assert '"r"' not in TaskMessage("wf-1", "charge", 2).to_body()  # no ticket: as before
    for bad in ('"soon"', "-1", "true"):
        with pytest.raises(ValueError, match="ticket"):
            TaskMessage.from_body(f'{{"w":"wf-1","s":"charge","a":2,"r":{bad}}}')
