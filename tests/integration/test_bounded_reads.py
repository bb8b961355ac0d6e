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
from shepherd.errors import StoreUnavailable
from shepherd.limits import item_size
from shepherd.model import StepStatus, WorkflowStatus
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


def wide(branches: int, *, join: bool = True) -> Definition:
    """A root, `branches` steps side by side after it, and (with `join`) a join of them all;
    without, every branch is a sink."""
    steps: list[dict[str, Any]] = [{"Name": "root", "Agent": "work", "Pool": "p"}]
    steps += [
        {"Name": f"b{i:02d}", "Agent": "work", "Pool": "p", "DependsOn": ["root"]}
        for i in range(branches)
    ]
    if join:
        names = [s["Name"] for s in steps[1:]]
        steps.append({"Name": "join", "Agent": "work", "Pool": "p", "DependsOn": names})
    for step in steps:
        step["TimeoutSeconds"] = 60
    return parse_definition(
        {"Name": f"wide_{branches}_{'join' if join else 'sinks'}", "Steps": steps}, "test"
    )


@pytest.mark.parametrize("join", [True, False], ids=["join", "sinks"])
def test_a_fan_in_is_read_by_its_last_dependency_only(join: bool) -> None:
    """Issue 41.2: a join (or an end over many sinks) counts its dependencies on an item of
    its own; only the count that reaches their number reads them, so the reads a step costs
    do not grow with the width (each branch used to read every other: 92 RRU a step at 90)."""
    small, large = _run(wide(8, join=join)), _run(wide(88, join=join))
    steps = 8 + 1 + join, 88 + 1 + join
    per_step = small.rru / steps[0], large.rru / steps[1]
    assert per_step[1] <= 9, per_step
    assert abs(per_step[1] - per_step[0]) <= 1.0, per_step


class _Engine:
    """A wide workflow's engine on the strict store, delivered by hand."""

    def __init__(self, definition: Definition) -> None:
        self.clock = ManualClock()
        self.store = MemoryStore()
        self.queue = MemoryQueue(self.clock)
        registry = AgentRegistry()
        registry.register("work", lambda ctx: {"ok": True})
        ports = Ports(
            self.store,
            self.queue,
            self.clock,
            SequentialIds(),
            random.Random(1),
            Payloads(MemoryPayloadStore()),
        )
        self.engine = build_engine(
            ports, {definition.name: definition}, agents=registry, background_heartbeats=False
        )
        self.workflow_id = self.engine.scheduler.start(definition.name, {}).workflow_id

    def deliver(self) -> None:
        while messages := self.queue.receive("p", 10):
            for m in messages:
                self.engine.agent_runtime.handle(m.task)
                self.queue.delete(m.receipt)

    def state(self) -> Any:
        loaded = self.engine.scheduler.load(self.workflow_id)
        assert loaded is not None
        return loaded[0]


def test_a_lost_count_leaves_the_join_to_the_supervisor() -> None:
    """The counter is a trigger: a branch whose count is lost (its advance throttled) leaves
    the count short, and the supervisor dispatches the join when its grace ends, once."""
    run = _Engine(wide(6))
    real = run.store.update
    lost: list[str] = []

    def update(pk: str, sk: str, update: Any, condition: Any) -> Any:
        if sk == "J#join" and not lost:
            lost.append(sk)
            raise StoreUnavailable("UpdateItem: throttled", throttled=True)
        return real(pk, sk, update, condition)

    run.store.update = update  # type: ignore[method-assign]
    run.deliver()
    state = run.state()
    assert lost and all(state.steps[f"b{i:02d}"].status is StepStatus.SUCCEEDED for i in range(6))
    assert state.steps["join"].status is StepStatus.PENDING  # the count is one short
    for _ in range(30):
        run.clock.advance(5)
        run.engine.supervisor.sweep()
        run.deliver()
        if run.state().workflow.status.terminal:
            break
    state = run.state()
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert state.steps["join"].attempt == 1


def test_a_count_too_high_reads_early_and_dispatches_nothing() -> None:
    """An advance run twice counts twice: the join's dependencies are read early, one is not
    done, nothing is sent; the join goes when its last dependency ends, once."""
    run = _Engine(wide(4))
    scheduler = run.engine.scheduler
    messages = run.queue.receive("p", 10)  # the root
    for m in messages:
        run.engine.agent_runtime.handle(m.task)
        run.queue.delete(m.receipt)
    branches = run.queue.receive("p", 10)
    assert len(branches) == 4
    first = branches[0]
    run.engine.agent_runtime.handle(first.task)
    run.queue.delete(first.receipt)
    definition = scheduler.definition_of(run.state())
    for _ in range(3):  # the same success advanced three more times: a count of 4
        scheduler.advance(run.workflow_id, completed=first.task.step, definition=definition)
    assert run.state().steps["join"].status is StepStatus.PENDING
    assert run.store.get(f"WF#{run.workflow_id}", "J#join")["done"] == 4  # type: ignore[index]
    for m in branches[1:]:
        run.engine.agent_runtime.handle(m.task)
        run.queue.delete(m.receipt)
    run.deliver()
    state = run.state()
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert state.steps["join"].attempt == 1
