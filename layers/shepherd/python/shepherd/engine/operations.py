"""Operator actions on one workflow: cancel, retry, pause, resume, compensate.

Each is one conditional write (or one transaction) on the status it expects, so concurrent
calls are safe: one wins, the others find the new status and answer `InvalidTransition`
(409) unless the action is already what happened (a second cancel while cancelling, a second
pause while paused). After the write the workflow is advanced at once, so the caller does not
wait for a sweep. The table of which action is allowed from which status is in
docs/architecture.md (state machine of a workflow).

Every action goes through one optimistic loop (`Operations._act`): read the workflow, decide
(the writes, or "already done", or a refusal), apply, and on a lost condition read again: a
write can lose to the supervisor moving the watch entry, which changes nothing an operator
cares about.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from shepherd import jsonsafe
from shepherd.conditions import Update
from shepherd.decisions import transitions as tx
from shepherd.definitions import Definition
from shepherd.engine.scheduler import Scheduler
from shepherd.errors import InvalidTransition, StoreUnavailable
from shepherd.kinds import kind_of
from shepherd.model import (
    OutgoingTask,
    StepRecord,
    StepStatus,
    WorkflowRecord,
    WorkflowState,
    WorkflowStatus,
    dumps,
    loads,
)

logger = logging.getLogger(__name__)
_CHANGED = "workflow changed meanwhile; read it and try again"
TRIES = 3  # a write can lose to the supervisor moving the watch entry: read again, retry


def _pause_ms(definition: Definition) -> int | None:
    timeout = definition.pause_timeout_seconds
    return None if timeout is None else timeout * 1000


def _refuse(wf: WorkflowRecord, action: str, allowed: str) -> InvalidTransition:
    return InvalidTransition(f"workflow is {wf.status.value}: {action} needs {allowed}")


@dataclass(frozen=True)
class Change:
    """What an action decided on the workflow as read: the writes (one write, or a
    transaction of several), or none when the action is already what happened."""

    writes: list[tx.Write] = field(default_factory=list)
    tasks: list[OutgoingTask] = field(default_factory=list)  # sent once the writes won
    # The workflows whose status the writes set (beyond the one acted on: a redrive's
    # children), for the list indexes' keys.
    listed: list[WorkflowRecord] = field(default_factory=list)


Decide = Callable[[WorkflowState, Definition, int], Change]


def _refuse_failed_maps(records: Iterable[StepRecord]) -> None:
    """A map (or a map's compensation) that failed after it opened is not opened again: its
    items' units hold the attempt that ran (docs/architecture.md, Map steps, known limits)."""
    for rec in records:
        if rec.status is StepStatus.FAILED and rec.fanout is not None:
            raise InvalidTransition(
                f"step '{rec.name}' is a map whose {rec.kind} failed after it opened; a failed "
                "map is not run again: compensate or cancel the workflow instead"
            )


class Operations:
    """The operator's actions on the workflows an owner may see (None: any workflow)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def _act(
        self, workflow_id: str, owner: str | None, decide: Decide, *, machines: bool = False
    ) -> tuple[WorkflowState, Definition]:
        """Read, decide, apply; on a lost write read again (TRIES times). Returns the state
        the winning write (or the no-op) left, with the definition it runs on. A state
        machine (`shepherd.asl.engine`) takes only the actions that say `machines`."""
        scheduler = self.scheduler
        for _ in range(TRIES):
            state, definition = scheduler.owned(workflow_id, owner)
            if definition.state_machine is not None and not machines:
                raise InvalidTransition(
                    "a state machine can be cancelled; pause, resume, compensate and retry "
                    "are not built for state machines yet"
                )
            change = decide(state, definition, scheduler.ports.clock.now_ms())
            if not change.writes:
                return state, definition
            if len(change.writes) == 1:
                won = scheduler.executor.workflow(state, change.writes[0])
            else:
                won = scheduler.executor.together(change.writes, state.workflow, also=change.listed)
            if won:
                scheduler.watched()  # a resume or a redrive may put it back in the index
                scheduler.deliver(change.tasks)
                return state, definition
        raise InvalidTransition(_CHANGED)

    def _follow_up(self, action: str, advance: Callable[[], object]) -> None:
        """Advance the workflow at once after an operator's write took effect. Only a speed-up:
        the write made the workflow due at once, so the supervisor's next look does what this
        could not. A throttled or unavailable store here must not answer the action that took
        effect with a 503 (its retry would then be refused: 409; issue 41.3)."""
        try:
            advance()
        except StoreUnavailable:
            logger.warning(
                "%s took effect; advancing the workflow is left to the supervisor", action
            )

    # ------------------------------------------------------------------------ actions

    def cancel(self, workflow_id: str, *, owner: str | None = None) -> WorkflowRecord:
        """RUNNING or PAUSED -> CANCELLING: stop, undo what may have acted, end CANCELLED.

        Idempotent while cancelling.
        """

        def decide(state: WorkflowState, _: Definition, now: int) -> Change:
            wf = state.workflow
            if wf.status is WorkflowStatus.CANCELLING:
                return Change()
            if wf.status not in (WorkflowStatus.RUNNING, WorkflowStatus.PAUSED):
                raise _refuse(wf, "cancel", "RUNNING or PAUSED")
            shard = self.scheduler.shard(wf.workflow_id)
            return Change([tx.request_cancel(wf, now, shard, by=owner or "operator")])

        state, definition = self._act(workflow_id, owner, decide, machines=True)
        self._follow_up("cancel", lambda: self.scheduler.run(state, definition, supervisor=False))
        if definition.state_machine is not None:  # its branches' and items' children too
            self._follow_up("cancel", lambda: self.scheduler.asl.cancelled(workflow_id))
        return state.workflow

    def pause(self, workflow_id: str, *, owner: str | None = None) -> WorkflowRecord:
        """RUNNING -> PAUSED: nothing new is dispatched; running attempts finish and are
        recorded. Idempotent while paused."""

        def decide(state: WorkflowState, definition: Definition, now: int) -> Change:
            wf = state.workflow
            if wf.status is WorkflowStatus.PAUSED:
                return Change()
            if wf.status is not WorkflowStatus.RUNNING:
                raise _refuse(wf, "pause", "RUNNING")
            reason = dumps({"reason": "operator", "by": owner or "operator"})
            shard = self.scheduler.shard(wf.workflow_id)
            return Change(
                [tx.pause(wf, now, reason, shard=shard, timeout_ms=_pause_ms(definition))]
            )

        state, _ = self._act(workflow_id, owner, decide)
        return state.workflow

    def resume(
        self,
        workflow_id: str,
        *,
        owner: str | None = None,
        step: str | None = None,
        step_input: Any = None,
    ) -> WorkflowRecord:
        """PAUSED -> RUNNING: re-queue the failed steps with fresh retry budgets, optionally
        with a replacement input for one named step, and dispatch every queued and every
        ready step.

        One transaction (the workflow and every step it changes), so it is all or nothing.
        """

        def decide(state: WorkflowState, definition: Definition, now: int) -> Change:
            wf = state.workflow
            if wf.status is not WorkflowStatus.PAUSED:
                raise _refuse(wf, "resume", "PAUSED")
            _refuse_failed_maps(state.steps.values())
            shard = self.scheduler.shard(workflow_id)
            writes = [tx.resume(wf, now, shard, by=owner or "operator")]
            if step is not None:
                writes.append(self._replacement(state, definition, step, step_input, owner, now))
            for name, rec in state.steps.items():
                if name == step:
                    continue  # its replacement write also requeues it or lifts its hold
                if rec.status is StepStatus.FAILED:
                    writes.append(tx.redrive_step(rec, now))
                elif rec.held_at is not None:
                    writes.append(tx.release(rec))
            return Change(writes)

        acted, _ = self._act(workflow_id, owner, decide)
        # The transaction does not fold into `acted`: the answer, unless read again below, is
        # the record it was decided on with the status the transaction set.
        resumed = [replace(acted.workflow, status=WorkflowStatus.RUNNING, pause=None)]

        def dispatch() -> None:
            loaded = self.scheduler.load(workflow_id)
            assert loaded is not None
            state, definition = loaded
            self.scheduler.run(state, definition, supervisor=False, redispatch=True)
            resumed.append(state.workflow)

        self._follow_up("resume", dispatch)
        return resumed[-1]

    def compensate(self, workflow_id: str, *, owner: str | None = None) -> WorkflowRecord:
        """RUNNING or PAUSED -> COMPENSATING: give up and unwind as a failure would, ending
        COMPENSATED (or FAILED if a compensation fails for good)."""

        def decide(state: WorkflowState, _: Definition, now: int) -> Change:
            wf = state.workflow
            if wf.status not in (WorkflowStatus.RUNNING, WorkflowStatus.PAUSED):
                raise _refuse(wf, "compensate", "RUNNING or PAUSED")
            pause_info = loads(wf.pause) or {}
            error: dict[str, Any] = {
                "type": "OperatorGaveUp",
                "message": "an operator gave up on this workflow and asked to compensate it",
                "by": owner or "operator",
            }
            if pause_info.get("reason") in ("failure", "timeout"):
                error["cause"] = pause_info.get("error")
            shard = self.scheduler.shard(workflow_id)
            by = owner or "operator"
            return Change([tx.give_up(wf, now, shard, jsonsafe.dumps(error), by=by)])

        state, definition = self._act(workflow_id, owner, decide)
        self._follow_up(
            "compensate", lambda: self.scheduler.run(state, definition, supervisor=False)
        )
        return state.workflow

    def redrive(self, workflow_id: str, *, owner: str | None = None) -> WorkflowRecord:
        """Retry a FAILED workflow from its failed compensations, with fresh retry budgets
        (or, if the supervisor parked it, put it back in the status it had).

        Succeeded steps and compensations are kept; the attempt numbers keep growing, so
        every attempt from before the retry stays fenced out.

        The redrive reaches down: a failed compensation that waited for a child to undo
        itself (the child's own undo failed, so the child ended FAILED) waits for it again,
        and the child is redriven in the same transaction (and so, recursively, are its own
        failed child undos). A child is never redriven on its own: that would bring it back
        to life outside its parent's watch (under a FAILED parent, which breaks "a parent is
        never terminal while a child is not"), so it is refused, naming the parent to redrive.
        """
        by = owner or "operator"

        def decide(state: WorkflowState, definition: Definition, now: int) -> Change:
            wf = state.workflow
            if wf.parent_id is not None:
                raise InvalidTransition(
                    f"workflow {wf.workflow_id} is a child of workflow {wf.parent_id} (step "
                    f"'{wf.parent_step}'): a child is redriven through its parent; retry "
                    f"workflow {wf.parent_id} (a FAILED parent's retry redrives its failed "
                    "child undos)"
                )
            return self._redrive_change(state, definition, now, by)

        self._act(workflow_id, owner, decide)
        state, _ = self.scheduler.owned(workflow_id, owner)
        return state.workflow

    def _redrive_change(
        self, state: WorkflowState, definition: Definition, now: int, by: str
    ) -> Change:
        """The writes (and tasks) that redrive the FAILED workflow `state` and, through its
        failed child-undo units, its FAILED children, all in one transaction."""
        wf = state.workflow
        workflow_id = wf.workflow_id
        if wf.status is not WorkflowStatus.FAILED:
            raise _refuse(wf, "retry", "FAILED")
        shard = self.scheduler.shard(workflow_id)
        cause = (loads(wf.error) or {}).get("cause")
        cause_json = None if cause is None else dumps(cause)
        if wf.parked_from is not None:
            return Change([tx.unpark(wf, now, shard, cause_json, by=by)], listed=[wf])
        failed = [c for c in state.compensations.values() if c.status is StepStatus.FAILED]
        _refuse_failed_maps(failed)
        if not failed:
            raise InvalidTransition(f"workflow {workflow_id} has no failed compensation to retry")
        to = WorkflowStatus.CANCELLING if wf.cancel_requested_at else WorkflowStatus.COMPENSATING
        due = now + definition.compensation_gap_ms  # the compensations it sends now
        writes = [tx.redrive_workflow(wf, to, now, shard, due, cause_json, by=by)]
        tasks: list[OutgoingTask] = []
        listed = [wf]
        for comp in failed:
            if comp.child_id is None:
                writes.append(tx.redrive_step(comp, now))
                attempt = comp.attempt + 1
                tasks.append(
                    self.scheduler.task(workflow_id, definition, comp.kind, comp.name, attempt)
                )
                continue
            # The unit waited for its child's undo, which failed: the child is redriven too
            # (its failed compensations, recursively), and the unit waits for it again.
            writes.append(tx.redrive_child_undo(comp, now))
            down = self._child_redrive(comp.child_id, now, by)
            writes.extend(down.writes)
            tasks.extend(down.tasks)
            listed.extend(down.listed)
        return Change(writes, tasks, listed)

    def _child_redrive(self, child_id: str, now: int, by: str) -> Change:
        """A failed child-undo unit's child, as its parent's redrive redrives it: FAILED, its
        own undo failed (or parked); anything else has nothing to redrive (an unwinding child
        is still undoing itself, a COMPENSATED one has: the unit waiting again records it)."""
        loaded = self.scheduler.load(child_id)
        if loaded is None:
            raise InvalidTransition(f"child workflow {child_id} is missing")
        state, definition = loaded
        if state.workflow.status is not WorkflowStatus.FAILED:
            return Change()
        return self._redrive_change(state, definition, now, by)

    # ------------------------------------------------------------------------ helpers

    def _replacement(
        self,
        state: WorkflowState,
        definition: Definition,
        step: str,
        step_input: Any,
        owner: str | None,
        now: int,
    ) -> tx.Write:
        """The write that gives `step` a replacement input (and, if it failed, a fresh
        budget)."""
        rec = state.steps.get(step)
        if rec is None or step not in definition.by_name:
            raise InvalidTransition(f"no step '{step}' in this workflow")
        if rec.status in (StepStatus.SUCCEEDED, StepStatus.RUNNING, StepStatus.WAITING):
            raise InvalidTransition(
                f"step '{step}' is {rec.status.value}: only a step that has not succeeded and "
                "is not running can get a replacement input"
            )
        scheduler = self.scheduler
        # It replaces what the step reads: the workflow input (so it must fit InputSchema),
        # or, under an InputPath, the value the path selects (no schema describes that).
        spec = definition.by_name[step]
        text = scheduler.validated_input(
            definition, step_input, what="input", schema=spec.input_path is None
        )
        for wf_type in kind_of(spec).inputs_also_for(spec):
            # Checked now rather than by a child refused after the resume.
            scheduler.validated_input(scheduler.catalog.current(wf_type), step_input, what="input")
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
