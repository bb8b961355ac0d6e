"""Every engine bug the simulator found keeps its seed here.

Each entry runs its seed on the engine as it is (no violation), and again with the bug put
back (the violation must appear), so the seed provably still reaches the situation that
exposed the bug. If a change to the simulator makes a seed stop reaching it, find a new one
by running seeds with the bug put back (`with case.bug(): run_seed(seed, faults)`) until the
invariant breaks, and check in the trace that it is the same situation.

Two bugs no seed reached any more once the supervisor was partitioned (issue 23; 2,000 seeds
each at x4 with the bug put back) are proven by hand-driven tests instead, each checked to fail
with its bug put back: a timeout planned before a task token was armed
(`tests/integration/test_armed_token_race.py`, seeds 20427 and 10041) and a paused
workflow's look unwatching it without holding its claimable steps
(`tests/integration/test_lazy_steps.py::test_a_hold_on_a_missing_item_stops_a_late_claim`,
seeds 6520 and 1380); and, once the pools gained circuit breakers (issue 26), a sweep planning
with the pools' last states after a failed read
(`tests/integration/test_pause.py::test_a_sweep_that_cannot_read_the_pools_takes_every_pool_as_running`,
seeds 26, 5157, 220); and, once map windows moved to shards (issue 24; seeds 0-700 of
`--types sim_map` with the bug put back), an opener ending its attempt over a map whose open
write had landed and timed out
(`tests/integration/test_maps.py::test_an_open_write_that_timed_out_after_it_landed_does_not_end_the_opener`,
seeds 24, 217, 115).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from shepherd.decisions import planner
from shepherd.model import (
    PoolState,
    StepRecord,
    StepStatus,
    WorkflowRecord,
    WorkflowState,
    WorkflowStatus,
)
from shepherd_sim import Faults, SimConfig, run_seed
from shepherd_sim.sim import CLASSIC_TYPES, definitions


@contextlib.contextmanager
def _waiting_reports_any_ended_attempt_as_succeeded() -> Iterator[None]:
    """c7d79f0: a callback agent fenced out by a timeout was reported SUCCEEDED."""
    from shepherd.decisions import transitions as tx
    from shepherd.engine.agent import AgentRuntime, HandleResult, Heartbeat, Outcome
    from shepherd.errors import ConditionFailed

    real = AgentRuntime._waiting

    def old(self: AgentRuntime, rec: StepRecord, heartbeat: Heartbeat) -> HandleResult:
        if heartbeat.token is None:
            return real(self, rec, heartbeat)
        now = self.scheduler.ports.clock.now_ms()
        write = tx.wait_for_callback(
            rec, rec.attempt, now, heartbeat.token.hash, heartbeat.take_details()
        )
        try:
            self.scheduler.ports.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed as lost:
            current = lost.current or {}
            if current.get("attempt") == rec.attempt and current.get("status") != "RUNNING":
                return HandleResult(Outcome.SUCCEEDED, "the callback arrived first")
            return HandleResult(Outcome.FENCED, "attempt was superseded")
        return HandleResult(Outcome.WAITING)

    AgentRuntime._waiting = old  # type: ignore[method-assign]
    try:
        yield
    finally:
        AgentRuntime._waiting = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _workflow_writes_guarded_by_status_only() -> Iterator[None]:
    """ea62c7c: finish and move_due did not check the redrive count (ABA after a redrive)."""
    from shepherd.conditions import Eq, Missing, all_of
    from shepherd.decisions import transitions as tx

    real_finish, real_move = tx.finish, tx.move_due

    def finish(wf: WorkflowRecord, *args: Any, **kwargs: Any) -> tx.Write:
        w = real_finish(wf, *args, **kwargs)
        return tx.Write(w.pk, w.sk, w.update, Eq("status", wf.status.value))

    def move_due(wf: WorkflowRecord, due_at: int, **kwargs: Any) -> tx.Write:
        w = real_move(wf, due_at, **kwargs)
        seen = Missing("due_at") if wf.due_at is None else Eq("due_at", wf.due_at)
        return tx.Write(w.pk, w.sk, w.update, all_of(Eq("status", wf.status.value), seen))

    tx.finish, tx.move_due = finish, move_due  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.finish, tx.move_due = real_finish, real_move  # type: ignore[assignment]


@contextlib.contextmanager
def _operator_writes_unguarded_when_due() -> Iterator[None]:
    """An operator's write did not guard a watch entry that was already due: a supervisor
    could take the paused workflow out of the index meanwhile, and the cancel (or resume,
    compensate) then left a live workflow nobody watched."""
    from shepherd.conditions import Cond, Eq, Missing
    from shepherd.decisions import transitions as tx

    real = tx._pull_due

    def old(wf: WorkflowRecord, shard: str, now: int) -> tuple[dict[str, Any], Cond | None]:
        if wf.due_at is None:
            return {"watch_shard": shard, "due_at": now}, Missing("due_at")
        if wf.due_at > now:
            return {"due_at": now}, Eq("due_at", wf.due_at)
        return {}, None  # the bug: no guard on an entry already due

    tx._pull_due = old
    try:
        yield
    finally:
        tx._pull_due = real


@contextlib.contextmanager
def _timeout_ignores_an_armed_token() -> Iterator[None]:
    """The supervisor's write ending an attempt was guarded by the heartbeat alone: a token
    armed after its read was left out of the history, and a late callback with that genuine
    token was answered 404 (unknown) instead of 409 (stale)."""
    from shepherd.conditions import Eq, Missing
    from shepherd.decisions import transitions as tx

    real = tx.end_attempt

    def old(rec: StepRecord, **kwargs: Any) -> tx.Write:
        guard = None
        if kwargs["outcome"] == "heartbeat_timeout":  # the only guard there was
            seen = rec.heartbeat_at
            guard = Missing("heartbeat_at") if seen is None else Eq("heartbeat_at", seen)
        return real(rec, **{**kwargs, "guard": guard})

    tx.end_attempt = old  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.end_attempt = real


@contextlib.contextmanager
def _failed_attempt_forgets_its_token() -> Iterator[None]:
    """An agent function that raised after handing out its task token ended its attempt
    without the token's hash in the history: a late callback with that genuine token was
    answered 404 (unknown) instead of 409 (stale). Both halves of the fix put back: the
    write that ends an attempt also guards the token it saw, which alone makes that agent's
    write lose (its attempt is then timed out, with the token), so the agent's half shows
    only with the guard gone too."""
    from shepherd.engine.agent import AgentRuntime

    real = AgentRuntime._failed

    def failed(self: AgentRuntime, state: Any, definition: Any, rec: StepRecord, *a: Any) -> Any:
        return real(self, state, definition, replace(rec, callback_token=None), *a)

    AgentRuntime._failed = failed  # type: ignore[method-assign]
    try:
        with _timeout_ignores_an_armed_token():
            yield
    finally:
        AgentRuntime._failed = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _pause_leaves_the_entry_past_its_timeout() -> Iterator[None]:
    """A pause (which leaves the watch entry as it was, valid for a running workflow) did not
    pull the entry to its pause timeout: with PauseTimeoutSeconds shorter than the entry's
    distance, the pause timeout was found late. Before the deadline rule of issue 23 the same
    gap was `G` leaving out the pause timeout (seed 36), or `L + G` left out when every step
    waited out a backoff (seed 653, re-seeded as 2558)."""
    from shepherd.decisions import transitions as tx

    real = tx.pause

    def old(wf: WorkflowRecord, now: int, reason: str, **kwargs: Any) -> tx.Write:
        return real(wf, now, reason, **{**kwargs, "timeout_ms": None})

    tx.pause = old  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.pause = real  # type: ignore[assignment]


@contextlib.contextmanager
def _pause_unguarded_when_due() -> Iterator[None]:
    """A pause whose watch entry was already sooner than its pause timeout put no condition on
    it: a look planned on the RUNNING workflow could move the entry past the timeout meanwhile,
    and the pause landed after it, its timeout found late."""
    from shepherd.conditions import Eq, all_of
    from shepherd.decisions import transitions as tx

    real = tx.pause

    def old(wf: WorkflowRecord, now: int, reason: str, **kwargs: Any) -> tx.Write:
        w = real(wf, now, reason, **kwargs)
        if kwargs.get("timeout_ms") is None or wf.due_at is None:
            return w
        if wf.due_at > now + kwargs["timeout_ms"]:
            return w
        return tx.Write(w.pk, w.sk, w.update, all_of(Eq("status", "RUNNING"), tx._redrives(wf)))

    tx.pause = old  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.pause = real  # type: ignore[assignment]


@contextlib.contextmanager
def _paused_look_sends_the_next_item() -> Iterator[None]:
    """feaf032: a look at a PAUSED workflow that counted an ended map item sent the message of
    the item its accounting brought into the window (the look's map writes planned as for a
    running workflow)."""
    from shepherd.engine.scheduler import Scheduler

    real = Scheduler._apply_map

    def old(self: Scheduler, state: WorkflowState, *args: Any) -> bool:
        wf = state.workflow
        if wf.status is not WorkflowStatus.PAUSED:
            return real(self, state, *args)
        state.workflow = replace(wf, status=WorkflowStatus.RUNNING)
        try:
            return real(self, state, *args)
        finally:
            state.workflow = wf

    Scheduler._apply_map = old  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scheduler._apply_map = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _a_failed_undo_refills_the_next() -> Iterator[None]:
    """18dade6: a failure's accounting refilled its stripe whatever the tolerance, so the
    failure that decided a map sent one more item, and a map compensation undid the next item
    after an undo that had failed (the failure bound left out: `fanout.tolerated` unbounded)."""
    from shepherd.decisions import fanout as fo

    real = fo.tolerated
    fo.tolerated = lambda total, spec: None  # type: ignore[assignment,return-value]
    try:
        yield
    finally:
        fo.tolerated = real


@dataclass(frozen=True)
class Regression:
    seed: int
    faults: Faults
    invariant: str
    bug: Callable[[], contextlib.AbstractContextManager[None]]
    note: str
    config: SimConfig = field(
        default_factory=lambda: SimConfig(
            workflow_types=CLASSIC_TYPES, sweep_groups=1, leases=False, breaker=False
        )
    )
    """The workload the seed was found with: definitions added to the simulator later are
    left out, and so are the supervisor's fan-out over leased groups and the outage pool's
    circuit breaker (issue 26: its counters and reads are store calls), so they do not move
    it."""


# The fault mix the seeds below were found with, spelled out on a `none` base: a fault kind
# added to the simulator later stays off for them (each kind draws from its own stream), so
# adding one does not move these seeds.
MIX_1 = Faults.parse(
    "none,delay=0.05,dup=0.05,reorder=0.08,lose=0.04,crash_before=0.03,crash_after=0.03,"
    "pause=0.03,hang=0.02,retryable=0.08,permanent=0.03,store_before=0.004,store_after=0.004,"
    "slow=0.03,double_sweep=0.03,sweep_crash=0.02,clock_jump=0.005,cancel=0.05,redrive=0.5"
)

# MIX_1 with every probability x3 and every FAILED workflow redriven, plus the watch index lag.
MIX_2 = Faults.parse(
    "none,delay=0.15,dup=0.15,reorder=0.24,lose=0.12,crash_before=0.09,crash_after=0.09,"
    "pause=0.09,hang=0.06,retryable=0.24,permanent=0.09,store_before=0.012,store_after=0.012,"
    "slow=0.09,index_lag=0.6,double_sweep=0.09,sweep_crash=0.06,clock_jump=0.015,cancel=0.15,"
    "redrive=1"
)

# The default mix when the operator model was added, spelled out, with every workflow type of
# that time: the seeds found with it stay where they are when later kinds or types are added.
MIX_3 = Faults.parse(
    "none,delay=0.05,dup=0.05,reorder=0.08,lose=0.04,crash_before=0.03,crash_after=0.03,"
    "pause=0.03,hang=0.02,retryable=0.08,permanent=0.03,oversize=0.02,store_before=0.004,"
    "store_after=0.004,slow=0.03,index_lag=0.2,double_sweep=0.03,sweep_crash=0.02,"
    "clock_jump=0.005,cancel=0.05,redrive=0.5,operator=0.1"
)
# MIX_3 with every probability x4 and pools paused now and then (`--scale 4` when it was added).
MIX_4 = Faults.parse(
    "none,delay=0.2,dup=0.2,reorder=0.32,lose=0.16,crash_before=0.12,crash_after=0.12,"
    "pause=0.12,hang=0.08,retryable=0.32,permanent=0.12,oversize=0.08,store_before=0.016,"
    "store_after=0.016,slow=0.12,index_lag=0.8,double_sweep=0.12,sweep_crash=0.08,"
    "clock_jump=0.02,cancel=0.2,redrive=1,operator=0.4,pool_pause=0.04"
)
# The default mix when maps joined the simulator (issue 24), spelled out.
MIX_5 = Faults.parse(
    "none,delay=0.05,dup=0.05,reorder=0.08,lose=0.04,crash_before=0.03,crash_after=0.03,"
    "pause=0.03,hang=0.02,retryable=0.08,permanent=0.03,oversize=0.02,store_before=0.004,"
    "store_after=0.004,slow=0.03,payload_slow=0.02,payload_put=0.01,payload_get=0.01,"
    "index_lag=0.2,double_sweep=0.03,sweep_crash=0.02,lease_expiry=0.5,clock_jump=0.005,"
    "cancel=0.05,redrive=0.5,operator=0.1,pool_pause=0.01,outage=0.01,schedule_dup=0.2,"
    "relay_delay=0.02,relay_crash=0.03,relay_fail=0.01"
)
OPERATOR_TYPES = SimConfig(
    workflow_types=(
        "order_fulfilment",
        "provision_environment",
        "sim_fan",
        "sim_flash",
        "sim_hold",
    ),
    sweep_groups=1,
    leases=False,
    breaker=False,
)

REGRESSIONS = [
    Regression(
        # Found as seed 30; re-seeded as the simulator grew.
        973,
        MIX_1,
        "superseded",
        _waiting_reports_any_ended_attempt_as_succeeded,
        "a callback agent froze after handing its token out, the supervisor timed the "
        "attempt out (FAILED, unwinding), and the late Pending was reported as SUCCEEDED",
    ),
    Regression(
        # Found as seed 51637; re-seeded as the engine grew (isolated looks, ATTEMPTED), when
        # provision_environment's configure got OnFailure: PAUSE, and when step items became
        # lazy (issue 16: a start writes one item, which moves every later fault draw); as 767
        # in issue 26 (the bug's stand-in had not followed `move_due`'s `shard` argument since
        # issue 23, so every look with it failed and the seed caught nothing); as 432 when the
        # order example gained its review and reminder steps (issue 25).
        432,
        MIX_2,
        "status",
        _workflow_writes_guarded_by_status_only,
        "an agent's slow advance finished the workflow FAILED after an operator had redriven "
        "it, with the redriven compensation still running",
    ),
    Regression(
        # Found as seed 1589; re-seeded when the supervisor was partitioned and the deadline
        # rule replaced `L + G` (issue 23), and pools could retire (issue 28).
        1135,
        MIX_3,
        "findable",
        _operator_writes_unguarded_when_due,
        "an operator's cancel of a PAUSED workflow was slow; meanwhile the supervisor took "
        "the paused workflow (nothing in flight, no pause timeout) out of the watch index; "
        "the cancel landed and left it CANCELLING, unwatched, its compensation unsupervised",
        OPERATOR_TYPES,
    ),
    Regression(
        # Found as seed 18; re-seeded when sim_fan's east got its seconds-long backoff, when
        # step items became lazy (issue 16, as 24), with issues 23 and 28 (as 28), and when a
        # callback's answer began pulling the watch entry again after its write (issue 26, as
        # 30), and when the order example gained its review and reminder steps (issue 25, as 5).
        5,
        MIX_3,
        "superseded",
        _failed_attempt_forgets_its_token,
        "a callback step's agent raised after handing its token out; a late callback with "
        "that genuine token was told 'unknown token' (404) instead of 'stale' (409)",
        OPERATOR_TYPES,
    ),
    Regression(
        # Found as seed 956 at x4 (issues 23 and 28, seeking new seeds for the others).
        956,
        MIX_4,
        "findable",
        _pause_unguarded_when_due,
        "an operator's pause read the workflow with its entry due at once and was slow; a look "
        "planned on the RUNNING workflow moved the entry 2 s on; the pause landed on the status "
        "alone, and its 1 s pause timeout was found late",
        OPERATOR_TYPES,
    ),
    Regression(
        # Found as seed 1601 of the default mix (issue 24, the first 2,000-seed run with maps);
        # this seed reaches it in the replay mode below.
        193,
        MIX_5,
        "paused",
        _paused_look_sends_the_next_item,
        "a look at a PAUSED workflow counted a map item and sent the next item's message, "
        "having read the pause",
        SimConfig(workflow_types=("sim_map",)),
    ),
    Regression(
        # Found as seeds 2712, 6311 and 6319 of the default mix (issue 24, the first 10,000-seed
        # run with maps); this seed reaches it in the replay mode below (150 did until the
        # supervisor looked ahead).
        274,
        MIX_5,
        "item_compensation",
        _a_failed_undo_refills_the_next,
        "under REVERSE an item's undo failed for good, and the write that counted it sent the "
        "next item's undo, which ran",
        SimConfig(workflow_types=("sim_map",)),
    ),
    Regression(
        36,
        MIX_3,
        "findable",
        _pause_leaves_the_entry_past_its_timeout,
        "sim_fan's PauseTimeoutSeconds (1) is shorter than its other timeouts; a pause left "
        "the watch entry up to G later than the pause timeout, which was then found late",
        OPERATOR_TYPES,
    ),
]


@pytest.fixture(autouse=True)
def _trajectories_the_seeds_were_found_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded seeds replay the engine's trajectories from before issue 16: heartbeats
    every HeartbeatSeconds/3, and every look moving its watch entry (`leave_due=False` in each
    run's config). Both changes are cost-only, and the full simulation runs with them."""
    from shepherd.engine import agent

    monkeypatch.setattr(agent, "HEARTBEATS_PER_TIMEOUT", 3)


@pytest.mark.parametrize("case", REGRESSIONS, ids=lambda c: f"seed{c.seed}")
def test_regression_seed_holds(case: Regression) -> None:
    result = run_seed(case.seed, case.faults, replace(case.config, leave_due=False))
    assert result.violations == [], [str(v) for v in result.violations]


@pytest.mark.parametrize("case", REGRESSIONS, ids=lambda c: f"seed{c.seed}")
def test_regression_seed_still_catches_its_bug(case: Regression) -> None:
    with case.bug():
        result = run_seed(case.seed, case.faults, replace(case.config, leave_due=False))
    assert case.invariant in {v.invariant for v in result.violations}, case.note


NOW = 1_767_225_600_000


def _order_with(reserve: StepRecord) -> tuple[WorkflowState, planner.Definition]:
    """order_fulfilment `wf1` RUNNING at NOW: its root `reserve` as given, the rest PENDING."""
    definition = definitions()["order_fulfilment"]
    wf = WorkflowRecord(
        "wf1", definition.name, "h", WorkflowStatus.RUNNING, "{}", "o", "r", NOW, NOW
    )
    steps = {
        reserve.name: reserve,
        **{
            n: StepRecord("wf1", "step", n, StepStatus.PENDING)
            for n in definition.topological_order
            if n != reserve.name
        },
    }
    return WorkflowState(wf, steps), definition


def test_a_step_waiting_out_a_backoff_is_due_when_its_claim_could_act() -> None:
    """The 5facc48 bug's situation under the deadline rule: one step in a 4 s backoff, sent
    with an SQS delay, nothing else live. Its claim can come at the backoff's end and create
    deadlines `g` after it, so the entry is due then, not at `now + G` every time."""
    state, definition = _order_with(
        StepRecord(
            "wf1",
            "step",
            "reserve_inventory",
            StepStatus.QUEUED,
            attempt=2,
            dispatched_at=NOW,
            available_at=NOW + 4000,
        )
    )
    due = planner.next_due(state, definition, NOW)
    assert due == NOW + 4000 + definition.reach_gap_ms["reserve_inventory"]


# ------------------------------------------------------------------ known engine gaps
# A gap the engine's owner has not closed (docs/simulation.md, Engine gaps). Each test shows
# the gap as it is: closing it fails the test, which then turns into a regression test.


def test_known_gap_a_never_sent_step_is_due_at_its_pools_resume() -> None:
    """Found as seed 20819 at x4 (an operator's resume failed after its transaction, before
    sending); no seed shows it since step items became lazy, so it is shown on the planner: a
    queued step never sent waits for its paused pool, the look moves the entry to `now + g`,
    and the pool's resume makes the step due at once, sooner than that entry."""
    state, definition = _order_with(
        StepRecord(
            "wf1", "step", "reserve_inventory", StepStatus.QUEUED, attempt=2, available_at=NOW
        )
    )
    pool = definition.by_name["reserve_inventory"].pool
    paused = {pool: PoolState(pool, paused=True, paused_at=NOW - 1000)}
    due = planner.next_due(state, definition, NOW, paused)
    gap = definition.reach_gap_ms["reserve_inventory"]
    assert due == NOW + gap  # nothing is due while the pool is paused: looked at every g
    resumed_at = NOW + 1000
    resumed = {pool: PoolState(pool, paused=False, paused_at=NOW - 1000, resumed_at=resumed_at)}
    actions = planner.plan(
        state, definition, resumed_at, supervisor=True, rng=random.Random(1), pools=resumed
    )
    assert [type(a).__name__ for a in actions] == ["Dispatch"]  # due at the resume ...
    assert due > resumed_at  # ... which the watch entry does not know of: found up to g late
