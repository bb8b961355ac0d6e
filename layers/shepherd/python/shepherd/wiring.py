"""Builds the engine from settings. The only place boto3 clients are made, lazily."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from shepherd.clock import Clock, SystemClock
from shepherd.definitions import load_directory
from shepherd.engine.agent import AgentRegistry, AgentRuntime
from shepherd.engine.build import Engine, build_engine
from shepherd.engine.catalog import Catalog
from shepherd.engine.pools import PoolControl, Pools
from shepherd.engine.scheduler import EngineConfig, Ports, Scheduler
from shepherd.engine.supervisor import Supervisor
from shepherd.payloads import NoPayloadStore, Payloads, PayloadStore
from shepherd.ports import EventPublisher, NullEvents
from shepherd.settings import Settings
from shepherd.testing import RandomIds


def _client(service: str) -> Any:
    import boto3  # noqa: PLC0415 - imported when first needed, after moto may have started
    from botocore.config import Config  # noqa: PLC0415

    config = Config(
        retries={"mode": "standard", "max_attempts": 5}, connect_timeout=3, read_timeout=10
    )
    return boto3.client(service, config=config)


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
    def ports(self) -> Ports:
        from shepherd.adapters.dynamodb import DynamoStore  # noqa: PLC0415
        from shepherd.adapters.sqs import SqsQueue  # noqa: PLC0415

        return Ports(
            store=DynamoStore(_client("dynamodb"), self.settings.table),
            queue=SqsQueue(_client("sqs"), self.settings.queue_urls),
            clock=self.clock or SystemClock(),
            ids=RandomIds(),
            rng=random.Random(),
            payloads=self.payloads,
        )

    @cached_property
    def engine(self) -> Engine:
        control: PoolControl | None = None
        if self.settings.pool_mappings:
            from shepherd.adapters.lambda_esm import EventSourceMappingControl  # noqa: PLC0415

            control = EventSourceMappingControl(_client("lambda"), self.settings.pool_mappings)
        return build_engine(
            self.ports,
            load_directory(self.settings.definitions_dir),
            agents=self.agents,
            config=EngineConfig(
                watch_shards=self.settings.watch_shards,
                retention_seconds=self.settings.retention_seconds,
            ),
            pool_control=control,
            worker_id=self.worker_id,
        )

    @property
    def catalog(self) -> Catalog:
        return self.engine.catalog

    @property
    def scheduler(self) -> Scheduler:
        return self.engine.scheduler

    @property
    def supervisor(self) -> Supervisor:
        return self.engine.supervisor

    @property
    def pools(self) -> Pools:
        return self.engine.pools

    @property
    def agent_runtime(self) -> AgentRuntime:
        return self.engine.agent_runtime
