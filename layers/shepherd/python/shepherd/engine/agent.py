"""The agent runtime: claim a step, run the user's function with heartbeats, record the result.

Agents decide nothing about what comes next: after recording, they hand over to the
scheduler's `advance`, which runs in the same process.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from shepherd import expressions, fanout, jsonsafe, limits
from shepherd.asl.engine import Claimed, Recorded, is_unit
from shepherd.asl.lambdas import Invocation
from shepherd.asl.machine import Event, TaskFailed
from shepherd.clock import to_datetime
from shepherd.conditions import Item
from shepherd.decisions import transitions as tx
from shepherd.decisions.fanout import item_idempotency_key
from shepherd.decisions.planner import failure_decision, forward_outcome
from shepherd.definitions import Definition, StepSpec, TaskSpec
from shepherd.engine import tagging
from shepherd.engine.circuit import CircuitBreakers
from shepherd.engine.limiter import RUN, PoolLimiter
from shepherd.engine.scheduler import Scheduler, idempotency_key, output_problem
from shepherd.engine.tokens import TaskToken
from shepherd.errors import (
    AgentNotFound,
    AttemptSuperseded,
    DetailsTooLarge,
    InputPathNotFound,
    NotEnoughTime,
    OutputInvalid,
    OutputTooLarge,
    PermanentError,
    StoreUnavailable,
)
from shepherd.keys import Kind
from shepherd.kinds import kind_of
from shepherd.model import (
    OutgoingTask,
    StepRecord,
    StepStatus,
    TaskMessage,
    WorkflowState,
    WorkflowStatus,
    loads,
)
from shepherd.topology import AGENT_OVERHEAD_SECONDS, LAMBDA_MAX_TIMEOUT

logger = logging.getLogger("shepherd.agent")

MIN_HEARTBEAT_INTERVAL_MS = 1000
# The final write of an attempt (its result, its failure, its wait), when the store throttles:
# retried after uniform(0, d) ms, d doubling from 25 ms up to 1 s, while the lease holds.
FINAL_WRITE_BACKOFF_MS = 25
MAX_FINAL_WRITE_BACKOFF_MS = 1000
_T = TypeVar("_T")
# What an attempt needs beyond its TimeoutSeconds to be recorded before its invocation ends.
CLAIM_MARGIN_MS = 2_000
HEARTBEATS_PER_TIMEOUT = 2  # a heartbeat every HeartbeatSeconds / 2: a whole interval of slack

AgentFunction = Callable[["AgentContext"], Any]


class Pending:
    """Return this from an agent function after handing `ctx.task_token()` to an external
    system: the step waits (WAITING) until a callback with that token records its result."""

    def __init__(self, note: str | None = None) -> None:
        self.note = note


class AgentRegistry:
    """Agent functions by name. A test swaps a step by registering a fake under its name.

        registry = AgentRegistry()

        @registry.agent("charge_payment")
        def charge_payment(ctx: AgentContext) -> dict[str, Any]:
            return {"charge_id": payments.charge(ctx.input, key=ctx.idempotency_key)}

    A definition's `Agent` field names the function; the runtime imports the modules named in
    `SHEPHERD_AGENT_MODULES` and takes their `registry`.
    """

    def __init__(self) -> None:
        self._functions: dict[str, AgentFunction] = {}

    def agent(self, name: str) -> Callable[[AgentFunction], AgentFunction]:
        """Decorator: register the function under `name` (a definition's `Agent`)."""

        def register(fn: AgentFunction) -> AgentFunction:
            self._functions[name] = fn
            return fn

        return register

    def register(self, name: str, fn: AgentFunction) -> None:
        """Register (or replace) the function under `name`."""
        self._functions[name] = fn

    def get(self, name: str) -> AgentFunction | None:
        """The function registered under `name`, if any."""
        return self._functions.get(name)

    def names(self) -> set[str]:
        """Every registered name."""
        return set(self._functions)


def _once(cache: dict[str, Any], name: str, fetch: Callable[[], Any]) -> Any:
    """`fetch()` the first time, the same value after. No lock (functools.cached_property
    takes one shared by every instance on Python 3.11, so a slow fetch would stall every
    other attempt's context in the process): two threads may both fetch, harmlessly."""
    if name not in cache:
        cache[name] = fetch()
    return cache[name]


class LazyValues(Mapping[str, Any]):
    """Values by name, each fetched on first use only (a dependency's output: its item read,
    a large one from the payload bucket, verified): an agent that never reads a dependency
    never pays for it."""

    def __init__(self, names: Iterable[str], fetch: Callable[[str], Any]):
        self._names = tuple(names)
        self._fetch = fetch
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._values:
            self._values[name] = self._fetch(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"LazyValues({sorted(self._names)})"


@dataclass(frozen=True)
class Forward:
    """What a compensation undoes: the forward step as it ended.

    `outcome` is `succeeded` (a recorded success: `output` is its result) or `ambiguous` (an
    attempt crashed, timed out, was fenced out or failed: it may or may not have acted).
    `idempotency_key` is the key every attempt of the forward step passed to the outside
    service: ask it whether that key did anything, and do nothing if it did not.
    `output` is fetched from the payload bucket on first use if it is large.
    """

    status: str
    outcome: str
    stored_output: str | None = field(repr=False)
    idempotency_key: str
    resolve: Callable[[str | None], Any] = field(repr=False, compare=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Every key the step's attempts may have passed: its one key, or a `Repeat` step's
    # iterations' (`<key>#1` ... `#n`, and the next one's if it did not succeed).
    idempotency_keys: tuple[str, ...] = ()

    @property
    def output(self) -> Any:
        return _once(self._cache, "output", lambda: self.resolve(self.stored_output))


@dataclass
class AgentContext:
    """What an agent function gets. Everything in it can be re-read from the table.

    `input`, `dependencies`, `previous_details` and a compensation's `step_output` (and
    `forward.output`) are plain values; a large one is fetched from the payload bucket and
    verified the first time it is read (`PayloadMissing` if it is gone or altered).
    """

    workflow_id: str
    workflow_type: str
    step: str
    kind: str
    attempt: int
    idempotency_key: str
    deadline_ms: int
    stored_input: str | None = field(default=None, repr=False)
    stored_details: str | None = field(default=None, repr=False)
    dependencies: Mapping[str, Any] = field(default_factory=dict)
    forward: Forward | None = None  # for a compensation: what the step it undoes did
    resolve: Callable[[str | None], Any] = field(default=loads, repr=False)
    _heartbeat: Heartbeat | None = field(default=None, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    # The step's `InputPath` (shepherd.fanout): where `input` comes from instead.
    _input_from: Callable[[], Any] | None = field(default=None, repr=False)
    # A map item's index, and its value (read from its page on first use).
    item_index: int | None = None
    _item_from: Callable[[], Any] | None = field(default=None, repr=False)
    # A `Repeat` step's iteration (1-based; None for a step that does not repeat), and the
    # previous iteration's output (`previous_output`: a cursor to go on from).
    iteration: int | None = None
    _stored_previous: str | None = field(default=None, repr=False)

    @property
    def previous_output(self) -> Any:
        """A `Repeat` step's previous iteration's output (None at its first iteration)."""
        return _once(self._cache, "previous_output", lambda: self.resolve(self._stored_previous))

    @property
    def item(self) -> Any:
        """A map item's value (None for a step that is not a map's)."""
        if self._item_from is None:
            return None
        return _once(self._cache, "item", self._item_from)

    @property
    def input(self) -> Any:
        fetch = self._input_from or (lambda: self.resolve(self.stored_input))
        return _once(self._cache, "input", fetch)

    @property
    def previous_details(self) -> Any:
        return _once(self._cache, "details", lambda: self.resolve(self.stored_details))

    @property
    def step_output(self) -> Any:
        """For a compensation: what the step it undoes returned, if known."""
        return None if self.forward is None else self.forward.output

    @property
    def deadline(self) -> datetime:
        """When this attempt times out (its lease); finish, or report progress, before then."""
        return to_datetime(self.deadline_ms)

    def report_progress(self, details: Any) -> None:
        """Leave details a later attempt can resume from; they ride on the next heartbeat.

        Raises `DetailsTooLarge` (a PermanentError) over `limits.MAX_DETAILS_BYTES`, and
        `JsonRejected` for a value that is not JSON, here in the function that reported them.
        """
        text = jsonsafe.dumps(details, what="progress details")
        if jsonsafe.size(text) > limits.MAX_DETAILS_BYTES:
            raise DetailsTooLarge(
                f"progress details are {jsonsafe.size(text)} bytes; "
                f"the limit is {limits.MAX_DETAILS_BYTES}"
            )
        if self._heartbeat is not None:
            self._heartbeat.report(self._heartbeat.keep_details(text))

    @property
    def cancelled(self) -> bool:
        """True once this attempt was fenced out (timed out by the supervisor): stop work."""
        return self._heartbeat is not None and self._heartbeat.fenced

    @property
    def cancel_requested(self) -> bool:
        """True once its workflow is cancelling, as this attempt's last heartbeat read it (or
        once it was fenced out): stop early if you can. The attempt's result still lands and
        is undone by the step's compensation; returning early only saves work."""
        hb = self._heartbeat
        return hb is not None and (hb.cancel_requested or hb.fenced)

    def tag(self, key: str, value: str) -> None:
        """Tag this workflow (key=value), so `GET /workflows?tag=key:value` lists it: an order
        id, a customer learned while working. Written at once, with the same caps as a start's
        tags (`TagInvalid`, a PermanentError, before anything is written: a key of at most 64
        characters of [A-Za-z0-9_./=+@-], a value of at most 256, at most 10 tags a workflow);
        a tag the workflow carries already writes nothing, so a retried attempt may tag again;
        a new value for a key replaces the old one. `AttemptSuperseded` once fenced out."""
        if self._heartbeat is None:
            raise RuntimeError("no attempt to tag for")
        self._heartbeat.tag(key, value)

    def stop_heartbeats(self) -> None:
        """Stop this attempt's background heartbeats: it stops looking alive and the supervisor
        times it out after HeartbeatSeconds (fault injection; an agent giving up liveness)."""
        if self._heartbeat is not None:
            self._heartbeat.stop()

    def task_token(self) -> str:
        """The task token of this attempt, for a callback step (see `Pending`).

        Unguessable and valid for this attempt only; the step stores just its hash.
        """
        if self._heartbeat is None:
            raise RuntimeError("no attempt to issue a task token for")
        return self._heartbeat.task_token()


class Heartbeat:
    """Heartbeats of one attempt: at most one write per `HeartbeatSeconds / 2`, fenced.

    Half the heartbeat timeout leaves a whole interval of slack for a late write, and costs 2
    write units per HeartbeatSeconds (the supervisor adds none while the step runs well).
    """

    def __init__(
        self, scheduler: Scheduler, rec: StepRecord, spec: TaskSpec, deadline_ms: int
    ) -> None:
        self._scheduler = scheduler
        self._rec = rec
        self._deadline_ms = deadline_ms
        hb = spec.heartbeat_seconds or spec.timeout_seconds
        self._hb_seconds = hb
        self.interval_ms = max(MIN_HEARTBEAT_INTERVAL_MS, hb * 1000 // HEARTBEATS_PER_TIMEOUT)
        self._last_ms = rec.claimed_at or 0
        self._parked_ms = self._last_ms  # the last refused heartbeat parked in the bucket
        self._details: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fenced = False
        self.cancel_requested = False  # its workflow is cancelling (a heartbeat read it)
        self.writes = 0
        self.token: TaskToken | None = None

    def lease_end_ms(self) -> int:
        """When this attempt stops looking alive to the supervisor: its heartbeat timeout from
        the last heartbeat written (or its claim), and never past TimeoutSeconds."""
        hb = self._hb_seconds * 1000
        return min(self._deadline_ms, self._last_ms + hb)

    def keep_details(self, text: str) -> str:
        """Progress details as the step item stores them (large ones in the payload bucket)."""
        return self._scheduler.keep_for(self._rec, "details", text)

    def take_details(self) -> str | None:
        """Details reported since the last heartbeat write; the attempt's final write keeps them."""
        with self._lock:
            details, self._details = self._details, None
            return details

    def report(self, details: str) -> None:
        """Keep the latest details; write them now if a heartbeat is due.

        A failed write (throttling, a timeout) never reaches the agent function: the details
        stay pending for the next heartbeat or for the attempt's final write.
        """
        with self._lock:
            self._details = details
        try:
            self.beat(force=False)
        except Exception:
            logger.warning("progress heartbeat not written; kept for the next one", exc_info=True)
            with self._lock:
                if self._details is None:
                    self._details = details

    def beat(self, *, force: bool = True) -> bool:
        """Write a heartbeat if due (or forced); False once fenced out."""
        clock = self._scheduler.ports.clock
        with self._lock:
            now = clock.now_ms()
            if self.fenced:
                return False
            if not force and now - self._last_ms < self.interval_ms:
                return True
            details, self._details = self._details, None
            write = tx.heartbeat(self._rec, self._rec.attempt, now, details)
            try:
                beaten = self._scheduler.executor.step(None, write)
            except StoreUnavailable:
                # Refused (a throttle): the bucket keeps that it was alive now, so a throttle
                # longer than the lease does not time it out (`Scheduler.take_parked`); once
                # an interval at most, however often the write is tried again.
                if now - self._parked_ms >= self.interval_ms:
                    self._parked_ms = now
                    self._scheduler.park_heartbeat(self._rec, now)
                raise
            if beaten is None:
                self.fenced = True
                return False
            if beaten.cancel_requested_at is not None:
                self.cancel_requested = True
            self._last_ms = now
            self.writes += 1
            return True

    def tag(self, key: Any, value: Any) -> bool:
        """Tag the workflow for this attempt (engine/tagging.py): its write is a heartbeat too."""
        with self._lock:
            if self.fenced:
                raise AttemptSuperseded("this attempt was superseded")
            try:
                written = tagging.add_tag(self._scheduler, self._rec, key, value)
            except AttemptSuperseded:
                self.fenced = True
                raise
            if written:
                self._last_ms = self._scheduler.ports.clock.now_ms()
                self.writes += 1
            return written

    def task_token(self) -> str:
        """Issue the attempt's task token once, recording its hash before it is handed out."""
        with self._lock:
            if self.token is None:
                rec = self._rec
                token = TaskToken.new(rec.workflow_id, rec.kind, rec.name, rec.attempt)
                write = tx.arm_callback(rec, rec.attempt, token.hash)
                if self._scheduler.executor.step(None, write) is None:
                    self.fenced = True
                    raise AttemptSuperseded("this attempt was superseded")
                self.token = token
            return self.token.encode()

    def start_background(self) -> None:
        """Beat every interval until stopped or the attempt's deadline has passed."""

        def loop() -> None:
            while not self._stop.wait(self.interval_ms / 1000):
                if self._scheduler.ports.clock.now_ms() >= self._deadline_ms:
                    return  # past TimeoutSeconds: a hung function stops looking alive
                try:
                    if not self.beat(force=False):
                        return
                except Exception:  # a throttled or timed-out write: try again next interval
                    logger.warning("heartbeat not written; retrying", exc_info=True)

        self._thread = threading.Thread(target=loop, name="shepherd-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    """The function returned and its result was recorded."""
    WAITING = "waiting"
    """The function returned Pending: a callback with the attempt's token will finish it."""
    RETRYING = "retrying"
    """The function raised a retryable error; the next attempt is scheduled."""
    FAILED = "failed"
    """The function raised and the step failed for good."""
    FENCED = "fenced"
    """The attempt was superseded while it ran; its result was rejected, never recorded."""
    DROPPED = "dropped"
    """Duplicate, stale or unknown message: acknowledged without running the function."""
    OPENED = "opened"
    """A map step's message: its map was opened and its first items sent (no agent ran)."""
    HELD = "held"
    """The pool held the task (no rate-limit token): sent back to its queue with a delay,
    nothing claimed, no attempt spent."""


@dataclass(frozen=True)
class HandleResult:
    outcome: Outcome
    reason: str = ""
    error_type: str | None = None
    # The attempt failed with an error that may pass (not PermanentError, not in the step's
    # NonRetryableErrors): what a pool's circuit breaker counts.
    retryable: bool = False


class AgentRuntime:
    """Runs task messages of one or more pools.

    Guarantees: the function runs only after this process won the claim of that exact
    attempt; every later write is fenced on (status RUNNING, attempt), so a superseded attempt
    records nothing; a duplicate or stale message is dropped without running anything.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        agents: AgentRegistry,
        *,
        worker_id: str = "agent",
        background_heartbeats: bool = True,
        limiter: PoolLimiter | None = None,
        breakers: CircuitBreakers | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.agents = agents
        self.worker_id = worker_id
        self.background_heartbeats = background_heartbeats
        self.limiter = limiter
        self.breakers = breakers

    def handle(
        self, message: TaskMessage, *, time_left_ms: Callable[[], int] | None = None
    ) -> HandleResult:
        """Claim the message's attempt and run it. `time_left_ms` (a Lambda's remaining
        time): a task is claimed only if its longest attempt fits in it, else NotEnoughTime
        and nothing is claimed (a long step is never killed between records of a batch).

        Reads the workflow item and the unit alone (and, for a compensation, the step it
        undoes): never the whole workflow (docs/architecture.md, bounded reads)."""
        if message.item is not None:
            return self._handle_item(message, time_left_ms)
        if is_unit(message.step):
            return self._handle_visit(message)
        units: list[tuple[Kind, str]] = [(message.kind, message.step)]
        if message.kind == "compensation":
            units.append(("step", message.step))
        loaded = self.scheduler.load_units(message.workflow_id, units)
        if loaded is None:
            return HandleResult(Outcome.DROPPED, "unknown workflow")
        state, definition = loaded
        reason = why_not_claimable(state, definition, message)
        if reason:
            return HandleResult(Outcome.DROPPED, reason)
        rec = state.record(message.kind, message.step)
        assert rec is not None  # checked by why_not_claimable
        spec = definition.spec(message.kind, message.step)
        if message.kind == "step":  # its kind says what its message does: run, or open a map
            step = definition.by_name[message.step]
            return kind_of(step).on_message(
                _Claims(self, state, definition, rec, spec, message, time_left_ms)
            )
        return self._claim_and_run(state, definition, rec, spec, message, time_left_ms)

    def _handle_visit(self, message: TaskMessage) -> HandleResult:
        """A state machine's Task visit (`shepherd.asl.engine`): claimed fenced, carried out
        by the ASL driver (the agent registered under its Lambda function's name, run here
        with a heartbeat; or, in the integration pool, a service call, another state machine
        or a deployed function), and the write that ends the unit moves the machine on (its
        next unit's message sent after it); a Task that waits rests until its token's
        callback."""
        asl = self.scheduler.asl
        claimed = asl.claim(message, self.worker_id)
        if isinstance(claimed, str):
            return HandleResult(Outcome.DROPPED, claimed)
        event = asl.run(claimed, self.agents.names(), lambda inv: self._run_visit(claimed, inv))
        recorded = asl.record(claimed, event)
        if recorded == Recorded.FENCED:
            return HandleResult(Outcome.FENCED, "attempt was superseded")
        if recorded == Recorded.WAITING:
            return HandleResult(Outcome.WAITING)
        if isinstance(event, TaskFailed):
            return HandleResult(Outcome.FAILED, event.cause or event.error, event.error)
        return HandleResult(Outcome.SUCCEEDED)

    def _run_visit(self, claimed: Claimed, invoked: Invocation) -> Event:
        rec, spec = claimed.rec, claimed.spec
        fn = self.agents.get(invoked.function)
        if fn is None:
            known = ", ".join(sorted(self.agents.names())) or "none"
            return TaskFailed(
                "Lambda.ResourceNotFoundException",
                f"Function not found: {invoked.function} (registered: {known})",
            )
        deadline = (rec.claimed_at or self.scheduler.ports.clock.now_ms()) + (
            spec.timeout_seconds * 1000
        )
        heartbeat = Heartbeat(self.scheduler, rec, spec, deadline)
        ctx = AgentContext(
            workflow_id=rec.workflow_id,
            workflow_type=claimed.workflow.wf_type,
            step=rec.name,
            kind="step",
            attempt=rec.attempt,
            idempotency_key=idempotency_key(rec.workflow_id, "step", rec.name),
            deadline_ms=deadline,
            stored_input=jsonsafe.dumps(invoked.payload),
            resolve=self.scheduler.value,
            _heartbeat=heartbeat,
        )
        heartbeat.token = claimed.token  # a .waitForTaskToken Task's, armed by its claim
        if self.background_heartbeats:
            heartbeat.start_background()
        try:
            result = fn(ctx)
            if isinstance(result, Pending):
                raise PermanentError(
                    "a state machine's Task cannot return Pending (use .waitForTaskToken)",
                    name="CallbackNotSupported",
                )
        except Exception as exc:
            return self.scheduler.asl.result(claimed, error=exc)
        finally:
            heartbeat.stop()
        return self.scheduler.asl.result(claimed, result)

    def _claim_and_run(
        self,
        state: WorkflowState,
        definition: Definition,
        rec: StepRecord,
        spec: TaskSpec,
        message: TaskMessage,
        time_left_ms: Callable[[], int] | None,
    ) -> HandleResult:
        """The admission, the claim and the run of one unit's attempt (a step's, a
        compensation's or a map item's)."""
        # A pool whose code does not register this agent: no redelivery can find it, so the
        # claimed attempt fails for good (AgentNotFound), logged, never left on the queue.
        fn = self.agents.get(spec.agent) or _not_found(spec.agent, self.agents.names())
        if time_left_ms is not None:
            # A step longer than any invocation can hold is a callback step (its function
            # hands its token out and returns; the pool's function timeout is Lambda's most):
            # its function part can take one invocation at most, so that is what must fit.
            longest = min(spec.timeout_seconds, LAMBDA_MAX_TIMEOUT - AGENT_OVERHEAD_SECONDS)
            needed = longest * 1000 + CLAIM_MARGIN_MS
            left = time_left_ms()
            if left < needed:
                raise NotEnoughTime(
                    f"{left} ms left in this invocation; an attempt of '{message.step}' may "
                    f"take {needed} ms (TimeoutSeconds and a margin): left unclaimed"
                )
        needed = spec.timeout_seconds * 1000 + CLAIM_MARGIN_MS
        held = self._held(message, spec.pool, time_left_ms, needed)
        if held is not None:
            return held
        clock = self.scheduler.ports.clock
        now = clock.now_ms()
        claimed, current = self.scheduler.executor.step_or_current(
            tx.claim(rec, message.attempt, now, self.worker_id)
        )
        if claimed is None:
            current = current or {}
            return HandleResult(
                Outcome.DROPPED,
                f"claim lost: step is {current.get('status')} at attempt {current.get('attempt')}",
            )
        state.put(claimed)
        result = self._run(state, definition, claimed, spec, fn)
        if self.breakers is not None and result.outcome is not Outcome.FENCED:
            self.breakers.record(spec.pool, failed=result.retryable)
        return result

    # ------------------------------------------------------------------ map steps (issue 24)

    def _open_map(
        self,
        state: WorkflowState,
        definition: Definition,
        rec: StepRecord,
        spec: TaskSpec,
        message: TaskMessage,
    ) -> HandleResult:
        """A map step's message opens its map (`Maps.open`): no agent runs, no token is taken
        (its items take theirs). Claimed first, as any attempt, so a process that dies while
        opening is timed out and its attempt retried; items that cannot be selected fail the
        step for good (MapItemsInvalid, MapTooLarge)."""
        now = self.scheduler.ports.clock.now_ms()
        claimed, current = self.scheduler.executor.step_or_current(
            tx.claim(rec, message.attempt, now, self.worker_id)
        )
        if claimed is None:
            current = current or {}
            return HandleResult(
                Outcome.DROPPED,
                f"claim lost: step is {current.get('status')} at attempt {current.get('attempt')}",
            )
        state.put(claimed)
        try:
            opened, tasks = self.scheduler.maps.open(state, definition, claimed)
        except Exception as exc:
            return self._failed(state, definition, claimed, spec, exc)
        self.scheduler.deliver(tasks)
        if opened is not None and opened.fanout is not None and opened.fanout.status != "RUNNING":
            self.scheduler.advance_after(opened, failed=True)  # an empty map ends at once
        total = opened.fanout.total if opened is not None and opened.fanout else 0
        return HandleResult(Outcome.OPENED, f"map of {total} items opened")

    def _handle_item(
        self, message: TaskMessage, time_left_ms: Callable[[], int] | None
    ) -> HandleResult:
        """A map item's (or an item compensation's) message: claim its unit and run the
        step's agent (its compensation's) with `ctx.item` and `ctx.item_index`. Reads the
        workflow item, the map's unit, the item's unit and its page: never the other items."""
        loaded = self.scheduler.load_item(message)
        if loaded is None:
            return HandleResult(Outcome.DROPPED, "unknown workflow")
        state, definition = loaded
        reason = why_not_claimable_item(state, definition, message)
        if reason:
            return HandleResult(Outcome.DROPPED, reason)
        position = message.position if message.position is not None else message.item
        assert position is not None
        unit = state.windows[(message.kind, message.step)][position]
        spec = definition.spec(message.kind, message.step)
        return self._claim_and_run(state, definition, unit, spec, message, time_left_ms)

    def _held(
        self,
        message: TaskMessage,
        pool: str,
        time_left_ms: Callable[[], int] | None,
        needed_ms: int,
    ) -> HandleResult | None:
        """A guarded pool's admission. The rate limiter: run now; wait (under a second) for the
        slot it gave this task, then run; or go back to the queue for the whole seconds before
        that slot, carrying it as a ticket. Then the circuit breaker: closed runs, open holds,
        half-open runs only with a probe. A held task is a new message (waiting never counts
        towards the queue's maxReceiveCount); nothing is claimed (docs/architecture.md, Pools
        that protect what they call)."""
        clock = self.scheduler.ports.clock
        admission = RUN if self.limiter is None else self.limiter.admit(pool, message.ticket)
        if admission.run and self.breakers is not None:
            # After the limiter: a half-open probe is taken only by a task that will run.
            hold = self.breakers.admit(pool)
            if hold:
                self.scheduler.ports.queue.send([OutgoingTask(pool, message, hold)])
                return HandleResult(Outcome.HELD, f"pool '{pool}' circuit: back in {hold} s")
        if admission.run:
            wait = admission.wait_ms(clock.now_ms())
            if not wait:
                return None
            # The wait must leave the attempt its time; else another invocation waits.
            if time_left_ms is None or time_left_ms() - wait >= needed_ms:
                clock.sleep(wait / 1000)
                return None
        back = replace(message, ticket=admission.ticket)
        self.scheduler.ports.queue.send([OutgoingTask(pool, back, admission.delay_seconds)])
        return HandleResult(
            Outcome.HELD, f"pool '{pool}' has no token now: back in {admission.delay_seconds} s"
        )

    def _run(
        self,
        state: WorkflowState,
        definition: Definition,
        rec: StepRecord,
        spec: TaskSpec,
        fn: AgentFunction,
    ) -> HandleResult:
        clock = self.scheduler.ports.clock
        deadline = (rec.claimed_at or clock.now_ms()) + spec.timeout_seconds * 1000
        heartbeat = Heartbeat(self.scheduler, rec, spec, deadline)
        variables = _once_of(lambda: self.scheduler.variables_for(state, definition, rec.name))
        ctx = self._context(state, definition, rec, deadline, heartbeat, variables)
        if self.background_heartbeats:
            heartbeat.start_background()
        # Heartbeats go on until the attempt's final write is recorded: a throttled write is
        # retried while the lease holds (`_while_leased`).
        try:
            assigned = None
            try:
                step = definition.by_name[rec.name]
                if step.arguments is not None and rec.kind == "step":
                    # Rendered now: a failed expression fails it for good, before it acts. A
                    # compensation renders what its step saw when it reads ctx.input.
                    ctx.input  # noqa: B018
                result = fn(ctx)
                shapes = step.output is not None or step.assign is not None
                if rec.kind == "step" and shapes and not isinstance(result, Pending):
                    wf_input = state.workflow.input
                    result, assigned = _shaped(step, ctx, wf_input, result, variables)
                if isinstance(result, Pending) and rec.index is not None:
                    raise PermanentError(
                        "a map item cannot wait for a callback (return its result instead)",
                        name="CallbackNotSupported",
                    )
                if isinstance(result, Pending):
                    return self._waiting(rec, heartbeat)
                # A large output goes to the payload bucket now: a failed put fails the
                # attempt like any error (retried by its policy), and nothing references the
                # object unless the fenced write below wins.
                output = self.scheduler.keep_for(
                    rec, "output", self._checked_output(state, rec, result)
                )
            except Exception as exc:
                # A token handed out before the function raised stays genuine: the write that
                # ends the attempt records its hash, so a late callback with it is stale
                # (409), not unknown (404) (found by the fault simulator).
                if heartbeat.token is not None:
                    rec = replace(rec, callback_token=heartbeat.token.hash)
                # Progress it reported but had not heartbeated yet: kept for the next attempt.
                details = heartbeat.take_details()
                return self._failed(state, definition, rec, spec, exc, details, heartbeat)
            return self._succeeded(state, rec, output, heartbeat, assigned)
        finally:
            heartbeat.stop()

    def _while_leased(
        self,
        heartbeat: Heartbeat,
        write: Callable[[], _T],
        park: Callable[[], None] | None = None,
    ) -> tuple[_T, bool]:
        """The attempt's final write, retried with jittered backoff while the store is
        throttled or unavailable and the attempt's lease holds (its heartbeats go on), so a
        result the function already produced is not lost to throttling. Past the lease it
        gives up (StoreUnavailable), parking what `park` keeps first (a success's result, for
        the supervisor to record: `Scheduler.take_parked`); without one the supervisor times
        the attempt out as for any crash. Returns the write's result, and whether an earlier
        try failed ambiguously (a write that timed out may have landed)."""
        clock = self.scheduler.ports.clock
        rng = self.scheduler.ports.rng
        delay = FINAL_WRITE_BACKOFF_MS
        ambiguous = False
        while True:
            try:
                return write(), ambiguous
            except StoreUnavailable:
                if clock.now_ms() + delay >= heartbeat.lease_end_ms():
                    if park is not None:
                        park()
                    raise
                ambiguous = True
                logger.warning("final write throttled; retrying while the lease holds")
                clock.sleep(rng.uniform(0, delay) / 1000)
                delay = min(delay * 2, MAX_FINAL_WRITE_BACKOFF_MS)
                if not self.background_heartbeats:
                    with contextlib.suppress(StoreUnavailable):
                        heartbeat.beat(force=False)

    def _checked_output(self, state: WorkflowState, rec: StepRecord, result: Any) -> str:
        """The output as stored, or the permanent error that fails the attempt instead."""
        try:
            output = jsonsafe.dumps(result, what="output")
        except jsonsafe.JsonRejected as exc:
            raise OutputInvalid(exc.message) from None
        if rec.index is not None:  # a map item: the map's output is checked when it ends
            size = jsonsafe.size(output)
            if size > limits.MAX_OUTPUT_BYTES:
                raise OutputTooLarge(
                    f"output is {size} bytes; the limit is {limits.MAX_OUTPUT_BYTES}"
                )
            return output
        problem = output_problem(self.scheduler.whole_if_large(state, output), rec, output)
        if problem is not None:
            raise OutputTooLarge(problem)
        return output

    def _waiting(self, rec: StepRecord, heartbeat: Heartbeat) -> HandleResult:
        if heartbeat.token is None:
            error = PermanentError(
                "the agent returned Pending without issuing ctx.task_token()",
                name="PendingWithoutToken",
            )
            loaded = self.scheduler.load(rec.workflow_id)
            assert loaded is not None
            state, definition = loaded
            spec = definition.spec(rec.kind, rec.name)
            return self._failed(state, definition, rec, spec, error)
        token_hash = heartbeat.token.hash
        details = heartbeat.take_details()

        def wait() -> tuple[StepRecord | None, Item | None]:
            now = self.scheduler.ports.clock.now_ms()
            write = tx.wait_for_callback(rec, rec.attempt, now, token_hash, details)
            return self.scheduler.executor.step_or_current(write)

        (waiting, current), _ = self._while_leased(heartbeat, wait)
        if waiting is None:
            current = current or {}
            if current.get("attempt") == rec.attempt and current.get("status") in (
                StepStatus.WAITING.value,
                StepStatus.SUCCEEDED.value,
            ):
                # WAITING: an earlier try landed (it timed out after it was applied).
                # SUCCEEDED: the callback arrived before the agent returned. FAILED at this
                # attempt is the supervisor (or a failure callback) having ended it.
                done = current.get("status") == StepStatus.SUCCEEDED.value
                if done:
                    return HandleResult(
                        Outcome.SUCCEEDED, "the callback arrived before the agent returned"
                    )
                return HandleResult(Outcome.WAITING)
            return HandleResult(Outcome.FENCED, "attempt was superseded")
        if waiting.cancel_requested_at is not None:
            # Its workflow was cancelled while the agent ran: a cancel never waits on a
            # callback, so the unwinding plan fences this wait now (not at its deadline).
            self.scheduler.advance_after(waiting, failed=True)
        return HandleResult(Outcome.WAITING)

    def _succeeded(
        self,
        state: WorkflowState,
        rec: StepRecord,
        output: str,
        heartbeat: Heartbeat,
        variables: str | None = None,
    ) -> HandleResult:
        returned_at = self.scheduler.ports.clock.now_ms()
        updated, ambiguous = self._while_leased(
            heartbeat,
            lambda: self.scheduler.record_result(state, rec, output, variables=variables),
            lambda: self.scheduler.park_result(rec, output, returned_at, variables),
        )
        current = state.unit(rec)
        if updated is None and ambiguous and _result_landed(current, rec):
            updated = current  # an earlier try landed (it timed out after it was applied)
        if updated is None:
            logger.warning(
                "result of a superseded attempt rejected",
                extra={
                    "step": rec.name,
                    "attempt": rec.attempt,
                    "now_attempt": current.attempt if current else None,
                },
            )
            return HandleResult(Outcome.FENCED, "attempt was superseded")
        self.scheduler.after_result(state, self.scheduler.definition_of(state), rec, updated)
        return HandleResult(Outcome.SUCCEEDED)

    def _failed(
        self,
        state: WorkflowState,
        definition: Definition,
        rec: StepRecord,
        spec: TaskSpec,
        exc: Exception,
        details: str | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> HandleResult:
        permanent = isinstance(exc, PermanentError)
        error_type = exc.name if isinstance(exc, PermanentError) else type(exc).__name__
        retryable = not permanent and error_type not in spec.retry.non_retryable_errors
        action = failure_decision(
            rec,
            spec,
            error_type=error_type,
            message=str(exc) or error_type,
            permanent=permanent,
            unwinding=state.workflow.status.unwinding and rec.kind == "step",
            rng=self.scheduler.ports.rng,
        )
        full_error = self.scheduler.keep_error(rec, error_type, exc)
        action = replace(action, details=details, full_error=full_error)

        def end() -> bool:
            return self.scheduler.end_attempt(state, definition, action)

        if heartbeat is None:
            won, ambiguous = end(), False
        else:
            won, ambiguous = self._while_leased(heartbeat, end)
        current = state.unit(rec)
        if not won and not (ambiguous and _ended_by_this(current, rec)):
            return HandleResult(Outcome.FENCED, "attempt was superseded", error_type)
        if current is not None and current.status is StepStatus.FAILED:
            if current.index is not None:
                self.scheduler.after_item(state, definition, current)
            else:
                self.scheduler.advance_after(rec, failed=True)
            return HandleResult(Outcome.FAILED, str(exc), error_type, retryable)
        return HandleResult(Outcome.RETRYING, str(exc), error_type, retryable)

    def _context(
        self,
        state: WorkflowState,
        definition: Definition,
        rec: StepRecord,
        deadline: int,
        heartbeat: Heartbeat,
        variables: Callable[[], Mapping[str, Any]] = dict,
    ) -> AgentContext:
        step = definition.by_name[rec.name]
        resolve = self.scheduler.value

        def dependency(name: str) -> Any:
            # Claims read the workflow item and this unit alone: a dependency's item is read
            # when the agent first asks for its output.
            known = state.steps.get(name)
            stored = (
                known.output
                if known is not None and known.stored
                else self.scheduler.step_output(rec.workflow_id, name)
            )
            return resolve(stored)

        deps = LazyValues(step.depends_on, dependency)
        forward = None
        forward_rec = state.steps[rec.name]
        if rec.index is not None:  # a map item's (or its compensation's) forward is the item's
            window = state.windows.get(("step", rec.name), {})
            forward_rec = window.get(rec.index) or StepRecord.unstored_item(
                rec.workflow_id, rec.name, rec.index, state.workflow.wf_type, 0, "step"
            )
        if rec.kind == "compensation":
            key = self._key_of(rec, "step")
            succeeded = forward_rec.status is StepStatus.SUCCEEDED
            forward = Forward(
                status=forward_rec.status.value,
                outcome=forward_outcome(forward_rec),
                # A Repeat step keeps its last iteration's output while it loops: only a
                # success's is the step's output.
                stored_output=forward_rec.output if succeeded else None,
                idempotency_key=key,
                resolve=resolve,
                idempotency_keys=_keys_that_may_have_acted(step, forward_rec, key),
            )
        # An operator's replacement input for this step (at a resume) replaces the workflow's.
        own_input = state.steps[rec.name].input if rec.kind == "step" else None
        # Else its InputPath selects it (a compensation sees what its step saw), on first use.
        input_from = None
        if own_input is None and step.input_path is not None:
            input_from = _input_path(step.input_path, state.workflow.input, deps, resolve)
        elif own_input is None and step.arguments is not None:
            seed = f"{rec.workflow_id}/{rec.name}/{rec.attempt}"
            input_from = _arguments(
                step.arguments, state.workflow.input, deps, resolve, seed, variables
            )
        return AgentContext(
            workflow_id=rec.workflow_id,
            workflow_type=state.workflow.wf_type,
            step=rec.name,
            kind=rec.kind,
            attempt=rec.attempt,
            idempotency_key=self._key_of(rec, rec.kind) + _iteration_suffix(step, rec),
            deadline_ms=deadline,
            stored_input=own_input if own_input is not None else state.workflow.input,
            stored_details=rec.details,
            dependencies=deps,
            forward=forward,
            resolve=resolve,
            _heartbeat=heartbeat,
            _input_from=input_from,
            item_index=rec.index,
            _item_from=self._item_from(state, rec),
            **_iteration(step, rec),
        )

    @staticmethod
    def _key_of(rec: StepRecord, kind: Kind) -> str:
        """The idempotency key of the unit (or of the step it undoes, `kind` "step"): a map
        item's is its own, stable across its retries (`fo.item_idempotency_key`)."""
        if rec.index is not None:
            return item_idempotency_key(rec.workflow_id, rec.name, rec.index, kind)
        return idempotency_key(rec.workflow_id, kind, rec.name)

    def _item_from(self, state: WorkflowState, rec: StepRecord) -> Callable[[], Any] | None:
        if rec.index is None:
            return None
        index, page = rec.index, state.pages.get((rec.name, rec.index))
        return lambda: self.scheduler.maps.item_value(page, index)


def _iteration(step: StepSpec, rec: StepRecord) -> dict[str, Any]:
    """A `Repeat` step's attempt: its iteration and the last one's output (kept on its item
    while the next one runs); nothing for any other unit (a compensation runs once)."""
    if step.repeat is None or rec.kind != "step":  # a map step (its items) never repeats
        return {}
    previous = rec.output if rec.iterations else None
    return {"iteration": rec.iterations + 1, "_stored_previous": previous}


def _keys_that_may_have_acted(step: StepSpec, rec: StepRecord, key: str) -> tuple[str, ...]:
    """The keys a compensation undoes: the step's key; a `Repeat` step's, each iteration's
    that ended, and the one after the last if the step did not succeed (it may have been
    claimed, and have acted, before the step failed or its workflow unwound)."""
    if step.repeat is None:
        return (key,)
    ran = rec.iterations + (0 if rec.status is StepStatus.SUCCEEDED else 1)
    return tuple(f"{key}#{i}" for i in range(1, ran + 1))


def _iteration_suffix(step: StepSpec, rec: StepRecord) -> str:
    """A `Repeat` step's iteration is a unit of its own: its idempotency key names it
    (`<step's key>#<iteration>`), the same for every attempt of that iteration."""
    if step.repeat is None or rec.kind != "step":  # a map step (its items) never repeats
        return ""
    return f"#{rec.iterations + 1}"


def _arguments(
    template: Any,
    workflow_input: str | None,
    deps: Mapping[str, Any],
    resolve: Callable[[str | None], Any],
    seed: str,
    variables: Callable[[], Mapping[str, Any]],
) -> Callable[[], Any]:
    """What `ctx.input` is under `Arguments` (shepherd.expressions): the template rendered
    on the workflow input, the dependencies' outputs and the variables the step sees, or the
    permanent States.QueryEvaluationError (an expression failed)."""

    def render() -> Any:
        try:
            return expressions.render(
                template,
                "Arguments",
                workflow_input=resolve(workflow_input),
                steps=deps,
                seed=seed,
                variables=variables(),
            )
        except expressions.ExpressionError as exc:
            raise PermanentError(str(exc), name=expressions.QUERY_EVALUATION_ERROR) from None

    return render


def _shaped(
    step: StepSpec,
    ctx: AgentContext,
    workflow_input: str | None,
    result: Any,
    variables: Callable[[], Mapping[str, Any]],
) -> tuple[Any, str | None]:
    """A step's `Assign` and `Output` (shepherd.expressions) applied to what its agent
    returned: the variables it sets (None: no Assign) and the output as shaped; or the
    permanent States.QueryEvaluationError."""
    seed = f"{ctx.workflow_id}/{ctx.step}/{ctx.attempt}/output"
    reads: dict[str, Any] = {
        "workflow_input": ctx.resolve(workflow_input),
        "steps": ctx.dependencies,
        "result": result,
        "seed": seed,
    }
    try:
        assigned = None
        if step.assign is not None:
            assigned = expressions.assign(step.assign, variables=variables(), **reads)
        if step.output is not None:
            result = expressions.render(step.output, "Output", variables=variables(), **reads)
    except expressions.ExpressionError as exc:
        raise PermanentError(str(exc), name=expressions.QUERY_EVALUATION_ERROR) from None
    return result, assigned


def _once_of(fetch: Callable[[], _T]) -> Callable[[], _T]:
    """`fetch`, called at most once (its value kept)."""
    kept: list[_T] = []

    def get() -> _T:
        if not kept:
            kept.append(fetch())
        return kept[0]

    return get


def _input_path(
    text: str,
    workflow_input: str | None,
    deps: Mapping[str, Any],
    resolve: Callable[[str | None], Any],
) -> Callable[[], Any]:
    """What `ctx.input` is under an `InputPath`: the value it selects in the workflow input or
    in a dependency's output (read when first asked for), or the permanent InputPathNotFound."""
    path = fanout.parse_path(text)  # validated at load

    def select() -> Any:
        value = resolve(workflow_input) if path.step is None else deps[path.step]
        try:
            return fanout.select(path, value)
        except fanout.PathError as exc:
            raise InputPathNotFound(f"InputPath {text}: {exc}") from None

    return select


def why_not_claimable_item(
    state: WorkflowState, definition: Definition, message: TaskMessage
) -> str | None:
    """A map item's read-only pre-check (its claim's condition decides): its workflow runs
    (unwinds, for an item's compensation), its map runs and holds it in its window, and its
    unit is at the message's attempt (or not written yet, for attempt 1)."""
    wf, name = state.workflow, message.step
    spec = definition.by_name.get(name)
    if spec is None or spec.map is None:
        return f"no map step '{name}'"
    if message.kind == "step" and wf.status is not WorkflowStatus.RUNNING:
        return f"workflow is {wf.status.value}"
    if message.kind == "compensation" and not wf.status.unwinding:
        return f"workflow is {wf.status.value}"
    map_rec = state.record(message.kind, name)
    m = None if map_rec is None else map_rec.fanout
    if map_rec is None or m is None or map_rec.status is not StepStatus.RUNNING:
        return f"map '{name}' is not running"
    if m.status != "RUNNING":  # a map compensation's (a map's own status is not read)
        return f"map '{name}' is {m.status}: its queued items are cancelled"
    unit = state.windows.get((message.kind, name), {}).get(
        message.position if message.position is not None else message.item or 0
    )
    if unit is None or unit.index != message.item:
        return f"item {message.item} is not in its map's window"
    if unit.status is StepStatus.QUEUED and unit.attempt == message.attempt:
        return None
    if unit.status is StepStatus.PENDING and message.attempt == 1:
        return None
    return (
        f"item {message.item} is {unit.status.value} at attempt {unit.attempt}, "
        f"message is for attempt {message.attempt}"
    )


def why_not_claimable(
    state: WorkflowState, definition: Definition, message: TaskMessage
) -> str | None:
    """A read-only pre-check that drops most duplicates without spending a write.

    The claim's condition is what really decides; this only avoids a write bound to lose.
    """
    wf = state.workflow
    rec = state.record(message.kind, message.step)
    if rec is None or message.step not in definition.by_name:
        return f"no {message.kind} '{message.step}'"
    if message.kind == "step" and wf.status.value != "RUNNING":
        return f"workflow is {wf.status.value}"
    if message.kind == "compensation" and not wf.status.unwinding:
        return f"workflow is {wf.status.value}"
    if rec.status is StepStatus.QUEUED and rec.attempt == message.attempt:
        return None
    if rec.status is StepStatus.PENDING and message.attempt == 1 and message.kind == "step":
        # Sent when its dependencies succeeded (with the start, for a root): an attempt-1
        # message exists for no other PENDING step (the fault simulator checks that no step
        # is ever claimed before every dependency succeeded).
        return None
    return (
        f"step is {rec.status.value} at attempt {rec.attempt}, "
        f"message is for attempt {message.attempt}"
    )


def _not_found(agent: str, registered: set[str]) -> AgentFunction:
    """What runs in place of an agent this worker does not have: it raises AgentNotFound (a
    PermanentError, so the step fails without retries) and logs it with the step."""

    def missing(ctx: AgentContext) -> Any:
        error = AgentNotFound(agent, registered)
        logger.error(str(error), extra={"agent": agent, "step": ctx.step, "kind": ctx.kind})
        raise error

    return missing


def _ended_as(current: StepRecord | None, rec: StepRecord, status: StepStatus) -> bool:
    return current is not None and current.attempt == rec.attempt and current.status is status


def _result_landed(current: StepRecord | None, rec: StepRecord) -> bool:
    """After an ambiguous result write: this attempt's result landed. The step SUCCEEDED at
    this attempt; or, a `Repeat` step's, it was accepted as an iteration (the step QUEUED for
    the next one, or FAILED at its loop limit, this attempt's `ok` last in its history)."""
    if _ended_as(current, rec, StepStatus.SUCCEEDED):
        return True
    if current is None or not current.iterations or not current.history:
        return False
    last = current.history[-1]
    return last.get("a") == rec.attempt and last.get("o") == "ok"


def _ended_by_this(current: StepRecord | None, rec: StepRecord) -> bool:
    """After an ambiguous failure write: this attempt's own end landed (the step FAILED at
    this attempt, or QUEUED for the next one with this attempt last in its history)."""
    if current is None:
        return False
    if current.status is StepStatus.FAILED and current.attempt == rec.attempt:
        return True
    last = current.history[-1] if current.history else {}
    return (
        current.status is StepStatus.QUEUED
        and current.attempt == rec.attempt + 1
        and last.get("a") == rec.attempt
        and last.get("o") == "error"
    )


@dataclass(frozen=True)
class _Claims:
    """What a step's message may do, for its kind to choose (`kinds.base.Claims`)."""

    runtime: AgentRuntime
    state: WorkflowState
    definition: Definition
    rec: StepRecord
    spec: TaskSpec
    message: TaskMessage
    time_left_ms: Callable[[], int] | None

    def claim_and_run(self) -> HandleResult:
        return self.runtime._claim_and_run(
            self.state, self.definition, self.rec, self.spec, self.message, self.time_left_ms
        )

    def open_map(self) -> HandleResult:
        return self.runtime._open_map(
            self.state, self.definition, self.rec, self.spec, self.message
        )
