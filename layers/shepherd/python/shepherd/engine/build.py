"""The one factory: an engine from its ports, for every host.

Lambda (`shepherd.wiring`), the tests and users' unit tests (`shepherd.testing.MemoryEngine`),
the simulator and the benchmarks all build the engine here, so they cannot be wired
differently from one another.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shepherd.definitions import Definition
from shepherd.engine.agent import AgentRegistry, AgentRuntime
from shepherd.engine.catalog import Catalog
from shepherd.engine.pools import NoPoolControl, PoolControl, Pools
from shepherd.engine.scheduler import EngineConfig, Ports, Scheduler
from shepherd.engine.supervisor import Supervisor
from shepherd.topology import pools


@dataclass
class Engine:
    """Everything one host runs: the scheduler (starts, advances, operator actions,
    callbacks), the agent runtime, the supervisor and the pools, over one set of ports."""

    ports: Ports
    catalog: Catalog
    scheduler: Scheduler
    agent_runtime: AgentRuntime
    supervisor: Supervisor
    pools: Pools


def build_engine(
    ports: Ports,
    definitions: Mapping[str, Definition],
    *,
    agents: AgentRegistry | None = None,
    config: EngineConfig | None = None,
    pool_control: PoolControl | None = None,
    worker_id: str = "agent",
    background_heartbeats: bool = True,
) -> Engine:
    catalog = Catalog(definitions, ports.store)
    scheduler = Scheduler(ports, catalog, config or EngineConfig())
    runtime = AgentRuntime(
        scheduler,
        agents or AgentRegistry(),
        worker_id=worker_id,
        background_heartbeats=background_heartbeats,
    )
    pool_names = sorted(pools(definitions))
    engine_pools = Pools(
        scheduler.executor, ports.queue, pool_control or NoPoolControl(), ports.clock, pool_names
    )
    return Engine(ports, catalog, scheduler, runtime, Supervisor(scheduler), engine_pools)
