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
from dataclasses import dataclass, field
from typing import Any

from shepherd.conditions import Item
from shepherd.decisions.planner import Dispatch, EndAttempt, compensated, plan
from shepherd.definitions import Definition
from shepherd.model import StepRecord, StepStatus, WorkflowState, WorkflowStatus, loads

from shepherd_sim.service import Call, Effect


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
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Domain events published (detail-type, detail), in order."""

    def states(self) -> dict[str, WorkflowState]:
        by_pk: dict[str, list[Item]] = defaultdict(list)
        for item in self.items:
            if str(item.get("pk", "")).startswith("WF#"):
                by_pk[item["pk"]].append(item)
        out: dict[str, WorkflowState] = {}
        for pk in sorted(by_pk):
            state = WorkflowState.from_items(by_pk[pk])
            if state is not None:
                out[state.workflow.workflow_id] = state
        return out


Checker = Callable[[RunRecord], list[Violation]]

IN_PROGRESS = (StepStatus.PENDING, StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.WAITING)


def _records(state: WorkflowState) -> list[StepRecord]:
    return [*state.steps.values(), *state.compensations.values()]


def _definition(record: RunRecord, state: WorkflowState) -> Definition:
    return record.definitions[state.workflow.wf_type]


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


def check_effects_once(record: RunRecord) -> list[Violation]:
    """One idempotency key per step (and per compensation), so at most one effect each."""
    out = []
    keys: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for call in record.calls:
        keys[(call.workflow_id, call.kind, call.step)].add(call.key)
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
        effects[(effect.workflow_id, effect.kind, effect.step)].append(effect)
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
    for effect in record.effects:
        target = comp_effects if effect.kind == "compensation" else step_effects
        target.setdefault((effect.workflow_id, effect.step), effect)
    for wf_id, state in record.states().items():
        definition = _definition(record, state)
        status = state.workflow.status
        undone = {s: e for (w, s), e in comp_effects.items() if w == wf_id}
        owed = {
            name for name, rec in state.steps.items() if compensated(rec, definition.by_name[name])
        }
        for name in sorted(set(undone) - owed):
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
            for name in sorted(owed - set(undone)):
                out.append(
                    Violation(
                        "compensation",
                        wf_id,
                        f"workflow is {status.value} but step '{name}', which may have "
                        "acted, was never compensated",
                    )
                )
        for name, comp in sorted(state.compensations.items()):
            if comp.status is StepStatus.SUCCEEDED and name not in undone:
                out.append(
                    Violation(
                        "compensation",
                        wf_id,
                        f"compensation '{name}' is SUCCEEDED but its effect was never applied",
                    )
                )
        for name, effect in sorted(undone.items()):
            step_effect = step_effects.get((wf_id, name))
            if step_effect is not None and step_effect.seq > effect.seq:
                out.append(
                    Violation(
                        "compensation",
                        wf_id,
                        f"'{name}' was undone (call #{effect.seq}) before its effect was "
                        f"applied (call #{step_effect.seq})",
                    )
                )
        names = sorted(n for n in undone if n in owed)
        for a, b in itertools.permutations(names, 2):
            if must_undo_first(state, definition, a, b) and undone[a].seq > undone[b].seq:
                out.append(
                    Violation(
                        "compensation",
                        wf_id,
                        f"'{b}' was undone (call #{undone[b].seq}) before '{a}' "
                        f"(call #{undone[a].seq}); '{a}' finished later or depends on '{b}'",
                    )
                )
    return out


# ---------------------------------------------------------- 4. nothing from a superseded one


def _output_attempt(text: str | None) -> int | None:
    value = loads(text)
    if isinstance(value, dict) and isinstance(value.get("attempt"), int):
        return int(value["attempt"])
    return None


def _history_problems(rec: StepRecord) -> list[str]:
    what = f"{rec.kind} '{rec.name}'"
    out = []
    ended: dict[int, int] = defaultdict(int)
    for entry in rec.history:
        ended[int(entry["a"])] += 1
    out += [f"{what}: attempt {a} ended {n}x" for a, n in sorted(ended.items()) if n > 1]
    oks = [int(h["a"]) for h in rec.history if h.get("o") == "ok"]
    if rec.status is not StepStatus.SUCCEEDED:
        if oks:
            out.append(f"{what} is {rec.status.value} but accepted a result of attempt {oks}")
        return out
    if oks != [rec.attempt]:
        out.append(
            f"{what} is SUCCEEDED at attempt {rec.attempt} but its history accepted results "
            f"of attempts {oks}"
        )
    produced = _output_attempt(rec.output)
    if produced is not None and produced != rec.attempt:
        out.append(
            f"{what} recorded the output of attempt {produced}, but it ended at attempt "
            f"{rec.attempt}"
        )
    return out


def _reported_successes(record: RunRecord, states: Mapping[str, WorkflowState]) -> list[Violation]:
    out = []
    succeeded: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for h in record.handled:
        if h.outcome == "succeeded":
            succeeded[(h.workflow_id, h.kind, h.step)].append(h.attempt)
    for (wf_id, kind, step), attempts in sorted(succeeded.items()):
        st = states.get(wf_id)
        rec = None
        if st is not None:
            rec = (st.steps if kind == "step" else st.compensations).get(step)
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


def _consumed_inputs(record: RunRecord, states: Mapping[str, WorkflowState]) -> list[Violation]:
    out = []
    for call in record.calls:
        st = states.get(call.workflow_id)
        if st is None:
            continue
        for name, attempt in call.inputs:
            dep = st.steps.get(name)
            if dep is None or dep.status is not StepStatus.SUCCEEDED or dep.attempt != attempt:
                now = f"{dep.status.value} at attempt {dep.attempt}" if dep else "missing"
                message = (
                    f"{call.kind} '{call.step}' attempt {call.attempt} was given the output of "
                    f"'{name}' attempt {attempt}, but '{name}' is {now}"
                )
                out.append(Violation("superseded", call.workflow_id, message))
    return out


def check_no_superseded_result(record: RunRecord) -> list[Violation]:
    """Every accepted result belongs to the attempt the step ended at; no attempt ended
    twice; the runtime reported success only for that attempt; nobody was given a result
    that is not the accepted one."""
    states = record.states()
    out = [
        Violation("superseded", wf_id, problem)
        for wf_id, state in states.items()
        for rec in _records(state)
        for problem in _history_problems(rec)
    ]
    return out + _reported_successes(record, states) + _consumed_inputs(record, states)


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
    for wf_id, state in record.states().items():
        definition = _definition(record, state)
        for rec in _records(state):
            spec = definition.spec(rec.kind, rec.name)
            limit = 1 + spec.retry.max_attempts + rec.budget_from
            if rec.attempt > limit:
                out.append(
                    Violation(
                        "attempts",
                        wf_id,
                        f"{rec.kind} '{rec.name}' reached attempt {rec.attempt}; its policy "
                        f"allows {limit} (1 + MaxAttempts {spec.retry.max_attempts})",
                    )
                )
    return out


# ------------------------------------------------------------ 7. status agrees with steps


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
        not_ok = sorted(n for n, s in steps.items() if s is not StepStatus.SUCCEEDED)
        if not_ok:
            out.append(f"SUCCEEDED but steps {not_ok} did not succeed")
        if comps:
            out.append(f"SUCCEEDED but compensations {sorted(comps)} exist")
    if status is WorkflowStatus.COMPENSATED and StepStatus.FAILED not in steps.values():
        out.append("COMPENSATED but no step FAILED")
    if status in (WorkflowStatus.COMPENSATED, WorkflowStatus.CANCELLED):
        for name, rec in sorted(state.steps.items()):
            comp = comps.get(name)
            owed = compensated(rec, definition.by_name[name])
            if owed and (comp is None or comp.status is not StepStatus.SUCCEEDED):
                out.append(
                    f"{status.value} but the compensation of step '{name}' (which may have "
                    f"acted) is {comp.status.value if comp else 'missing'}"
                )
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
    slack: Callable[[StepRecord], int] | None = None,
) -> list[Violation]:
    """Invariant 3 at one moment: a live workflow is in the watch index, under a `due_at` no
    later than any deadline that has passed (a timeout, a lost dispatch, a backoff's end).

    `slack(record)` is how late that record's writes landed after their timestamps were
    taken: a deadline computed from a timestamp may precede `due_at` by that much (the
    engine's clock is read before a write is sent; see docs/simulation.md)."""
    wf = state.workflow
    if wf.status.terminal:
        return []
    if wf.due_at is None or wf.watch_shard is None:
        return [Violation("findable", wf.workflow_id, f"{wf.status.value} but not in the index")]
    out = []
    for action in plan(state, definition, now, supervisor=True, rng=rng):
        deadline: int | None = None
        if isinstance(action, EndAttempt) or (isinstance(action, Dispatch) and action.lost):
            deadline = now - action.overdue_ms
        elif (
            isinstance(action, Dispatch)
            and action.seen.status is StepStatus.QUEUED
            and action.seen.dispatched_at is None
        ):
            deadline = action.seen.available_at
        if deadline is not None and wf.due_at > deadline:
            assert isinstance(action, Dispatch | EndAttempt)
            if slack is not None and wf.due_at <= deadline + slack(action.seen):
                continue
            out.append(
                Violation(
                    "findable",
                    wf.workflow_id,
                    f"{type(action).__name__} of '{action.seen.name}' was due at {deadline} but "
                    f"the watch index says {wf.due_at}",
                )
            )
    return out


FINISH_EVENTS = {
    "WorkflowSucceeded": WorkflowStatus.SUCCEEDED,
    "WorkflowCompensated": WorkflowStatus.COMPENSATED,
    "WorkflowCancelled": WorkflowStatus.CANCELLED,
    "WorkflowFailed": WorkflowStatus.FAILED,
}


def check_finish_events(record: RunRecord) -> list[Violation]:
    """A workflow announces its end once (once more per redrive: FAILED before each), and as
    the status it ended in. (An event may be missing: the engine publishes after its write,
    best effort; see `missing_events`.)"""
    out = []
    states = record.states()
    seen: dict[str, list[str]] = defaultdict(list)
    for detail_type, detail in record.events:
        if detail_type in FINISH_EVENTS:
            seen[str(detail.get("workflow_id"))].append(detail_type)
    for wf_id, types in sorted(seen.items()):
        state = states.get(wf_id)
        allowed = 1 + (state.workflow.redrives if state else 0)
        if len(types) > allowed:
            out.append(Violation("events", wf_id, f"finished {len(types)} times: {types}"))
        # The last end announced is the final status, or an earlier FAILED whose later end
        # (after a redrive) was not announced; every end before it was a FAILED.
        last_ok = state is not None and (
            FINISH_EVENTS[types[-1]] is state.workflow.status
            or (types[-1] == "WorkflowFailed" and len(types) <= state.workflow.redrives)
        )
        earlier_failed = all(t == "WorkflowFailed" for t in types[:-1])
        if not (last_ok and earlier_failed):
            now = state.workflow.status.value if state else "missing"
            out.append(Violation("events", wf_id, f"announced {types} but it is {now}"))
    return out


def missing_events(record: RunRecord) -> list[str]:
    """Terminal workflows whose end was never announced (the write won, the publish did not
    happen: a store timeout after the write, or a crash between the two)."""
    announced = {
        str(detail.get("workflow_id")) for t, detail in record.events if t in FINISH_EVENTS
    }
    return [
        wf_id
        for wf_id, state in record.states().items()
        if state.workflow.status.terminal and wf_id not in announced
    ]


def check_online(record: RunRecord) -> list[Violation]:
    return list(record.online)


CHECKERS: Sequence[Checker] = (
    check_terminal_within_bound,
    check_effects_once,
    check_compensation_exact,
    check_no_superseded_result,
    check_no_lost_workflow,
    check_attempts_within_policy,
    check_status_consistent,
    check_finish_events,
    check_online,
)


def check_all(record: RunRecord) -> list[Violation]:
    out: list[Violation] = []
    for checker in CHECKERS:
        out.extend(checker(record))
    return out
