"""Figures `make scale` measures beside its runs, from the engine's own requests (issue 41):
read units per step of a chain and of a 90-wide fan-out with its join, and what a throttling
episode longer than an attempt's lease costs. Each runs the real engine (`build_engine`) on the
in-memory store, metered as DynamoDB bills reads, on a manual clock: seconds, not a subset.

* `reads_per_step(width)`: a workflow of `width` steps (a chain: in a line; wide: a root, then
  `width - 2` branches side by side, then a join of them all), every step's output about 200
  bytes; the read units of the whole run (every `Query` of a workflow's partition,
  `GetItem` and `BatchGetItem` item, each rounded up to 4 KB as DynamoDB does, strongly
  consistent) over the steps that ran.
* `throttle_episode(seconds)`: workflows whose one step's agent succeeds during an episode in
  which every write to its workflow's partition is throttled (StoreUnavailable: the SDK's
  retries spent) for `seconds`, from the moment the agent starts; the supervisor sweeps on
  through it. Counted after the episode: attempts beyond
  the first (an attempt consumed), agents' successes not recorded as the attempt they ran in,
  workflows that did not succeed.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from shepherd.clock import ManualClock
from shepherd.conditions import Cond, Item, Update
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.engine.build import build_engine
from shepherd.engine.scheduler import EngineConfig, Ports
from shepherd.errors import StoreUnavailable
from shepherd.keys import wf_pk
from shepherd.limits import item_size
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.testing import MemoryQueue, MemoryStore, SequentialIds

READ_UNIT = 4096
POOL = "probe"
OUTPUT = {"ok": True, "note": "x" * 160}  # about 200 bytes stored


class MeteredStore:
    """The in-memory store, its reads billed as DynamoDB bills them (strongly consistent):
    a `Query` by the whole page's size, a `GetItem` and each `BatchGetItem` item on its own,
    rounded up to 4 KB; and its writes to a partition refused while `throttled(pk)` says so."""

    def __init__(
        self, inner: MemoryStore, throttled: Callable[[str], bool] = lambda pk: False
    ) -> None:
        self.inner = inner
        self.rru = 0.0
        self.throttled = throttled
        self.refused = 0
        self.wru: Counter[str] = Counter()  # write units by partition key (pk)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _units(self, items: Sequence[Item]) -> float:
        return float(max(1, math.ceil(sum(item_size(i) for i in items) / READ_UNIT)))

    def _gate(self, *pks: str) -> None:
        if any(self.throttled(pk) for pk in pks):
            self.refused += 1
            raise StoreUnavailable("throttled: ProvisionedThroughputExceededException")

    def load(self, pk: str) -> list[Item]:
        items: list[Item] = self.inner.load(pk)
        self.rru += self._units(items)
        return items

    def get(self, pk: str, sk: str) -> Item | None:
        item: Item | None = self.inner.get(pk, sk)
        self.rru += self._units([item] if item is not None else [])
        return item

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        items: list[Item] = self.inner.get_many(keys)
        self.rru += sum(self._units([i]) for i in items) + (len(keys) - len(items))
        return items

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        self._gate(pk)
        before = self.inner.get(pk, sk)
        result: Item = self.inner.update(pk, sk, update, condition)
        self._wrote(pk, before, result)
        return result

    def _wrote(self, pk: str, before: Item | None, after: Item | None, factor: int = 1) -> None:
        """1 write unit per started KB of the larger image (2 in a transaction)."""
        size = max(item_size(before) if before else 0, item_size(after) if after else 0)
        self.wru[pk] += factor * max(1, math.ceil(size / 1024))

    def put_new(self, item: Item) -> None:
        self._gate(item["pk"])
        self.inner.put_new(item)
        self._wrote(item["pk"], None, item)

    def create(self, items: Sequence[Item]) -> None:
        self._gate(*(i["pk"] for i in items))
        self.inner.create(items)
        for item in items:
            self._wrote(item["pk"], None, item, 2)

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        self._gate(*(w[0] for w in writes))
        befores = [self.inner.get(pk, sk) for pk, sk, _, _ in writes]
        self.inner.transact(writes)
        for (pk, sk, _, _), before in zip(writes, befores, strict=True):
            self._wrote(pk, before, self.inner.get(pk, sk), 2)


def _definition(body: dict[str, Any]) -> Definition:
    return parse_definition(body, f"{body['Name']}.yaml")


def _task(name: str, after: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"Name": name, "Agent": "work", "Pool": POOL, "TimeoutSeconds": 60}
    if after:
        step["DependsOn"] = list(after)
    step.update(extra)
    return step


def shaped(width: int, chain: bool) -> Definition:
    """`width` steps (a definition holds at most 90): in a line (`chain`), or a root, then
    `width - 2` side by side, then a join of them all."""
    if chain:
        steps = [_task("s0")] + [_task(f"s{i}", [f"s{i - 1}"]) for i in range(1, width)]
        return _definition({"Name": f"chain_{width}", "Steps": steps})
    branches = [_task(f"b{i}", ["root"]) for i in range(width - 2)]
    join = _task("join", [b["Name"] for b in branches])
    return _definition({"Name": f"wide_{width}", "Steps": [_task("root"), *branches, join]})


def _engine(
    store: Any, clock: ManualClock, definitions: Sequence[Definition], registry: AgentRegistry
) -> Any:
    queue = MemoryQueue(clock, visibility_ms=300_000)
    ports = Ports(
        store, queue, clock, SequentialIds(), random.Random(7), Payloads(MemoryPayloadStore())
    )
    engine = build_engine(
        ports,
        {d.name: d for d in definitions},
        agents=registry,
        config=EngineConfig(watch_shards=4),
        pool_control=queue,
        worker_id="probe",
        background_heartbeats=False,
    )
    return engine, queue


def _pump(
    engine: Any,
    queue: MemoryQueue,
    clock: ManualClock,
    until: Callable[[], bool],
    rounds: int = 2000,
) -> None:
    for _ in range(rounds):
        if until():
            return
        messages = queue.receive(POOL, 10)
        if not messages:
            clock.advance(1)
            # A throttled sweep fails its tick's invocation; the next sweeps again.
            with contextlib.suppress(StoreUnavailable):
                engine.supervisor.sweep()
            continue
        for m in messages:
            try:
                engine.agent_runtime.handle(m.task)
            except StoreUnavailable:
                continue  # back after the visibility timeout, as the handler leaves it
            queue.delete(m.receipt)
    raise RuntimeError("the probe's workflow did not finish")


def reads_per_step(width: int, *, chain: bool) -> dict[str, float]:
    """Read units a step of a `width`-step chain or `width`-wide fan-out and join."""
    definition = shaped(width, chain)
    registry = AgentRegistry()
    registry.register("work", lambda ctx: OUTPUT)
    store = MeteredStore(MemoryStore())
    clock = ManualClock()
    engine, queue = _engine(store, clock, [definition], registry)
    workflow_id = engine.scheduler.start(definition.name, {"n": width}).workflow_id

    def done() -> bool:
        loaded = engine.scheduler.load(workflow_id)
        return bool(loaded and loaded[0].workflow.status.terminal)

    before = store.rru
    _pump(engine, queue, clock, done)
    loaded = engine.scheduler.load(workflow_id)
    assert loaded is not None
    state = loaded[0]
    if state.workflow.status is not WorkflowStatus.SUCCEEDED:
        raise RuntimeError(f"the probe's workflow ended {state.workflow.status}")
    steps = len(state.steps)
    return {"steps": steps, "rru_per_step": round((store.rru - before) / steps, 1)}


def reads_figures() -> dict[str, Any]:
    """`scale.reads_per_step`: a chain's and a 90-wide fan-out's (its join included)."""
    chain = reads_per_step(90, chain=True)
    wide = reads_per_step(90, chain=False)
    return {
        "chain": chain["rru_per_step"],
        "width_90": wide["rru_per_step"],
        "steps": {"chain": chain["steps"], "width_90": wide["steps"]},
        "target": READS_TARGET,
    }


READS_TARGET = 12.0  # read units a step at 90 wide, joins and sinks included (issue 41.2)
EPISODE_WORKFLOWS = 20


def throttle_episode(seconds: float = 300.0, workflows: int = EPISODE_WORKFLOWS) -> dict[str, Any]:
    """`workflows` one-step workflows (TimeoutSeconds 60, HeartbeatSeconds 20; half with two
    retries, half on their only attempt) whose agents each finish while every write to their workflow's partition is throttled
    for `seconds`."""
    retried = _definition(
        {
            "Name": "episode",
            "Steps": [
                _task(
                    "work",
                    TimeoutSeconds=60,
                    HeartbeatSeconds=20,
                    Retry={"MaxAttempts": 2, "IntervalSeconds": 1},
                )
            ],
        }
    )
    # Its attempt is its last: an attempt consumed unwinds the workflow (States.Timeout).
    last = _definition(
        {"Name": "episode_last", "Steps": [_task("work", TimeoutSeconds=60, HeartbeatSeconds=20)]}
    )
    clock = ManualClock()
    windows: dict[str, tuple[int, float]] = {}
    successes: set[tuple[str, int]] = set()

    def throttled(pk: str) -> bool:
        found = windows.get(pk)
        return found is not None and found[0] <= clock.now_ms() < found[1]

    def work(ctx: AgentContext) -> Any:
        pk = wf_pk(ctx.workflow_id)
        if pk not in windows:  # its workflow's episode starts as its first attempt runs
            windows[pk] = (clock.now_ms(), clock.now_ms() + seconds * 1000)
        clock.advance(5)
        successes.add((ctx.workflow_id, ctx.attempt))
        return OUTPUT

    registry = AgentRegistry()
    registry.register("work", work)
    store = MeteredStore(MemoryStore(), throttled)
    engine, queue = _engine(store, clock, [retried, last], registry)
    ids = [
        engine.scheduler.start(("episode", "episode_last")[n % 2], {"n": n}).workflow_id
        for n in range(workflows)
    ]

    def ended() -> bool:
        if len(windows) < workflows or clock.now_ms() < max(w[1] for w in windows.values()):
            return False
        for workflow_id in ids:
            loaded = engine.scheduler.load(workflow_id)
            if loaded is None or not loaded[0].workflow.status.terminal:
                return False
        return True

    _pump(engine, queue, clock, ended)
    consumed = lost = unwound = 0
    for workflow_id in ids:
        loaded = engine.scheduler.load(workflow_id)
        assert loaded is not None
        state = loaded[0]
        step = state.steps["work"]
        # Every attempt but the one that succeeded was consumed (no agent here fails).
        consumed += step.attempt - (step.status is StepStatus.SUCCEEDED)
        lost += sum(1 for w, a in successes if w == workflow_id and a < step.attempt) or (
            step.status is not StepStatus.SUCCEEDED
        )
        unwound += state.workflow.status is not WorkflowStatus.SUCCEEDED
    return {
        "seconds": seconds,
        "workflows": workflows,
        "attempts_consumed": consumed,
        "successes_lost": lost,
        "workflows_unwound": unwound,
        "writes_refused": store.refused,
    }


MAP_ITEMS = 2000
MAP_CONCURRENCY = 100
PARTITION_WRU = 1000.0
PARTITION_SHARE = 0.5  # every partition at most half its limit (issue 41.2)
MAP_TARGET = 5000.0


def map_items_per_second(
    items: int = MAP_ITEMS, concurrency: int = MAP_CONCURRENCY
) -> dict[str, Any]:
    """`scale.map_items_per_second`: how many items a second one map can run with every
    partition it writes at most half a partition's 1,000 write units: its write units on each
    partition, per item, from a whole run of a map of `items` items (MaxConcurrency
    `concurrency`), give each partition's ceiling; the map's is the lowest."""
    definition = _definition(
        {
            "Name": "probe_map",
            "Steps": [
                {
                    **_task("each"),
                    "Map": {"ItemsPath": "$.input.items", "MaxConcurrency": concurrency},
                }
            ],
        }
    )
    registry = AgentRegistry()
    registry.register("work", lambda ctx: {"ok": True})
    store = MeteredStore(MemoryStore())
    clock = ManualClock()
    engine, queue = _engine(store, clock, [definition], registry)
    workflow_id = engine.scheduler.start(
        "probe_map", {"items": [{"n": n} for n in range(items)]}
    ).workflow_id

    def done() -> bool:
        loaded = engine.scheduler.load(workflow_id)
        return bool(loaded and loaded[0].workflow.status.terminal)

    _pump(engine, queue, clock, done, rounds=20 * items)
    loaded = engine.scheduler.load(workflow_id)
    assert loaded is not None
    if loaded[0].workflow.status is not WorkflowStatus.SUCCEEDED:
        raise RuntimeError(f"the probe's map ended {loaded[0].workflow.status}")
    per_item = {pk: units / items for pk, units in store.wru.items()}
    hottest, units = max(per_item.items(), key=lambda kv: kv[1])
    return {
        "items_per_second": round(PARTITION_WRU * PARTITION_SHARE / units),
        "hottest_partition": _pattern(hottest),
        "write_units_per_item_on_it": round(units, 3),
        "items": items,
        "max_concurrency": concurrency,
        "target": MAP_TARGET,
    }


def _pattern(pk: str) -> str:
    """A partition key with its workflow id and numbers named."""
    parts = pk.split("#")
    return "#".join(
        "<n>" if p.isdigit() else ("<workflow id>" if i == 1 and len(parts) > 1 else p)
        for i, p in enumerate(parts)
    )


def measure() -> dict[str, Any]:
    """The three figures, as `make scale` writes them under `scale`."""
    return {
        "reads_per_step": reads_figures(),
        "map_items_per_second": map_items_per_second(),
        "throttle_episode": throttle_episode(),
    }
