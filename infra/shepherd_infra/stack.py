"""The `Shepherd` construct: all of Shepherd in a user's own CDK app, one construct per concern.

Pools, table keys, env var names, timeouts and handler names all come from the `shepherd` core
and the definitions; the agents come from the user's code (`AgentCode`). It exposes what a
user composes with: `api_url`, `bus`, `table`, `pools` (grants, subscriptions, alarms).

    from shepherd_infra import AgentCode, Shepherd

    Shepherd(
        stack,
        "Shepherd",
        definitions_dir=Path("statemachines"),
        agents=AgentCode(path=Path("src"), modules=["my_app.agents"]),
    )
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Annotations, Stage, aws_dynamodb, aws_events, aws_lambda, aws_s3, aws_sqs
from constructs import Construct
from shepherd.asl.workflow import INTEGRATIONS_POOL
from shepherd.definitions import Definition, load_directory
from shepherd.pool_policy import PoolPolicy
from shepherd.settings import DEFAULT_SCHEDULE_OWNER, SCHEDULE_SOURCE, Settings
from shepherd.topology import PoolSpec, pools

from shepherd_infra import config, ledger, pool_settings, table_stages
from shepherd_infra.access import Access
from shepherd_infra.agent_check import check_pool, needed_agents
from shepherd_infra.agent_pool import AgentPool
from shepherd_infra.api import SchedulerApi
from shepherd_infra.api_logging import ApiThrottling
from shepherd_infra.code import AgentCode, stage_agent_code
from shepherd_infra.deployments import DEFAULT, Size
from shepherd_infra.event_relay import EventRelay
from shepherd_infra.events import EventBus
from shepherd_infra.integrations import IntegrationsRole, asl_workflow_types
from shepherd_infra.limits import DeployLimits
from shepherd_infra.monitoring import Monitoring
from shepherd_infra.naming import pool_names, stack_scoped_name
from shepherd_infra.payload_store import PayloadStore
from shepherd_infra.pool_settings import PoolSettings, ResolvedPool
from shepherd_infra.runtime import InlineRole, LambdaRuntime
from shepherd_infra.schedules import Schedules, schedule_count
from shepherd_infra.state_store import StateStore
from shepherd_infra.supervisor import Supervisor
from shepherd_infra.webhooks import WebhookConfig, Webhooks

BUILD_SUBDIR = "shepherd-build"
WATCH_SHARDS = Settings.model_fields["watch_shards"].default
SWEEP_LOOKS = Settings.model_fields["sweep_looks"].default


class Shepherd(Construct):
    """Scheduler, agent pools, supervisor, state store, event bus, event relay, API and
    monitoring for the definitions in `definitions_dir`.

    `agents` is the code of every pool's agents; `pool_agents` gives a pool its own code asset
    instead (a pool with heavy dependencies). A pool with neither is refused. `build_dir`
    (default: a folder in the cloud assembly) receives the staged code and definitions.
    `pool_settings` sets a pool's function: timeout, memory, environment, layers, VPC, reserved
    concurrency, architecture (`PoolSettings`, defaults in `shepherd_infra.pool_settings`);
    `pool_memory_mb` its memory alone (default 256 MB: raise it for agents that read or return
    large payloads); `api_memory_mb` the API and callbacks functions (`config.API_MEMORY_MB`).

    `dashboard` adds the CloudWatch dashboard ($3 a month past an account's three free ones);
    `api_detailed_metrics` API Gateway's per-method metrics (custom metrics under traffic);
    `api_throttling` the stage's throttling (`ApiThrottling`: 100/s, burst 200 by default).

    `schedule_owner` owns the workflows the definitions' `Schedules` start (an IAM principal
    ARN, who then lists and reads them through the API); by default the first of `operators`,
    who may pause and resume pools and schedules, so someone who can act on a scheduled
    workflow also sees it. With neither, `shepherd:schedules`, a name no caller has (a synth
    warning says so when a definition has schedules).

    The `*.asl.json`/`*.asl.yaml` state machines of `definitions_dir` make `integrations`: the
    role their Lambda and service Tasks are granted to, exactly as they name them
    (`shepherd_infra.integrations`), which the integration pool's function runs as (the pool
    `integrations`, when a state machine has a Task it runs; its code is Shepherd's alone).

    `table_stage` deploys the table's indexes as one stage of an upgrade in place from the
    previous release (`shepherd_infra.table_stages`, driven by `shepherd upgrade`; default:
    this release's indexes, what a new stack is created with).

    `pool_ledger` (a JSON file beside the definitions, committed) remembers the pools deployed:
    a pool no definition names any more is retired, not deleted, until `release_pools` names
    it (`shepherd_infra.ledger`). Without a ledger a removed pool leaves the stack at once
    (its queues are retained, with their tasks, while `retain_data`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        definitions_dir: Path,
        agents: AgentCode | None = None,
        pool_agents: Mapping[str, AgentCode] | None = None,
        build_dir: Path | None = None,
        event_bus_name: str | None = None,
        retain_data: bool = True,
        table_deletion_protection: bool = False,
        alarm_email: str | None = None,
        api_logging: bool = False,
        powertools_version: str = config.POWERTOOLS_VERSION,
        powertools_layer_arn: str | None = None,
        event_owners: dict[str, str] | None = None,
        schedule_owner: str | None = None,
        operators: Sequence[str] = (),
        size: Size = DEFAULT,
        watch_shards: int | None = None,
        sweep_groups: int | None = None,
        sweep_looks: int = SWEEP_LOOKS,
        webhooks: Sequence[WebhookConfig] = (),
        payload_live_days: int = config.PAYLOAD_LIVE_DAYS,
        pool_memory_mb: Mapping[str, int] | None = None,
        api_memory_mb: int = config.API_MEMORY_MB,
        pool_ledger: Path | None = None,
        release_pools: Sequence[str] = (),
        pool_settings: Mapping[str, PoolSettings] | None = None,
        dashboard: bool = False,
        api_detailed_metrics: bool = False,
        api_throttling: ApiThrottling | None = None,
        table_stage: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # The deployment's size names the shards, groups, concurrency, table throughput and API
        # throttle its load needs; a setting given on its own overrides the size's.
        self.size = size
        watch_shards, sweep_groups, api_throttling = _sized(
            size, watch_shards, sweep_groups, api_throttling
        )
        # This deployment's name in what people and alarms see: the `service` dimension of
        # every engine metric (the functions' POWERTOOLS_SERVICE_NAME) and the REST API's
        # name. The stack's name and the construct's path make it unique in an account and
        # region: two Shepherds never read each other's series.
        self.service = stack_scoped_name(self)
        if SCHEDULE_SOURCE in (event_owners or {}):
            raise ValueError(
                f"event_owners maps '{SCHEDULE_SOURCE}', the source of the definitions' "
                "schedules: name their owner with schedule_owner instead"
            )
        # The definitions, validated: a bad schedule expression fails the synth here, naming
        # the file, the schedule and the field.
        # The state machines (`*.asl.json`) are left out: running their Lambda tasks on a
        # deployed pool is not built yet (docs/architecture.md, ASL on the engine).
        loaded = load_directory(definitions_dir)
        self.definitions = {name: d for name, d in loaded.items() if d.state_machine is None}
        # The ASL definitions' Tasks, granted to the integrations role exactly (a Task whose
        # grant cannot be derived fails the synth here, naming the file and the state).
        # The pools the definitions name, and the retired ones the ledger still holds; and
        # Shepherd's integration pool when a state machine has a Task it runs (a service call,
        # another state machine, a Lambda function mapped to it), as the integrations role.
        self.integrations = IntegrationsRole(
            self,
            "Integrations",
            definitions_dir=definitions_dir,
            workflow_types=set(self.definitions) | asl_workflow_types(definitions_dir),
            pool=INTEGRATIONS_POOL in (named_pools := _named_pools(loaded)),
        )
        self.pool_plan = ledger.plan(pool_ledger, named_pools, release_pools)
        self.pool_specs = self.pool_plan.all
        self._warn_about_retired_pools()
        self.pool_functions = _pool_functions(
            self.pool_specs,
            _with_concurrency(self.pool_specs, dict(pool_settings or {}), size),
            dict(pool_memory_mb or {}),
            api_memory_mb,
        )
        if build_dir is None:
            stage = Stage.of(self)
            if stage is None:
                raise ValueError("a Shepherd construct belongs in a CDK App (no Stage above it)")
            build_dir = Path(stage.outdir) / BUILD_SUBDIR / self.node.addr
        pool_agents = dict(pool_agents or {})
        unknown = sorted(set(pool_agents) - set(self.pool_specs))
        if unknown:
            raise ValueError(f"pool_agents names pools no definition uses: {unknown}")
        retired = self.pool_plan.retired
        missing = sorted(
            p
            for p in self.pool_specs
            if p not in pool_agents and agents is None and p != INTEGRATIONS_POOL
        )
        if missing:
            raise ValueError(f"no agent code for pools {missing}: pass agents= or pool_agents=")

        self.store = StateStore(
            self,
            "StateStore",
            retain=retain_data,
            deletion_protection=table_deletion_protection,
            indexes=table_stages.indexes_at(table_stage),
            size=size,
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
        self.names = pool_names(self)
        self.pools = {
            name: AgentPool(
                self,
                f"Pool-{name}",
                pool=spec,
                names=self.names,
                function=self.pool_functions[name],
                retain=retain_data,
                retired=name in retired,
            )
            for name, spec in self.pool_specs.items()
        }
        settings = Settings(
            table=self.store.table.table_name,
            queue_url_prefix=self.names.queue_url_prefix,
            pool_function_prefix=self.names.function_prefix,
            retired_pools=tuple(retired),
            event_bus=self.events.bus.event_bus_name,
            definitions_dir=Path(config.RUNTIME_DEFINITIONS_DIR),
            event_owners=event_owners or {},
            schedule_owner=self._schedule_owner(schedule_owner, operators),
            operators=tuple(operators),
            watch_shards=watch_shards,
            sweep_groups=sweep_groups,
            sweep_looks=sweep_looks,
            retention_days=retention_days,
            payload_bucket=self.payloads.bucket.bucket_name,
            pool_policies={
                name: resolved.policy
                for name, resolved in self.pool_functions.items()
                if resolved.policy != PoolPolicy()
            },
        )
        self.runtime = LambdaRuntime(
            self,
            "Runtime",
            definitions=self.definitions,
            build_dir=build_dir,
            environment=settings.to_env(),
            service=self.service,
            powertools_version=powertools_version,
            powertools_layer_arn=powertools_layer_arn,
        )
        access = Access(self.store, self.names, self.events.bus, self.payloads)
        self._add_pool_functions(access, build_dir, agents, pool_agents)
        self.api = SchedulerApi(
            self,
            "Api",
            runtime=self.runtime,
            access=access,
            name=f"{self.service}-Api",
            logging=api_logging,
            detailed_metrics=api_detailed_metrics,
            memory_mb=api_memory_mb,
            throttling=api_throttling,
        )
        self.events.add_start_rule(self.runtime, access)
        self.schedules = (
            Schedules(self, "Schedules", definitions=self.definitions, target=self.events.function)
            if schedule_count(self.definitions)
            else None
        )
        self.supervisor = Supervisor(
            self, "Supervisor", runtime=self.runtime, access=access, groups=sweep_groups
        )
        self.supervisor.woken_by(self.api.api_function, self.events.function)
        self.relay = EventRelay(
            self, "EventRelay", store=self.store, runtime=self.runtime, access=access
        )
        relay_role = self.relay.function.role
        assert relay_role is not None
        self.events.enforce_ownership(event_owners or {}, relay_role)
        self.webhooks = Webhooks(self, "Webhooks", hooks=webhooks, bus=self.events.bus)
        self.limits = DeployLimits(
            self,
            "DeployLimits",
            environments=self.runtime.environments,
            pools=len(self.pools),
            schedules=schedule_count(self.definitions),
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            service=self.service,
            table=self.store.table,
            pools=list(self.pools.values()),
            rest_api=self.api.rest_api,
            relay=self.relay,
            supervisor=self.supervisor.function,
            webhooks=self.webhooks.hooks,
            alarm_email=alarm_email,
            dashboard=dashboard,
            schedule_dlq=self.schedules.dlq if self.schedules is not None else None,
            start_failures=self.events.start_failures,
        )
        if pool_ledger is not None:
            ledger.write(pool_ledger, self.pool_plan)

    def _schedule_owner(self, given: str | None, operators: Sequence[str]) -> str:
        """Who owns the workflows schedules start: the one named, else the first operator,
        else nobody a caller can be (and a warning, when there are schedules to own)."""
        if given is not None:
            return given
        if operators:
            return operators[0]
        if schedule_count(self.definitions):
            Annotations.of(self).add_warning_v2(
                "shepherd:schedule-owner",
                f"The definitions' schedules start workflows owned by {DEFAULT_SCHEDULE_OWNER}, "
                "a name no caller has: nobody lists or reads them through the API. Name an "
                "owner (schedule_owner, -c schedule_owner=ARN) or an operator (operators).",
            )
        return DEFAULT_SCHEDULE_OWNER

    def _warn_about_retired_pools(self) -> None:
        """Every synth says which pools are retired (and which were just released)."""
        for name in self.pool_plan.retired:
            Annotations.of(self).add_warning_v2(
                "shepherd:pool-retired",
                f"Pool '{name}' is retired: no definition names it, but workflows that started "
                "on an earlier definition version may still send it tasks, so its queue, DLQ "
                "and function stay deployed. Once no running workflow uses it, release it: "
                f"release_pools=['{name}'] (-c release_pools={name}).",
            )
        for name in self.pool_plan.released:
            Annotations.of(self).add_warning_v2(
                "shepherd:pool-released",
                f"Pool '{name}' is released: its function and mapping leave the stack; its "
                "queue and DLQ stay in the account with what they hold (retained) unless "
                "retain_data is false. Delete them by hand once empty.",
            )

    def _add_pool_functions(
        self,
        access: Access,
        build_dir: Path,
        agents: AgentCode | None,
        pool_agents: Mapping[str, AgentCode],
    ) -> None:
        """Each pool's function with its code: the pool's own `AgentCode`, or the shared one
        (staged once). The code a pool ships registers every agent its steps name: the synth
        fails naming the agent, the pool and the modules, not the step at run time."""
        needed = needed_agents(self.definitions)
        registered: dict[Path, set[str]] = {}  # a staged folder: the agents its modules register
        shared: tuple[aws_lambda.Code, Path] | None = None
        for name, pool in self.pools.items():
            if name == INTEGRATIONS_POOL:
                # Shepherd's own agent alone (no user code: a Lambda function mapped to it is
                # invoked as deployed), as the integrations role when the definitions grant any.
                role = self.integrations.role
                assert role is None or isinstance(role, InlineRole)
                pool.add_function(self.runtime, access, role=role)
                continue
            asset: aws_lambda.Code
            code = pool_agents.get(name)
            if code is not None:
                staged = stage_agent_code(build_dir, name, code)
                asset = aws_lambda.Code.from_asset(str(staged))
            else:
                assert agents is not None
                code = agents
                if shared is None:
                    staged = stage_agent_code(build_dir, "shared", agents)
                    shared = (aws_lambda.Code.from_asset(str(staged)), staged)
                asset, staged = shared
            registered[staged] = check_pool(
                name, needed.get(name, {}), staged, code, registered.get(staged)
            )
            pool.add_function(self.runtime, access, code=asset, agent_modules=code.modules)

    @property
    def api_url(self) -> str:
        """The scheduler REST API's URL (stage included); every route needs SigV4."""
        return str(self.api.rest_api.url)

    @property
    def bus(self) -> aws_events.IEventBus:
        """Where lifecycle events go and StartWorkflow events come from."""
        return self.events.bus

    @property
    def table(self) -> aws_dynamodb.ITable:
        """The state store: the truth of every workflow and step."""
        return self.store.table

    @property
    def relay_failures(self) -> aws_sqs.IQueue:
        """Stream records the event relay gave up on (`shepherd events replay` reads it)."""
        return self.relay.failures

    @property
    def payload_bucket(self) -> aws_s3.IBucket:
        """Where large payloads live (the claim check)."""
        return self.payloads.bucket


def _named_pools(loaded: Mapping[str, Definition]) -> dict[str, PoolSpec]:
    """The pools the native definitions name, and the integration pool when a state machine
    has a Task it runs (the state machines' own Lambda pools are not deployed yet)."""
    native = {name: d for name, d in loaded.items() if d.state_machine is None}
    machines = {name: d for name, d in loaded.items() if d.state_machine is not None}
    integration = {k: v for k, v in pools(machines).items() if k == INTEGRATIONS_POOL}
    return {**pools(native), **integration}


def _sized(
    size: Size,
    watch_shards: int | None,
    sweep_groups: int | None,
    api_throttling: ApiThrottling | None,
) -> tuple[int, int, ApiThrottling]:
    """The shards, groups and stage throttle: each as given, else the size's."""
    throttling = api_throttling or ApiThrottling(
        rate_limit=size.api_rate_limit,
        burst_limit=size.api_burst_limit,
        account_rate_limit=size.quotas.api_rate,
        account_burst_limit=size.quotas.api_burst,
    )
    return (
        size.watch_shards if watch_shards is None else watch_shards,
        size.sweep_groups if sweep_groups is None else sweep_groups,
        throttling,
    )


def _with_concurrency(
    specs: Mapping[str, PoolSpec], settings: Mapping[str, PoolSettings], size: Size
) -> dict[str, PoolSettings]:
    """Every pool's settings with the size's event source concurrency where the pool's own
    settings give none."""
    if size.pool_max_concurrency is None:
        return dict(settings)
    out = dict(settings)
    for name in specs:
        given = settings.get(name) or PoolSettings()
        if given.max_concurrency is None:
            out[name] = dataclasses.replace(given, max_concurrency=size.pool_max_concurrency)
    return out


def _pool_functions(
    specs: Mapping[str, PoolSpec],
    settings: Mapping[str, PoolSettings],
    pool_memory_mb: Mapping[str, int],
    api_memory_mb: int,
) -> dict[str, ResolvedPool]:
    """Each pool's function settings, checked at synth: known pools, values Lambda accepts."""
    for what, given in (("pool_settings", settings), ("pool_memory_mb", pool_memory_mb)):
        unknown = sorted(set(given) - set(specs))
        if unknown:
            raise ValueError(f"{what} names pools no definition uses: {unknown}")
    low, high = config.LAMBDA_MEMORY_RANGE
    mb = api_memory_mb
    if isinstance(mb, bool) or not isinstance(mb, int) or not low <= mb <= high:
        raise ValueError(f"memory of api must be a whole number of MB, {low}..{high}")
    return {
        name: pool_settings.resolve(
            name,
            settings.get(name),
            needed_timeout=spec.function_timeout_seconds,
            memory_mb=pool_memory_mb.get(name),
        )
        for name, spec in specs.items()
    }
