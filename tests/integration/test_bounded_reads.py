"""Bounded reads (issue 23): a claim, a result and an advance read the workflow item, the step
and what its success can change (its successors, their dependencies, the sinks if it is one),
never the whole workflow. So the read units a step costs do not grow with the workflow's width:
measured here for chains of 4, 16, 45 and 90 steps with 4 KB outputs (the whole-partition read
they replaced grew from 6 RRU a step at 4 steps to 94 at 90)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest
from shepherd.clock import ManualClock
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.engine.build import build_engine
from shepherd.engine.scheduler import Ports
from shepherd.limits import item_size
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.testing import MemoryQueue, MemoryStore, SequentialIds

READ_UNIT = 4096


class MeteredStore(MemoryStore):
    """The strict store, counting the read units each request would cost on DynamoDB: a
    consistent query 1 RRU per started 4 KB of everything it read, a batch read 1 RRU per
    started 4 KB of each key's item (at least 1, found or not)."""

    def __init__(self) -> None:
        super().__init__()
        self.rru = 0.0
        self.largest_read = 0  # items in one request

    def load(self, pk: str) -> list[dict[str, Any]]:
        items = super().load(pk)
        if pk.startswith("WF#"):
            self.rru += max(1, math.ceil(sum(item_size(i) for i in items) / READ_UNIT))
            self.largest_read = max(self.largest_read, len(items))
        return items

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        items = super().get_many(keys)
        sizes = {(i["pk"], i["sk"]): item_size(i) for i in items}
        self.rru += sum(max(1, math.ceil(sizes.get(k, 0) / READ_UNIT)) for k in keys)
        self.largest_read = max(self.largest_read, len(keys))
        return items

    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        item = super().get(pk, sk)
        if pk.startswith("WF#"):
            self.rru += max(1, math.ceil((item_size(item) if item else 0) / READ_UNIT))
        return item


def chain(steps: int) -> Definition:
    return parse_definition(
        {
            "Name": f"chain_{steps}",
            "Steps": [
                {
                    "Name": f"s{i:02d}",
                    "Agent": "work",
                    "Pool": "p",
                    "TimeoutSeconds": 60,
                    **({"DependsOn": [f"s{i - 1:02d}"]} if i else {}),
                }
                for i in range(steps)
            ],
        },
        "test",
    )


def _run(definition: Definition) -> MeteredStore:
    clock = ManualClock()
    store = MeteredStore()
    queue = MemoryQueue(clock)
    registry = AgentRegistry()

    @registry.agent("work")
    def work(ctx: AgentContext) -> dict[str, str]:
        return {"blob": "x" * 4000}  # 4 KB outputs, inline

    ports = Ports(
        store, queue, clock, SequentialIds(), random.Random(1), Payloads(MemoryPayloadStore())
    )
    engine = build_engine(
        ports, {definition.name: definition}, agents=registry, background_heartbeats=False
    )
    wf = engine.scheduler.start(definition.name, {}).workflow_id
    store.rru, store.largest_read = 0.0, 0
    while messages := queue.receive("p", 10):
        for m in messages:
            engine.agent_runtime.handle(m.task)
            queue.delete(m.receipt)
    rru, largest = store.rru, store.largest_read
    loaded = engine.scheduler.load(wf)
    assert loaded is not None and loaded[0].workflow.status.value == "SUCCEEDED"
    store.rru, store.largest_read = rru, largest  # what the agents read, not this check
    return store


@pytest.mark.parametrize("steps", [4, 16, 45, 90])
def test_the_reads_a_step_costs_do_not_grow_with_the_workflow(steps: int) -> None:
    store = _run(chain(steps))
    per_step = store.rru / steps
    # A claim: the workflow item and the step (2 keys); the agent reads its dependency's
    # output (1); the advance: the step, its successor (2 keys, a sink reads itself). Each
    # key at most 2 RRU with a 4 KB output.
    assert per_step <= 9, f"{per_step:.1f} RRU a step at {steps} steps"
    assert store.largest_read <= 3  # no request ever reads the whole workflow


def test_per_step_reads_are_the_same_at_4_and_90_steps() -> None:
    small, large = _run(chain(4)).rru / 4, _run(chain(90)).rru / 90
    assert abs(large - small) <= 1.0, (small, large)
