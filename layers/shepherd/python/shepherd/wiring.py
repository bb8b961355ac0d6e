"""Builds the engine from settings. The only place boto3 clients are made, lazily.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import functools
import random
import threading
from collections import Counter
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from shepherd.clock import Clock, SystemClock
from shepherd.definitions import Definition, load_directory
from shepherd.engine.agent import AgentRegistry, AgentRuntime
from shepherd.engine.approvals import Approvals
from shepherd.engine.build import Engine, build_engine
from shepherd.engine.callbacks import Callbacks
from shepherd.engine.catalog import Catalog
from shepherd.engine.operations import Operations
from shepherd.engine.pools import PoolControl, Pools
from shepherd.engine.scheduler import EngineConfig, Ports, Scheduler
from shepherd.engine.schedules import Schedules
from shepherd.engine.signals import Signals
from shepherd.engine.supervisor import Supervisor, ThreadedLooks
from shepherd.engine.uploads import Uploads
from shepherd.engine.wakeup import Wakeup
from shepherd.ids import RandomIds
from shepherd.payloads import NoPayloadStore, Payloads, PayloadStore
from shepherd.ports import EventPublisher, NullEvents
from shepherd.settings import Settings
from shepherd.topology import pools

# The services the engine talks to. botocore lists every service directory it ships (about
# 400, some 80 ms of a cold start) to check that a name exists; the engine's session checks
# only these.
ENGINE_SERVICES = frozenset({"dynamodb", "sqs", "events", "lambda", "s3"})


def _default_session() -> Any:
    """The session the engine's clients come from: boto3's default session when something
    made one (a test's or a benchmark's hooks on it then see every call), else the engine's
    own. The engine's own session is never installed as boto3's default: agent code in the
    same process calls `boto3.client(...)` for any service it likes."""
    import boto3  # noqa: PLC0415 - imported when first needed, after moto may have started

    if boto3.DEFAULT_SESSION is not None:
        return boto3.DEFAULT_SESSION
    return _own_session()


@cache
def _own_session() -> Any:
    """A session whose data loader knows the engine's services without listing every
    directory botocore ships."""
    import boto3  # noqa: PLC0415
    import botocore.session  # noqa: PLC0415
    from botocore.loaders import Loader  # noqa: PLC0415

    class EngineServices(Loader):  # type: ignore[misc]
        def list_available_services(self, type_name: str) -> list[str]:
            return sorted(ENGINE_SERVICES)

    core = botocore.session.get_session()
    core.register_component("data_loader", EngineServices())
    return boto3.session.Session(botocore_session=core)


# What AWS answers when a caller goes too fast (every service's spelling of "slow down").
THROTTLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "SlowDown",
        "RequestThrottled",
        "RequestThrottledException",
    }
)


class Throttles:
    """Calls the services answered "slow down", counted per service by a botocore hook on
    every attempt (the SDK's own retries included): the handlers emit them as the
    `Throttles` metric, so throttling shows before it becomes an error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def hook(self, response: Any = None, event_name: str = "", **_: Any) -> None:
        """botocore `needs-retry.<service>.<operation>`: count a throttled attempt; never
        decides anything (returns None, so the standard retry handler does)."""
        if not response:
            return
        code = str((response[1] or {}).get("Error", {}).get("Code", ""))
        if code in THROTTLE_CODES:
            service = event_name.split(".")[1] if event_name.count(".") >= 2 else "unknown"
            with self._lock:
                self._counts[service] += 1

    def take(self) -> dict[str, int]:
        """The counts since the last take (an invocation's), reset."""
        with self._lock:
            counts, self._counts = dict(self._counts), Counter()
        return counts


THROTTLES = Throttles()


def _client(service: str) -> Any:
    from botocore.config import Config  # noqa: PLC0415

    # Retry modes set explicitly: `standard` (throttling backoff with jitter, a retry quota
    # per client); what is still throttled after 5 attempts surfaces as StoreUnavailable.
    config = Config(
        retries={"mode": "standard", "max_attempts": 5}, connect_timeout=3, read_timeout=10
    )
    assert service in ENGINE_SERVICES, f"add {service!r} to ENGINE_SERVICES"
    made = _default_session().client(service, config=config)
    made.meta.events.register(
        f"needs-retry.{made.meta.service_model.endpoint_prefix}", THROTTLES.hook
    )
    return made


def client(service: str) -> Any:
    """A boto3 client of one of the engine's services, configured as the engine's own."""
    return _client(service)


WAKE_TICK = '{"wake":true}'


def ring(ticks_url: str) -> None:
    """Wake the sleeping supervisor: a tick that runs a minute as a scheduled run does
    (shepherd.engine.wakeup)."""
    client("sqs").send_message(QueueUrl=ticks_url, MessageBody=WAKE_TICK)


@dataclass
class Shepherd:
    """The engine wired to AWS from settings; everything is built on first use."""

    settings: Settings
    clock: Clock | None = None
    agents: AgentRegistry | None = None
    worker_id: str = "agent"

    @cached_property
    def publisher(self) -> EventPublisher:
        """Where lifecycle events go (the stream consumer publishes them)."""
        if not self.settings.event_bus:
            return NullEvents()
        from shepherd.adapters.eventbridge import EventBridgePublisher  # noqa: PLC0415

        return EventBridgePublisher(_client("events"), self.settings.event_bus)

    @cached_property
    def payloads(self) -> Payloads:
        """The claim check over the payload bucket (S3), if one is configured."""
        store: PayloadStore = NoPayloadStore()
        if self.settings.payload_bucket:
            from shepherd.adapters.s3 import S3PayloadStore  # noqa: PLC0415

            store = S3PayloadStore(_client("s3"), self.settings.payload_bucket)
        return Payloads(store, self.settings.payload_inline_bytes)

    @cached_property
    def definitions(self) -> dict[str, Definition]:
        return load_directory(self.settings.definitions_dir)

    @cached_property
    def ports(self) -> Ports:
        from shepherd.adapters.dynamodb import DynamoStore  # noqa: PLC0415
        from shepherd.adapters.sqs import SqsQueue  # noqa: PLC0415

        return Ports(
            store=DynamoStore(_client("dynamodb"), self.settings.table),
            queue=SqsQueue(_client("sqs"), self.settings.queue_urls_for(pools(self.definitions))),
            clock=self.clock or SystemClock(),
            ids=RandomIds(),
            rng=random.Random(),
            payloads=self.payloads,
        )

    @cached_property
    def pool_control(self) -> PoolControl | None:
        """What switches a pool's consumers on AWS (its event source mapping), if the
        deployment says how to find them."""
        if not (self.settings.pool_mappings or self.settings.pool_function_prefix):
            return None
        from shepherd.adapters.lambda_esm import EventSourceMappingControl  # noqa: PLC0415

        return EventSourceMappingControl(
            _client("lambda"), self.settings.pool_mappings, self.settings.pool_function_prefix
        )

    @cached_property
    def engine(self) -> Engine:
        engine = self._engine()
        ticks_url = self.settings.sweep_ticks_url
        if ticks_url:  # deployed: the supervisor sleeps while idle, and is woken
            engine.scheduler.wakeup = Wakeup(
                engine.ports.store, engine.ports.clock, ring=functools.partial(ring, ticks_url)
            )
        return engine

    def _engine(self) -> Engine:
        control = self.pool_control
        return build_engine(
            self.ports,
            self.definitions,
            agents=self.agents,
            config=EngineConfig(
                watch_shards=self.settings.watch_shards,
                retention_seconds=self.settings.retention_seconds,
            ),
            pool_control=control,
            worker_id=self.worker_id,
            sweep_groups=self.settings.sweep_groups,
            looks=ThreadedLooks(self.settings.sweep_looks),
            pool_policies=self.settings.pool_policies,
            services=self.services,
        )

    def services(self, resource: str, parameters: Any, idempotency_key: str | None) -> Any:
        """A state machine's service Task, through boto3 (built on first use): the AWS
        service, as this function's role (the integration pool's: the integrations role)."""
        return self._services.call(resource, parameters, idempotency_key)

    @cached_property
    def _services(self) -> Any:
        from shepherd.adapters.services import AwsServices  # noqa: PLC0415

        return AwsServices(lambda name: _default_session().client(name))

    @property
    def catalog(self) -> Catalog:
        return self.engine.catalog

    @property
    def scheduler(self) -> Scheduler:
        return self.engine.scheduler

    @property
    def operations(self) -> Operations:
        return self.engine.operations

    @property
    def callbacks(self) -> Callbacks:
        return self.engine.callbacks

    @property
    def approvals(self) -> Approvals:
        return self.engine.approvals

    @property
    def signals(self) -> Signals:
        return self.engine.signals

    @property
    def uploads(self) -> Uploads:
        return self.engine.uploads

    @property
    def schedules(self) -> Schedules:
        return self.engine.schedules

    @property
    def supervisor(self) -> Supervisor:
        return self.engine.supervisor

    @property
    def pools(self) -> Pools:
        return self.engine.pools

    @property
    def agent_runtime(self) -> AgentRuntime:
        return self.engine.agent_runtime
