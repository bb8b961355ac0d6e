"""The million open workflows a run starts with, in the design load's steady state.

Driving each of them through the engine would cost minutes of CPU per run, so the real
engine writes one *template* workflow per kind of waiting (a payment awaited, a packer at
work, a payment on its 20-minute timer), and each open workflow is a copy of its template
with its own id, key, shard, task token and times: every time attribute shifted so its
waiting began `elapsed` ago, and its watch entry recomputed by the engine's own
`planner.next_due`. How long each has waited follows from the steady state: the interval a
random moment falls in is length-biased (for a lognormal, its median times e^sigma^2), and
the moment is uniform within it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from shepherd.conditions import Item
from shepherd.decisions.planner import next_due
from shepherd.definitions import Definition
from shepherd.engine.agent import AgentContext, AgentRegistry, Pending
from shepherd.engine.build import build_engine
from shepherd.engine.scheduler import EngineConfig, Ports, derived_id
from shepherd.engine.tokens import TaskToken
from shepherd.ids import RandomIds
from shepherd.keys import WF_SK, watch_shard, wf_pk
from shepherd.model import OutgoingTask, WorkflowRecord, WorkflowState
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.ports import Backlog
from shepherd_bench.scale.capacity import Capacity
from shepherd_bench.scale.kernel import Kernel, SimClock
from shepherd_bench.scale.load import OWNER, WF_TYPE, Load, NotYet, group_of, workflow_rng
from shepherd_bench.scale.store import PartitionedStore

MS_FIELDS = (
    "created_at", "updated_at", "dispatched_at", "available_at", "claimed_at",
    "first_claimed_at", "heartbeat_at", "callback_heartbeat_at", "finished_at", "due_at",
    "paused_at", "resumed_at", "look_failed_at", "held_at", "cancel_requested_at",
)  # fmt: skip
PACK, PAY = "pack_order", "take_payment"


@dataclass(frozen=True)
class Template:
    kind: str  # payment | packing | timer
    items: list[Item]
    anchor: int  # when its waiting began: the step's claim, or the failure that set the timer
    step: str


@dataclass
class OpenWorkflow:
    """One open workflow of the population and what the outside world owes it."""

    workflow_id: str
    key: str
    kind: str
    items: list[Item]
    token: str | None
    began_at: float  # its waiting began
    length_ms: float  # how long the whole wait lasts
    rng: random.Random


class _Collect:
    """The templates' task queue: keeps what the engine sends, delivers nothing."""

    def __init__(self) -> None:
        self.sent: list[OutgoingTask] = []

    def send(self, tasks: Sequence[OutgoingTask]) -> None:
        self.sent.extend(tasks)

    def has(self, pool: str) -> bool:
        return True  # every pool the definition names is deployed

    def backlog(self, pool: str) -> Backlog | None:
        return None


def templates(
    definitions: Mapping[str, Definition], start_ms: int, shards: int
) -> dict[str, Template]:
    """Each kind of open workflow written once by the real engine (no time passes for its
    requests: it runs outside any task)."""
    kernel = Kernel(start_ms, 0)
    store = PartitionedStore(kernel, Capacity())
    queue = _Collect()
    tokens: dict[str, str] = {}
    mode = {"timer": False}
    registry = AgentRegistry()

    def done(ctx: AgentContext) -> Any:
        return {"done": ctx.step}

    def hand_over(ctx: AgentContext) -> Any:
        if ctx.step == PAY and mode["timer"]:
            raise NotYet("the partner asks again in 20 minutes")
        tokens[ctx.step] = ctx.task_token()
        return Pending()

    for name in ("check_order", "reserve_stock", "ship_order", "release_stock"):
        registry.register(name, done)
    registry.register("hand_to_packers", hand_over)
    registry.register("request_payment", hand_over)
    payloads: Payloads = Payloads(MemoryPayloadStore())
    ports = Ports(store, queue, SimClock(kernel), RandomIds(), random.Random(0), payloads)
    engine = build_engine(
        ports,
        definitions,
        agents=registry,
        config=EngineConfig(watch_shards=shards),
        background_heartbeats=False,
    )

    def drive(kind: str) -> Template:
        mode["timer"] = kind == "timer"
        key = f"template-{kind}"
        payload = {"order_id": key, "items": [{"sku": "sku-1", "qty": 1}], "amount": 42.5}
        kernel.now = float(start_ms)
        workflow_id = engine.scheduler.start(
            WF_TYPE, payload, idempotency_key=key, owner=OWNER
        ).workflow_id
        last = PACK if kind == "packing" else PAY
        while True:
            task = queue.sent.pop(0)
            kernel.now += 100
            engine.agent_runtime.handle(task.message)
            if task.message.step == last:
                break
            if task.message.step == PACK:
                kernel.now += 20_000
                engine.callbacks.callback(
                    tokens[PACK], "success", output={"packed": True}, owner=OWNER
                )
        queue.sent.clear()
        items = [dict(i) for i in store.peek(wf_pk(workflow_id))]
        step = next(i for i in items if i["sk"] == "S#" + last)
        anchor = int(step["history"][-1]["t"]) if kind == "timer" else int(step["claimed_at"])
        return Template(kind, items, anchor, last)

    return {kind: drive(kind) for kind in ("payment", "packing", "timer")}


def _shifted(item: Item, delta: int) -> Item:
    out = dict(item)
    if "history" in out:
        out["history"] = [dict(entry) for entry in out["history"]]
    for name in MS_FIELDS:
        if isinstance(out.get(name), int):
            out[name] += delta
    if isinstance(out.get("expires_at"), int):
        out["expires_at"] += delta // 1000
    for entry in out.get("history", ()):
        for name in ("t", "c"):
            if isinstance(entry.get(name), int):
                entry[name] += delta
    return out


def clone(
    template: Template,
    definition: Definition,
    *,
    workflow_id: str,
    key: str,
    began_at: int,
    now: int,
    shards: int,
    rng: random.Random,
    heartbeat_every_ms: int,
) -> tuple[list[Item], str | None]:
    """A copy of `template` as workflow `workflow_id`, waiting since `began_at`; returns its
    items and the task token the outside system holds."""
    delta = began_at - template.anchor
    items = [_shifted(i, delta) for i in template.items]
    token: str | None = None
    for item in items:
        item["pk"] = wf_pk(workflow_id)
        if item["sk"] == "S#" + template.step and template.kind != "timer":
            nonce = f"{rng.getrandbits(128):032x}"
            parsed = TaskToken(workflow_id, "step", template.step, int(item["attempt"]), nonce)
            item["callback_token"] = parsed.hash
            token = parsed.encode()
            elapsed = now - began_at
            if template.kind == "packing" and elapsed >= heartbeat_every_ms:
                beat = began_at + heartbeat_every_ms * (elapsed // heartbeat_every_ms)
                item["heartbeat_at"] = item["callback_heartbeat_at"] = beat
    head_at = next(n for n, i in enumerate(items) if i["sk"] == WF_SK)
    record = WorkflowRecord.from_item(items[head_at])
    record = replace(
        record,
        workflow_id=workflow_id,
        idempotency_key=key,
        watch_shard=watch_shard(workflow_id, shards),
    )
    items[head_at] = record.to_item()
    state = WorkflowState.from_items(items)
    assert state is not None
    due = next_due(state.complete(definition.topological_order), definition, now, {})
    items[head_at]["due_at"] = due
    return items, token


@cache
def open_ids(total: int, shards: int, groups: int) -> dict[int, list[tuple[str, str]]]:
    """The keys and ids of the design load's open workflows, by group (hashing a million
    ids takes seconds: once per process)."""
    out: dict[int, list[tuple[str, str]]] = {}
    for n in range(total):
        key = f"open-{n}"
        workflow_id = derived_id(OWNER, key)
        out.setdefault(group_of(workflow_id, shards, groups), []).append((key, workflow_id))
    return out


def population(
    load: Load,
    definition: Definition,
    made: Mapping[str, Template],
    *,
    seed: int,
    now: int,
    shards: int,
    groups: int,
    modelled: set[int],
    fraction: float = 1.0,
) -> Iterator[OpenWorkflow]:
    """The open workflows of the modelled groups (of `fraction` of the design load's)."""
    total = int(load.open_workflows * fraction)
    running = load.running_steps / load.open_workflows
    timers = load.timers / load.open_workflows
    lengths = {
        "packing": load.pack.length_biased(),
        "payment": load.payment.length_biased(),
    }
    every = int(load.heartbeat_every_s * 1000)
    by_group = open_ids(total, shards, groups)
    for key, workflow_id in sorted(p for g in modelled for p in by_group.get(g, ())):
        rng = workflow_rng(seed, workflow_id)
        roll = rng.random()
        kind = "packing" if roll < running else "timer" if roll < running + timers else "payment"
        length = load.timer_s * 1000 if kind == "timer" else lengths[kind].sample(rng)
        began = now - int(rng.random() * length)
        items, token = clone(
            made[kind],
            definition,
            workflow_id=workflow_id,
            key=key,
            began_at=began,
            now=now,
            shards=shards,
            rng=rng,
            heartbeat_every_ms=every,
        )
        yield OpenWorkflow(workflow_id, key, kind, items, token, float(began), length, rng)
