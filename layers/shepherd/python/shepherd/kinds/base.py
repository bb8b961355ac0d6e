"""The step-kind protocol (issue 40.1): what the engine asks of a step's kind instead of
testing which kind it holds.

A kind is a stateless object (one per kind, `shepherd.kinds.kind_of` finds a step's): every
question whose answer differs between a task, a map, a child workflow, a Wait, an Approval
and a WaitForSignal is a member here, answered once in that kind's module. The Condition is
not a kind: any step may have one, and the planner evaluates it before it asks the kind
anything (`planner._ready`). The defaults are a task's answers where a task has one; the
resting kinds (nothing runs: no message, no claim) override the rest group.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from shepherd.decisions import transitions as tx
from shepherd.decisions.actions import Action, Dispatch, FailWait, SendImplicit, StartWait
from shepherd.definitions import Definition, StepSpec
from shepherd.model import OutgoingTask, StepRecord, StepStatus, WorkflowState


class Planning(Protocol):
    """What a kind's planning uses of the planner (`decisions.planner._Planner`): the time
    of the plan and the planner's handling of each way a step can start."""

    now: int

    def document(self, name: str) -> Any:
        """What a ready step's condition reads (`choice.document`), or None: not assembled."""
        ...

    def ready_task(self, rec: StepRecord, spec: StepSpec, ready_at: int) -> list[Action]:
        """Who sends a ready task (or map) step's message, and when."""
        ...

    def ready_child(self, rec: StepRecord, ready_at: int) -> list[Action]:
        """Who starts a ready child-workflow step's child, and when."""
        ...

    def start_rest(self, rec: StepRecord, spec: StepSpec, ready_at: int) -> list[Action]:
        """A resting step entering WAITING (or failing: an unreadable time)."""
        ...

    def supervise_rest(self, rec: StepRecord, spec: StepSpec) -> list[Action]:
        """A look at a resting step: at its deadline, or before it."""
        ...


class RestWrites(Protocol):
    """What a resting kind's writes use of the engine (the scheduler gives them): one step
    write with the writes that go with it, the watch entry's pull, a signal handed over."""

    def step_with(
        self, state: WorkflowState, seen: StepRecord, write: tx.Write, extras: Sequence[tx.Write]
    ) -> StepRecord | None:
        """Apply `write` with `extras` in one transaction: the new record, or None if lost."""
        ...

    def pull_due_to(self, state: WorkflowState, at: int) -> None:
        """Make `at` the watch entry's latest due before a rest no reach gap counted."""
        ...

    def take_signal(
        self, state: WorkflowState, definition: Definition, rec: StepRecord
    ) -> StepRecord | None:
        """Hand the oldest kept signal of its name to a resting WaitForSignal step."""
        ...


class Compensations(Protocol):
    """How the engine starts a compensation (the scheduler gives it): a task's unit sent to
    its pool, a child workflow undoing itself, a map over the items that may have acted.
    Each appends the tasks to send to `tasks` and says whether it started (False: lost)."""

    def task(
        self,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool: ...

    def child(self, state: WorkflowState, name: str, now: int) -> bool: ...

    def map(
        self,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
        *,
        children: bool,
    ) -> bool: ...


R_co = TypeVar("R_co", covariant=True)
R = TypeVar("R")


class Claims(Protocol[R_co]):
    """What a step's task message may do in the agent runtime (`engine.agent`), for its
    kind to choose: claim the attempt and run its agent, or open a map."""

    def claim_and_run(self) -> R_co: ...

    def open_map(self) -> R_co: ...


class StepKind(ABC):
    """One kind of step. Subclasses set the class flags and override what they do
    differently; none holds state, so one instance serves every step of its kind."""

    name: ClassVar[str]
    # Sent to an agent pool as a task message, claimed and run by an agent.
    runs_agent: ClassVar[bool] = False
    # Rests WAITING with nothing running until its deadline or an outside answer (a person's,
    # a signal's): no message, no claim, no attempt; unwinding cancels it (it never acted).
    rests: ClassVar[bool] = False
    # Fans out over items (`Map`): its record carries the map's counters (`rec.fanout`).
    fans_out: ClassVar[bool] = False

    @abstractmethod
    def matches(self, spec: StepSpec) -> bool:
        """Whether `spec` is of this kind (the registry asks in order; the first wins)."""

    def starts_children(self, spec: StepSpec) -> bool:
        """Whether its attempts (a map's: its items) start child workflows."""
        return False

    # ----------------------------------------------------------------------- planning

    def plan_ready(
        self, p: Planning, rec: StepRecord, spec: StepSpec, ready_at: int
    ) -> list[Action]:
        """A PENDING step whose dependencies succeeded (and whose condition holds): what a
        plan does with it. A task's message is sent by whoever owns it (`Planning.ready_task`)."""
        return p.ready_task(rec, spec, ready_at)

    def inputs_also_for(self, spec: StepSpec) -> tuple[str, ...]:
        """The workflow types whose InputSchema the step's input must also fit (an operator's
        replacement input is checked against them before the resume)."""
        return ()

    def on_message(self, c: Claims[R]) -> R:
        """What the agent runtime does with this step's task message: claim it and run the
        agent (a task; a map opens its map instead)."""
        return c.claim_and_run()

    def plan_resend(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action]:
        """A resume's plan of a QUEUED step: a task is sent again."""
        return [Dispatch(rec, lost=False)]

    def plan_at_start(
        self, rec: StepRecord, spec: StepSpec, created_at: int, document: Any
    ) -> Action:
        """A root (its condition holding) as its workflow starts: a task's message goes out
        with the start (the starter sends it)."""
        return SendImplicit(spec.name)

    def needs_document(self, spec: StepSpec, rec: StepRecord) -> bool:
        """Whether a plan of this step may read its document (`choice.document`, assembled
        by the caller, `planner.conditions_due`): a PENDING step's condition."""
        return spec.condition is not None and rec.status is StepStatus.PENDING

    def supervise(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action] | None:
        """A look's own plan of the step, or None: the planner's supervision of an attempt
        (timeouts, heartbeats, lost messages, a map's window, a child's end)."""
        return None

    def cancelled_at_once(self, rec: StepRecord) -> bool:
        """Whether unwinding cancels it as it is, with nothing to wait for or undo."""
        return False

    def fenced_by_timeout(self, rec: StepRecord) -> bool:
        """Whether its workflow's TimeoutSeconds fences it (`decisions.workflow_timeout`): an
        agent's attempt in flight fails for good, so its late result is refused. Other kinds
        stop as the unwinding or the pause that follows stops them."""
        return rec.status in (StepStatus.RUNNING, StepStatus.WAITING)

    # ---------------------------------------------------------------------- deadlines

    def deadline(self, spec: StepSpec, rec: StepRecord) -> list[tuple[int, str]] | None:
        """The step's own next deadline as the supervisor's view shows it (at most one: when
        and what), or None: an attempt's, by the one deadline rule (`decisions.deadlines`)."""
        return None

    def watch_due(
        self, rec: StepRecord, now: int, running: bool, ready_at: Callable[[], int | None]
    ) -> list[int] | None:
        """When its workflow's watch entry must be due for it (`planner.next_due`), or None:
        an attempt's times by the deadline rule. `running`: the workflow runs (else it is
        paused or unwinds)."""
        return None

    def paused_due(self, rec: StepRecord, now: int) -> list[int] | None:
        """Its deadlines while its workflow is paused, or None: its attempt's."""
        return None

    # ------------------------------------------------------------------ resting kinds

    def reads_document(self, spec: StepSpec) -> bool:
        """Whether its rest needs the step's document (`choice.document`) to be planned."""
        return False

    def rest_until(self, spec: StepSpec, now: int, ready_at: int, document: Any) -> int | str:
        """A resting step entering WAITING at `now` (ready since `ready_at`): when its
        deadline falls, or why it cannot rest (a `States.Runtime` message)."""
        raise TypeError(f"a {self.name} step does not rest")

    def deadline_label(self, spec: StepSpec) -> str:
        """What a resting step's deadline (`wake_at`) is called in the supervisor's view."""
        raise TypeError(f"a {self.name} step does not rest")

    def timed_out(self, spec: StepSpec) -> str:
        """The message of the error a resting step fails with at its deadline."""
        raise TypeError(f"a {self.name} step does not rest")

    def approvers(self, spec: StepSpec) -> tuple[str, ...] | None:
        """Who may answer it besides its workflow's owner, or None: no person answers it
        (only an Approval step is answered, `engine.approvals`)."""
        return None

    def at_deadline(self, rec: StepRecord, late_ms: int) -> Action:
        """What a look does to a resting step whose deadline passed `late_ms` ago."""
        raise TypeError(f"a {self.name} step does not rest")

    def while_resting(self, rec: StepRecord) -> list[Action]:
        """What a look does to a resting step before its deadline (nothing, by default)."""
        return []

    def start_rest(
        self,
        w: RestWrites,
        state: WorkflowState,
        definition: Definition,
        seen: StepRecord,
        now: int,
        wake_at: int,
    ) -> bool:
        """The write that puts a resting step WAITING until `wake_at` (False: it lost)."""
        raise TypeError(f"a {self.name} step does not rest")

    def leaving_rest(
        self, state: WorkflowState, spec: StepSpec, seen: StepRecord, expires_at: int
    ) -> list[tx.Write]:
        """What goes with the write that ends a step's rest (an answer, its timeout, a
        cancel): nothing, but for an Approval's inbox entries."""
        return []

    # --------------------------------------------------------------------- unwinding

    def start_compensation(
        self,
        c: Compensations,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool:
        """Unwinding reached this step: start its compensation (a task's: its unit, sent)."""
        return c.task(state, definition, name, now, tasks)

    def compensated(self, spec: StepSpec, rec: StepRecord) -> bool:
        """Whether unwinding must undo this step: it declares a compensation, and it
        succeeded (`When: SUCCEEDED`) or was claimed at least once (`When: ATTEMPTED`, the
        default: any attempt may have applied its effect). A step never claimed is never
        compensated."""
        if spec.compensation is None:
            return False
        if rec.status is StepStatus.SUCCEEDED:
            return True
        return spec.compensation.when == "ATTEMPTED" and rec.first_claimed_at is not None


class DecidedWhenReady(StepKind):
    """A kind decided in the write that finds it ready (Pass, Choice): no attempt, so no
    deadline; a look is due only when that writer died before the write (or a resume queued
    it), never before it is ready."""

    def deadline(self, spec: StepSpec, rec: StepRecord) -> list[tuple[int, str]] | None:
        return []  # no attempt: nothing to time

    def watch_due(
        self, rec: StepRecord, now: int, running: bool, ready_at: Callable[[], int | None]
    ) -> list[int] | None:
        if not running:
            return []
        if rec.status is StepStatus.QUEUED:
            return [now]
        if rec.status is StepStatus.PENDING:
            at = ready_at()
            return [] if at is None else [at]
        return []

    def paused_due(self, rec: StepRecord, now: int) -> list[int] | None:
        return []


class Resting(StepKind):
    """A kind that rests WAITING with nothing running (Wait, Approval, WaitForSignal): it
    enters WAITING by whoever sees it ready first, a look acts at its deadline, and
    unwinding cancels it while it rests (it never acted)."""

    rests = True

    def plan_ready(
        self, p: Planning, rec: StepRecord, spec: StepSpec, ready_at: int
    ) -> list[Action]:
        return p.start_rest(rec, spec, ready_at)  # by whoever sees it first

    def plan_resend(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action]:
        return p.start_rest(rec, spec, p.now)  # a failed wait rests again

    def plan_at_start(
        self, rec: StepRecord, spec: StepSpec, created_at: int, document: Any
    ) -> Action:
        at = self.rest_until(spec, created_at, created_at, document)
        return FailWait(rec, at) if isinstance(at, str) else StartWait(rec, at)

    def needs_document(self, spec: StepSpec, rec: StepRecord) -> bool:
        """Whether a plan of this step may read its document (`choice.document`, assembled
        by the caller, `planner.conditions_due`): a PENDING step's condition."""
        return spec.condition is not None and rec.status is StepStatus.PENDING

    def supervise(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action] | None:
        return p.supervise_rest(rec, spec)

    def cancelled_at_once(self, rec: StepRecord) -> bool:
        return rec.status is StepStatus.WAITING

    def fenced_by_timeout(self, rec: StepRecord) -> bool:
        return False  # nothing runs: the unwinding cancels it, a pause leaves it resting

    def deadline(self, spec: StepSpec, rec: StepRecord) -> list[tuple[int, str]] | None:
        """A Wait wakes, an Approval or a WaitForSignal times out, at `wake_at`; nothing runs
        before."""
        if rec.status is not StepStatus.WAITING or rec.wake_at is None:
            return []
        return [(rec.wake_at, self.deadline_label(spec))]

    def watch_due(
        self, rec: StepRecord, now: int, running: bool, ready_at: Callable[[], int | None]
    ) -> list[int] | None:
        """Its wake time while it rests (only the supervisor moves it; while the workflow
        unwinds, its cancel is due at once); a ready one not yet resting (its starter died),
        or one a resume queued, is due at once."""
        if rec.status is StepStatus.WAITING:
            return [rec.wake_at if rec.wake_at is not None and running else now]
        if rec.status is StepStatus.QUEUED and running:
            return [now]
        if rec.status is StepStatus.PENDING and running:
            at = ready_at()
            return [] if at is None else [at]
        return []

    def paused_due(self, rec: StepRecord, now: int) -> list[int] | None:
        return [rec.wake_at if rec.wake_at is not None else now]  # a resting wait (paused)

    def start_rest(
        self,
        w: RestWrites,
        state: WorkflowState,
        definition: Definition,
        seen: StepRecord,
        now: int,
        wake_at: int,
    ) -> bool:
        write = tx.start_wait(seen, now, wake_at, None)
        return w.step_with(state, seen, write, []) is not None
