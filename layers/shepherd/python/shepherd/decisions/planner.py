"""The planner: given one workflow's state, its definition and the time, what must happen next.

Pure. Both the scheduler (after a step outcome, in the agent's process, or after an operator
action) and the supervisor (when a workflow is due) call it; only the supervisor acts on time
(timeouts, lost messages, the pause timeout). The executor applies the actions as conditional
writes, folds the results back into the state and plans again until nothing is left.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shepherd.decisions import choice, retry, workflow_timeout
from shepherd.decisions.actions import (
    AccountItem,
    Action,
    Cancel,
    CancelChild,
    ChildSucceeded,
    DecideMap,
    Dispatch,
    EndAttempt,
    FailWait,
    Finish,
    FinishMap,
    GiveUp,
    HaltMap,
    OpenMore,
    PassThrough,
    Pause,
    SendImplicit,
    Skip,
    StartChild,
    StartCompensation,
    StartWait,
    TakeSignal,
    TellCancel,
    TimeOutApproval,
    TimeOutSignal,
    TimeOutWorkflow,
    Unwind,
    Wake,
    takes_over,
)
from shepherd.decisions.deadlines import attempt_deadlines as _attempt_deadlines_of
from shepherd.decisions.deadlines import lost_at as _lost_at
from shepherd.decisions.deadlines import pool_paused as _paused
from shepherd.decisions.deadlines import pool_resumed as _resumed
from shepherd.decisions.deadlines import ready_at as _ready_at
from shepherd.decisions.fanout import child_end
from shepherd.decisions.fanout import verdict as map_verdict
from shepherd.definitions import Definition, StepSpec, TaskSpec
from shepherd.keys import Kind
from shepherd.kinds import kind_of
from shepherd.model import (
    MapState,
    PoolState,
    StepRecord,
    StepStatus,
    WorkflowRecord,
    WorkflowState,
    WorkflowStatus,
    dumps,
    loads,
)

# The actions are re-exported: callers name them as the planner's.
__all__ = [
    "AccountItem",
    "Action",
    "Cancel",
    "CancelChild",
    "ChildSucceeded",
    "DecideMap",
    "Dispatch",
    "EndAttempt",
    "FailWait",
    "Finish",
    "FinishMap",
    "GiveUp",
    "HaltMap",
    "OpenMore",
    "PassThrough",
    "Pause",
    "SendImplicit",
    "Skip",
    "StartChild",
    "StartCompensation",
    "StartWait",
    "TakeSignal",
    "TellCancel",
    "TimeOutApproval",
    "TimeOutSignal",
    "TimeOutWorkflow",
    "Unwind",
    "Wake",
    "takes_over",
]

HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
TIMEOUT = "States.Timeout"
WORKFLOW_CANCELLED = "WorkflowCancelled"  # a callback attempt fenced by its workflow's cancel
PAUSE_TIMEOUT = "PauseTimedOut"


@dataclass(frozen=True)
class Options:
    """How to plan. `completed`: the step the calling agent just completed (it owns the
    implicit dispatch of that step's single-dependency successors). `supervisor`: act on time.
    `redispatch`: (re)send every queued and every ready step now (a resume). `pools`: the
    state of paused pools (absent: enabled). `documents`: what the condition of each ready
    conditional step reads (`choice.document`), assembled by the caller (`conditions_due`)."""

    supervisor: bool = False
    completed: str | None = None
    redispatch: bool = False
    pools: Mapping[str, PoolState] = field(default_factory=dict)
    documents: Mapping[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- the planner


def plan(
    state: WorkflowState,
    definition: Definition,
    now: int,
    *,
    supervisor: bool,
    completed: str | None = None,
    rng: random.Random,
    redispatch: bool = False,
    pools: Mapping[str, PoolState] | None = None,
    documents: Mapping[str, Any] | None = None,
) -> list[Action]:
    """The next actions for one workflow (see `Options` for the flags)."""
    options = Options(supervisor, completed, redispatch, pools or {}, documents or {})
    status = state.workflow.status
    if status.terminal:
        return []
    planner = _Planner(state, definition, now, options, rng)
    if workflow_timeout.overdue(state, definition, now):
        # Past its own TimeoutSeconds: the supervisor's look ends it; nobody sends more.
        return workflow_timeout.actions(state, definition, now) if supervisor else []
    if state.partial:
        # Bounded reads (`Scheduler.load_units`): only what one step's success can change.
        if status is not WorkflowStatus.RUNNING or completed is None or supervisor:
            raise ValueError("a partial state is planned only after a success, while running")
        return planner.after_completion(completed)
    if status is WorkflowStatus.RUNNING:
        return planner.running()
    if status is WorkflowStatus.PAUSED:
        return planner.paused()
    return planner.unwinding()


class _Planner:
    def __init__(
        self,
        state: WorkflowState,
        definition: Definition,
        now: int,
        options: Options,
        rng: random.Random,
    ) -> None:
        self.state = state
        self.definition = definition
        self.now = now
        self.options = options
        self.rng = rng
        self.paused_now = False  # planning a PAUSED workflow: nothing is (re)sent

    # ------------------------------------------------------------------------- RUNNING

    def running(self) -> list[Action]:
        state, definition, options = self.state, self.definition, self.options
        steps = state.steps
        for name in definition.topological_order:
            rec = steps[name]
            if rec.status is StepStatus.FAILED:
                reason = _failure_reason(rec)
                if definition.on_failure_of(name) == "PAUSE":
                    return [Pause(name, reason)]
                return [Unwind(name, reason)]
        if all(steps[n].status.done for n in definition.topological_order):
            return [Finish(WorkflowStatus.SUCCEEDED)]

        actions: list[Action] = []
        for spec in definition.steps:
            rec = steps[spec.name]
            if rec.status is StepStatus.PENDING:
                actions.extend(self._ready(rec, spec))
            elif options.redispatch and rec.status is StepStatus.QUEUED:
                actions.extend(self._redispatch(rec, spec))
            elif (waits_on := self._waits_on_units(rec, spec, unwinding=False)) is not None:
                actions.extend(waits_on)
            elif options.supervisor:
                actions.extend(self._supervise(rec, spec, unwinding=False))
        return actions

    def _redispatch(self, rec: StepRecord, spec: StepSpec) -> list[Action]:
        """A resume's: a queued task is sent, a queued child step starts its child, a failed
        wait rests again."""
        return kind_of(spec).plan_resend(self, rec, spec)

    def after_completion(self, completed: str) -> list[Action]:
        """What one step's success can change, planned on its successors, their dependencies
        and (if it is a sink) the sinks alone: the successors it made ready, and the finish
        when every sink succeeded (every step then did: each is a sink or an ancestor of one,
        and a step runs only after its dependencies succeeded)."""
        definition, steps = self.definition, self.state.steps
        actions: list[Action] = []
        for name in definition.dependents[completed]:
            rec = steps.get(name)
            if rec is None:
                continue  # not read: a join whose counter says it cannot be ready yet
            if rec.status is StepStatus.PENDING:
                actions.extend(self._ready(rec, definition.by_name[name]))
            elif rec.status is StepStatus.RUNNING and _empty_and_decided(rec.fanout):
                # A map of child workflows this advance opened with no item: it ends at once,
                # here, as an empty task map ends with its opener (issue 40.5).
                actions.append(FinishMap(rec))
        sinks = definition.sinks
        if completed in sinks and all(n in steps and steps[n].status.done for n in sinks):
            actions.append(Finish(WorkflowStatus.SUCCEEDED))
        return actions

    def _ready(self, rec: StepRecord, spec: StepSpec) -> list[Action]:
        """A PENDING step whose dependencies all succeeded: who dispatches it, and how."""
        options = self.options
        ready_at = _ready_at(self.state, spec)
        if ready_at is None:
            return []
        if spec.condition is not None:
            document = options.documents.get(spec.name)
            if document is None:
                return []  # the caller assembles it (`conditions_due`); planned again then
            if not choice.evaluate(spec.condition, document):
                return [Skip(rec)]  # by whoever sees it first: one conditional write
        return kind_of(spec).plan_ready(self, rec, spec, ready_at)

    def ready_task(self, rec: StepRecord, spec: StepSpec, ready_at: int) -> list[Action]:
        """A ready task or map step: its message, sent by whoever owns it (the completer of
        its one dependency, a join's last, a resume, or a look when it was lost)."""
        options = self.options
        if options.completed is not None and options.completed in spec.depends_on:
            is_join = len(spec.depends_on) > 1
            return [Dispatch(rec, lost=False) if is_join else SendImplicit(spec.name)]
        if options.redispatch:
            return [Dispatch(rec, lost=False)]
        if not options.supervisor:
            return []
        # Sent when it became ready (or with the start, for a root), as a QUEUED step is sent.
        pool = options.pools.get(spec.pool)
        if _paused(pool):
            return []
        deadline = _lost_at(ready_at, pool, self.definition)
        if self.now >= deadline:
            held = _resumed(pool) > ready_at
            return [Dispatch(rec, lost=True, overdue_ms=self.now - deadline, held=held)]
        return []

    def ready_child(self, rec: StepRecord, ready_at: int) -> list[Action]:
        """A ready child-workflow step is started by whoever completed its last dependency
        (or a resume); else by the supervisor once its dispatch grace passed (its starter
        died), as a task's lost message is re-sent."""
        options = self.options
        if (
            options.completed is not None
            and options.completed in self.definition.by_name[rec.name].depends_on
        ) or options.redispatch:
            return [StartChild(rec)]
        if options.supervisor and self.now >= _lost_at(ready_at, None, self.definition):
            return [StartChild(rec)]
        return []

    # -------------------------------------------------------------------------- PAUSED

    def paused(self) -> list[Action]:
        """Nothing new is dispatched; attempts in flight are supervised (a retry is queued,
        not sent); the pause timeout, if any, gives up."""
        if not self.options.supervisor:
            return []
        self.paused_now = True
        wf = self.state.workflow
        timeout = self.definition.pause_timeout_seconds
        if timeout is not None and wf.paused_at is not None:
            deadline = wf.paused_at + timeout * 1000
            if self.now >= deadline:
                error = dumps(
                    {
                        "type": PAUSE_TIMEOUT,
                        "message": f"paused for more than PauseTimeoutSeconds ({timeout})",
                        "pause": loads(wf.pause),
                    }
                )
                return [GiveUp(error, self.now - deadline)]
        actions: list[Action] = []
        for spec in self.definition.steps:
            rec = self.state.steps[spec.name]
            if rec.status.in_flight:
                for action in self._supervise(rec, spec, unwinding=False):
                    actions.append(
                        replace(action, dispatch=False)
                        if isinstance(action, EndAttempt)
                        else action
                    )
        return actions

    # ----------------------------------------------------------------------- unwinding

    def unwinding(self) -> list[Action]:
        state, definition, options = self.state, self.definition, self.options
        actions: list[Action] = []
        for spec in definition.steps:
            rec = state.steps[spec.name]
            if rec.status in (StepStatus.PENDING, StepStatus.QUEUED):
                actions.append(Cancel(rec))
            elif kind_of(spec).cancelled_at_once(rec):
                actions.append(Cancel(rec))  # a wait never acted: nothing to wait for or undo
            elif (waits_on := self._waits_on_units(rec, spec, unwinding=True)) is not None:
                actions.extend(waits_on)
            elif rec.status.in_flight:
                actions.extend(self._cancel_reaches(rec, spec))
                if options.supervisor:
                    actions.extend(self._supervise(rec, spec, unwinding=True))
        if actions:
            return actions
        if any(r.status.in_flight for r in state.steps.values()):
            return []  # an in-flight attempt may still act, and would then need undoing
        return self._compensations()

    def _cancel_reaches(self, rec: StepRecord, spec: StepSpec) -> list[Action]:
        """A cancel never waits on anything outside Shepherd (invariant 13): an attempt waiting
        for its callback is fenced at once (it fails for good, `WorkflowCancelled`; a late
        answer is stale, 409), so compensation starts without its answer or timeout. An agent
        attempt running in Shepherd's own Lambda is told (`TellCancel`) and ends within its
        heartbeat and timeout: fencing it would let its compensation race its own effect."""
        if self.state.workflow.status is not WorkflowStatus.CANCELLING or not spec.runs_agent:
            return []
        if rec.fanout is not None or rec.index is not None:
            return []
        if rec.status is StepStatus.WAITING and rec.callback_token is not None:
            message = f"attempt {rec.attempt} was waiting for its callback when the cancel came"
            decision = retry.GiveUp("unwinding")
            return [EndAttempt(rec, WORKFLOW_CANCELLED, message, decision, "cancelled")]
        if rec.status is StepStatus.RUNNING and rec.cancel_requested_at is None:
            return [TellCancel(rec)]
        return []

    def _compensations(self) -> list[Action]:
        state, definition = self.state, self.definition
        order = compensation_order(state, definition)
        pending = [n for n in order if not _succeeded(state.compensations.get(n))]
        if not pending:
            done = (
                WorkflowStatus.CANCELLED
                if state.workflow.status is WorkflowStatus.CANCELLING
                else WorkflowStatus.COMPENSATED
            )
            return [Finish(done)]
        actions: list[Action] = []
        failed: tuple[str, StepRecord] | None = None
        busy = False
        for position, name in enumerate(pending):
            comp = state.compensations.get(name)
            if comp is not None and comp.status.terminal:  # FAILED: an operator is needed
                failed = failed or (name, comp)
                continue
            if self._blocked(name, position, pending):
                continue
            if comp is None:
                actions.append(StartCompensation(name))
                continue
            busy = True
            spec = definition.spec("compensation", name)
            if comp.fanout is not None and comp.status is StepStatus.RUNNING:
                # A map's undo, as a running map (`running`): whoever read it may account,
                # decide and end it; time-based actions stay the supervisor's.
                actions.extend(self._supervise_map(comp, spec, unwinding=False))
            elif comp.child_id is not None:  # the step's child undoing itself: its end decides
                actions.extend(
                    self._supervise_child(comp, definition.by_name[name], unwinding=False)
                )
            elif self.options.supervisor:
                actions.extend(self._supervise(comp, spec, unwinding=False))
        if actions or busy or failed is None:
            return actions
        name, comp = failed
        return [Finish(WorkflowStatus.FAILED, _operator_needed(name, comp, state))]

    def _blocked(self, name: str, position: int, pending: list[str]) -> bool:
        """REVERSE: one at a time, in order. PARALLEL: after every dependent's undo."""
        if self.definition.compensation_order == "REVERSE":
            return position > 0
        after = self.definition.dependents_closure[name]
        return any(other in after for other in pending)

    # ---------------------------------------------------------------------- supervision

    def _waits_on_units(
        self, rec: StepRecord, spec: TaskSpec, *, unwinding: bool
    ) -> list[Action] | None:
        """A unit that waits on units of its own (a map running its window of items, an
        attempt waiting on its child workflow): what their ends make of it, whoever looks;
        None for any other unit."""
        if rec.fanout is not None and rec.index is None and rec.status is StepStatus.RUNNING:
            return self._supervise_map(rec, spec, unwinding=unwinding)
        if rec.child_id is not None and rec.status is StepStatus.WAITING:
            return self._supervise_child(rec, spec, unwinding=unwinding)
        return None

    def _kind_supervises(self, rec: StepRecord, spec: TaskSpec) -> list[Action] | None:
        """A step's kind's own look (a resting step's), or None (a compensation's spec is
        not a step's: it is supervised as an attempt)."""
        return kind_of(spec).supervise(self, rec, spec) if isinstance(spec, StepSpec) else None

    def _supervise(self, rec: StepRecord, spec: TaskSpec, *, unwinding: bool) -> list[Action]:
        """Time-based actions on a QUEUED, RUNNING or WAITING step or compensation."""
        now, definition = self.now, self.definition
        if (own := self._kind_supervises(rec, spec)) is not None:
            return own
        if (waits_on := self._waits_on_units(rec, spec, unwinding=unwinding)) is not None:
            return waits_on
        if rec.status is StepStatus.QUEUED and _is_child_step(spec):
            # A retry: its next child starts when its backoff ends (no message, no pool).
            return [StartChild(rec)] if now >= (rec.available_at or 0) else []
        if rec.status is StepStatus.QUEUED:
            pool = self.options.pools.get(spec.pool)
            if _paused(pool):
                return []  # waiting for a paused pool is neither a lost message nor a timeout
            if rec.dispatched_at is None:  # a long backoff that was never sent
                available = rec.available_at or 0
                return [Dispatch(rec, lost=False)] if now >= available else []
            deadline = _lost_at(max(rec.dispatched_at, rec.available_at or 0), pool, definition)
            if now < deadline or _copy_may_wait(rec, pool):
                return []
            held = _resumed(pool) > rec.dispatched_at
            return [Dispatch(rec, lost=True, overdue_ms=now - deadline, held=held)]
        if not rec.status.in_flight:
            return []
        # The attempt's deadlines as the view and the watch read them (an unclaimed one: 0).
        deadlines = {d.why: d.at for d in _attempt_deadlines_of(spec, rec, 0)}
        timeout_at = deadlines["timeout"] or 0
        heartbeat_at = deadlines.get("heartbeat")
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
            rng=self.rng,
        )
        return [EndAttempt(rec, error_type, message, decision, outcome, now - deadline)]

    # -------------------------------------------------------------- child-workflow steps

    def _supervise_child(self, rec: StepRecord, spec: TaskSpec, *, unwinding: bool) -> list[Action]:
        """A step (or compensation) waiting for its child workflow: its end decides the
        attempt; past TimeoutSeconds, or when the parent unwinds, the child is asked to cancel
        and waited for, so a parent is never terminal while a child is not. Needs the child's
        item (`state.children`); without it, nothing is planned."""
        child = self.state.children.get(rec.child_id or "")
        if child is None:
            return []
        if child.status.terminal:
            return self._child_ended(rec, spec, child, unwinding=unwinding)
        if rec.kind == "compensation" or child.status.unwinding:
            return []  # it is undoing itself: wait for its end
        if unwinding and rec.child_cancel is None:
            return [CancelChild(rec, child, "unwinding")]
        deadline = (rec.claimed_at or 0) + spec.timeout_seconds * 1000
        if self.options.supervisor and rec.child_cancel is None and self.now >= deadline:
            return [CancelChild(rec, child, "timeout", self.now - deadline)]
        return []

    def _child_ended(
        self, rec: StepRecord, spec: TaskSpec, child: WorkflowRecord, *, unwinding: bool
    ) -> list[Action]:
        if rec.kind == "compensation":
            # The child was asked to undo itself: COMPENSATED is this compensation's success;
            # FAILED (its own undo failed) needs an operator, as any failed compensation.
            if child.status is WorkflowStatus.COMPENSATED:
                return [ChildSucceeded(rec, child)]
            if child.status is WorkflowStatus.SUCCEEDED:
                # A read of the child from before the ask: the unit is created after the
                # ask lands, and an asked child never ends SUCCEEDED again. Nothing to decide
                # until a read sees its undo's end (found by `make sim`, seeds 5632 and 9560:
                # an operator's slow cancel failed the undo on such a read, and the parent
                # ended FAILED while its child was still undoing itself).
                return []
            gave_up: retry.RetryDecision = retry.GiveUp("permanent")
            error_type, message = (
                "ChildCompensationFailed",
                f"child {child.workflow_id} ended {child.status.value}",
            )
            return [EndAttempt(rec, error_type, message, gave_up, "error")]
        if child.status is WorkflowStatus.SUCCEEDED:
            return [ChildSucceeded(rec, child)]
        if rec.child_cancel == "timeout":
            error_type, outcome = TIMEOUT, "timeout"
            message = (
                f"attempt {rec.attempt} exceeded TimeoutSeconds ({spec.timeout_seconds}); "
                f"its child {child.workflow_id} ended {child.status.value}"
            )
        else:
            ended = child_end(child.workflow_id, child.status.value, loads(child.error))
            assert ended is not None
            error_type, message, outcome = (
                ended.error_type or "ChildWorkflowFailed",
                ended.message or "",
                "error",
            )
        decision = retry.decide(
            spec.retry,
            attempt=rec.attempt - rec.budget_from,
            error_type=error_type,
            permanent=False,
            unwinding=unwinding,
            rng=self.rng,
        )
        return [EndAttempt(rec, error_type, message, decision, outcome)]

    # ------------------------------------------------------------------------ map steps

    def _supervise_map(self, rec: StepRecord, spec: TaskSpec, *, unwinding: bool) -> list[Action]:
        """A running map (or map compensation): its own writes, decided from its counters,
        and each unit of its window supervised as a step is (docs/architecture.md, "Map steps
        and child workflows"). Nothing outside the window can be due. Anyone who read the
        window may plan the writes that do not wait on time (account, decide, cancel, finish,
        halt); only the supervisor re-sends, times out and enters a dead opener's chunks."""
        m = rec.fanout
        assert m is not None
        units = self.state.windows.get((rec.kind, rec.name))
        supervisor = self.options.supervisor
        if m.status == "RUNNING":
            if unwinding and rec.kind == "step":
                return [HaltMap(rec)]
            decided = map_outcome(m, spec, rec.kind)
            if decided != "RUNNING":
                return [DecideMap(rec, decided)]
        elif m.drained:
            return [FinishMap(rec)]
        actions: list[Action] = []
        if supervisor and m.status == "RUNNING" and m.opened < min(m.total, m.stride):
            actions.append(OpenMore(rec))
        if units is None:
            return actions  # its window was not read: a look will
        stopped = m.status != "RUNNING"
        for position in sorted(m.window):
            unit = units.get(position)
            if unit is None:
                continue
            if unit.status.terminal:
                actions.append(AccountItem(rec, position, _OUTCOMES[unit.status]))
            elif stopped and unit.status in (StepStatus.PENDING, StepStatus.QUEUED):
                actions.append(Cancel(unit))  # never claimed: it had no effect
            elif supervisor:
                actions.extend(self._supervise_unit(unit, spec, unwinding=stopped or unwinding))
            else:
                actions.extend(self._unit_child_ended(unit, spec, unwinding=stopped or unwinding))
        return actions

    def _unit_child_ended(
        self, unit: StepRecord, spec: TaskSpec, *, unwinding: bool
    ) -> list[Action]:
        """An item whose child workflow ended: recorded by whoever reads it (the child's
        finisher advances this workflow, issue 40.5), as a task item's end is."""
        if unit.child_id is None or unit.status is not StepStatus.WAITING:
            return []
        child = self.state.children.get(unit.child_id)
        if child is None or not child.status.terminal:
            return []
        return self._child_ended(unit, spec, child, unwinding=unwinding)

    def _supervise_unit(self, unit: StepRecord, spec: TaskSpec, *, unwinding: bool) -> list[Action]:
        """One unit of a map's window: a step's supervision; a unit not yet written is an item
        whose message went out when it entered the window (`dispatched_at`). While the
        workflow is paused nothing is sent again (the resume's look does it)."""
        if unit.status is StepStatus.PENDING:
            pool = self.options.pools.get(spec.pool)
            if self.paused_now or _paused(pool):
                return []
            deadline = _lost_at(unit.dispatched_at or 0, pool, self.definition)
            if self.now < deadline:
                return []
            if _is_child_step(spec):  # its starter died after it entered: start its child
                return [StartChild(unit)]
            held = _resumed(pool) > (unit.dispatched_at or 0)
            return [Dispatch(unit, lost=True, overdue_ms=self.now - deadline, held=held)]
        actions = self._supervise(unit, spec, unwinding=unwinding)
        if self.paused_now:
            actions = [a for a in actions if not isinstance(a, Dispatch | StartChild)]
        return actions

    # --------------------------------------------------------------------------- waits

    def start_rest(self, rec: StepRecord, spec: StepSpec, ready_at: int) -> list[Action]:
        """A resting step (its kind's `rests`) to rest WAITING until its deadline, or to fail
        if its kind cannot read one (a Wait's `UntilPath` reads the input from its
        document)."""
        kind = kind_of(spec)
        document = self.options.documents.get(spec.name)
        if kind.reads_document(spec) and document is None:
            return []  # the caller assembles it (`conditions_due`); planned again then
        at = kind.rest_until(spec, self.now, ready_at, document)
        if isinstance(at, str):
            return [FailWait(rec, at)]
        # A time already past (an `Until` behind us, a start delayed by a pause) is now: a
        # wait never rests under a deadline older than its own start.
        return [StartWait(rec, max(at, self.now))]

    def supervise_rest(self, rec: StepRecord, spec: StepSpec) -> list[Action]:
        """At a resting step's deadline (never earlier), what its kind does then; before it,
        what its kind does meanwhile; start one a resume queued whose start was lost."""
        if rec.status is StepStatus.QUEUED:
            return self.start_rest(rec, spec, self.now)
        if rec.status is not StepStatus.WAITING or rec.wake_at is None:
            return []
        kind = kind_of(spec)
        if self.now >= rec.wake_at:
            return [kind.at_deadline(rec, self.now - rec.wake_at)]
        return kind.while_resting(rec)


# ------------------------------------------------------------------------------- helpers

_OUTCOMES = {
    StepStatus.SUCCEEDED: "succeeded",
    StepStatus.FAILED: "failed",
    StepStatus.CANCELLED: "cancelled",
    StepStatus.SKIPPED: "cancelled",
}


def _empty_and_decided(m: MapState | None) -> bool:
    """A map opened with no item: decided at its open, nothing in its window (no shard of it
    to read)."""
    return m is not None and m.total == 0 and m.status != "RUNNING"


def _is_child_step(spec: TaskSpec) -> bool:
    """A step whose attempts (a map's: whose items) start child workflows."""
    return isinstance(spec, StepSpec) and spec.workflow is not None


def map_outcome(m: MapState, spec: TaskSpec, kind: Kind = "step") -> str:
    """What a map's counters decide: a map step by its tolerance (`decisions.fanout`); a
    map's compensation tolerates nothing (an undo that fails for good needs an operator)."""
    if kind == "step" and isinstance(spec, StepSpec) and spec.map is not None:
        return map_verdict(m, spec.map)
    if m.status != "RUNNING":
        return m.status
    if m.failed:
        return "FAILED"
    return "SUCCEEDED" if m.accounted == m.total else "RUNNING"


def _succeeded(rec: StepRecord | None) -> bool:
    return rec is not None and rec.status is StepStatus.SUCCEEDED


def _copy_may_wait(rec: StepRecord, pool: PoolState | None) -> bool:
    """A task sent again once already (`resent_at`) is not sent a third time while its
    pool's queue holds anything (or nobody read it): its copy may be waiting behind a
    backlog, and each copy would cost a receive, a read and an invocation (a backed-up pool
    multiplied itself: 100 queued tasks became 3,100 messages in 5 minutes). So at most one
    extra copy per task is in flight; a queue that empties settles whether it was lost."""
    if rec.resent_at is None:
        return False
    return pool is None or pool.waiting is None or pool.waiting > 0


def conditions_due(state: WorkflowState, definition: Definition) -> list[str]:
    """The steps a plan of `state` may evaluate a condition (or an `UntilPath`) of: ready,
    every dependency done (and, in a bounded read, known). The caller assembles each one's
    document (`choice.document`)."""
    out = []
    for spec in definition.steps:
        rec = state.steps.get(spec.name)
        if rec is None or not kind_of(spec).needs_document(spec, rec):
            continue
        if all(d in state.steps for d in spec.depends_on) and _ready_at(state, spec) is not None:
            out.append(spec.name)
    return out


def start_actions(definition: Definition, state: WorkflowState, input_value: Any) -> list[Action]:
    """What a new workflow's start does with its roots: send each, or skip the ones whose
    condition is false on the input (a root's condition can read nothing else)."""
    actions: list[Action] = []
    document = choice.document(input_value, {})
    for name in definition.roots:
        spec = definition.by_name[name]
        rec = state.steps[name]
        if spec.condition is not None and not choice.evaluate(spec.condition, document):
            actions.append(Skip(rec))
        else:
            created = state.workflow.created_at
            actions.append(kind_of(spec).plan_at_start(rec, spec, created, document))
    return actions


def compensated(rec: StepRecord, spec: StepSpec) -> bool:
    """Whether unwinding must undo this step (its kind's `compensated`)."""
    return kind_of(spec).compensated(spec, rec)


def compensation_order(state: WorkflowState, definition: Definition) -> list[str]:
    """The steps to undo, the one to undo first first.

    Recorded successes are placed by completion (`finished_at`), steps whose outcome is
    ambiguous by their first claim (`first_claimed_at`); later first. Equal times (steps that
    did not depend on each other, or a simulated clock) fall back to depth in the DAG, so a
    step is always undone before the steps it depended on.
    """
    keyed = []
    for name, rec in state.steps.items():
        spec = definition.by_name[name]
        if not compensated(rec, spec):
            continue
        at = rec.finished_at if rec.status is StepStatus.SUCCEEDED else rec.first_claimed_at
        keyed.append((at or 0, definition.depth[name], name))
    keyed.sort(reverse=True)
    return [name for _, _, name in keyed]


def forward_outcome(rec: StepRecord) -> str:
    """`succeeded` (a recorded success: its output is known) or `ambiguous` (it may or may
    not have acted: an attempt crashed, timed out, was fenced out or failed)."""
    return "succeeded" if rec.status is StepStatus.SUCCEEDED else "ambiguous"


def _failure_reason(rec: StepRecord) -> str:
    error = loads(rec.error) or {}
    return dumps(
        {
            "type": error.get("type", "StepFailed"),
            "message": f"step '{rec.name}' failed: {error.get('message', 'no details')}",
            "step": rec.name,
        }
    )


def _operator_needed(name: str, comp: StepRecord, state: WorkflowState) -> str:
    cause: Any = loads(state.workflow.error)
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


def next_due(
    state: WorkflowState,
    definition: Definition,
    now: int,
    pools: Mapping[str, PoolState] | None = None,
) -> int | None:
    """The latest valid `due_at` for a live workflow (docs/architecture.md, the deadline
    rule), or None when nothing needs watching (terminal, or PAUSED with nothing in flight and
    no pause timeout: an operator action puts it back).

    Every exact deadline of every live unit counts; so does `max(now, available) + g(u)` for
    every unit an agent may write without the supervisor (a sent task message, a ready step
    dispatched implicitly, a running attempt): whatever agents do from there creates
    deadlines at least `g(u)` after they act. Units nobody but a callback, a timer, a person
    or an operator can move (a callback WAITING, a long backoff not sent) count with their
    exact deadlines only: those writers pull `due_at` forward themselves.
    """
    wf = state.workflow
    if wf.status.terminal:
        return None
    pools = pools or {}
    records: list[tuple[Kind, StepRecord]] = [("step", r) for r in state.steps.values()]
    records += [("compensation", r) for r in state.compensations.values()]
    if wf.status is WorkflowStatus.PAUSED:
        return _paused_due(state, definition, now, records)
    running = wf.status is WorkflowStatus.RUNNING
    candidates: list[int] = []
    for kind, rec in records:
        candidates += _unit_deadlines(state, definition, now, pools, kind, rec, running)
    # Live but nothing to wait for: the planner's own next write (finish, unwind, the next
    # compensation) is due now; it was planned and lost, or its writer died before it.
    return min([min(candidates, default=now), *_workflow_deadline(state, definition)])


def _workflow_deadline(state: WorkflowState, definition: Definition) -> list[int]:
    """The workflow's own TimeoutSeconds, while it runs (`decisions.workflow_timeout`)."""
    at = workflow_timeout.deadline(state, definition)
    return [] if at is None else [at]


def _kind_watch_due(
    state: WorkflowState,
    definition: Definition,
    now: int,
    kind: Kind,
    rec: StepRecord,
    running: bool,
) -> list[int] | None:
    """A step's kind's own watch times (a resting step's), or None: an attempt's."""
    if kind != "step":
        return None
    spec = definition.by_name[rec.name]
    return kind_of(spec).watch_due(rec, now, running, lambda: _ready_at(state, spec))


def _unit_deadlines(
    state: WorkflowState,
    definition: Definition,
    now: int,
    pools: Mapping[str, PoolState],
    kind: Kind,
    rec: StepRecord,
    running: bool,
) -> list[int]:
    """What one live unit adds to `next_due`: its exact deadlines, and `max(now, available) +
    g(u)` if an agent may write it."""
    own = _kind_watch_due(state, definition, now, kind, rec, running)
    if own is not None:
        return own
    if rec.fanout is not None and rec.status is StepStatus.RUNNING:
        return _map_deadlines(state, definition, now, pools, kind, rec, running)
    if rec.child_id is not None and rec.status is StepStatus.WAITING:
        return _child_deadlines(state, definition, now, kind, rec)
    gap = reach_gap(definition, kind, rec.name, running)
    if rec.status is StepStatus.QUEUED:
        pool = pools.get(definition.spec(kind, rec.name).pool)
        available = rec.available_at or now
        if rec.dispatched_at is None:
            # A long backoff's end, when the supervisor sends it; while its pool is paused
            # the pool's resume (no write on this workflow) makes it due: looked at every g.
            return [max(available, now) + gap if _paused(pool) else available]
        out = []
        if not _paused(pool):
            lost_at = _lost_at(max(rec.dispatched_at, available), pool, definition)
            if lost_at <= now and _copy_may_wait(rec, pool):
                lost_at = now + definition.dispatch_timeout_seconds * 1000  # ask again
            out.append(lost_at)
        # Its message may be claimed any time from `available` (after its pool's resume).
        return [*out, max(available, now) + gap]
    if rec.status is StepStatus.RUNNING:
        return [*_attempt_deadlines(definition, kind, rec, now), now + gap]
    if rec.status is StepStatus.WAITING:
        # A callback: only its own deadlines; the callback pulls due_at when it answers.
        return _attempt_deadlines(definition, kind, rec, now)
    if rec.status is StepStatus.PENDING and running and kind == "step":
        spec = definition.by_name[rec.name]
        ready_at = _ready_at(state, spec)
        if ready_at is None:
            return []
        pool = pools.get(spec.pool)
        lost = [] if _paused(pool) else [_lost_at(ready_at, pool, definition)]
        return [*lost, now + gap]  # sent when it became ready: claimable any time
    return []


def _map_deadlines(
    state: WorkflowState,
    definition: Definition,
    now: int,
    pools: Mapping[str, PoolState],
    kind: Kind,
    rec: StepRecord,
    running: bool,
    paused: bool = False,
) -> list[int]:
    """A running map's (or map compensation's): its own writes that wait on nothing are due
    at once (a verdict, a drained window, a halt, a first window a dead opener left, an
    ended unit still in the window); else each unit of its window as a step's, an item not
    yet written by its message's dispatch grace from when it entered the window. Items outside
    the window cannot be due: never sent, or accounted. Paused: nothing is sent again, so an
    unclaimed item is looked at every dispatch grace (a claim read before the pause may still
    land, and its attempt must be watched)."""
    m = rec.fanout
    assert m is not None
    spec = definition.spec(kind, rec.name)
    if m.status == "RUNNING" and (
        (kind == "step" and not running and not paused)
        or map_outcome(m, spec, kind) != "RUNNING"
        or m.opened < min(m.total, m.stride)
    ):
        return [now]
    if m.status != "RUNNING" and (m.drained or not m.loaded):
        return [now]
    units = state.windows.get((kind, rec.name))
    if units is None:
        return [now]  # its window was not read: look at it now
    grace = definition.dispatch_timeout_seconds * 1000
    out: list[int] = []
    for position in m.window:
        unit = units.get(position)
        stopped = m.status != "RUNNING"
        if unit is None or unit.status.terminal or (stopped and not unit.status.in_flight):
            out.append(now)  # to account, or never claimed and to cancel
        elif paused and not unit.status.in_flight:
            sent = unit.dispatched_at or now
            out.append(sent + grace if sent + grace > now else now + grace)
        elif paused:
            out.extend(_attempt_deadlines(definition, kind, unit, now))
        elif unit.status is StepStatus.PENDING:  # entered the window, no unit yet
            pool = pools.get(spec.pool)
            gap = reach_gap(definition, kind, rec.name, running)
            lost = [] if _paused(pool) else [_lost_at(unit.dispatched_at or now, pool, definition)]
            out.extend([*lost, now + gap])
        else:
            out.extend(_unit_deadlines(state, definition, now, pools, kind, unit, running))
    return out


def _child_deadlines(
    state: WorkflowState, definition: Definition, now: int, kind: Kind, rec: StepRecord
) -> list[int]:
    """A unit waiting for its child workflow: due at once when the child has ended (its end
    to record); else its TimeoutSeconds (a step whose child was not asked to cancel yet). The
    child's end pulls the parent's entry itself (the deadline rule), so nothing else counts."""
    child = state.children.get(rec.child_id or "")
    if child is None or child.status.terminal:
        return [now]
    if kind == "step" and rec.child_cancel is None:
        timeout = definition.by_name[rec.name].timeout_seconds
        return [(rec.claimed_at or now) + timeout * 1000]
    return []


def reach_gap(definition: Definition, kind: Kind, name: str, running: bool) -> int:
    """`g(u)`: a step's reach while the workflow runs; while it unwinds, what an agent's
    write can start is a compensation (or the step's own attempt, already claimed)."""
    if kind == "step" and running:
        return definition.reach_gap_ms[name]
    own = 1000 * definition.spec(kind, name).liveness_seconds
    return min(own, definition.compensation_gap_ms)


def _attempt_deadlines(definition: Definition, kind: Kind, rec: StepRecord, now: int) -> list[int]:
    own = kind_of(definition.by_name[rec.name]).paused_due(rec, now) if kind == "step" else None
    if own is not None:
        return own
    spec = definition.spec(kind, rec.name)
    return [d.at for d in _attempt_deadlines_of(spec, rec, now) if d.at is not None]


def _paused_due(
    state: WorkflowState,
    definition: Definition,
    now: int,
    records: list[tuple[Kind, StepRecord]],
) -> int | None:
    """A paused workflow is watched only for its attempts in flight and its pause timeout.

    No agent event creates a deadline while it is paused (nothing is dispatched; a retry is
    queued, not sent), and every operator action that ends the pause writes the workflow due
    at once.
    """
    candidates: list[int] = []
    wf = state.workflow
    if definition.pause_timeout_seconds is not None and wf.paused_at is not None:
        candidates.append(wf.paused_at + definition.pause_timeout_seconds * 1000)
    for kind, rec in records:
        if rec.fanout is not None and rec.status is StepStatus.RUNNING:
            pools: Mapping[str, PoolState] = {}
            candidates.extend(
                _map_deadlines(state, definition, now, pools, kind, rec, False, paused=True)
            )
        elif rec.child_id is not None and rec.status is StepStatus.WAITING:
            candidates.extend(_child_deadlines(state, definition, now, kind, rec))
        elif rec.status.in_flight:
            candidates.extend(_attempt_deadlines(definition, kind, rec, now))
    return min(candidates, default=None)
