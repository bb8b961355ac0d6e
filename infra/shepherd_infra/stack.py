"""ShepherdStack: composes one construct per concern. Pools, table keys, env var names,
timeouts and handler names all come from the `shepherd` core and the definitions."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Aws, CfnOutput, Stack
from constructs import Construct
from shepherd.definitions import load_directory
from shepherd.settings import Settings
from shepherd.topology import pools

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.agent_pool import AgentPool
from shepherd_infra.api import SchedulerApi
from shepherd_infra.event_relay import EventRelay
from shepherd_infra.events import EventBus
from shepherd_infra.monitoring import Monitoring
from shepherd_infra.payload_store import PayloadStore
from shepherd_infra.runtime import LambdaRuntime
from shepherd_infra.state_store import StateStore
from shepherd_infra.supervisor import Supervisor


class ShepherdStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        definitions_dir: Path = config.DEFINITIONS_DIR,
        build_dir: Path,
        event_bus_name: str | None = None,
        retain_data: bool = True,
        table_deletion_protection: bool = False,
        alarm_email: str | None = None,
        api_logging: bool = False,
        powertools_version: str = config.POWERTOOLS_VERSION,
        powertools_layer_arn: str | None = None,
        event_owners: dict[str, str] | None = None,
        payload_live_days: int = config.PAYLOAD_LIVE_DAYS,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.definitions = load_directory(definitions_dir)
        self.pool_specs = pools(self.definitions)

        self.store = StateStore(
            self,
            "StateStore",
            retain=retain_data,
            deletion_protection=table_deletion_protection,
        )
        self.events = EventBus(self, "Events", bus_name=event_bus_name)
        retention_days = Settings.model_fields["retention_days"].default
        self.payloads = PayloadStore(
            self,
            "Payloads",
            retention_days=retention_days,
            live_days=payload_live_days,
            retain=retain_data,
        )
        self.pools = {
            name: AgentPool(self, f"Pool-{name}", pool=spec)
            for name, spec in self.pool_specs.items()
        }
        settings = Settings(
            table=self.store.table.table_name,
            queue_urls={name: pool.queue.queue_url for name, pool in self.pools.items()},
            event_bus=self.events.bus.event_bus_name,
            definitions_dir=Path(config.RUNTIME_DEFINITIONS_DIR),
            event_owners=event_owners or {},
            retention_days=retention_days,
            payload_bucket=self.payloads.bucket.bucket_name,
        )
        self.runtime = LambdaRuntime(
            self,
            "Runtime",
            definitions=self.definitions,
            build_dir=build_dir,
            environment=settings.to_env(),
            powertools_version=powertools_version,
            powertools_layer_arn=powertools_layer_arn,
        )
        access = Access(
            self.store,
            [pool.queue for pool in self.pools.values()],
            self.events.bus,
            self.payloads,
        )
        for pool in self.pools.values():
            pool.add_function(self.runtime, access)
        self.api = SchedulerApi(
            self,
            "Api",
            runtime=self.runtime,
            access=access,
            pools=list(self.pools.values()),
            logging=api_logging,
        )
        self.events.add_start_rule(self.runtime, access)
        self.supervisor = Supervisor(self, "Supervisor", runtime=self.runtime, access=access)
        self.relay = EventRelay(
            self, "EventRelay", store=self.store, runtime=self.runtime, access=access
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            table=self.store.table,
            pools=list(self.pools.values()),
            rest_api=self.api.rest_api,
            relay=self.relay,
            alarm_email=alarm_email,
        )

        CfnOutput(self, "ApiUrl", value=self.api.rest_api.url, description="Scheduler API")
        CfnOutput(self, "EventBusName", value=self.events.bus.event_bus_name)
        CfnOutput(self, "TableName", value=self.store.table.table_name)
        CfnOutput(self, "PayloadBucketName", value=self.payloads.bucket.bucket_name)
        CfnOutput(
            self,
            "DashboardUrl",
            value=(
                f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home"
                f"?region={Aws.REGION}#dashboards:name="
                f"{self.monitoring.dashboard.dashboard_name}"
            ),
        )
