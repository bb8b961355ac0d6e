"""One run of the scale model: the real engine over the modelled AWS, for simulated minutes.

`build_engine` with the design load's shard count and groups, `Scheduler.start` behind the
API function, `AgentRuntime.handle` behind each pool's event source mapping,
`Callbacks.callback` behind the callback route, and `Supervisor.sweep_group` behind the tick
queue, all over one `PartitionedStore` on a `SimClock`. The run records what the report needs
through the store's write observers (timeouts acted on, workflows ending, steps succeeding,
stream records) and samples the system every ten simulated seconds.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from shepherd.changes import Change, events_of
from shepherd.conditions import Item
from shepherd.decisions.ratelimit import Buckets
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.build import build_engine
from shepherd.engine.scheduler import EngineConfig, Ports, derived_id
from shepherd.engine.supervisor import Supervisor
from shepherd.ids import RandomIds
from shepherd.keys import COMP_PREFIX, RATE_PREFIX, STEP_PREFIX, WF_SK, wf_pk, workflow_id_of
from shepherd.limits import item_size
from shepherd.model import OutgoingTask, StepStatus, WorkflowRecord, WorkflowStatus
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.pool_policy import PoolPolicy, RateLimit, parse_policies
from shepherd.ports import Backlog
from shepherd.topology import TABLE, pools
from shepherd_bench.scale.capacity import Capacity
from shepherd_bench.scale.kernel import Invocation, Kernel, SimClock, TaskLock
from shepherd_bench.scale.lambdas import Account, EventSource, Function, SimQueue, sqs_call
from shepherd_bench.scale.load import OWNER, WF_TYPE, AttemptKey, Load, World
from shepherd_bench.scale.population import population, templates
from shepherd_bench.scale.store import PartitionedStore
from shepherd_bench.scale.supervision import Deployed, GreenletLooks, SupervisorModel
from shepherd_bench.scale.whatif import sharded_list_index

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DEFINITION = Path(__file__).with_name("order_at_load.yaml")
HANDLE_CPU_MS = 0.2  # the engine's logic per record on one full core (measured: ~0.16 ms)
INVOKE_CPU_MS = 0.3  # the handler's own work per invocation (batch parsing, metrics)
LOOKS_IN_FLIGHT = 8  # SHEPHERD_SWEEP_LOOKS
EVICT_AFTER_MS = 120_000
SAMPLE_MS = 10_000
TIMEOUTS = ("timeout", "heartbeat_timeout")
DESIGN_LOAD = Load()
SIZE_SAMPLE = 1000  # waiting workflows whose items are measured (storage per day)
# A guarded pool's breaker (a CircuitBreaker with a 60 s window: 10 s counter slots).
BREAKER = {
    "FailureRatio": 0.5,
    "MinimumAttempts": 100,
    "WindowSeconds": 60,
    "CooldownSeconds": 30,
    "ProbeAttempts": 5,
}
# The agent handler's "back soon" for a record it could not claim: seconds until visible.
BACK_SOON = {"NotEnoughTime": 0.0, "StoreUnavailable": 1.0}


def definition() -> Definition:
    return parse_definition(yaml.safe_load(DEFINITION.read_text()), DEFINITION.name)


ROOT = Path(__file__).resolve().parents[3]
SIZES_FILE = ROOT / "infra" / "shepherd_infra" / "deployments.py"


def _sizes() -> ModuleType:
    """The CDK app's named deployment sizes (infra/shepherd_infra/deployments.py), loaded by
    path: the file is standard library only, and importing `shepherd_infra` would start the
    CDK's jsii runtime."""
    name = "shepherd_infra_deployments"
    found = sys.modules.get(name)
    if found is not None:
        return found
    spec = importlib.util.spec_from_file_location(name, SIZES_FILE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Deployment:
    """The limits outside the engine a run is judged against (the whole system's), as a named
    size of the CDK app deploys them (`shepherd_infra.deployments.Size`): API Gateway's stage
    throttle (requests a second), the table's and each index's throughput (units a second: the
    on-demand maximum the size sets, else the table-level quota), the account's Lambda
    concurrency (the quota the size asks for), the watch shards, the sweep groups and every
    pool's event source concurrency. The run counts what it asked of each, a second at a time
    at full size; Lambda's concurrency is also enforced (an invocation over it is throttled),
    the API's and the table's are accounted, not enforced."""

    name: str
    api_rate_limit: float
    table_wru: float
    table_rru: float
    account_concurrency: int
    watch_shards: int
    sweep_groups: int
    pool_concurrency: int

    @classmethod
    def of(cls, size_name: str) -> Deployment:
        """The model's view of the CDK app's size `size_name`."""
        sizes = _sizes()
        size = sizes.size_named(size_name)
        return cls(
            name=size.name,
            api_rate_limit=float(size.api_rate_limit),
            table_wru=float(size.table_write_units),
            table_rru=float(size.table_read_units),
            account_concurrency=int(size.quotas.lambda_concurrency),
            watch_shards=int(size.watch_shards),
            sweep_groups=int(size.sweep_groups),
            pool_concurrency=int(size.pool_max_concurrency or POOL_DEFAULT_CONCURRENCY),
        )


POOL_DEFAULT_CONCURRENCY = 10  # an SQS mapping's MaximumConcurrency as the CDK app sets it
# The CDK app as it deploys by default (`-c size=default`): the stage's throttle (100/s), the
# table with no throughput configured (the on-demand quota, 40,000 units a second), Lambda's
# default account concurrency (1,000), 10 concurrent batches a pool.
DEFAULT_DEPLOYMENT = Deployment.of("default")
# The design-load size (`-c size=design_load`): 256 watch shards in 128 sweep groups, 1,000
# concurrent batches a pool, the table's on-demand maximum and warm throughput and the quotas to
# ask AWS for (docs/architecture.md, "Deploying for the design load").
DESIGN_DEPLOYMENT = Deployment.of("design_load")


@dataclass(frozen=True)
class RunConfig:
    """One run: which part of the design load, for how long, with which deployment."""

    name: str
    seed: int = 1
    minutes: float = 10.0
    shards: int = DESIGN_DEPLOYMENT.watch_shards
    groups: int = DESIGN_DEPLOYMENT.sweep_groups
    modelled: tuple[int, ...] = (0,)
    load: Load = DESIGN_LOAD
    pool_concurrency: int = DESIGN_DEPLOYMENT.pool_concurrency  # MaximumConcurrency a pool
    tick_concurrency: int | None = None  # None: as the CDK app deploys it
    tick_batch: int | None = None  # None: as the CDK app deploys it
    max_workflows: int | None = None  # a sweep's look budget (None: the engine's)
    stall: tuple[str, float, float] | None = None  # pool, from second, for seconds
    open_fraction: float = 1.0  # of the population's keys to enumerate (tests)
    shard_list: bool = False  # what-if: the list index sharded per caller (whatif.py)
    # What-if: seconds between sweeps (None: the CDK app's); its window fills the minute.
    sweep_interval_s: float | None = None
    # A pool's RateLimit at the whole system's size: (pool, PerSecond, Burst).
    rate_limit: tuple[str, float, int] | None = None
    # SHEPHERD_SWEEP_LOOK_AHEAD: a sweep looks ahead until just before the next (as deployed).
    look_ahead: bool = True
    # Pools with a circuit breaker (the deployment's CircuitBreaker, at the defaults below):
    # every ended attempt of the pool writes the current slot's counters.
    breakers: tuple[str, ...] = ("checks",)
    # The limits the run is judged against, the whole system's (not the subset's share):
    # API Gateway's stage throttle, requests a second; the table's (and each index's)
    # throughput, units a second. See `Deployment`.
    deployment: Deployment = DESIGN_DEPLOYMENT

    @property
    def fraction(self) -> float:
        """f: the share of the design load this run holds."""
        return len(self.modelled) / self.groups


@dataclass
class Detection:
    acted_at: float
    last_sign: float
    outcome: str


@dataclass
class Samples:
    at: list[float] = field(default_factory=list)
    open: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    waiting_payment: list[int] = field(default_factory=list)
    queued: list[dict[str, int]] = field(default_factory=list)
    concurrency: list[float] = field(default_factory=list)


class TaskQueuePort:
    """The engine's TaskQueue over the pools' queues: SendMessageBatch per pool and 10."""

    def __init__(self, kernel: Kernel, queues: Mapping[str, SimQueue]) -> None:
        self.kernel = kernel
        self.queues = queues
        self.sends: dict[str, Counter[AttemptKey]] = defaultdict(Counter)
        self.first_sent: dict[AttemptKey, float] = {}
        self.tracked: set[str] = set()

    def send(self, tasks: Sequence[OutgoingTask]) -> None:
        by_pool: dict[str, list[OutgoingTask]] = defaultdict(list)
        for task in tasks:
            by_pool[task.pool].append(task)
        for pool, group in by_pool.items():
            queue = self.queues[pool]
            for first in range(0, len(group), 10):
                sqs_call(self.kernel)
                queue.stats.send_requests += 1
                for task in group[first : first + 10]:
                    queue.put(task.message, task.delay_seconds)
                    if pool in self.tracked:
                        m = task.message
                        key = AttemptKey(m.workflow_id, m.kind, m.step, m.attempt)
                        self.sends[pool][key] += 1
                        self.first_sent.setdefault(key, self.kernel.now)

    def has(self, pool: str) -> bool:
        """The deployment's queue URLs, as the SQS adapter holds them (no request)."""
        return pool in self.queues

    def backlog(self, pool: str) -> Backlog | None:
        queue = self.queues.get(pool)
        if queue is None:
            return None
        sqs_call(self.kernel)
        queue.stats.attribute_reads += 1
        return queue.backlog()


class Run:
    """Everything one run builds, runs and records."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.definition = definition()
        self.definitions = {self.definition.name: self.definition}
        self.deployed = Deployed.read()
        if config.sweep_interval_s is not None:
            interval = config.sweep_interval_s
            self.deployed = replace(self.deployed, interval_s=interval, window_s=60 - interval)
        f = config.fraction
        kernel = self.kernel = Kernel(START_MS, config.seed)
        self.capacity = Capacity(shared_scale=1 / f)
        self.store = PartitionedStore(kernel, self.capacity)
        self.account = Account(config.deployment.account_concurrency * f)
        self.pools = pools(self.definitions)
        self.queues = {
            name: SimQueue(
                kernel,
                name,
                visibility_s=p.visibility_timeout_seconds,
                max_receives=p.max_receive_count,
            )
            for name, p in self.pools.items()
        }
        self.queue_port = TaskQueuePort(kernel, self.queues)
        self.payload_store = MemoryPayloadStore()
        self.ports = Ports(
            self.store,
            self.queue_port,
            SimClock(kernel),
            RandomIds(),
            random.Random(config.seed),
            Payloads(self.payload_store),
        )
        api_mb = self.deployed.api_memory_mb
        self.api = Function(
            kernel, self.account, "api", memory_mb=api_mb, timeout_s=29, handler=_call
        )
        self.callbacks = Function(
            kernel, self.account, "callbacks", memory_mb=api_mb, timeout_s=29, handler=_call
        )
        modelled = set(config.modelled)
        self.world = World(
            kernel,
            None,  # type: ignore[arg-type]  # set below: the registry needs the world
            config.load,
            seed=config.seed,
            shards=config.shards,
            groups=config.groups,
            modelled=modelled,
            api=self.api,
            callbacks=self.callbacks,
        )
        self.engine = self._engine()
        self.world.engine = self.engine
        self.handle_kwargs = (
            "time_left_ms" in inspect.signature(self.engine.agent_runtime.handle).parameters
        )
        self.functions: dict[str, Function] = {}
        self.mappings: dict[str, EventSource] = {}
        for name, spec in self.pools.items():
            fn = Function(
                kernel,
                self.account,
                f"agent-{name}",
                memory_mb=self.deployed.worker_memory_mb,
                timeout_s=spec.function_timeout_seconds,
                handler=self._agent_batch(name),
            )
            self.functions[name] = fn
            self.mappings[name] = EventSource(
                kernel,
                self.queues[name],
                fn,
                batch_size=spec.batch_size,
                max_concurrency=config.pool_concurrency * f,
                scale=f,
            )
        self.supervision = SupervisorModel(
            kernel,
            self.account,
            self.deployed,
            groups=config.groups,
            modelled=config.modelled,
            make_supervisor=self._supervisor,
            tick_concurrency=config.tick_concurrency,
            tick_batch=config.tick_batch,
            fraction=f,
            look_ahead=config.look_ahead,
        )
        self.detections: dict[AttemptKey, Detection] = {}
        self.terminal: dict[str, tuple[str, float]] = {}
        self.steps_succeeded = 0
        self.stream_records = 0
        self.events_out = 0
        self.outcomes: Counter[str] = Counter()
        self.samples = Samples()
        self.waiting_payment = 0
        self.waiting_looks = 0  # supervisor reads of a workflow waiting for its payment
        self.waits_begun = 0
        self.waiting_workflows = self.waiting_items = self.waiting_bytes = 0
        self.seeded = 0
        self.created = 0  # workflow items the engine created in the run
        self.open_count = 0  # workflow items in the store not terminal
        self.running_count = 0  # step and compensation items in the store running
        self.heartbeating = {
            f"{STEP_PREFIX}{s.name}" for s in self.definition.steps if s.heartbeat_seconds
        }
        self.list_patched = False
        # The limited pool (config.rate_limit): its claims per simulated second and the
        # limiter's writes.
        limited = None if config.rate_limit is None else config.rate_limit[0]
        self.limited_units = {
            f"{STEP_PREFIX}{s.name}"
            for s in self.definition.steps
            if s.is_task and s.pool == limited
        } | {
            f"{COMP_PREFIX}{s.name}"
            for s in self.definition.steps
            if s.compensation is not None and s.compensation.pool == limited
        }
        self.limited_claims: Counter[int] = Counter()
        self.limiter_writes = 0
        if limited is not None:
            self.queue_port.tracked.add(limited)
        self.store.observers.append(self._observe)
        self.store.load_observers.append(self._observe_load)

    # ------------------------------------------------------------------------ building

    def _engine(self) -> Any:
        engine = build_engine(
            self.ports,
            self.definitions,
            agents=self.world.registry(),
            config=EngineConfig(watch_shards=self.config.shards),
            sweep_groups=self.config.groups,
            looks=GreenletLooks(self.kernel, LOOKS_IN_FLIGHT),
            background_heartbeats=False,
            pool_policies=self._policies(),
        )
        limiter = engine.agent_runtime.limiter
        if self.config.rate_limit is not None and limiter is not None:
            pool = self.config.rate_limit[0]
            limiter._buckets[pool] = self.subset_buckets()
        return engine

    def _policies(self) -> dict[str, PoolPolicy]:
        body: dict[str, dict[str, Any]] = {
            pool: {"CircuitBreaker": dict(BREAKER)} for pool in self.config.breakers
        }
        if self.config.rate_limit is not None:
            pool, per_second, burst = self.config.rate_limit
            share = per_second * self.config.fraction
            body.setdefault(pool, {})["RateLimit"] = {
                "PerSecond": share,
                "Burst": max(1, round(burst * self.config.fraction)),
            }
        return parse_policies(body, source="scale model") if body else {}

    def subset_buckets(self) -> Buckets:
        """The whole system's buckets, each handing out its share f of its tokens: the subset's
        tasks pick among as many items as the whole system's do, so each item is written as
        often as at full size (a shared partition, counted over 1 / f seconds), and the
        subset's tokens a second are the limit x f."""
        assert self.config.rate_limit is not None
        _, per_second, burst = self.config.rate_limit
        whole = Buckets.of(RateLimit(per_second=per_second, burst=burst))
        f = self.config.fraction
        return Buckets(
            shards=whole.shards,
            interval_us=round(whole.interval_us / f),
            burst=max(1, round(whole.burst * f)),
        )

    def _supervisor(self) -> Supervisor:
        """A supervisor sandbox: its own engine over the same ports (its own caches)."""
        supervisor: Supervisor = self._engine().supervisor
        # Its backlog lock is held across a queue read (a request): a task lock here.
        supervisor._backlog_lock = TaskLock(self.kernel)  # type: ignore[assignment]
        if self.config.max_workflows is not None:
            supervisor.max_workflows = self.config.max_workflows
        return supervisor

    def _agent_batch(self, pool: str) -> Any:
        """The agent handler as deployed (functions/shepherd_handlers/agent.py): records one
        after another; one that could not be claimed (NotEnoughTime, StoreUnavailable) is
        made visible again at once or after a second; any other failure waits for the
        visibility timeout; the rest are deleted in one request when the batch is done."""
        kernel = self.kernel
        gate = self.handle_kwargs  # the deployed handler's time-left check, every pool

        def handle(inv: Invocation, batch: list[Any]) -> None:
            queue, fn = self.queues[pool], self.functions[pool]
            runtime = self.engine.agent_runtime
            kernel.sleep_until(inv.cpu(kernel, INVOKE_CPU_MS))
            done = []
            end = inv.started_ms + fn.timeout_ms

            def left() -> int:
                return int(end - kernel.now)

            for message in batch:
                kernel.sleep_until(inv.cpu(kernel, HANDLE_CPU_MS))
                try:
                    if gate:
                        result = runtime.handle(message.body, time_left_ms=left)
                    else:
                        result = runtime.handle(message.body)
                    self.outcomes[result.outcome.value] += 1
                    done.append(message)
                except Exception as exc:  # a batch item failure (BatchProcessor)
                    name = type(exc).__name__
                    self.outcomes[name] += 1
                    if name in BACK_SOON:
                        sqs_call(kernel)  # ChangeMessageVisibility
                        queue.release(message, BACK_SOON[name])
            if done:
                sqs_call(kernel)
                queue.stats.delete_requests += 1
                for message in done:
                    queue.delete(message)

        return handle

    # ----------------------------------------------------------------------- observers

    def _count(self, old: Item | None, new: Item) -> None:
        """What the engine holds, from its own writes: workflows created and open, steps
        running (the seeded population is counted by `seed`)."""
        sk, status = new["sk"], new.get("status")
        was = None if old is None else old.get("status")
        if sk == WF_SK:
            if old is None:
                self.created += 1
                self.open_count += status not in _TERMINAL
            elif status in _TERMINAL and was not in _TERMINAL:
                self.open_count -= 1
        elif sk.startswith((STEP_PREFIX, COMP_PREFIX)):
            self.running_count += self._running(sk, status) - self._running(sk, was)

    def _running(self, sk: str, status: object) -> bool:
        """A step running: RUNNING, or WAITING on its callback under HeartbeatSeconds (an
        outside worker on it, heartbeating: the packers); not one resting on a callback
        with no heartbeat (the payments) or a timer."""
        return status == StepStatus.RUNNING.value or (
            status == StepStatus.WAITING.value and sk in self.heartbeating
        )

    def _observe(self, old: Item | None, new: Item) -> None:
        sk = new["sk"]
        status = new.get("status")
        self._count(old, new)
        if sk in self.limited_units and status == StepStatus.RUNNING.value:
            if (
                old is None
                or old.get("status") != status
                or old.get("attempt") != new.get("attempt")
            ):
                self.limited_claims[int((self.kernel.now - START_MS) // 1000)] += 1
        elif new["pk"].startswith(RATE_PREFIX):
            self.limiter_writes += 1
            return
        if sk == WF_SK:
            self.stream_records += 1
            self.events_out += len(events_of(Change(old, new, "0")))
            if status in _TERMINAL and (old is None or old.get("status") not in _TERMINAL):
                workflow_id = workflow_id_of(new["pk"])
                self.terminal[workflow_id] = (str(status), self.kernel.now)
                self.kernel.at(self.kernel.now + EVICT_AFTER_MS, lambda: self._evict(workflow_id))
            return
        if not sk.startswith((STEP_PREFIX, COMP_PREFIX)):
            return
        was = None if old is None else old.get("status")
        if old is not None and status not in _IN_FLIGHT:
            self.stream_records += 1
            self.events_out += len(events_of(Change(old, new, "0")))
        if status == StepStatus.SUCCEEDED.value and was != status:
            self.steps_succeeded += 1
        if sk == "S#take_payment":
            self.waiting_payment += (status == "WAITING") - (was == "WAITING")
            self.waits_begun += status == "WAITING" and was != "WAITING"
        history = new.get("history") or ()
        if old is None or not history or len(history) == len(old.get("history") or ()):
            return
        last = history[-1]
        if last.get("o") in TIMEOUTS and last.get("a") == old.get("attempt"):
            key = AttemptKey(
                workflow_id_of(new["pk"]),
                "step" if sk.startswith(STEP_PREFIX) else "compensation",
                sk[2:],
                int(last["a"]),
            )
            sign = old.get("heartbeat_at") or old.get("claimed_at") or 0
            self.detections[key] = Detection(self.kernel.now, float(sign), str(last["o"]))

    def _observe_load(self, actor: str, items: list[Item]) -> None:
        if actor == "supervisor" and any(
            i["sk"] == "S#take_payment" and i.get("status") == "WAITING" for i in items
        ):
            self.waiting_looks += 1

    def _evict(self, workflow_id: str) -> None:
        self.store.evict(wf_pk(workflow_id))
        self.world.forget(workflow_id)

    # ---------------------------------------------------------------------------- run

    def list_scales(self, probes: int = 50_000) -> None:
        """How many times the whole system writes each list-index partition as often as the
        subset does, from the engine's own workflow item for `probes` sample ids of every
        group: 1 / f when the list key ignores the watch shard (within sampling noise), the
        measured ratio when it follows it."""
        spec = TABLE.list_index
        f = self.config.fraction
        full: Counter[str] = Counter()
        subset: Counter[str] = Counter()
        for n in range(probes):
            workflow_id = derived_id(OWNER, f"probe-{n}")
            record = WorkflowRecord(
                workflow_id,
                WF_TYPE,
                "",
                WorkflowStatus.RUNNING,
                "{}",
                OWNER,
                "",
                START_MS,
                START_MS,
            )
            key = record.to_item().get(spec.partition_key)
            if key is None:
                continue
            full[str(key)] += 1
            if self.world.in_subset(workflow_id):
                subset[str(key)] += 1
        for key, count in full.items():
            expected = count * f
            if subset[key] and abs(subset[key] - expected) > 4 * math.sqrt(expected) + 1:
                # Every list index is partitioned by the same key (the filter indexes too).
                for index in TABLE.list_indexes:
                    if index.partition_key == spec.partition_key:
                        self.capacity.overrides[(index.name, key)] = count / subset[key]

    def seed(self) -> None:
        """The open population of the modelled groups, and what the outside world owes it."""
        now = int(self.kernel.now)
        made = templates(self.definitions, START_MS - 3_600_000, self.config.shards)
        world = self.world
        for wf in population(
            self.config.load,
            self.definition,
            made,
            seed=self.config.seed,
            now=now,
            shards=self.config.shards,
            groups=self.config.groups,
            modelled=set(self.config.modelled),
            fraction=self.config.open_fraction,
        ):
            self.store.seed(wf.items)
            for item in wf.items:
                if item["sk"] == WF_SK:
                    self.open_count += item.get("status") not in _TERMINAL
                elif item["sk"].startswith((STEP_PREFIX, COMP_PREFIX)):
                    self.running_count += self._running(item["sk"], item.get("status"))
            world.stats.accepted[wf.workflow_id] = float(now)
            world._rngs[wf.workflow_id] = wf.rng
            self.seeded += 1
            if wf.kind == "payment":
                self.waiting_payment += 1
                self.waiting_workflows += 1
                if self.waiting_workflows <= SIZE_SAMPLE:
                    self.waiting_items += len(wf.items)
                    self.waiting_bytes += sum(item_size(i) for i in wf.items)
                assert wf.token is not None
                world.partner(wf.token, wf.began_at + wf.length_ms)
            elif wf.kind == "packing":
                assert wf.token is not None
                key = AttemptKey(wf.workflow_id, "step", "pack_order", 1)
                elapsed = now - wf.began_at
                world.packer(wf.token, key, wf.began_at, wf.length_ms, wf.rng, elapsed)

    def run(self) -> None:
        if not self.config.shard_list:
            self._run()
            return
        with sharded_list_index() as applied:
            self.list_patched = applied
            self._run()

    def _run(self) -> None:
        config = self.config
        end = START_MS + config.minutes * 60_000
        self.list_scales()
        self.seed()
        if config.stall is not None:
            pool, at_s, seconds = config.stall
            self.queue_port.tracked.add(pool)
            mapping = self.mappings[pool]
            self.kernel.at(START_MS + at_s * 1000, mapping.stop)
            self.kernel.at(START_MS + (at_s + seconds) * 1000, mapping.start)
        self.world.start_arrivals(end)
        self.supervision.start(end)
        self.kernel.at(START_MS, self._sample)
        self.kernel.run(end)
        self.end_ms = end

    def _sample(self) -> None:
        s = self.samples
        s.at.append(self.kernel.now)
        s.open.append(self.open_count)
        s.running.append(self.running_count)
        s.waiting_payment.append(self.waiting_payment)
        s.queued.append({name: len(q._ready) for name, q in self.queues.items()})
        s.concurrency.append(self.account.in_use)
        self.kernel.at(self.kernel.now + SAMPLE_MS, self._sample)

    # ------------------------------------------------------------------------- audits

    def lost(self) -> dict[str, list[str]]:
        """Accepted workflows the system could lose track of: open with no item, or open
        with no watch entry (nothing would ever look at them again)."""
        out: dict[str, list[str]] = {"missing": [], "unwatched": []}
        for workflow_id in self.world.stats.accepted:
            if workflow_id in self.terminal:
                continue
            items = self.store.peek(wf_pk(workflow_id))
            head = next((i for i in items if i["sk"] == WF_SK), None)
            if head is None:
                out["missing"].append(workflow_id)
            elif head.get("due_at") is None and head.get("status") != "PAUSED":
                out["unwatched"].append(workflow_id)
        return out

    def overdue(self) -> list[float]:
        """How late (ms) each open workflow's watch entry is at the end of the run."""
        late = []
        for workflow_id in self.world.stats.accepted:
            if workflow_id in self.terminal:
                continue
            items = self.store.peek(wf_pk(workflow_id))
            head = next((i for i in items if i["sk"] == WF_SK), None)
            if head is not None and head.get("due_at") is not None:
                late.append(max(0.0, self.end_ms - float(head["due_at"])))
        return late


_TERMINAL = {s.value for s in WorkflowStatus if s.terminal}
_IN_FLIGHT = {StepStatus.RUNNING.value, StepStatus.WAITING.value}


def _call(inv: Invocation, event: Any) -> None:
    """An API function's handler: the request's own action (see `World.request`)."""
    event(inv)
