"""The supervisor at load: EventBridge's minute, the tick queue's fan-out, the sweeps.

As deployed (functions/shepherd_handlers/supervisor.py, infra/shepherd_infra/supervisor.py):
EventBridge Scheduler invokes the supervisor at the top of every minute; that run sends one
tick per group and per later sweep of the minute to the tick queue (delays of 5, 10, ...
55 s; the other groups at once) in batches of ten, and sweeps group 0; the tick queue's
event source mapping (its batch size and `MaximumConcurrency` as the CDK app deploys them for
the run's groups: one tick per invocation when there are several) invokes the function with
batches of ticks, and each invocation sweeps the groups its ticks name, once each, together,
under each group's lease, with the real `Supervisor.sweep_groups` and its looks overlapped on
a bounded pool of tasks. Every tick carries the moment it was planned for, and its sweep looks
ahead until just before the next one, as the handler's does.

The tick machinery runs at full size, every group's ticks included, because the groups share
the mapping's concurrency: a group outside the modelled subset is swept by a *stand-in* that
takes as long as a recent real sweep of a modelled group (at the same per-group load, that is
what its sweep would take) and touches nothing.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from shepherd.engine.supervisor import Supervisor, SweepReport, look_ahead_until
from shepherd_bench.scale.kernel import Invocation, Kernel
from shepherd_bench.scale.lambdas import Account, EventSource, Function, SimQueue, sqs_call

ROOT = Path(__file__).resolve().parents[3]
SAFETY_MARGIN_MS = 10_000  # the handler stops sweeping this long before its timeout
SQS_BATCH = 10
SCHEDULE_PERIOD_MS = 60_000  # EventBridge Scheduler's rate (SUPERVISOR_SCHEDULE)
LOOK_CPU_MS = 0.1  # engine logic per look on one full core (measured: 0.04-0.14 ms)


def _constants(path: Path) -> dict[str, float]:
    """Module-level numbers of a CDK source file, read as text (importing the CDK app starts
    its jsii runtime): `NAME = 70` and `NAME = Duration.seconds(70)` alike."""
    out: dict[str, float] = {}
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(value, ast.Call) and len(value.args) == 1:
            value = value.args[0]
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Constant)
            and isinstance(value.value, int | float)
            and not isinstance(value.value, bool)
        ):
            out[target.id] = float(value.value)
    return out


@dataclass(frozen=True)
class Deployed:
    """What the CDK app deploys for the supervisor and the agents."""

    interval_s: float
    window_s: float
    tick_batch: int
    tick_concurrency: int
    supervisor_timeout_s: float
    worker_memory_mb: int
    api_memory_mb: int

    @classmethod
    def read(cls) -> Deployed:
        config = _constants(ROOT / "infra" / "shepherd_infra" / "config.py")
        supervisor = _constants(ROOT / "infra" / "shepherd_infra" / "supervisor.py")
        return cls(
            interval_s=config["SWEEP_INTERVAL_SECONDS"],
            window_s=config["SWEEP_WINDOW_SECONDS"],
            tick_batch=int(supervisor["TICK_BATCH"]),
            tick_concurrency=int(supervisor["TICK_CONCURRENCY"]),
            supervisor_timeout_s=config["SUPERVISOR_TIMEOUT"],
            worker_memory_mb=int(config["WORKER_MEMORY_MB"]),
            api_memory_mb=int(config["API_MEMORY_MB"]),
        )

    def tick_batch_for(self, groups: int) -> int:
        """The tick mapping's batch size the CDK app deploys for `groups` sweep groups
        (infra/shepherd_infra/supervisor.py, `tick_batch`): one tick per invocation when there
        are several groups."""
        return self.tick_batch if groups == 1 else 1

    def tick_concurrency_for(self, groups: int) -> int:
        """The tick mapping's MaximumConcurrency the CDK app deploys for `groups` sweep groups
        (infra/shepherd_infra/supervisor.py): one invocation per group at a time, at least
        the event source's minimum, at most its maximum of 1,000."""
        return min(1000, max(self.tick_concurrency, groups))


def tick_delays(interval: float, window: float) -> list[int]:
    """As the handler: the SQS delays of a minute's sweeps after the first."""
    planned = 1 + int(window / interval + 1e-9)
    return [math.ceil(k * interval - 1e-9) for k in range(1, planned)]


def following(delays: list[int]) -> dict[int, int | None]:
    """As the handler: each sweep's group's next sweep (None: the next minute's run)."""
    return dict(zip([0, *delays], [*delays, None], strict=True))


def planned_ticks(groups: int, delays: list[int]) -> list[tuple[int, int]]:
    """As the handler: the other groups at once, then every group at each later delay."""
    return [(g, 0) for g in range(1, groups)] + [(g, d) for d in delays for g in range(groups)]


class GreenletLooks:
    """The sweep's look runner in the model: up to `workers` looks at a time, each a task of
    the invocation (on Lambda, `ThreadedLooks`: a look mostly waits for DynamoDB)."""

    def __init__(self, kernel: Kernel, workers: int) -> None:
        self.kernel = kernel
        self.workers = workers

    def run(self, looks: Sequence[Callable[[], None]]) -> None:
        kernel = self.kernel

        def timed(look: Callable[[], None]) -> Callable[[], None]:
            def body() -> None:
                inv = kernel.invocation()
                if inv is not None:
                    kernel.sleep_until(inv.cpu(kernel, LOOK_CPU_MS))
                look()

            return body

        kernel.join([timed(look) for look in looks])


@dataclass
class SweepLog:
    """Every sweep of a modelled group, and every invocation of the supervisor."""

    reports: list[SweepReport] = field(default_factory=list)
    stand_ins: int = 0
    invocations: list[tuple[float, str, int]] = field(default_factory=list)  # start, kind, groups
    recent_ms: list[float] = field(default_factory=list)
    cold_starts: int = 0


class SupervisorModel:
    """The minute's schedule, the tick queue and its mapping, the supervisor function."""

    def __init__(
        self,
        kernel: Kernel,
        account: Account,
        deployed: Deployed,
        *,
        groups: int,
        modelled: Sequence[int],
        make_supervisor: Callable[[], Supervisor],
        tick_concurrency: int | None = None,
        tick_batch: int | None = None,
        fraction: float = 1.0,
        look_ahead: bool = True,
    ) -> None:
        self.kernel = kernel
        self.deployed = deployed
        self.look_ahead = look_ahead  # SHEPHERD_SWEEP_LOOK_AHEAD (on as deployed)
        self.groups = groups
        self.modelled = set(modelled)
        self._make = make_supervisor
        self._free: list[Supervisor] = []
        self.log = SweepLog()
        self.ticks = SimQueue(
            kernel,
            "ticks",
            visibility_s=6 * deployed.supervisor_timeout_s,
            max_receives=1000,
            retention_s=300,
        )
        self.function = Function(
            kernel,
            account,
            "supervisor",
            memory_mb=deployed.worker_memory_mb,
            timeout_s=deployed.supervisor_timeout_s,
            handler=self._handle,
            weight=fraction,  # it runs at full size: each invocation is f of the subset's account
        )
        self.mapping = EventSource(
            kernel,
            self.ticks,
            self.function,
            batch_size=tick_batch or deployed.tick_batch_for(groups),
            max_concurrency=tick_concurrency or deployed.tick_concurrency_for(groups),
        )
        self.scheduled = 0

    def start(self, until_ms: float) -> None:
        """EventBridge Scheduler: a run at the top of every minute until `until_ms`."""
        minute = 60_000
        first = math.ceil(self.kernel.now / minute) * minute
        for at in range(int(first), int(until_ms), minute):
            self.kernel.at(at, partial(self._scheduled, float(at), float(at)))

    def _scheduled(self, fired: float, first_try: float) -> None:
        """An asynchronous invocation: retried while the account is out of concurrency,
        dropped after a minute (the function's maximum event age)."""
        if self.function.account.take(self.function.weight):
            self.scheduled += 1
            self.function.invoke("scheduled")
        elif self.kernel.now - first_try < 60_000:
            self.kernel.at(self.kernel.now + 1000, lambda: self._scheduled(fired, first_try))

    # ---------------------------------------------------------------------- the handler

    def _handle(self, inv: Invocation, event: Any) -> None:
        supervisor = self._free.pop() if self._free else self._cold()
        try:
            if event == "scheduled":
                self.log.invocations.append((inv.started_ms, "scheduled", 1))
                # It sends the minute's ticks while it sweeps group 0, as the handler does,
                # looking ahead until just before group 0's first tick.
                start = self.kernel.now
                then = following(self._delays())[0]
                nxt = start + (SCHEDULE_PERIOD_MS if then is None else then * 1000)
                self.kernel.join(
                    [
                        partial(self._send_ticks, start),
                        partial(self._sweep, supervisor, inv, {0: nxt}),
                    ]
                )
            else:
                groups: dict[int, float] = {}
                for message in event:
                    group = int(message.body["group"])
                    groups[group] = max(groups.get(group, 0.0), float(message.body["next"]))
                self.log.invocations.append((inv.started_ms, "ticks", len(groups)))
                self._sweep(supervisor, inv, groups)
            if event != "scheduled":
                sqs_call(self.kernel)  # the mapping deletes the batch
                self.ticks.stats.delete_requests += 1
                for message in event:
                    self.ticks.delete(message)
        finally:
            self._free.append(supervisor)

    def _delays(self) -> list[int]:
        return tick_delays(self.deployed.interval_s, self.deployed.window_s)

    def _send_ticks(self, start: float) -> None:
        """The minute's ticks, ten a request, each naming the moment it is due (`at`) and its
        group's next sweep (`next`), as the handler's."""
        planned = planned_ticks(self.groups, self._delays())
        after = following(self._delays())
        for first in range(0, len(planned), SQS_BATCH):
            sent_at = self.kernel.now
            sqs_call(self.kernel)
            self.ticks.stats.send_requests += 1
            for group, delay in planned[first : first + SQS_BATCH]:
                then = after.get(delay)
                nxt = start + SCHEDULE_PERIOD_MS if then is None else sent_at + then * 1000
                self.ticks.put({"group": group, "at": sent_at + delay * 1000, "next": nxt}, delay)

    def _cold(self) -> Supervisor:
        self.log.cold_starts += 1
        supervisor = self._make()
        supervisor.sweep_interval_ms = round(self.deployed.interval_s * 1000)
        return supervisor

    def _sweep(self, supervisor: Supervisor, inv: Invocation, groups: dict[int, float]) -> None:
        """The invocation's groups together (`Supervisor.sweep_groups`), looking ahead until
        just before the next sweep (the earliest of their ticks' `next`); a group outside the
        subset takes as long as a recent real sweep, alongside."""
        kernel = self.kernel
        interval_ms = round(self.deployed.interval_s * 1000)
        until = None
        if self.look_ahead:
            until = look_ahead_until(int(min(groups.values())), interval_ms)
        modelled = [g for g in groups if g in self.modelled]
        stand_ins = [g for g in groups if g not in self.modelled]
        bodies: list[Callable[[], None]] = [self._stand_in for _ in stand_ins]
        if modelled:
            bodies.append(partial(self._real, supervisor, inv, modelled, until))
        if len(bodies) == 1:
            bodies[0]()
        else:
            kernel.join(bodies)

    def _stand_in(self) -> None:
        recent = self.log.recent_ms
        self.log.stand_ins += 1
        if recent:
            self.kernel.sleep_until(self.kernel.now + self.kernel.rng.choice(recent))

    def _real(
        self, supervisor: Supervisor, inv: Invocation, groups: list[int], until: int | None
    ) -> None:
        kernel = self.kernel
        deadline = inv.started_ms + self.function.timeout_ms - SAFETY_MARGIN_MS
        started = kernel.now
        reports = supervisor.sweep_groups(
            groups, owner=inv.name, deadline_ms=int(deadline), until_ms=until
        )
        self.log.reports += reports
        self.log.recent_ms.append(kernel.now - started)
        if len(self.log.recent_ms) > 24:
            del self.log.recent_ms[0]
