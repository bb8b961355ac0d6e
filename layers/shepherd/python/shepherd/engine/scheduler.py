"""The scheduler: starts workflows and advances them. It turns planned actions into the
executor's conditional writes, then sends the task messages and events they announce.

Operator actions (`shepherd.engine.operations`), callbacks (`shepherd.engine.callbacks`) and
uploads (`shepherd.engine.uploads`) are built on top of it and reach it downward only; the
engine (`shepherd.engine.build.Engine`) exposes each of them.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import random
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from shepherd import business_keys, expressions, fanout, input_problems, jsonsafe, limits
from shepherd.asl.engine import AslEngine
from shepherd.conditions import Cond, Eq, Exists, Item, Missing, Update, all_of
from shepherd.decisions import choice, repeat, workflow_timeout
from shepherd.decisions import fanout as fo
from shepherd.decisions import transitions as tx
from shepherd.decisions.fanout import child_id as fanout_child_id
from shepherd.decisions.planner import (
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
    conditions_due,
    map_outcome,
    plan,
    start_actions,
)
from shepherd.decisions.retry import RetryIn
from shepherd.decisions.waits import RUNTIME_ERROR
from shepherd.definitions import MAX_SQS_DELAY, Definition, StepSpec
from shepherd.engine import signals
from shepherd.engine.catalog import Catalog
from shepherd.engine.executor import Executor
from shepherd.engine.maps import (
    PAGE_INPUT,
    PAGE_SHARDS,
    PAGE_SK,
    Maps,
    outcome_of,
    page_pk,
    unit_task,
)
from shepherd.engine.outputs import workflow_output
from shepherd.errors import (
    ConditionFailed,
    DeliveryError,
    IdempotencyConflict,
    InputInvalid,
    InputPathNotFound,
    InputTooLarge,
    MapItemsInvalid,
    MapTooLarge,
    StoreUnavailable,
    WorkflowNotFound,
)
from shepherd.ids import derived_id as derived_id  # noqa: PLC0414 - callers import it here
from shepherd.keys import MAP_ITEM_PAGE, WF_SK, Kind, item_sk, map_item_key, watch_shard, wf_pk
from shepherd.kinds import kind_of, pass_step
from shepherd.model import (
    TOTAL,
    MapState,
    OutgoingTask,
    PoolState,
    StepRecord,
    StepStatus,
    TaskMessage,
    WorkflowRecord,
    WorkflowState,
    WorkflowStatus,
    loads,
)
from shepherd.payloads import Payloads, payload_key, stored_size
from shepherd.ports import IdSource, Store, TaskQueue

if TYPE_CHECKING:
    from shepherd.engine.wakeup import Wakeup

logger = logging.getLogger("shepherd.scheduler")

MAX_ROUNDS = 64
APPROVAL_TIMED_OUT = "ApprovalTimedOut"
CHILD_INPUT_INVALID = "ChildInputInvalid"


@dataclass(frozen=True)
class EngineConfig:
    watch_shards: int = 8
    retention_seconds: int = 30 * 24 * 3600


@dataclass
class Ports:
    """What the engine writes to and reads from. No event publisher: lifecycle events come
    from the table's change stream (shepherd.changes), never from a writer."""

    store: Store
    queue: TaskQueue
    clock: Any  # shepherd.clock.Clock
    ids: IdSource
    rng: random.Random
    # The payload bucket behind the claim check (S3 on AWS, moto locally, memory in tests).
    # No default: a host that forgot it must fail when it builds the engine, not keep large
    # payloads in memory.
    payloads: Payloads


@dataclass(frozen=True)
class StartResult:
    workflow: WorkflowRecord
    created: bool

    @property
    def workflow_id(self) -> str:
        return self.workflow.workflow_id


# The outcomes of an attempt timed out (`EndAttempt.outcome`): what a parked result outweighs.
ATTEMPT_TIMEOUTS = ("timeout", "heartbeat_timeout")
# A join of this many dependencies or more (and an end of this many sinks) counts them on an
# item of its own rather than being read by each one's advance (issue 41.2).
JOIN_COUNTER_FROM = 4


@dataclass(frozen=True)
class Applied:
    """One planned action and whether its write won (False: someone else had acted).
    `looked`: planned by a supervisor's look on the state as it found it (its first round),
    not as a consequence of its own writes."""

    action: Action
    won: bool
    looked: bool = False


def request_hash(wf_type: str, payload: Any, tags: Mapping[str, str] | None = None) -> str:
    """What an idempotent replay is compared by: the type, the input and (if any) the tags."""
    request: dict[str, Any] = {"type": wf_type, "input": payload}
    if tags:
        request["tags"] = dict(tags)
    return hashlib.sha256(jsonsafe.dumps(request).encode()).hexdigest()


def idempotency_key(workflow_id: str, kind: Kind, name: str) -> str:
    """Stable across retries of the step; distinct for its compensation."""
    return f"{workflow_id}:{name}" + (":compensate" if kind == "compensation" else "")


def input_problems_error(definition: Definition, payload: Any, what: str) -> InputInvalid:
    """An input its InputSchema refuses: every problem (up to `MAX_INPUT_PROBLEMS`), each
    `<path>: <what is wrong>` with the path rooted at `what` (`input.items[0].qty`)."""
    assert definition.input_schema is not None
    found = [
        (path.replace("data", what, 1), message.replace("data", what, 1))
        for path, message in input_problems.problems(definition.input_schema, payload)
    ]
    text = "; ".join(f"{path}: {message}" for path, message in found)
    if len(found) >= limits.MAX_INPUT_PROBLEMS:
        text += f" (the first {limits.MAX_INPUT_PROBLEMS} problems; there may be more)"
    elif len(found) > 1:
        text += f" ({len(found)} problems)"
    return InputInvalid(text, found[0][0], tuple(found))


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
    total = size + sum(stored_size(r.output) for r in others)
    if total > limits.MAX_WORKFLOW_OUTPUT_BYTES:
        return (
            f"the workflow's outputs would total {total} bytes; "
            f"the limit is {limits.MAX_WORKFLOW_OUTPUT_BYTES}"
        )
    return None


class Scheduler:
    """Starts workflows and advances them; shared by the API, agents and the supervisor.

    Guarantees: a start is one conditional put (the workflow item; step items come with their
    first write); every later change is one conditional write (or one transaction) applied by
    the executor, whose loss is learned from the returned current
    item; messages and events are sent only after the write they announce has won.
    """

    def __init__(self, ports: Ports, catalog: Catalog, config: EngineConfig | None = None) -> None:
        self.ports = ports
        self.catalog = catalog
        self.config = config or EngineConfig()
        self.executor = Executor(ports)
        self._rest_writes = _RestWrites(self)
        self._compensations = _Compensations(self)
        self.maps = Maps(self.executor, ports, self.expires)
        # Amazon States Language workflows: the frame as the cursor, each visit a unit.
        self.asl = AslEngine(self)
        # What wakes a sleeping supervisor (shepherd.engine.wakeup); None: it never sleeps.
        self.wakeup: Wakeup | None = None

    def watched(self) -> None:
        """After a start or an operator's write won: it may have put a workflow in an empty
        watch index, so the supervisor must be ticking (a no-op while it is)."""
        if self.wakeup is not None:
            self.wakeup.watched()

    # ------------------------------------------------------------------------------ start

    def start(
        self,
        wf_type: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        owner: str = "local",
        tags: Mapping[str, str] | None = None,
    ) -> StartResult:
        """Validate, write the workflow item (one conditional put, or one transaction with its
        business-key items: its tags and its steps' Match correlations), dispatch the roots.

        The same owner and idempotency key with the same request returns the same workflow;
        with a different request it raises IdempotencyConflict.
        """
        definition = self.catalog.current(wf_type)
        tags = business_keys.checked_tags(tags)
        input_json = self.validated_input(definition, payload)
        workflow_id = (
            derived_id(owner, idempotency_key) if idempotency_key else self.ports.ids.new_id()
        )
        return self.create(
            definition,
            workflow_id,
            input_json,
            rhash=request_hash(wf_type, payload, tags),
            owner=owner,
            idempotency_key=idempotency_key,
            tags=tags,
        )

    def create(
        self,
        definition: Definition,
        workflow_id: str,
        input_json: str,
        *,
        rhash: str,
        owner: str,
        idempotency_key: str | None,
        tags: Mapping[str, str] | None = None,
    ) -> StartResult:
        """Write a validated start (the workflow item) and dispatch its roots; a workflow that
        exists already is an idempotent replay (same request hash) or IdempotencyConflict."""
        wf_type = definition.name
        now = self.ports.clock.now_ms()
        # Checked before anything is written: a Match that selects nothing refuses the start.
        matched = {
            step: business_keys.match_values(spec.match or {}, loads(input_json), step)
            for step, spec in definition.matches.items()
        }
        self.catalog.ensure_snapshot(definition)
        # A large input goes to the payload bucket first; if the put below loses
        # (an idempotent replay), the object is never referenced: harmless.
        stored_input = self.keep(input_json, workflow_id, "input")
        workflow = WorkflowRecord(
            workflow_id=workflow_id,
            wf_type=wf_type,
            def_hash=definition.content_hash,
            status=WorkflowStatus.RUNNING,
            input=stored_input,
            owner=owner,
            request_hash=rhash,
            created_at=now,
            updated_at=now,
            idempotency_key=idempotency_key,
            watch_shard=self.shard(workflow_id),
            due_at=now + definition.start_gap_ms,
            tags=jsonsafe.dumps(dict(tags)) if tags else None,
        )
        # The workflow item (with its business keys' items, if any: issue 37): each step's item
        # is created by the first write the step needs (a root's by its claim, which accepts a
        # missing item for attempt 1).
        kept = now // 1000 + signals.KEPT_SECONDS + self.config.retention_seconds
        extra = [
            business_keys.tag_item(owner, workflow_id, now, key, value, kept)
            for key, value in (tags or {}).items()
        ] + [
            business_keys.match_item(
                owner, workflow_id, now, step, definition.matches[step].name, values, kept
            )
            for step, values in matched.items()
        ]
        existing_item = self.executor.start(workflow.to_item(), extra)
        if existing_item is not None:
            existing = WorkflowRecord.from_item(existing_item)
            if existing.request_hash != rhash:
                raise IdempotencyConflict(existing.workflow_id) from None
            return StartResult(existing, created=False)
        self.watched()
        self.dispatch_roots(workflow, definition, input_json)
        return StartResult(workflow, created=True)

    def dispatch_roots(
        self, workflow: WorkflowRecord, definition: Definition, input_json: str
    ) -> None:
        """A new workflow's roots: sent (a plain task root), or skipped, rested or started as
        their kind says (`_start_conditional`); a state machine's start state entered."""
        if definition.state_machine is not None:
            self.asl.begin(workflow.workflow_id)
            return
        if any(
            definition.by_name[r].condition is not None or not definition.by_name[r].runs_agent
            for r in definition.roots
        ):
            self._start_conditional(workflow, definition, input_json)
            return
        tasks = [
            self.task(workflow.workflow_id, definition, "step", spec.name, 1)
            for spec in definition.steps
            if not spec.depends_on
        ]
        self.deliver(tasks)

    def _start_conditional(
        self, workflow: WorkflowRecord, definition: Definition, input_json: str
    ) -> None:
        """Send the roots whose condition holds on the input, skip the others, and start the
        Wait roots resting (a skip that wins advances past its step, as a completion would)."""
        state = WorkflowState(workflow).complete(definition.roots)
        state.partial = True
        now = self.ports.clock.now_ms()
        tasks: list[OutgoingTask] = []
        applied = [
            Applied(action, self._apply(state, definition, action, now, tasks))
            for action in start_actions(definition, state, loads(input_json))
        ]
        self.deliver(tasks)
        self._advance_past(state, definition, applied)

    @staticmethod
    def validated_input(
        definition: Definition,
        payload: Any,
        what: str = "input",
        max_bytes: int = limits.MAX_INPUT_BYTES,
        parsed: bool = False,
        schema: bool = True,
    ) -> str:
        """A workflow's (or a step's replacement) input as stored, checked against the caps
        and (unless `schema` is False) the definition's InputSchema (an uploaded input:
        `max_bytes` MAX_UPLOAD_BYTES; `parsed`: `payload` came from `jsonsafe.parse`, so it
        is not walked again)."""
        try:
            input_json = (
                jsonsafe.canonical(payload) if parsed else jsonsafe.dumps(payload, what=what)
            )
        except jsonsafe.JsonRejected as exc:
            raise InputInvalid(exc.message, what) from None
        size = jsonsafe.size(input_json)
        if size > max_bytes:
            raise InputTooLarge(size, max_bytes)
        validator = definition.input_validator
        if validator is not None and schema:
            import fastjsonschema  # noqa: PLC0415 - already imported by definitions

            try:
                validator(payload)
            except fastjsonschema.JsonSchemaValueException:
                raise input_problems_error(definition, payload, what) from None
        return input_json

    # -------------------------------------------------------------------------- payloads

    def keep(self, text: str, workflow_id: str, *parts: object) -> str:
        """What an item stores for a payload: the text itself when small, else a reference
        to an object written now under a key made from the server's own names."""
        return self.ports.payloads.keep(text, payload_key(workflow_id, *parts))

    def keep_for(self, rec: StepRecord, field_name: str, text: str) -> str:
        """A step's (or compensation's, or map item's) payload of one attempt: output,
        details, input."""
        item = () if rec.index is None else (f"item{rec.index}",)
        return self.keep(text, rec.workflow_id, rec.kind, rec.name, *item, rec.attempt, field_name)

    def keep_error(self, rec: StepRecord, error_type: str, exc: BaseException) -> str | None:
        """An agent error's full text as an object (the reference), beside the cut message the
        item keeps: the whole message and the traceback, which the item has no room for.

        None when there is nothing more to say (no traceback, a message within its cap), or
        when the put fails: the failure is recorded without it, never held up by it.
        """
        message = str(exc) or error_type
        trace = "".join(traceback.format_exception(exc)) if exc.__traceback__ else ""
        if not trace and len(message) <= limits.MAX_ERROR_MESSAGE:
            return None
        cap = limits.MAX_ERROR_FULL_CHARS
        full = {"type": error_type, "message": message[:cap], "traceback": trace[-cap:]}
        try:
            text = jsonsafe.dumps(full, what="error")
            # A map item's under its own name (as `keep_for`): not the map step's own error.
            item = () if rec.index is None else (f"item{rec.index}",)
            key = payload_key(rec.workflow_id, rec.kind, rec.name, *item, rec.attempt, "error")
            return self.ports.payloads.keep(text, key, inline_bytes=0)
        except Exception:  # a failed put, a message with a lone surrogate: no full text
            logger.warning("an error's full text was not kept", exc_info=True)
            return None

    def value(self, stored: str | None) -> Any:
        """A stored payload as a plain value, fetched and verified if it is a reference."""
        return self.ports.payloads.value(stored)

    # ----------------------------------------------------------------------------- reads

    def load(self, workflow_id: str) -> tuple[WorkflowState, Definition] | None:
        """One consistent query: the workflow, its steps and compensations, and its definition."""
        return self.parse(self.ports.store.load(wf_pk(workflow_id)))

    def parse(self, items: list[Item]) -> tuple[WorkflowState, Definition] | None:
        """A workflow's items (one partition) as its state, with the definition it runs on."""
        state = WorkflowState.from_items(items)
        if state is None:
            return None
        definition = self.catalog.version(state.workflow.wf_type, state.workflow.def_hash)
        # The units in the windows of its running maps (at most MaxConcurrency each), and the
        # children its waiting steps wait for (one item each).
        state = self.maps.with_windows(state.complete(definition.topological_order))
        return self.with_children(state), definition

    def with_children(self, state: WorkflowState) -> WorkflowState:
        """Read the workflow items of the children its units wait for (one BatchGetItem):
        what decides those units' ends."""
        units = [u for window in state.windows.values() for u in window.values()]
        ids = [
            rec.child_id
            for rec in (*state.steps.values(), *state.compensations.values(), *units)
            if rec.child_id is not None and rec.status is StepStatus.WAITING
        ]
        for start in range(0, len(ids), 100):
            keys = [(wf_pk(i), WF_SK) for i in ids[start : start + 100]]
            for item in self.ports.store.get_many(keys):
                child = WorkflowRecord.from_item(item)
                state.children[child.workflow_id] = child
        return state

    def load_item(self, message: TaskMessage) -> tuple[WorkflowState, Definition] | None:
        """What a map item's claim reads, in one consistent BatchGetItem: the workflow item,
        the item's unit and its page (whose `t` says how many items the map has; its stride is
        the definition's MaxConcurrency), never the map's unit nor its other items; for an
        item's compensation also its map compensation's unit (its window holds the position)
        and the item it undoes. The item's unit is in `state.windows` at its position; its
        page in `state.pages`. The map's own status is not read: the claim's condition decides,
        and the accounting's refill is conditioned on the map still running."""
        assert message.item is not None
        wf_id, name, index = message.workflow_id, message.step, message.item
        pk = wf_pk(wf_id)
        unit_key = map_item_key(wf_id, name, index, message.kind)
        forward_key = map_item_key(wf_id, name, index)
        page = (page_pk(wf_id, name, index // MAP_ITEM_PAGE), PAGE_SK)
        keys = [(pk, WF_SK), unit_key, page]
        compensation = message.kind == "compensation"
        if compensation:
            keys += [(pk, item_sk("compensation", name)), (pk, item_sk("step", name)), forward_key]
        found = {(i["pk"], i["sk"]): i for i in self.ports.store.get_many(keys)}
        state = WorkflowState.from_items([i for k, i in found.items() if k[0] == pk])
        if state is None:
            return None
        definition = self.catalog.version(state.workflow.wf_type, state.workflow.def_hash)
        state.partial = True
        spec = definition.by_name.get(name)
        page_item = found.get(page)
        if spec is None or spec.map is None or page_item is None:
            return state, definition
        if not compensation:
            # Its window shards (`k`, on the page since the map opened; absent: a map opened
            # with its window on its unit): the accounting writes the item's shard.
            opened = MapState(
                total=int(page_item.get("t", 0)),
                stride=spec.map.max_concurrency,
                shards=int(page_item.get(PAGE_SHARDS, 0)),
                loaded=False,
            )
            # The map step's replacement input, if an operator gave one, is on the page.
            given = page_item.get(PAGE_INPUT)
            state.put(
                StepRecord(
                    wf_id, "step", name, StepStatus.RUNNING, attempt=1, fanout=opened, input=given
                )
            )
        map_rec = state.record(message.kind, name)
        if map_rec is None or map_rec.fanout is None:
            return state, definition
        position = message.position if message.position is not None else index
        m = map_rec.fanout
        if compensation and m.shards and map_rec.status is StepStatus.RUNNING:
            # An item compensation's window entry is on its shard (one more read).
            shard = self.ports.store.get(*fo.unit_key(map_rec.key, m, position))
            if shard is not None:
                state.put_shard("compensation", name, shard)
            map_rec = state.record(message.kind, name) or map_rec
            m = map_rec.fanout or m
        entered_at = m.window.get(position, 0)
        if compensation and position not in m.window:
            return state, definition
        item = found.get(unit_key)
        unit = (
            StepRecord.from_item(item)
            if item is not None
            else StepRecord.unstored_item(
                wf_id,
                name,
                index,
                state.workflow.wf_type,
                entered_at,
                message.kind,
                message.position,
            )
        )
        if compensation and unit.position is None:
            unit = replace(unit, position=position)
        state.windows[(message.kind, name)] = {position: unit}
        state.pages[(name, index)] = page_item
        if compensation:
            forward = found.get(forward_key)
            if forward is not None:
                state.windows[("step", name)] = {index: StepRecord.from_item(forward)}
        return state, definition

    def load_units(
        self, workflow_id: str, units: Iterable[tuple[Kind, str]]
    ) -> tuple[WorkflowState, Definition] | None:
        """The workflow item and the named units only, in one consistent BatchGetItem: what a
        claim or an advance needs, never the whole workflow, so its cost does not grow with
        the workflow's width (docs/architecture.md, bounded reads). A named step with no
        item is PENDING (its item comes with its first write); anything not named is unknown
        (`state.partial`)."""
        wanted = list(dict.fromkeys(units))
        pk = wf_pk(workflow_id)
        keys = [(pk, WF_SK), *((pk, item_sk(kind, name)) for kind, name in wanted)]
        state = WorkflowState.from_items(self.ports.store.get_many(keys))
        if state is None:
            return None
        definition = self.catalog.version(state.workflow.wf_type, state.workflow.def_hash)
        state.partial = True
        state.complete(
            name for kind, name in wanted if kind == "step" and name in definition.by_name
        )
        self.maps.with_shards(state)  # a running map's window shards, if one was read
        return state, definition

    def step_output(self, workflow_id: str, name: str) -> str | None:
        """One step's output as stored (a dependency an agent asked for): one consistent read
        of its item."""
        item = self.ports.store.get(wf_pk(workflow_id), item_sk("step", name))
        return None if item is None else item.get("output")

    def variables_for(
        self, state: WorkflowState, definition: Definition, name: str
    ) -> dict[str, Any]:
        """The variables step `name`'s expressions see: what the `Assign` of each step it
        depends on (directly or through others) set, read from their items (those `state`
        holds, the others in one batch read): bounded by the definition's assigners."""
        assigners = definition.assigners.get(name, ())
        texts: list[str | None] = []
        missing: list[str] = []
        for step in assigners:
            rec = state.steps.get(step)
            if rec is not None and rec.stored:
                texts.append(rec.variables)
            else:
                missing.append(step)
        if missing:
            wf = state.workflow.workflow_id
            keys = [(wf_pk(wf), item_sk("step", step)) for step in missing]
            texts += [item.get("variables") for item in self.ports.store.get_many(keys)]
        out: dict[str, Any] = {}
        for text in texts:
            out.update(loads(text) or {})
        return out

    def whole_if_large(self, state: WorkflowState, output: str) -> WorkflowState:
        """The state an output's caps are checked on: a large output (one that goes to the
        payload bucket) is checked against every output of the workflow, so a bounded read is
        made whole for it (its S3 put costs far more than the read); a small one cannot reach
        the workflow's total (90 steps x 64 KiB inline at most, against 1 GiB)."""
        if not state.partial or jsonsafe.size(output) <= self.ports.payloads.inline_bytes:
            return state
        loaded = self.load(state.workflow.workflow_id)
        if loaded is None:
            return state
        # The attempt's later decisions (a retry's dispatch, if this output fails it) plan on
        # this fresher workflow item: one read that saw a pause must not send anything (found
        # by the fault simulator, seed 8144).
        state.workflow = loaded[0].workflow
        return loaded[0]

    def owned(self, workflow_id: str, owner: str | None) -> tuple[WorkflowState, Definition]:
        """The workflow if it exists and `owner` (when given) owns it; else WorkflowNotFound."""
        loaded = self.load(workflow_id)
        if loaded is None or (owner is not None and loaded[0].workflow.owner != owner):
            raise WorkflowNotFound(workflow_id)
        return loaded

    def pull_due(
        self, state: WorkflowState, kind: Kind, name: str, *, at: int | None = None
    ) -> int:
        """Before a write no agent's reach covered (a callback's answer, a child's end):
        pull the watch entry to `now + g` of the unit it ends (docs/architecture.md, the
        deadline rule), always changing it so a look planned before this write loses its
        move. A lost pull reads the workflow item again: whoever moved the entry meanwhile
        may have moved it later. Returns the time it pulled to; `at`: pull to that instead
        (`pull_due_again`)."""
        definition = self.definition_of(state)
        running = state.workflow.status is WorkflowStatus.RUNNING
        gap = (
            definition.reach_gap_ms[name]
            if kind == "step" and running
            else definition.compensation_gap_ms
        )
        for _ in range(MAX_ROUNDS):
            wf = state.workflow
            target = self.ports.clock.now_ms() + gap if at is None else at
            if wf.status.terminal:
                return target
            if self.executor.workflow(state, tx.pull_due(wf, self.shard(wf.workflow_id), target)):
                return target
        raise StoreUnavailable("the watch entry kept moving; try again")

    def pull_due_again(self, state: WorkflowState, kind: Kind, name: str, at: int) -> None:
        """After that write: pull the entry to the same time once more. A look that read the
        workflow between the first pull and the write planned on the state before it, and its
        move, guarded by the pulled entry it saw, won; this puts the entry back (found by the
        fault simulator, seed 12 of the outage run: a Wait's wake found 700 ms late). Best
        effort: the write it follows has landed, so its caller is not told of a failure."""
        try:
            self.pull_due(state, kind, name, at=at)
        except StoreUnavailable:
            logger.warning(
                "watch entry not pulled again", extra={"workflow": state.workflow.workflow_id}
            )

    def _pull_due_to(self, state: WorkflowState, at: int) -> None:
        """Before a wait whose time no reach gap counted (`Until`, `UntilPath`) starts
        resting: its wake time becomes the watch entry's latest due (the deadline rule)."""
        for _ in range(MAX_ROUNDS):
            wf = state.workflow
            if wf.status.terminal or (wf.due_at is not None and wf.due_at <= at):
                return
            if self.executor.workflow(state, tx.pull_due(wf, self.shard(wf.workflow_id), at)):
                return
        raise StoreUnavailable("the watch entry kept moving; try again")

    def definition_of(self, state: WorkflowState) -> Definition:
        """The definition version a workflow runs on (cached by the catalog)."""
        wf = state.workflow
        return self.catalog.version(wf.wf_type, wf.def_hash)

    def shard(self, workflow_id: str) -> str:
        return watch_shard(workflow_id, self.config.watch_shards)

    def expires(self, now: int) -> int:
        """The TTL (epoch seconds) of an item that becomes terminal at `now`."""
        return now // 1000 + self.config.retention_seconds

    # --------------------------------------------------------------------------- advance

    def advance(
        self,
        workflow_id: str,
        *,
        completed: str | None = None,
        definition: Definition | None = None,
    ) -> list[Applied]:
        """Re-read a workflow and do what became possible (after a step outcome).

        After a step succeeded (`completed`, with the `definition` its workflow runs on, as
        the agent that ran it knows) while the workflow runs, only what that success can
        change is read (bounded: its successors, their dependencies, the sinks if it is one);
        anything else (a failure, an unwinding or paused workflow) reads it whole."""
        if completed is not None and definition is not None:
            bounded = self._advance_completed(workflow_id, completed, definition)
            if bounded is not None:
                return bounded
        loaded = self.load(workflow_id)
        if loaded is None:
            return []
        state, definition = loaded
        return self.run(state, definition, supervisor=False, completed=completed)

    def _advance_completed(
        self, workflow_id: str, completed: str, definition: Definition
    ) -> list[Applied] | None:
        """The bounded advance after `completed` succeeded, or None to read it whole."""
        if completed not in definition.by_name:
            return None
        needed = {completed}
        for successor in definition.dependents[completed]:
            depends_on = definition.by_name[successor].depends_on
            if self.counted(workflow_id, successor, len(depends_on)):
                needed.update((successor, *depends_on))
        sinks = definition.sinks
        if completed in sinks and self.counted(workflow_id, None, len(sinks)):
            needed.update(sinks)
        loaded = self.load_units(workflow_id, (("step", name) for name in sorted(needed)))
        if loaded is None:
            return []
        state, definition = loaded
        if state.workflow.status is not WorkflowStatus.RUNNING:
            return None  # paused or unwinding: planned on the whole workflow
        return self.run(state, definition, supervisor=False, completed=completed)

    def counted(self, workflow_id: str, join: str | None, dependencies: int) -> bool:
        """Count one more dependency done on a join (None: the end, over the sinks) and say
        whether all may be: a join of fewer than JOIN_COUNTER_FROM is always read (reading
        its few dependencies costs less than a counter's write). A trigger, never the
        decision: the caller reads the dependencies' own items and plans on them
        (docs/architecture.md, "Bounded reads")."""
        if dependencies < JOIN_COUNTER_FROM:
            return True
        now = self.ports.clock.now_ms()
        pk, sk, update = tx.count_join(workflow_id, join, self.expires(now))
        return int(self.ports.store.update(pk, sk, update, None).get("done", 0)) >= dependencies

    def run(
        self,
        state: WorkflowState,
        definition: Definition,
        *,
        supervisor: bool,
        completed: str | None = None,
        now: int | None = None,
        redispatch: bool = False,
        pools: Mapping[str, PoolState] | None = None,
    ) -> list[Applied]:
        """Plan, apply, fold the results into `state`, and plan again until nothing is left."""
        applied: list[Applied] = []
        tasks: list[OutgoingTask] = []
        tried: set[tuple[Any, ...]] = set()
        for round_ in range(MAX_ROUNDS):
            at = now if now is not None else self.ports.clock.now_ms()
            documents = {
                name: self.condition_document(state, definition, name)
                for name in conditions_due(state, definition)
            }
            actions = [
                a
                for a in plan(
                    state,
                    definition,
                    at,
                    supervisor=supervisor,
                    completed=completed,
                    rng=self.ports.rng,
                    redispatch=redispatch and round_ == 0,  # what it sends is then QUEUED
                    pools=pools,
                    documents=documents,
                )
                if _key(a) not in tried
            ]
            if not actions:
                break
            for action in actions:
                tried.add(_key(action))
                won = self._apply(state, definition, action, at, tasks)
                applied.append(Applied(action, won, looked=supervisor and round_ == 0))
        self.deliver(tasks)
        return applied + self._advance_past(state, definition, applied)

    def _advance_past(
        self, state: WorkflowState, definition: Definition, applied: list[Applied]
    ) -> list[Applied]:
        """The winner of a skip or a wake advances past its step, as the agent of a success
        does (its successors, the finish); the winner of a failed wait advances the whole
        workflow (a bounded plan only looks forward), which unwinds or pauses it. A
        WaitForSignal step that took a signal (as it started resting, at a look, at its
        deadline) or timed out is one or the other, as it now is in `state`."""
        workflow_id = state.workflow.workflow_id
        out: list[Applied] = []
        for a in applied:
            if not a.won:
                continue
            if isinstance(a.action, StartWait | TakeSignal | TimeOutSignal):
                ended = state.steps.get(a.action.seen.name)
                if ended is not None and ended.status is StepStatus.SUCCEEDED:
                    name = ended.name
                    out += self.advance(workflow_id, completed=name, definition=definition)
                elif ended is not None and ended.status is StepStatus.FAILED:
                    out += self.advance(workflow_id)
            elif isinstance(a.action, PassThrough) and _failed(state, a.action.seen):
                out += self.advance(workflow_id)  # an expression failed: it unwinds or pauses
            elif isinstance(a.action, Skip | PassThrough | Wake):
                name = a.action.seen.name
                out += self.advance(workflow_id, completed=name, definition=definition)
            elif (
                isinstance(a.action, ChildSucceeded | StartChild)
                and a.action.seen.kind == "step"
                and a.action.seen.index is None
            ):
                out += self._advance_past_child(state, definition, a.action)
            elif isinstance(a.action, FinishMap) and a.action.seen.kind == "step":
                m = a.action.seen.fanout
                if m is not None and m.status == "SUCCEEDED":
                    name = a.action.seen.name
                    out += self.advance(workflow_id, completed=name, definition=definition)
                else:
                    out += self.advance(workflow_id)
            elif isinstance(a.action, FailWait | TimeOutApproval | FinishMap):
                out += self.advance(workflow_id)
        return out

    def _advance_past_child(
        self, state: WorkflowState, definition: Definition, action: ChildSucceeded | StartChild
    ) -> list[Applied]:
        """A child step that ended (a started detached one, or one whose child succeeded:
        for a `Repeat` step, its last iteration) advances past it; one whose loop limit failed
        it advances the whole workflow; one queued for its next iteration (or waiting for the
        child it started) nothing."""
        workflow_id, name = state.workflow.workflow_id, action.seen.name
        status = state.steps[name].status
        if status is StepStatus.SUCCEEDED:
            return self.advance(workflow_id, completed=name, definition=definition)
        if status is StepStatus.FAILED and isinstance(action, ChildSucceeded):
            return self.advance(workflow_id)
        return []

    def condition_document(self, state: WorkflowState, definition: Definition, name: str) -> Any:
        """What the condition of ready step `name` reads: the input and its dependencies'
        outputs (large ones fetched from the payload bucket; a skipped one has none)."""
        outputs = {}
        for dep in definition.by_name[name].depends_on:
            rec = state.steps[dep]
            done = rec.status is StepStatus.SUCCEEDED
            outputs[dep] = self.value(rec.output) if done else choice.MISSING
        return choice.document(self.value(state.workflow.input), outputs)

    def complete_attempt(
        self,
        state: WorkflowState,
        rec: StepRecord,
        output: str,
        *,
        token_hash: str | None = None,
    ) -> StepRecord | None:
        """Record an attempt's result (fenced), then advance the workflow.

        The one path for a result, whether the agent returned it or a callback brought it.
        `output` is as stored (`keep_for(rec, "output", text)`): a large output was written to
        the payload bucket first, and if this fenced write loses, that object is never
        referenced (the bucket's lifecycle rule removes it).
        None: the attempt was superseded and nothing was recorded.
        """
        updated = self.record_result(state, rec, output, token_hash=token_hash)
        if updated is not None:
            self.after_result(state, self.definition_of(state), rec, updated)
        return updated

    def record_result(
        self,
        state: WorkflowState,
        rec: StepRecord,
        output: str,
        *,
        token_hash: str | None = None,
        variables: str | None = None,
    ) -> StepRecord | None:
        """The result's fenced write alone (None: superseded, nothing recorded); with the
        variables its `Assign` set, if any."""
        now = self.ports.clock.now_ms()
        definition = self.definition_of(state)
        spec = definition.by_name.get(rec.name) if rec.kind == "step" else None
        if spec is None or spec.repeat is None:  # a map step (its items) never repeats
            write = tx.complete(
                rec, rec.attempt, now, output, self.expires(now), token_hash, variables=variables
            )
            return self.executor.step(state, write)
        return self._record_iteration(
            state, definition, spec, rec, output, now, token_hash, variables
        )

    def _record_iteration(
        self,
        state: WorkflowState,
        definition: Definition,
        spec: StepSpec,
        rec: StepRecord,
        output: str,
        now: int,
        token_hash: str | None,
        variables: str | None,
    ) -> StepRecord | None:
        """A `Repeat` task step's iteration returned: its write (`_iteration_write`; the
        next iteration's message, if it is sent at once, goes out in `after_result`)."""
        write = self._iteration_write(
            state, spec, rec, output, now, token_hash=token_hash, variables=variables
        )
        return self.executor.step(state, write)

    def _iteration_write(
        self,
        state: WorkflowState,
        spec: StepSpec,
        rec: StepRecord,
        output: str,
        now: int,
        *,
        token_hash: str | None = None,
        child: bool = False,
        variables: str | None = None,
    ) -> tx.Write:
        """A `Repeat` step's iteration ended with `output` (decisions/repeat.py): it succeeds
        when `Until` holds, else its next iteration is queued (a task's sent at once with no
        interval, else left resting for the supervisor), or it fails for good at
        `MaxIterations`. While its workflow unwinds, the result is recorded as a step's is (no
        iteration starts). `child`: a child-workflow step's child ended SUCCEEDED. What its
        `Assign` set (`variables`) is kept with the step's success, its last iteration's."""
        assert spec.repeat is not None
        iteration = rec.iterations + 1
        if state.workflow.status.unwinding:
            decision: repeat.Decision = repeat.Done()
        else:
            document = repeat.document(
                rec.name, self.value(state.workflow.input), self.value(output)
            )
            # An operator's resume of the failed step gave the loop a fresh budget.
            within = iteration - rec.loop_from
            decision = repeat.decide(spec.repeat, iteration=within, document=document)
        expires = self.expires(now)
        fence = tx.waiting_for(rec) if child else None
        if isinstance(decision, repeat.Done):
            return tx.last_iteration(
                rec, rec.attempt, now, output, expires, token_hash, child=child, variables=variables
            )
        if isinstance(decision, repeat.LimitReached):
            error = tx.error_json(repeat.LOOP_LIMIT, decision.message, iterations=iteration)
            return tx.loop_limit(
                rec, rec.attempt, now, output, error, expires, token_hash, fence=fence
            )
        return tx.iterate(
            rec,
            rec.attempt,
            now,
            output,
            delay_ms=decision.delay_ms,
            # A child is no message: the next one starts when its rest ends (`_child_ended`).
            dispatch=state.workflow.status is WorkflowStatus.RUNNING and not child,
            token_hash=token_hash,
            fence=fence,
        )

    @staticmethod
    def parked_key(rec: StepRecord) -> str:
        """Where an attempt's refused result is parked in the payload bucket (its item's
        index, None for a step's or a compensation's unit)."""
        return payload_key(rec.workflow_id, "parked", rec.kind, rec.name, rec.index, rec.attempt)

    def park_result(
        self, rec: StepRecord, output: str, returned_at: int, variables: str | None = None
    ) -> None:
        """Keep a result the store refused until the attempt's lease ended (a throttle
        longer than the lease) in the payload bucket, for the supervisor to record
        (`take_parked`; docs/architecture.md, "Throttling loses nothing"). Best effort: a
        failed put leaves the attempt to be timed out, as before."""
        parked: dict[str, Any] = {"output": output, "returned_at": returned_at}
        if variables is not None:
            parked["variables"] = variables
        self._park(rec, parked)

    def _park(self, rec: StepRecord, parked: dict[str, Any]) -> None:
        data = json.dumps(parked).encode("utf-8")
        try:
            self.ports.payloads.store.put(
                self.parked_key(rec), data, hashlib.sha256(data).hexdigest()
            )
        except Exception:
            logger.warning("refused write not parked", exc_info=True)
            return
        logger.warning(
            "write refused: parked for the supervisor",
            extra={"workflow_id": rec.workflow_id, "step": rec.name, "attempt": rec.attempt},
        )

    def park_heartbeat(self, rec: StepRecord, at: int) -> None:
        """Keep that a running attempt was alive at `at` though the store refused its
        heartbeat, for the supervisor to write before it would time the attempt out for a
        lost heartbeat (`take_parked`). A parked result is never replaced by it (the agent
        parks a result only after its last heartbeat). Best effort, as `park_result`."""
        self._park(rec, {"heartbeat_at": at})

    def take_parked(
        self,
        state: WorkflowState,
        definition: Definition,
        now: int,
        pools: Mapping[str, PoolState] | None = None,
    ) -> bool:
        """Before a look times an attempt out (what the planner would: its timeouts, planned
        here on a throwaway random source): record the result the attempt parked if it
        returned before the deadline (one bucket read per attempt to time out), as its agent
        would have, and advance after it. True if one was recorded (the caller reads the
        workflow again). A failed read raises: the look fails and is looked at again, never
        timing out an attempt whose result may be parked."""
        planned = plan(state, definition, now, supervisor=True, rng=random.Random(0), pools=pools)
        taken = False
        for action in planned:
            if not isinstance(action, EndAttempt) or action.outcome not in ATTEMPT_TIMEOUTS:
                continue
            rec = action.seen
            key = self.parked_key(rec)
            data = self.ports.payloads.store.get(key)
            if data is None:
                continue
            parked = json.loads(data)
            if "heartbeat_at" in parked:
                taken |= self._parked_heartbeat(state, action, int(parked["heartbeat_at"]))
                continue
            if int(parked["returned_at"]) > now - action.overdue_ms:
                continue  # returned after its deadline: the timeout stands
            variables = parked.get("variables")
            updated = self.record_result(state, rec, str(parked["output"]), variables=variables)
            if updated is None:
                continue  # ended or superseded since the read
            logger.warning(
                "parked result recorded",
                extra={"workflow_id": rec.workflow_id, "step": rec.name, "attempt": rec.attempt},
            )
            with contextlib.suppress(Exception):
                self.ports.payloads.store.delete(key)
            self.after_result(state, definition, rec, updated)
            taken = True
        return taken

    def _parked_heartbeat(self, state: WorkflowState, action: EndAttempt, at: int) -> bool:
        """A lost heartbeat's timeout, when the attempt parked a later one: that heartbeat
        written now (fenced as the agent's), so the attempt's lease runs from it. A
        TimeoutSeconds timeout stands: heartbeats never extend it."""
        rec = action.seen
        if action.outcome != "heartbeat_timeout" or at <= (rec.heartbeat_at or 0):
            return False
        beaten = self.executor.step(state, tx.heartbeat(rec, rec.attempt, at, None))
        if beaten is not None:
            logger.warning(
                "parked heartbeat recorded",
                extra={"workflow_id": rec.workflow_id, "step": rec.name, "attempt": rec.attempt},
            )
        return beaten is not None

    def after_result(
        self, state: WorkflowState, definition: Definition, rec: StepRecord, updated: StepRecord
    ) -> None:
        """After an attempt's result was recorded (by its agent, or from where it parked it):
        a map item's is counted on its map, any other unit's advances its workflow (a
        `Repeat` step's next iteration queued: nothing to advance)."""
        if updated.index is not None:
            self.after_item(state, definition, updated)
        elif updated.status is StepStatus.QUEUED:
            # A Repeat step's next iteration: sent at once with no interval, else resting
            # for the supervisor (nothing to advance either way).
            if updated.dispatched_at is not None:
                self.deliver([self.task_of(definition, updated)])
        else:
            failed = updated.status is StepStatus.FAILED  # a Repeat step's loop limit
            self.advance_after(rec, definition, failed=failed)

    def advance_after(
        self, rec: StepRecord, definition: Definition | None = None, *, failed: bool = False
    ) -> None:
        """Advance a workflow after one of its attempts ended, best effort: the outcome is
        recorded, so a throttled advance loses nothing (its successors are sent by the
        supervisor when their dispatch grace ends, its finish when its entry is due)."""
        completed = rec.name if rec.kind == "step" and not failed else None
        try:
            self.advance(rec.workflow_id, completed=completed, definition=definition)
        except StoreUnavailable:
            logger.warning(
                "advance deferred to the supervisor: the store is unavailable",
                exc_info=True,
                extra={"workflow_id": rec.workflow_id, "step": rec.name},
            )

    def end_attempt(self, state: WorkflowState, definition: Definition, action: EndAttempt) -> bool:
        """Record a failed attempt (retry or fail) as one fenced write, then deliver."""
        tasks: list[OutgoingTask] = []
        won = self._apply(state, definition, action, self.ports.clock.now_ms(), tasks)
        self.deliver(tasks)
        return won

    # ---------------------------------------------------------------------- the executor

    def _apply(
        self,
        state: WorkflowState,
        definition: Definition,
        action: Action,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool:
        ex = self.executor
        wf = state.workflow
        match action:
            case SendImplicit(name):
                tasks.append(self.task(wf.workflow_id, definition, "step", name, 1))
                return True
            case Dispatch(seen, lost):
                rec = ex.step(state, tx.dispatch(seen, now, lost=lost))
                if rec is None:
                    return False
                # Rounded up: SQS delays are whole seconds, and a message visible before
                # `available_at` could be claimed before the deadline rule counts it from.
                delay = -(-max(0, (rec.available_at or now) - now) // 1000)
                tasks.append(self.task_of(definition, rec, delay))
                return True
            case EndAttempt():
                return self._end_attempt(state, definition, action, now, tasks)
            case Cancel(seen):
                write = tx.cancel(seen, now, self.expires(now))
                cleared = self.inbox_cleared(state, definition, seen, now)
                return ex.step_with(state, seen, write, cleared) is not None
            case Skip() | PassThrough():
                return self._skip_or_pass(state, definition, action, now)
            case TellCancel(seen):
                return ex.step(state, tx.tell_cancel(seen, now)) is not None
            case (
                StartWait()
                | Wake()
                | FailWait()
                | TimeOutApproval()
                | TakeSignal()
                | TimeOutSignal()
            ):
                return self._apply_wait(state, definition, action, now)
            case AccountItem() | OpenMore() | DecideMap() | HaltMap() | FinishMap():
                return self._apply_map(state, definition, action, tasks)
            case StartChild() | CancelChild() | ChildSucceeded():
                return self._apply_child(state, definition, action, now)
            case StartCompensation(name):
                return self._start_compensation(state, definition, name, now, tasks)
        return self._apply_to_workflow(state, action, now)

    def _skip_or_pass(
        self, state: WorkflowState, definition: Definition, action: Skip | PassThrough, now: int
    ) -> bool:
        """A ready step whose condition is false is skipped; a ready Pass step succeeds with
        its output (`kinds.pass_step`): each in one write."""
        seen = action.seen
        if isinstance(action, Skip):
            return self.executor.step(state, tx.skip(seen, now, self.expires(now))) is not None
        spec = definition.by_name[seen.name]
        attempt = max(seen.attempt, 1)
        try:
            reads = self._expression_reads(state, definition, spec)
            seed = f"{seen.workflow_id}/{seen.name}/{attempt}"
            text, variables = pass_step.output_json(spec, *reads, seed)
            problem = output_problem(self.whole_if_large(state, text), seen, text)
            if problem is not None:
                raise expressions.ExpressionError(problem)
        except (expressions.ExpressionError, jsonsafe.JsonRejected) as exc:
            error = tx.error_json(expressions.QUERY_EVALUATION_ERROR, str(exc))
            write = tx.fail_wait(seen, now, error, self.expires(now))  # for good, as a wait's
            return self.executor.step(state, write) is not None
        output = self.keep_for(replace(seen, attempt=attempt), "output", text)
        write = tx.pass_through(seen, now, output, self.expires(now), variables)
        return self.executor.step(state, write) is not None

    def _expression_reads(
        self, state: WorkflowState, definition: Definition, spec: StepSpec
    ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """What a step's data expressions read (shepherd.expressions): the workflow input,
        its dependencies' outputs (a skipped one's null) and the variables it sees; nothing
        read if it has none."""
        if not pass_step.has_expressions(spec):
            return None, {}, {}
        document = self.condition_document(state, definition, spec.name)
        steps = {n: s.get("output") for n, s in document["steps"].items()}  # skipped: null
        return document["input"], steps, self.variables_for(state, definition, spec.name)

    def _start_compensation(
        self,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool:
        """Unwinding reached `name`: its compensation's unit, a task sent to its pool (a map
        step's: a map over its items that may have acted; a child-workflow step's: its child
        undoing itself)."""
        spec = definition.by_name[name]
        return kind_of(spec).start_compensation(
            self._compensations, state, definition, name, now, tasks
        )

    def _compensate_map(
        self,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
        *,
        children: bool,
    ) -> bool:
        """A map step's compensation: a map over its items that may have acted (a map of
        children's: a window of children undoing themselves)."""
        opened, sent = self.maps.open_compensation(state, definition, name)
        tasks.extend(sent)
        if opened and children:
            self._start_window(state, definition, state.compensations[name], now)
        return opened

    def _compensate_task(
        self,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool:
        """A task step's compensation: its unit, a task sent to its pool."""
        wf = state.workflow
        item = tx.new_compensation(wf.workflow_id, wf.wf_type, name, now)
        if not self.executor.create_step(state, item):
            return False
        tasks.append(self.task(wf.workflow_id, definition, "compensation", name, 1))
        return True

    def _apply_map(
        self,
        state: WorkflowState,
        definition: Definition,
        action: Action,
        tasks: list[OutgoingTask],
    ) -> bool:
        """A map's own writes (shepherd.engine.maps)."""
        maps = self.maps
        # Nothing is sent while the workflow is paused (an item that enters the window now is
        # sent by a look after the resume, its dispatch grace run out).
        send = state.workflow.status is not WorkflowStatus.PAUSED
        match action:
            case AccountItem(seen, position, outcome):
                accounted = maps.account(state, definition, seen, position, outcome)
                if accounted is None:
                    return False
                if send:
                    # A look at a paused workflow counts the item and enters the next one
                    # unsent, unstarted: the first look after the resume sends or starts it.
                    tasks.extend(accounted.tasks)
                    if definition.by_name[seen.name].workflow is not None:
                        now = self.ports.clock.now_ms()
                        self._start_window(
                            state, definition, accounted.map_rec, now, accounted.entered
                        )
                return True
            case OpenMore(seen):
                index_of = None
                if seen.kind == "compensation":

                    def index_of(p: int) -> int:
                        return maps.order_index(seen.workflow_id, seen.name, p)

                before = seen.fanout.opened if seen.fanout else 0
                rec, sent = maps.enter_rest(state, definition, seen, index_of=index_of)
                if send:
                    tasks.extend(sent)
                return rec is not None and rec.fanout is not None and rec.fanout.opened > before
            case DecideMap(seen, verdict):
                return maps.decide(state, seen, verdict)
            case HaltMap(seen):
                return maps.decide(state, seen, "CANCELLED")
            case FinishMap(seen):
                return maps.finish(state, definition, seen)
        raise TypeError(f"not a map action {action!r}")  # pragma: no cover

    # ------------------------------------------------------- child workflows (issue 24)

    def _apply_child(
        self, state: WorkflowState, definition: Definition, action: Action, now: int
    ) -> bool:
        ex = self.executor
        match action:
            case StartChild(seen) if seen.index is None and definition.by_name[seen.name].map:
                return self._open_child_map(state, definition, seen, now)
            case StartChild(seen) if seen.index is not None and seen.kind == "compensation":
                return self._undo_item_child(state, definition, seen, now)
            case StartChild(seen):
                return self.start_child(state, definition, seen, now)
            case CancelChild(seen, child, reason):
                if ex.step(state, tx.mark_child_cancel(seen, reason)) is None:
                    return False
                self._cancel_child(child, f"parent {seen.workflow_id}")
                return True
            case ChildSucceeded(seen, child):
                if seen.kind == "compensation":
                    output = jsonsafe.dumps({"compensated": child.workflow_id})
                else:
                    output = self._child_output(child)
                spec = definition.by_name[seen.name]
                if seen.kind == "step" and spec.repeat is not None:
                    return self._child_iteration(state, definition, spec, seen, output, now)
                write = tx.child_succeeded(seen, now, output, self.expires(now))
                return ex.step(state, write) is not None
        raise TypeError(f"not a child action {action!r}")  # pragma: no cover

    def _child_iteration(
        self,
        state: WorkflowState,
        definition: Definition,
        spec: StepSpec,
        seen: StepRecord,
        output: str,
        now: int,
    ) -> bool:
        """A `Repeat` child-workflow step's child ended SUCCEEDED: its iteration's write
        (`_iteration_write`); with no interval its next child starts at once, else a look
        starts it when its rest ends (as a retry's child after its backoff)."""
        write = self._iteration_write(state, spec, seen, output, now, child=True)
        updated = self.executor.step(state, write)
        if updated is None:
            return False
        running = state.workflow.status is WorkflowStatus.RUNNING
        if updated.status is StepStatus.QUEUED and running and updated.available_at == now:
            self.start_child(state, definition, updated, now)
        return True

    def start_child(
        self, state: WorkflowState, definition: Definition, seen: StepRecord, now: int
    ) -> bool:
        """Start the child workflow of a child-workflow step's attempt: the child's item and
        the step's move to WAITING in one transaction, so a retried start, a duplicate or a
        racing supervisor starts one child per attempt (its id derives from the attempt), and
        a step cancelled meanwhile gets none. Then the child's roots are dispatched. A child
        input its definition refuses fails the step for good (`ChildInputInvalid`)."""
        spec = definition.by_name[seen.name]
        assert spec.workflow is not None
        parent = state.workflow
        attempt = seen.attempt if seen.status is StepStatus.QUEUED else 1
        child_def = self.catalog.current(spec.workflow)
        child_id = fanout_child_id(parent.workflow_id, seen.name, seen.index, attempt)
        try:
            value = (
                self._item_value(seen)
                if seen.index is not None
                else self._child_input(state, spec, seen)
            )
            input_json = self.validated_input(child_def, value)
        except (InputInvalid, InputTooLarge, InputPathNotFound) as exc:
            error = tx.error_json(CHILD_INPUT_INVALID, f"the child's input: {exc}")
            return (
                self.executor.step(state, tx.fail_wait(seen, now, error, self.expires(now)))
                is not None
            )
        self.catalog.ensure_snapshot(child_def)
        child = WorkflowRecord(
            workflow_id=child_id,
            wf_type=child_def.name,
            def_hash=child_def.content_hash,
            status=WorkflowStatus.RUNNING,
            input=self.keep(input_json, child_id, "input"),
            owner=parent.owner,
            request_hash=request_hash(child_def.name, value),
            created_at=now,
            updated_at=now,
            watch_shard=self.shard(child_id),
            due_at=now + child_def.start_gap_ms,
            parent_id=parent.workflow_id,
            parent_step=seen.name,
            parent_item=seen.index,
        )
        write = tx.start_child(seen, attempt, now, child_id)
        if not self.executor.start_child(state, seen, child.to_item(), write):
            return False
        self.dispatch_roots(child, child_def, input_json)
        if spec.detached:
            # It goes on at once (issue 37.6): SUCCEEDED with the child's id, as a child's
            # success would end it; `_advance_past` advances past it. Lost (a cancel came
            # first), the step rests WAITING for its child as any child step does.
            waiting = state.steps[seen.name]
            output = jsonsafe.dumps({"workflow_id": child_id})
            self.executor.step(state, tx.child_succeeded(waiting, now, output, self.expires(now)))
        return True

    def _item_value(self, unit: StepRecord) -> Any:
        """A map item's value (a map of children: each child starts with its item)."""
        assert unit.index is not None
        key = (page_pk(unit.workflow_id, unit.name, unit.index // MAP_ITEM_PAGE), PAGE_SK)
        return self.maps.item_value(self.ports.store.get(*key), unit.index)

    def _open_child_map(
        self, state: WorkflowState, definition: Definition, seen: StepRecord, now: int
    ) -> bool:
        """A map of child workflows opens when it is ready (no pool carries its items): its
        window's items then start their children, each as a child step's attempt does."""
        try:
            opened, _ = self.maps.open(state, definition, seen, claimed=False)
        except (MapItemsInvalid, MapTooLarge) as exc:
            error = tx.error_json(type(exc).__name__, str(exc))
            return (
                self.executor.step(state, tx.fail_wait(seen, now, error, self.expires(now)))
                is not None
            )
        if opened is None:
            return False
        self._start_window(state, definition, opened, now)
        return True

    def _start_window(
        self,
        state: WorkflowState,
        definition: Definition,
        map_rec: StepRecord,
        now: int,
        positions: Iterable[int] | None = None,
    ) -> None:
        """Start the children of the units that entered a map of child workflows' window (or
        of its compensation's: their children undo themselves). Whatever is not started here
        (a starter that dies) the supervisor starts after the dispatch grace."""
        m = map_rec.fanout
        if m is None:
            return
        wf = state.workflow
        compensation = map_rec.kind == "compensation"
        for position in sorted(m.window if positions is None else positions):
            if position not in m.window:
                continue
            unit = StepRecord.unstored_item(
                wf.workflow_id,
                map_rec.name,
                m.index_of(position),
                wf.wf_type,
                m.window[position],
                map_rec.kind,
                position if compensation else None,
            )
            if compensation:
                self._undo_item_child(state, definition, unit, now)
            else:
                self.start_child(state, definition, unit, now)

    def _undo_item_child(
        self, state: WorkflowState, definition: Definition, unit: StepRecord, now: int
    ) -> bool:
        """An item of a map of child workflows is undone by its child: the child (SUCCEEDED)
        undoes itself, then the item's compensation unit waits for it to end COMPENSATED."""
        assert unit.index is not None
        forward = self.ports.store.get(*map_item_key(unit.workflow_id, unit.name, unit.index))
        child_id = None if forward is None else forward.get("child_id")
        if child_id is None:
            raise StoreUnavailable(f"item {unit.index} of '{unit.name}' has no child to undo")
        item = self.ports.store.get(wf_pk(child_id), WF_SK)
        if item is not None and item.get("status") == WorkflowStatus.SUCCEEDED.value:
            child = WorkflowRecord.from_item(item)
            error = tx.error_json(
                "ParentCompensation",
                f"its parent {unit.workflow_id} unwinds and undoes item {unit.index} of "
                f"'{unit.name}'",
            )
            write = tx.compensate_child(child, now, self.shard(child_id), error)
            undoing = WorkflowState(child)
            self.executor.workflow(undoing, write)  # lost: it moved on already
            # What this state knows of the child is now what the write left (or met): the
            # unit created below must not be planned on the child as it was, SUCCEEDED.
            state.children[child_id] = undoing.workflow
        waiting = replace(
            unit,
            status=StepStatus.WAITING,
            attempt=1,
            claimed_at=now,
            first_claimed_at=now,
            child_id=child_id,
            stored=True,
        )
        return self.executor.create_step(state, waiting.to_item())

    def _child_input(self, state: WorkflowState, spec: StepSpec, seen: StepRecord) -> Any:
        """What a child starts with: an operator's replacement input, as given (it replaces
        the selected input, as a task step's does: docs/definitions.md, InputPath), else the
        workflow's input or what its `InputPath` selects there or in a dependency's output."""
        own = state.steps[seen.name].input
        if own is not None:
            return self.value(own)
        if spec.input_path is None:
            return self.value(state.workflow.input)
        path = fanout.parse_path(spec.input_path)
        if path.step is None:
            whole = self.value(state.workflow.input)
        else:
            dep = state.steps.get(path.step)
            stored = dep.output if dep is not None and dep.stored else None
            whole = self.value(
                stored if stored is not None else self.step_output(seen.workflow_id, path.step)
            )
        try:
            return fanout.select(path, whole)
        except fanout.PathError as exc:
            raise InputPathNotFound(f"InputPath {spec.input_path}: {exc}") from None

    def _child_output(self, child: WorkflowRecord) -> str:
        """A child's output as its step keeps it: the child's workflow output (each of its
        steps' outputs by name), in the payload bucket when large."""
        loaded = self.load(child.workflow_id)
        value = None if loaded is None else workflow_output(*loaded, self.ports.payloads)
        text = jsonsafe.dumps(value, what="child output")
        return self.keep(
            text, child.parent_id or child.workflow_id, "child", child.workflow_id, "output"
        )

    def _cancel_child(self, child: WorkflowRecord, by: str) -> None:
        """Ask a running or paused child to cancel (it undoes itself and ends CANCELLED);
        nothing if it is unwinding or over already. Read again on a lost write."""
        state = WorkflowState(child)
        for _ in range(MAX_ROUNDS):
            wf = state.workflow
            if wf.status not in (WorkflowStatus.RUNNING, WorkflowStatus.PAUSED):
                return
            now = self.ports.clock.now_ms()
            write = tx.request_cancel(wf, now, self.shard(wf.workflow_id), by=by)
            if self.executor.workflow(state, write):
                return
        raise StoreUnavailable("the child workflow kept changing; try again")

    def _compensate_child(self, state: WorkflowState, name: str, now: int) -> bool:
        """Unwinding reached a child-workflow step whose child SUCCEEDED: the child undoes
        itself (SUCCEEDED -> COMPENSATING, due at once), then the step's compensation unit
        waits for it to end COMPENSATED. Asked first, so a compensation unit never waits for a
        child nobody asked."""
        rec = state.steps[name]
        child_id = rec.child_id
        assert child_id is not None
        item = self.ports.store.get(wf_pk(child_id), WF_SK)
        if item is None:
            raise StoreUnavailable(f"child workflow {child_id} is missing")
        child = WorkflowRecord.from_item(item)
        if child.status is WorkflowStatus.SUCCEEDED:
            error = tx.error_json(
                "ParentCompensation",
                f"its parent {state.workflow.workflow_id} unwinds and undoes step '{name}'",
            )
            write = tx.compensate_child(child, now, self.shard(child_id), error)
            undoing = WorkflowState(child)
            self.executor.workflow(undoing, write)  # lost: it moved on already
            # The compensation unit created below waits for the child as this write left it
            # (or as it met it): planned on the child read before, SUCCEEDED, the unit would
            # end at once as a failed undo (found by the fault simulator: seed 5 of
            # `--types sim_parent,sim_fleet`, a cancel over a child that had just SUCCEEDED).
            state.children[child_id] = undoing.workflow
        wf = state.workflow
        comp = tx.child_compensation(wf.workflow_id, wf.wf_type, name, now, child_id)
        return self.executor.create_step(state, comp)

    def notify_parent(self, child: WorkflowRecord) -> int | None:
        """Before (and again after) a child's finishing write: pull its parent's watch entry
        to now, so the parent's look records the child's end (the deadline rule: the child's
        end is a writer that creates a deadline no look counted). None: no parent to pull."""
        if child.parent_id is None:
            return None
        item = self.ports.store.get(wf_pk(child.parent_id), WF_SK)
        if item is None:
            return None
        parent = WorkflowState(WorkflowRecord.from_item(item))
        return self.pull_due(parent, "step", child.parent_step or "", at=self.ports.clock.now_ms())

    def _advance_parent(self, parent_id: str) -> None:
        """After a child's finishing write: its parent records the child's end and moves past
        it in the next write (issue 40.5), as an agent's success advances its workflow; the
        pulled watch entry is the safety net. Best effort, as `advance_after`."""
        try:
            self.advance(parent_id)
        except StoreUnavailable:
            logger.warning(
                "the parent's advance deferred to the supervisor: the store is unavailable",
                exc_info=True,
                extra={"workflow_id": parent_id},
            )

    def after_item(self, state: WorkflowState, definition: Definition, unit: StepRecord) -> None:
        """After a map unit's own process ended it (an item's result or failure for good, an
        item compensation's): count it on its map and send the item that enters in its
        place; when that decides the map, advance the whole workflow (which accounts what is
        left, cancels what was never claimed, ends the step when its window drained, and
        moves past it). Best effort, as `advance_after`: whatever is not done here, the
        supervisor's look at the window does."""
        map_rec = state.record(unit.kind, unit.name)
        position = unit.position if unit.kind == "compensation" else unit.index
        if map_rec is None or map_rec.fanout is None or position is None:
            return
        try:
            accounted = self.maps.account(state, definition, map_rec, position, outcome_of(unit))
            if accounted is None:
                return
            self.deliver(accounted.tasks)
            m = accounted.map_rec.fanout
            assert m is not None
            spec = definition.spec(unit.kind, unit.name)
            decided = map_outcome(m, spec, unit.kind)
            if m.status == "RUNNING" and decided != "RUNNING":
                self.maps.decide(state, accounted.map_rec, decided)
            elif m.status == "RUNNING":
                return
            self.advance(unit.workflow_id)
        except StoreUnavailable:
            logger.warning(
                "map accounting deferred to the supervisor: the store is unavailable",
                exc_info=True,
                extra={"workflow_id": unit.workflow_id, "step": unit.name, "item": unit.index},
            )

    def _apply_wait(
        self, state: WorkflowState, definition: Definition, action: Action, now: int
    ) -> bool:
        """A resting step's writes: start resting (pulling `due_at` first for an `Until`; a
        WaitForSignal step then takes a signal kept before it), wake, fail for an unreadable
        time, time out, or take a signal (engine/signals.py)."""
        ex = self.executor
        match action:
            case StartWait(seen, wake_at):
                spec = definition.by_name[seen.name]
                return kind_of(spec).start_rest(
                    self._rest_writes, state, definition, seen, now, wake_at
                )
            case Wake(seen):
                return ex.step(state, tx.wake(seen, now, self.expires(now))) is not None
            case TakeSignal(seen):
                return signals.take(self, state, definition, seen) is not None
            case TimeOutSignal(seen):
                return signals.time_out(self, state, definition, seen) is not None
            case FailWait(seen, message):
                error = tx.error_json(RUNTIME_ERROR, message)
                write = tx.fail_wait(seen, now, error, self.expires(now))
                return ex.step(state, write) is not None
            case TimeOutApproval(seen):
                spec = definition.by_name[seen.name]
                error = tx.error_json(APPROVAL_TIMED_OUT, kind_of(spec).timed_out(spec))
                write = tx.decide(
                    seen,
                    now,
                    approved=False,
                    decision=None,
                    output=None,
                    error=error,
                    expires_at=self.expires(now),
                )
                cleared = self.inbox_cleared(state, definition, seen, now)
                return ex.step_with(state, seen, write, cleared) is not None
        raise TypeError(f"not a wait action {action!r}")  # pragma: no cover

    def inbox_cleared(
        self, state: WorkflowState, definition: Definition, seen: StepRecord, now: int
    ) -> list[tx.Write]:
        """What takes a waiting Approval step out of its approvers' inboxes, in the write that
        ends its wait (an answer, its timeout, a cancel); nothing for any other unit."""
        spec = definition.by_name.get(seen.name) if seen.kind == "step" else None
        if spec is None:
            return []
        return kind_of(spec).leaving_rest(state, spec, seen, self.expires(now))

    def _apply_to_workflow(self, state: WorkflowState, action: Action, now: int) -> bool:
        """The actions that change the workflow item's status."""
        ex = self.executor
        wf = state.workflow
        shard = self.shard(wf.workflow_id)
        match action:
            case Unwind(_, error):
                # The compensations it starts are deadlines no step's reach counted.
                due_by = now + self.definition_of(state).compensation_gap_ms
                write = tx.unwind(
                    wf, WorkflowStatus.COMPENSATING, now, error, shard=shard, due_by=due_by
                )
                won = ex.workflow(state, write)
                if won:
                    self.release_matches(state)
                return won
            case Pause(step, error):
                reason = jsonsafe.dumps({"reason": "failure", "step": step, "error": loads(error)})
                timeout = self.definition_of(state).pause_timeout_seconds
                timeout_ms = None if timeout is None else timeout * 1000
                write = tx.pause(wf, now, reason, shard=shard, timeout_ms=timeout_ms)
                return ex.workflow(state, write)
            case GiveUp(error):
                return ex.workflow(state, tx.give_up(wf, now, shard, error))
            case TimeOutWorkflow(error):
                return self._time_out_workflow(state, error, now)
            case Finish(status, error):
                pulled = self.notify_parent(wf)
                write = tx.finish(wf, status, now, self.expires(now), error=error)
                won = ex.workflow(state, write)
                if won:
                    self.release_matches(state)
                if won and pulled is not None and wf.parent_id is not None:
                    parent_item = self.ports.store.get(wf_pk(wf.parent_id), WF_SK)
                    if parent_item is not None:
                        parent = WorkflowState(WorkflowRecord.from_item(parent_item))
                        self.pull_due_again(parent, "step", wf.parent_step or "", pulled)
                    self._advance_parent(wf.parent_id)
                return won
        raise TypeError(f"unknown action {action!r}")  # pragma: no cover - exhaustive match

    def _time_out_workflow(self, state: WorkflowState, error: str, now: int) -> bool:
        """The workflow did not end within its TimeoutSeconds: it unwinds or pauses by its
        definition's OnFailure, as a failure would, marked so it fires once
        (`decisions.workflow_timeout`)."""
        wf = state.workflow
        shard = self.shard(wf.workflow_id)
        definition = self.definition_of(state)
        if definition.on_failure == "PAUSE":
            reason = jsonsafe.dumps({"reason": "timeout", "error": loads(error)})
            timeout = definition.pause_timeout_seconds
            timeout_ms = None if timeout is None else timeout * 1000
            write = tx.pause(wf, now, reason, shard=shard, timeout_ms=timeout_ms)
        else:
            due_by = now + definition.compensation_gap_ms
            write = tx.unwind(
                wf, WorkflowStatus.COMPENSATING, now, error, shard=shard, due_by=due_by
            )
        won = self.executor.workflow(state, workflow_timeout.marked(write, now))
        if won and definition.on_failure != "PAUSE":
            self.release_matches(state)
        return won

    def release_matches(self, state: WorkflowState) -> None:
        """A workflow that ended or unwinds waits for no signal again: its WaitForSignal
        steps' correlations leave the by_key index (`business_keys.released_matches`), so a
        signal by their values never reads it again and finished workflows never crowd the
        reader's bound (issue 37.3). After the status write, best effort: one an interrupted
        release leaves is skipped by the reader (it reads the workflow's status) and expires
        with the workflow."""
        steps = self.definition_of(state).matches
        if not steps:
            return
        release = Update(remove=business_keys.MATCH_INDEX_KEYS)
        for pk, sk in business_keys.released_matches(state.workflow.workflow_id, steps):
            try:
                self.ports.store.update(pk, sk, release, Exists("pk"))
            except ConditionFailed:
                continue  # not written (a start before correlations were kept): nothing to drop

    def _end_attempt(
        self,
        state: WorkflowState,
        definition: Definition,
        action: EndAttempt,
        now: int,
        tasks: list[OutgoingTask],
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
        if action.token_hash is None:
            # A task token armed after `seen` was read must reach the history (a late callback
            # with it is then stale, not unknown): this write loses and is planned again
            # (found by the fault simulator).
            armed = (
                Missing("callback_token")
                if seen.callback_token is None
                else Eq("callback_token", seen.callback_token)
            )
            guard = armed if guard is None else all_of(guard, armed)
        opener = seen.kind == "step" and seen.index is None and seen.fanout is None
        if opener and definition.by_name[seen.name].map is not None:
            # A map step's attempt opens its map: once the open write has landed (one that
            # timed out after it was applied, or a timeout planned on a read from before it),
            # the map's window is what runs and is supervised, so this write loses and is
            # planned again. Ending the attempt would leave the map open under a step queued
            # again or failed: its items unsent, or running unwatched while the workflow
            # unwinds (found by the fault simulator).
            unopened = Missing(TOTAL)
            guard = unopened if guard is None else all_of(guard, unopened)
        # Nothing is dispatched while the workflow is paused: the resume sends the retry. A
        # child step's retry is no message: its next child starts when its backoff ends.
        dispatch = (
            action.dispatch
            and state.workflow.status is not WorkflowStatus.PAUSED
            and seen.child_id is None
        )
        full = {"full": action.full_error} if action.full_error else {}
        error = tx.error_json(action.error_type, action.message, **full)
        write = tx.end_attempt(
            seen,
            attempt=seen.attempt,
            now=now,
            error=error,
            error_type=action.error_type,
            outcome=action.outcome,
            decision=action.decision,
            expires_at=self.expires(now),
            guard=guard,
            token_hash=action.token_hash,
            from_status=seen.status if seen.status.in_flight else StepStatus.RUNNING,
            details=action.details,
            dispatch=dispatch,
        )
        rec = self.executor.step(state, write)
        if rec is None:
            return False
        if isinstance(action.decision, RetryIn) and rec.dispatched_at is not None:
            delay = min(MAX_SQS_DELAY, -(-action.decision.delay_ms // 1000))
            tasks.append(self.task_of(definition, rec, delay))
        return True

    # -------------------------------------------------------------------------- delivery

    @staticmethod
    def task(
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

    def task_of(self, definition: Definition, rec: StepRecord, delay: int = 0) -> OutgoingTask:
        """The message of a unit's current attempt (a map item's names its index)."""
        if rec.index is not None:
            return unit_task(definition, rec, delay)
        return self.task(rec.workflow_id, definition, rec.kind, rec.name, rec.attempt, delay)

    def deliver(self, tasks: Sequence[OutgoingTask]) -> None:
        """Best effort: a lost dispatch is found by the supervisor. (Events are not sent
        here: they come from the table's change stream, so a writer that dies after its
        write cannot lose one; see shepherd.changes.)

        A task for a pool this deployment has no queue for (removed since the workflow's
        definition version named it) can never be delivered: its unit fails for good with
        `PoolRemoved` instead of being sent again forever (docs/architecture.md)."""
        if not tasks:
            return
        sendable = [t for t in tasks if self.ports.queue.has(t.pool)]
        for task in tasks:
            if task not in sendable:
                self._undeliverable(task)
        if not sendable:
            return
        try:
            self.ports.queue.send(sendable)
        except DeliveryError:
            logger.warning("task messages not sent; the supervisor will re-dispatch", exc_info=True)

    def _undeliverable(self, task: OutgoingTask) -> None:
        """Fail the unit a task for a removed pool names (its attempt, queued or implicit)."""
        m = task.message
        logger.error(
            "no queue for pool: the step fails",
            extra={"workflow_id": m.workflow_id, "step": m.step, "pool": task.pool},
        )
        loaded = self.load_units(m.workflow_id, [(m.kind, m.step)])
        rec = None if loaded is None else loaded[0].record(m.kind, m.step)
        if loaded is None or rec is None or rec.status.terminal or rec.status.in_flight:
            return
        if rec.attempt not in (m.attempt, 0):
            return
        now = self.ports.clock.now_ms()
        error = tx.error_json(
            "PoolRemoved",
            f"pool '{task.pool}' has no queue in this deployment (removed after this workflow "
            "started): its task can never run; restore the pool, or retry once it is back",
        )
        write = tx.fail_undeliverable(rec, m.attempt, now, error, self.expires(now))
        if self.executor.step(loaded[0], write) is not None:
            self.advance_after(rec, failed=True)


def _failed(state: WorkflowState, seen: StepRecord) -> bool:
    """Whether the step `seen` was written FAILED (as `state` now holds it)."""
    rec = state.steps.get(seen.name)
    return rec is not None and rec.status is StepStatus.FAILED


def _key(action: Action) -> tuple[Any, ...]:
    """Identity of an action within one run, so a lost write is not retried blindly."""
    match action:
        case (
            Dispatch(seen)
            | EndAttempt(seen)
            | Cancel(seen)
            | Skip(seen)
            | PassThrough(seen)
            | StartWait(seen)
            | Wake(seen)
            | FailWait(seen)
            | TimeOutApproval(seen)
            | TakeSignal(seen)
            | TimeOutSignal(seen)
            | TellCancel(seen)
        ):
            return (
                type(action).__name__,
                seen.kind,
                seen.name,
                seen.index,
                seen.attempt,
                seen.status,
            )
        case StartChild(seen) | CancelChild(seen) | ChildSucceeded(seen):
            return (type(action).__name__, seen.kind, seen.name, seen.attempt, seen.status)
        case AccountItem(seen, position):
            return ("AccountItem", seen.kind, seen.name, position)
        case OpenMore(seen) | DecideMap(seen) | HaltMap(seen) | FinishMap(seen):
            return (type(action).__name__, seen.kind, seen.name)
        case SendImplicit(name) | StartCompensation(name):
            return (type(action).__name__, name)
        case Unwind(name) | Pause(name):
            return (type(action).__name__, name)
        case GiveUp() | TimeOutWorkflow():
            return (type(action).__name__,)
        case Finish(status):
            return ("Finish", status)
    raise TypeError(action)  # pragma: no cover


class _RestWrites:
    """What a resting kind's writes use of the engine (`kinds.base.RestWrites`)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def step_with(
        self, state: WorkflowState, seen: StepRecord, write: tx.Write, extras: Sequence[tx.Write]
    ) -> StepRecord | None:
        return self._scheduler.executor.step_with(state, seen, write, extras)

    def pull_due_to(self, state: WorkflowState, at: int) -> None:
        self._scheduler._pull_due_to(state, at)

    def take_signal(
        self, state: WorkflowState, definition: Definition, rec: StepRecord
    ) -> StepRecord | None:
        return signals.take(self._scheduler, state, definition, rec)


class _Compensations:
    """How a step's compensation starts, by kind (`kinds.base.Compensations`)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def task(
        self,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
    ) -> bool:
        return self._scheduler._compensate_task(state, definition, name, now, tasks)

    def child(self, state: WorkflowState, name: str, now: int) -> bool:
        return self._scheduler._compensate_child(state, name, now)

    def map(
        self,
        state: WorkflowState,
        definition: Definition,
        name: str,
        now: int,
        tasks: list[OutgoingTask],
        *,
        children: bool,
    ) -> bool:
        return self._scheduler._compensate_map(
            state, definition, name, now, tasks, children=children
        )
