"""Pools that protect what they call: the rate limiter's achieved rate, and what it costs.

Two measurements under a simulated clock (no wall time, deterministic from a seed):

* `end_to_end`: the real engine (the one factory) over the in-memory ports, the example
  `order_fulfilment` with its `payments` pool limited; a backlog of workflows, agents that
  receive far faster than the limit every 10 ms. Measured: `charge_payment` claims a second over
  the steady stretch (first and last seconds left out), against the limit; tasks held per
  claim; limiter writes per claim; every workflow SUCCEEDED with one attempt per step.
* `design_load`: the limiter alone at 5,000 a second (20 shards, ten agent processes), tasks
  arriving at 10,000 a second for 5 s and coming back when told: the rate of every whole
  second and the hottest shard's writes a second (DynamoDB allows 1,000).

`python -m shepherd_bench --refresh-pools` writes them under `pools.rate_limit` in
docs/benchmarks.json.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from shepherd.clock import ManualClock
from shepherd.decisions.ratelimit import MAX_DELAY_S, Buckets
from shepherd.engine.agent import Outcome
from shepherd.engine.build import build_engine
from shepherd.engine.executor import Executor
from shepherd.engine.limiter import PoolLimiter
from shepherd.engine.scheduler import EngineConfig, Ports
from shepherd.keys import RATE_PREFIX
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.pool_policy import RateLimit, parse_policies
from shepherd.testing import MemoryQueue, MemoryStore, SequentialIds

from shepherd_bench.cost import ORDER

TICK_S = 0.01
ROOT = Path(__file__).resolve().parents[2]


class _CountingStore(MemoryStore):
    """Counts the limiter's writes (requests, as the bench meter prices them), per item."""

    def __init__(self) -> None:
        super().__init__()
        self.rate_writes: Counter[str] = Counter()

    def update(self, pk: str, sk: str, update: Any, condition: Any) -> Any:
        if pk.startswith(RATE_PREFIX):
            self.rate_writes[pk] += 1
        return super().update(pk, sk, update, condition)


def end_to_end(
    *, workflows: int = 1500, per_second: float = 100, burst: int = 10, receive: int = 20
) -> dict[str, Any]:
    """A backlog of `workflows` through a pool limited to `per_second`; agents receive up to
    `receive` messages of each pool every 10 ms (2,000 a second: far above the limit)."""
    from shepherd.definitions import load_directory
    from shepherd.engine.agent import AgentRegistry

    clock = ManualClock()
    store = _CountingStore()
    queue = MemoryQueue(clock, visibility_ms=300_000)
    ports = Ports(
        store, queue, clock, SequentialIds(), random.Random(11), Payloads(MemoryPayloadStore())
    )
    definitions = {"order_fulfilment": load_directory(ROOT / "statemachines")["order_fulfilment"]}
    registry = AgentRegistry()  # instant agents: the bench measures the limiter, not them
    for task in definitions["order_fulfilment"].tasks:
        registry.register(task.agent, lambda ctx: {"ok": True})
    policies = parse_policies(
        {"payments": {"RateLimit": {"PerSecond": per_second, "Burst": burst}}}, source="bench"
    )
    engine = build_engine(
        ports,
        definitions,
        agents=registry,
        config=EngineConfig(watch_shards=16),
        pool_control=queue,
        background_heartbeats=False,
        pool_policies=policies,
    )
    ids = [
        engine.scheduler.start(
            "order_fulfilment", {**ORDER, "order_id": f"o-{i}"}, owner="bench"
        ).workflow_id
        for i in range(workflows)
    ]
    pools = sorted({t.pool for d in definitions.values() for t in d.tasks})
    claims: Counter[int] = Counter()  # simulated second -> charge_payment claims
    held = 0
    start_ms = clock.now_ms()
    max_ticks = int(4 * workflows / per_second / TICK_S) + 60_000
    for tick in range(max_ticks):
        busy = False
        for pool in pools:
            for message in queue.receive(pool, receive):
                busy = True
                result = engine.agent_runtime.handle(message.task)
                queue.delete(message.receipt)
                if message.task.step != "charge_payment":
                    continue
                if result.outcome is Outcome.HELD:
                    held += 1
                else:
                    claims[(clock.now_ms() - start_ms) // 1000] += 1
        if tick % 100 == 0:
            engine.supervisor.sweep()
        idle = not busy and queue.depth("payments") == 0 and tick % 100 == 0
        if idle and all(_done(engine, w) for w in ids):
            break
        clock.advance(TICK_S)
    states = [engine.scheduler.load(w) for w in ids]
    succeeded = sum(
        1 for s in states if s is not None and s[0].workflow.status is WorkflowStatus.SUCCEEDED
    )
    # One attempt per step that ran; a small order's skipped steps (its fraud review and
    # reminder) none.
    one_attempt = all(
        rec.attempt == (0 if rec.status is StepStatus.SKIPPED else 1)
        for s in states
        if s is not None
        for rec in s[0].steps.values()
    )
    seconds = sorted(claims)
    steady = [claims[s] for s in seconds[1:-2]] or [0]
    granted = sum(claims.values())
    return {
        "per_second": per_second,
        "burst": burst,
        "workflows": workflows,
        "succeeded": succeeded,
        "one_attempt_per_step": one_attempt,
        "achieved_per_second_mean": statistics.fmean(steady),
        "achieved_per_second_max": max(steady),
        "achieved_per_second_min": min(steady),
        "error_vs_limit": max(abs(n - per_second) for n in steady) / per_second,
        "held_per_claim": held / max(1, granted),
        "limiter_writes_per_claim": sum(store.rate_writes.values()) / max(1, granted),
        "simulated_seconds": (clock.now_ms() - start_ms) / 1000,
    }


def _drive(
    engine: Any, queue: MemoryQueue, clock: ManualClock, workflows: int, every_seconds: int
) -> list[str]:
    """Start a workflow every `every_seconds`, deliver every visible task each simulated
    second, sweep every 5 s, until all are terminal (or 3 h after the last start)."""
    pools = sorted(
        {t.pool for n in engine.catalog.names() for t in engine.catalog.current(n).tasks}
    )
    ids: list[str] = []
    for second in range(workflows * every_seconds + 3 * 3600):
        if second % every_seconds == 0 and len(ids) < workflows:
            payload = {**ORDER, "order_id": f"o-{len(ids)}"}
            ids.append(
                engine.scheduler.start("order_fulfilment", payload, owner="bench").workflow_id
            )
        for _ in range(20):
            messages = [m for pool in pools for m in queue.receive(pool, 10)]
            for message in messages:
                engine.agent_runtime.handle(message.task)
                queue.delete(message.receipt)
            if not messages:
                break
        if second % 5 == 0:
            engine.supervisor.sweep()
        if len(ids) == workflows and second % 60 == 0 and all(_done(engine, w) for w in ids):
            break
        clock.advance(1)
    return ids


def _done(engine: Any, workflow_id: str) -> bool:
    loaded = engine.scheduler.load(workflow_id)
    return loaded is not None and loaded[0].workflow.status.terminal


def design_load(
    *, per_second: float = 5000, burst: int = 100, arrivals_per_ms: int = 10, seconds: int = 5
) -> dict[str, Any]:
    """The limiter alone at the design load: tasks arrive at twice the limit (ten agent
    processes sharing the table) and come back when told; each runs at its slot. How close to
    the limit each whole second is, and how hot its items are."""
    clock = ManualClock()
    store = _CountingStore()

    class _P:
        pass

    holder = _P()
    holder.store = store  # type: ignore[attr-defined]
    policies = parse_policies(
        {"p": {"RateLimit": {"PerSecond": per_second, "Burst": burst}}}, source="bench"
    )
    limiters = [
        PoolLimiter(Executor(holder), clock, random.Random(n), policies)  # type: ignore[arg-type]
        for n in range(10)
    ]
    start = clock.now_ms()
    waiting: dict[int, list[int | None]] = {}
    ran: Counter[int] = Counter()
    held = 0
    for ms in range(seconds * 1000 + MAX_DELAY_S * 1000):
        now = clock.now_ms()
        fresh: list[int | None] = [None] * arrivals_per_ms if ms < seconds * 1000 else []
        for n, ticket in enumerate([*fresh, *waiting.pop(ms, [])]):
            got = limiters[(ms + n) % len(limiters)].admit("p", ticket)
            if got.run:
                ran[(now + got.wait_ms(now) - start) // 1000] += 1
            else:
                held += 1
                waiting.setdefault(ms + got.delay_seconds * 1000, []).append(got.ticket)
        clock.advance(0.001)
        if ms >= seconds * 1000 and not waiting:
            break
    buckets = Buckets.of(RateLimit(per_second=per_second, burst=burst))
    steady = [ran[s] for s in sorted(ran)[1:-2]] or [0]
    tasks = arrivals_per_ms * 1000 * seconds
    writes = sum(store.rate_writes.values())
    return {
        "per_second": per_second,
        "burst": burst,
        "shards": buckets.shards,
        "tasks": tasks,
        "ran": sum(ran.values()),
        "arrivals_per_second": arrivals_per_ms * 1000,
        "achieved_per_second_mean": statistics.fmean(steady),
        "achieved_per_second_min": min(steady),
        "achieved_per_second_max": max(steady),
        "error_vs_limit": max(abs(n - per_second) for n in steady) / per_second,
        "hottest_item_writes_per_second": max(store.rate_writes.values()) / seconds,
        "limiter_writes_per_task": writes / tasks,
        "held_per_task": held / tasks,
    }


def outages(seeds: int = 20) -> dict[str, Any]:
    """A 30-minute outage over `seeds` seeds, without and with a breaker."""
    out: dict[str, Any] = {}
    for name, breaker in (("without_breaker", False), ("with_breaker", True)):
        runs = [outage(breaker=breaker, seed=seed) for seed in range(seeds)]
        shares = [r["succeeded_share"] for r in runs]
        out[name] = {
            **runs[0],
            "seeds": seeds,
            "succeeded_share_mean": statistics.fmean(shares),
            "succeeded_share_min": min(shares),
            "calls_while_open_total": sum(r["calls_while_open"] for r in runs),
        }
    return out


def run_pools() -> dict[str, Any]:
    return {
        "rate_limit": {"end_to_end": end_to_end(), "design_load": design_load()},
        "circuit_breaker": {"outage_30_min": outages()},
    }


BREAKER = {
    "FailureRatio": 0.5,
    "MinimumAttempts": 5,
    "WindowSeconds": 60,
    "CooldownSeconds": 120,
    "ProbeAttempts": 1,
}


def outage(
    *,
    breaker: bool,
    outage_minutes: int = 30,
    workflows: int = 240,
    every_seconds: int = 15,
    seed: int = 5,
) -> dict[str, Any]:
    """The example `order_fulfilment`, a workflow started every `every_seconds`; its
    `payments` pool's downstream fails every call for `outage_minutes` from the 20th minute.
    With or without a breaker on `payments`: the share of workflows that end SUCCEEDED, and
    how many payment calls ran while the circuit was open (must be 0)."""
    from shepherd.definitions import load_directory
    from shepherd.engine.agent import AgentContext, AgentRegistry
    from shepherd.keys import POOLS_PK

    clock = ManualClock()
    store = MemoryStore()
    queue = MemoryQueue(clock, visibility_ms=300_000)
    ports = Ports(
        store, queue, clock, SequentialIds(), random.Random(seed), Payloads(MemoryPayloadStore())
    )
    definitions = {"order_fulfilment": load_directory(ROOT / "statemachines")["order_fulfilment"]}
    start = clock.now_ms()
    down = (start + 20 * 60_000, start + (20 + outage_minutes) * 60_000)
    seen = {"calls": 0, "failed": 0, "while_open": 0}

    def charge(ctx: AgentContext) -> Any:
        seen["calls"] += 1
        item = store.get(POOLS_PK, "payments") or {}
        if item.get("circuit") == "open":
            seen["while_open"] += 1  # an attempt consumed while open: the invariant broke
        if down[0] <= clock.now_ms() < down[1]:
            seen["failed"] += 1
            raise RuntimeError("503 from the payment provider")
        return {"charge_id": f"ch-{ctx.workflow_id}", "amount": 1}

    registry = AgentRegistry()
    for task in definitions["order_fulfilment"].tasks:
        registry.register(task.agent, lambda ctx: {"ok": True})
    registry.register("charge_payment", charge)
    policies = parse_policies(
        {"payments": {"CircuitBreaker": BREAKER}} if breaker else {}, source="bench"
    )
    engine = build_engine(
        ports,
        definitions,
        agents=registry,
        config=EngineConfig(watch_shards=16),
        pool_control=queue,
        background_heartbeats=False,
        pool_policies=policies,
    )
    ids = _drive(engine, queue, clock, workflows, every_seconds)
    statuses: Counter[str] = Counter()
    for w in ids:
        loaded = engine.scheduler.load(w)
        statuses[loaded[0].workflow.status.value if loaded else "missing"] += 1
    history = (store.get(POOLS_PK, "payments") or {}).get("circuit_history", [])
    return {
        "breaker": BREAKER if breaker else None,
        "outage_minutes": outage_minutes,
        "workflows": workflows,
        "started_every_seconds": every_seconds,
        "succeeded_share": statuses["SUCCEEDED"] / workflows,
        "statuses": dict(statuses),
        "payment_calls": seen["calls"],
        "payment_calls_failed": seen["failed"],
        "calls_while_open": seen["while_open"],
        "circuit_transitions": len(history),
        "simulated_minutes": round((clock.now_ms() - start) / 60_000, 1),
    }
