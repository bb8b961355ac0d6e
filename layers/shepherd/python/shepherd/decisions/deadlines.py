"""When the supervisor will act on each live step, and why (issue 29.3): the API view's
`next_deadline`, so an operator sees a countdown instead of a bare `PENDING` or `RUNNING`.

Pure: a workflow's state, its definition, the pools as the table records them and the time
in; no I/O. The reasons follow the deadline rule (docs/architecture.md): an attempt's
`heartbeat` or `timeout`, a sent task's `dispatch` grace (restarted by its pool's resume), a
retry's `backoff`, a task held by a paused pool (no deadline runs: `waiting for pool <name>
(paused)`), and a paused workflow's `pause timeout`.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shepherd.decisions import scope
from shepherd.decisions.ratelimit import HORIZON_US
from shepherd.definitions import Definition, StepSpec, TaskSpec
from shepherd.keys import Kind
from shepherd.kinds import kind_of
from shepherd.model import PoolState, StepRecord, StepStatus, WorkflowState, WorkflowStatus


@dataclass(frozen=True)
class Deadline:
    """The next moment the supervisor acts on a unit if nothing else happens (None: no
    deadline runs, as while its pool is paused), and why."""

    at: int | None
    why: str


def pause_timeout_at(state: WorkflowState, definition: Definition) -> int | None:
    """When a PAUSED workflow's pause times out (it then unwinds), or None."""
    wf = state.workflow
    if wf.status is not WorkflowStatus.PAUSED or wf.paused_at is None:
        return None
    if definition.pause_timeout_seconds is None:
        return None
    return wf.paused_at + definition.pause_timeout_seconds * 1000


# ------------------------------------------------- the rule's parts (one place each)
# The supervisor's planner (`planner._supervise` and `_ready`: when it acts), the watch
# entry (`planner.next_due`: when it must look) and this view read these same functions, so
# the three cannot disagree (issue 40.2).


def pool_resumed(pool: PoolState | None) -> int:
    """When the pool was last resumed (0: never): a resume restarts a sent task's grace."""
    return 0 if pool is None or pool.resumed_at is None else pool.resumed_at


def pool_paused(pool: PoolState | None) -> bool:
    return pool is not None and pool.paused


def lost_at(sent_at: int, pool: PoolState | None, definition: Definition) -> int:
    """When a task sent at `sent_at` counts as lost: after the dispatch grace, which a pool's
    resume restarts (and never while its pool is paused: the callers check `pool_paused`). In
    a rate-limited pool the task may be waiting with a ticket for its slot, which is no later
    than the furthest slot the limiter has reserved, nor than a reservation's horizon after
    it was sent: the grace counts from there. A copy sent sooner would ask the limiter too and
    reserve a slot nobody uses (issue 26.1)."""
    start = max(sent_at, pool_resumed(pool))
    if pool is not None and pool.reserved_until is not None:
        start = max(start, min(pool.reserved_until, sent_at + HORIZON_US // 1000))
    return start + definition.dispatch_timeout_seconds * 1000


def ready_at(state: WorkflowState, spec: StepSpec, definition: Definition) -> int | None:
    """When the last dependency succeeded or was skipped by its condition (the step was sent
    then, or is skipped or started by whoever saw it ready), or None if some is not done.
    With a Catch or a Choice, when its inputs settled, whether it runs or is out of scope
    (`decisions.scope`)."""
    settled = scope.verdict(state, definition, spec)
    return None if settled is None else settled[1]


def attempt_deadlines(spec: TaskSpec, rec: StepRecord, now: int) -> list[Deadline]:
    """An attempt in flight: its TimeoutSeconds and, with HeartbeatSeconds, its heartbeat's."""
    claimed = rec.claimed_at or now
    out = [Deadline(claimed + spec.timeout_seconds * 1000, "timeout")]
    if spec.heartbeat_seconds is not None:
        beat_at = (rec.heartbeat_at or claimed) + spec.heartbeat_seconds * 1000
        out.append(Deadline(beat_at, "heartbeat"))
    return out


def _own_deadline(
    definition: Definition, kind: Kind, rec: StepRecord
) -> list[tuple[int, str]] | None:
    """A step's kind's own deadline (a resting step's), or None: an attempt's."""
    if kind != "step":
        return None
    spec = definition.by_name[rec.name]
    return kind_of(spec).deadline(spec, rec)


def next_deadline(
    state: WorkflowState,
    definition: Definition,
    kind: Kind,
    rec: StepRecord,
    now: int,
    pools: Mapping[str, PoolState],
) -> Deadline | None:
    """One unit's next deadline, or None when the supervisor has nothing to time on it
    (finished, not yet reached, or a paused workflow's unit that is not in flight)."""
    wf = state.workflow
    if wf.status.terminal:
        return None
    own = _own_deadline(definition, kind, rec)
    if own is not None:
        return next((Deadline(at, label) for at, label in own), None)
    if rec.child_id is not None and rec.status is StepStatus.WAITING:
        return _child_deadline(definition, kind, rec, now)
    spec = definition.spec(kind, rec.name)
    mapped = _map_deadline(state, definition, kind, rec, now, pools)
    if mapped is not None:
        return mapped
    if rec.status in (StepStatus.RUNNING, StepStatus.WAITING):
        return _attempt_deadline(spec, rec, now)
    if wf.status is WorkflowStatus.PAUSED:
        return None  # nothing is dispatched while paused: resume, compensate or cancel moves it
    return _dispatch_deadline(state, definition, kind, rec, now, pools)


def _dispatch_deadline(
    state: WorkflowState,
    definition: Definition,
    kind: Kind,
    rec: StepRecord,
    now: int,
    pools: Mapping[str, PoolState],
) -> Deadline | None:
    """A unit not claimed yet: its backoff, its message's dispatch grace, or its paused pool."""
    wf = state.workflow
    spec = definition.spec(kind, rec.name)
    pool = pools.get(spec.pool)
    held = Deadline(None, f"waiting for pool {spec.pool} (paused)")
    if rec.status is StepStatus.QUEUED:
        available = rec.available_at or 0
        if pool_paused(pool):
            return held
        if rec.dispatched_at is None:  # a long backoff's end: the supervisor sends it then
            return Deadline(available, "backoff")
        # Sent (a retry's message with its backoff as its delay): lost if still unclaimed
        # the dispatch grace after it became visible.
        return Deadline(lost_at(max(rec.dispatched_at, available), pool, definition), "dispatch")
    if rec.status is StepStatus.PENDING and kind == "step" and wf.status is WorkflowStatus.RUNNING:
        ready = ready_at(state, definition.by_name[rec.name], definition)
        if ready is None:
            return None  # not reached: a dependency is not done
        if pool_paused(pool):
            return held
        return Deadline(lost_at(ready, pool, definition), "dispatch")
    return None


def _child_deadline(
    definition: Definition, kind: Kind, rec: StepRecord, now: int
) -> Deadline | None:
    """Waiting for its child workflow: its TimeoutSeconds, until the child was asked to cancel
    (its end then decides, when it comes); a compensation waits for its child's undo."""
    if kind != "step" or rec.child_cancel is not None:
        return None
    timeout = definition.by_name[rec.name].timeout_seconds * 1000
    return Deadline((rec.claimed_at or now) + timeout, "timeout")


def _attempt_deadline(spec: TaskSpec, rec: StepRecord, now: int) -> Deadline:
    """An attempt in flight: its heartbeat timeout or its TimeoutSeconds, whichever first."""
    return min(attempt_deadlines(spec, rec, now), key=lambda d: (d.at or 0, d.why != "timeout"))


def _map_deadline(
    state: WorkflowState,
    definition: Definition,
    kind: Kind,
    rec: StepRecord,
    now: int,
    pools: Mapping[str, PoolState],
) -> Deadline | None:
    """A running map's: the earliest of its window's units, naming the item (issue 24); an
    item that entered its window with no unit yet: its message's dispatch grace."""
    if rec.index is not None:
        if rec.status is not StepStatus.PENDING:
            return None  # a written unit: a step's rules
        pool = pools.get(definition.spec(kind, rec.name).pool)
        return Deadline(lost_at(rec.dispatched_at or now, pool, definition), "dispatch")
    if rec.fanout is None or rec.status is not StepStatus.RUNNING:
        return None
    units = state.windows.get((kind, rec.name), {})
    soonest: tuple[int, str] | None = None
    for unit in units.values():
        if unit.status.terminal:
            return Deadline(now, f"item {unit.index} ended: to count")
        found = next_deadline(state, definition, kind, unit, now, pools)
        if (
            found is not None
            and found.at is not None
            and (soonest is None or found.at < soonest[0])
        ):
            soonest = (found.at, f"item {unit.index} {found.why}")
    return None if soonest is None else Deadline(*soonest)
