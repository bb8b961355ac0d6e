"""Amazon States Language on the engine (issue 42.2): the supervised driver of
`machine.Interpreter`.

* **The frame is the workflow's cursor.** The workflow item holds the interpreter's frame and
  what the driver adds to it (`asl_cursor`: the current unit, a Wait's wake time, the path's
  next sequence number) under a version (`fv`). Only a write guarded by that version (and the
  workflow still RUNNING) moves it.
* **A visit of a Task is a unit**: a step item named `V#<state>#<visit>` in a partition of
  the workflow's own (`ASLV#<workflow id>`, so a look or a view reads one workflow item however
  long a loop runs), created QUEUED in the transaction that moves the frame to it, its message sent
  after that write. It is claimed with a fenced `attempt`, heartbeats, and has a lease from
  the Task's TimeoutSeconds and HeartbeatSeconds. ASL's retriers decide retries: a retry is
  attempt a+1 of the same unit (QUEUED, `available_at` the retrier's delay), so a stale
  attempt can no longer write.
* **The write that ends a unit advances the frame**: one transaction ends the unit (fenced),
  moves the frame through every control state that follows (Pass, Choice, Succeed, Fail, a
  due Wait: no message, no agent), creates the next unit and writes the path taken. A caught
  error moves the frame to the Catch's Next in that write; nothing unwinds.
* **A Wait rests**: the cursor keeps its wake time and the workflow's watch entry is due
  then; the supervisor's look wakes it (`look`).
* **The end**: Succeed (or the last state) ends the workflow SUCCEEDED with the machine's
  output (`asl_output`); a Fail state or an uncaught error ends it FAILED with `error`,
  `cause` and `failure: "definition"` (a designed failure, not an operator's).
* **The path** (each state entered, in order, with its input and output) is written as items
  of the partition `ASLPATH#<workflow id>` (sort key: the entry's sequence number), never
  read back to advance: a loop's transition costs the same at its last iteration as at its
  first.

* **Parallel and Map are children**: each branch or item a child ASL workflow created with the
  write that reaches the state; the last child's end moves the parent on.
* **The machine's TimeoutSeconds** is a deadline on the cursor; the look at it ends it FAILED.
* **Service Tasks** (a service integration, `states:startExecution`, a Lambda function mapped to
  the integration pool) are units of Shepherd's integration pool, carried out here (`run`)
  with the runner's own shaping; a `.waitForTaskToken` Task (or a `startExecution.sync`) rests
  WAITING after its call until its token's callback (`callback`) or its child's end
  (`child_ended`).

Not built here yet: more than 40 branches or items, a MaxConcurrency below the item count,
operator actions but cancel.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import uuid as _uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from shepherd import jsonsafe
from shepherd.conditions import Eq, Item, Missing, Update, all_of
from shepherd.decisions import transitions as tx
from shepherd.decisions.retry import GiveUp, RetryIn
from shepherd.definitions import TaskSpec, asl_task, integrations_task
from shepherd.engine import listing
from shepherd.engine.outputs import workflow_output
from shepherd.engine.tokens import TaskToken, matches
from shepherd.errors import (
    HeartbeatTooSoon,
    ShepherdError,
    TaskTokenInvalid,
    TaskTokenStale,
    UnknownWorkflowType,
)
from shepherd.keys import VISIT_PREFIX, WF_SK, item_sk, visits_pk, wf_pk
from shepherd.model import (
    OutgoingTask,
    StepRecord,
    StepStatus,
    TaskMessage,
    WorkflowRecord,
    WorkflowState,
    WorkflowStatus,
)

from . import integrations, lambdas, workflow
from .errors import RUNTIME, TASK_FAILED, StatesError
from .machine import (
    Action,
    BranchesFinished,
    BranchOutcome,
    Context,
    Entered,
    Event,
    Exited,
    Failed,
    Frame,
    Interpreter,
    RunBranches,
    RunTask,
    StartWait,
    Succeeded,
    TaskFailed,
    TaskSucceeded,
    WaitElapsed,
    frame_from_json,
    frame_to_json,
    iso,
)

if TYPE_CHECKING:
    import random

    from shepherd.definitions import Definition
    from shepherd.engine.catalog import Catalog
    from shepherd.engine.executor import Executor
    from shepherd.model import OutgoingTask, StepRecord
    from shepherd.payloads import Payloads
    from shepherd.ports import Store

logger = logging.getLogger(__name__)

UNIT_PREFIX = VISIT_PREFIX  # a unit's step name: V#<state>#<visit> (in ASLV#<workflow id>)
CURSOR = "asl_cursor"  # the workflow item's frame and the driver's part of the cursor
VERSION = "fv"  # the cursor's version: every write that moves it is guarded by it
OUTPUT = "asl_output"
PATH_PREFIX = "ASLPATH#"  # pk of a workflow's path items; sk: the entry's number
PATH_KEPT_SECONDS = 366 * 86_400  # a path entry outlives its workflow's longest run (a year)
DEFINITION_FAILURE = "definition"  # `failure` of a FAILED that a Fail state or error designed
MAX_TRANSACTION_ITEMS = 100  # DynamoDB's cap on one TransactWriteItems
MAX_MESSAGE_DELAY = 900  # seconds: SQS's longest DelaySeconds
SCOPE = "asl_scope"  # a child's (a branch's or a map item's) way into the machine, as JSON
TOLERANCE_FIELDS = (
    "ToleratedFailureCount",
    "ToleratedFailurePercentage",
    "ToleratedFailureCountPath",
    "ToleratedFailurePercentagePath",
)
MAX_CHILDREN = 40  # branches or items of one Parallel or Map on the engine, for now
DISPATCH_GRACE_SECONDS = 60  # how soon a look checks a child nobody began, or a parent
TASK_TIMEOUT = "States.Timeout"


def unit_name(state: str, visit: int) -> str:
    return f"{UNIT_PREFIX}{state}#{visit}"


def is_unit(step: str) -> bool:
    """Whether a task message names an ASL visit (a native step name never holds a `#`)."""
    return step.startswith(UNIT_PREFIX)


def state_of(unit: str) -> str:
    return unit[len(UNIT_PREFIX) :].rsplit("#", 1)[0]


def path_pk(workflow_id: str) -> str:
    return PATH_PREFIX + workflow_id


def path_sk(seq: int) -> str:
    return f"{seq:010d}"


@dataclass
class Cursor:
    """What the workflow item holds beside the frame: the current unit (and its Task's lease
    settings), a resting Wait's wake time, and the path's numbering."""

    frame: Frame
    unit: str | None = None
    task: dict[str, Any] = field(default_factory=dict)  # resource, timeout, heartbeat
    wake_at: int | None = None
    seq: int = 0  # the next path entry's number
    open: dict[str, int] = field(default_factory=dict)  # state -> its open path entry
    deadline: int | None = None  # the machine's TimeoutSeconds from its start
    # A branch's or a map item's child: the way from the machine to its states list
    # ([[state, branch index], ...]) and the root execution's id and stored input ($$).
    scope: dict[str, Any] = field(default_factory=dict)
    # While a Parallel or a Map runs: its state and the ids of its children, in order.
    branches: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "frame": frame_to_json(self.frame),
            "unit": self.unit,
            "task": self.task,
            "wake_at": self.wake_at,
            "seq": self.seq,
            "open": self.open,
            "deadline": self.deadline,
            "scope": self.scope,
            "branches": self.branches,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cursor:
        return cls(
            frame=frame_from_json(data["frame"]),
            unit=data.get("unit"),
            task=dict(data.get("task") or {}),
            wake_at=data.get("wake_at"),
            seq=int(data.get("seq", 0)),
            open=dict(data.get("open") or {}),
            deadline=data.get("deadline"),
            scope=dict(data.get("scope") or {}),
            branches=data.get("branches"),
        )


@dataclass(frozen=True)
class ServiceTask:
    """A Task Shepherd's integration pool carries out itself: a service call or another
    state machine (`states:startExecution`), with the payload the state gave it."""

    resource: str
    payload: Any


@dataclass(frozen=True)
class Claimed:
    """A unit's attempt claimed: what runs it (a Lambda function's invocation, a service
    call, or the error it fails with before anything runs: a resource the engine cannot run),
    and for a Task that waits (`.waitForTaskToken`, `startExecution.sync`) the attempt's
    task token, armed by the claim."""

    workflow: WorkflowRecord
    rec: StepRecord
    spec: TaskSpec  # the agent, pool and lease
    invoked: lambdas.Invocation | ServiceTask | TaskFailed
    request_id: str
    token: TaskToken | None = None


class Recorded:
    """What the write after a unit's run did (`AslEngine.record`)."""

    ENDED = "ended"  # the attempt ended, the frame moved on
    WAITING = "waiting"  # the call was made; the token (or the child's end) ends it
    FENCED = "fenced"  # superseded: nothing was recorded


# A callback Task's wait when it names no TimeoutSeconds (Step Functions' default is a year).
CALLBACK_TIMEOUT_SECONDS = 366 * 86_400
# How often a look checks a `startExecution.sync` Task's child, in case its end's write died.
CHILD_CHECK_SECONDS = DISPATCH_GRACE_SECONDS
PARENT = "asl_parent"  # a startExecution.sync child's item: the parent unit its end ends
CHILD = "asl_child"  # a waiting startExecution.sync unit: the child its attempt started


@dataclass
class _Transition:
    """The writes one move of the frame makes, gathered before they are applied together."""

    cursor: Cursor
    now: int
    path: dict[int, dict[str, Any]] = field(default_factory=dict)  # new entries
    exits: dict[int, Any] = field(default_factory=dict)  # outputs of entries written before
    unit: RunTask | None = None
    available_at: int | None = None
    ended: Succeeded | Failed | None = None
    branches: RunBranches | None = None


class HostPorts(Protocol):
    """The host's ports this driver reads: the store, the clock and the random source."""

    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Any: ...
    @property
    def rng(self) -> random.Random: ...
    @property
    def payloads(self) -> Payloads: ...


class Host(Protocol):
    """What the driver needs of the engine that hosts it (the scheduler): its ports, its one
    executor of writes, the catalog, payload keeping and the retention and shard rules. Named
    here, so that the ASL package depends on no engine module (the scheduler builds the
    driver; the driver never imports the scheduler)."""

    @property
    def ports(self) -> HostPorts: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def executor(self) -> Executor: ...

    def keep(self, text: str, workflow_id: str, *parts: object) -> str: ...
    def keep_for(self, rec: StepRecord, field_name: str, text: str) -> str: ...
    def value(self, stored: str | None) -> Any: ...
    def shard(self, workflow_id: str) -> str: ...
    def expires(self, now: int) -> int: ...
    def deliver(self, tasks: Sequence[OutgoingTask]) -> None: ...
    def start(
        self, wf_type: str, payload: Any, *, idempotency_key: str | None = ..., owner: str = ...
    ) -> Any: ...
    def load(self, workflow_id: str) -> tuple[WorkflowState, Definition] | None: ...
    def run(self, state: WorkflowState, definition: Definition, *, supervisor: bool) -> Any: ...


class AslEngine:
    """Starts, advances and supervises ASL workflows over the scheduler's ports."""

    def __init__(self, scheduler: Host) -> None:
        self.scheduler = scheduler
        # How service Tasks reach AWS (`build_engine(services=...)`: boto3 deployed, the
        # local stack's moto, a test's); with no call given, a service Task fails with
        # States.Permissions, as the in-process runner's does.
        self.integrations = integrations.Integrations()

    # ----------------------------------------------------------------------------- reads

    @property
    def _store(self) -> Any:
        return self.scheduler.ports.store

    def _now(self) -> int:
        return int(self.scheduler.ports.clock.now_ms())

    def _cursor(self, item: Item) -> Cursor | None:
        stored = item.get(CURSOR)
        if stored is None:
            return None
        return Cursor.from_json(self.scheduler.value(stored))

    def _interpreter(
        self, definition: Definition, wf: WorkflowRecord, scope: dict[str, Any] | None = None
    ) -> Interpreter:
        """The interpreter of the workflow's states list: the machine's, or for a branch's or
        a map item's child the one its scope leads to (its `$$.Execution` is the root's)."""
        machine = definition.machine
        assert machine is not None
        scope = scope or {}
        for state, index in scope.get("path", []):
            machine = machine.states[state].branches[index]
        name = wf.wf_type
        root = scope.get("root", wf.workflow_id)
        stored_input = scope.get("input", wf.input)
        created = int(scope.get("created_at", wf.created_at))
        item = self.scheduler.value(scope["map_item"]) if "map_item" in scope else None
        return Interpreter(
            machine,
            Context(
                execution_id=f"arn:aws:states:local:000000000000:execution:{name}:{root}",
                execution_name=root,
                state_machine_id=f"arn:aws:states:local:000000000000:stateMachine:{name}",
                state_machine_name=name,
                input=self.scheduler.value(stored_input),
                start_time=iso(_to_dt(created)),
                seed=created,
            ),
            map_item=item,
        )

    # ------------------------------------------------------------------------ the start

    def begin(self, workflow_id: str) -> bool:
        """Enter the start state of a new ASL workflow (the starter, or the supervisor if the
        starter died): the first write of its cursor, guarded by its having none."""
        item = self._store.get(wf_pk(workflow_id), WF_SK)
        if item is None or VERSION in item:
            return False
        wf = WorkflowRecord.from_item(item)
        if wf.status is not WorkflowStatus.RUNNING:
            return False
        definition = self.scheduler.catalog.version(wf.wf_type, wf.def_hash)
        scope = json.loads(item[SCOPE]) if SCOPE in item else {}
        interpreter = self._interpreter(definition, wf, scope)
        now = self._now()
        variables = self.scheduler.value(scope["variables"]) if "variables" in scope else None
        frame, actions = interpreter.start(
            self.scheduler.value(wf.input), _to_dt(now), variables, int(scope.get("events", 1))
        )
        timeout = definition.machine.timeout_seconds if definition.machine and not scope else None
        deadline = wf.created_at + int(timeout * 1000) if timeout else None
        scope.pop("variables", None)
        cursor = Cursor(frame, deadline=deadline, scope=scope)
        return self._commit(item, wf, definition, interpreter, cursor, actions, now, None)

    # ------------------------------------------------------------------------ a transition

    def _commit(
        self,
        item: Item,
        wf: WorkflowRecord,
        definition: Definition,
        interpreter: Interpreter,
        cursor: Cursor,
        actions: list[Action],
        now: int,
        ending: Callable[[RunTask | None, int | None], tx.Write] | None,
    ) -> bool:
        """Carry the frame through what `actions` ask (control states run inside the
        interpreter; a due Wait or a retry's delay is taken at once) and apply the whole move
        as one transaction: `ending(next_unit, available_at)` is the write that ends the unit
        this move comes from (fenced), then the cursor (versioned), the next unit, the path.
        False: a condition failed (a superseded attempt, or someone moved the cursor)."""
        t = _Transition(cursor=replace(cursor, unit=None, task={}, wake_at=None), now=now)
        self._carry(t, interpreter, actions)
        writes: list[tx.Write] = []
        same_unit = False
        if ending is not None:
            assert cursor.unit is not None
            nxt = t.unit
            same_unit = nxt is not None and unit_name(nxt.state, nxt.visit) == cursor.unit
            writes.append(ending(nxt if same_unit else None, t.available_at))
        children = self._children(item, wf, t) if t.branches is not None else []
        writes.append(self._cursor_write(item, wf, definition, t))
        tasks: list[OutgoingTask] = []
        if t.unit is not None:
            name = unit_name(t.unit.state, t.unit.visit)
            pool = self._pool(definition, t.unit)
            delay = 0 if t.available_at is None else max(0, -(-(t.available_at - now) // 1000))
            delay = min(delay, MAX_MESSAGE_DELAY)  # a longer one comes back (`claim`)
            tasks.append(
                OutgoingTask(pool, TaskMessage(wf.workflow_id, name, t.unit.attempt + 1), delay)
            )
            if not same_unit:
                writes.append(self._new_unit(wf, name, t.unit, now, t.available_at))
        writes.extend(w for _, w in children)
        writes.extend(self._path_writes(wf.workflow_id, t))
        head, rest = writes[:MAX_TRANSACTION_ITEMS], writes[MAX_TRANSACTION_ITEMS:]
        lost = self.scheduler.executor.contended(head)
        if lost is not None:
            return False
        for write in rest:  # a long run of control states: its path entries, after
            self.scheduler.executor.raw(write)
        self.scheduler.deliver(tasks)
        for child_id, _ in children:  # best effort: the supervisor begins one whose begin died
            self.begin(child_id)
        if t.ended is not None and SCOPE in item and wf.parent_id is not None:
            self.branches_ended(wf.parent_id)  # a branch's end may end its Parallel or Map
        if t.ended is not None and PARENT in item:
            self.child_ended(wf.workflow_id)  # a startExecution.sync child ends its Task
        return True

    def _children(
        self, item: Item, wf: WorkflowRecord, t: _Transition
    ) -> list[tuple[str, tx.Write]]:
        """A Parallel's branches or a Map's items as child workflows (each an ASL workflow
        of its own: its cursor, its units, its supervision), created in the transaction that
        moves the parent to them; the parent's cursor names them, in order."""
        run = t.branches
        assert run is not None
        visit = t.cursor.frame.visits.get(run.state, 0)
        digest = hashlib.sha256(f"{wf.workflow_id}|{run.state}|{visit}".encode()).hexdigest()[:10]
        scope = t.cursor.scope
        root = scope.get("root", wf.workflow_id)
        variables = self.scheduler.keep(
            jsonsafe.dumps(dict(run.variables)), wf.workflow_id, "asl", digest, "variables"
        )
        out = []
        ids = []
        for i, value in enumerate(run.inputs):
            child_id = f"{wf.workflow_id}-{digest}-{i}"
            ids.append(child_id)
            child_scope = {
                "path": [*scope.get("path", []), [run.state, 0 if run.kind == "Map" else i]],
                "root": root,
                "input": scope.get("input", wf.input),
                "created_at": scope.get("created_at", wf.created_at),
                "variables": variables,
                "events": run.events,
            }
            if i < len(run.items) and run.items[i] is not None:  # a Map child's $$.Map.Item
                child_scope["map_item"] = self.scheduler.keep(
                    jsonsafe.dumps(dict(run.items[i])), child_id, "asl", "item"
                )
            record = WorkflowRecord(
                workflow_id=child_id,
                wf_type=wf.wf_type,
                def_hash=wf.def_hash,
                status=WorkflowStatus.RUNNING,
                input=self.scheduler.keep(jsonsafe.dumps(value), child_id, "input"),
                owner=wf.owner,
                request_hash=digest,
                created_at=t.now,
                updated_at=t.now,
                watch_shard=self.scheduler.shard(child_id),
                due_at=t.now + 1000 * DISPATCH_GRACE_SECONDS,
                parent_id=wf.workflow_id,
                parent_step=run.state,
                parent_item=i,
            )
            values = {k: v for k, v in record.to_item().items() if k not in ("pk", "sk")}
            values[SCOPE] = jsonsafe.dumps(child_scope)
            write = tx.Write(wf_pk(child_id), WF_SK, Update(set=values), Missing("pk"))
            out.append((child_id, write))
        t.cursor.branches = {"state": run.state, "kind": run.kind, "children": ids}
        return out

    def branches_ended(self, workflow_id: str, now: int | None = None) -> bool:
        """After one of its children ended (or at a look): if every branch (item) ended, or
        one failed that the state does not tolerate, the parent moves on with their outcomes
        in order (one read of its children), and children still running are cancelled."""
        item = self._store.get(wf_pk(workflow_id), WF_SK)
        if item is None:
            return False
        wf = WorkflowRecord.from_item(item)
        cursor = self._cursor(item)
        if wf.status is not WorkflowStatus.RUNNING or cursor is None or not cursor.branches:
            return False
        ids: list[str] = cursor.branches["children"]
        found: dict[str, Item] = {}
        for start in range(0, len(ids), 100):
            keys = [(wf_pk(i), WF_SK) for i in ids[start : start + 100]]
            found |= {str(i["pk"]).removeprefix("WF#"): i for i in self._store.get_many(keys)}
        definition = self.scheduler.catalog.version(wf.wf_type, wf.def_hash)
        interpreter = self._interpreter(definition, wf, cursor.scope)
        state = interpreter.machine.states[cursor.branches["state"]]
        outcomes = self._outcomes(
            ids, found, tolerant=state.type == "Map" and any(state.has(k) for k in TOLERANCE_FIELDS)
        )
        if outcomes is None:
            return False
        now = self._now() if now is None else now
        frame, actions = interpreter.advance(
            cursor.frame, BranchesFinished(tuple(outcomes), cursor.frame.events), _to_dt(now)
        )
        moved = self._commit(
            item,
            wf,
            definition,
            interpreter,
            replace(cursor, frame=frame, branches=None),
            actions,
            now,
            None,
        )
        if moved:
            for child_id in ids:  # a failed branch ended the state: stop the others
                child = found.get(child_id)
                if child is None or child.get("status") == "RUNNING":
                    self._cancel_child(child_id, child, now)
                    self.cancelled(child_id)  # and what they run: their branches, .sync children
        return moved

    def _outcomes(
        self, ids: Sequence[str], found: dict[str, Item], *, tolerant: bool
    ) -> list[BranchOutcome] | None:
        """The children's outcomes in order, once the state can end: every one ended, or
        (unless a Map tolerates failures) the first failure with the ends before it. None:
        not yet."""
        out: list[BranchOutcome] = []
        for child_id in ids:
            child = found.get(child_id) or {}
            status = child.get("status")
            if status == WorkflowStatus.SUCCEEDED.value:
                out.append(BranchOutcome(output=self.scheduler.value(child.get(OUTPUT))))
            elif status == WorkflowStatus.FAILED.value:
                out.append(
                    BranchOutcome(
                        failed=True, error=child.get("asl_error"), cause=child.get("asl_cause")
                    )
                )
            else:
                continue
        ended = len(out) == len(ids)
        if ended or (not tolerant and any(o.failed for o in out)):
            return out if ended else [o for o in out if o.failed][:1]
        return None

    def cancelled(self, workflow_id: str, unit: str | None = None) -> None:
        """After a state machine ended while it ran something (a cancel, its TimeoutSeconds,
        a failed branch beside it): its running branches and map items (and theirs) are
        cancelled too, and the child execution its `.sync` Task (the cursor's, or `unit`)
        waits for is stopped, as Step Functions stops it: none runs on for a parent that
        ended."""
        item = self._store.get(wf_pk(workflow_id), WF_SK)
        cursor = self._cursor(item) if item is not None else None
        if cursor is None:
            return
        self._stop_child_of(workflow_id, unit or cursor.unit)
        if not cursor.branches:
            return
        now = self._now()
        for child_id in cursor.branches["children"]:
            child = self._store.get(wf_pk(child_id), WF_SK)
            if child is not None and child.get("status") == WorkflowStatus.RUNNING.value:
                self._cancel_child(child_id, child, now)
                self.cancelled(child_id)

    def _cancel_child(self, child_id: str, child: Item | None, now: int) -> None:
        if child is None:
            return
        write = tx.Write(
            wf_pk(child_id),
            WF_SK,
            Update(
                set={
                    "status": WorkflowStatus.CANCELLED.value,
                    "updated_at": now,
                    "finished_at": now,
                    "expires_at": self.scheduler.expires(now),
                },
                remove=("watch_shard", "due_at"),
            ),
            Eq("status", WorkflowStatus.RUNNING.value),
        )
        self.scheduler.executor.raw(write, child)

    def _stop_child_of(self, workflow_id: str, unit: str | None) -> None:
        """The child a `.sync` unit started (`asl_child`), stopped (`stop`)."""
        if unit is None:
            return
        item = self._store.get(visits_pk(workflow_id), item_sk("step", unit))
        child = item.get(CHILD) if item is not None else None
        if isinstance(child, str):
            self.stop(child)

    def stop(self, workflow_id: str) -> bool:
        """Stop a `.sync` Task's child execution whose parent no longer waits for it (Step
        Functions' StopExecution of a nested execution): cancelled as an operator's cancel
        cancels it, so a native child undoes what it did and a state machine's branches and
        own children stop too. No person asked, so no `acted` is written. False: it had
        ended (or is ending) already."""
        for _ in range(3):
            loaded = self.scheduler.load(workflow_id)
            if loaded is None:
                return False
            state, definition = loaded
            wf = state.workflow
            if wf.status not in (WorkflowStatus.RUNNING, WorkflowStatus.PAUSED):
                return False
            write = tx.request_cancel(wf, self._now(), self.scheduler.shard(workflow_id))
            if self.scheduler.executor.workflow(state, write):
                self.scheduler.run(state, definition, supervisor=False)
                if definition.state_machine is not None:
                    self.cancelled(workflow_id)
                return True
        return False

    def _carry(self, t: _Transition, interpreter: Interpreter, actions: list[Action]) -> None:
        """Fold the actions into `t`, taking at once what needs no waiting: a Wait already
        due, a retrier's delay (its attempt is sent with that delay), branches with nothing
        to run. It stops at a task, a rest, branches to run, or the end."""
        now = t.now
        frame = t.cursor.frame
        while True:
            wait = self._gather(t, actions)
            if t.branches is not None and not t.branches.inputs:  # nothing to run: done
                t.branches = None
                frame, actions = interpreter.advance(
                    frame, BranchesFinished((), frame.events), _to_dt(now)
                )
                t.cursor.frame = frame
                continue
            if wait is None:
                break
            until, retry = wait
            until_ms = _to_ms(until)
            if retry:
                t.available_at = max(until_ms, now)
            elif until_ms > now:
                t.cursor.wake_at = until_ms  # rests: the supervisor wakes it
                break
            frame, actions = interpreter.advance(frame, WaitElapsed(), _to_dt(now))
            t.cursor.frame = frame
        t.cursor.frame = frame

    def _gather(
        self, t: _Transition, actions: Sequence[Action]
    ) -> tuple[_dt.datetime, bool] | None:
        """Fold one batch of actions into the transition; a Wait (or a retry's delay) to take
        before the frame can go on, or None when it stops (a task, a rest, the end)."""
        for action in actions:
            if isinstance(action, Entered):
                seq = t.cursor.seq
                t.cursor.seq += 1
                t.cursor.open[action.state] = seq
                t.path[seq] = {
                    "state": action.state,
                    "visit": action.visit,
                    "input": action.input,
                    "entered_at": t.now,
                }
            elif isinstance(action, Exited):
                seq = t.cursor.open.pop(action.state, -1)
                if seq in t.path:
                    t.path[seq]["output"] = action.output
                    t.path[seq]["exited_at"] = t.now
                elif seq >= 0:
                    t.exits[seq] = action.output
            elif isinstance(action, RunTask):
                t.unit = action
            elif isinstance(action, StartWait):
                return action.until, action.retry
            elif isinstance(action, RunBranches):
                limited = 0 < action.max_concurrency < len(action.inputs)
                if len(action.inputs) > MAX_CHILDREN or limited:
                    t.ended = Failed(
                        RUNTIME,
                        f"The {action.kind} state '{action.state}' has {len(action.inputs)} "
                        f"branches or items (MaxConcurrency {action.max_concurrency}): on the "
                        f"engine at most {MAX_CHILDREN}, all at once, for now",
                    )
                else:
                    t.branches = action
            elif isinstance(action, Succeeded | Failed):
                t.ended = action
        return None

    @staticmethod
    def _function(task: RunTask) -> str:
        """The Lambda function a Task visit invokes ("" when it names none it can run)."""
        try:
            return lambdas.invocation(task.resource, task.payload).function
        except StatesError:
            return ""

    def _pool(self, definition: Definition, task: RunTask) -> str:
        return self._spec(definition, task.resource, self._function(task), None, None).pool

    def _cursor_write(
        self, item: Item, wf: WorkflowRecord, definition: Definition, t: _Transition
    ) -> tx.Write:
        """The workflow item's write: the cursor moved (version + 1), its watch entry due
        when the supervisor must next look, or the workflow's end."""
        now = t.now
        version = item.get(VERSION)
        guard = all_of(
            Eq("status", WorkflowStatus.RUNNING.value),
            Missing(VERSION) if version is None else Eq(VERSION, version),
        )
        if t.unit is not None:
            t.cursor.unit = unit_name(t.unit.state, t.unit.visit)
            t.cursor.task = {
                "resource": t.unit.resource,
                "function": self._function(t.unit),
                "timeout": t.unit.timeout_seconds,
                "heartbeat": t.unit.heartbeat_seconds,
            }
        values: dict[str, Any] = {
            CURSOR: self.scheduler.keep(
                jsonsafe.dumps(t.cursor.to_json()), wf.workflow_id, "asl", "cursor", now
            ),
            VERSION: int(version or 0) + 1,
            "updated_at": now,
        }
        remove: tuple[str, ...] = ()
        if t.ended is not None:
            values |= {
                "finished_at": now,
                "expires_at": self.scheduler.expires(now),
            }
            remove = ("watch_shard", "due_at")
            if isinstance(t.ended, Succeeded):
                values["status"] = WorkflowStatus.SUCCEEDED.value
                values[OUTPUT] = self.scheduler.keep(
                    jsonsafe.dumps(t.ended.output), wf.workflow_id, "asl", "output"
                )
            else:
                # The machine's designed end (a Fail state, an uncaught error, its timeout):
                # FAILED as Step Functions' ExecutionFailed, marked so that nothing pages an
                # operator for it (tests/unit/test_failed_is_alarmed.py lists this route).
                values |= {
                    "status": WorkflowStatus.FAILED.value,
                    "failure": DEFINITION_FAILURE,
                    "error": tx.error_json(
                        t.ended.error or "", t.ended.cause or "", cause=t.ended.cause
                    ),
                    "asl_error": t.ended.error,
                    "asl_cause": t.ended.cause,
                }
        else:
            values["due_at"] = self._due(definition, t, now)
            values["watch_shard"] = self.scheduler.shard(wf.workflow_id)
        write = tx.Write(wf_pk(wf.workflow_id), WF_SK, Update(set=values, remove=remove), guard)
        return listing.keyed(write, wf)

    def _due(self, definition: Definition, t: _Transition, now: int) -> int:
        """When the supervisor must look: a resting Wait's wake time; a new unit's message
        counts as lost after the dispatch grace, or its attempt may be overdue after its
        lease (whichever comes first; the look then moves it to the attempt's deadline)."""
        deadline = t.cursor.deadline
        due = self._next_due(definition, t, now)
        return due if deadline is None else min(due, deadline)

    def _next_due(self, definition: Definition, t: _Transition, now: int) -> int:
        if t.cursor.wake_at is not None:
            return t.cursor.wake_at
        if t.branches is not None:  # its children's ends move it; a look checks them then
            return now + 1000 * DISPATCH_GRACE_SECONDS
        start = t.available_at if t.available_at is not None else now
        if t.unit is None:
            return now
        spec = self._spec(
            definition,
            t.unit.resource,
            self._function(t.unit),
            t.unit.timeout_seconds,
            t.unit.heartbeat_seconds,
        )
        grace = min(definition.dispatch_timeout_seconds, spec.liveness_seconds)
        return start + grace * 1000

    @staticmethod
    def _spec(
        definition: Definition,
        resource: str,
        function: str,
        timeout: float | None,
        heartbeat: float | None,
    ) -> TaskSpec:
        """A unit's attempt settings: a service Task's (or another state machine's) are the
        integration pool's; a Lambda function's the pool the project gives it (its attempt
        runs in the integration pool, invoked as deployed, when that pool is the one given).
        A Task that waits for its token holds its attempt for one invocation at most: its
        wait is supervised apart (`_look_at_wait`)."""
        if callback_of(resource):
            timeout = min(timeout, workflow.INTEGRATIONS_TIMEOUT_SECONDS) if timeout else None
            heartbeat = None
        if workflow.runs_integration(resource):
            return integrations_task(timeout, heartbeat)
        return asl_task(definition, function, timeout, heartbeat)

    def _new_unit(
        self, wf: WorkflowRecord, name: str, task: RunTask, now: int, available_at: int | None
    ) -> tx.Write:
        """A visit's unit, created QUEUED at attempt 1 holding its invocation's payload."""
        values: dict[str, Any] = {
            "status": StepStatus.QUEUED.value,
            "attempt": task.attempt + 1,  # the interpreter counts retries from 0
            "dispatched_at": now,
            "dispatches": 1,
            "wf_type": wf.wf_type,
            "input": self.scheduler.keep(
                jsonsafe.dumps(task.payload), wf.workflow_id, "asl", name, "input"
            ),
        }
        if available_at is not None:
            values["available_at"] = available_at
        key = visits_pk(wf.workflow_id), item_sk("step", name)
        return tx.Write(*key, Update(set=values), Missing("pk"))

    def _path_writes(self, workflow_id: str, t: _Transition) -> list[tx.Write]:
        pk = path_pk(workflow_id)
        out = []
        for seq, entry in sorted(t.path.items()):
            values = {
                **{k: v for k, v in entry.items() if k not in ("input", "output")},
                "input": self._kept(workflow_id, seq, "input", entry.get("input")),
            }
            if "output" in entry:
                values["output"] = self._kept(workflow_id, seq, "output", entry["output"])
            values["expires_at"] = self.scheduler.expires(t.now) + PATH_KEPT_SECONDS
            out.append(tx.Write(pk, path_sk(seq), Update(set=values), Missing("pk")))
        for seq, output in sorted(t.exits.items()):
            values = {"output": self._kept(workflow_id, seq, "output", output), "exited_at": t.now}
            out.append(tx.Write(pk, path_sk(seq), Update(set=values), Missing("output")))
        return out

    def _kept(self, workflow_id: str, seq: int, what: str, value: Any) -> str:
        return self.scheduler.keep(jsonsafe.dumps(value), workflow_id, "asl", "path", seq, what)

    # ---------------------------------------------------------------- a unit's outcome

    def end_unit(
        self,
        rec: StepRecord,
        event: Event,
        guard: Any = None,
        *,
        missed_heartbeat: bool = False,
        token_hash: str | None = None,
    ) -> bool:
        """The write that ends attempt `rec.attempt` of a unit with `event` (its result or its
        error) and moves the frame on. False: the attempt was superseded (fenced) and
        nothing was recorded. With `token_hash` (a callback, a child's end, a waiting
        attempt timed out), the attempt may be RUNNING or WAITING and must hold that token."""
        for _ in range(3):
            item = self._store.get(wf_pk(rec.workflow_id), WF_SK)
            if item is None:
                return False
            wf = WorkflowRecord.from_item(item)
            cursor = self._cursor(item)
            if wf.status is not WorkflowStatus.RUNNING or cursor is None or cursor.unit != rec.name:
                return False
            definition = self.scheduler.catalog.version(wf.wf_type, wf.def_hash)
            interpreter = self._interpreter(definition, wf, cursor.scope)
            now = self._now()
            frame, actions = interpreter.advance(cursor.frame, event, _to_dt(now))
            cursor = replace(cursor, frame=frame)
            ending = self._ending(rec, event, now, guard, missed_heartbeat, token_hash)
            if self._commit(item, wf, definition, interpreter, cursor, actions, now, ending):
                return True
            current = self._store.get(*rec.key)
            if (
                current is None
                or StepRecord.from_item(current).status is not rec.status
                or int(current.get("attempt", 0)) != rec.attempt
            ):
                return False  # the unit moved on: this attempt is fenced out
        return False

    def _ending(
        self,
        rec: StepRecord,
        event: Event,
        now: int,
        guard: Any,
        missed_heartbeat: bool = False,
        token_hash: str | None = None,
    ) -> Callable[[RunTask | None, int | None], tx.Write]:
        expires = self.scheduler.expires(now)

        def write(retry: RunTask | None, available_at: int | None) -> tx.Write:
            if isinstance(event, TaskSucceeded):
                output = self.scheduler.keep_for(rec, "output", jsonsafe.dumps(event.output))
                w = tx.complete(rec, rec.attempt, now, output, expires, token_hash)
            else:
                assert isinstance(event, TaskFailed)
                error = tx.error_json(event.error, event.cause or event.error, cause=event.cause)
                outcome = "error"
                if guard is not None and event.error == TASK_TIMEOUT:  # the supervisor's
                    outcome = "heartbeat_timeout" if missed_heartbeat else "timeout"
                decision: RetryIn | GiveUp = (
                    RetryIn(max(0, (available_at or now) - now))
                    if retry is not None
                    else GiveUp("permanent")
                )
                w = tx.end_attempt(
                    rec,
                    attempt=rec.attempt,
                    now=now,
                    error=error,
                    error_type=event.error,
                    outcome=outcome,
                    decision=decision,
                    expires_at=expires,
                    guard=guard,
                    token_hash=token_hash,
                )
                if retry is not None:  # the retry's own payload ($$.State.RetryCount...)
                    text = jsonsafe.dumps(retry.payload)
                    stored = self.scheduler.keep(
                        text, rec.workflow_id, "asl", rec.name, "input", retry.attempt
                    )
                    w = replace(w, update=replace(w.update, set={**w.update.set, "input": stored}))
            return w

        return write

    # ------------------------------------------------------------------ the agent's side

    def claim(self, message: TaskMessage, worker_id: str) -> Claimed | str:
        """A unit's task message: the workflow item and the unit in one consistent read, then
        the claim of its attempt (fenced: QUEUED at that attempt). What the agent runtime
        runs, or why the message is dropped."""
        pk = wf_pk(message.workflow_id)
        unit_key = visits_pk(message.workflow_id), item_sk("step", message.step)
        found = {(i["pk"], i["sk"]): i for i in self._store.get_many([(pk, WF_SK), unit_key])}
        head, unit = found.get((pk, WF_SK)), found.get(unit_key)
        if head is None or unit is None:
            return "unknown workflow or unit"
        wf = WorkflowRecord.from_item(head)
        rec = StepRecord.from_item(unit)
        if wf.status is not WorkflowStatus.RUNNING:
            return f"workflow is {wf.status.value}"
        if rec.status is not StepStatus.QUEUED or rec.attempt != message.attempt:
            return f"unit is {rec.status.value} at attempt {rec.attempt}"
        early = (rec.available_at or 0) - self._now()
        if early > 0:
            # A retry's delay longer than a queue's longest (15 minutes): the message goes
            # back for what is left of it, and no attempt is claimed before its time.
            seconds = min(MAX_MESSAGE_DELAY, -(-early // 1000))
            pool = self._pool_of_unit(head, rec)
            self.scheduler.deliver([OutgoingTask(pool, message, seconds)])
            return f"unit is waiting for its retry ({seconds} s)"
        cursor = self._cursor(head)
        definition = self.scheduler.catalog.version(wf.wf_type, wf.def_hash)
        task = cursor.task if cursor is not None and cursor.unit == rec.name else {}
        machine = definition.machine
        assert machine is not None
        resource = task.get("resource") or machine.states[state_of(rec.name)].raw["Resource"]
        token = None
        if callback_of(resource):  # armed by the claim, so a fast callback finds its hash
            token = TaskToken.new(wf.workflow_id, "step", rec.name, message.attempt)
        payload = self.scheduler.value(rec.input)
        if token is not None and cursor is not None and cursor.unit == rec.name:
            payload = with_token(payload, cursor.frame.token, token.encode())
        invoked: lambdas.Invocation | ServiceTask | TaskFailed
        function = ""
        if workflow.runs_integration(resource):
            invoked = ServiceTask(resource, payload)
        else:
            try:
                invoked = lambdas.invocation(resource, payload)
                function = invoked.function
            except StatesError as exc:
                invoked = TaskFailed(exc.error, exc.cause)
        spec = self._spec(
            definition, resource, function, task.get("timeout"), task.get("heartbeat")
        )
        write = tx.claim(rec, message.attempt, self._now(), worker_id)
        fenced = all_of(
            Eq("status", StepStatus.QUEUED.value),
            Eq("attempt", message.attempt),
            Missing("held_at"),
        )
        update = write.update
        if token is not None:
            update = replace(update, set={**update.set, "callback_token": token.hash})
        claim = replace(write, update=update, condition=fenced)
        claimed, _ = self.scheduler.executor.step_or_current(claim)
        if claimed is None:
            return "claim lost"
        rng = self.scheduler.ports.rng
        request_id = str(_uuid.UUID(int=rng.getrandbits(128), version=4))
        return Claimed(wf, claimed, spec, invoked, request_id, token)

    def run(
        self,
        claimed: Claimed,
        agents: Collection[str],
        run_agent: Callable[[lambdas.Invocation], Event],
    ) -> Event:
        """Carry out a claimed attempt: a Lambda function served by an agent of this process
        (`run_agent`: the agent runtime's run, with heartbeats), a Lambda function mapped to
        the integration pool and served by no agent here (invoked as deployed), a service
        call, or another state machine. What it returns is the call's outcome, shaped as Step
        Functions shapes it; for a Task that waits, success means the call was made."""
        invoked = claimed.invoked
        if isinstance(invoked, TaskFailed):
            return invoked
        if isinstance(invoked, lambdas.Invocation):
            deployed = claimed.spec.pool == workflow.INTEGRATIONS_POOL
            if invoked.function in agents or not deployed:
                return run_agent(invoked)
            return self._invoke_deployed(claimed, invoked)
        key = idempotency_key(claimed.rec)
        try:
            if integrations.is_start_execution(invoked.resource):
                return TaskSucceeded(self._start_execution(claimed, invoked))
            result = self.integrations.service(invoked.resource, invoked.payload, key)
        except StatesError as exc:
            return TaskFailed(exc.error, exc.cause)
        except ShepherdError:
            raise  # the engine's own (a throttled store): no attempt is spent on it
        except Exception as exc:  # the SDK's own (a connection, a timeout): the Task's error
            return TaskFailed(TASK_FAILED, f"{type(exc).__name__}: {exc}")
        return TaskSucceeded(result)

    def _invoke_deployed(self, claimed: Claimed, invoked: lambdas.Invocation) -> Event:
        """A Lambda function as deployed, through the Invoke API: its result (or its error)
        as a Lambda task's, shaped by `lambdas` as an agent's is."""
        try:
            response = self.integrations.service(
                lambdas.SDK_INVOKE, lambdas.deployed_request(invoked), None
            )
            result = lambdas.deployed_result(response)
        except StatesError as exc:
            return TaskFailed(exc.error, exc.cause)
        except Exception as exc:  # the SDK's own (a connection, a timeout)
            return TaskFailed("Lambda.SdkClientException", f"{type(exc).__name__}: {exc}")
        at = iso(_to_dt(self._now()))
        return TaskSucceeded(lambdas.shape(invoked, result, claimed.request_id, at))

    def record(self, claimed: Claimed, event: Event) -> str:
        """The write after a claimed attempt ran (a `Recorded` value): the unit's end with
        `event`, moving the frame on; or, for a Task that waits whose call was made, the
        unit's move to WAITING, its token (or its child's end) to end it."""
        rec = claimed.rec
        if claimed.token is None or isinstance(event, TaskFailed):
            return Recorded.ENDED if self.end_unit(rec, event) else Recorded.FENCED
        now = self._now()
        write = tx.wait_for_callback(rec, rec.attempt, now, claimed.token.hash)
        started = (
            event.output
            if isinstance(claimed.invoked, ServiceTask) and isinstance(event, TaskSucceeded)
            else None
        )
        child = started.get("child") if isinstance(started, dict) else None
        if isinstance(child, str):  # a startExecution.sync: the child its end ends this with
            write = replace(
                write, update=replace(write.update, set={**write.update.set, CHILD: child})
            )
        if self.scheduler.executor.step(None, write) is None:
            # The token's callback may have come first (the call handed it out): then it
            # ended this attempt, and nothing is lost.
            current = self._store.get(*rec.key)
            history = StepRecord.from_item(current).history if current is not None else []
            token_hash = claimed.token.hash
            if any(h.get("a") == rec.attempt and h.get("th") == token_hash for h in history):
                return Recorded.ENDED
            return Recorded.FENCED
        if isinstance(child, str):
            # It may have ended before the unit was WAITING; or its parent may have ended
            # since it was started (a cancel that read the unit before it named the child).
            self.child_ended(child)
            parent = self._store.get(wf_pk(rec.workflow_id), WF_SK)
            if parent is None or parent.get("status") != WorkflowStatus.RUNNING.value:
                self.stop(child)
        return Recorded.WAITING

    def result(
        self, claimed: Claimed, outcome: Any = None, error: BaseException | None = None
    ) -> Event:
        """What the agent's return value (or exception) is to the machine: the result as
        Step Functions shapes a Lambda's, or the exception as a Lambda's error."""
        invoked = claimed.invoked
        assert isinstance(invoked, lambdas.Invocation)
        if error is not None:
            failed = lambdas.error_of(error, claimed.request_id)
            return TaskFailed(failed.error, failed.cause)
        try:
            jsonsafe.dumps(outcome, what="output")
        except jsonsafe.JsonRejected as exc:  # what Lambda could not have returned either
            return TaskFailed("Lambda.Unknown", f"The function's result is not JSON: {exc.message}")
        at = iso(_to_dt(self._now()))
        return TaskSucceeded(lambdas.shape(invoked, outcome, claimed.request_id, at))

    def _pool_of_unit(self, head: Item, rec: StepRecord) -> str:
        cursor = self._cursor(head)
        wf = WorkflowRecord.from_item(head)
        definition = self.scheduler.catalog.version(wf.wf_type, wf.def_hash)
        task = cursor.task if cursor is not None else {}
        spec = self._spec(
            definition, task.get("resource", ""), task.get("function", ""), None, None
        )
        return spec.pool

    # ------------------------------------------------------- other state machines

    def _start_execution(self, claimed: Claimed, task: ServiceTask) -> Any:
        """`states:startExecution`: a Shepherd workflow of the named definition, started with
        the attempt's idempotency key (a duplicate claim starts none), owned by the parent's
        owner. Plain and `.waitForTaskToken`: the start's answer. `.sync` and `.sync:2`: the
        child is linked to this unit (`asl_parent`), and its end ends the unit."""
        request = integrations.start_request(task.resource, task.payload)
        rec = claimed.rec
        try:
            started = self.scheduler.start(
                request.machine,
                request.input,
                idempotency_key=f"{idempotency_key(rec)}/{rec.attempt}",
                owner=claimed.workflow.owner,
            )
        except UnknownWorkflowType:
            raise StatesError(
                "StepFunctions.StateMachineDoesNotExistException",
                f"State Machine Does Not Exist: '{request.machine}'",
            ) from None
        except ShepherdError as exc:
            raise StatesError("StepFunctions.InvalidExecutionInputException", str(exc)) from None
        child = started.workflow
        if not request.sync:
            run = integrations.ChildRun(name=child.workflow_id, status="RUNNING")
            run = replace(run, start_ms=child.created_at)
            return self.integrations.child_result(request, run)
        link = {
            "workflow": rec.workflow_id,
            "unit": rec.name,
            "attempt": rec.attempt,
            "resource": task.resource,
            "input": jsonsafe.dumps(request.input),
        }
        write = tx.Write(
            wf_pk(child.workflow_id),
            WF_SK,
            Update(set={PARENT: jsonsafe.dumps(link)}),
            Missing(PARENT),
        )
        self.scheduler.executor.raw(write)
        return {"child": child.workflow_id}

    def child_ended(self, child_id: str) -> bool:
        """A `startExecution.sync` child's end ends its parent's unit: its output (or its
        error) shaped as Step Functions shapes the form's, written as a callback would be
        (fenced on the unit's attempt and token). False: not ended, or nothing to end."""
        item = self._store.get(wf_pk(child_id), WF_SK)
        if item is None or PARENT not in item:
            return False
        child = WorkflowRecord.from_item(item)
        if not child.status.terminal:
            return False
        link = json.loads(str(item[PARENT]))
        unit = self._store.get(visits_pk(link["workflow"]), item_sk("step", link["unit"]))
        if unit is None:
            return False
        rec = StepRecord.from_item(unit)
        if rec.status is not StepStatus.WAITING or rec.attempt != int(link["attempt"]):
            return False
        request = integrations.start_request(
            link["resource"],
            {
                "StateMachineArn": child.wf_type,
                "Input": json.loads(link["input"]),
            },
        )
        run = integrations.ChildRun(
            name=child_id,
            status=_execution_status(child.status),
            output=self._output_of(child_id, item),
            error=item.get("asl_error") or _error_name(item.get("error")),
            cause=item.get("asl_cause"),
            start_ms=child.created_at,
            stop_ms=int(item.get("finished_at") or child.updated_at),
        )
        try:
            event: Event = TaskSucceeded(self.integrations.child_result(request, run))
        except StatesError as exc:
            event = TaskFailed(exc.error, exc.cause)
        return self.end_unit(rec, event, token_hash=rec.callback_token)

    def _output_of(self, workflow_id: str, item: Item) -> Any:
        """A child's output: a state machine's (`asl_output`), or a native workflow's as the
        API assembles it from its steps (read only once it succeeded)."""
        if OUTPUT in item:
            return self.scheduler.value(item[OUTPUT])
        if item.get("status") != WorkflowStatus.SUCCEEDED.value:
            return None
        loaded = self.scheduler.load(workflow_id)
        return None if loaded is None else workflow_output(*loaded, self.scheduler.ports.payloads)

    # ------------------------------------------------------------------ callbacks

    @staticmethod
    def token_of(token: str) -> TaskToken | None:
        """The task token if it names a unit of a state machine (None: not one of ours, a
        native step's, or no token at all: the native callbacks decide)."""
        try:
            parsed = TaskToken.decode(token)
        except ValueError:
            return None
        return parsed if is_unit(parsed.step) and parsed.kind == "step" else None

    def callback(
        self,
        token: TaskToken,
        action: str,
        *,
        output: Any = None,
        error: str | None = None,
        cause: str | None = None,
        details: Any = None,
        quiet_ms: int = 0,
    ) -> StepRecord:
        """`POST /tasks/success|failure|heartbeat` for a unit's task token (SendTaskSuccess,
        SendTaskFailure, SendTaskHeartbeat): the success's output is the Task's result, a
        failure's error and cause the Task's error (its Retry and Catch decide), a heartbeat
        keeps the wait alive. Fenced like an agent's write: the unit's attempt and the
        token's hash; a token that is not the unit's is unknown, one whose attempt ended is
        stale."""
        unit = self._store.get(visits_pk(token.workflow_id), item_sk("step", token.step))
        if unit is None:
            raise TaskTokenInvalid("unknown task token")
        rec = StepRecord.from_item(unit)
        if not (matches(rec.callback_token, token) and rec.attempt == token.attempt):
            if any(
                h.get("a") == token.attempt and matches(h.get("th"), token) for h in rec.history
            ):
                raise TaskTokenStale("the attempt of this token is over")
            raise TaskTokenInvalid("unknown task token")
        if action == "heartbeat":
            now = self._now()
            _too_soon(rec.callback_heartbeat_at, now, quiet_ms)
            text = None if details is None else jsonsafe.dumps(details)
            write = tx.heartbeat(rec, rec.attempt, now, text, token.hash, quiet_ms=quiet_ms)
            updated = self.scheduler.executor.step(None, write)
            if updated is None:
                current = self._store.get(*rec.key)
                if current is not None:  # a racing heartbeat won, or the attempt is over
                    again = StepRecord.from_item(current)
                    if matches(again.callback_token, token) and again.attempt == token.attempt:
                        _too_soon(again.callback_heartbeat_at, now, quiet_ms)
                raise TaskTokenStale("the attempt of this token is over")
            return updated
        event: Event = (
            TaskSucceeded(output) if action == "success" else TaskFailed(error or "", cause or "")
        )
        if not self.end_unit(rec, event, token_hash=token.hash):
            raise TaskTokenStale("the attempt of this token is over")
        ended = self._store.get(*rec.key)
        return StepRecord.from_item(ended) if ended is not None else rec

    # ------------------------------------------------------------------ the supervisor

    def look(self, item: Item, now: int) -> str | None:
        """A due ASL workflow: begin it if its starter died, end a cancel whose follow-up
        died, wake a Wait that is due, time out an attempt whose lease passed, send again a
        message that looks lost; else move its watch entry to the next moment it must be
        looked at. What it did, if anything."""
        wf = WorkflowRecord.from_item(item)
        if wf.status is WorkflowStatus.CANCELLING:
            return self._finish_cancel(wf.workflow_id)
        if wf.status is not WorkflowStatus.RUNNING:
            return None
        cursor = self._cursor(item)
        if cursor is None:
            return "Begin" if self.begin(wf.workflow_id) else None
        definition = self.scheduler.catalog.version(wf.wf_type, wf.def_hash)
        if cursor.deadline is not None and now >= cursor.deadline:
            # The machine's TimeoutSeconds: the execution ends whatever a Catch says; the
            # attempt in flight can record nothing after this write (its cursor moved).
            interpreter = self._interpreter(definition, wf, cursor.scope)
            seconds = (cursor.deadline - wf.created_at) // 1000
            ended: list[Action] = [
                Failed(TASK_TIMEOUT, f"The execution ran past its TimeoutSeconds ({seconds} s)")
            ]
            timed_out = self._commit(item, wf, definition, interpreter, cursor, ended, now, None)
            if timed_out:  # its branches' children and its .sync Task's child stop with it
                self.cancelled(wf.workflow_id, cursor.unit)
            return "TimeOutMachine" if timed_out else None
        if cursor.branches:
            if self.branches_ended(wf.workflow_id, now):
                return "BranchesEnded"
            self._move_due(item, wf, self._capped(cursor, now + 1000 * DISPATCH_GRACE_SECONDS))
            return None
        if cursor.wake_at is not None:
            if cursor.wake_at > now:
                self._move_due(item, wf, self._capped(cursor, cursor.wake_at))
                return None
            interpreter = self._interpreter(definition, wf, cursor.scope)
            frame, actions = interpreter.advance(cursor.frame, WaitElapsed(), _to_dt(now))
            woke = self._commit(
                item, wf, definition, interpreter, replace(cursor, frame=frame), actions, now, None
            )
            return "Wake" if woke else None
        return self._look_at_unit(item, wf, definition, cursor, now)

    def _finish_cancel(self, workflow_id: str) -> str | None:
        """A cancel whose write took effect but whose follow-up never ran (its process died,
        the store was throttled): the look ends the machine CANCELLED, as the follow-up would
        have, and stops what it ran (its branches, its `.sync` Task's child)."""
        loaded = self.scheduler.load(workflow_id)
        if loaded is None:
            return None
        self.scheduler.run(*loaded, supervisor=True)
        self.cancelled(workflow_id)
        return "Cancel"

    def _look_at_unit(
        self, item: Item, wf: WorkflowRecord, definition: Definition, cursor: Cursor, now: int
    ) -> str | None:
        """The current unit's supervision: a lost message sent again, an attempt past its
        lease timed out (then the retriers decide), else the entry moved to its deadline."""
        if cursor.unit is None:
            return None
        unit = self._store.get(visits_pk(wf.workflow_id), item_sk("step", cursor.unit))
        if unit is None:
            return None
        rec = StepRecord.from_item(unit)
        spec = self._spec(
            definition,
            cursor.task.get("resource", ""),
            cursor.task.get("function", ""),
            cursor.task.get("timeout"),
            cursor.task.get("heartbeat"),
        )
        grace = definition.dispatch_timeout_seconds * 1000
        if rec.status is StepStatus.QUEUED:
            since = max(rec.dispatched_at or 0, rec.available_at or 0, rec.resent_at or 0)
            if now < since + grace:
                self._move_due(item, wf, self._capped(cursor, since + grace))
                return None
            resent = tx.Write(
                *rec.key,
                Update(set={"resent_at": now}, add={"dispatches": 1}),
                all_of(Eq("status", StepStatus.QUEUED.value), Eq("attempt", rec.attempt)),
            )
            if self.scheduler.executor.step(None, resent) is None:
                return None
            pool = spec.pool
            self.scheduler.deliver(
                [OutgoingTask(pool, TaskMessage(wf.workflow_id, rec.name, rec.attempt))]
            )
            self._move_due(item, wf, self._capped(cursor, now + grace))
            return "Redispatch"
        if rec.status is StepStatus.RUNNING:
            timeout_at = (rec.claimed_at or now) + spec.timeout_seconds * 1000
            beat_at = (
                (rec.heartbeat_at or rec.claimed_at or now) + spec.heartbeat_seconds * 1000
                if spec.heartbeat_seconds
                else None
            )
            deadline = min(timeout_at, beat_at or timeout_at)
            if now < deadline:
                self._move_due(item, wf, self._capped(cursor, deadline))
                return None
            # Either way States.Timeout with no cause, as us-east-1 reports a missed heartbeat
            # too (a Retry or Catch on States.HeartbeatTimeout matches it: asl/errors.py).
            missed = beat_at is not None and beat_at <= timeout_at
            seen = all_of(
                Eq("heartbeat_at", rec.heartbeat_at)
                if rec.heartbeat_at
                else Missing("heartbeat_at")
            )
            out = self.end_unit(rec, TaskFailed(TASK_TIMEOUT, ""), seen, missed_heartbeat=missed)
            return "TimeOut" if out else None
        if rec.status is StepStatus.WAITING:
            return self._look_at_wait(item, wf, cursor, unit, now)
        return None

    def _look_at_wait(
        self, item: Item, wf: WorkflowRecord, cursor: Cursor, unit: Item, now: int
    ) -> str | None:
        """A Task waiting for its token (or its child's end): timed out at its TimeoutSeconds
        from its claim (a year when it names none) or at its HeartbeatSeconds from its last
        heartbeat (`States.Timeout`, as a Lambda task's, matched by `States.HeartbeatTimeout`
        too); a `.sync` child's end looked for, in case the write at its end died."""
        rec = StepRecord.from_item(unit)
        child = unit.get(CHILD)
        if isinstance(child, str) and self.child_ended(child):
            return "ChildEnded"
        timeout = cursor.task.get("timeout") or CALLBACK_TIMEOUT_SECONDS
        heartbeat = cursor.task.get("heartbeat")
        claimed = rec.claimed_at or now
        timeout_at = claimed + int(timeout * 1000)
        beat_at = (rec.heartbeat_at or claimed) + int(heartbeat * 1000) if heartbeat else None
        deadline = min(timeout_at, beat_at or timeout_at)
        if now < deadline:
            due = deadline
            if isinstance(child, str):
                due = min(due, now + 1000 * CHILD_CHECK_SECONDS)
            self._move_due(item, wf, self._capped(cursor, due))
            return None
        missed = beat_at is not None and beat_at <= timeout_at
        seen = Eq("heartbeat_at", rec.heartbeat_at) if rec.heartbeat_at else Missing("heartbeat_at")
        out = self.end_unit(
            rec,
            TaskFailed(TASK_TIMEOUT, ""),
            seen,
            missed_heartbeat=missed,
            token_hash=rec.callback_token,
        )
        if out and isinstance(child, str):  # the Task no longer waits for it: it stops
            self.stop(child)
        return "TimeOut" if out else None

    @staticmethod
    def _capped(cursor: Cursor, due: int) -> int:
        """A due time no later than the machine's own deadline."""
        return due if cursor.deadline is None else min(due, cursor.deadline)

    def _move_due(self, item: Item, wf: WorkflowRecord, due: int) -> None:
        if wf.due_at == due:
            return
        self.scheduler.executor.raw(
            tx.move_due(wf, due, shard=self.scheduler.shard(wf.workflow_id))
        )

    # -------------------------------------------------------------------------- views

    def view(self, item: Item) -> dict[str, Any]:
        """What `GET /workflows/{id}` adds for an ASL workflow: the machine's output, or its
        error and cause (and `failure: "definition"`), and where it is."""
        out: dict[str, Any] = {}
        if OUTPUT in item:
            out["output"] = self.scheduler.value(item[OUTPUT])
        if item.get("failure") == DEFINITION_FAILURE:
            out["error"] = item.get("asl_error")
            out["cause"] = item.get("asl_cause")
            out["failure"] = DEFINITION_FAILURE
        cursor = self._cursor(item)
        if cursor is not None and not WorkflowStatus(item["status"]).terminal:
            out["state"] = cursor.frame.state
        return out

    def path(
        self, workflow_id: str, after: int = -1, limit: int = 100
    ) -> tuple[list[dict[str, Any]], int | None]:
        """One page of the path taken: the states entered in order, each with its visit,
        input and output (resolved, large ones read from the bucket); and the number to read
        on from (None: the last page)."""
        entries, following = self.path_page(workflow_id, after, limit)
        out = []
        for e in entries:
            entry = {
                "state": e.state,
                "visit": e.visit,
                "input": self.scheduler.value(e.input),
                "entered_at": e.entered_at,
            }
            if e.output is not None:
                entry["output"] = self.scheduler.value(e.output)
            out.append(entry)
        return out, following

    def path_page(
        self, workflow_id: str, after: int = -1, limit: int = 100
    ) -> tuple[list[PathEntry], int | None]:
        """One page of the path as stored (a value may be a payload reference: the API links
        a large one rather than reading it), read after entry `after`; and the number to read
        on from (None: the last page). One query, whatever the path's length."""
        page = self._store.query_after(
            path_pk(workflow_id), path_sk(after) if after >= 0 else "", limit
        )
        entries = [
            PathEntry(
                number=int(item["sk"]),
                state=str(item["state"]),
                visit=int(item["visit"]),
                input=str(item["input"]),
                output=None if item.get("output") is None else str(item["output"]),
                entered_at=int(item["entered_at"]),
                exited_at=None if item.get("exited_at") is None else int(item["exited_at"]),
            )
            for item in page.items
        ]
        full = page.cursor is not None or len(entries) == limit
        return entries, (entries[-1].number if entries and full else None)


@dataclass(frozen=True)
class PathEntry:
    """A state entered, as its path item keeps it (`ASLPATH#<id>`, numbered from 0)."""

    number: int
    state: str
    visit: int
    input: str  # JSON, or a payload reference
    output: str | None  # None while the state runs
    entered_at: int
    exited_at: int | None


def _to_dt(ms: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)


def _to_ms(at: _dt.datetime) -> int:
    return int(at.timestamp() * 1000)


def callback_of(resource: str) -> bool:
    """Whether a Task's attempt ends with a callback rather than its call's return: a
    `.waitForTaskToken` Task (its token completed through `POST /tasks/...`), or a
    `startExecution.sync` Task (its child's end completes it)."""
    return resource.endswith(lambdas.WAIT_FOR_TOKEN) or integrations.waits_for_child(resource)


def with_token(value: Any, placeholder: str | None, token: str) -> Any:
    """`value` with the interpreter's task token (a placeholder, unique in the execution)
    replaced by the attempt's Shepherd task token, wherever the state put it."""
    if placeholder is None:
        return value
    if isinstance(value, str):
        return value.replace(placeholder, token) if placeholder in value else value
    if isinstance(value, dict):
        return {k: with_token(v, placeholder, token) for k, v in value.items()}
    if isinstance(value, list):
        return [with_token(v, placeholder, token) for v in value]
    return value


def idempotency_key(rec: StepRecord) -> str:
    """A unit's key for the services it calls: the same for every attempt of the visit."""
    return f"{rec.workflow_id}/{rec.name}"


def _too_soon(last_ms: int | None, now: int, quiet_ms: int) -> None:
    """HeartbeatTooSoon unless the token's last heartbeat is at least `quiet_ms` old."""
    if last_ms is not None and now - last_ms < quiet_ms:
        raise HeartbeatTooSoon(max(1, -(-(last_ms + quiet_ms - now) // 1000)))


def _execution_status(status: WorkflowStatus) -> str:
    """A Shepherd workflow's end as DescribeExecution's status."""
    if status is WorkflowStatus.SUCCEEDED:
        return "SUCCEEDED"
    if status is WorkflowStatus.CANCELLED:
        return "ABORTED"
    return "FAILED"


def _error_name(stored: Any) -> str | None:
    """The error name of a native workflow's stored `error` (`tx.error_json`'s text)."""
    if not isinstance(stored, str):
        return None
    try:
        value = json.loads(stored)
    except ValueError:
        return None
    name = value.get("type") if isinstance(value, dict) else None
    return name if isinstance(name, str) else None
