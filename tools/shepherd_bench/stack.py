"""The real Lambda handlers on moto (in-process), metered, under a simulated clock.

Resources come from the same topology as the CDK app (`shepherd_cli.resources`). The handlers
build their engine exactly as in Lambda (`shepherd_handlers.runtime.engine`); the bench swaps
only its clock for a `ManualClock` and turns SQS delays into simulated time, so a retry's
backoff passes in simulated time instead of real seconds. Requests the bench itself makes (to
poll queues, read state) go through a separate, unmetered session.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import random
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
from shepherd.clock import ManualClock
from shepherd.definitions import Definition, load_directory
from shepherd.observability import ENV_POOL, ENV_SWEEP_INTERVAL, ENV_SWEEP_WINDOW
from shepherd.settings import Settings
from shepherd_cli import lambda_kit
from shepherd_examples import AGENT_MODULES

from shepherd_bench.meter import Meter
from shepherd_bench.schedule import deployed

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
ACCOUNT = "123456789012"
TABLE = "shepherd"
BUS = "shepherd"
PAYLOAD_BUCKET = "shepherd-payloads"
CALLER = f"arn:aws:iam::{ACCOUNT}:user/bench"
FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "POWERTOOLS_SERVICE_NAME": "shepherd",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


@dataclass
class LambdaContext(lambda_kit.LambdaContext):
    """The bench's context (the kit's): a fixed minute left, in the bench's account."""

    function_name: str = "shepherd-bench"
    remaining_ms: int | None = 60_000
    region: str = REGION
    account: str = ACCOUNT


def rest_event(
    method: str,
    path: str,
    resource: str,
    body: Any = None,
    *,
    params: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway REST proxy event as an IAM-authorized request produces it (the path's
    parameters: `params`, else a workflow id as its last part)."""
    if params is None and "{workflow_id}" in resource:
        params = {"workflow_id": path.rsplit("/", 1)[-1]}
    return lambda_kit.rest_event(
        method,
        path,
        resource=resource,
        path_parameters=params,
        query=query,
        headers={"Content-Type": "application/json"},
        body=None if body is None else json.dumps(body),
        caller_arn=CALLER,
        base_path="/v1",
        stage="v1",
        account=ACCOUNT,
    )


def sqs_event(pool: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The event the SQS event source mapping hands the pool's function."""
    return lambda_kit.sqs_event(messages, f"arn:aws:sqs:{REGION}:{ACCOUNT}:shepherd-{pool}")


SCHEDULED_EVENT = {
    "version": "0",
    "id": "bench",
    "detail-type": "Scheduled Event",
    "source": "aws.scheduler",
    "account": ACCOUNT,
    "time": "2026-01-01T00:00:00Z",
    "region": REGION,
    "resources": [],
    "detail": {},
}


class SimSleep:
    """Stands in for the `time` module of the demo agents: their work passes in simulated time."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock

    def sleep(self, seconds: float) -> None:
        self._clock.advance(seconds)


class AlarmClock(ManualClock):
    """A ManualClock for a harness that drives several actors in one thread: what happens
    meanwhile is an alarm, rung as the clock passes its moment, and a sleep may park its
    caller instead of moving the clock.

    On AWS the supervisor sweeps in its own Lambda while agents run in theirs; the bench runs
    them one call at a time. A sweep that looks ahead sleeps on the clock until its next entry
    is due, up to most of an interval: run in the harness's thread, that sleep would move
    everyone's time while nobody else could act (an agent's heartbeats and its result would
    wait for the sweep, and a look at the agent's deadline would find neither). So the
    harness runs a sweep in a greenlet, and its sleep parks it (`parker`, see
    `shepherd_bench.cost.Timeline`) until the harness resumes it at its wake time; an
    agent's progress reports are alarms (`alarm`), rung by `run_until` and by the sleep of
    whoever is not parked. `set` and `advance` ring nothing."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        super().__init__(start_ms)
        self._alarms: list[tuple[int, int, Callable[[], None]]] = []
        self._rung = 0
        # Parks the caller until `wake` (ms) if it is a parked actor; False: not one of them.
        self.parker: Callable[[int], bool] | None = None

    def alarm(self, at_ms: int, ring: Callable[[], None]) -> None:
        """Call `ring` when the clock passes `at_ms` through `sleep` or `run_until`."""
        self._rung += 1
        heapq.heappush(self._alarms, (at_ms, self._rung, ring))

    def run_until(self, at_ms: int) -> None:
        """Move to `at_ms` (never back), ringing each alarm due on the way at its moment (an
        alarm may sleep or set alarms itself)."""
        while self._alarms and self._alarms[0][0] <= at_ms:
            when, _, ring = heapq.heappop(self._alarms)
            self.set(max(self.now_ms(), when))
            ring()
        self.set(max(self.now_ms(), at_ms))

    def sleep(self, seconds: float) -> None:
        wake = self.now_ms() + round(seconds * 1000)
        if self.parker is None or not self.parker(wake):
            self.run_until(wake)


@dataclass
class Held:
    pool: str
    message: dict[str, Any]
    visible_at: int


class HandlerStack:
    """Use inside `moto.mock_aws()`; `close()` restores the environment and the demo agents.

    `definitions` (a benchmark's own workflows, by name) run beside the repository's, as if
    they were in its definitions directory: their pools get queues, the engine plans with
    them; `agent_modules` name the modules of their agents (`pkg.mod`, as
    `SHEPHERD_AGENT_MODULES` does), loaded beside the demo agents."""

    def __init__(
        self,
        meter: Meter,
        clock: ManualClock,
        *,
        watch_shards: int = 8,
        definitions: Mapping[str, Definition] | None = None,
        agent_modules: Sequence[str] = (),
    ) -> None:
        self.meter = meter
        self.clock = clock
        repository = load_directory(ROOT / "statemachines")
        clash = sorted(set(repository) & set(definitions or {}))
        if clash:
            raise ValueError(f"definitions {clash} are the repository's already")
        self.definitions: dict[str, Definition] = {**repository, **(definitions or {})}
        self._saved_env = {k: os.environ.get(k) for k in FAKE_ENV}
        os.environ.update(FAKE_ENV)
        raw = boto3.session.Session(region_name=REGION)
        self.raw = {s: raw.client(s) for s in ("dynamodb", "sqs", "events", "s3")}
        from shepherd_cli.resources import create_all

        queues = create_all(self.raw, self.definitions, table=TABLE, bus=BUS, bucket=PAYLOAD_BUCKET)
        self.queue_urls = {pool: q.url for pool, q in queues.items()}
        settings = Settings(
            table=TABLE,
            queue_urls=self.queue_urls,
            event_bus=BUS,
            definitions_dir=ROOT / "statemachines",
            watch_shards=watch_shards,
            agent_modules=(*AGENT_MODULES, *agent_modules),
            payload_bucket=PAYLOAD_BUCKET,
        )
        env = {
            **settings.to_env(),
            # One sweep per supervisor call (the bench keeps the deployed schedule); the interval
            # tells the supervisor how soon the next sweep comes, as deployed.
            ENV_SWEEP_INTERVAL: str(deployed().interval_ms / 1000),
            ENV_SWEEP_WINDOW: "0",
            ENV_POOL: "all",
        }
        self._saved_env.update({k: os.environ.get(k) for k in env})
        os.environ.update(env)
        # The engine's clients come from boto3's default session: hook it before they exist.
        boto3.setup_default_session(region_name=REGION)
        session_events = boto3.DEFAULT_SESSION.events
        meter.install(session_events)
        self._visible: dict[str, list[int]] = defaultdict(list)
        session_events.register(
            "before-parameter-build.sqs.SendMessageBatch", self._simulated_delay
        )
        from shepherd_handlers import runtime

        runtime.engine.cache_clear()
        self.engine = runtime.engine()
        # The settings name the repository's directory; the engine plans with every
        # definition here (a cached property, set before the engine is built on first use).
        self.engine.definitions = self.definitions
        self.engine.ports.clock = clock  # builds the (metered) clients now
        # The demo agents' work takes simulated time only, so no heartbeat would ever be due.
        self.engine.agent_runtime.background_heartbeats = False
        self._patched: list[tuple[ModuleType, str, Any]] = []
        from shepherd_examples.agents import order, provision

        for module in (order, provision):
            # How long their work takes is drawn from `random`: seeded here, so a run's
            # simulated durations (and whether a sweep falls inside one) are the same each
            # time, and the pinned request counts can be compared exactly.
            for name, stand_in in (("time", SimSleep(clock)), ("random", random.Random(7))):
                self._patched.append((module, name, getattr(module, name)))
                setattr(module, name, stand_in)
        self.api_requests = 0
        self.api_invocations = 0
        self.agent_messages: defaultdict[str, int] = defaultdict(int)
        self.agent_invocations = 0
        self.sweeps = 0
        # The table's stream -> the event relay, as its event source mapping (filters
        # included) delivers it. Lambda's reads of the stream are free: unmetered.
        from shepherd_cli.streams import StreamMapping, StreamReader, stream_arn

        self.stream = StreamMapping(
            StreamReader(raw.client("dynamodbstreams"), stream_arn(self.raw["dynamodb"], TABLE)),
            self._relay_batch,
        )
        self.relay_records = 0
        self.relay_invocations = 0

    def close(self) -> None:
        for module, name, original in self._patched:
            setattr(module, name, original)
        self.meter.uninstall()
        from shepherd_handlers import runtime

        runtime.metrics.clear_metrics()  # nothing to flush at exit: metrics are not the point
        runtime.engine.cache_clear()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    # ----------------------------------------------------------------------------- time

    def _simulated_delay(self, params: dict[str, Any], **_: Any) -> None:
        """An SQS delay becomes simulated time: the bench holds the message until then."""
        now = self.clock.now_ms()
        for entry in params.get("Entries", []):
            self._visible[entry["MessageBody"]].append(
                now + int(entry.get("DelaySeconds", 0)) * 1000
            )
            entry["DelaySeconds"] = 0

    # ------------------------------------------------------------------------- handlers

    def start(self, wf_type: str, payload: Any) -> str:
        from shepherd_handlers import api

        self.api_requests += 1
        self.api_invocations += 1
        event = rest_event("POST", "/workflows", "/workflows", {"type": wf_type, "input": payload})
        with self.meter.component("api"):
            reply = api.handler(event, LambdaContext())
        _drop_metrics()
        if int(reply["statusCode"]) != 202:
            raise RuntimeError(f"start failed: {reply}")
        return str(json.loads(reply["body"])["workflow_id"])

    def read(
        self,
        path: str,
        resource: str,
        params: dict[str, str],
        query: dict[str, str] | None = None,
        *,
        component: str = "reads",
    ) -> Any:
        """A GET through the API handler (its requests tallied under `component`): the body."""
        from shepherd_handlers import api

        event = rest_event("GET", path, resource, params=params, query=query)
        with self.meter.component(component):
            reply = api.handler(event, LambdaContext())
        _drop_metrics()
        if int(reply["statusCode"]) != 200:
            raise RuntimeError(f"GET {path} failed: {reply}")
        return json.loads(reply["body"])

    def receive(self) -> list[Held]:
        """Every visible message of every pool (unmetered: the event source's polls are modelled)."""
        out: list[Held] = []
        for pool, url in self.queue_urls.items():
            while True:  # ten at most a receive: a map's window holds more
                got = (
                    self.raw["sqs"]
                    .receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
                    .get("Messages", [])
                )
                for m in got:
                    times = self._visible.get(m["Body"]) or [self.clock.now_ms()]
                    out.append(Held(pool, m, times.pop(0)))
                if len(got) < 10:
                    break
        return out

    def deliver(
        self, pool: str, messages: list[dict[str, Any]], *, component: str = "agent"
    ) -> None:
        """One invocation of the pool's function with these messages; delete what succeeded.
        Its requests are tallied under `component`."""
        from shepherd_handlers import agent

        self.agent_invocations += 1
        self.agent_messages[pool] += len(messages)
        with self.meter.component(component):
            reply = agent.handler(sqs_event(pool, messages), LambdaContext())
        _drop_metrics()
        failed = {f["itemIdentifier"] for f in reply["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                self.raw["sqs"].delete_message(
                    QueueUrl=self.queue_urls[pool], ReceiptHandle=m["ReceiptHandle"]
                )

    def sweep(self) -> dict[str, Any]:
        from shepherd_handlers import supervisor

        self.sweeps += 1
        with self.meter.component("supervisor"):
            reply = dict(supervisor.handler(dict(SCHEDULED_EVENT), LambdaContext()))
        _drop_metrics()
        return reply

    def _relay_batch(self, event: dict[str, Any]) -> Any:
        from shepherd_handlers import stream

        self.relay_invocations += 1
        self.relay_records += len(event["Records"])
        with self.meter.component("relay"):
            reply = stream.handler(event, LambdaContext())
        _drop_metrics()
        return reply

    def relay(self) -> int:
        """Run the event relay over the stream's new records; records delivered."""
        return self.stream.poll()

    def status(self, workflow_id: str) -> str:
        got = self.raw["dynamodb"].get_item(
            TableName=TABLE,
            Key={"pk": {"S": f"WF#{workflow_id}"}, "sk": {"S": "#WF"}},
            ConsistentRead=True,
        )
        return str(got["Item"]["status"]["S"])

    def forget(self, workflow_id: str, partitions: Sequence[str] = ()) -> None:
        """Delete a measured workflow's items, and those of its other `partitions` (a map's
        item partitions), unmetered: moto copies the whole table on every transaction, so a
        small table keeps the bench fast."""
        pages = self.raw["dynamodb"].get_paginator("query")
        for pk in (f"WF#{workflow_id}", *partitions):
            for page in pages.paginate(
                TableName=TABLE,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": pk}},
                ProjectionExpression="pk, sk",
                ConsistentRead=True,
            ):
                for key in page["Items"]:
                    self.raw["dynamodb"].delete_item(TableName=TABLE, Key=key)

    def payload_bytes(self) -> int:
        """Bytes in the payload bucket so far (unmetered)."""
        total = 0
        for page in self.raw["s3"].get_paginator("list_objects_v2").paginate(Bucket=PAYLOAD_BUCKET):
            total += sum(int(o["Size"]) for o in page.get("Contents", []))
        return total

    def items(self, workflow_id: str) -> list[dict[str, Any]]:
        from shepherd.adapters.dynamodb import from_attr

        got = self.raw["dynamodb"].query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": f"WF#{workflow_id}"}},
            ConsistentRead=True,
        )
        return [i for i in (from_attr(a) for a in got["Items"]) if i]


def _drop_metrics() -> None:
    """Powertools prints a full metric set even when disabled; the bench has no use for it."""
    from shepherd_handlers import runtime

    runtime.metrics.clear_metrics()


@contextlib.contextmanager
def handler_stack(meter: Meter, clock: ManualClock, **kwargs: Any) -> Iterator[HandlerStack]:
    from moto import mock_aws

    with mock_aws():
        stack = HandlerStack(meter, clock, **kwargs)
        try:
            yield stack
        finally:
            stack.close()
