"""The planner: given one workflow's state, its definition and the time, what must happen next.

Pure. Both the scheduler (after a step outcome, in the agent's process) and the supervisor
(when a workflow is due) call it; only the supervisor acts on time (timeouts, lost messages).
The executor applies the actions as conditional writes, folds the results back into the state
and plans again until nothing is left.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from shepherd.decisions import retry
from shepherd.definitions import Definition, StepSpec, TaskSpec
from shepherd.model import (
    Kind,
    StepRecord,
    StepStatus,
    WorkflowState,
    WorkflowStatus,
    dumps,
    loads,
)

HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
TIMEOUT = "States.Timeout"


# ---------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class SendImplicit:
    """Send attempt 1 of a single-dependency step whose dependency this agent just completed.

    No write: only that one completion can make the step ready, so it is sent exactly once.
    """

    name: str


@dataclass(frozen=True)
class Dispatch:
    """Conditional write that marks `seen` dispatched, then send its message.

    Used for join steps (exactly once among racing completions) and by the supervisor to
    re-send work whose message was lost (`lost`) or whose long backoff has ended.
    """

    seen: StepRecord
    lost: bool
    overdue_ms: int = 0


@dataclass(frozen=True)
class EndAttempt:
    """Attempt `seen.attempt` ended with an error or timeout: retry it or fail the step."""

    seen: StepRecord
    error_type: str
    message: str
    decision: retry.RetryDecision
    outcome: str  # "error" | "timeout" | "heartbeat_timeout"
    overdue_ms: int = 0
    token_hash: str | None = None  # set when a callback reports the failure
    details: str | None = None  # progress the attempt reported but did not heartbeat yet


@dataclass(frozen=True)
class Cancel:
    """A step never claimed before the workflow began to unwind: it had no effect."""

    seen: StepRecord


@dataclass(frozen=True)
class Unwind:
    """RUNNING -> COMPENSATING because a step failed for good."""

    failed_step: str
    error: str


@dataclass(frozen=True)
class StartCompensation:
    name: str


@dataclass(frozen=True)
class Finish:
    status: WorkflowStatus
    error: str | None = None


Action = SendImplicit | Dispatch | EndAttempt | Cancel | Unwind | StartCompensation | Finish


# ----------------------------------------------------------------------------- the planner


def plan(
    state: WorkflowState,
    definition: Definition,
    now: int,
    *,
    supervisor: bool,
    completed: str | None = None,
    rng: random.Random,
) -> list[Action]:
    """The next actions for one workflow.

    `completed` names the step the calling agent just completed (it owns the implicit dispatch
    of that step's single-dependency successors). `supervisor` enables time-based actions.
    """
    status = state.workflow.status
    if status.terminal:
        return []
    if status is WorkflowStatus.RUNNING:
        return _plan_running(state, definition, now, supervisor, completed, rng)
    return _plan_unwinding(state, definition, now, supervisor, rng)


def _plan_running(
    state: WorkflowState,
    definition: Definition,
    now: int,
    supervisor: bool,
    completed: str | None,
    rng: random.Random,
) -> list[Action]:
    steps = state.steps
    for name in definition.topological_order:
        rec = steps[name]
        if rec.status is StepStatus.FAILED:
            return [Unwind(name, _failure_reason(rec))]
    if all(steps[n].status is StepStatus.SUCCEEDED for n in definition.topological_order):
        return [Finish(WorkflowStatus.SUCCEEDED)]

    grace = definition.dispatch_timeout_seconds * 1000
    actions: list[Action] = []
    for spec in definition.steps:
        rec = steps[spec.name]
        if rec.status is StepStatus.PENDING:
            ready_at = _ready_at(state, spec)
            if ready_at is None:
                continue
            is_join = len(spec.depends_on) > 1
            if completed is not None and completed in spec.depends_on:
                actions.append(Dispatch(rec, lost=False) if is_join else SendImplicit(spec.name))
            elif supervisor and now >= ready_at + grace:
                actions.append(Dispatch(rec, lost=True, overdue_ms=now - ready_at - grace))
        elif supervisor:
            actions.extend(_supervise(rec, spec, definition, now, rng, unwinding=False))
    return actions


def _plan_unwinding(
    state: WorkflowState,
    definition: Definition,
    now: int,
    supervisor: bool,
    rng: random.Random,
) -> list[Action]:
    actions: list[Action] = []
    for spec in definition.steps:
        rec = state.steps[spec.name]
        if rec.status in (StepStatus.PENDING, StepStatus.QUEUED):
            actions.append(Cancel(rec))
        elif rec.status.in_flight and supervisor:
            actions.extend(_supervise(rec, spec, definition, now, rng, unwinding=True))
    if actions:
        return actions
    if any(r.status.in_flight for r in state.steps.values()):
        return []  # an in-flight attempt may still succeed, and would then need undoing

    for name in compensation_order(state, definition):
        comp = state.compensations.get(name)
        if comp is None:
            return [StartCompensation(name)]
        if comp.status is StepStatus.SUCCEEDED:
            continue
        if comp.status.terminal:
            cause = loads(state.workflow.error)
            return [Finish(WorkflowStatus.FAILED, error=_operator_needed(name, comp, cause))]
        if supervisor:
            comp_spec = definition.spec("compensation", name)
            return list(_supervise(comp, comp_spec, definition, now, rng, unwinding=False))
        return []
    done = (
        WorkflowStatus.CANCELLED
        if state.workflow.status is WorkflowStatus.CANCELLING
        else WorkflowStatus.COMPENSATED
    )
    return [Finish(done)]


def _supervise(
    rec: StepRecord,
    spec: TaskSpec,
    definition: Definition,
    now: int,
    rng: random.Random,
    *,
    unwinding: bool,
) -> list[Action]:
    """Time-based actions on a QUEUED or RUNNING step or compensation."""
    if rec.status is StepStatus.QUEUED:
        if rec.dispatched_at is None:  # a long backoff that was never sent
            available = rec.available_at or 0
            return [Dispatch(rec, lost=False)] if now >= available else []
        start = max(rec.dispatched_at, rec.available_at or 0)
        deadline = start + definition.dispatch_timeout_seconds * 1000
        return [Dispatch(rec, lost=True, overdue_ms=now - deadline)] if now >= deadline else []
    if not rec.status.in_flight:
        return []
    claimed = rec.claimed_at or 0
    timeout_at = claimed + spec.timeout_seconds * 1000
    heartbeat_at = (
        None
        if spec.heartbeat_seconds is None
        else (rec.heartbeat_at or claimed) + spec.heartbeat_seconds * 1000
    )
    if now >= timeout_at:
        error_type, outcome, deadline = TIMEOUT, "timeout", timeout_at
        message = f"attempt {rec.attempt} exceeded TimeoutSeconds ({spec.timeout_seconds})"
    elif heartbeat_at is not None and now >= heartbeat_at:
        error_type, outcome, deadline = HEARTBEAT_TIMEOUT, "heartbeat_timeout", heartbeat_at
        message = f"attempt {rec.attempt} sent no heartbeat for {spec.heartbeat_seconds}s"
    else:
        return []
    decision = retry.decide(
        spec.retry,
        attempt=rec.attempt - rec.budget_from,
        error_type=error_type,
        permanent=False,
        unwinding=unwinding,
        rng=rng,
    )
    return [EndAttempt(rec, error_type, message, decision, outcome, now - deadline)]


# ------------------------------------------------------------------------------- helpers


def _ready_at(state: WorkflowState, spec: StepSpec) -> int | None:
    """When the last dependency succeeded, or None if some has not."""
    finished = []
    for dep in spec.depends_on:
        rec = state.steps[dep]
        if rec.status is not StepStatus.SUCCEEDED:
            return None
        finished.append(rec.finished_at or 0)
    return max(finished, default=state.workflow.created_at)


def compensation_order(state: WorkflowState, definition: Definition) -> list[str]:
    """Succeeded steps that have a compensation, most recently completed first.

    Completion time orders them; equal times (possible only for steps that did not depend on
    each other, or under a simulated clock) fall back to depth in the DAG, so a step is always
    undone before the steps it depended on.
    """
    done = [
        rec
        for name, rec in state.steps.items()
        if rec.status is StepStatus.SUCCEEDED and definition.by_name[name].compensation
    ]
    done.sort(key=lambda r: (r.finished_at or 0, definition.depth[r.name], r.name), reverse=True)
    return [r.name for r in done]


def _failure_reason(rec: StepRecord) -> str:
    error = loads(rec.error) or {}
    return dumps(
        {
            "type": error.get("type", "StepFailed"),
            "message": f"step '{rec.name}' failed: {error.get('message', 'no details')}",
            "step": rec.name,
        }
    )


def _operator_needed(name: str, comp: StepRecord, cause: Any) -> str:
    error = loads(comp.error) or {}
    body: dict[str, Any] = {
        "type": "CompensationFailed",
        "message": (
            f"compensation of step '{name}' failed after {comp.attempt} attempt(s): "
            f"{error.get('message', 'no details')}; an operator is needed"
        ),
        "step": name,
        "operator_needed": True,
    }
    if cause is not None and cause.get("type") != "CompensationFailed":
        body["cause"] = cause  # why unwinding began: restored when an operator retries
    elif cause is not None and "cause" in cause:
        body["cause"] = cause["cause"]
    return dumps(body)


def failure_decision(
    rec: StepRecord,
    spec: TaskSpec,
    *,
    error_type: str,
    message: str,
    permanent: bool,
    unwinding: bool,
    rng: random.Random,
) -> EndAttempt:
    """What an agent's error does to its attempt (the same rules as a timeout)."""
    decision = retry.decide(
        spec.retry,
        attempt=rec.attempt - rec.budget_from,
        error_type=error_type,
        permanent=permanent,
        unwinding=unwinding,
        rng=rng,
    )
    return EndAttempt(rec, error_type, message, decision, "error")


# ---------------------------------------------------------------------- the watch deadline


def next_due(state: WorkflowState, definition: Definition, now: int) -> int | None:
    """The latest valid `due_at` for a live workflow (docs/architecture.md, the watch index).

    Every deadline known now counts, and so does `now + G`: any event from here on (a claim,
    a result, a retry) creates deadlines at least `G` after it.
    """
    if state.workflow.status.terminal:
        return None
    gap = definition.watch_gap_ms
    grace = definition.dispatch_timeout_seconds * 1000
    # `now + G` always counts, even while every step waits out a backoff: an outside event
    # (a cancel) may create a deadline `G` after it at any moment.
    candidates: list[int] = [now + gap]
    records: list[tuple[Kind, StepRecord]] = [("step", r) for r in state.steps.values()]
    records += [("compensation", r) for r in state.compensations.values()]
    running = state.workflow.status is WorkflowStatus.RUNNING
    for kind, rec in records:
        if rec.status is StepStatus.QUEUED:
            available = rec.available_at or now
            if rec.dispatched_at is None:
                candidates.append(available)
            else:
                candidates.append(max(rec.dispatched_at, available) + grace)
            candidates.append(max(available, now) + gap)
        elif rec.status.in_flight:
            spec = definition.spec(kind, rec.name)
            claimed = rec.claimed_at or now
            candidates.append(claimed + spec.timeout_seconds * 1000)
            if spec.heartbeat_seconds is not None:
                candidates.append((rec.heartbeat_at or claimed) + spec.heartbeat_seconds * 1000)
            candidates.append(now + gap)
        elif rec.status is StepStatus.PENDING and running and kind == "step":
            ready_at = _ready_at(state, definition.by_name[rec.name])
            if ready_at is not None:
                candidates.append(min(ready_at + grace, now + gap))
    return min(candidates)
