"""Test harness: the real scheduler, agent runtime and supervisor over ports under test control.

Time is a ManualClock; delivery goes through the in-memory queue (it honours delays and
visibility under that clock); the store is in memory or DynamoDB on moto.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws
from shepherd.adapters.dynamodb import DynamoStore, change_of_record
from shepherd.clock import ManualClock
from shepherd.definitions import Definition, load_directory
from shepherd.engine.agent import AgentRegistry, HandleResult
from shepherd.engine.build import build_engine
from shepherd.engine.scheduler import EngineConfig, Ports
from shepherd.engine.supervisor import SweepReport
from shepherd.model import StepRecord, TaskMessage, WorkflowState, WorkflowStatus
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.pool_policy import parse_policies
from shepherd.ports import Store
from shepherd.testing import MemoryQueue, MemoryStore, SequentialIds, StreamedEvents
from shepherd_cli.resources import create_table
from shepherd_cli.streams import StreamReader, stream_arn

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = load_directory(ROOT / "statemachines")
TABLE_NAME = "shepherd-test"

# The stores the engine's tests run on (issue 36): the in-memory store alone by default. The
# store contract tests (tests/contract) prove DynamoDB's adapter keeps the same contract
# (conditions, updates, transactions, indexes, item size) for every call the engine can make,
# at a tenth of the CPU; the adapter's own tests and the handler tests run on moto.
# SHEPHERD_ENGINE_STORES=memory,dynamodb (`make test-stores`) runs them on both again.
ENGINE_STORES = tuple(os.environ.get("SHEPHERD_ENGINE_STORES", "memory").split(","))


def engine_stores(memory: str = "memory", dynamodb: str = "moto") -> list[str]:
    """A store-parametrized fixture's params, in its own names, for the stores this run asks
    for (ENGINE_STORES)."""
    wanted = {"memory": memory, "dynamodb": dynamodb, "moto": dynamodb}
    unknown = set(ENGINE_STORES) - set(wanted)
    assert not unknown, f"SHEPHERD_ENGINE_STORES: unknown store {sorted(unknown)}"
    return [name for name in (memory, dynamodb) if name in {wanted[s] for s in ENGINE_STORES}]


ORDER = {"order_id": "o-1", "customer": "ada", "amount": 42.5, "items": [{"sku": "A", "qty": 2}]}
ENV = {"env_name": "dev-one", "region": "eu-west-1", "size": "small"}


@dataclass
class Harness:
    store: Store
    clock: ManualClock = field(default_factory=ManualClock)
    definitions: dict[str, Definition] = field(default_factory=lambda: dict(DEFINITIONS))
    agents: AgentRegistry | None = None
    shards: int = 4
    log: list[tuple[TaskMessage, HandleResult]] = field(default_factory=list)
    # What subscribers are told: the store's change stream through shepherd.changes.
    events: StreamedEvents | None = None
    # Each pool's rate limit and circuit breaker (shepherd.pool_policy), as the construct sets.
    pool_policies: dict[str, Any] = field(default_factory=dict)
    # How a state machine's service Tasks reach AWS (`build_engine(services=...)`): moto's
    # boto3 clients through `AwsServices(...).call`, or a test's fake.
    services: Callable[[str, Any, str | None], Any] | None = None

    def __post_init__(self) -> None:
        self.queue = MemoryQueue(self.clock, visibility_ms=300_000)
        if self.events is None:
            assert isinstance(self.store, MemoryStore), "pass the events of a DynamoDB stream"
            self.events = StreamedEvents.of(self.store)
        self.payload_store = MemoryPayloadStore()
        self.ports = Ports(
            self.store,
            self.queue,
            self.clock,
            SequentialIds(),
            random.Random(7),
            Payloads(self.payload_store),
        )
        if self.agents is None:
            from shepherd_examples.agents import registry

            self.agents = registry
        # The one factory every host uses; the in-memory queue doubles as the pool control.
        self.engine = build_engine(
            self.ports,
            self.definitions,
            agents=self.agents,
            config=EngineConfig(watch_shards=self.shards),
            pool_control=self.queue,
            worker_id="test",
            background_heartbeats=False,
            pool_policies=parse_policies(self.pool_policies, source="pool_policies"),
            services=self.services,
        )
        self.catalog = self.engine.catalog
        self.scheduler = self.engine.scheduler
        self.operations = self.engine.operations
        self.callbacks = self.engine.callbacks
        self.uploads = self.engine.uploads
        self.runtime = self.engine.agent_runtime
        self.supervisor = self.engine.supervisor
        self.pools = self.engine.pools

    # -------------------------------------------------------------------------- driving

    def start(self, wf_type: str, payload: Any, **kwargs: Any) -> str:
        return self.scheduler.start(wf_type, payload, **kwargs).workflow_id

    def receive(self) -> list[Any]:
        """Every visible message of every pool (and delete nothing yet)."""
        out = []
        for pool in sorted({t.pool for d in self.definitions.values() for t in d.tasks}):
            out += self.queue.receive(pool, 10)
        return out

    def pump(
        self,
        *,
        on_message: Callable[[TaskMessage], str] | None = None,
        rounds: int = 50,
    ) -> list[tuple[TaskMessage, HandleResult]]:
        """Deliver visible messages until none is left.

        `on_message` may return "handle" (default), "drop" (lose it), "duplicate" (deliver it
        twice) or "hold" (received, never acknowledged: it comes back after the visibility
        timeout, like a worker that died before deleting it).
        """
        handled: list[tuple[TaskMessage, HandleResult]] = []
        for _ in range(rounds):
            messages = self.receive()
            if not messages:
                break
            for m in messages:
                what = on_message(m.task) if on_message else "handle"
                if what == "drop":
                    self.queue.delete(m.receipt)
                    continue
                if what == "hold":
                    continue
                times = 2 if what == "duplicate" else 1
                for _ in range(times):
                    result = self.runtime.handle(m.task)
                    handled.append((m.task, result))
                    self.log.append((m.task, result))
                self.queue.delete(m.receipt)
        return handled

    def sweep(self) -> SweepReport:
        return self.supervisor.sweep()

    def run(
        self,
        workflow_id: str,
        *,
        step_seconds: float = 0.5,
        max_steps: int = 400,
        on_message: Callable[[TaskMessage], str] | None = None,
    ) -> WorkflowState:
        """Pump, move time, sweep, until the workflow is terminal."""
        for _ in range(max_steps):
            self.pump(on_message=on_message)
            state = self.state(workflow_id)
            if state.workflow.status.terminal:
                return state
            self.clock.advance(step_seconds)
            self.sweep()
        raise AssertionError(f"workflow {workflow_id} did not finish: {self.state(workflow_id)}")

    # ----------------------------------------------------------------------------- reads

    def state(self, workflow_id: str) -> WorkflowState:
        loaded = self.scheduler.load(workflow_id)
        assert loaded is not None
        return loaded[0]

    def output(self, workflow_id: str) -> Any:
        """The workflow's output as the API reads it (assembled from its steps)."""
        from shepherd.engine.outputs import workflow_output

        loaded = self.scheduler.load(workflow_id)
        assert loaded is not None
        return workflow_output(*loaded, self.ports.payloads)

    def status(self, workflow_id: str) -> WorkflowStatus:
        return self.state(workflow_id).workflow.status

    def step(self, workflow_id: str, name: str) -> StepRecord:
        return self.state(workflow_id).steps[name]

    def sent(self, workflow_id: str, step: str, kind: str = "step") -> list[int]:
        """Attempt numbers of every message sent for a step, in order."""
        return [
            t.message.attempt
            for t in self.queue.sent
            if t.message.workflow_id == workflow_id
            and t.message.step == step
            and t.message.kind == kind
        ]

    def handled(self, workflow_id: str, step: str) -> list[tuple[int, str]]:
        return [
            (m.attempt, r.outcome.value)
            for m, r in self.log
            if m.workflow_id == workflow_id and m.step == step and m.kind == "step"
        ]


def memory_harness(**kwargs: Any) -> Harness:
    return Harness(MemoryStore(), **kwargs)


def make_dynamo_store() -> tuple[DynamoStore, Any]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    create_table(client, TABLE_NAME)
    return DynamoStore(client, TABLE_NAME), client


def stream_events(client: Any, table: str = TABLE_NAME) -> StreamedEvents:
    """Events from the table's DynamoDB stream on moto, read as the event source mapping does."""
    reader = StreamReader(
        boto3.client("dynamodbstreams", region_name="us-east-1"), stream_arn(client, table)
    )
    return StreamedEvents(lambda: [change_of_record(r) for r in reader.read()])


@contextlib.contextmanager
def moto_harness(**kwargs: Any) -> Iterator[Harness]:
    with mock_aws():
        store, client = make_dynamo_store()
        h = Harness(store, events=stream_events(client), **kwargs)
        h.dynamodb = client  # type: ignore[attr-defined]
        yield h


@contextlib.contextmanager
def registry_with(**functions: Callable[..., Any]) -> Iterator[AgentRegistry]:
    """The demo registry with some agents swapped for test doubles."""
    from shepherd_examples.agents import registry

    swapped = AgentRegistry()
    for name in registry.names():
        fn = registry.get(name)
        assert fn is not None
        swapped.register(name, fn)
    for name, fn in functions.items():
        swapped.register(name, fn)
    yield swapped


class HookStore:
    """A Store wrapper that runs a hook before selected calls, to force exact interleavings."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.before_update: Callable[[str, str, Any], None] | None = None
        self.after_load: Callable[[str], None] | None = None

    def create(self, items: Any) -> None:
        self.inner.create(items)

    def put_new(self, item: Any) -> None:
        self.inner.put_new(item)

    def transact(self, writes: Any) -> None:
        self.inner.transact(writes)

    def update(self, pk: str, sk: str, update: Any, condition: Any) -> Any:
        if self.before_update is not None:
            self.before_update(pk, sk, update)
        return self.inner.update(pk, sk, update, condition)

    def load(self, pk: str) -> Any:
        items = self.inner.load(pk)
        if self.after_load is not None:
            self.after_load(pk)
        return items

    def get(self, pk: str, sk: str) -> Any:
        return self.inner.get(pk, sk)

    def get_many(self, keys: Any) -> Any:
        items = self.inner.get_many(keys)
        if self.after_load is not None:  # a bounded read of one workflow is a read of it
            for pk in dict.fromkeys(pk for pk, _ in keys):
                self.after_load(pk)
        return items

    def query_due(self, *args: Any) -> Any:
        return self.inner.query_due(*args)

    def query_range(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.query_range(*args, **kwargs)

    def query_after(self, *args: Any) -> Any:
        return self.inner.query_after(*args)

    def count_range(self, *args: Any) -> Any:
        return self.inner.count_range(*args)


def view_step(view: dict[str, Any], name: str) -> dict[str, Any]:
    """The step called `name` in a workflow's view (`GET /workflows/{id}`)."""
    return dict(next(s for s in view["steps"] if s["name"] == name))


def step_named(data: dict[str, Any], name: str) -> dict[str, Any]:
    """The step called `name` in a definition's data (steps are not at fixed places)."""
    return next(s for s in data["Steps"] if s["Name"] == name)


# The order example's steps that are not tasks of its saga: the fraud review (an Approval) and
# the reminder (a Wait and its step), all skipped for the orders most tests start.
ORDER_EXTRAS = ("fraud_review", "until_reminder", "send_reminder")


def order_tasks_only() -> Definition:
    """The order example's saga alone, the chain reserve -> charge -> ship -> notify: for tests
    of how the engine treats tasks, not the example's review and reminder (conditions, waits
    and approvals have tests of their own)."""
    from shepherd.definitions import parse_definition

    data = json.loads(DEFINITIONS["order_fulfilment"].canonical_json)
    by_name = {s["Name"]: s for s in data["Steps"]}

    def through(dep: str) -> list[str]:  # a dropped step's place goes to what it depended on
        if dep not in ORDER_EXTRAS:
            return [dep]
        return [d for up in by_name[dep].get("DependsOn", []) for d in through(up)]

    data["Steps"] = [
        {
            **s,
            "DependsOn": list(
                dict.fromkeys(d for dep in s.get("DependsOn", []) for d in through(dep))
            ),
        }
        for s in data["Steps"]
        if s["Name"] not in ORDER_EXTRAS
    ]
    return parse_definition(data, "order_fulfilment (tasks only)")


def pausing_order(harness: Harness) -> None:
    """order_fulfilment with OnFailure: PAUSE on charge_payment."""
    from shepherd.definitions import parse_definition

    # The snapshot, not model_dump: a Wait or Approval step's dump carries the task fields'
    # defaults (Retry), which such a step may not name.
    data = json.loads(harness.definitions["order_fulfilment"].canonical_json)
    step_named(data, "charge_payment")["OnFailure"] = "PAUSE"
    harness.definitions["order_fulfilment"] = parse_definition(data, "pausing")
    harness.catalog = type(harness.catalog)(harness.definitions, harness.store)
    harness.scheduler.catalog = harness.catalog
