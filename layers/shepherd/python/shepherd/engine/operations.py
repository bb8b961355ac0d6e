"""Operator actions on one workflow: cancel, retry, pause, resume, compensate.

Each is one conditional write (or one transaction) on the status it expects, so concurrent
calls are safe: one wins, the others find the new status and answer `InvalidTransition`
(409) unless the action is already what happened (a second cancel while cancelling, a second
pause while paused). After the write the workflow is advanced at once, so the caller does not
wait for a sweep. The table of which action is allowed from which status is in
docs/architecture.md (state machine of a workflow).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from typing import Any

from shepherd import jsonsafe
from shepherd.conditions import Update
from shepherd.decisions import transitions as tx
from shepherd.definitions import Definition
from shepherd.engine.scheduler import Scheduler
from shepherd.errors import InvalidTransition
from shepherd.model import StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus, dumps, loads

_CHANGED = "workflow changed meanwhile; read it and try again"
TRIES = 3  # a write can lose to the supervisor moving the watch entry: read again, retry


def _refuse(wf: WorkflowRecord, action: str, allowed: str) -> InvalidTransition:
    return InvalidTransition(f"workflow is {wf.status.value}: {action} needs {allowed}")


def cancel(scheduler: Scheduler, workflow_id: str, owner: str | None) -> WorkflowRecord:
    """RUNNING or PAUSED -> CANCELLING: stop, undo what may have acted, end CANCELLED.

    Idempotent while cancelling.
    """
    for _ in range(TRIES):
        state, definition = scheduler.owned(workflow_id, owner)
        wf = state.workflow
        if wf.status is WorkflowStatus.CANCELLING:
            break
        if wf.status not in (WorkflowStatus.RUNNING, WorkflowStatus.PAUSED):
            raise _refuse(wf, "cancel", "RUNNING or PAUSED")
        now = scheduler.ports.clock.now_ms()
        write = tx.request_cancel(wf, now, scheduler.shard(workflow_id))
        if scheduler.executor.workflow(state, write):
            break
    else:
        raise InvalidTransition(_CHANGED)
    scheduler.run(state, definition, supervisor=False)
    return state.workflow


def pause(scheduler: Scheduler, workflow_id: str, owner: str | None) -> WorkflowRecord:
    """RUNNING -> PAUSED: nothing new is dispatched; running attempts finish and are recorded.

    Idempotent while paused.
    """
    state, _ = scheduler.owned(workflow_id, owner)
    wf = state.workflow
    if wf.status is WorkflowStatus.PAUSED:
        return wf
    if wf.status is not WorkflowStatus.RUNNING:
        raise _refuse(wf, "pause", "RUNNING")
    now = scheduler.ports.clock.now_ms()
    reason = dumps({"reason": "operator", "by": owner or "operator"})
    if not scheduler.executor.workflow(state, tx.pause(wf, now, reason)):
        if state.workflow.status is WorkflowStatus.PAUSED:
            return state.workflow
        raise InvalidTransition(_CHANGED)
    return state.workflow


def resume(
    scheduler: Scheduler,
    workflow_id: str,
    owner: str | None,
    *,
    step: str | None = None,
    step_input: Any = None,
) -> WorkflowRecord:
    """PAUSED -> RUNNING: re-queue the failed steps with fresh retry budgets, optionally with a
    replacement input for one named step, and dispatch every queued and every ready step.

    One transaction (the workflow and every step it changes), so it is all or nothing.
    """
    for _ in range(TRIES):
        state, definition = scheduler.owned(workflow_id, owner)
        wf = state.workflow
        if wf.status is not WorkflowStatus.PAUSED:
            raise _refuse(wf, "resume", "PAUSED")
        now = scheduler.ports.clock.now_ms()
        writes = [tx.resume(wf, now, scheduler.shard(workflow_id))]
        if step is not None:
            writes.append(_replacement(scheduler, state, definition, step, step_input, owner, now))
        for name, rec in state.steps.items():
            if name == step:
                continue  # its replacement write also requeues it or lifts its hold
            if rec.status is StepStatus.FAILED:
                writes.append(tx.redrive_step(rec, now))
            elif rec.held_at is not None:
                writes.append(tx.release(rec))
        if scheduler.executor.together(writes):
            break
    else:
        raise InvalidTransition(_CHANGED)
    loaded = scheduler.load(workflow_id)
    assert loaded is not None
    state, definition = loaded
    scheduler.run(state, definition, supervisor=False, redispatch=True)
    return state.workflow


def _replacement(
    scheduler: Scheduler,
    state: WorkflowState,
    definition: Definition,
    step: str,
    step_input: Any,
    owner: str | None,
    now: int,
) -> tx.Write:
    """The write that gives `step` a replacement input (and, if it failed, a fresh budget)."""
    rec = state.steps.get(step)
    if rec is None or step not in definition.by_name:
        raise InvalidTransition(f"no step '{step}' in this workflow")
    if rec.status in (StepStatus.SUCCEEDED, StepStatus.RUNNING, StepStatus.WAITING):
        raise InvalidTransition(
            f"step '{step}' is {rec.status.value}: only a step that has not succeeded and is "
            "not running can get a replacement input"
        )
    text = scheduler.validated_input(definition, step_input, what="step input")
    # Keyed by the attempt it replaces: a large replacement goes to the payload bucket.
    stored = scheduler.keep_for(rec, "input", text)
    write = tx.replace_input(rec, now, stored, owner or "operator")
    if rec.status is not StepStatus.FAILED:
        if rec.held_at is None:
            return write
        lifted = Update(set=write.update.set, remove=(*write.update.remove, "held_at"))
        return tx.Write(write.pk, write.sk, lifted, write.condition)
    requeue = tx.redrive_step(rec, now)
    merged = Update(
        set={**requeue.update.set, **write.update.set},
        remove=requeue.update.remove,
        add=requeue.update.add,
    )
    return tx.Write(requeue.pk, requeue.sk, merged, requeue.condition)


def compensate(scheduler: Scheduler, workflow_id: str, owner: str | None) -> WorkflowRecord:
    """RUNNING or PAUSED -> COMPENSATING: give up and unwind as a failure would, ending
    COMPENSATED (or FAILED if a compensation fails for good)."""
    for _ in range(TRIES):
        state, definition = scheduler.owned(workflow_id, owner)
        wf = state.workflow
        if wf.status not in (WorkflowStatus.RUNNING, WorkflowStatus.PAUSED):
            raise _refuse(wf, "compensate", "RUNNING or PAUSED")
        pause_info = loads(wf.pause) or {}
        error: dict[str, Any] = {
            "type": "OperatorGaveUp",
            "message": "an operator gave up on this workflow and asked to compensate it",
            "by": owner or "operator",
        }
        if pause_info.get("reason") == "failure":
            error["cause"] = pause_info.get("error")
        now = scheduler.ports.clock.now_ms()
        write = tx.give_up(wf, now, scheduler.shard(workflow_id), jsonsafe.dumps(error))
        if scheduler.executor.workflow(state, write):
            break
    else:
        raise InvalidTransition(_CHANGED)
    scheduler.run(state, definition, supervisor=False)
    return state.workflow


def redrive(scheduler: Scheduler, workflow_id: str, owner: str | None) -> WorkflowRecord:
    """Retry a FAILED workflow from its failed compensations, with fresh retry budgets (or,
    if the supervisor parked it, put it back in the status it had).

    Succeeded steps and compensations are kept; the attempt numbers keep growing, so every
    attempt from before the retry stays fenced out.
    """
    state, definition = scheduler.owned(workflow_id, owner)
    wf = state.workflow
    if wf.status is not WorkflowStatus.FAILED:
        raise _refuse(wf, "retry", "FAILED")
    now = scheduler.ports.clock.now_ms()
    cause = (loads(wf.error) or {}).get("cause")
    cause_json = None if cause is None else dumps(cause)
    if wf.parked_from is not None:
        write = tx.unpark(wf, now, scheduler.shard(workflow_id), cause_json)
        if not scheduler.executor.workflow(state, write):
            raise InvalidTransition(_CHANGED)
        return state.workflow
    failed = [c for c in state.compensations.values() if c.status is StepStatus.FAILED]
    if not failed:
        raise InvalidTransition("workflow has no failed compensation to retry")
    to = WorkflowStatus.CANCELLING if wf.cancel_requested_at else WorkflowStatus.COMPENSATING
    writes = [
        tx.redrive_workflow(
            wf, to, now, scheduler.shard(workflow_id), now + definition.watch_gap_ms, cause_json
        ),
        *(tx.redrive_step(c, now) for c in failed),
    ]
    if not scheduler.executor.together(writes):
        raise InvalidTransition(_CHANGED)
    tasks = [scheduler.task(workflow_id, definition, c.kind, c.name, c.attempt + 1) for c in failed]
    scheduler.deliver(tasks)
    state, _ = scheduler.owned(workflow_id, owner)
    return state.workflow
