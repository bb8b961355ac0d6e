"""Records of the state store, task messages and the in-memory view of one workflow.

Table items, API bodies and queue messages are different models: this module holds the
first and the last; the API has its own pydantic models in the handlers.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal, NewType

from shepherd import jsonsafe
from shepherd.conditions import Item
from shepherd.keys import (
    COMP_PREFIX,
    MAP_PREFIX,
    MAP_SHARD_PREFIX,
    STEP_PREFIX,
    VISIT_PREFIX,
    VISITS_PREFIX,
    WF_SK,
    Kind,
    item_sk,
    list_keys,
    map_item_key,
    map_item_of,
    map_shard_parts,
    visits_pk,
    wf_pk,
    workflow_id_of,
)

WorkflowId = NewType("WorkflowId", str)


class WorkflowStatus(StrEnum):
    """Where a workflow is: running, paused, unwinding, or at one of its four ends."""

    RUNNING = "RUNNING"
    """Steps are being dispatched and run."""
    PAUSED = "PAUSED"
    """Stopped by an operator, or by a step that failed for good under `OnFailure: PAUSE`:
    nothing new is dispatched; attempts in flight finish and are recorded. Waits for resume,
    compensate or cancel (or its PauseTimeoutSeconds)."""
    COMPENSATING = "COMPENSATING"
    """A step failed for good: unclaimed steps are cancelled, succeeded ones undone in reverse."""
    CANCELLING = "CANCELLING"
    """A cancel was requested: unwinding as in COMPENSATING, ending CANCELLED."""
    SUCCEEDED = "SUCCEEDED"
    """Every step succeeded. Terminal."""
    COMPENSATED = "COMPENSATED"
    """A step failed and every succeeded step with a compensation was undone. Terminal."""
    CANCELLED = "CANCELLED"
    """Cancelled, and every succeeded step with a compensation was undone. Terminal."""
    FAILED = "FAILED"
    """A compensation could not be completed: an operator is needed. Terminal."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def unwinding(self) -> bool:
        return self in (WorkflowStatus.COMPENSATING, WorkflowStatus.CANCELLING)


TERMINAL = frozenset(
    {
        WorkflowStatus.SUCCEEDED,
        WorkflowStatus.COMPENSATED,
        WorkflowStatus.CANCELLED,
        WorkflowStatus.FAILED,
    }
)


class StepStatus(StrEnum):
    """Where a step (or a compensation) is: waiting, queued, in flight, or ended."""

    PENDING = "PENDING"
    """Waits for its dependencies, or for its first dispatch or claim (attempt 0). Usually
    no item exists yet: a step's item is created by the first write it needs, and reads show
    a missing step as PENDING from the definition (`WorkflowState.complete`)."""
    QUEUED = "QUEUED"
    """Dispatched for `attempt`, or waiting for its retry backoff; not claimed yet."""
    RUNNING = "RUNNING"
    """Claimed by an agent for `attempt`; heartbeats and the attempt deadline apply."""
    WAITING = "WAITING"
    """A callback step: the agent handed the work on; a callback with the attempt's task token
    records the result. Heartbeats (via the callback API) and the attempt deadline apply."""
    SUCCEEDED = "SUCCEEDED"
    """Its result is recorded. Terminal."""
    FAILED = "FAILED"
    """Permanent error, retries exhausted, or ended while the workflow unwound. Terminal."""
    CANCELLED = "CANCELLED"
    """Never claimed before the workflow unwound; it had no effect. Terminal."""
    SKIPPED = "SKIPPED"
    """Its `Condition` was false when its dependencies were done: never dispatched, never
    claimed, never compensated; its dependents treat it as done with no output. Terminal."""

    @property
    def terminal(self) -> bool:
        return self in (
            StepStatus.SUCCEEDED,
            StepStatus.FAILED,
            StepStatus.CANCELLED,
            StepStatus.SKIPPED,
        )

    @property
    def done(self) -> bool:
        """What a dependent waits for: a recorded success, or a skip (no output)."""
        return self in (StepStatus.SUCCEEDED, StepStatus.SKIPPED)

    @property
    def in_flight(self) -> bool:
        """An attempt is out there and may still succeed."""
        return self in (StepStatus.RUNNING, StepStatus.WAITING)


def dumps(value: Any) -> str:
    """Canonical JSON for payloads stored as strings; raises JsonRejected (a ValueError) for
    anything that is not a JSON value within the limits (NaN, too deep, a lone surrogate)."""
    return jsonsafe.dumps(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# ------------------------------------------------------------------- a map's own state
# A map's counters and its window of in-flight items live on the map step's unit, flattened
# into top-level attributes (docs/architecture.md, "Map steps and child workflows"), so every
# write on them is one conditional UpdateItem of the condition algebra, with no nested path.
WINDOW = "w_"  # w_<index>: entered_at (ms) of an item in flight
TOTAL = "m_total"
STRIDE = "m_stride"  # MaxConcurrency when the map opened: item i is followed by i + stride
SUCCEEDED_COUNT = "m_succeeded"
FAILED_COUNT = "m_failed"
CANCELLED_COUNT = "m_cancelled"  # in flight when the map stopped: cancelled, or ended after
COMPENSATED_COUNT = "m_compensated"
MAP_STATUS = "m_status"  # RUNNING until the verdict write (or a halt)
OPENED = "m_opened"  # stripes entered so far: the first window is written in chunks
PAGES = "m_pages"  # item pages written when it opened (one per MAP_ITEM_PAGE items)
# Window shards (keys.map_shard_sk): a map opened with `m_shards` = K keeps its window entries
# and its succeeded/failed/cancelled counts on K shard items, not on its unit; `m_done_<s>`
# on the unit marks shard s whose items are all accounted (idempotent: a SET).
SHARDS = "m_shards"
DONE = "m_done_"
Verdict = Literal["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]


@dataclass(frozen=True)
class MapState:
    """A map as its step's unit holds it (or a map compensation's, over positions in its
    order instead of item indexes). `status` CANCELLED: halted by its workflow's unwinding
    before its verdict."""

    total: int
    stride: int
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    compensated: int = 0
    status: Verdict = "RUNNING"
    window: Mapping[int, int] = field(default_factory=dict)
    opened: int = 0
    pages: int = 0
    # A map compensation's window is over positions in its order; each entry also names the
    # item it undoes (`w_<position> = [entered_at, index]`), so a look needs no order read.
    indexes: Mapping[int, int] = field(default_factory=dict)
    # Window shards: K (0: the window and the counters are on the unit itself), which of them
    # were read and folded in (`with_shards`), and which the unit marks done.
    shards: int = 0
    present: frozenset[int] = frozenset()
    done: frozenset[int] = frozenset()
    loaded: bool = True  # False: a sharded map's unit alone (its window and counts unread)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> MapState | None:
        """The map's state, or None when the map has not opened (no counters yet)."""
        if TOTAL not in item:
            return None
        window: dict[int, int] = {}
        indexes: dict[int, int] = {}
        for k, v in item.items():
            if k.startswith(WINDOW):
                if isinstance(v, list | tuple):
                    window[int(k[len(WINDOW) :])] = int(v[0])
                    indexes[int(k[len(WINDOW) :])] = int(v[1])
                else:
                    window[int(k[len(WINDOW) :])] = int(v)
        return cls(
            total=int(item[TOTAL]),
            stride=int(item[STRIDE]),
            succeeded=int(item.get(SUCCEEDED_COUNT, 0)),
            failed=int(item.get(FAILED_COUNT, 0)),
            cancelled=int(item.get(CANCELLED_COUNT, 0)),
            compensated=int(item.get(COMPENSATED_COUNT, 0)),
            status=item.get(MAP_STATUS, "RUNNING"),
            window=window,
            opened=int(item.get(OPENED, 0)),
            pages=int(item.get(PAGES, 0)),
            indexes=indexes,
            shards=int(item.get(SHARDS, 0)),
            done=frozenset(int(k[len(DONE) :]) for k in item if k.startswith(DONE)),
            loaded=SHARDS not in item,
        )

    def with_shards(self, items: Iterable[Mapping[str, Any]], whole: bool = False) -> MapState:
        """The map with its window shards folded in (every shard item that exists: a shard
        not yet created holds nothing): the window is their union, the counters their sums,
        `opened` the first window's stripes whose shard exists."""
        if not self.shards:
            return self
        window: dict[int, int] = {}
        indexes: dict[int, int] = {}
        counts = {SUCCEEDED_COUNT: 0, FAILED_COUNT: 0, CANCELLED_COUNT: 0}
        present: set[int] = set()
        for item in items:
            present.add(map_shard_parts(str(item["sk"]))[2])
            part = MapState.from_item({TOTAL: 0, STRIDE: 1, **item})
            assert part is not None
            window.update(part.window)
            indexes.update(part.indexes)
            for name in counts:
                counts[name] += int(item.get(name, 0))
        stripes = min(self.total, self.stride)
        opened = sum(1 for j in range(stripes) if j % self.shards in present)
        return replace(
            self,
            window=window,
            indexes=indexes,
            succeeded=counts[SUCCEEDED_COUNT],
            failed=counts[FAILED_COUNT],
            cancelled=counts[CANCELLED_COUNT],
            present=frozenset(present),
            opened=opened,
            # Every shard read (`whole`: a shard not found does not exist), or all K found;
            # else a part of the window and the counts (lower bounds: enough for a verdict).
            loaded=whole or len(present) == self.shards,
        )

    def shard_items(self, shard: int) -> int:
        """How many of the map's positions belong to `shard` (its stripes' items)."""
        return sum(
            -(-(self.total - j) // self.stride)
            for j in range(min(self.total, self.stride))
            if j % self.shards == shard
        )

    def to_attributes(self) -> dict[str, Any]:
        """The attributes `from_item` reads (a record rebuilt after a transaction); a sharded
        map's window and counts stay on its shards."""
        if self.shards:
            return {
                TOTAL: self.total,
                STRIDE: self.stride,
                COMPENSATED_COUNT: self.compensated,
                MAP_STATUS: self.status,
                PAGES: self.pages,
                SHARDS: self.shards,
                **{DONE + str(s): 1 for s in self.done},
            }
        return {
            TOTAL: self.total,
            STRIDE: self.stride,
            SUCCEEDED_COUNT: self.succeeded,
            FAILED_COUNT: self.failed,
            CANCELLED_COUNT: self.cancelled,
            COMPENSATED_COUNT: self.compensated,
            MAP_STATUS: self.status,
            OPENED: self.opened,
            PAGES: self.pages,
            **{WINDOW + str(i): self.entry(i) for i in self.window},
        }

    def entry(self, position: int) -> Any:
        """A window entry's stored value."""
        at = self.window[position]
        return [at, self.indexes[position]] if position in self.indexes else at

    def index_of(self, position: int) -> int:
        """The item a window entry is for (its own position, but in a compensation's)."""
        return self.indexes.get(position, position)

    @property
    def accounted(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    @property
    def running(self) -> int:
        return len(self.window)

    @property
    def pending(self) -> int:
        """Items never sent (none once the map stopped: they never will be)."""
        if self.status in ("FAILED", "CANCELLED"):
            return 0
        return self.total - self.accounted - self.running

    @property
    def drained(self) -> bool:
        """Decided, and nothing left in its window: its step may end."""
        return self.status != "RUNNING" and not self.window and self.loaded

    def counts(self) -> dict[str, int]:
        """What `GET /workflows/{id}` shows of a map step: once it stopped (failed or halted),
        the items it never sent are cancelled too."""
        never_sent = 0
        if self.status in ("FAILED", "CANCELLED"):
            never_sent = self.total - self.accounted - self.running
        return {
            "total": self.total,
            "pending": self.pending,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "cancelled": self.cancelled + never_sent,
            "compensated": self.compensated,
        }


@dataclass(frozen=True)
class StepRecord:
    """A step or compensation item."""

    workflow_id: str
    kind: Kind
    name: str
    status: StepStatus
    attempt: int = 0
    dispatched_at: int | None = None
    available_at: int | None = None
    claimed_at: int | None = None
    heartbeat_at: int | None = None
    lease_owner: str | None = None
    details: str | None = None
    output: str | None = None
    error: str | None = None
    finished_at: int | None = None
    history: tuple[dict[str, Any], ...] = ()
    # The variables its `Assign` set, as canonical JSON (shepherd/expressions.py, issue 42.5).
    variables: str | None = None
    dispatches: int = 0
    budget_from: int = 0  # attempts before this number were spent before a redrive
    expires_at: int | None = None
    callback_token: str | None = None  # sha256 of the current attempt's token nonce
    attempts_total: int = 0  # ended attempts, including those dropped from `history`
    first_claimed_at: int | None = None  # set by the first claim: the step may have acted
    input: str | None = None  # an operator's replacement input for this step (JSON)
    wf_type: str | None = None  # its workflow's type: events derived from the item name it
    fail_reason: str | None = None  # FAILED: permanent, exhausted or unwinding
    held_at: int | None = None  # no claim may land: its paused workflow left the watch index
    callback_heartbeat_at: int | None = None  # the attempt's last heartbeat by its task token
    resent_at: int | None = None  # the supervisor sent this attempt's task again (a copy)
    # A Wait or Approval step resting WAITING: when the supervisor wakes it (a Wait) or times
    # it out (an Approval).
    wake_at: int | None = None
    decision: str | None = None  # an Approval's answer (JSON: verdict, by, at, comment)
    # Its workflow was cancelled while this attempt ran: the agent's heartbeat reads it
    # (`AgentContext.cancel_requested`) and may stop early (issue 37.4).
    cancel_requested_at: int | None = None
    # False: no item exists (a step shown PENDING from the definition). A write planned on it
    # is guarded by exactly that (the item is still missing) and creates the item.
    stored: bool = field(default=True, compare=False)
    # A map step's item (or an item's compensation): its index in the map's items. The unit
    # lives in the map's item partition (keys.map_item_key), not the workflow's.
    index: int | None = None
    # A map step (or a map's compensation) once opened: its counters and window (MapState).
    fanout: MapState | None = None
    # A map item's compensation: its place in the compensation's order (its window entry).
    position: int | None = None
    # A child-workflow step's attempt (or its compensation): the child workflow it waits for;
    # `child_cancel` why its parent asked that child to cancel (timeout | unwinding).
    child_id: str | None = None
    child_cancel: str | None = None
    # A `Repeat` step: iterations ended (its last one's output is `output`); the attempt in
    # flight runs iteration `iterations + 1` (decisions/repeat.py).
    iterations: int = 0
    loop_from: int = 0  # iterations before an operator's resume of the failed step

    @property
    def key(self) -> tuple[str, str]:
        if self.index is not None:
            return map_item_key(self.workflow_id, self.name, self.index, self.kind)
        if self.name.startswith(VISIT_PREFIX):  # a state machine's Task visit
            return (visits_pk(self.workflow_id), item_sk(self.kind, self.name))
        return (wf_pk(self.workflow_id), item_sk(self.kind, self.name))

    @classmethod
    def unstored(cls, workflow_id: str, name: str, wf_type: str) -> StepRecord:
        """A step whose item does not exist yet, as reads show it: PENDING, attempt 0."""
        return cls(workflow_id, "step", name, StepStatus.PENDING, wf_type=wf_type, stored=False)

    @classmethod
    def unstored_item(
        cls,
        workflow_id: str,
        name: str,
        index: int,
        wf_type: str,
        entered_at: int,
        kind: Kind,
        position: int | None = None,
    ) -> StepRecord:
        """A map item in its window whose unit does not exist yet: its message was sent when
        it entered the window (`dispatched_at`), nothing has claimed it."""
        return cls(
            workflow_id,
            kind,
            name,
            StepStatus.PENDING,
            dispatched_at=entered_at,
            wf_type=wf_type,
            stored=False,
            index=index,
            position=position,
        )

    def to_item(self) -> Item:
        pk, sk = self.key
        item: Item = {"pk": pk, "sk": sk, "status": self.status.value, "attempt": self.attempt}
        for name in _STEP_OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                item[name] = value
        if self.history:
            item["history"] = [dict(h) for h in self.history]
        if self.dispatches:
            item["dispatches"] = self.dispatches
        if self.budget_from:
            item["budget_from"] = self.budget_from
        if self.attempts_total:
            item["attempts_total"] = self.attempts_total
        if self.iterations:
            item["iterations"] = self.iterations
        if self.loop_from:
            item["loop_from"] = self.loop_from
        if self.fanout is not None:
            item.update(self.fanout.to_attributes())
        return item

    @classmethod
    def from_item(cls, item: Item) -> StepRecord:
        sk: str = item["sk"]
        pk: str = item["pk"]
        index: int | None = None
        if pk.startswith(MAP_PREFIX):
            workflow_id, name, index, kind = map_item_of(pk, sk)
        else:
            kind = "step" if sk.startswith(STEP_PREFIX) else "compensation"
            workflow_id, name = workflow_id_of(pk), sk[2:]
            if pk.startswith(VISITS_PREFIX):
                workflow_id = pk.removeprefix(VISITS_PREFIX)
        return cls(
            workflow_id=workflow_id,
            kind=kind,
            name=name,
            status=StepStatus(item["status"]),
            attempt=int(item.get("attempt", 0)),
            history=tuple(item.get("history", ())),
            dispatches=int(item.get("dispatches", 0)),
            budget_from=int(item.get("budget_from", 0)),
            attempts_total=int(item.get("attempts_total", len(item.get("history", ())))),
            iterations=int(item.get("iterations", 0)),
            loop_from=int(item.get("loop_from", 0)),
            index=index,
            fanout=MapState.from_item(item),
            **_optional(item, _STEP_OPTIONAL),
        )


def _optional(item: Item, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: item.get(name) for name in names}


_STEP_OPTIONAL = (
    "dispatched_at",
    "available_at",
    "claimed_at",
    "heartbeat_at",
    "lease_owner",
    "details",
    "output",
    "error",
    "finished_at",
    "expires_at",
    "callback_token",
    "first_claimed_at",
    "input",
    "wf_type",
    "fail_reason",
    "held_at",
    "callback_heartbeat_at",
    "resent_at",
    "wake_at",
    "decision",
    "cancel_requested_at",
    "position",
    "child_id",
    "child_cancel",
    "variables",
)


@dataclass(frozen=True)
class WorkflowRecord:
    """The workflow item."""

    workflow_id: str
    wf_type: str
    def_hash: str
    status: WorkflowStatus
    input: str
    owner: str
    request_hash: str
    created_at: int
    updated_at: int
    idempotency_key: str | None = None
    error: str | None = None
    finished_at: int | None = None
    watch_shard: str | None = None
    due_at: int | None = None
    expires_at: int | None = None
    cancel_requested_at: int | None = None
    redrives: int = 0
    look_failures: int = 0  # consecutive supervisor looks that raised (see Supervisor)
    parked_from: str | None = None  # the status a parked workflow had; a retry restores it
    look_failed_at: int | None = None  # when the last of `look_failures` happened
    pause: str | None = None  # JSON: why it is PAUSED (reason, step, error, by, at)
    paused_at: int | None = None
    # A child workflow: the workflow and step whose attempt started it (and the map item).
    parent_id: str | None = None
    parent_step: str | None = None
    parent_item: int | None = None
    # Its tags, as canonical JSON `{key: value}` (issue 37; their index items: business_keys).
    tags: str | None = None
    # A state machine's (shepherd.asl.engine): its output as stored, and a designed failure's
    # kind (`definition`: a Fail state or an uncaught error), error name and cause.
    asl_output: str | None = None
    failure: str | None = None
    asl_error: str | None = None
    asl_cause: str | None = None
    # When its own TimeoutSeconds fired (decisions/workflow_timeout.py): it fires once.
    timed_out_at: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (wf_pk(self.workflow_id), WF_SK)

    def to_item(self) -> Item:
        pk, sk = self.key
        item: Item = {
            "pk": pk,
            "sk": sk,
            "wf_type": self.wf_type,
            "def_hash": self.def_hash,
            "status": self.status.value,
            "input": self.input,
            "owner": self.owner,
            "request_hash": self.request_hash,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            # The list indexes: sharded per owner, one per filter (docs/architecture.md).
            **list_keys(
                self.owner, self.wf_type, self.status.value, self.created_at, self.workflow_id
            ),
        }
        for name in _WF_OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                item[name] = value
        if self.redrives:
            item["redrives"] = self.redrives
        if self.look_failures:
            item["look_failures"] = self.look_failures
        return item

    @classmethod
    def from_item(cls, item: Item) -> WorkflowRecord:
        return cls(
            workflow_id=workflow_id_of(item["pk"]),
            wf_type=item["wf_type"],
            def_hash=item["def_hash"],
            status=WorkflowStatus(item["status"]),
            input=item["input"],
            owner=item["owner"],
            request_hash=item["request_hash"],
            created_at=int(item["created_at"]),
            updated_at=int(item["updated_at"]),
            redrives=int(item.get("redrives", 0)),
            look_failures=int(item.get("look_failures", 0)),
            **_optional(item, _WF_OPTIONAL),
        )


_WF_OPTIONAL = (
    "cancel_requested_at",
    "idempotency_key",
    "error",
    "finished_at",
    "watch_shard",
    "due_at",
    "expires_at",
    "parked_from",
    "look_failed_at",
    "pause",
    "paused_at",
    "parent_id",
    "parent_step",
    "parent_item",
    "tags",
    "asl_output",
    "failure",
    "asl_error",
    "asl_cause",
    "timed_out_at",
)


@dataclass
class WorkflowState:
    """Everything the table holds about one workflow, read with one consistent query."""

    workflow: WorkflowRecord
    steps: dict[str, StepRecord] = field(default_factory=dict)
    compensations: dict[str, StepRecord] = field(default_factory=dict)
    # Only some units were read (a claim's, an advance's: `Scheduler.load_units`): what is
    # missing is unknown, not PENDING, and only the planner's bounded mode may plan on it.
    partial: bool = False
    # The units in the windows of its open maps, by map step (or, for a map's compensation,
    # by `C#<step>`) and position: what a look reads besides the workflow's partition
    # (`Scheduler.with_windows`), at most MaxConcurrency per map. A window entry with no unit
    # yet is an unstored record.
    windows: dict[tuple[Kind, str], dict[int, StepRecord]] = field(default_factory=dict)
    # A map item's claim: the items page its value is on, by (step, item index).
    pages: dict[tuple[str, int], Item | None] = field(default_factory=dict)
    # The child workflows its waiting child-workflow steps (and their compensations) wait
    # for, by id (`Scheduler.with_children`): one item each, read with the workflow.
    children: dict[str, WorkflowRecord] = field(default_factory=dict)
    # The window shards of its maps, by map and shard number (read with the partition, or by
    # `Maps.with_shards`), folded into each map record's `fanout` by `put`.
    shards: dict[tuple[Kind, str], dict[int, Item]] = field(default_factory=dict)
    shards_whole: set[tuple[Kind, str]] = field(default_factory=set)  # every shard was read

    @classmethod
    def from_items(cls, items: list[Item]) -> WorkflowState | None:
        workflow = None
        steps: dict[str, StepRecord] = {}
        comps: dict[str, StepRecord] = {}
        shards: dict[tuple[Kind, str], dict[int, Item]] = {}
        for item in items:
            sk = item["sk"]
            if sk == WF_SK:
                workflow = WorkflowRecord.from_item(item)
            elif sk.startswith(STEP_PREFIX):
                steps[sk[2:]] = StepRecord.from_item(item)
            elif sk.startswith(COMP_PREFIX):
                comps[sk[2:]] = StepRecord.from_item(item)
            elif sk.startswith(MAP_SHARD_PREFIX):
                kind, name, shard = map_shard_parts(sk)
                shards.setdefault((kind, name), {})[shard] = item
        if workflow is None:
            return None
        state = cls(workflow, steps, comps, shards=shards)
        for rec in (*steps.values(), *comps.values()):
            if rec.fanout is not None and rec.fanout.shards:
                state.shards.setdefault((rec.kind, rec.name), {})  # the whole partition: all
                state.shards_whole.add((rec.kind, rec.name))
                state.put(rec)
        return state

    def put_shard(self, kind: Kind, name: str, item: Item) -> None:
        """Fold a window shard as a write left it into its map's record."""
        self.shards.setdefault((kind, name), {})[map_shard_parts(str(item["sk"]))[2]] = item
        rec = self.record(kind, name)
        if rec is not None and rec.fanout is not None:
            self.put(rec)

    def complete(self, step_names: Iterable[str]) -> WorkflowState:
        """Show each of the definition's steps that has no item yet as PENDING (unstored).

        Step items are created by the first write a step needs (its claim, a join's dispatch,
        a cancel, a pause's hold), so a partition holds only the steps that got that far; every
        reader that plans or reports on a workflow completes it first.
        """
        wf = self.workflow
        for name in step_names:
            if name not in self.steps:
                self.steps[name] = StepRecord.unstored(wf.workflow_id, name, wf.wf_type)
        return self

    def record(self, kind: Kind, name: str) -> StepRecord | None:
        return (self.steps if kind == "step" else self.compensations).get(name)

    def put(self, record: StepRecord) -> None:
        if record.index is not None:
            self.put_item(record)
            return
        m = record.fanout
        if m is not None and m.shards:
            got = self.shards.get((record.kind, record.name))
            if got is not None:  # read with the partition, or by `Maps.with_shards`
                whole = (record.kind, record.name) in self.shards_whole
                record = replace(record, fanout=m.with_shards(got.values(), whole))
        (self.steps if record.kind == "step" else self.compensations)[record.name] = record

    def unit(self, record: StepRecord) -> StepRecord | None:
        """The unit `record` names as this state now holds it (a map item's in its window)."""
        if record.index is None:
            return self.record(record.kind, record.name)
        window = self.windows.get((record.kind, record.name), {})
        return next((u for u in window.values() if u.index == record.index), None)

    def put_item(self, record: StepRecord) -> None:
        """Fold a map item's unit into the window it is in (by its position there)."""
        assert record.index is not None
        window = self.windows.get((record.kind, record.name))
        if window is None:
            return
        for position, held in window.items():
            if held.index == record.index:
                window[position] = record
                return


@dataclass(frozen=True)
class PoolState:
    """An agent pool as the table records it (absent: enabled, never paused).

    `paused` is what holds its tasks: an operator's pause or an open circuit (a breaker
    pauses its pool exactly as an operator does); `operator_paused` the operator's alone."""

    name: str
    paused: bool = False
    paused_at: int | None = None
    resumed_at: int | None = None  # a queued task's dispatch grace starts again here
    by: str | None = None
    # Messages its queue holds (visible, in flight or delayed), as a sweep read them when it
    # had to decide whether a task that was sent twice may be waiting; None: not read.
    waiting: int | None = None
    # The furthest slot its rate limiter has reserved (epoch ms), as a sweep read it when one
    # of its tasks was waiting; None: not read, or no limit. A held task's slot is no later.
    reserved_until: int | None = None
    operator_paused: bool = False
    circuit: str = "closed"  # closed | open | half_open (docs/architecture.md, the breaker)
    circuit_since: int | None = None
    circuit_mode: str = "auto"
    circuit_history: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_item(cls, item: Item) -> PoolState:
        operator = bool(item.get("paused", False))
        circuit = str(item.get("circuit", "closed"))
        resumes = [t for t in (item.get("resumed_at"), item.get("circuit_resumed_at")) if t]
        return cls(
            name=str(item["sk"]),
            paused=operator or circuit == "open",
            paused_at=item.get("paused_at"),
            resumed_at=max(resumes) if resumes else None,
            by=item.get("by"),
            operator_paused=operator,
            circuit=circuit,
            circuit_since=item.get("circuit_since"),
            circuit_mode=str(item.get("circuit_mode", "auto")),
            circuit_history=tuple(item.get("circuit_history", ())),
        )


@dataclass(frozen=True)
class TaskMessage:
    """The doorbell: names a step attempt and carries nothing the agent could not re-read.

    `ticket` (epoch ms) is a rate-limited pool's reservation, not workflow state: the slot its
    limiter reserved for this task when it held it; the task runs when it comes back at that
    time without taking another token (docs/architecture.md, the rate limiter)."""

    workflow_id: str
    step: str
    attempt: int
    kind: Kind = "step"
    ticket: int | None = None
    # A map item's index (its unit is the item's, not the step's); for an item's compensation
    # also its `position` in the compensation's order (its window entry).
    item: int | None = None
    position: int | None = None

    def to_body(self) -> str:
        body: dict[str, Any] = {"w": self.workflow_id, "s": self.step, "a": self.attempt}
        if self.kind != "step":
            body["k"] = "c"
        if self.ticket is not None:
            body["r"] = self.ticket
        if self.item is not None:
            body["i"] = self.item
        if self.position is not None:
            body["q"] = self.position
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_body(cls, body: str) -> TaskMessage:
        """Parse a message body; raises ValueError for anything malformed (a poison message)."""
        try:
            data = json.loads(body)
            workflow_id, step, attempt = data["w"], data["s"], data["a"]
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"malformed task message: {exc}") from exc
        if not (isinstance(workflow_id, str) and isinstance(step, str)):
            raise ValueError("malformed task message: ids must be strings")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
            raise ValueError("malformed task message: attempt must be a positive integer")
        kind: Kind = "compensation" if data.get("k") == "c" else "step"
        ticket = data.get("r")
        if ticket is not None and not _natural(ticket):
            raise ValueError("malformed task message: a ticket is a time in epoch ms")
        item, position = data.get("i"), data.get("q")
        for name, value in (("item", item), ("position", position)):
            if value is not None and not _natural(value):
                raise ValueError(f"malformed task message: {name} must be a natural number")
        if position is not None and (item is None or kind != "compensation"):
            raise ValueError("malformed task message: a position is an item compensation's")
        return cls(workflow_id, step, attempt, kind, ticket, item, position)


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class OutgoingTask:
    """A task message addressed to an agent pool, with an optional delivery delay."""

    pool: str
    message: TaskMessage
    delay_seconds: int = 0


#: Every detail-type Shepherd publishes; each has a JSON Schema in docs/events/.
EVENT_TYPES = frozenset(
    {
        "PoolCircuitOpened",
        "PoolCircuitClosed",
        "WorkflowStarted",
        "WorkflowSucceeded",
        "WorkflowFailed",
        "WorkflowCompensated",
        "WorkflowCancelled",
        "WorkflowPaused",
        "WorkflowResumed",
        "WorkflowCancelRequested",
        "WorkflowCompensationRequested",
        "WorkflowRetried",
        "StepRetried",
        "StepTimedOut",
        "StepFailed",
        "StepCompensated",
        "StepSkipped",
        "ApprovalRequested",
        "ApprovalAnswered",
    }
)


@dataclass(frozen=True)
class DomainEvent:
    """An event for the outside world (EventBridge detail-type + detail)."""

    detail_type: str
    detail: dict[str, Any]

    def __post_init__(self) -> None:
        # An undocumented event type would reach subscribers with no schema: refuse it here.
        if self.detail_type not in EVENT_TYPES:
            raise ValueError(f"undocumented event type {self.detail_type!r}")
