"""The engine core over chosen ports, under a ManualClock: for the supervisor benchmarks."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from shepherd.clock import ManualClock
from shepherd.definitions import Definition, load_directory
from shepherd.engine.agent import AgentRegistry, AgentRuntime, HandleResult
from shepherd.engine.build import build_engine
from shepherd.engine.scheduler import EngineConfig, Ports, Scheduler
from shepherd.engine.supervisor import Supervisor
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.ports import Store
from shepherd.testing import MemoryEvents, MemoryQueue, SequentialIds

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Core:
    clock: ManualClock
    store: Store
    queue: MemoryQueue
    events: MemoryEvents
    scheduler: Scheduler
    runtime: AgentRuntime
    supervisor: Supervisor

    def pools(self) -> list[str]:
        return sorted({t.pool for d in self.scheduler.catalog.all().values() for t in d.tasks})

    def pump(self, rounds: int = 50) -> list[HandleResult]:
        """Deliver every visible message until none is left (bounded)."""
        results: list[HandleResult] = []
        for _ in range(rounds):
            got = [m for pool in self.pools() for m in self.queue.receive(pool, 10)]
            if not got:
                break
            for m in got:
                results.append(self.runtime.handle(m.task))
                self.queue.delete(m.receipt)
        return results

    def drop_all(self) -> int:
        """Lose every visible message (as if SQS had lost them)."""
        lost = 0
        for pool in self.pools():
            for m in self.queue.receive(pool, 10_000):
                self.queue.delete(m.receipt)
                lost += 1
        return lost


def build_core(
    store: Store,
    clock: ManualClock | None = None,
    *,
    shards: int = 8,
    seed: int = 7,
    definitions: Mapping[str, Definition] | None = None,
    agents: AgentRegistry | None = None,
) -> Core:
    from shepherd_examples.agents import registry

    clock = clock or ManualClock()
    queue = MemoryQueue(clock, visibility_ms=300_000)
    events = MemoryEvents()
    ports = Ports(
        store, queue, clock, SequentialIds(), random.Random(seed), Payloads(MemoryPayloadStore())
    )
    engine = build_engine(
        ports,
        definitions or load_directory(ROOT / "statemachines"),
        agents=agents or registry,
        config=EngineConfig(watch_shards=shards),
        worker_id="bench",
        background_heartbeats=False,
    )
    return Core(
        clock, store, queue, events, engine.scheduler, engine.agent_runtime, engine.supervisor
    )


@contextlib.contextmanager
def simulated_agent_time(clock: ManualClock) -> Iterator[None]:
    """The demo agents' simulated work passes on `clock` instead of sleeping."""
    from shepherd_examples.agents import order, provision

    from shepherd_bench.stack import SimSleep

    saved = [(m, m.time) for m in (order, provision)]
    for module, _ in saved:
        setattr(module, "time", SimSleep(clock))  # noqa: B010 - a stand-in module
    try:
        yield
    finally:
        for module, original in saved:
            setattr(module, "time", original)  # noqa: B010
