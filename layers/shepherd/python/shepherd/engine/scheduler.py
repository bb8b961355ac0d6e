"""The scheduler: starts workflows and advances them. Its executor is the only code that turns
planned actions into conditional writes, task messages and events."""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shepherd import jsonsafe, limits
from shepherd.clock import iso
from shepherd.conditions import Cond, Eq, Item, Missing
from shepherd.decisions import transitions as tx
from shepherd.decisions.planner import (
    Action,
    Cancel,
    Dispatch,
    EndAttempt,
    Finish,
    SendImplicit,
    StartCompensation,
    Unwind,
    plan,
)
from shepherd.decisions.retry import RetryIn
from shepherd.definitions import MAX_SQS_DELAY, Definition
from shepherd.engine.catalog import Catalog
from shepherd.engine.tokens import TaskToken, matches
from shepherd.errors import (
    ConditionFailed,
    DeliveryError,
    IdempotencyConflict,
    InputInvalid,
    InputTooLarge,
    InvalidTransition,
    OutputRejected,
    PayloadTooLarge,
    TaskTokenInvalid,
    TaskTokenStale,
    TransactionConflict,
    WorkflowNotFound,
)
from shepherd.model import (
    DomainEvent,
    Kind,
    OutgoingTask,
    StepRecord,
    StepStatus,
    TaskMessage,
    WorkflowRecord,
    WorkflowState,
    WorkflowStatus,
    dumps,
    loads,
    wf_pk,
)
from shepherd.ports import EventPublisher, IdSource, Store, TaskQueue

logger = logging.getLogger("shepherd.scheduler")

MAX_ROUNDS = 64


@dataclass(frozen=True)
class EngineConfig:
    watch_shards: int = 8
    retention_seconds: int = 30 * 24 * 3600


@dataclass
class Ports:
    store: Store
    queue: TaskQueue
    events: EventPublisher
    clock: Any  # shepherd.clock.Clock
    ids: IdSource
    rng: random.Random = field(default_factory=random.Random)


@dataclass(frozen=True)
class StartResult:
    workflow: WorkflowRecord
    created: bool

    @property
    def workflow_id(self) -> str:
        return self.workflow.workflow_id


@dataclass(frozen=True)
class Applied:
    """One planned action and whether its write won (False: someone else had acted)."""

    action: Action
    won: bool


def request_hash(wf_type: str, payload: Any) -> str:
    return hashlib.sha256(dumps({"type": wf_type, "input": payload}).encode()).hexdigest()


def derived_id(owner: str, idempotency_key: str) -> str:
    """Same owner and key, same workflow id: the start's conditional put is the dedup."""
    return hashlib.sha256(f"{owner}\0{idempotency_key}".encode()).hexdigest()[:32]


def watch_shard(workflow_id: str, shards: int) -> str:
    return f"W#{int(hashlib.sha256(workflow_id.encode()).hexdigest()[:8], 16) % shards}"


def idempotency_key(workflow_id: str, kind: Kind, name: str) -> str:
    """Stable across retries of the step; distinct for its compensation."""
    return f"{workflow_id}:{name}" + (":compensate" if kind == "compensation" else "")


class Scheduler:
    """Starts workflows and advances them; shared by the API, agents and the supervisor.

    Guarantees: a start is one transaction; every later change is one conditional write whose
    loss is learned from the returned current item; messages and events are sent only after
    the write they announce has won.
    """

    def __init__(self, ports: Ports, catalog: Catalog, config: EngineConfig | None = None) -> None:
        self.ports = ports
        self.catalog = catalog
        self.config = config or EngineConfig()

    # ------------------------------------------------------------------------------ start

    def start(
        self,
        wf_type: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        owner: str = "local",
    ) -> StartResult:
        """Validate, write the workflow and all its steps in one transaction, dispatch roots.

        The same owner and idempotency key with the same request returns the same workflow;
        with a different request it raises IdempotencyConflict.
        """
        definition = self.catalog.current(wf_type)
        input_json = self._validated_input(definition, payload)
        rhash = request_hash(wf_type, payload)
        workflow_id = (
            derived_id(owner, idempotency_key) if idempotency_key else self.ports.ids.new_id()
        )
        now = self.ports.clock.now_ms()
        self.catalog.ensure_snapshot(definition)
        workflow = WorkflowRecord(
            workflow_id=workflow_id,
            wf_type=wf_type,
            def_hash=definition.content_hash,
            status=WorkflowStatus.RUNNING,
            input=input_json,
            owner=owner,
            request_hash=rhash,
            created_at=now,
            updated_at=now,
            idempotency_key=idempotency_key,
            watch_shard=watch_shard(workflow_id, self.config.watch_shards),
            due_at=now + definition.watch_gap_ms,
        )
        steps = [
            self._initial_step(workflow_id, name, definition, now)
            for name in definition.topological_order
        ]
        try:
            self.ports.store.create([workflow.to_item(), *(s.to_item() for s in steps)])
        except TransactionConflict as conflict:
            if conflict.index != 0 or conflict.current is None:
                raise
            existing = WorkflowRecord.from_item(conflict.current)
            if existing.request_hash != rhash:
                raise IdempotencyConflict(existing.workflow_id) from None
            return StartResult(existing, created=False)
        tasks = [
            self._task(workflow_id, definition, "step", s.name, 1)
            for s in steps
            if s.status is StepStatus.QUEUED
        ]
        self.deliver(tasks, [self._workflow_event("WorkflowStarted", workflow)])
        return StartResult(workflow, created=True)

    @staticmethod
    def _validated_input(definition: Definition, payload: Any) -> str:
        try:
            input_json = jsonsafe.dumps(payload, what="input")
        except jsonsafe.JsonRejected as exc:
            raise InputInvalid(exc.message, "input") from None
        size = jsonsafe.size(input_json)
        if size > limits.MAX_INPUT_BYTES:
            raise InputTooLarge(size, limits.MAX_INPUT_BYTES)
        validator = definition.input_validator
        if validator is not None:
            import fastjsonschema  # noqa: PLC0415 - already imported by definitions

            try:
                validator(payload)
            except fastjsonschema.JsonSchemaValueException as exc:
                where = str(exc.name or "data").replace("data", "input", 1)
                raise InputInvalid(
                    f"{where}: {exc.message.replace('data', 'input', 1)}", where
                ) from None
        return input_json

    @staticmethod
    def _initial_step(workflow_id: str, name: str, definition: Definition, now: int) -> StepRecord:
        if definition.by_name[name].depends_on:
            return StepRecord(workflow_id, "step", name, StepStatus.PENDING)
        return StepRecord(
            workflow_id,
            "step",
            name,
            StepStatus.QUEUED,
            attempt=1,
            dispatched_at=now,
            available_at=now,
            dispatches=1,
        )

    # ----------------------------------------------------------------------------- reads

    def load(self, workflow_id: str) -> tuple[WorkflowState, Definition] | None:
        """One consistent query: the workflow, its steps and compensations, and its definition."""
        return self.parse(self.ports.store.load(wf_pk(workflow_id)))

    def parse(self, items: list[Item]) -> tuple[WorkflowState, Definition] | None:
        """A workflow's items (one partition) as its state, with the definition it runs on."""
        state = WorkflowState.from_items(items)
        if state is None:
            return None
        return state, self.catalog.version(state.workflow.wf_type, state.workflow.def_hash)

    # --------------------------------------------------------------------------- advance

    def advance(self, workflow_id: str, *, completed: str | None = None) -> list[Applied]:
        """Re-read a workflow and do what became possible (after a step outcome)."""
        loaded = self.load(workflow_id)
        if loaded is None:
            return []
        state, definition = loaded
        return self.run(state, definition, supervisor=False, completed=completed)

    def run(
        self,
        state: WorkflowState,
        definition: Definition,
        *,
        supervisor: bool,
        completed: str | None = None,
        now: int | None = None,
    ) -> list[Applied]:
        """Plan, apply, fold the results into `state`, and plan again until nothing is left."""
        applied: list[Applied] = []
        tasks: list[OutgoingTask] = []
        events: list[DomainEvent] = []
        tried: set[tuple[Any, ...]] = set()
        for _ in range(MAX_ROUNDS):
            at = now if now is not None else self.ports.clock.now_ms()
            actions = [
                a
                for a in plan(
                    state,
                    definition,
                    at,
                    supervisor=supervisor,
                    completed=completed,
                    rng=self.ports.rng,
                )
                if _key(a) not in tried
            ]
            if not actions:
                break
            for action in actions:
                tried.add(_key(action))
                won = self._apply(state, definition, action, at, tasks, events)
                applied.append(Applied(action, won))
        self.deliver(tasks, events)
        return applied

    def complete_attempt(
        self,
        state: WorkflowState,
        rec: StepRecord,
        output: str,
        *,
        token_hash: str | None = None,
    ) -> StepRecord | None:
        """Record an attempt's result (fenced), announce a compensation, advance the workflow.

        The one path for a result, whether the agent returned it or a callback brought it.
        None: the attempt was superseded and nothing was recorded.
        """
        now = self.ports.clock.now_ms()
        expires = now // 1000 + self.config.retention_seconds
        updated = self._write_step(
            state, tx.complete(rec, rec.attempt, now, output, expires, token_hash)
        )
        if updated is None:
            return None
        if rec.kind == "compensation":
            event = self._step_event("StepCompensated", state, rec, {"attempt": rec.attempt})
            self.deliver([], [event])
        self.advance(rec.workflow_id, completed=rec.name if rec.kind == "step" else None)
        return updated

    def end_attempt(self, state: WorkflowState, definition: Definition, action: EndAttempt) -> bool:
        """Record a failed attempt (retry or fail) as one fenced write, then deliver."""
        tasks: list[OutgoingTask] = []
        events: list[DomainEvent] = []
        won = self._apply(state, definition, action, self.ports.clock.now_ms(), tasks, events)
        self.deliver(tasks, events)
        return won

    # ------------------------------------------------------------------ operator actions

    def owned(self, workflow_id: str, owner: str | None) -> tuple[WorkflowState, Definition]:
        """The workflow if it exists and `owner` (when given) owns it; else WorkflowNotFound."""
        loaded = self.load(workflow_id)
        if loaded is None or (owner is not None and loaded[0].workflow.owner != owner):
            raise WorkflowNotFound(workflow_id)
        return loaded

    def cancel(self, workflow_id: str, *, owner: str | None = None) -> WorkflowRecord:
        """Stop dispatching, undo what succeeded, end CANCELLED. Idempotent while cancelling."""
        state, definition = self.owned(workflow_id, owner)
        status = state.workflow.status
        if status is WorkflowStatus.RUNNING:
            write = tx.request_cancel(state.workflow, self.ports.clock.now_ms())
            self._write_workflow(state, write)
            status = state.workflow.status
        if status is not WorkflowStatus.CANCELLING:
            raise InvalidTransition(
                f"workflow is {status.value}: only a RUNNING workflow can be cancelled"
            )
        self.run(state, definition, supervisor=False)
        return state.workflow

    def redrive(self, workflow_id: str, *, owner: str | None = None) -> WorkflowRecord:
        """Retry a FAILED workflow from its failed compensations, with fresh retry budgets.

        Succeeded steps and compensations are kept; the attempt numbers keep growing, so
        every attempt from before the redrive stays fenced out.
        """
        state, definition = self.owned(workflow_id, owner)
        wf = state.workflow
        if wf.status is not WorkflowStatus.FAILED:
            raise InvalidTransition(
                f"workflow is {wf.status.value}: only a FAILED one can be retried"
            )
        if wf.parked_from is not None:
            return self._unpark(state, owner)
        failed = [c for c in state.compensations.values() if c.status is StepStatus.FAILED]
        if not failed:
            raise InvalidTransition("workflow has no failed compensation to retry")
        now = self.ports.clock.now_ms()
        to = WorkflowStatus.CANCELLING if wf.cancel_requested_at else WorkflowStatus.COMPENSATING
        cause = (loads(wf.error) or {}).get("cause")
        writes = [
            tx.redrive_workflow(
                wf,
                to,
                now,
                watch_shard(wf.workflow_id, self.config.watch_shards),
                now + definition.watch_gap_ms,
                None if cause is None else dumps(cause),
            ),
            *(tx.redrive_step(c, now) for c in failed),
        ]
        try:
            self.ports.store.transact([(w.pk, w.sk, w.update, w.condition) for w in writes])
        except TransactionConflict:
            raise InvalidTransition(
                "workflow changed while retrying; read it and try again"
            ) from None
        tasks = [
            self._task(wf.workflow_id, definition, c.kind, c.name, c.attempt + 1) for c in failed
        ]
        self.deliver(tasks, [])
        state, _ = self.owned(workflow_id, owner)
        return state.workflow

    def _unpark(self, state: WorkflowState, owner: str | None) -> WorkflowRecord:
        """A workflow the supervisor parked goes back to the status it had, due at once."""
        wf = state.workflow
        cause = (loads(wf.error) or {}).get("cause")
        write = tx.unpark(
            wf,
            self.ports.clock.now_ms(),
            watch_shard(wf.workflow_id, self.config.watch_shards),
            None if cause is None else dumps(cause),
        )
        if not self._write_workflow(state, write):
            raise InvalidTransition("workflow changed while retrying; read it and try again")
        return state.workflow

    # ----------------------------------------------------------------- callback steps

    def callback(
        self,
        token: str,
        action: str,
        *,
        details: Any = None,
        output: Any = None,
        error: str | None = None,
        cause: str | None = None,
    ) -> StepRecord:
        """Heartbeat, succeed or fail the attempt a task token belongs to (fenced like an agent)."""
        parsed, state, definition, rec = self._token_target(token)
        now = self.ports.clock.now_ms()
        if action == "heartbeat":
            text = None if details is None else dumps(details)
            if text is not None and jsonsafe.size(text) > limits.MAX_DETAILS_BYTES:
                raise PayloadTooLarge("details", jsonsafe.size(text), limits.MAX_DETAILS_BYTES)
            write = tx.heartbeat(rec, parsed.attempt, now, text, parsed.hash)
            updated = self._write_step(state, write)
            if updated is None:
                raise TaskTokenStale("the attempt of this token is over")
            return updated
        if action == "success":
            text = dumps(output)
            problem = output_problem(state, rec, text)
            if problem is None:
                updated = self.complete_attempt(state, rec, text, token_hash=parsed.hash)
                if updated is None:
                    raise TaskTokenStale("the attempt of this token is over")
                return updated
            error, cause, permanent = "OutputTooLarge", problem, True
        else:
            error = limits.truncate(error or "TaskFailed", limits.MAX_ERROR_NAME)
            cause = limits.truncate(cause or error, limits.MAX_ERROR_CAUSE)
            permanent = False
        from shepherd.decisions.planner import failure_decision  # noqa: PLC0415

        spec = definition.spec(rec.kind, rec.name)
        ended = failure_decision(
            rec,
            spec,
            error_type=error,
            message=cause,
            permanent=permanent,
            unwinding=state.workflow.status.unwinding and rec.kind == "step",
            rng=self.ports.rng,
        )
        ended = replace(ended, token_hash=parsed.hash)
        if not self.end_attempt(state, definition, ended):
            raise TaskTokenStale("the attempt of this token is over")
        updated = state.record(rec.kind, rec.name)
        assert updated is not None
        if updated.status is StepStatus.FAILED:
            self.advance(rec.workflow_id)
        if action == "success":
            size = jsonsafe.size(dumps(output))
            raise OutputRejected(size, limits.MAX_OUTPUT_BYTES, f"{cause}; the attempt failed")
        return updated

    def _token_target(self, token: str) -> tuple[TaskToken, WorkflowState, Definition, StepRecord]:
        """The attempt a genuine token names, if it still waits; else why not.

        Only a token whose hash the step holds (for its current attempt) or held (in the
        history of an ended attempt) is genuine. Anything else, including a real attempt's
        coordinates with a wrong secret, is `TaskTokenInvalid` whatever state that attempt
        is in: a 409 would tell a forger that the workflow, the step and the attempt exist.
        """
        try:
            parsed = TaskToken.decode(token)
        except ValueError:
            raise TaskTokenInvalid("unknown task token") from None
        loaded = self.load(parsed.workflow_id)
        rec = loaded[0].record(parsed.kind, parsed.step) if loaded else None
        if loaded is None or rec is None:
            raise TaskTokenInvalid("unknown task token")
        if matches(rec.callback_token, parsed) and rec.attempt == parsed.attempt:
            return parsed, loaded[0], loaded[1], rec
        if any(h.get("a") == parsed.attempt and matches(h.get("th"), parsed) for h in rec.history):
            raise TaskTokenStale("the attempt of this token is over")
        raise TaskTokenInvalid("unknown task token")

    # ---------------------------------------------------------------------- the executor

    def _apply(
        self,
        state: WorkflowState,
        definition: Definition,
        action: Action,
        now: int,
        tasks: list[OutgoingTask],
        events: list[DomainEvent],
    ) -> bool:
        expires = now // 1000 + self.config.retention_seconds
        wf = state.workflow
        match action:
            case SendImplicit(name):
                tasks.append(self._task(wf.workflow_id, definition, "step", name, 1))
                return True
            case Dispatch(seen):
                rec = self._write_step(state, tx.dispatch(seen, now))
                if rec is None:
                    return False
                delay = max(0, (rec.available_at or now) - now) // 1000
                tasks.append(
                    self._task(rec.workflow_id, definition, rec.kind, rec.name, rec.attempt, delay)
                )
                return True
            case EndAttempt():
                return self._end_attempt(state, definition, action, now, expires, tasks, events)
            case Cancel(seen):
                return self._write_step(state, tx.cancel(seen, now, expires)) is not None
            case Unwind(_, error):
                return self._write_workflow(
                    state, tx.unwind(wf, WorkflowStatus.COMPENSATING, now, error)
                )
            case StartCompensation(name):
                item = tx.new_compensation(wf.workflow_id, name, now)
                try:
                    self.ports.store.put_new(item)
                except ConditionFailed as lost:
                    if lost.current is not None:
                        state.put(StepRecord.from_item(lost.current))
                    return False
                state.put(StepRecord.from_item(item))
                tasks.append(self._task(wf.workflow_id, definition, "compensation", name, 1))
                return True
            case Finish(status, error):
                write = tx.finish(wf, status, now, expires, error=error)
                if not self._write_workflow(state, write):
                    return False
                events.append(self._workflow_event(_FINISH_EVENTS[status], state.workflow))
                return True
        raise TypeError(f"unknown action {action!r}")  # pragma: no cover - exhaustive match

    def _end_attempt(
        self,
        state: WorkflowState,
        definition: Definition,
        action: EndAttempt,
        now: int,
        expires: int,
        tasks: list[OutgoingTask],
        events: list[DomainEvent],
    ) -> bool:
        seen = action.seen
        guard: Cond | None = None
        if action.outcome == "heartbeat_timeout":
            # A heartbeat that lands before this write proves the attempt alive: let it win.
            guard = (
                Missing("heartbeat_at")
                if seen.heartbeat_at is None
                else Eq("heartbeat_at", seen.heartbeat_at)
            )
        error = tx.error_json(action.error_type, action.message)
        write = tx.end_attempt(
            seen,
            attempt=seen.attempt,
            now=now,
            error=error,
            error_type=action.error_type,
            outcome=action.outcome,
            decision=action.decision,
            expires_at=expires,
            guard=guard,
            token_hash=action.token_hash,
            from_status=seen.status if seen.status.in_flight else StepStatus.RUNNING,
            details=action.details,
        )
        rec = self._write_step(state, write)
        if rec is None:
            return False
        detail = {"attempt": seen.attempt, "error": loads(error)}
        if action.outcome != "error":
            events.append(self._step_event("StepTimedOut", state, seen, detail))
        if isinstance(action.decision, RetryIn):
            events.append(
                self._step_event(
                    "StepRetried",
                    state,
                    seen,
                    {**detail, "next_attempt": rec.attempt, "delay_ms": action.decision.delay_ms},
                )
            )
            if rec.dispatched_at is not None:
                delay = min(MAX_SQS_DELAY, -(-action.decision.delay_ms // 1000))
                tasks.append(
                    self._task(rec.workflow_id, definition, rec.kind, rec.name, rec.attempt, delay)
                )
        else:
            events.append(
                self._step_event(
                    "StepFailed", state, seen, {**detail, "reason": action.decision.reason}
                )
            )
        return True

    def _write_step(self, state: WorkflowState, write: tx.Write) -> StepRecord | None:
        """Apply a step write; fold the winner's item into `state` either way."""
        try:
            item = self.ports.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed as lost:
            if lost.current is not None:
                state.put(StepRecord.from_item(lost.current))
            return None
        rec = StepRecord.from_item(item)
        state.put(rec)
        return rec

    def _write_workflow(self, state: WorkflowState, write: tx.Write) -> bool:
        try:
            item = self.ports.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed as lost:
            if lost.current is not None:
                state.workflow = WorkflowRecord.from_item(lost.current)
            return False
        state.workflow = WorkflowRecord.from_item(item)
        return True

    # -------------------------------------------------------------------------- delivery

    @staticmethod
    def _task(
        workflow_id: str,
        definition: Definition,
        kind: Kind,
        name: str,
        attempt: int,
        delay: int = 0,
    ) -> OutgoingTask:
        # `definition` is the workflow's own version, so its pools are the ones it started with.
        pool = definition.spec(kind, name).pool
        message = TaskMessage(workflow_id, name, attempt, kind)
        return OutgoingTask(pool, message, min(delay, MAX_SQS_DELAY))

    def deliver(self, tasks: Sequence[OutgoingTask], events: Sequence[DomainEvent]) -> None:
        """Best effort: a lost dispatch is found by the supervisor, a lost event is only lost."""
        if tasks:
            try:
                self.ports.queue.send(tasks)
            except DeliveryError:
                logger.warning(
                    "task messages not sent; the supervisor will re-dispatch", exc_info=True
                )
        if events:
            try:
                self.ports.events.publish(events)
            except DeliveryError:
                logger.warning("events not published", exc_info=True)

    def _workflow_event(self, detail_type: str, wf: WorkflowRecord) -> DomainEvent:
        detail: dict[str, Any] = {
            "workflow_id": wf.workflow_id,
            "workflow_type": wf.wf_type,
            "status": wf.status.value,
            "at": iso(wf.updated_at),
        }
        if wf.error:
            detail["error"] = loads(wf.error)
        return DomainEvent(detail_type, detail)

    @staticmethod
    def _step_event(
        detail_type: str, state: WorkflowState, rec: StepRecord, extra: dict[str, Any]
    ) -> DomainEvent:
        return DomainEvent(
            detail_type,
            {
                "workflow_id": state.workflow.workflow_id,
                "workflow_type": state.workflow.wf_type,
                "step": rec.name,
                "kind": rec.kind,
                **extra,
            },
        )


_FINISH_EVENTS = {
    WorkflowStatus.SUCCEEDED: "WorkflowSucceeded",
    WorkflowStatus.COMPENSATED: "WorkflowCompensated",
    WorkflowStatus.CANCELLED: "WorkflowCancelled",
    WorkflowStatus.FAILED: "WorkflowFailed",
}


def output_problem(state: WorkflowState, rec: StepRecord, output: str) -> str | None:
    """Why an attempt's output cannot be recorded (over a cap), or None.

    Two caps (shepherd.limits): one output, and every output of the workflow together, which
    the read view assembles into the workflow output. Concurrent branches each check against
    what they last read, so together they may pass the total by at most one output each.
    """
    size = jsonsafe.size(output)
    if size > limits.MAX_OUTPUT_BYTES:
        return f"output is {size} bytes; the limit is {limits.MAX_OUTPUT_BYTES}"
    others = [
        r
        for r in (*state.steps.values(), *state.compensations.values())
        if r.output is not None and (r.kind, r.name) != (rec.kind, rec.name)
    ]
    total = size + sum(jsonsafe.size(r.output) for r in others if r.output is not None)
    if total > limits.MAX_WORKFLOW_OUTPUT_BYTES:
        return (
            f"the workflow's outputs would total {total} bytes; "
            f"the limit is {limits.MAX_WORKFLOW_OUTPUT_BYTES}"
        )
    return None


def _key(action: Action) -> tuple[Any, ...]:
    """Identity of an action within one run, so a lost write is not retried blindly."""
    match action:
        case Dispatch(seen) | EndAttempt(seen) | Cancel(seen):
            return (type(action).__name__, seen.kind, seen.name, seen.attempt, seen.status)
        case SendImplicit(name) | StartCompensation(name):
            return (type(action).__name__, name)
        case Unwind(name):
            return ("Unwind", name)
        case Finish(status):
            return ("Finish", status)
    raise TypeError(action)  # pragma: no cover
