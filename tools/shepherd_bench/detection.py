"""Detection lag: from the moment a stalled step is due to the supervisor's action on it.

Simulated with the engine core, the in-memory ports and a ManualClock, one stall per run:
a workflow starts at a random moment of the minute, its first step is claimed after a random
delivery delay, heartbeats a random number of times and then goes silent (a dead worker), or
its first message is lost. The supervisor sweeps on its deployed schedule (EventBridge
invokes it every minute; it sweeps every `interval` seconds for `window` seconds), including
while the agent is still heartbeating, so the lazy watch entry moves as it would on AWS.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shepherd.clock import ManualClock
from shepherd.definitions import Definition, load_directory
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.testing import MemoryStore

from shepherd_bench.core import ROOT, Core, build_core
from shepherd_bench.cost import ENVIRONMENT, ORDER
from shepherd_bench.schedule import MINUTE_MS, PREVIOUS, Schedule, deployed

BASE_MS = 1_767_225_600_000  # a minute boundary (2026-01-01T00:00:00Z)


class StallingAgent:
    """Heartbeats `beats` times, HeartbeatSeconds/3 apart, letting sweeps run meanwhile, then dies."""

    def __init__(self, advance: Callable[[int], None], beats: int, interval_ms: int) -> None:
        self.advance, self.beats, self.interval_ms = advance, beats, interval_ms

    def __call__(self, ctx: AgentContext) -> Any:
        from shepherd_examples.agents.faults import SimulatedHang

        for n in range(self.beats):
            self.advance(self.interval_ms)
            ctx.report_progress({"beat": n})
        raise SimulatedHang(ctx.step)


@dataclass
class Stall:
    kind: str
    due_ms: int
    last_sign_ms: int  # last heartbeat (or dispatch, for a lost message)
    acted_ms: int
    engine_lag_ms: int | None

    @property
    def lag_ms(self) -> int:
        return self.acted_ms - self.due_ms

    @property
    def since_last_sign_ms(self) -> int:
        return self.acted_ms - self.last_sign_ms


def one_stall(
    definitions: Mapping[str, Definition],
    wf_type: str,
    payload: Any,
    kind: str,
    schedule: Schedule,
    rng: random.Random,
) -> Stall:
    definition = definitions[wf_type]
    root = definition.topological_order[0]
    spec = definition.spec("step", root)
    hb_ms = (spec.heartbeat_seconds or spec.timeout_seconds) * 1000
    clock = ManualClock(BASE_MS + rng.randrange(0, 10 * MINUTE_MS))
    holder: list[Core] = []
    wanted = "TimedOut" if kind == "heartbeat" else "Redispatch"
    progress = _Progress(schedule.next_sweep(clock.now_ms()))

    def sweep_due(until: int) -> None:
        """Run every sweep scheduled up to `until`, then stop the clock there."""
        core = holder[0]
        while progress.sweep_at <= until:
            clock.set(progress.sweep_at)
            report = core.supervisor.sweep()
            if progress.acted is None and report.actions.get(wanted):
                progress.acted = clock.now_ms()
                progress.engine_lag = report.lags_ms[0] if report.lags_ms else None
            progress.sweep_at = schedule.next_sweep(clock.now_ms())
        clock.set(until)

    def advance(ms: int) -> None:
        sweep_due(clock.now_ms() + ms)

    agents = AgentRegistry()
    beats = rng.randrange(0, 4) if kind == "heartbeat" else 0
    agents.register(spec.agent, StallingAgent(advance, beats, max(1000, hb_ms // 2)))
    core = build_core(MemoryStore(), clock, definitions=definitions, agents=agents)
    core.supervisor.sweep_interval_ms = schedule.interval_ms
    holder.append(core)
    workflow_id = core.scheduler.start(wf_type, payload).workflow_id
    received = [m for pool in core.pools() for m in core.queue.receive(pool, 10)]
    for m in received:
        core.queue.delete(m.receipt)  # other roots' messages are never delivered
    (message,) = [m for m in received if m.task.step == root]
    if kind == "heartbeat":
        from shepherd_examples.agents.faults import SimulatedHang

        advance(rng.randrange(10, 200))  # delivery: SQS -> Lambda
        with contextlib.suppress(SimulatedHang):
            core.runtime.handle(message.task)
        rec = core.scheduler.load(workflow_id)[0].steps[root]  # type: ignore[index]
        assert rec.heartbeat_at is not None
        assert rec.claimed_at is not None
        last = rec.heartbeat_at
        due = min(last + hb_ms, rec.claimed_at + spec.timeout_seconds * 1000)
    else:
        state = core.scheduler.load(workflow_id)[0]  # type: ignore[index]
        rec = state.steps[root]
        # A root is sent with the start and has no item until claimed (or sent again).
        last = rec.dispatched_at if rec.stored else state.workflow.created_at
        assert last is not None
        due = last + definition.dispatch_timeout_seconds * 1000
    for _ in range(1000):
        if progress.acted is not None:
            break
        sweep_due(progress.sweep_at)
    assert progress.acted is not None, "the supervisor never acted"
    return Stall(kind, due, last, progress.acted, progress.engine_lag)


@dataclass
class _Progress:
    sweep_at: int
    acted: int | None = None
    engine_lag: int | None = None


def percentiles(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)

    def pct(p: float) -> float:
        return float(ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))])

    return {
        "min": float(ordered[0]),
        "p50": pct(0.50),
        "p90": pct(0.90),
        "p99": pct(0.99),
        "max": float(ordered[-1]),
        "mean": sum(ordered) / len(ordered),
    }


def run_detection(stalls: int = 1000, seed: int = 11) -> list[dict[str, Any]]:
    definitions = load_directory(ROOT / "statemachines")
    cases = [
        ("order_fulfilment", ORDER, "heartbeat"),
        ("provision_environment", ENVIRONMENT, "heartbeat"),
        ("order_fulfilment", ORDER, "lost message"),
    ]
    rows: list[dict[str, Any]] = []
    for schedule in (deployed(), PREVIOUS):
        for wf_type, payload, kind in cases:
            rng = random.Random(f"{seed}-{wf_type}-{kind}")
            runs = [
                one_stall(definitions, wf_type, payload, kind, schedule, rng) for _ in range(stalls)
            ]
            definition = definitions[wf_type]
            spec = definition.spec("step", definition.topological_order[0])
            allowance_ms = (
                (spec.heartbeat_seconds or spec.timeout_seconds)
                if kind == "heartbeat"
                else definition.dispatch_timeout_seconds
            ) * 1000
            target = allowance_ms + 5_000
            rows.append(
                {
                    "schedule": schedule.describe(),
                    "schedule_name": schedule.name,
                    "workflow_type": wf_type,
                    "step": definition.topological_order[0],
                    "stall": kind,
                    "stalls": stalls,
                    "allowance_ms": allowance_ms,
                    "target_ms": target,
                    "due_to_acted_ms": percentiles([r.lag_ms for r in runs]),
                    "last_sign_to_acted_ms": percentiles([r.since_last_sign_ms for r in runs]),
                    "over_target": sum(1 for r in runs if r.since_last_sign_ms > target),
                    # The engine's DetectionLag metric measures from the deadline it acts on;
                    # when TimeoutSeconds has passed too it wins, so the metric reads lower.
                    "engine_metric_lower": (
                        sum(1 for r in runs if (r.engine_lag_ms or 0) < r.lag_ms)
                        if len(definition.roots) == 1
                        else None
                    ),
                }
            )
    return rows
