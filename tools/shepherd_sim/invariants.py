"""The invariants, as pure checkers over what a run left behind.

Each checker takes a `RunRecord` (the final table items, the fake service's calls and effects,
and what the simulator observed) and returns the violations it finds. They never look at the
engine's code paths, only at outcomes, so they also work on hand-made records (the tests build
violating records to prove every checker can fail).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shepherd import limits
from shepherd.changes import Change, events_of
from shepherd.conditions import Item
from shepherd.decisions.planner import (
    PAUSE_TIMEOUT,
    Dispatch,
    EndAttempt,
    GiveUp,
    TimeOutApproval,
    Wake,
    compensated,
    plan,
    reach_gap,
)
from shepherd.decisions.repeat import LOOP_LIMIT
from shepherd.definitions import Definition
from shepherd.keys import (
    ITEM_COMP_PREFIX,
    ITEM_PREFIX,
    MAP_PREFIX,
    MAP_SHARD_PREFIX,
    POOLS_PK,
    SIGNAL_PREFIX,
    WF_SK,
    inbox_item_sk,
    inbox_pk,
    inbox_shard,
    inbox_sk,
    item_sk,
    map_item_key,
    map_item_of,
    map_shard_parts,
)
from shepherd.model import (
    DomainEvent,
    PoolState,
    StepRecord,
    StepStatus,
    WorkflowState,
    WorkflowStatus,
    loads,
)
from shepherd.payloads import MemoryPayloadStore, PayloadMissing, Payloads, ref_of

from shepherd_sim.relay import Delivery
from shepherd_sim.service import Call, Effect


def unit_name(step: str, item: int | None) -> str:
    """How a unit is named in traces and messages: a step, or a map's item `<step>[<index>]`."""
    return step if item is None else f"{step}[{item}]"


@dataclass(frozen=True)
class Violation:
    invariant: str
    workflow_id: str | None
    message: str

    def __str__(self) -> str:
        where = f" [{self.workflow_id}]" if self.workflow_id else ""
        return f"{self.invariant}{where}: {self.message}"


@dataclass(frozen=True)
class Handled:
    """What one delivery of a task message did, as the simulator saw it."""

    at: int
    workflow_id: str
    kind: str
    step: str
    attempt: int
    outcome: str  # an agent.Outcome value, or crashed / killed / error
    item: int | None = None  # a map item's index (its compensation's: the item it undoes)


@dataclass(frozen=True)
class Claim:
    """A claim that won (a step or compensation moved to RUNNING), as the store saw it land.

    Ground truth for "was this step ever claimed", independent of the engine's own
    `first_claimed_at`. `paused_by` and `read` say whether the claim landed while its
    workflow was PAUSED, and whether the claimer's decision came from a read from before that
    pause (see `Sent`).
    """

    at: int
    workflow_id: str
    kind: str
    step: str
    attempt: int
    claimed_at: int
    """The engine's timestamp in the write (what `first_claimed_at` records on the first)."""
    role: str = "agent"
    paused_by: int | None = None
    read: int | None = None
    input_tag: Any = None
    """The replacement-input tag of the step as claimed (None: the workflow's own input)."""
    pool: str = ""
    circuit: str = "closed"
    """The pool's circuit as the table recorded it when the claim landed."""
    circuit_read: int | None = None
    """The pools' version at the claimer's last read of its pool item before the claim (its
    breaker's cached state: every read of it refreshes the cache); None: never read."""
    circuit_probe: int | None = None
    """The pools' version after the claimer's own take of a half-open probe; None: no probe."""
    circuit_entered_by: int | None = None
    """The version of the write that moved the circuit into `circuit`."""
    circuit_left_closed_by: int | None = None
    """The version of the write that moved the circuit out of `closed` (None: closed)."""
    item: int | None = None
    """A map item's index (an item's claim, or its compensation's); None: a step's."""


@dataclass(frozen=True)
class Sent:
    """A task message someone decided to send (before the queue may lose or double it).

    `paused_by`: the version of the workflow item whose write paused it, if it was PAUSED at
    that moment (None: not paused). `read`: the version of the workflow item the sender last
    read (a consistent load of the workflow, or the start that created it), None if it never
    read it. The item's version grows by one with every write to it, so `read < paused_by`
    means the sender decided on a read from before the pause: the documented race.
    """

    at: int
    workflow_id: str
    kind: str
    step: str
    attempt: int
    role: str
    label: str
    paused_by: int | None
    read: int | None
    read_at: int | None = None
    item: int | None = None  # a map item's message


@dataclass(frozen=True)
class StatusWrite:
    """A write that changed a workflow's status, as it landed, with who made it: the role of
    the engine component and the operation (`label`) the simulator was performing."""

    at: int
    workflow_id: str
    version: int
    role: str
    label: str
    before: str | None
    after: str
    error_type: str | None = None
    pause_reason: str | None = None
    paused_at: int | None = None


@dataclass(frozen=True)
class Redispatch:
    """A queued step or compensation sent again (a write that marks it dispatched once more,
    its status unchanged), with the state of its pool: `pool_paused_by` is the version of the
    pools' items whose write paused its pool, if paused when it landed; `pool_read` the
    version of the pools' states the writer planned with (a supervisor reads them once per
    sweep and keeps the last read; one that never read any, or whose last read failed, knows
    version 0, nothing paused)."""

    at: int
    workflow_id: str
    kind: str
    step: str
    attempt: int
    role: str
    label: str
    pool: str
    pool_paused_by: int | None
    pool_read: int | None
    item: int | None = None  # a map item's


@dataclass(frozen=True)
class ApprovalCall:
    """One answer a person gave through `Approvals.decide` (issue 25), as it came back.

    `outcome`: `ok` (told it decided), `not_pending` (ApprovalNotPending: someone or
    something ended the wait first), `not_found` (WorkflowNotFound: not allowed to answer) or
    `error:<name>` (the call failed; its write may still have landed). `waiting`: the attempt
    the step was WAITING at as the call began (None: not waiting). `writes`: the table writes
    that landed during the call, made by it."""

    started: int
    ended: int
    workflow_id: str
    step: str
    principal: str
    approve: bool
    outcome: str
    attempt: int | None = None
    """The attempt its answer ended (`ok` only)."""
    waiting: int | None = None
    writes: int = 0


@dataclass(frozen=True)
class SignalCall:
    """One signal sent through `Signals.send` (issue 37.7), as it came back.

    `outcome`: `ok` (kept as `sequence`), `duplicate` (its signal id was kept as `sequence`
    already), `stopped` (the sender stopped after keeping it as `kept_at_stop`, before handing
    it over), `refused:<name>` (told why, nothing written) or `error:<name>` (the call failed;
    its write may still have landed)."""

    started: int
    ended: int
    workflow_id: str
    name: str
    payload: Any
    signal_id: str | None
    outcome: str
    sequence: int | None = None
    taken_by: str | None = None
    kept_at_stop: int | None = None


@dataclass(frozen=True)
class Firing:
    """One delivery of a schedule's firing (the events handler's path: the schedule's pause
    check, then a start with the key `schedule:<name>:<time>`), as it came back."""

    at: int
    key: str
    owner: str
    outcome: str  # ok | skipped | error:<name>
    workflow_id: str | None = None
    created: bool | None = None


def decided_before_pause(paused_by: int | None, read: int | None) -> bool:
    """Was a send or claim during a pause decided on a read from before it? (True when the
    workflow was not paused at all.)"""
    return paused_by is None or (read is not None and read < paused_by)


@dataclass
class RunRecord:
    items: list[Item]
    definitions: Mapping[str, Definition]
    calls: list[Call] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    handled: list[Handled] = field(default_factory=list)
    accepted: dict[str, int] = field(default_factory=dict)
    """Workflow id -> when its start was acknowledged to the client."""
    bounds: dict[str, int] = field(default_factory=dict)
    """Workflow id -> the time by which it must be terminal (see `bounds.py`)."""
    end_ms: int = 0
    online: list[Violation] = field(default_factory=list)
    """Violations found while running (the watch-index check needs the moment)."""
    changes: list[Change] = field(default_factory=list)
    """The table's stream: every write that took effect, in order."""
    deliveries: list[Delivery] = field(default_factory=list)
    """Every event the relay (or a replay) put on the bus, in order, duplicates included."""
    undone: Mapping[str, int] = field(default_factory=dict)
    """Forward idempotency key -> the service call that undid it (the service's memory)."""
    claims: list[Claim] = field(default_factory=list)
    """Every claim that won, in the order they landed."""
    sent: list[Sent] = field(default_factory=list)
    """Every task message someone decided to send, in order."""
    status_writes: list[StatusWrite] = field(default_factory=list)
    """Every write that changed a workflow's status, in the order they landed."""
    given_inputs: dict[tuple[str, str, str, int], Any] = field(default_factory=dict)
    """(workflow, kind, step, attempt) -> the replacement-input tag its agent was given."""
    redispatches: list[Redispatch] = field(default_factory=list)
    """Every queued task sent again, in the order the writes landed."""
    payloads: dict[str, bytes] = field(default_factory=dict)
    """The payload bucket's objects at the end (key -> bytes)."""
    approval_calls: list[ApprovalCall] = field(default_factory=list)
    """Every answer a person gave to an approval, in the order the calls ended."""
    firings: list[Firing] = field(default_factory=list)
    """Every delivery of a schedule's firing, in the order they ended."""
    signal_calls: list[SignalCall] = field(default_factory=list)
    """Every signal sent, in the order the calls ended."""
    _parsed: tuple[list[Item], dict[str, WorkflowState]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _announced: tuple[list[Change], list[DomainEvent]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def value(self, stored: str | None) -> Any:
        """A stored payload as a value, read from the bucket if it is a reference."""
        store = MemoryPayloadStore()
        store.objects = self.payloads
        return Payloads(store).value(stored)

    def states(self) -> dict[str, WorkflowState]:
        """Every workflow's state, completed with its unstored steps. Some twenty checkers
        ask: the items are parsed once (again only if `items` no longer holds the same item
        objects) and each caller gets fresh containers (`fresh`) it may fill in."""
        if self._parsed is None or not same_objects(self._parsed[0], self.items):
            self._parsed = (list(self.items), self._parse_states())
        return {wf_id: fresh(state) for wf_id, state in self._parsed[1].items()}

    def _parse_states(self) -> dict[str, WorkflowState]:
        by_pk: dict[str, list[Item]] = defaultdict(list)
        for item in self.items:
            if str(item.get("pk", "")).startswith("WF#"):
                by_pk[item["pk"]].append(item)
        out: dict[str, WorkflowState] = {}
        for pk in sorted(by_pk):
            state = WorkflowState.from_items(by_pk[pk])
            if state is not None:
                definition = self.definitions[state.workflow.wf_type]
                out[state.workflow.workflow_id] = state.complete(definition.topological_order)
        return out


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """Do `a` and `b` hold the very same objects, in order? (What a cache of a parse of
    items, changes or a partition is kept against: the store never changes one in place.)"""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def fresh(state: WorkflowState) -> WorkflowState:
    """A copy of `state` whose containers are its own (its records are frozen, its shard
    items are the store's and never changed in place): what a fresh parse would give."""
    return replace(
        state,
        steps=dict(state.steps),
        compensations=dict(state.compensations),
        windows={key: dict(window) for key, window in state.windows.items()},
        pages=dict(state.pages),
        children=dict(state.children),
        shards={key: dict(shards) for key, shards in state.shards.items()},
        shards_whole=set(state.shards_whole),
    )


Checker = Callable[[RunRecord], list[Violation]]

IN_PROGRESS = (StepStatus.PENDING, StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.WAITING)


def _records(state: WorkflowState) -> list[StepRecord]:
    return [*state.steps.values(), *state.compensations.values()]


def _definition(record: RunRecord, state: WorkflowState) -> Definition:
    return record.definitions[state.workflow.wf_type]


Units = dict[tuple[str, str, str], dict[int, StepRecord]]


def item_units(items: Sequence[Item]) -> Units:
    """Map items' units as the table holds them: (workflow, kind, step) -> index -> unit (an
    item's `I#`, kind `step`; an item compensation's `IC#`, kind `compensation`)."""
    out: Units = defaultdict(dict)
    for item in items:
        pk, sk = str(item.get("pk", "")), str(item.get("sk", ""))
        if pk.startswith(MAP_PREFIX) and sk.startswith((ITEM_PREFIX, ITEM_COMP_PREFIX)):
            rec = StepRecord.from_item(item)
            assert rec.index is not None
            out[(rec.workflow_id, rec.kind, rec.name)][rec.index] = rec
    return dict(out)


def _all_units(record: RunRecord) -> list[StepRecord]:
    """Every map item's unit (and item compensation's) in the table."""
    return [u for units in item_units(record.items).values() for u in units.values()]


def _unit_of(
    states: Mapping[str, WorkflowState],
    units: Units,
    workflow_id: str,
    kind: str,
    name: str,
) -> StepRecord | None:
    """The unit a name denotes: a step or compensation (`name`), or a map item's (or its
    compensation's) unit (`name[index]`, `unit_name`)."""
    step, bracket, rest = name.partition("[")
    if bracket:
        return units.get((workflow_id, kind, step), {}).get(int(rest.rstrip("]")))
    state = states.get(workflow_id)
    return None if state is None else state.record(kind, name)  # type: ignore[arg-type]


def _is_map(rec: StepRecord) -> bool:
    """A map step's unit (or a map compensation's), opened: its items are units of their own."""
    return rec.fanout is not None and rec.index is None


# ------------------------------------------------------------------------- 1. termination


def check_terminal_within_bound(record: RunRecord) -> list[Violation]:
    """Every workflow that exists is terminal, and got there within its time bound."""
    out = []
    for wf_id, state in record.states().items():
        wf = state.workflow
        if not wf.status.terminal:
            out.append(
                Violation(
                    "terminal",
                    wf_id,
                    f"still {wf.status.value} at the end of the run "
                    f"({(record.end_ms - wf.created_at) / 1000:.1f}s after it started)",
                )
            )
            continue
        bound = record.bounds.get(wf_id)
        finished = wf.finished_at or wf.updated_at
        if bound is not None and finished > bound:
            out.append(
                Violation(
                    "terminal",
                    wf_id,
                    f"{wf.status.value} after {(finished - wf.created_at) / 1000:.1f}s, later "
                    f"than its bound of {(bound - wf.created_at) / 1000:.1f}s",
                )
            )
    return out


# ------------------------------------------------------------------------ 2. effects once


def _iteration_unit(call: Call | Effect) -> str:
    """The unit a call belongs to: its step's (or item's); a `Repeat` step's iteration's, whose
    key ends `#<iteration>` (a step's key holds no other `#`)."""
    unit = unit_name(call.step, call.item)
    if call.kind == "step" and "#" in call.key:
        return f"{unit}#{call.key.rsplit('#', 1)[1]}"
    return unit


def check_effects_once(record: RunRecord) -> list[Violation]:
    """One idempotency key per step (and per compensation; per iteration of a `Repeat`
    step), so at most one effect each."""
    out = []
    keys: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for call in record.calls:
        keys[(call.workflow_id, call.kind, _iteration_unit(call))].add(call.key)
    for (wf_id, kind, step), found in sorted(keys.items()):
        if len(found) > 1:
            out.append(
                Violation(
                    "effect_once",
                    wf_id,
                    f"{kind} '{step}' called the service with {len(found)} different "
                    f"idempotency keys: {sorted(found)}",
                )
            )
    effects: dict[tuple[str, str, str], list[Effect]] = defaultdict(list)
    for effect in record.effects:
        effects[(effect.workflow_id, effect.kind, _iteration_unit(effect))].append(effect)
    for (wf_id, kind, step), applied in sorted(effects.items()):
        if len(applied) > 1:
            out.append(
                Violation(
                    "effect_once",
                    wf_id,
                    f"{kind} '{step}' applied its effect {len(applied)} times "
                    f"(attempts {[e.attempt for e in applied]})",
                )
            )
    return out


# ------------------------------------------------------------------- 3. exact compensation


def _ancestors(definition: Definition, name: str) -> set[str]:
    seen: set[str] = set()
    stack = list(definition.by_name[name].depends_on)
    while stack:
        dep = stack.pop()
        if dep not in seen:
            seen.add(dep)
            stack.extend(definition.by_name[dep].depends_on)
    return seen


def _placed_at(rec: StepRecord) -> int:
    """Where a step's undo goes in reverse order: its completion if it succeeded, else its
    first claim (its outcome is ambiguous)."""
    at = rec.finished_at if rec.status is StepStatus.SUCCEEDED else rec.first_claimed_at
    return at or 0


def must_undo_first(state: WorkflowState, definition: Definition, a: str, b: str) -> bool:
    """Must the compensation of `a` run before that of `b`? A dependent before its
    dependency always; otherwise (REVERSE order only) the later-placed one first."""
    if b in _ancestors(definition, a):
        return True
    if a in _ancestors(definition, b):
        return False
    if definition.compensation_order == "PARALLEL":
        return False
    return _placed_at(state.steps[a]) > _placed_at(state.steps[b])


def check_compensation_exact(record: RunRecord) -> list[Violation]:
    """Compensated exactly the steps that may have acted and have a compensation (claimed at
    least once under `When: ATTEMPTED`, succeeded under `When: SUCCEEDED`), in reverse order,
    each after the effect it undoes."""
    out: list[Violation] = []
    comp_effects: dict[tuple[str, str], Effect] = {}
    step_effects: dict[tuple[str, str], Effect] = {}
    # A map's items are undone one by one (`check_item_compensation`): here a map step's undo
    # is the span from its first item undo to its last, placed among the other steps' undos.
    item_undos: dict[tuple[str, str], tuple[int, int]] = {}
    for effect in record.effects:
        key = (effect.workflow_id, effect.step)
        if effect.item is not None:
            if effect.kind == "compensation":
                first, last = item_undos.get(key, (effect.seq, effect.seq))
                item_undos[key] = (min(first, effect.seq), max(last, effect.seq))
            continue
        target = comp_effects if effect.kind == "compensation" else step_effects
        target.setdefault(key, effect)
    # The first claim of each compensation (a map's: of its first item's compensation).
    comp_claims: dict[tuple[str, str], int] = {}
    for claim in record.claims:
        if claim.kind == "compensation":
            comp_claims.setdefault((claim.workflow_id, claim.step), claim.at)
    for wf_id, state in record.states().items():
        definition = _definition(record, state)
        status = state.workflow.status
        undone = {s: e for (w, s), e in comp_effects.items() if w == wf_id}
        spans = {s: (e.seq, e.seq) for s, e in undone.items()}
        spans.update({s: span for (w, s), span in item_undos.items() if w == wf_id})
        maps = {name for name, rec in state.steps.items() if _is_map(rec)}
        # A child-workflow step is undone by its child, with no effect of its own
        # (`check_children`); like a map's, it is left out of the effects and their order.
        children = {n for n in state.steps if definition.by_name[n].workflow is not None}
        owed = {
            name for name, rec in state.steps.items() if compensated(rec, definition.by_name[name])
        }
        for name in sorted(set(spans) - owed):
            rec = state.steps.get(name)
            out.append(
                Violation(
                    "compensation",
                    wf_id,
                    f"'{name}' was compensated but it is "
                    f"{rec.status.value if rec else 'unknown'}: only steps that may have "
                    "acted (and have a compensation) may be undone",
                )
            )
        if status in (WorkflowStatus.COMPENSATED, WorkflowStatus.CANCELLED):
            for name in sorted(owed - set(undone) - maps - children):
                out.append(
                    Violation(
                        "compensation",
                        wf_id,
                        f"workflow is {status.value} but step '{name}', which may have "
                        "acted, was never compensated",
                    )
                )
        for name, comp in sorted(state.compensations.items()):
            if (
                comp.status is StepStatus.SUCCEEDED
                and name not in undone
                and not _is_map(comp)
                and name not in children
            ):
                out.append(
                    Violation(
                        "compensation",
                        wf_id,
                        f"compensation '{name}' is SUCCEEDED but its effect was never applied",
                    )
                )
        out += [
            Violation(
                "compensation",
                wf_id,
                f"'{name}' was undone (call #{effect.seq}) before its effect was applied "
                f"(call #{step_effects[(wf_id, name)].seq})",
            )
            for name, effect in sorted(undone.items())
            if (wf_id, name) in step_effects and step_effects[(wf_id, name)].seq > effect.seq
        ]
        out += _undone_in_order(state, definition, owed - children, spans)
        out += _compensations_started_in_order(state, definition, owed - children, comp_claims)
    return out


def _undone_in_order(
    state: WorkflowState,
    definition: Definition,
    owed: set[str],
    spans: Mapping[str, tuple[int, int]],
) -> list[Violation]:
    """Every undo that must come first (`must_undo_first`) was applied first: a step's undo
    is one call; a map's, every call of its items' undos (its first to its last)."""
    out = []
    names = sorted(n for n in spans if n in owed)
    for a, b in itertools.permutations(names, 2):
        if must_undo_first(state, definition, a, b) and spans[a][1] > spans[b][0]:
            out.append(
                Violation(
                    "compensation",
                    state.workflow.workflow_id,
                    f"'{b}' was undone (call #{spans[b][0]}) before '{a}' "
                    f"(call #{spans[a][1]}); '{a}' finished later or depends on '{b}'",
                )
            )
    return out


def _compensations_started_in_order(
    state: WorkflowState,
    definition: Definition,
    owed: set[str],
    comp_claims: Mapping[tuple[str, str], int],
) -> list[Violation]:
    """No compensation is claimed before every compensation that must come first has
    succeeded: REVERSE runs them one at a time; PARALLEL waits only for the undos of the steps
    that depend on its step (independent branches may overlap). From the claims that landed,
    so an undo that started early is caught even if its effect came late."""
    out = []
    wf_id = state.workflow.workflow_id
    for a, b in itertools.permutations(sorted(owed), 2):
        started = comp_claims.get((wf_id, b))
        if started is None or not must_undo_first(state, definition, a, b):
            continue
        first = state.compensations.get(a)
        done = (
            first.finished_at
            if first is not None and first.status is StepStatus.SUCCEEDED
            else None
        )
        if done is None or started < done:
            when = "never" if done is None else f"at {done}"
            out.append(
                Violation(
                    "compensation",
                    wf_id,
                    f"the compensation of '{b}' was claimed at {started}, but that of '{a}' "
                    f"(which must be undone first) succeeded {when}",
                )
            )
    return out


# ---------------------------------------------------------- 4. nothing from a superseded one


def _output_attempt(text: str | None, record: RunRecord) -> int | None:
    value = record.value(text)
    if isinstance(value, dict) and isinstance(value.get("attempt"), int):
        return int(value["attempt"])
    return None


# History entries that record something other than an attempt ending (an operator's
# replacement input, written at the attempt number the step had then).
NOT_AN_END = ("input_replaced", "undeliverable")


def _history_problems(rec: StepRecord, record: RunRecord) -> list[str]:
    what = f"{rec.kind} '{unit_name(rec.name, rec.index)}'"
    out = []
    ended: dict[int, int] = defaultdict(int)
    for entry in rec.history:
        if entry.get("o") not in NOT_AN_END:
            ended[int(entry["a"])] += 1
    out += [f"{what}: attempt {a} ended {n}x" for a, n in sorted(ended.items()) if n > 1]
    oks = [int(h["a"]) for h in rec.history if h.get("o") == "ok"]
    if rec.iterations or rec.loop_from:
        return out + _iteration_history_problems(rec, oks, record)
    if rec.status is not StepStatus.SUCCEEDED:
        if oks:
            out.append(f"{what} is {rec.status.value} but accepted a result of attempt {oks}")
        return out
    if oks != [rec.attempt]:
        out.append(
            f"{what} is SUCCEEDED at attempt {rec.attempt} but its history accepted results "
            f"of attempts {oks}"
        )
    produced = _output_attempt(rec.output, record)
    if produced is not None and produced != rec.attempt:
        out.append(
            f"{what} recorded the output of attempt {produced}, but it ended at attempt "
            f"{rec.attempt}"
        )
    return out


def _iteration_history_problems(rec: StepRecord, oks: list[int], record: RunRecord) -> list[str]:
    """A `Repeat` step accepts one result per iteration, in attempt order; every one is
    counted (`iterations`, while its history keeps them all); a SUCCEEDED one ended at the
    last of them, with that attempt's output."""
    what = f"step '{rec.name}'"
    out = []
    if oks != sorted(set(oks)):
        out.append(f"{what} accepted results of attempts {oks}, not one each in order")
    whole = rec.attempts_total == len(rec.history)
    if whole and len(oks) != rec.iterations:
        out.append(
            f"{what} counts {rec.iterations} iterations but accepted {len(oks)} results "
            f"(attempts {oks})"
        )
    if rec.status is StepStatus.SUCCEEDED:
        if not oks or oks[-1] != rec.attempt:
            out.append(f"{what} is SUCCEEDED at attempt {rec.attempt}; its last result {oks}")
        produced = _output_attempt(rec.output, record)
        if produced is not None and produced != rec.attempt:
            out.append(
                f"{what} recorded the output of attempt {produced}, but it ended at attempt "
                f"{rec.attempt}"
            )
    return out


def _reported_successes(
    record: RunRecord, states: Mapping[str, WorkflowState], units: Units
) -> list[Violation]:
    out = []
    succeeded: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for h in record.handled:
        if h.outcome == "succeeded":
            succeeded[(h.workflow_id, h.kind, unit_name(h.step, h.item))].append(h.attempt)
    for (wf_id, kind, step), attempts in sorted(succeeded.items()):
        rec = _unit_of(states, units, wf_id, kind, step)
        if rec is not None and kind == "step" and (rec.iterations or rec.loop_from):
            out += _iteration_successes(wf_id, rec, attempts)
            continue
        if len(set(attempts)) > 1:
            message = f"{kind} '{step}': results accepted for attempts {attempts}"
            out.append(Violation("superseded", wf_id, message))
        if rec is None or rec.status is not StepStatus.SUCCEEDED or rec.attempt not in attempts:
            now = f"{rec.status.value} at attempt {rec.attempt}" if rec else "missing"
            message = (
                f"{kind} '{step}': the runtime reported attempt(s) {attempts} succeeded, but "
                f"the step is {now}"
            )
            out.append(Violation("superseded", wf_id, message))
    return out


def _iteration_successes(wf_id: str, rec: StepRecord, attempts: list[int]) -> list[Violation]:
    """A `Repeat` step: the runtime reported each iteration's accepted result once, and each
    is an accepted result of the step's history (while it keeps every attempt)."""
    out = []
    accepted = [int(h["a"]) for h in rec.history if h.get("o") == "ok"]
    if len(set(attempts)) != len(attempts):
        message = f"step '{rec.name}': a result reported twice for attempts {attempts}"
        out.append(Violation("superseded", wf_id, message))
    # (A callback's results come by the callback API, not reported here: a subset.)
    if rec.attempts_total == len(rec.history) and not set(attempts) <= set(accepted):
        message = (
            f"step '{rec.name}': the runtime reported attempts {sorted(attempts)} succeeded, "
            f"but the step accepted the results of {accepted} ({rec.iterations} iterations)"
        )
        out.append(Violation("superseded", wf_id, message))
    return out


def _consumed_inputs(
    record: RunRecord, states: Mapping[str, WorkflowState], units: Units
) -> list[Violation]:
    out = []
    for call in record.calls:
        if states.get(call.workflow_id) is None:
            continue
        for name, attempt in call.inputs:
            dep = _unit_of(states, units, call.workflow_id, "step", name)
            if dep is None or dep.status is not StepStatus.SUCCEEDED or dep.attempt != attempt:
                now = f"{dep.status.value} at attempt {dep.attempt}" if dep else "missing"
                message = (
                    f"{call.kind} '{unit_name(call.step, call.item)}' attempt {call.attempt} was "
                    f"given the output of '{name}' attempt {attempt}, but '{name}' is {now}"
                )
                out.append(Violation("superseded", call.workflow_id, message))
    return out


def _genuine_tokens_known(
    record: RunRecord, states: Mapping[str, WorkflowState]
) -> list[Violation]:
    """Every task token the simulator used was issued by the engine, so a callback with it is
    never `unknown` (TaskTokenInvalid, 404): while its attempt waits it is accepted, and once
    that attempt is over it is stale (TaskTokenStale, 409), as long as the step's history
    (the last MAX_HISTORY ended attempts) still holds that attempt."""
    out = []
    for h in record.handled:
        if h.outcome != "stale:TaskTokenInvalid":
            continue
        st = states.get(h.workflow_id)
        rec = None if st is None else st.record(h.kind, h.step)  # type: ignore[arg-type]
        kept = [] if rec is None else [int(e["a"]) for e in rec.history]
        if rec is not None and (len(rec.history) < limits.MAX_HISTORY or h.attempt >= min(kept)):
            out.append(
                Violation(
                    "superseded",
                    h.workflow_id,
                    f"a callback with the genuine token of {h.kind} '{h.step}' attempt "
                    f"{h.attempt} was answered 'unknown token'; its attempt is over, so it is "
                    "stale (its history entry lacks the token's hash)",
                )
            )
    return out


def check_no_superseded_result(record: RunRecord) -> list[Violation]:
    """Every accepted result belongs to the attempt the step ended at; no attempt ended
    twice; the runtime reported success only for that attempt; nobody was given a result
    that is not the accepted one."""
    states = record.states()
    units = item_units(record.items)
    out = [
        Violation("superseded", wf_id, problem)
        for wf_id, state in states.items()
        for rec in _records(state)
        for problem in _history_problems(rec, record)
    ]
    out += [
        Violation("superseded", unit.workflow_id, problem)
        for by_index in units.values()
        for unit in by_index.values()
        for problem in _history_problems(unit, record)
    ]
    return (
        out
        + _reported_successes(record, states, units)
        + _consumed_inputs(record, states, units)
        + _genuine_tokens_known(record, states)
    )


# ------------------------------------------------------------------------ 5. nothing lost


def check_no_lost_workflow(record: RunRecord) -> list[Violation]:
    states = record.states()
    return [
        Violation("lost", wf_id, "the start was acknowledged but the workflow does not exist")
        for wf_id in sorted(record.accepted)
        if wf_id not in states
    ]


# -------------------------------------------------------------------- 6. attempts in policy


def check_attempts_within_policy(record: RunRecord) -> list[Violation]:
    out = []
    states = record.states()
    units = _all_units(record)
    for wf_id, state in states.items():
        definition = _definition(record, state)
        for rec in [*_records(state), *(u for u in units if u.workflow_id == wf_id)]:
            spec = definition.spec(rec.kind, rec.name)
            limit = 1 + spec.retry.max_attempts + rec.budget_from
            if rec.attempt > limit:
                out.append(
                    Violation(
                        "attempts",
                        wf_id,
                        f"{rec.kind} '{unit_name(rec.name, rec.index)}' reached attempt "
                        f"{rec.attempt}; its policy allows {limit} (1 + MaxAttempts "
                        f"{spec.retry.max_attempts})",
                    )
                )
    return out


# ------------------------------------------------------------ 7. status agrees with steps


# Why a workflow may be COMPENSATED with no failed step: an operator gave up on it, or it
# stayed paused past its PauseTimeoutSeconds.
GAVE_UP = ("OperatorGaveUp", PAUSE_TIMEOUT)
# A SUCCEEDED child whose parent unwound undoes itself (SUCCEEDED -> COMPENSATING) with this
# error: it ends COMPENSATED (or FAILED) though none of its steps failed.
PARENT_COMPENSATION = "ParentCompensation"


def undone_by_parent(state: WorkflowState) -> bool:
    """A child workflow that SUCCEEDED and was then undone because its parent unwound."""
    wf = state.workflow
    return wf.parent_id is not None and (loads(wf.error) or {}).get("type") == PARENT_COMPENSATION


def _undone_problems(state: WorkflowState, definition: Definition) -> list[str]:
    """COMPENSATED or CANCELLED: the compensation of every step that may have acted (and has
    one) succeeded."""
    out = []
    for name, rec in sorted(state.steps.items()):
        comp = state.compensations.get(name)
        owed = compensated(rec, definition.by_name[name])
        if owed and (comp is None or comp.status is not StepStatus.SUCCEEDED):
            out.append(
                f"{state.workflow.status.value} but the compensation of step '{name}' (which "
                f"may have acted) is {comp.status.value if comp else 'missing'}"
            )
    return out


def _status_problems(state: WorkflowState, definition: Definition) -> list[str]:
    wf = state.workflow
    status = wf.status
    out = [
        f"{status.value} but {rec.kind} '{rec.name}' is still {rec.status.value}"
        for rec in _records(state)
        if rec.status in IN_PROGRESS
    ]
    if wf.due_at is not None or wf.watch_shard is not None:
        out.append(f"{status.value} but still in the watch index (due_at={wf.due_at})")
    steps = {n: r.status for n, r in state.steps.items()}
    comps = state.compensations
    if status is WorkflowStatus.SUCCEEDED:
        not_ok = sorted(n for n, s in steps.items() if not s.done)
        if not_ok:
            out.append(f"SUCCEEDED but steps {not_ok} did not succeed")
        if comps:
            out.append(f"SUCCEEDED but compensations {sorted(comps)} exist")
    given_up = (loads(wf.error) or {}).get("type") in GAVE_UP or undone_by_parent(state)
    if (
        status is WorkflowStatus.COMPENSATED
        and StepStatus.FAILED not in steps.values()
        and not given_up
    ):
        out.append("COMPENSATED but no step FAILED (and no operator or pause timeout gave up)")
    if status.terminal and (wf.pause is not None or wf.paused_at is not None):
        out.append(f"{status.value} but it still records a pause ({wf.pause})")
    if status in (WorkflowStatus.COMPENSATED, WorkflowStatus.CANCELLED):
        out += _undone_problems(state, definition)
    if status is WorkflowStatus.FAILED and not any(
        c.status is StepStatus.FAILED for c in comps.values()
    ):
        out.append("FAILED but no compensation failed")
    for name in sorted(comps):
        step = state.steps.get(name)
        if step is None or not compensated(step, definition.by_name[name]):
            out.append(
                f"a compensation exists for '{name}', which is "
                f"{step.status.value if step else 'missing'} and may not be undone"
            )
    return out


def check_status_consistent(record: RunRecord) -> list[Violation]:
    """A terminal workflow's status agrees with its steps and compensations, nothing in it
    is still in progress, and it has left the watch index."""
    return [
        Violation("status", wf_id, problem)
        for wf_id, state in record.states().items()
        if state.workflow.status.terminal
        for problem in _status_problems(state, _definition(record, state))
    ]


# -------------------------------------------------- the watch index (checked while running)


def check_findable(
    state: WorkflowState,
    definition: Definition,
    now: int,
    rng: Any,
    slack: Callable[[tuple[str, str]], int] | None = None,
    pools: Mapping[str, PoolState] | None = None,
    resumed_at: int | None = None,
    queue_busy_at: Callable[[str], int] | None = None,
) -> list[Violation]:
    """Invariant 3 at one moment: a live workflow is in the watch index, under a `due_at` no
    later than any deadline that has passed (a timeout, a lost dispatch, a backoff's end, a
    pause timeout). A PAUSED workflow with nothing in flight and no pause timeout has nothing
    to watch: it may be out of the index (an operator action puts it back).

    `slack(key)` is how late the writes to that item (a step's, the workflow's for the pause
    timeout, its pool's for a dispatch grace restarted by a resume) landed after their
    timestamps were taken: a deadline computed from a timestamp may
    precede `due_at` by that much (the engine's clock is read before a write is sent; see
    docs/simulation.md). `pools`: the pools' states as the table records them (a task waiting
    for a paused pool is not late). `resumed_at`: when the workflow last left PAUSED; nothing
    is dispatched while it is paused, so no dispatch is due before that (the resume writes the
    workflow due at once)."""
    wf = state.workflow
    if wf.status.terminal:
        return []
    if wf.due_at is None or wf.watch_shard is None:
        if wf.status is WorkflowStatus.PAUSED and not watched_while_paused(state, definition):
            return []
        return [Violation("findable", wf.workflow_id, f"{wf.status.value} but not in the index")]
    out = []
    for action in plan(state, definition, now, supervisor=True, rng=rng, pools=pools):
        deadline = _deadline(action, now, resumed_at)
        if deadline is not None and isinstance(action, Dispatch):
            deadline = _held_by_pool(action, deadline, state, definition, pools or {})
        if deadline is None or wf.due_at <= deadline:
            continue
        what = type(action).__name__
        if isinstance(action, Dispatch | EndAttempt | TimeOutApproval):
            what = f"{what} of '{unit_name(action.seen.name, action.seen.index)}'"
        late = 0 if slack is None else _lateness(action, wf.key, definition, slack)
        if isinstance(action, Dispatch) and action.lost and action.seen.resent_at is not None:
            # A task sent twice is sent a third time only once its queue holds nothing, which
            # the supervisor learns by asking again a grace after it saw a backlog: up to a
            # grace after the queue emptied (docs/architecture.md, no congestion collapse).
            pool = definition.spec(action.seen.kind, action.seen.name).pool
            emptied = 0 if queue_busy_at is None else queue_busy_at(pool)
            deadline = max(deadline, emptied) + definition.dispatch_timeout_seconds * 1000
            if wf.due_at <= deadline:
                continue
        if wf.due_at > deadline + late:
            out.append(
                Violation(
                    "findable",
                    wf.workflow_id,
                    f"{what} was due at {deadline} but the watch index says {wf.due_at}",
                )
            )
    return out


def with_windows(state: WorkflowState, peek: Callable[[str, str], Item | None]) -> WorkflowState:
    """`state` with the units in the windows of its running maps as the table holds them (a
    look reads them with the workflow: `Maps.with_windows`), so `check_findable` plans every
    item's deadlines as a look would. An entry whose unit is not written yet is an item whose
    message went out when it entered the window."""
    for rec in (*state.steps.values(), *state.compensations.values()):
        m = rec.fanout
        if m is None or rec.index is not None or rec.status is not StepStatus.RUNNING:
            continue
        window = state.windows[(rec.kind, rec.name)] = {}
        compensation = rec.kind == "compensation"
        for position in sorted(m.window):
            index = m.index_of(position)
            item = peek(*map_item_key(rec.workflow_id, rec.name, index, rec.kind))
            unit = (
                StepRecord.from_item(item)
                if item is not None
                else StepRecord.unstored_item(
                    rec.workflow_id,
                    rec.name,
                    index,
                    state.workflow.wf_type,
                    m.window[position],
                    rec.kind,
                    position if compensation else None,
                )
            )
            if compensation and unit.position is None:
                unit = replace(unit, position=position)
            window[position] = unit
    return state


def _lateness(
    action: Any, wf_key: tuple[str, str], definition: Definition, slack: Callable[..., int]
) -> int:
    """How late the writes `action`'s deadline was computed from may have landed (a map
    item's: its unit's writes, and its map's, whose window entry stamps when it was sent)."""
    if isinstance(action, Dispatch | EndAttempt):
        late = slack(action.seen.key)
        if action.seen.index is not None:
            map_key = (wf_key[0], item_sk(action.seen.kind, action.seen.name))
            late = max(late, slack(map_key))
    elif isinstance(action, TimeOutApproval):  # its deadline is stamped by its rest
        late = max(slack(wf_key), slack(action.seen.key))
    else:
        late = slack(wf_key)
    if isinstance(action, Dispatch):
        # A dispatch grace restarts at its pool's resume, stamped by that write.
        pool = definition.spec(action.seen.kind, action.seen.name).pool
        late = max(late, slack((POOLS_PK, pool)))
    return late


def _deadline(action: Any, now: int, resumed_at: int | None) -> int | None:
    """When the supervisor had to take `action` (None: it is not bound to a deadline)."""
    deadline: int | None = None
    if isinstance(action, EndAttempt | GiveUp | Wake | TimeOutApproval) or (
        isinstance(action, Dispatch) and action.lost
    ):
        deadline = now - action.overdue_ms
    elif (
        isinstance(action, Dispatch)
        and action.seen.status is StepStatus.QUEUED
        and action.seen.dispatched_at is None
    ):
        deadline = action.seen.available_at  # a long backoff's end
    if isinstance(action, Dispatch) and deadline is not None and resumed_at is not None:
        deadline = max(deadline, resumed_at)  # nothing is dispatched while it is paused
    return deadline


def _held_by_pool(
    action: Dispatch,
    deadline: int,
    state: WorkflowState,
    definition: Definition,
    pools: Mapping[str, PoolState],
) -> int:
    """A task never sent whose pool held it (paused, or its circuit open) at its deadline is
    looked at every `g(u)` while held, and nothing pulls its workflow forward at the pool's
    release (a write on the pool, not on the workflow: docs/architecture.md). A look that saw
    it held is no earlier than `deadline - g`, so it was held until the pool's last release
    (`resumed_at`, a resume or a circuit's half-open); the next look is due within `g` of
    that look, so the dispatch is due at most `g` after both its deadline and the release."""
    seen = action.seen
    if seen.status is not StepStatus.QUEUED or seen.dispatched_at is not None:
        return deadline
    pool = pools.get(definition.spec(seen.kind, seen.name).pool)
    released = None if pool is None else pool.resumed_at
    running = state.workflow.status is WorkflowStatus.RUNNING
    gap = reach_gap(definition, seen.kind, seen.name, running)
    if released is None or released + gap <= deadline:
        return deadline
    return max(deadline, released) + gap


def _has_deadlines(rec: StepRecord) -> bool:
    """An attempt in flight has deadlines (its heartbeat, its timeout), except a unit waiting
    for a child that its parent asked to cancel, or a compensation unit waiting for its child
    to undo itself: only the child's end decides those, and it pulls the parent's entry."""
    if rec.child_id is not None and rec.status is StepStatus.WAITING:
        return rec.kind == "step" and rec.child_cancel is None  # its TimeoutSeconds
    return rec.status.in_flight


def watched_while_paused(state: WorkflowState, definition: Definition) -> bool:
    """A PAUSED workflow needs watching while an attempt of it with deadlines is in flight
    (its heartbeat and timeout; a map of children's: its window's) or its definition has a
    pause timeout."""
    if definition.pause_timeout_seconds is not None:
        return True
    for rec in _records(state):
        window = state.windows.get((rec.kind, rec.name))
        if _is_map(rec) and window is not None and definition.by_name[rec.name].workflow:
            if rec.status.in_flight and any(_has_deadlines(u) for u in window.values()):
                return True
        elif _has_deadlines(rec):
            return True
    return False


FINISH_EVENTS = {
    "WorkflowSucceeded": WorkflowStatus.SUCCEEDED,
    "WorkflowCompensated": WorkflowStatus.COMPENSATED,
    "WorkflowCancelled": WorkflowStatus.CANCELLED,
    "WorkflowFailed": WorkflowStatus.FAILED,
}


# Events that announce a terminal transition: a workflow's end, a step failed for good, an
# undo done. (Every announced event must be delivered; these are the ones counted apart.)
TERMINAL_EVENTS = (*FINISH_EVENTS, "StepFailed", "StepCompensated")


def announced(record: RunRecord) -> list[DomainEvent]:
    """Every event the table's changes announce, in stream order: what subscribers must be
    told (`shepherd.changes.events_of` on every change, with no filter and no relay).
    Worked out once per run (several checkers ask; changes and events are frozen)."""
    cached = record._announced
    if cached is None or not same_objects(cached[0], record.changes):
        events = [event for change in record.changes for event in events_of(change)]
        record._announced = cached = (list(record.changes), events)
    return list(cached[1])


def _id(detail: Mapping[str, Any]) -> str:
    return str(detail.get("event_id"))


def _what(detail_type: str, detail: Mapping[str, Any]) -> str:
    where = f" {detail['kind']} {detail['step']}#{detail['attempt']}" if "step" in detail else ""
    return f"{detail_type}{where} (sequence {detail.get('sequence')})"


def missing_events(record: RunRecord) -> list[DomainEvent]:
    """Announced events never delivered (by `event_id`), in stream order."""
    delivered = {_id(d.detail) for d in record.deliveries}
    return [e for e in announced(record) if _id(e.detail) not in delivered]


def check_events_delivered(record: RunRecord) -> list[Violation]:
    """Every event a change announces is delivered at least once by the end of the run: every
    workflow's end, every step failed for good, every undo done (and every other event)."""
    return [
        Violation(
            "events_delivered",
            str(e.detail.get("workflow_id")),
            f"{'terminal event' if e.detail_type in TERMINAL_EVENTS else 'event'} "
            f"{_what(e.detail_type, e.detail)} was announced by a write and never delivered",
        )
        for e in missing_events(record)
    ]


def check_events_real(record: RunRecord) -> list[Violation]:
    """Every delivered event is one a real change announced, exactly as it announced it (no
    invented event, no altered one), so a duplicate carries the same `event_id` as the
    original; and two different transitions never share an `event_id` (a subscriber that
    deduplicates on it would drop a real event)."""
    out = []
    by_id: dict[str, DomainEvent] = {}
    for event in announced(record):
        seen = by_id.setdefault(_id(event.detail), event)
        if seen is not event:
            out.append(
                Violation(
                    "events_real",
                    str(event.detail.get("workflow_id")),
                    f"{_what(event.detail_type, event.detail)} reuses the event_id of "
                    f"{_what(seen.detail_type, seen.detail)}",
                )
            )
    for d in record.deliveries:
        real = by_id.get(_id(d.detail))
        if real is None or (real.detail_type, real.detail) != (d.detail_type, d.detail):
            out.append(
                Violation(
                    "events_real",
                    str(d.detail.get("workflow_id")),
                    f"delivered {_what(d.detail_type, d.detail)} ({d.via}) "
                    + (
                        "matches no change"
                        if real is None
                        else f"differs from what its change announced: {real.detail}"
                    ),
                )
            )
    return out


def check_events_ordered(record: RunRecord) -> list[Violation]:
    """The relay delivers one workflow's events in the order of its writes: each event's
    first delivery by the relay comes after every earlier write's (a redelivery may repeat
    older ones; a record replayed from the on-failure queue comes late, by design)."""
    out = []
    last: dict[str, tuple[int, str]] = {}
    first: set[str] = set()
    for d in record.deliveries:
        if d.via != "relay" or _id(d.detail) in first:
            continue
        first.add(_id(d.detail))
        wf = str(d.detail.get("workflow_id"))
        seq = int(str(d.detail.get("sequence")))
        before = last.get(wf)
        if before is not None and seq < before[0]:
            out.append(
                Violation(
                    "events_ordered",
                    wf,
                    f"{_what(d.detail_type, d.detail)} delivered after {before[1]}",
                )
            )
        last[wf] = max(before or (seq, ""), (seq, _what(d.detail_type, d.detail)))
    return out


def check_finish_events(record: RunRecord) -> list[Violation]:
    """A terminal workflow announced its end, once (once more per redrive: FAILED before
    each), and as the status it ended in; a live workflow's last end announced was a FAILED
    since redriven."""
    out = []
    states = record.states()
    ends: dict[str, list[str]] = defaultdict(list)
    for event in announced(record):
        if event.detail_type in FINISH_EVENTS:
            ends[str(event.detail.get("workflow_id"))].append(event.detail_type)
    for wf_id, state in sorted(states.items()):
        types = ends.get(wf_id, [])
        status = state.workflow.status
        # A child its parent undid ended SUCCEEDED first, then as its undo ended (FAILED,
        # then again after each redrive, or COMPENSATED).
        again = state.workflow.parent_id is not None and types[:1] == ["WorkflowSucceeded"]
        earlier = types[1:-1] if again else types[:-1]
        if len(types) > 1 + again + state.workflow.redrives:
            out.append(Violation("events", wf_id, f"finished {len(types)} times: {types}"))
        if any(t != "WorkflowFailed" for t in earlier):
            out.append(Violation("events", wf_id, f"ended before a redrive as {types[:-1]}"))
        if status.terminal and (not types or FINISH_EVENTS[types[-1]] is not status):
            out.append(Violation("events", wf_id, f"announced {types} but it is {status.value}"))
        if not status.terminal and types and types[-1] != "WorkflowFailed":
            out.append(Violation("events", wf_id, f"announced {types} but it is {status.value}"))
    return out


def check_online(record: RunRecord) -> list[Violation]:
    return list(record.online)


# --------------------------------------------------------------- orphaned effects


@dataclass(frozen=True)
class Orphan:
    """An effect left in the world: see `orphaned_effects`."""

    effect: Effect
    when: str  # the step's Compensation.When
    status: str  # how the workflow ended


def orphaned_effects(record: RunRecord) -> list[Orphan]:
    """Effects the service applied for a step that declares a compensation, in a workflow
    that ended COMPENSATED or CANCELLED, that no undo ever undid (the service remembers every
    forward key an undo named).

    Under `When: ATTEMPTED` there must be none: an effect means an attempt ran, so the step
    was claimed and must be undone (`check_no_orphaned_effects`). Under `When: SUCCEEDED` they
    are the design's price (a step that acted, then failed), counted, not failed on. Effects
    of steps without a compensation are not orphans: nothing could undo them.
    """
    states = record.states()
    out = []
    for effect in record.effects:
        state = states.get(effect.workflow_id)
        if effect.kind != "step" or state is None:
            continue
        status = state.workflow.status
        if status not in (WorkflowStatus.COMPENSATED, WorkflowStatus.CANCELLED):
            continue
        spec = _definition(record, state).by_name.get(effect.step)
        if spec is None or spec.compensation is None or effect.key in record.undone:
            continue
        out.append(Orphan(effect, spec.compensation.when, status.value))
    return out


def check_no_orphaned_effects(record: RunRecord) -> list[Violation]:
    """No effect of a `When: ATTEMPTED` step is left undone by a COMPENSATED or CANCELLED
    workflow."""
    return [
        Violation(
            "orphaned",
            o.effect.workflow_id,
            f"the effect of step '{o.effect.step}' (attempt {o.effect.attempt}, call "
            f"#{o.effect.seq}) was applied but never undone, and the workflow ended {o.status} "
            "(its compensation is When: ATTEMPTED)",
        )
        for o in orphaned_effects(record)
        if o.when == "ATTEMPTED"
    ]


# ------------------------------------------------------------------- claims (ground truth)


def check_claims(record: RunRecord) -> list[Violation]:
    """From the claims the store saw land (not from the engine's own bookkeeping): no
    compensation ever runs (is created, claimed or calls the service) for a step that was
    never claimed, and the engine's `first_claimed_at` (its evidence that a step may have
    acted) is exactly the first claim that landed, or absent if none did."""
    out: list[Violation] = []
    # By unit: a step, a compensation, a map item (`each[3]`) or an item's compensation.
    claimed: dict[tuple[str, str, str], list[Claim]] = defaultdict(list)
    for claim in record.claims:
        claimed[(claim.workflow_id, claim.kind, unit_name(claim.step, claim.item))].append(claim)
    states = record.states()
    units = _all_units(record)
    ran: dict[tuple[str, str], str] = {}
    for wf_id, state in states.items():
        for name in state.compensations:
            ran.setdefault((wf_id, name), "its compensation was created")
    for unit in units:
        if unit.kind == "compensation":
            ran.setdefault(
                (unit.workflow_id, unit_name(unit.name, unit.index)),
                "its compensation was created",
            )
    for claim in record.claims:
        if claim.kind == "compensation":
            ran.setdefault(
                (claim.workflow_id, unit_name(claim.step, claim.item)),
                "its compensation was claimed",
            )
    for call in record.calls:
        if call.kind == "compensation":
            ran.setdefault(
                (call.workflow_id, unit_name(call.step, call.item)),
                "its compensation called the service",
            )
    for (wf_id, name), how in sorted(ran.items()):
        if not claimed.get((wf_id, "step", name)):
            what = f"{'item' if '[' in name else 'step'} '{name}' was never claimed, but {how}"
            out.append(Violation("claims", wf_id, what))
    return (
        out
        + _first_claims_recorded(states, units, claimed)
        + _ended_attempts_claimed(states, units, claimed)
    )


def check_skips_and_waits(record: RunRecord) -> list[Violation]:
    """Issue 25: a SKIPPED step is never claimed (so never run), never dispatched and never
    compensated; a Wait step is never claimed (no Lambda runs while it waits) and never
    wakes before its time. (That it wakes no later than one look after its time is the watch
    rule's: `check_findable` holds every Wake to `due_at`, and the run's time bound.)"""
    out: list[Violation] = []
    states = record.states()
    claimed = {(c.workflow_id, c.step) for c in record.claims if c.kind == "step"}
    for wf_id, state in sorted(states.items()):
        definition = _definition(record, state)
        for name, rec in sorted(state.steps.items()):
            spec = definition.by_name[name]
            if rec.status is StepStatus.SKIPPED:
                if (wf_id, name) in claimed:
                    out.append(Violation("skips", wf_id, f"SKIPPED step '{name}' was claimed"))
                if rec.dispatched_at is not None or rec.dispatches:
                    out.append(Violation("skips", wf_id, f"SKIPPED step '{name}' was dispatched"))
                if name in state.compensations:
                    out.append(Violation("skips", wf_id, f"SKIPPED step '{name}' was compensated"))
            if spec.is_task:
                continue
            if (wf_id, name) in claimed:
                out.append(Violation("waits", wf_id, f"wait '{name}' was claimed by an agent"))
            if (
                spec.wait is not None  # an approval may end before its deadline: answered
                and rec.status is StepStatus.SUCCEEDED
                and (rec.wake_at is None or (rec.finished_at or 0) < rec.wake_at)
            ):
                out.append(
                    Violation(
                        "waits",
                        wf_id,
                        f"wait '{name}' woke at {rec.finished_at}, before its time {rec.wake_at}",
                    )
                )
    return out


def check_dependencies_first(record: RunRecord) -> list[Violation]:
    """No step is claimed before every step it depends on succeeded: the claim of a step is
    accepted on its own item (its first is implicit, with no item yet), so this rests on
    no message for it existing earlier, which the agents' bounded reads no longer check."""
    out: list[Violation] = []
    states = record.states()
    for claim in record.claims:
        if claim.kind != "step" or claim.workflow_id not in states:
            continue
        state = states[claim.workflow_id]
        spec = record.definitions[state.workflow.wf_type].by_name[claim.step]
        for dep in spec.depends_on:
            rec = state.steps[dep]
            done = rec.status.done and (rec.finished_at or 0) <= claim.at
            if not done:
                out.append(
                    Violation(
                        "claims",
                        claim.workflow_id,
                        f"step '{claim.step}' attempt {claim.attempt} was claimed before "
                        f"'{dep}' succeeded ({rec.status.value}, finished {rec.finished_at})",
                    )
                )
    return out


def _claimable(
    states: Mapping[str, WorkflowState], units: Sequence[StepRecord]
) -> list[StepRecord]:
    """Every unit an agent claims: steps, compensations, map items and their compensations;
    not a map's compensation (`C#<step>`), which its creator opens RUNNING and no agent ever
    claims (its items are claimed)."""
    out = [r for state in states.values() for r in _records(state)]
    return [r for r in [*out, *units] if not (_is_map(r) and r.kind == "compensation")]


def _ended_attempts_claimed(
    states: Mapping[str, WorkflowState],
    units: Sequence[StepRecord],
    claimed: Mapping[tuple[str, str, str], list[Claim]],
) -> list[Violation]:
    """No attempt is spent without running: every attempt a history says ended (a result,
    an error, a timeout) was claimed. A task waiting in a queue, for a paused pool or a paused
    workflow, never burns an attempt. A Wait step's attempt is started by its rest (no agent
    claims it: `check_skips_and_waits`), so its wake is checked there, not here."""
    out = []
    for rec in _claimable(states, units):
        if rec.wake_at is not None:
            continue
        name = unit_name(rec.name, rec.index)
        ran = {c.attempt for c in claimed.get((rec.workflow_id, rec.kind, name), [])}
        for entry in rec.history:
            if entry.get("o") not in NOT_AN_END and int(entry["a"]) not in ran:
                out.append(
                    Violation(
                        "claims",
                        rec.workflow_id,
                        f"{rec.kind} '{name}' attempt {entry['a']} ended "
                        f"({entry.get('o')}) but was never claimed",
                    )
                )
    return out


def _first_claims_recorded(
    states: Mapping[str, WorkflowState],
    units: Sequence[StepRecord],
    claimed: Mapping[tuple[str, str, str], list[Claim]],
) -> list[Violation]:
    """The engine's `first_claimed_at` is the stamp of the first claim that landed."""
    out = []
    for rec in _claimable(states, units):
        name = unit_name(rec.name, rec.index)
        seen = claimed.get((rec.workflow_id, rec.kind, name), [])
        first = seen[0].claimed_at if seen else None
        if rec.first_claimed_at != first:
            out.append(
                Violation(
                    "claims",
                    rec.workflow_id,
                    f"{rec.kind} '{name}' records first_claimed_at="
                    f"{rec.first_claimed_at}, but the first claim that landed wrote {first}",
                )
            )
    return out


def check_inputs_given(record: RunRecord) -> list[Violation]:
    """Every agent function ran only after its attempt's claim landed, with the step's input
    as claimed (an operator's replacement input, once stored, reaches every later attempt)."""
    out = []
    claims = {
        (c.workflow_id, c.kind, unit_name(c.step, c.item), c.attempt): c for c in record.claims
    }
    for (wf_id, kind, step, attempt), tag in sorted(record.given_inputs.items()):
        claim = claims.get((wf_id, kind, step, attempt))
        who = f"{kind} '{step}' attempt {attempt}"
        if claim is None:
            out.append(Violation("inputs", wf_id, f"{who} ran, but no claim of it landed"))
        elif claim.input_tag != tag:
            out.append(
                Violation(
                    "inputs",
                    wf_id,
                    f"{who} was given input {tag!r}, but the step held {claim.input_tag!r} "
                    "when it was claimed",
                )
            )
    return out


# ------------------------------------------------------------------ map steps (issue 24)

_COUNTERS = {"m_succeeded": "SUCCEEDED", "m_failed": "FAILED", "m_cancelled": "CANCELLED"}
_UNIT_PREFIXES = ("S#", "C#")


def _window(image: Mapping[str, Any] | None) -> dict[int, int | None]:
    """A map unit's window as an image holds it: position -> the item it is for (a
    compensation's entry names it; an item's entry is its own index: None)."""
    out: dict[int, int | None] = {}
    for k, v in (image or {}).items():
        if k.startswith("w_"):
            out[int(k[2:])] = int(v[1]) if isinstance(v, list | tuple) else None
    return out


@dataclass
class _Map:
    """One map (a map step's or a map compensation's) as its stream showed it."""

    workflow_id: str
    kind: str
    name: str
    stride: int = 0
    total: int = 0
    window: dict[int, int | None] = field(default_factory=dict)
    entered: dict[int, int] = field(default_factory=dict)  # position -> times entered
    item_of: dict[int, int] = field(default_factory=dict)  # position -> item index
    accounted: dict[int, str] = field(default_factory=dict)  # position -> outcome counted
    running: set[int] = field(default_factory=set)  # item indexes whose unit is RUNNING

    def what(self, index: int | None = None) -> str:
        who = "the compensation of map" if self.kind == "compensation" else "map"
        where = f" item {index}" if index is not None else ""
        return f"{who} '{self.name}'{where}"


class _MapWalk:
    """The table's stream, replayed write by write: every map unit's window and counters,
    and every item unit's status, as each write left them. Ground truth for the map
    invariants (the engine's final counters are checked against it, not trusted)."""

    def __init__(self, record: RunRecord) -> None:
        self.accounting: list[Violation] = []
        self.concurrency: list[Violation] = []
        self.maps: dict[tuple[str, str, str], _Map] = {}
        self.units: dict[tuple[str, str, str, int], Mapping[str, Any]] = {}
        self.definitions = record.definitions
        self.types: dict[str, str] = {}  # workflow -> its type (from its item's writes)
        for change in record.changes:
            item = change.new or change.old
            if item is None:
                continue
            pk, sk = str(item.get("pk", "")), str(item.get("sk", ""))
            if pk.startswith("WF#") and sk == WF_SK and "wf_type" in item:
                self.types[pk[3:]] = str(item["wf_type"])
            elif pk.startswith("WF#") and sk.startswith(_UNIT_PREFIXES):
                if "m_total" in (change.new or {}) or "m_total" in (change.old or {}):
                    self._map_write(pk[3:], sk, change)
            elif pk.startswith("WF#") and sk.startswith(MAP_SHARD_PREFIX):
                # A window shard: a part of its map's window and of its counts.
                kind, name, _ = map_shard_parts(sk)
                self._map_write(pk[3:], ("S#" if kind == "step" else "C#") + name, change)
            elif pk.startswith(MAP_PREFIX) and sk.startswith((ITEM_PREFIX, ITEM_COMP_PREFIX)):
                self._unit_write(pk, sk, change)
                if events_of(change):
                    self.accounting.append(
                        Violation(
                            "map_accounting",
                            pk[len(MAP_PREFIX) :].split("#", 1)[0],
                            f"a write of item unit {pk} {sk} announced events: items emit "
                            "no lifecycle events (their map step does)",
                        )
                    )

    def _map(self, workflow_id: str, kind: str, name: str) -> _Map:
        key = (workflow_id, kind, name)
        if key not in self.maps:
            self.maps[key] = _Map(workflow_id, kind, name, self._stride(workflow_id, kind, name))
        return self.maps[key]

    def _stride(self, workflow_id: str, kind: str, name: str) -> int:
        """How many items of this map may be in flight, from its definition (never from the
        engine's own `m_stride`): MaxConcurrency; a compensation's under REVERSE, one."""
        wf_type = self.types.get(workflow_id)
        definition = self.definitions.get(wf_type) if wf_type else None
        spec = None if definition is None else definition.by_name.get(name)
        if definition is None or spec is None or spec.map is None:
            return 0
        if kind == "compensation" and definition.compensation_order == "REVERSE":
            return 1
        return spec.map.max_concurrency

    def _map_write(self, workflow_id: str, sk: str, change: Change) -> None:
        kind = "step" if sk.startswith("S#") else "compensation"
        m = self._map(workflow_id, kind, sk[2:])
        old, new = change.old or {}, change.new or {}
        if "m_stride" in new and int(new["m_stride"]) != m.stride:
            self._fail(
                "map_concurrency",
                m,
                f"its stride is {new['m_stride']}, but its definition allows {m.stride} "
                "items in flight",
            )
        m.total = int(new.get("m_total", m.total) or 0)
        before, after = _window(old), _window(new)
        removed = sorted(set(before) - set(after))
        added = sorted(set(after) - set(before))
        for position in added:
            m.entered[position] = m.entered.get(position, 0) + 1
            index = after[position]
            m.item_of[position] = position if index is None else index
            if m.entered[position] > 1:
                self._fail("map_accounting", m, f"entered position {position} twice")
        deltas = {c: int(new.get(c, 0) or 0) - int(old.get(c, 0) or 0) for c in _COUNTERS}
        if any(d < 0 for d in deltas.values()):
            self._fail("map_accounting", m, f"a counter went down: {deltas}")
        moved = sum(d for d in deltas.values() if d > 0)
        if moved != len(removed):
            self._fail(
                "map_accounting",
                m,
                f"one write counted {moved} item(s) but took {len(removed)} out of the window "
                f"({removed}): an item counted without its window entry, or the reverse",
            )
        for position in removed:
            if position in m.accounted:
                self._fail("map_accounting", m, f"position {position} counted twice")
            index = m.item_of.get(position, position)
            unit = self.units.get((workflow_id, kind, m.name, index)) or {}
            status = str(unit.get("status", "missing"))
            m.accounted[position] = status
            if status not in ("SUCCEEDED", "FAILED", "CANCELLED"):
                self._fail("map_accounting", m, f"counted item {index} while its unit was {status}")
            elif len(removed) == 1 and deltas.get(_counter(status), 0) != 1:
                self._fail(
                    "map_accounting",
                    m,
                    f"counted item {index} as {[c for c, d in deltas.items() if d]}, but its "
                    f"unit is {status}",
                )
        # The write's own image holds its part of the window (all of it, or one shard's).
        m.window = {p: v for p, v in m.window.items() if p not in removed}
        m.window.update({p: after[p] for p in added})
        window = m.window
        if m.stride and len(window) > m.stride:
            self._fail(
                "map_concurrency",
                m,
                f"{len(window)} items in its window (MaxConcurrency {m.stride}): {sorted(window)}",
            )
        if m.stride and len({p % m.stride for p in window}) < len(window):
            self._fail("map_concurrency", m, f"two items of one stripe in flight: {sorted(window)}")

    def _unit_write(self, pk: str, sk: str, change: Change) -> None:
        workflow_id, name, index, kind = map_item_of(pk, sk)
        old, new = change.old or {}, change.new or {}
        self.units[(workflow_id, kind, name, index)] = new
        m = self._map(workflow_id, kind, name)
        position = index if kind == "step" else new.get("position", old.get("position"))
        changed = (old.get("status"), old.get("attempt")) != (new.get("status"), new.get("attempt"))
        if position is not None and int(position) in m.accounted and changed:
            self._fail(
                "map_accounting",
                m,
                f"item {index} changed after it was counted "
                f"({old.get('status')} -> {new.get('status')}): it ended twice",
                index,
            )
        claim = new.get("status") == "RUNNING" and (
            old.get("status") != "RUNNING" or old.get("attempt") != new.get("attempt")
        )
        if (claim or not old) and (position is None or int(position) not in m.window):
            what = "claimed" if claim else f"written ({new.get('status')})"
            self._fail(
                "map_concurrency",
                m,
                f"{what} while it was not in its map's window {sorted(m.window)}",
                index,
            )
        if new.get("status") == "RUNNING":
            m.running.add(index)
        else:
            m.running.discard(index)
        if m.stride and len(m.running) > m.stride:
            self._fail(
                "map_concurrency",
                m,
                f"{len(m.running)} items running at once (MaxConcurrency {m.stride}): "
                f"{sorted(m.running)}",
            )

    def _fail(self, invariant: str, m: _Map, text: str, index: int | None = None) -> None:
        target = self.accounting if invariant == "map_accounting" else self.concurrency
        target.append(Violation(invariant, m.workflow_id, f"{m.what(index)}: {text}"))


def _counter(status: str) -> str:
    return {v: k for k, v in _COUNTERS.items()}.get(status, "")


def tolerance_exceeded(
    failed: int, total: int, count: int | None, percentage: float | None
) -> bool:
    """ASL's rule, written out again (not the engine's): a tolerance left out does not apply;
    with neither, any failure is too many."""
    if count is None and percentage is None:
        return failed > 0
    return (count is not None and failed > count) or (
        percentage is not None and failed * 100 > percentage * total
    )


def check_map_accounting(record: RunRecord) -> list[Violation]:
    """Every item ends exactly once in its map's accounting (issue 24): from the table's
    stream, a window entry is entered once and taken out once, by the write that counts its
    item, with the outcome its unit ended with, and an item unit never changes after it was
    counted. From the final table: a map whose step ended has an empty window, every item it
    sent was counted, its counters equal its items' terminal units (no item counted twice,
    none left unaccounted), its verdict agrees with its tolerance and its output lists the
    items' outputs in item order; a terminal workflow has no item still in progress; items
    announce no events."""
    walk = _MapWalk(record)
    out = list(walk.accounting)
    states = record.states()
    units = item_units(record.items)
    for wf_id, state in states.items():
        definition = _definition(record, state)
        for rec in _records(state):
            if not _is_map(rec):
                continue
            out += _map_end_problems(record, definition, rec, walk, units)
        for (w, kind, name), by_index in units.items():
            if w != wf_id or not state.workflow.status.terminal:
                continue
            for index, unit in sorted(by_index.items()):
                if unit.status in IN_PROGRESS:
                    out.append(
                        Violation(
                            "map_accounting",
                            wf_id,
                            f"{state.workflow.status.value} but {kind} "
                            f"'{unit_name(name, index)}' is still {unit.status.value}",
                        )
                    )
    return out


def _map_end_problems(
    record: RunRecord, definition: Definition, rec: StepRecord, walk: _MapWalk, units: Units
) -> list[Violation]:
    m = rec.fanout
    assert m is not None
    wf_id = rec.workflow_id
    seen = walk.maps.get((wf_id, rec.kind, rec.name))
    what = f"{'the compensation of ' if rec.kind == 'compensation' else ''}map '{rec.name}'"
    out: list[str] = []
    mine = units.get((wf_id, rec.kind, rec.name), {})
    entered = {} if seen is None else seen.item_of
    ever = set(entered.values())
    out += [f"item {i} has a unit but never entered the window" for i in sorted(set(mine) - ever)]
    if rec.status.terminal:
        if m.window:
            out.append(f"{rec.status.value} with items still in its window: {sorted(m.window)}")
        counted = {} if seen is None else seen.accounted
        lost = sorted(p for p in entered if p not in counted)
        if lost:
            out.append(f"{rec.status.value} but positions {lost} were sent and never counted")
        by_status = {
            "m_succeeded": sum(1 for s in counted.values() if s == "SUCCEEDED"),
            "m_failed": sum(1 for s in counted.values() if s == "FAILED"),
            "m_cancelled": sum(1 for s in counted.values() if s == "CANCELLED"),
        }
        counters = {"m_succeeded": m.succeeded, "m_failed": m.failed, "m_cancelled": m.cancelled}
        if counters != by_status:
            out.append(f"its counters are {counters}, its counted items' units {by_status}")
        if m.accounted > m.total:
            out.append(f"{m.accounted} items counted, more than its {m.total}")
    spec = definition.by_name[rec.name].map if rec.kind == "step" else None
    if spec is not None and m.status in ("SUCCEEDED", "FAILED"):
        over = tolerance_exceeded(
            m.failed, m.total, spec.tolerated_failure_count, spec.tolerated_failure_percentage
        )
        if m.status == "SUCCEEDED" and (over or m.accounted != m.total):
            out.append(
                f"decided SUCCEEDED with {m.failed} of {m.total} failed, {m.accounted} counted"
            )
        if m.status == "FAILED" and not over:
            out.append(f"decided FAILED with {m.failed} of {m.total} failed, within tolerance")
    if rec.kind == "step" and rec.status is StepStatus.SUCCEEDED:
        output = record.value(rec.output)
        ok = [
            mine.get(i) is not None and mine[i].status is StepStatus.SUCCEEDED
            for i in range(m.total)
        ]
        if not isinstance(output, list) or len(output) != m.total:
            out.append(f"its output is not a list of its {m.total} items' outputs")
        elif any((o is not None) != k for o, k in zip(output, ok, strict=True)):
            out.append("its output does not hold exactly its succeeded items' outputs")
    return [Violation("map_accounting", wf_id, f"{what}: {text}") for text in out]


def check_map_concurrency(record: RunRecord) -> list[Violation]:
    """At most MaxConcurrency items of a map are in flight at once (issue 24): from the
    table's stream, after every write a map's window holds at most its stride (MaxConcurrency;
    a map compensation's: 1 under REVERSE), at most one item per stripe; no item unit is
    created or claimed while its item is outside the window; and at no moment are more item
    units RUNNING than the stride."""
    return _MapWalk(record).concurrency


def check_item_compensation(record: RunRecord) -> list[Violation]:
    """Every item that may have acted is compensated when its workflow unwinds, and no other
    (issue 24): from the claims that landed, under `When: ATTEMPTED` an item claimed at least
    once (under `When: SUCCEEDED` one that succeeded) has, in a COMPENSATED or CANCELLED
    workflow, a compensation that SUCCEEDED; no item compensation is created, claimed or
    calls the service for any other item; each item's undo comes after its effect; under
    `CompensationOrder: REVERSE` the items are undone one at a time, in reverse order of
    completion (a success by its `finished_at`, an ambiguous item by its first claim; later
    first, ties by the higher index), each claimed only after the one before it succeeded."""
    out: list[Violation] = []
    units = item_units(record.items)
    claims = _ItemClaims(record)
    for state in record.states().values():
        definition = _definition(record, state)
        for spec in definition.steps:
            if spec.map is not None and spec.compensation is not None:
                out += _item_compensation_problems(record, state, spec, units, claims)
    for effect in record.effects:
        undo = record.undone.get(effect.key, effect.seq)
        if effect.kind == "step" and effect.item is not None and undo < effect.seq:
            out.append(
                Violation(
                    "item_compensation",
                    effect.workflow_id,
                    f"item '{unit_name(effect.step, effect.item)}' was undone (call "
                    f"#{undo}) before its effect was applied (call #{effect.seq})",
                )
            )
    return out


class _ItemClaims:
    """The first claim that landed of each map item and of each item compensation, and what
    touched each item compensation (created, claimed, a service call)."""

    def __init__(self, record: RunRecord) -> None:
        self.item: dict[tuple[str, str, int], Claim] = {}
        self.undo: dict[tuple[str, str, int], Claim] = {}
        for c in record.claims:
            if c.item is not None:
                target = self.item if c.kind == "step" else self.undo
                target.setdefault((c.workflow_id, c.step, c.item), c)
        self.calls: dict[tuple[str, str], set[int]] = defaultdict(set)
        for call in record.calls:
            if call.kind == "compensation" and call.item is not None:
                self.calls[(call.workflow_id, call.step)].add(call.item)

    def touched(self, wf_id: str, name: str, comps: Mapping[int, StepRecord]) -> dict[int, str]:
        out = {i: "its compensation was created" for i in comps}
        for w, s, i in self.undo:
            if (w, s) == (wf_id, name):
                out.setdefault(i, "its compensation was claimed")
        for i in self.calls.get((wf_id, name), ()):
            out.setdefault(i, "its compensation called the service")
        return out


def _item_compensation_problems(
    record: RunRecord, state: WorkflowState, spec: Any, units: Units, claims: _ItemClaims
) -> list[Violation]:
    wf_id, name, when = state.workflow.workflow_id, spec.name, spec.compensation.when
    items = units.get((wf_id, "step", name), {})
    if when == "ATTEMPTED":
        acted = {i for (w, s, i) in claims.item if (w, s) == (wf_id, name)}
    else:
        acted = {i for i, u in items.items() if u.status is StepStatus.SUCCEEDED}
    comps = units.get((wf_id, "compensation", name), {})
    out = [
        f"item '{unit_name(name, i)}' may not have acted (When: {when}), but {how}"
        for i, how in sorted(claims.touched(wf_id, name, comps).items())
        if i not in acted
    ]
    status = state.workflow.status
    if status in (WorkflowStatus.COMPENSATED, WorkflowStatus.CANCELLED):
        for i in sorted(acted):
            comp = comps.get(i)
            if comp is None or comp.status is not StepStatus.SUCCEEDED:
                now = comp.status.value if comp is not None else "missing"
                out.append(
                    f"{status.value} but item '{unit_name(name, i)}', which may have acted "
                    f"(When: {when}), was never undone: its compensation is {now}"
                )
    definition = _definition(record, state)
    out += _items_undone_in_order(definition, state, name, items, comps, acted, claims)
    return [Violation("item_compensation", wf_id, text) for text in out]


def _items_undone_in_order(
    definition: Definition,
    state: WorkflowState,
    name: str,
    items: Mapping[int, StepRecord],
    comps: Mapping[int, StepRecord],
    acted: set[int],
    claims: _ItemClaims,
) -> list[str]:
    """REVERSE: the item compensations were claimed one at a time, in reverse order of
    completion, each after the one before it succeeded (PARALLEL: in any order, at most
    MaxConcurrency at once, which `check_map_concurrency` checks on the compensation's map)."""
    if definition.compensation_order != "REVERSE":
        return []
    wf_id = state.workflow.workflow_id

    def completed(i: int) -> int:
        unit = items.get(i)
        if unit is not None and unit.status is StepStatus.SUCCEEDED and unit.finished_at:
            return unit.finished_at
        claim = claims.item.get((wf_id, name, i))
        return claim.claimed_at if claim is not None else 0

    order = sorted(acted, key=lambda i: (completed(i), i), reverse=True)
    out = []
    for before, after in itertools.pairwise(order):
        started = claims.undo.get((wf_id, name, after))
        if started is None:
            continue
        comp = comps.get(before)
        done = (
            comp.finished_at if comp is not None and comp.status is StepStatus.SUCCEEDED else None
        )
        if done is None or started.at < done:
            out.append(
                f"the compensation of item '{unit_name(name, after)}' was claimed at "
                f"{started.at}, but that of '{unit_name(name, before)}' (completed later, "
                f"undone first under REVERSE) succeeded {'never' if done is None else f'at {done}'}"
            )
    return out


# -------------------------------------------------------------------------------- pauses

# The operator actions that end a pause, and the status each leads to.
OPERATOR_EXITS = {"resume": "RUNNING", "compensate": "COMPENSATING", "cancel": "CANCELLING"}
SUPERVISORS = ("supA", "supB")


def check_pause_respected(record: RunRecord) -> list[Violation]:
    """A PAUSED workflow leaves PAUSED only by an operator's resume, compensate or cancel (the
    client API), or by a supervisor's pause timeout, never before PauseTimeoutSeconds: no
    agent, callback or late result flips it back (temporalio/temporal#10239). A pause for
    the reason `operator` is an operator's pause."""
    out = []
    states = record.states()
    began: dict[str, StatusWrite] = {}
    for w in record.status_writes:
        state = states.get(w.workflow_id)
        who = f"{w.role} ({w.label or 'no operator action'})"
        if w.after == "PAUSED" and w.before != "PAUSED":
            began[w.workflow_id] = w
            if w.pause_reason == "operator" and (w.role, w.label) != ("client", "pause"):
                out.append(Violation("paused", w.workflow_id, f"paused 'by an operator' by {who}"))
        if w.before != "PAUSED" or w.after == "PAUSED":
            continue
        by_operator = w.role == "client" and OPERATOR_EXITS.get(w.label) == w.after
        by_timeout = (
            w.role in SUPERVISORS and w.after == "COMPENSATING" and w.error_type == PAUSE_TIMEOUT
        )
        if not (by_operator or by_timeout):
            out.append(
                Violation(
                    "paused",
                    w.workflow_id,
                    f"PAUSED -> {w.after} by {who}: only an operator's resume, compensate or "
                    "cancel, or the pause timeout, may end a pause",
                )
            )
        pause = began.get(w.workflow_id)
        if by_timeout and state is not None and pause is not None:
            timeout = _definition(record, state).pause_timeout_seconds
            if timeout is None or pause.paused_at is None:
                due = None
            else:
                due = pause.paused_at + timeout * 1000
            if due is None or w.at < due:
                out.append(
                    Violation(
                        "paused",
                        w.workflow_id,
                        f"the pause timeout struck at {w.at}; it was due at {due}",
                    )
                )
    return out


def check_paused_starts_nothing(record: RunRecord) -> list[Violation]:
    """While a workflow is PAUSED nothing new starts for it: no task message is sent and no
    attempt is claimed, unless the sender or claimer decided on a read of the workflow from
    before the write that paused it (the documented race: its latest consistent read of the
    workflow, or the start that created it, came first). Anything decided on a read that saw
    the pause is a violation, whoever sent it."""
    out = []
    for s in record.sent:
        if not decided_before_pause(s.paused_by, s.read):
            out.append(
                Violation(
                    "paused",
                    s.workflow_id,
                    f"{s.role} ({s.label or 'no operator action'}) sent {s.kind} "
                    f"{unit_name(s.step, s.item)}#{s.attempt} while the workflow was PAUSED (since version "
                    f"{s.paused_by}), deciding on a read of version {s.read}",
                )
            )
    for c in record.claims:
        if not decided_before_pause(c.paused_by, c.read):
            out.append(
                Violation(
                    "paused",
                    c.workflow_id,
                    f"{c.kind} {unit_name(c.step, c.item)}#{c.attempt} was claimed while the "
                    "workflow was PAUSED "
                    f"(since version {c.paused_by}) on a read of version {c.read}",
                )
            )
    return out


def check_paused_pools_wait(record: RunRecord) -> list[Violation]:
    """While its pool is paused, a queued task's wait is neither a lost message nor a
    timeout: nobody sends it again, except an operator's resume of its workflow (which sends
    every queued step) or a supervisor whose sweep read the pools before the pause."""
    return [
        Violation(
            "pools",
            r.workflow_id,
            f"{r.role} ({r.label or 'no operator action'}) sent {r.kind} "
            f"{unit_name(r.step, r.item)}#{r.attempt} "
            f"again while its pool '{r.pool}' was paused (since version {r.pool_paused_by}), "
            f"having read the pools at version {r.pool_read}",
        )
        for r in record.redispatches
        if r.pool_paused_by is not None
        and r.label != "resume"
        and not decided_before_pause(r.pool_paused_by, r.pool_read)
    ]


# ------------------------------------------------------------------ the circuit breaker

# The breaker's own moves (`shepherd.decisions.circuit.decide`); an operator's forced mode may
# move it any way.
LEGAL_CIRCUIT_MOVES = {
    ("closed", "open"),
    ("open", "half_open"),
    ("half_open", "closed"),
    ("half_open", "open"),
}


def check_open_circuit_claims_nothing(record: RunRecord) -> list[Violation]:
    """No attempt is consumed while its pool's circuit is open: a claim that lands while the
    table records the circuit `open` was decided on a read from before the write that opened
    it (the documented race, as for a pool's pause: a breaker state cached for a second, a
    slow claim; a probe taken in the half-open stretch before it reopened is such a read);
    one that lands while `half_open` took a probe, or decided while the circuit was still
    closed. Attempts in flight when it opened end normally (they were claimed before)."""
    out = []
    states = record.states()
    for c in record.claims:
        if c.circuit == "closed" or _opens_a_map(record, states, c):
            continue
        seen = [v for v in (c.circuit_read, c.circuit_probe) if v is not None]
        decided = max(seen) if seen else None
        if c.circuit == "open":
            opened = c.circuit_entered_by
            if decided is not None and opened is not None and decided < opened:
                continue
            why = f"its pool '{c.pool}' circuit was open (since version {opened})"
        else:
            if c.circuit_probe is not None:
                continue
            left = c.circuit_left_closed_by
            if c.circuit_read is not None and left is not None and c.circuit_read < left:
                continue
            why = f"its pool '{c.pool}' circuit was half-open and it took no probe"
        out.append(
            Violation(
                "circuit",
                c.workflow_id,
                f"{c.kind} {unit_name(c.step, c.item)}#{c.attempt} was claimed while {why}, "
                "deciding on a read "
                f"of version {decided}",
            )
        )
    return out


def _opens_a_map(record: RunRecord, states: Mapping[str, WorkflowState], c: Claim) -> bool:
    """A map step's own claim opens its map: it runs no agent, takes no rate-limit token and
    consults no breaker (docs/architecture.md: its items do, each claim of its own)."""
    state = states.get(c.workflow_id)
    if state is None or c.item is not None or c.kind != "step":
        return False
    spec = record.definitions[state.workflow.wf_type].by_name.get(c.step)
    return spec is not None and spec.map is not None


def check_circuit_moves(record: RunRecord) -> list[Violation]:
    """From the table's stream: a pool's circuit moves only closed -> open -> half_open ->
    closed | open, unless an operator forced it (`circuit_mode` open or closed), and each
    move records itself, as it was, at the end of the pool's `circuit_history`."""
    out = []
    for change in record.changes:
        new = change.new
        if new is None or new.get("pk") != POOLS_PK:
            continue
        was = (change.old or {}).get("circuit", "closed")
        now = new.get("circuit", "closed")
        if was == now:
            continue
        forced = new.get("circuit_mode", "auto") != "auto"
        if (was, now) not in LEGAL_CIRCUIT_MOVES and not forced:
            out.append(
                Violation("circuit", None, f"pool '{new['sk']}': circuit moved {was} -> {now}")
            )
        last = (new.get("circuit_history") or [{}])[-1]
        if (last.get("from"), last.get("to")) != (was, now):
            out.append(
                Violation(
                    "circuit",
                    None,
                    f"pool '{new['sk']}': circuit moved {was} -> {now}, its history's last "
                    f"entry says {last.get('from')} -> {last.get('to')}",
                )
            )
    return out


# ----------------------------------------------------------------- the payload claim check


def check_payloads_resolve(record: RunRecord) -> list[Violation]:
    """Every reference an item holds names an object in the bucket with its size and sha256
    (an object a lost write left behind is allowed: nothing references it). A reference to a
    missing object would be a silent loss of a payload."""
    out: list[Violation] = []
    units = _all_units(record)
    pages: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for item in record.items:  # a map's items pages (its order pages hold indexes, no payload)
        pk = str(item.get("pk", ""))
        if pk.startswith(MAP_PREFIX) and item.get("sk") == "P":
            pages[pk[len(MAP_PREFIX) :].split("#", 1)[0]].append((f"items page {pk}", item["v"]))
    for wf_id, state in record.states().items():
        stored = [("input", state.workflow.input), *pages.get(wf_id, [])]
        for rec in [*_records(state), *(u for u in units if u.workflow_id == wf_id)]:
            for name in ("output", "details", "input"):
                what = f"{rec.kind} '{unit_name(rec.name, rec.index)}' {name}"
                stored.append((what, getattr(rec, name)))
        for what, text in stored:
            if ref_of(text) is None:
                continue
            try:
                record.value(text)
            except PayloadMissing as exc:
                out.append(Violation("payload", wf_id, f"{what}: {exc}"))
    return out


# ------------------------------------------------------------ approvals and schedules


ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass
class _Ending:
    """A change that ended an approval's WAITING attempt (or ended it once more)."""

    how: str  # approved | rejected | timed out | cancelled | <another status>
    at: int | None  # the ending's `finished_at`
    decision: dict[str, Any] | None  # the decision this change recorded, if any
    wake_at: int | None  # the deadline of the attempt it ended


def _ends(history: Any, attempt: int) -> int:
    """How many entries of a step's history end `attempt`."""
    return sum(
        1 for h in history or () if int(h.get("a", 0)) == attempt and h.get("o") not in NOT_AN_END
    )


def _ending(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Ending:
    status = str(new.get("status"))
    error = (loads(new.get("error")) or {}).get("type") if status == "FAILED" else None
    how = {
        "SUCCEEDED": "approved",
        "CANCELLED": "cancelled",
    }.get(status, {"Rejected": "rejected", "ApprovalTimedOut": "timed out"}.get(error or "", ""))
    decision = None
    if new.get("decision") is not None and new.get("decision") != old.get("decision"):
        decision = loads(new["decision"])
    return _Ending(
        how or f"{status} ({error})",
        new.get("finished_at"),
        decision,
        old.get("wake_at"),
    )


def approval_principals(owner: str, definition: Definition, step: str) -> tuple[str, ...]:
    """Who may answer `step`'s approval: the workflow's owner, then its `Approvers` (an entry
    without an ARN names the local stack's caller of that name, IAM user `<name>` of moto's
    account: docs/definitions.md, Approval)."""
    spec = definition.by_name[step].approval
    named = spec.approvers if spec else ()
    local = "arn:aws:iam::000000000000:user/{}"
    approvers = (a if a.startswith("arn:") else local.format(a) for a in named)
    return tuple(dict.fromkeys((owner, *approvers)))


def _approval_history(
    record: RunRecord, states: Mapping[str, WorkflowState]
) -> tuple[
    dict[tuple[str, str, int], int], dict[tuple[str, str, int], list[_Ending]], list[Violation]
]:
    """From the table's stream: how often each approval attempt started WAITING, every change
    that ended it (left WAITING, or added an end to its history), and decisions recorded on a
    step that was not waiting."""
    starts: dict[tuple[str, str, int], int] = defaultdict(int)
    endings: dict[tuple[str, str, int], list[_Ending]] = defaultdict(list)
    out: list[Violation] = []
    for change in record.changes:
        old, new = change.old or {}, change.new or {}
        pk, sk = str(new.get("pk", "")), str(new.get("sk", ""))
        if not sk.startswith("S#") or pk[3:] not in states:
            continue
        wf_id, name = pk[3:], sk[2:]
        definition = _definition(record, states[wf_id])
        if name not in definition.by_name or definition.by_name[name].approval is None:
            continue
        was, now = old.get("status"), new.get("status")
        if now == "WAITING" and (was != "WAITING" or old.get("attempt") != new.get("attempt")):
            starts[(wf_id, name, int(new["attempt"]))] += 1
        attempt = int(old.get("attempt") or 0)
        added = _ends(new.get("history"), attempt) > _ends(old.get("history"), attempt)
        # An end stamps `finished_at`: one written again on an ended attempt ends it again.
        again = (
            was in ENDED
            and new.get("attempt") == old.get("attempt")
            and new.get("finished_at") != old.get("finished_at")
        )
        if (was == "WAITING" and now != "WAITING") or added or again:
            endings[(wf_id, name, attempt)].append(_ending(old, new))
            if was != "WAITING":
                out.append(
                    Violation(
                        "approvals",
                        wf_id,
                        f"approval '{name}' attempt {attempt} ended again ({now}) while "
                        f"{was}, not WAITING",
                    )
                )
        elif was != "WAITING" and new.get("decision") != old.get("decision") and now != "WAITING":
            out.append(
                Violation(
                    "approvals",
                    wf_id,
                    f"approval '{name}' recorded a decision ({new.get('decision')}) while {was}",
                )
            )
    return starts, endings, out


def approval_endings(record: RunRecord) -> dict[tuple[str, str, int], list[str]]:
    """(workflow, step, attempt) -> how each change that ended it ended it (for the report)."""
    _, endings, _ = _approval_history(record, record.states())
    return {key: [e.how for e in ends] for key, ends in endings.items()}


def answered_after_deadline(record: RunRecord) -> int:
    """Approval attempts a person decided at or after their deadline: the supervisor's
    timeout lost the race (for the report)."""
    _, endings, _ = _approval_history(record, record.states())
    return sum(
        1
        for ends in endings.values()
        for e in ends
        if e.how in ("approved", "rejected") and e.wake_at is not None and (e.at or 0) >= e.wake_at
    )


def check_approvals(record: RunRecord) -> list[Violation]:
    """Issue 25: an approval ends exactly once. Every attempt that rested WAITING is ended by
    exactly one write (an approve, a reject, its timeout, a cancel), never before its deadline
    by the timeout, and its history holds one entry for it (none for a cancel); a decision
    names who answered, and only the owner or an `Approvers` principal ever does; a person
    told `ok` won (at most one per attempt, and the attempt ended with their verdict); every
    decision recorded comes from a call that could have won (told `ok`, or failed not knowing);
    anyone else is told the workflow does not exist and writes nothing."""
    states = record.states()
    starts, endings, out = _approval_history(record, states)
    for (wf_id, name, attempt), n in sorted(starts.items()):
        ends = endings.get((wf_id, name, attempt), [])
        what = f"approval '{name}' attempt {attempt}"
        if n > 1:
            out.append(Violation("approvals", wf_id, f"{what} started WAITING {n} times"))
        if len(ends) > 1:
            hows = [e.how for e in ends]
            out.append(Violation("approvals", wf_id, f"{what} ended {len(ends)} times: {hows}"))
        if not ends and states[wf_id].workflow.status.terminal:
            out.append(Violation("approvals", wf_id, f"{what} never ended"))
        rec = states[wf_id].steps.get(name)
        kept = [int(h["a"]) for h in rec.history] if rec is not None else []
        if ends and rec is not None and kept and attempt >= min(kept):
            want = 0 if ends[0].how == "cancelled" else 1
            if _ends(rec.history, attempt) != want:
                out.append(
                    Violation(
                        "approvals",
                        wf_id,
                        f"{what} ended ({ends[0].how}) but its history has "
                        f"{_ends(rec.history, attempt)} entries for it",
                    )
                )
    for (wf_id, name, attempt), ends in sorted(endings.items()):
        owner = states[wf_id].workflow.owner
        allowed = approval_principals(owner, _definition(record, states[wf_id]), name)
        for end in ends:
            out += _ending_problems(record, wf_id, name, attempt, end, allowed)
    return out + _calls_problems(record, states, endings)


def _ending_problems(
    record: RunRecord, wf_id: str, name: str, attempt: int, end: _Ending, allowed: Sequence[str]
) -> list[Violation]:
    what = f"approval '{name}' attempt {attempt}"
    out = []
    if end.how == "timed out" and (end.at is None or end.wake_at is None or end.at < end.wake_at):
        out.append(
            Violation("approvals", wf_id, f"{what} timed out at {end.at}, before {end.wake_at}")
        )
    if end.how not in ("approved", "rejected"):
        return out
    decision = end.decision or {}
    by, verdict = decision.get("by"), decision.get("verdict")
    if decision.get("at") != end.at or verdict != end.how:
        out.append(
            Violation(
                "approvals",
                wf_id,
                f"{what} was {end.how} at {end.at}, but the decision it records is {decision}",
            )
        )
    if by not in allowed:
        out.append(
            Violation(
                "approvals",
                wf_id,
                f"{what} was {end.how} by {by!r}, who may not answer it (only {list(allowed)})",
            )
        )
    # The decision came from an answer that could have won: told `ok`, or failed unknowing.
    if not any(
        c.workflow_id == wf_id
        and c.step == name
        and c.principal == by
        and c.approve == (end.how == "approved")
        and c.started <= (end.at or 0) <= c.ended
        and (c.outcome == "ok" or c.outcome.startswith("error"))
        for c in record.approval_calls
    ):
        out.append(
            Violation(
                "approvals",
                wf_id,
                f"{what} was {end.how} by {by!r} at {end.at}, but no answer of theirs that "
                "could have won was under way then (a loser was told it lost, wrongly?)",
            )
        )
    return out


def _calls_problems(
    record: RunRecord,
    states: Mapping[str, WorkflowState],
    endings: Mapping[tuple[str, str, int], list[_Ending]],
) -> list[Violation]:
    out = []
    winners: dict[tuple[str, str, int], list[ApprovalCall]] = defaultdict(list)
    for c in record.approval_calls:
        state = states.get(c.workflow_id)
        if state is None:
            continue
        allowed = approval_principals(state.workflow.owner, _definition(record, state), c.step)
        who = f"{c.principal!r} ({'approve' if c.approve else 'reject'} '{c.step}')"
        if c.principal not in allowed:
            if c.outcome in ("ok", "not_pending") or c.writes:
                out.append(
                    Violation(
                        "approvals",
                        c.workflow_id,
                        f"{who} may not answer, yet was told {c.outcome} and made {c.writes} "
                        "write(s): anyone else must be told the workflow does not exist",
                    )
                )
            continue
        if c.outcome == "not_found":
            out.append(Violation("approvals", c.workflow_id, f"{who} may answer, told not found"))
        if c.outcome != "ok":
            continue
        key = (c.workflow_id, c.step, c.attempt or 0)
        winners[key].append(c)
        ends = endings.get(key, [])
        decided = [e.decision or {} for e in ends if e.how in ("approved", "rejected")]
        verdict = "approved" if c.approve else "rejected"
        if not any(d.get("by") == c.principal and d.get("verdict") == verdict for d in decided):
            out.append(
                Violation(
                    "approvals",
                    c.workflow_id,
                    f"{who} was told it decided attempt {c.attempt}, but that attempt ended "
                    f"{[e.how for e in ends]} by {[d.get('by') for d in decided]}",
                )
            )
    for (wf_id, name, attempt), calls in sorted(winners.items()):
        if len(calls) > 1:
            names = [c.principal for c in calls]
            out.append(
                Violation(
                    "approvals",
                    wf_id,
                    f"approval '{name}' attempt {attempt}: {len(calls)} answers were told they "
                    f"decided it ({names})",
                )
            )
    return out


def inbox_problems(items: Sequence[Item], definition: Definition) -> list[str]:
    """The approval inbox is exact for one workflow's partition: each approval step's inbox
    items (`A#<step>#<principal hash>`) carry `inbox_pk` exactly while the step is WAITING,
    then for the attempt they were written for (its request time and deadline, each principal
    who may answer under its own shard), and no item is kept for anyone else."""
    by_sk = {str(i["sk"]): i for i in items}
    wf = by_sk.get("#WF")
    if wf is None:
        return []
    wf_id = str(wf["pk"])[3:]
    out = []
    for spec in definition.steps:
        if spec.approval is None:
            continue
        name = spec.name
        principals = approval_principals(str(wf.get("owner")), definition, name)
        expected = {inbox_item_sk(name, p): p for p in principals}
        step = by_sk.get(f"S#{name}") or {}
        waiting = step.get("status") == "WAITING"
        prefix = f"A#{name}#"
        for sk, item in sorted(by_sk.items()):
            if not sk.startswith(prefix):
                continue
            if sk not in expected:
                out.append(f"'{name}' has an inbox item {sk} for nobody who may answer")
                continue
            listed = "inbox_pk" in item or "inbox_sk" in item
            if listed and not waiting:
                out.append(
                    f"'{name}' is {step.get('status', 'PENDING')} but is still listed in "
                    f"{expected[sk]!r}'s inbox"
                )
        if not waiting:
            continue
        requested, due = step.get("claimed_at"), step.get("wake_at")
        for sk, principal in expected.items():
            item = by_sk.get(sk) or {}
            want = {
                "inbox_pk": inbox_pk(principal, inbox_shard(wf_id)),
                "inbox_sk": inbox_sk(int(requested or 0), wf_id, name),
                "requested_at": requested,
                "approval_due_at": due,
            }
            wrong = {k: item.get(k) for k, v in want.items() if item.get(k) != v}
            if wrong:
                out.append(
                    f"'{name}' waits (attempt {step.get('attempt')}) but {principal!r}'s inbox "
                    f"item is not listed for it: {wrong}"
                )
    return out


def check_inbox(record: RunRecord) -> list[Violation]:
    """At the end of the run (the simulator also checks it every simulated second): the
    approval inbox lists exactly the approvals that wait (`inbox_problems`)."""
    by_pk: dict[str, list[Item]] = defaultdict(list)
    for item in record.items:
        if str(item.get("pk", "")).startswith("WF#"):
            by_pk[item["pk"]].append(item)
    out = []
    for pk in sorted(by_pk):
        items = by_pk[pk]
        wf = next((i for i in items if i["sk"] == "#WF"), None)
        if wf is None:
            continue
        definition = record.definitions[str(wf["wf_type"])]
        out += [Violation("inbox", pk[3:], p) for p in inbox_problems(items, definition)]
    return out


def check_schedule_firings(record: RunRecord) -> list[Violation]:
    """A schedule's firing delivered more than once starts one workflow: every delivery with
    one key that started something got the same workflow, at most one was told it created
    it, and the table holds exactly one workflow with that key (none if no delivery got
    through and none landed)."""
    out = []
    keys = sorted({(f.owner, f.key) for f in record.firings})
    started: dict[tuple[str, str], list[str]] = defaultdict(list)
    for item in record.items:
        if item.get("sk") == "#WF" and item.get("idempotency_key") is not None:
            started[(str(item.get("owner")), str(item["idempotency_key"]))].append(
                str(item["pk"])[3:]
            )
    for owner, key in keys:
        firings = [f for f in record.firings if (f.owner, f.key) == (owner, key)]
        ok = [f for f in firings if f.outcome == "ok"]
        ids = sorted({str(f.workflow_id) for f in ok})
        made = started.get((owner, key), [])
        created = sum(1 for f in ok if f.created)
        problems = []
        if len(made) > 1 or (ok and len(made) != 1):
            problems.append(f"{len(made)} workflows in the table ({made})")
        if len(ids) > 1 or (ids and made and ids != made[:1]):
            problems.append(f"its deliveries were given workflows {ids}")
        if created > 1:
            problems.append(f"{created} deliveries were told they created the workflow")
        if problems:
            where = made[0] if made else None
            out.append(
                Violation(
                    "schedule",
                    where,
                    f"firing {key} delivered {len(firings)}x: " + "; ".join(problems),
                )
            )
    return out


# ------------------------------------------------------- child workflows (issue 24)


_TERMINAL = {s.value for s in WorkflowStatus if s.terminal}
UnitKey = tuple[str, str, int | None]  # (parent, step, item)


@dataclass
class _Child:
    """A child workflow as the table's stream saw it: which unit of its parent, and the
    attempt that unit was in as the child's item was created."""

    workflow_id: str
    unit: UnitKey
    attempt: int
    created_at: int  # the index of its creating change in the stream


def _unit_key(item: Mapping[str, Any]) -> UnitKey | None:
    """The forward unit a table item is (a step's `S#`, a map item's `I#`), or None."""
    pk, sk = str(item.get("pk", "")), str(item.get("sk", ""))
    if pk.startswith("WF#") and sk.startswith("S#"):
        return (pk[3:], sk[2:], None)
    if pk.startswith(MAP_PREFIX) and sk.startswith(ITEM_PREFIX):
        rec = StepRecord.from_item(dict(item))
        return (rec.workflow_id, rec.name, rec.index)
    return None


def _children_walk(record: RunRecord) -> tuple[list[_Child], dict[UnitKey, set[str]], list[str]]:
    """Walk the table's stream: every child workflow created (with the attempt its parent's
    unit was in at that moment: an attempt is QUEUED(a), or PENDING for the first, before the
    move that starts its child), the children each unit ever waited for, and what broke (b)
    as it happened: a parent that became terminal with a child that was not, a child created
    or brought back to life under a terminal parent."""
    units: dict[UnitKey, Mapping[str, Any]] = {}
    waited: dict[UnitKey, set[str]] = defaultdict(set)
    status: dict[str, str] = {}
    parent_of: dict[str, str] = {}
    kids: dict[str, list[str]] = defaultdict(list)
    children: list[_Child] = []
    problems: list[str] = []
    for n, change in enumerate(record.changes):
        new = change.new
        if new is None:
            continue
        key = _unit_key(new)
        if key is not None:
            units[key] = new
            if new.get("child_id") and new.get("status") == StepStatus.WAITING.value:
                waited[key].add(str(new["child_id"]))
            continue
        if new.get("sk") != WF_SK or not str(new.get("pk", "")).startswith("WF#"):
            continue
        wf_id, now = str(new["pk"])[3:], str(new.get("status"))
        was = status.get(wf_id)
        status[wf_id] = now
        parent = new.get("parent_id")
        if change.old is None and parent:
            unit = (str(parent), str(new.get("parent_step")), new.get("parent_item"))
            seen = units.get(unit, {})
            attempt = int(seen.get("attempt") or 0)
            if seen.get("status") in (None, StepStatus.PENDING.value):
                attempt = max(attempt, 1)
            children.append(_Child(wf_id, unit, attempt, n))
            parent_of[wf_id] = str(parent)
            kids[str(parent)].append(wf_id)
        if (
            wf_id in parent_of
            and now not in _TERMINAL
            and status.get(parent_of[wf_id]) in _TERMINAL
        ):
            problems.append(
                f"child {wf_id} is {now} under parent {parent_of[wf_id]}, which is already "
                f"{status[parent_of[wf_id]]} (change {n})"
            )
        if now in _TERMINAL and was not in _TERMINAL:
            live = [k for k in kids.get(wf_id, []) if status.get(k) not in _TERMINAL]
            if live:
                problems.append(
                    f"parent {wf_id} became {now} while its children {live} were not terminal "
                    f"(change {n})"
                )
    return children, dict(waited), problems


def check_children(record: RunRecord) -> list[Violation]:
    """Child workflows (issue 24), from the table's stream and the final table:

    (a) no attempt starts two children: per parent unit (step, or map item) and attempt at
    most one child exists; its id is the one derived from parent, step, item and attempt;
    and the unit waited for it (a child its parent never waited for is an orphan);
    (b) a terminal parent has only terminal children: at the end of the run, and at every
    write (a parent becoming terminal over a live child, a child started or brought back
    under a terminal parent);
    (c) a parent that ended SUCCEEDED has each child step's (and item's) output equal to its
    child's output (its steps' outputs by name), from a child that SUCCEEDED, its last
    attempt's; a parent that unwound (COMPENSATED, CANCELLED) left every child that
    SUCCEEDED COMPENSATED, and that step's compensation SUCCEEDED."""
    from shepherd.decisions.fanout import child_id

    out: list[Violation] = []
    children, waited, problems = _children_walk(record)
    states = record.states()
    by_attempt: dict[tuple[UnitKey, int], list[str]] = defaultdict(list)
    for child in children:
        by_attempt[(child.unit, child.attempt)].append(child.workflow_id)
        parent, step, item = child.unit
        derived = child_id(parent, step, item, child.attempt)
        if child.workflow_id != derived:
            problems.append(
                f"child {child.workflow_id} of '{unit_name(step, item)}' attempt "
                f"{child.attempt} is not the id derived from it ({derived})"
            )
        if child.workflow_id not in waited.get(child.unit, set()):
            problems.append(
                f"child {child.workflow_id} of '{unit_name(step, item)}' attempt "
                f"{child.attempt} was started but its parent's unit never waited for it"
            )
    for (unit, attempt), ids in sorted(by_attempt.items(), key=str):
        if len(ids) > 1:
            out.append(
                Violation(
                    "child_once",
                    unit[0],
                    f"'{unit_name(unit[1], unit[2])}' attempt {attempt} started "
                    f"{len(ids)} children: {ids}",
                )
            )
    out += [
        Violation("child_once" if "derived" in p or "waited" in p else "child_terminal", None, p)
        for p in problems
    ]
    kids: dict[str, list[str]] = defaultdict(list)
    for child in children:
        kids[child.unit[0]].append(child.workflow_id)
    for wf_id, ids in sorted(kids.items()):
        above = states.get(wf_id)
        if above is None or not above.workflow.status.terminal:
            continue
        live = [i for i in ids if i in states and not states[i].workflow.status.terminal]
        if live:
            out.append(
                Violation(
                    "child_terminal",
                    wf_id,
                    f"{above.workflow.status.value} with children not terminal: {live}",
                )
            )
    out += _child_outputs(record, states)
    return out


def _child_output(record: RunRecord, child: WorkflowState) -> Any:
    """A SUCCEEDED child's output, independently: each of its steps' outputs by name (a
    skipped step has none)."""
    return {
        name: record.value(rec.output)
        for name, rec in sorted(child.steps.items())
        if rec.status is StepStatus.SUCCEEDED
    }


def _child_outputs(record: RunRecord, states: Mapping[str, WorkflowState]) -> list[Violation]:
    """(c): outputs of a SUCCEEDED parent's child units, and children an unwound parent left."""
    out: list[Violation] = []
    units = item_units(record.items)
    for wf_id, state in states.items():
        definition = _definition(record, state)
        status = state.workflow.status
        forward: list[StepRecord] = []
        for name, rec in state.steps.items():
            if definition.by_name[name].workflow is None:
                continue
            if definition.by_name[name].map is None:
                forward.append(rec)
            else:
                forward += units.get((wf_id, "step", name), {}).values()
        for rec in forward:
            what = unit_name(rec.name, rec.index)
            child = states.get(rec.child_id or "")
            if status is WorkflowStatus.SUCCEEDED and rec.status is StepStatus.SUCCEEDED:
                if child is None or child.workflow.status is not WorkflowStatus.SUCCEEDED:
                    out.append(
                        Violation(
                            "child_output",
                            wf_id,
                            f"'{what}' SUCCEEDED but its child {rec.child_id} is "
                            f"{child.workflow.status.value if child else 'missing'}",
                        )
                    )
                elif record.value(rec.output) != _child_output(record, child):
                    out.append(
                        Violation(
                            "child_output",
                            wf_id,
                            f"'{what}' output {record.value(rec.output)!r} is not its child "
                            f"{rec.child_id}'s {_child_output(record, child)!r}",
                        )
                    )
            if status not in (WorkflowStatus.COMPENSATED, WorkflowStatus.CANCELLED):
                continue
            if child is not None and child.workflow.status is WorkflowStatus.SUCCEEDED:
                out.append(
                    Violation(
                        "child_output",
                        wf_id,
                        f"{status.value} but the child {rec.child_id} of '{what}' is still "
                        "SUCCEEDED (never undone)",
                    )
                )
            comp = state.compensations.get(rec.name)
            if (
                rec.index is None
                and rec.status is StepStatus.SUCCEEDED
                and (comp is None or comp.status is not StepStatus.SUCCEEDED)
            ):
                out.append(
                    Violation(
                        "child_output",
                        wf_id,
                        f"{status.value} but '{what}' (its child SUCCEEDED) has compensation "
                        f"{comp.status.value if comp else 'missing'}",
                    )
                )
    return out


# ------------------------------------------------------------------ signals (issue 37.7)

TIMEOUT = "States.Timeout"


Signal = tuple[str, int]  # (name, sequence number)


def signal_problems(
    state: WorkflowState,
    definition: Definition,
    kept: Mapping[str, Item],
    calls: Sequence[SignalCall],
    landed: Mapping[str, int] | None = None,
) -> list[str]:
    """What is wrong with one workflow's signals at the end of a run, from its step items, its
    signal partition (`kept`: sort key -> item), what each sender was told and, from the
    table's stream, where each signal's keep and each wait's timeout landed (`landed`: sort
    key -> position; none given: every signal counts as kept before every timeout):

    * none lost: every signal a sender was told was kept (`ok`, `duplicate`, or kept before its
      sender stopped) is in the table under that number, with that payload;
    * taken at most once, by one visit: no two steps name one signal as theirs, and a signal
      marked taken is the output of the step that took it;
    * in order: the steps of a name that took signals took 0, 1, 2, ... in the order of the
      definition (the oldest kept one each);
    * a wait that timed out took none, and no signal of its name that no earlier step took
      was sent before its deadline and kept before its timeout landed (it would have been
      taken instead: a timeout decided before such a signal landed must lose);
    * the counts agree: `kept` is the number not taken, each queue's head the number taken."""
    signals: dict[Signal, Item] = {}
    for sk, item in kept.items():
        if sk.startswith("Q#"):
            name, _, number = sk[2:].rpartition("#")
            signals[(name, int(number))] = item
    takers: dict[Signal, list[str]] = defaultdict(list)
    problems = _signals_lost(calls, signals)
    for name, steps in definition.signal_waits.items():
        problems += _signal_visits(state, name, steps, signals, takers, landed or {})
    problems += _signal_takes_agree(state, signals, takers)
    problems += _signal_counts(kept, signals)
    return problems


def _signals_lost(calls: Sequence[SignalCall], signals: Mapping[Signal, Item]) -> list[str]:
    problems = []
    for call in calls:
        if call.outcome in ("ok", "duplicate"):
            number = call.sequence
        elif call.outcome == "stopped":
            number = call.kept_at_stop
        else:
            continue
        if number is None or number < 0:
            continue
        item = signals.get((call.name, number))
        if item is None or loads(str(item.get("payload"))) != call.payload:
            problems.append(
                f"signal {call.name} #{number} ({call.payload}, {call.outcome} at "
                f"{call.ended}) is not kept as sent: lost"
            )
    return problems


def _signal_visits(
    state: WorkflowState,
    name: str,
    steps: Sequence[str],
    signals: Mapping[Signal, Item],
    takers: dict[Signal, list[str]],
    landed: Mapping[str, int],
) -> list[str]:
    """The steps waiting for `name`, in order: each took the next signal, or timed out with
    none of its name sent before its deadline and kept before its timeout landed."""
    problems = []
    expected = 0
    for step in steps:
        rec = state.steps.get(step)
        if rec is None:
            continue
        decision = (loads(rec.decision) or {}) if rec.decision else {}
        failed_by_timeout = rec.status is StepStatus.FAILED and TIMEOUT in str(rec.error)
        if rec.status is StepStatus.SUCCEEDED and decision and not decision.get("timed_out"):
            number = int(decision.get("sequence", -1))
            takers[(name, number)].append(step)
            if number != expected:
                problems.append(
                    f"step '{step}' took signal {name} #{number}, not #{expected}: out of order"
                )
            expected = number + 1
        elif failed_by_timeout or decision.get("timed_out"):  # `OnTimeout: CONTINUE` succeeds
            deadline = rec.wake_at or 0
            timed_out = landed.get(f"S#{step}", 1 << 62)
            early = sorted(
                n
                for (sig, n), item in signals.items()
                if sig == name
                and n >= expected
                and int(item.get("sent_at", 0)) <= deadline
                and landed.get(str(item["sk"]), -1) < timed_out
            )
            if early:
                problems.append(
                    f"step '{step}' timed out at {deadline} while signal {name} #{early[0]} "
                    "was kept for it before its deadline"
                )
    return problems


def _signal_takes_agree(
    state: WorkflowState, signals: Mapping[Signal, Item], takers: Mapping[Signal, list[str]]
) -> list[str]:
    """A signal is taken at most once, by the step whose output it is (a timed-out or
    cancelled step never takes one)."""
    problems = []
    for (name, number), steps in takers.items():
        if len(steps) > 1:
            problems.append(f"signal {name} #{number} taken by {steps}: more than once")
        item = signals.get((name, number))
        if item is None:
            problems.append(f"step '{steps[0]}' took signal {name} #{number}, never kept")
        elif item.get("taken_by") not in steps:
            problems.append(
                f"step '{steps[0]}' took signal {name} #{number}, marked taken by "
                f"{item.get('taken_by')!r}"
            )
    for (name, number), item in signals.items():
        by = item.get("taken_by")
        if by is None or (name, number) in takers:
            continue
        rec = state.steps.get(str(by))
        how = "timed out" if rec is not None and TIMEOUT in str(rec.error) else "not its output"
        problems.append(
            f"signal {name} #{number} marked taken by '{by}', whose output it is not "
            f"({how}): consumed and lost"
        )
    return problems


def _signal_counts(kept: Mapping[str, Item], signals: Mapping[Signal, Item]) -> list[str]:
    problems = []
    untaken = sum(1 for item in signals.values() if item.get("taken_by") is None)
    counter = kept.get("#SIG")
    if counter is not None and int(counter.get("kept", 0)) != untaken:
        problems.append(f"#SIG counts {counter.get('kept')} kept, {untaken} are not taken")
    for sk, item in kept.items():
        if not sk.startswith("N#"):
            continue
        queue = sk[2:]
        taken = sum(1 for (n, _), i in signals.items() if n == queue and i.get("taken_by"))
        if int(item.get("head", 0)) != taken:
            problems.append(f"queue {queue}'s head is {item.get('head')}, {taken} taken")
    return problems


def check_signals(record: RunRecord) -> list[Violation]:
    """Every workflow whose definition waits for signals (`signal_problems`)."""
    kept: dict[str, dict[str, Item]] = defaultdict(dict)
    for item in record.items:
        pk = str(item.get("pk", ""))
        if pk.startswith(SIGNAL_PREFIX):
            kept[pk[len(SIGNAL_PREFIX) :]][str(item["sk"])] = item
    calls: dict[str, list[SignalCall]] = defaultdict(list)
    for call in record.signal_calls:
        calls[call.workflow_id].append(call)
    landed: dict[str, dict[str, int]] = defaultdict(dict)
    for position, change in enumerate(record.changes):
        new, old = change.new or {}, change.old or {}
        pk, sk = str(new.get("pk", "")), str(new.get("sk", ""))
        if pk.startswith(SIGNAL_PREFIX) and sk.startswith("Q#") and change.old is None:
            landed[pk[len(SIGNAL_PREFIX) :]][sk] = position  # the signal kept
        elif (
            pk.startswith("WF#")
            and sk.startswith("S#")
            and new.get("status") in ("FAILED", "SUCCEEDED")
            and old.get("status") == "WAITING"
        ):
            landed[pk[3:]][sk] = position  # a wait ended (timed out, or took a signal)
    out: list[Violation] = []
    for wf_id, state in record.states().items():
        definition = record.definitions.get(state.workflow.wf_type)
        if definition is None or not definition.signal_waits:
            continue
        found = signal_problems(state, definition, kept[wf_id], calls[wf_id], landed[wf_id])
        for problem in found:
            out.append(Violation("signals", wf_id, problem))
    return out


CANCEL_MARGIN_MS = 3_000  # a timeout decided just before the cancel landed may land after it


def check_cancel_never_waits(record: RunRecord) -> list[Violation]:
    """A cancel never waits on a callback (invariant 13, issue 37.4): from the table's stream,
    an attempt that was waiting for its callback when its workflow became CANCELLING ends by
    the cancel's fence (`WorkflowCancelled`) or by an answer that beat it, never by the
    callback's own timeout more than CANCEL_MARGIN_MS after the cancel landed (a timeout
    decided before the cancel may land a moment after it)."""
    out: list[Violation] = []
    cancelling: dict[str, int] = {}  # workflow id -> when its CANCELLING write landed
    for change in record.changes:
        new, old = change.new or {}, change.old or {}
        pk, sk = str(new.get("pk", "")), str(new.get("sk", ""))
        if not pk.startswith("WF#"):
            continue
        wf_id = pk[3:]
        if sk == WF_SK:
            if new.get("status") == "CANCELLING" and old.get("status") != "CANCELLING":
                cancelling[wf_id] = int(new.get("updated_at", 0))
            continue
        if not sk.startswith("S#") or old.get("status") != "WAITING":
            continue
        if old.get("callback_token") is None or wf_id not in cancelling:
            continue
        if new.get("status") == "WAITING" and new.get("attempt") == old.get("attempt"):
            continue  # a heartbeat or a hold: still waiting
        error = str(new.get("error") or "")
        since = cancelling[wf_id]
        ended = int(new.get("finished_at") or new.get("heartbeat_at") or since)
        if "Timeout" in error and ended > since + CANCEL_MARGIN_MS:
            out.append(
                Violation(
                    "cancel_waits",
                    wf_id,
                    f"step '{sk[2:]}' attempt {old.get('attempt')} waited for its callback "
                    f"until its timeout at {ended}, {ended - since} ms after the cancel",
                )
            )
    return out


def check_iterations_exact(record: RunRecord) -> list[Violation]:
    """Issue 42.5: a `Repeat` step's loop count is exact. Its `iterations` is the number of
    distinct iterations whose result it accepted (`_iteration_history_problems`); it never
    runs more than `MaxIterations` (its agents never see a later one); a SUCCEEDED one ended
    at the first iteration whose output says `done` (the simulator's rule; in a workflow that
    unwound, an iteration that returned meanwhile ends it too), its output that iteration's;
    one failed with `States.LoopLimitExceeded` counted exactly `MaxIterations`, none done."""
    out: list[Violation] = []
    seen: dict[tuple[str, str], set[int]] = defaultdict(set)
    for call in record.calls:
        if call.kind == "step" and "#" in call.key:
            seen[(call.workflow_id, call.step)].add(int(call.key.rsplit("#", 1)[1]))
    for wf_id, state in record.states().items():
        definition = _definition(record, state)
        for name, rec in state.steps.items():
            spec = definition.by_name[name]
            if spec.repeat is None:
                continue
            limit = spec.repeat.max_iterations + rec.loop_from
            ran = seen.get((wf_id, name), set())
            problems = []
            if ran and max(ran) > limit:
                problems.append(f"ran iteration {max(ran)} of {limit}")
            if rec.iterations > limit:
                problems.append(f"counts {rec.iterations} iterations, more than {limit}")
            problems += _loop_end_problems(record, state, rec, limit)
            out += [Violation("iterations", wf_id, f"step '{name}' {p}") for p in problems]
    return out


def _loop_end_problems(
    record: RunRecord, state: WorkflowState, rec: StepRecord, limit: int
) -> list[str]:
    """How a `Repeat` step's loop ended, against its count and its last output."""
    output = record.value(rec.output)
    done = isinstance(output, dict) and output.get("done") is True
    if rec.status is StepStatus.SUCCEEDED:
        last = output.get("iteration") if isinstance(output, dict) else None
        if last != rec.iterations:
            return [f"SUCCEEDED after {rec.iterations} iterations with iteration {last}'s output"]
        if not done and state.workflow.status is WorkflowStatus.SUCCEEDED:
            return ["SUCCEEDED but its Until never held"]
        return []
    error = loads(rec.error) if rec.error else None
    if rec.status is not StepStatus.FAILED or (error or {}).get("type") != LOOP_LIMIT:
        return []
    out = []
    if rec.iterations != limit:
        out.append(f"failed with {LOOP_LIMIT} after {rec.iterations} iterations, not {limit}")
    if done:
        out.append(f"failed with {LOOP_LIMIT} though its last iteration was done")
    return out


CHECKERS: Sequence[Checker] = (
    check_terminal_within_bound,
    check_effects_once,
    check_compensation_exact,
    check_no_superseded_result,
    check_no_lost_workflow,
    check_attempts_within_policy,
    check_status_consistent,
    check_finish_events,
    check_events_delivered,
    check_events_real,
    check_events_ordered,
    check_no_orphaned_effects,
    check_claims,
    check_dependencies_first,
    check_skips_and_waits,
    check_approvals,
    check_inbox,
    check_schedule_firings,
    check_inputs_given,
    check_pause_respected,
    check_paused_starts_nothing,
    check_paused_pools_wait,
    check_open_circuit_claims_nothing,
    check_circuit_moves,
    check_online,
    check_payloads_resolve,
    check_map_accounting,
    check_map_concurrency,
    check_item_compensation,
    check_children,
    check_signals,
    check_cancel_never_waits,
    check_iterations_exact,
)


def check_all(record: RunRecord) -> list[Violation]:
    out: list[Violation] = []
    for checker in CHECKERS:
        out.extend(checker(record))
    return out
