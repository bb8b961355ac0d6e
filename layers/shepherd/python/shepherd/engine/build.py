"""The one factory: an engine from its ports, for every host.

Lambda (`shepherd.wiring`), the tests and users' unit tests (`shepherd.testing.MemoryEngine`),
the simulator and the benchmarks all build the engine here, so they cannot be wired
differently from one another.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from shepherd.asl.integrations import Integrations, ServiceCall
from shepherd.definitions import Definition
from shepherd.engine.agent import AgentRegistry, AgentRuntime
from shepherd.engine.approvals import Approvals
from shepherd.engine.callbacks import Callbacks
from shepherd.engine.catalog import Catalog
from shepherd.engine.circuit import CircuitBreakers
from shepherd.engine.limiter import PoolLimiter
from shepherd.engine.operations import Operations
from shepherd.engine.pools import NoPoolControl, PoolControl, Pools
from shepherd.engine.scheduler import EngineConfig, Ports, Scheduler
from shepherd.engine.schedules import Schedules
from shepherd.engine.signals import Signals
from shepherd.engine.supervisor import LookRunner, Supervisor
from shepherd.engine.uploads import Uploads
from shepherd.pool_policy import PoolPolicy
from shepherd.topology import pools


@dataclass
class Engine:
    """Everything one host runs, over one set of ports: the scheduler (starts and advances),
    the operator's actions, callbacks, uploads, the agent runtime, the supervisor and the
    pools. Each part reaches the scheduler below it; none calls back up."""

    ports: Ports
    catalog: Catalog
    scheduler: Scheduler
    operations: Operations
    callbacks: Callbacks
    uploads: Uploads
    agent_runtime: AgentRuntime
    supervisor: Supervisor
    pools: Pools
    agents: AgentRegistry = field(default_factory=AgentRegistry)
    background_heartbeats: bool = True
    limiter: PoolLimiter | None = None
    breakers: CircuitBreakers | None = None

    @cached_property
    def approvals(self) -> Approvals:
        """Answers to Approval steps (built on the scheduler, like the operator's actions)."""
        return Approvals(self.scheduler)

    @cached_property
    def signals(self) -> Signals:
        """Signals into running workflows (built on the scheduler, like approvals)."""
        return Signals(self.scheduler)

    @cached_property
    def schedules(self) -> Schedules:
        """The definitions' schedules and their paused state (built on the scheduler)."""
        return Schedules(self.scheduler)

    def worker(self, worker_id: str) -> AgentRuntime:
        """Another agent runtime over this engine's scheduler and agents, as `worker_id`: a
        host that runs several workers in one process (the simulator)."""
        return AgentRuntime(
            self.scheduler,
            self.agents,
            worker_id=worker_id,
            background_heartbeats=self.background_heartbeats,
            limiter=self.limiter,
            breakers=self.breakers,
        )


def build_engine(
    ports: Ports,
    definitions: Mapping[str, Definition],
    *,
    agents: AgentRegistry | None = None,
    config: EngineConfig | None = None,
    pool_control: PoolControl | None = None,
    worker_id: str = "agent",
    background_heartbeats: bool = True,
    sweep_interval_ms: int = 0,
    sweep_groups: int = 1,
    looks: LookRunner | None = None,
    pool_policies: Mapping[str, PoolPolicy] | None = None,
    services: ServiceCall | None = None,
) -> Engine:
    """The engine over `ports`. `worker_id` names the agent runtime (a step's owner);
    `background_heartbeats` off, a host heartbeats by hand (the simulator, the benchmarks);
    `sweep_interval_ms` is how soon the supervisor's next sweep comes (0: unknown);
    `sweep_groups` how many groups its shards are dealt into; `looks` how a sweep runs its
    looks (one after another by default); `pool_policies` each pool's rate limit and circuit
    breaker (`shepherd.pool_policy`); `services` how a state machine's service Tasks reach
    AWS (`shepherd.adapters.services.AwsServices.call`; none: such a Task fails with
    States.Permissions)."""
    policies = dict(pool_policies or {})
    catalog = Catalog(definitions, ports.store)
    scheduler = Scheduler(ports, catalog, config or EngineConfig())
    if services is not None:
        scheduler.asl.integrations = Integrations(call=services)
    registry = agents or AgentRegistry()
    limiter = (
        PoolLimiter(scheduler.executor, ports.clock, ports.rng, policies) if policies else None
    )
    guarded = {p: x for p, x in policies.items() if x.circuit_breaker is not None}
    control = pool_control or NoPoolControl()
    breakers = (
        CircuitBreakers(scheduler.executor, ports.clock, ports.rng, guarded, control)
        if guarded
        else None
    )
    runtime = AgentRuntime(
        scheduler,
        registry,
        worker_id=worker_id,
        background_heartbeats=background_heartbeats,
        limiter=limiter,
        breakers=breakers,
    )
    pool_names = sorted(pools(definitions))
    engine_pools = Pools(
        scheduler.executor,
        ports.queue,
        control,
        ports.clock,
        pool_names,
        policies=policies,
        breakers=breakers,
    )
    supervisor = Supervisor(
        scheduler,
        sweep_interval_ms=sweep_interval_ms,
        groups=sweep_groups,
        looks=looks,
        breakers=breakers,
        limiter=limiter,
    )
    uploads = Uploads(scheduler)
    return Engine(
        ports,
        catalog,
        scheduler,
        Operations(scheduler),
        Callbacks(scheduler, uploads),
        uploads,
        runtime,
        supervisor,
        engine_pools,
        agents=registry,
        background_heartbeats=background_heartbeats,
        limiter=limiter,
        breakers=breakers,
    )
