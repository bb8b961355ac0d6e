"""What a step costs while it runs: heartbeats and supervisor looks, counted over simulated hours.

The engine core on the in-memory ports under a ManualClock runs one workflow of a definition
whose every task has the given `HeartbeatSeconds` (and `TimeoutSeconds` long enough not to
matter); its first step runs for `hours` of simulated time, reporting progress every second
(the runtime turns that into a fenced heartbeat write at most every HeartbeatSeconds / 2)
while the supervisor sweeps on the deployed schedule. Counted: heartbeat writes, supervisor
looks (a consistent read of the workflow), and watch-entry moves (the workflow item and its
index entry: 1 WRU + 2 index WRU). Item sizes are the example's (every item under 1 KB, every
workflow under 4 KB: 1 WRU per write, 1 RRU per consistent read), as the moto runs measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from shepherd.clock import ManualClock
from shepherd.decisions import transitions as tx
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.testing import MemoryStore

from shepherd_bench.core import ROOT, build_core
from shepherd_bench.cost import ORDER
from shepherd_bench.prices import usd
from shepherd_bench.schedule import Schedule, deployed

BASE_MS = 1_767_225_600_000
MOVE_WRU = 3  # the workflow item (1) and its watch entry moved (delete + put: 2)


def with_heartbeat(seconds: int, timeout_seconds: int, *, dispatch_seconds: int) -> Definition:
    """`order_fulfilment` with every task's HeartbeatSeconds set to `seconds`."""
    path = Path(ROOT / "statemachines" / "order_fulfilment.yaml")
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    data["DispatchTimeoutSeconds"] = dispatch_seconds
    for step in data["Steps"]:
        for task in (step, step.get("Compensation")):
            if task is not None and "Agent" in task:  # a Wait or an Approval runs no task
                task["HeartbeatSeconds"] = seconds
                task["TimeoutSeconds"] = timeout_seconds
    return parse_definition(data, f"{path.name} (HeartbeatSeconds {seconds})")


def run_step(
    heartbeat_seconds: int, hours: float = 1.0, schedule: Schedule | None = None
) -> dict[str, Any]:
    schedule = schedule or deployed()
    run_ms = int(hours * 3_600_000)
    definition = with_heartbeat(
        heartbeat_seconds,
        timeout_seconds=int(hours * 3600) + 600,
        dispatch_seconds=max(10, min(60, heartbeat_seconds)),
    )
    clock = ManualClock(BASE_MS)
    counts = {"heartbeats": 0, "looks": 0, "moves": 0, "sweeps": 0}
    sweep_at = [schedule.next_sweep(clock.now_ms())]
    holder: list[Any] = []

    def sweep_until(until: int) -> None:
        while sweep_at[0] <= until:
            clock.set(sweep_at[0])
            report = holder[0].supervisor.sweep()
            counts["sweeps"] += 1
            counts["looks"] += report.looked_at
            counts["moves"] += report.moved
            sweep_at[0] = schedule.next_sweep(clock.now_ms())
        clock.set(until)

    root = definition.topological_order[0]

    def long_step(ctx: AgentContext) -> Any:
        end = clock.now_ms() + run_ms
        while clock.now_ms() < end:
            sweep_until(min(end, clock.now_ms() + 1000))
            ctx.report_progress({"left_ms": end - clock.now_ms()})
        return {"done": True}

    agents = AgentRegistry()
    agents.register(definition.by_name[root].agent, long_step)
    core = build_core(
        MemoryStore(), clock, definitions={definition.name: definition}, agents=agents
    )
    core.supervisor.sweep_interval_ms = schedule.interval_ms
    holder.append(core)
    original = tx.heartbeat

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts["heartbeats"] += 1
        return original(*args, **kwargs)

    workflow_id = core.scheduler.start(definition.name, ORDER).workflow_id
    (message,) = [m for pool in core.pools() for m in core.queue.receive(pool, 10)]
    tx.heartbeat = counted
    try:
        core.runtime.handle(message.task)
    finally:
        tx.heartbeat = original
    loaded = core.scheduler.load(workflow_id)
    assert loaded is not None
    state = loaded[0]
    assert state.steps[root].status.value == "SUCCEEDED", state.steps[root].status
    per_heartbeat_seconds = run_ms / (heartbeat_seconds * 1000)
    wru = counts["heartbeats"] + MOVE_WRU * counts["moves"]
    rru = counts["looks"]
    step_hours = run_ms / 3_600_000
    usd_per_hour = usd("dynamodb_wru", wru) + usd("dynamodb_rru", rru)
    return {
        "heartbeat_seconds": heartbeat_seconds,
        "watch_gap_seconds": definition.watch_gap_ms / 1000,
        "simulated_hours": step_hours,
        **counts,
        "heartbeat_wru_per_heartbeat_seconds": counts["heartbeats"] / per_heartbeat_seconds,
        "look_wru_per_heartbeat_seconds": MOVE_WRU * counts["moves"] / per_heartbeat_seconds,
        "wru_per_heartbeat_seconds": wru / per_heartbeat_seconds,
        "rru_per_heartbeat_seconds": rru / per_heartbeat_seconds,
        "usd_per_million_step_hours": usd_per_hour / step_hours * 1e6,
        "heartbeat_usd_per_million_step_hours": usd("dynamodb_wru", counts["heartbeats"])
        / step_hours
        * 1e6,
        "look_usd_per_million_step_hours": (
            usd("dynamodb_wru", MOVE_WRU * counts["moves"]) + usd("dynamodb_rru", rru)
        )
        / step_hours
        * 1e6,
    }


TEMPORAL_HEARTBEAT_SHARE = 0.8  # Temporal SDKs throttle heartbeats to 80 % of the timeout
TEMPORAL_VOLUME_ACTION_USD = 25.0 / 1e6  # the lowest volume tier


def others_per_million_step_hours(heartbeat_seconds: int) -> dict[str, float]:
    """What a running task costs elsewhere, per million task-hours, excluding its start.

    Step Functions Standard bills state transitions, none while a Task waits (its heartbeats,
    SendTaskHeartbeat, are API calls, not transitions). Temporal Cloud bills each heartbeat
    that reaches the server as an Action; its SDKs send one per 80 % of the heartbeat timeout.
    """
    beats = 3600 / (TEMPORAL_HEARTBEAT_SHARE * heartbeat_seconds)
    return {
        "step_functions_standard": 0.0,
        "temporal_cloud_developer": usd("temporal_cloud_action", beats) * 1e6,
        "temporal_cloud_volume": beats * TEMPORAL_VOLUME_ACTION_USD * 1e6,
    }


def run_running(hours: float = 1.0) -> list[dict[str, Any]]:
    """The examples' HeartbeatSeconds (3) and the HeartbeatSeconds of a typical long task (60)."""
    rows = [run_step(3, hours), run_step(60, hours)]
    for row in rows:
        row["others_usd_per_million_step_hours"] = others_per_million_step_hours(
            row["heartbeat_seconds"]
        )
    return rows
