"""The design load: one caller's starts, the agents, the outside systems and their faults.

* The caller starts `order_at_load` workflows as a Poisson stream through the API (API
  Gateway, the API function, `Scheduler.start` with an idempotency key); a refused start (a
  throttled store, no concurrency) is tried again after a jittered second, four times, then
  given up (never accepted: not lost).
* Lambda agents (`check_order`, `reserve_stock`, `ship_order`, the release) work for a
  lognormal time; at small rates they fail (a retryable error), hang (until the function's
  timeout kills the invocation) or crash (the sandbox dies at once).
* `pack_order` hands its task token to an outside packer fleet and returns `Pending`: a
  packer heartbeats every 30 s (HeartbeatSeconds / 2, as the SDKs do) through the callback
  route and succeeds when its work is done, or dies silently (its attempt must be found by
  the supervisor's heartbeat deadline).
* `take_payment` hands its token to a payment partner who answers (a success callback) after
  a lognormal wait; a few are refused as "not yet" and asked again after the step's
  20-minute backoff (a timer).

Every random draw for one workflow comes from a generator seeded by the run's seed and the
workflow's key, so the same workflow behaves the same whichever subset it runs in.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shepherd.engine.agent import AgentContext, AgentRegistry, Pending
from shepherd.engine.build import Engine
from shepherd.engine.scheduler import derived_id
from shepherd.errors import (
    HeartbeatTooSoon,
    StoreUnavailable,
    TaskTokenInvalid,
    TaskTokenStale,
)
from shepherd.keys import watch_shard
from shepherd_bench.scale.kernel import Invocation, Kernel, LogNormal
from shepherd_bench.scale.lambdas import Function, crash

WF_TYPE = "order_at_load"
OWNER = "caller-1"  # the single caller
API_CPU_MS = 0.5  # request parsing, validation and the engine's own logic, on one full core
API_TRIES = 5
HANG_S = 10**7
LAMBDA_WORK = LogNormal(40.0, 0.6)
HANDOFF_WORK = LogNormal(20.0, 0.5)


def lognormal_with_mean(mean_s: float, sigma: float) -> LogNormal:
    return LogNormal(mean_s * 1000 / math.exp(sigma**2 / 2), sigma)


@dataclass(frozen=True)
class Load:
    """The design load (DESIGN.md invariant 10) and the shape of its work."""

    open_workflows: int = 1_000_000
    starts_per_second: float = 5000.0
    running_steps: int = 100_000  # packing attempts in flight (HeartbeatSeconds 60)
    timer_share: float = 0.01  # payments refused once: a 20-minute timer
    timer_s: float = 1200.0
    heartbeat_every_s: float = 30.0
    lambda_work: LogNormal = LAMBDA_WORK  # a Lambda agent's own work
    handoff_work: LogNormal = HANDOFF_WORK  # handing a token to an outside system
    pack_sigma: float = 1.0
    payment_sigma: float = 1.0
    fail_rate: float = 0.005  # a Lambda attempt raises a retryable error
    hang_rate: float = 0.0005  # a Lambda attempt hangs until its function times out
    crash_rate: float = 0.0005  # a Lambda sandbox dies during an attempt
    packer_death_rate: float = 0.005  # a packer dies silently during its attempt

    @property
    def pack(self) -> LogNormal:
        """Packing time: Little's law, running steps = starts a second x mean time."""
        return lognormal_with_mean(self.running_steps / self.starts_per_second, self.pack_sigma)

    @property
    def timers(self) -> float:
        return self.starts_per_second * self.timer_share * self.timer_s

    @property
    def payment(self) -> LogNormal:
        """The partner's answer time, so that the open workflows are the design load's:
        waiting for payment = open - packing - on a timer (the short steps are ~0.1 %)."""
        waiting = self.open_workflows - self.running_steps - self.timers
        return lognormal_with_mean(waiting / self.starts_per_second, self.payment_sigma)


def workflow_rng(seed: int, key: str) -> random.Random:
    return random.Random(f"{seed}:{key}")


def group_of(workflow_id: str, shards: int, groups: int) -> int:
    return int(watch_shard(workflow_id, shards)[2:]) % groups


@dataclass(frozen=True)
class AttemptKey:
    workflow_id: str
    kind: str
    step: str
    attempt: int


@dataclass
class Death:
    key: AttemptKey
    died_at: float
    how: str  # packer | hang | crash
    shard: str


@dataclass
class LoadStats:
    offered: int = 0
    accepted: dict[str, float] = field(default_factory=dict)  # workflow id -> accepted at
    refused: int = 0
    api_retries: int = 0
    api_throttled: int = 0  # no concurrency: 429
    api_requests: Counter[str] = field(default_factory=Counter)
    callback_errors: Counter[str] = field(default_factory=Counter)
    deaths: dict[AttemptKey, Death] = field(default_factory=dict)
    agent_outcomes: Counter[str] = field(default_factory=Counter)
    heartbeats: int = 0
    api_per_second: Counter[int] = field(default_factory=Counter)  # by simulated second


class World:
    """The caller, the agents' behaviour and the outside systems, over one engine."""

    def __init__(
        self,
        kernel: Kernel,
        engine: Engine,
        load: Load,
        *,
        seed: int,
        shards: int,
        groups: int,
        modelled: set[int],
        api: Function,
        callbacks: Function,
    ) -> None:
        self.kernel = kernel
        self.engine = engine
        self.load = load
        self.seed = seed
        self.shards = shards
        self.groups = groups
        self.modelled = modelled
        self.api = api
        self.callbacks = callbacks
        self.stats = LoadStats()
        self.packing: dict[str, tuple[float, float]] = {}  # token -> (claimed, ends)
        self._arrivals = 0
        self._rngs: dict[str, random.Random] = {}

    def rng(self, workflow_id: str) -> random.Random:
        found = self._rngs.get(workflow_id)
        if found is None:
            found = self._rngs[workflow_id] = workflow_rng(self.seed, workflow_id)
        return found

    def forget(self, workflow_id: str) -> None:
        self._rngs.pop(workflow_id, None)

    def in_subset(self, workflow_id: str) -> bool:
        return group_of(workflow_id, self.shards, self.groups) in self.modelled

    # ---------------------------------------------------------------------- the caller

    def start_arrivals(self, until_ms: float) -> None:
        """Starts at `starts_per_second` (Poisson), each kept if its workflow falls in a
        modelled group (`f` of them do)."""
        rate = self.load.starts_per_second / 1000
        arrivals = random.Random(f"{self.seed}:arrivals")
        when = [self.kernel.now]

        def arrive() -> None:
            """Start the arrival due now, then find the next one in the subset: the caller's
            stream is walked key by key (each key's time drawn), only the subset's scheduled."""
            key, workflow_id = pending[0]
            self._start(key, workflow_id, 0)
            schedule()

        def schedule() -> None:
            while True:
                key = f"order-{self._arrivals}"
                self._arrivals += 1
                when[0] += arrivals.expovariate(rate)
                if when[0] >= until_ms:
                    return
                self.stats.offered += 1
                workflow_id = derived_id(OWNER, key)
                if self.in_subset(workflow_id):
                    pending[0] = (key, workflow_id)
                    self.kernel.at(when[0], arrive)
                    return

        pending: list[tuple[str, str]] = [("", "")]
        schedule()

    def _start(self, key: str, workflow_id: str, tries: int) -> None:
        payload = {"order_id": key, "items": [{"sku": "sku-1", "qty": 1}], "amount": 42.5}

        def action() -> Any:
            return self.engine.scheduler.start(WF_TYPE, payload, idempotency_key=key, owner=OWNER)

        def answer(result: Any, error: BaseException | None) -> None:
            if error is None:
                self.stats.accepted.setdefault(workflow_id, self.kernel.now)
            elif tries + 1 < API_TRIES:
                self.stats.api_retries += 1
                wait = 1000 * (1 + self.kernel.rng.random())
                self.kernel.at(
                    self.kernel.now + wait, lambda: self._start(key, workflow_id, tries + 1)
                )
            else:
                self.stats.refused += 1

        self.request("start", self.api, action, answer)

    def request(
        self,
        route: str,
        function: Function,
        action: Callable[[], Any],
        answer: Callable[[Any, BaseException | None], None],
    ) -> None:
        """One API request: API Gateway, then the function (429 without concurrency)."""
        self.stats.api_requests[route] += 1
        self.stats.api_per_second[int(self.kernel.now // 1000)] += 1
        box: dict[str, Any] = {}
        kernel = self.kernel

        def run(inv: Invocation) -> None:
            kernel.sleep_until(inv.cpu(kernel, API_CPU_MS))
            try:
                box["value"] = action()
            except (StoreUnavailable, TaskTokenStale, TaskTokenInvalid, HeartbeatTooSoon) as exc:
                box["error"] = exc

        def done(inv: Invocation) -> None:
            error = box.get("error")
            if error is None and inv.dead:
                error = StoreUnavailable("the function died")
            answer(box.get("value"), error)

        if not function.invoke_now(run, done):
            self.stats.api_throttled += 1
            answer(None, StoreUnavailable("429: no concurrency"))

    # ---------------------------------------------------------------------- the agents

    def registry(self) -> AgentRegistry:
        registry = AgentRegistry()
        for name in ("check_order", "reserve_stock", "ship_order", "release_stock"):
            registry.register(name, self._lambda_agent)
        registry.register("hand_to_packers", self._hand_to_packers)
        registry.register("request_payment", self._request_payment)
        return registry

    def _key(self, ctx: AgentContext) -> AttemptKey:
        return AttemptKey(ctx.workflow_id, ctx.kind, ctx.step, ctx.attempt)

    def _died(self, key: AttemptKey, how: str) -> None:
        shard = watch_shard(key.workflow_id, self.shards)
        self.stats.deaths[key] = Death(key, self.kernel.now, how, shard)

    def _lambda_agent(self, ctx: AgentContext) -> Any:
        rng = self.rng(ctx.workflow_id)
        load, kernel = self.load, self.kernel
        roll = rng.random()
        kernel.sleep_until(kernel.now + load.lambda_work.sample(rng))
        if roll < load.crash_rate:
            self._died(self._key(ctx), "crash")
            crash(kernel)
        if roll < load.crash_rate + load.hang_rate:
            self._died(self._key(ctx), "hang")
            kernel.sleep(HANG_S)
        if roll < load.crash_rate + load.hang_rate + load.fail_rate:
            raise RuntimeError("a dependency answered 503")
        return {"done": ctx.step}

    def _hand_to_packers(self, ctx: AgentContext) -> Any:
        rng = self.rng(ctx.workflow_id)
        kernel = self.kernel
        kernel.sleep_until(kernel.now + self.load.handoff_work.sample(rng))
        token = ctx.task_token()
        duration = self.load.pack.sample(rng)
        self.packer(token, self._key(ctx), kernel.now, duration, rng)
        return Pending("packing")

    def _request_payment(self, ctx: AgentContext) -> Any:
        rng = self.rng(ctx.workflow_id)
        kernel = self.kernel
        kernel.sleep_until(kernel.now + self.load.handoff_work.sample(rng))
        if ctx.attempt == 1 and rng.random() < self.load.timer_share:
            raise NotYet("the partner asks again in 20 minutes")
        token = ctx.task_token()
        self.partner(token, kernel.now + self.load.payment.sample(rng))
        return Pending("payment requested")

    # ------------------------------------------------------------ the outside systems

    def packer(
        self,
        token: str,
        key: AttemptKey,
        claimed_at: float,
        duration_ms: float,
        rng: random.Random,
        elapsed_ms: float = 0.0,
    ) -> None:
        """A packer works `duration_ms` from `claimed_at` (`elapsed_ms` of it done already),
        heartbeating every 30 s, then succeeds; or dies silently on the way."""
        kernel = self.kernel
        end = claimed_at + duration_ms
        left = (duration_ms - elapsed_ms) / duration_ms if duration_ms else 0.0
        dies = rng.random() < self.load.packer_death_rate * left
        stop = kernel.now + rng.random() * (end - kernel.now) if dies else end
        self.packing[token] = (claimed_at, stop)
        every = self.load.heartbeat_every_s * 1000
        beat = claimed_at + every * (math.floor((kernel.now - claimed_at) / every) + 1)
        if beat < stop:
            kernel.at(beat, lambda: self._heartbeat(token, beat, stop))
        if dies:
            kernel.at(stop, lambda: self._packer_died(token, key))
        else:
            kernel.at(stop, lambda: self._callback(token, "success", {"packed": True}))

    def _packer_died(self, token: str, key: AttemptKey) -> None:
        self.packing.pop(token, None)
        self._died(key, "packer")

    def _heartbeat(self, token: str, at: float, stop: float) -> None:
        if token not in self.packing:
            return
        self.stats.heartbeats += 1
        self._callback(token, "heartbeat", None)
        nxt = at + self.load.heartbeat_every_s * 1000
        if nxt < stop:
            self.kernel.at(nxt, lambda: self._heartbeat(token, nxt, stop))

    def partner(self, token: str, answer_at: float) -> None:
        self.kernel.at(answer_at, lambda: self._callback(token, "success", {"paid": 42.5}))

    def _callback(self, token: str, action: str, output: Any, tries: int = 0) -> None:
        if action == "success":
            self.packing.pop(token, None)

        def call() -> Any:
            return self.engine.callbacks.callback(token, action, output=output, owner=OWNER)

        def answer(result: Any, error: BaseException | None) -> None:
            if error is None:
                return
            self.stats.callback_errors[type(error).__name__] += 1
            if isinstance(error, StoreUnavailable) and tries + 1 < API_TRIES:
                wait = 1000 * (1 + self.kernel.rng.random())
                self.kernel.at(
                    self.kernel.now + wait, lambda: self._callback(token, action, output, tries + 1)
                )
            elif isinstance(error, TaskTokenStale | TaskTokenInvalid):
                self.packing.pop(token, None)  # the attempt is over: the worker stops

        self.request(f"callback {action}", self.callbacks, call, answer)


class NotYet(Exception):
    """The payment partner is not ready: a retryable error (the step's 20-minute backoff)."""
