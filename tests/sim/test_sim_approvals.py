"""Approvals and schedules in the fault simulator (issue 25, point 5).

A person answers every waiting approval of `sim_approval` through the real `Approvals.decide`
(`shepherd_sim.people`): before, around or after its deadline, sometimes twice, sometimes
someone who may not. The seeds below show an answer and the timeout racing, each approval
ending once; then each new invariant is shown to catch a broken engine: the bug is put back
(a context manager that restores the real code) and the violation must appear on a seed that
is clean without it, as in `test_sim_regressions.py`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from shepherd.model import StepRecord, WorkflowRecord, WorkflowStatus
from shepherd_sim import Faults, SimConfig, Simulation, run_seed
from shepherd_sim.invariants import (
    ApprovalCall,
    Firing,
    RunRecord,
    approval_endings,
    check_schedule_firings,
    inbox_problems,
)
from shepherd_sim.sim import definitions

APPROVALS = SimConfig(workflow_types=("sim_approval",))


def _run(seed: int) -> tuple[Simulation, RunRecord]:
    sim = Simulation(seed, Faults(), config=APPROVALS)
    result = sim.run()
    assert result.violations == [], [str(v) for v in result.violations]
    return sim, sim.record()


def test_a_person_and_the_timeout_race_and_the_approval_ends_once() -> None:
    """Seed 92: `sim` began approving 87 ms before the deadline (it read the step WAITING);
    its request was slow, the supervisor's timeout (looking ahead, at the deadline itself)
    landed first, and `sim` was told ApprovalNotPending: the attempt ended once, by the
    timeout. In another workflow of the same seed `alice` answered 0.7 s after the deadline
    and won: the deadline fell in the look-ahead margin (the last 0.1 s before the next
    sweep), and that sweep's timeout write was throttled (`store_before`); the timeout,
    planned again on a step no longer waiting, never wrote.
    (Seed 20 showed both before sweeps looked ahead; now its late answer comes after the
    timeout, which lands at the deadline.)"""
    sim, record = _run(92)
    endings = approval_endings(record)
    assert endings and all(len(hows) == 1 for hows in endings.values()), endings

    def review(workflow_id: str) -> StepRecord:
        return StepRecord.from_item(sim.memory.peek(f"WF#{workflow_id}", "S#review") or {})

    lost = [
        c
        for c in sim.approval_calls
        if c.outcome == "not_pending"
        and c.waiting == 1
        and endings[(c.workflow_id, c.step, 1)] == ["timed out"]
    ]  # (another answer lost to an answer, not to the timeout, in this seed)
    assert lost, sim.approval_calls
    call = lost[0]
    step = review(call.workflow_id)
    assert step.wake_at is not None and step.finished_at is not None
    assert call.started < step.wake_at <= step.finished_at <= call.ended  # a race, really
    assert [h["o"] for h in step.history] == ["timeout"]  # one entry for the attempt
    won_late = [
        c
        for c in sim.approval_calls
        if c.outcome == "ok"
        and endings[(c.workflow_id, c.step, 1)] == ["approved" if c.approve else "rejected"]
        and (review(c.workflow_id).finished_at or 0) >= (review(c.workflow_id).wake_at or 0)
    ]
    assert won_late, "no answer won after its deadline"
    assert [h["o"] for h in review(won_late[0].workflow_id).history] in (["ok"], ["error"])


def test_people_answer_in_every_way_across_seeds() -> None:
    """Across seeds: approvals approved, rejected, timed out; answers lost to another answer
    and to the timeout; double clicks and two approvers at once; intruders told 'not found';
    and a schedule's firing delivered more than once, starting one workflow each time."""
    stats: Any = {}
    for seed in range(30):
        result = run_seed(seed, Faults(), APPROVALS)
        assert result.violations == [], [str(v) for v in result.violations]
        for name, n in result.stats.items():
            stats[name] = stats.get(name, 0) + n
    for name in (
        "approvals_approved",
        "approvals_rejected",
        "approvals_timed_out",
        "approvals_answered_after_their_deadline",
        "approval_answers_lost_a_race",
        "approval_answers_lost_to_the_timeout",
        "approval_answers_not_found",
        "approval_double_clicks",
        "approval_two_approvers_at_once",
        "schedule_firings_started",
    ):
        assert stats.get(name, 0) > 0, (name, stats)
    assert stats["schedule_deliveries_ok"] > stats["schedule_firings_started"]


# ------------------------------------------------------------------ bugs put back


@contextlib.contextmanager
def _decide_guarded_by_the_attempt_alone() -> Iterator[None]:
    """An answer's write (and the timeout's) guarded by the attempt only, not by WAITING and
    the deadline it saw: a second answer, or a timeout after an answer, ends it again."""
    from shepherd.conditions import Eq
    from shepherd.decisions import transitions as tx

    real = tx.decide

    def decide(rec: StepRecord, now: int, **kwargs: Any) -> tx.Write:
        w = real(rec, now, **kwargs)
        return tx.Write(w.pk, w.sk, w.update, Eq("attempt", rec.attempt))

    tx.decide = decide  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.decide = real  # type: ignore[assignment]


@contextlib.contextmanager
def _inbox_never_cleared() -> Iterator[None]:
    """The answer, the timeout and a cancel leave the inbox items listed."""
    from shepherd.engine.scheduler import Scheduler

    real = Scheduler.inbox_cleared
    Scheduler.inbox_cleared = lambda self, *args, **kwargs: []  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scheduler.inbox_cleared = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _inbox_never_written() -> Iterator[None]:
    """An approval starts waiting without its inbox items: nobody sees it listed."""
    from shepherd.decisions import transitions as tx

    real = tx.inbox_entries
    tx.inbox_entries = lambda *args, **kwargs: []  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.inbox_entries = real  # type: ignore[assignment]


@contextlib.contextmanager
def _anyone_may_answer() -> Iterator[None]:
    """The principal check left out: anyone who names the workflow answers as the owner."""
    from shepherd.engine.approvals import Approvals

    real = Approvals.decide

    def decide(self: Approvals, workflow_id: str, step: str, **kwargs: Any) -> StepRecord:
        loaded = self.scheduler.load(workflow_id)
        if loaded is not None:
            kwargs["principal"] = loaded[0].workflow.owner
        return real(self, workflow_id, step, **kwargs)

    Approvals.decide = decide  # type: ignore[method-assign]
    try:
        yield
    finally:
        Approvals.decide = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _every_start_a_new_id() -> Iterator[None]:
    """A start's workflow id not derived from its owner and key alone: a firing delivered
    twice starts two workflows."""
    from shepherd.engine import scheduler

    real = scheduler.derived_id
    n = itertools.count()
    scheduler.derived_id = lambda owner, key: real(owner, f"{key}#{next(n)}")
    try:
        yield
    finally:
        scheduler.derived_id = real


@dataclass(frozen=True)
class Broken:
    seed: int
    invariant: str
    bug: Callable[[], contextlib.AbstractContextManager[None]]
    note: str


BROKEN = [
    Broken(
        7,
        "approvals",
        _decide_guarded_by_the_attempt_alone,
        "two answers at once both wrote: the approval ended twice",
    ),
    Broken(0, "inbox", _inbox_never_cleared, "an approval timed out and stayed listed"),
    Broken(0, "inbox", _inbox_never_written, "an approval waited and nobody saw it listed"),
    Broken(
        6,
        "approvals",
        _anyone_may_answer,
        "mallory, in no Approvers list, answered and was not told the workflow does not exist",
    ),
    Broken(3, "schedule", _every_start_a_new_id, "a firing delivered 3x started 3 workflows"),
]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.bug.__name__.strip("_"))
def test_the_seed_is_clean_on_the_engine_as_it_is(case: Broken) -> None:
    result = run_seed(case.seed, Faults(), APPROVALS)
    assert result.violations == [], [str(v) for v in result.violations]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.bug.__name__.strip("_"))
def test_the_invariant_catches_the_bug_put_back(case: Broken) -> None:
    with case.bug():
        result = run_seed(case.seed, Faults(), APPROVALS)
    assert case.invariant in {v.invariant for v in result.violations}, case.note


# ------------------------------------------------------------------ the checkers by hand

WF = "wf1"
# `alice` and `bob` in sim_approval's Approvers: the local stack's callers of those names.
ALICE = "arn:aws:iam::000000000000:user/alice"
BOB = "arn:aws:iam::000000000000:user/bob"


def _partition(status: str, *, listed: tuple[str, ...], requested: int = 5000) -> list[Any]:
    """sim_approval `wf1` owned by `sim`, its `review` as given, inbox items (written at
    `requested`) for `sim`, `alice` and `bob`, those in `listed` still carrying their keys."""
    from shepherd.keys import inbox_item_sk, inbox_pk, inbox_shard, inbox_sk

    wf = WorkflowRecord(
        WF, "sim_approval", "h", WorkflowStatus.RUNNING, "{}", "sim", "r", 1000, 1000
    )
    items: list[Any] = [
        wf.to_item(),
        {
            "pk": f"WF#{WF}",
            "sk": "S#review",
            "status": status,
            "attempt": 1,
            "claimed_at": 5000,
            "wake_at": 8000,
        },
    ]
    for who in ("sim", ALICE, BOB):
        item = {"pk": f"WF#{WF}", "sk": inbox_item_sk("review", who), "requested_at": requested}
        if who in listed:
            item |= {
                "inbox_pk": inbox_pk(who, inbox_shard(WF)),
                "inbox_sk": inbox_sk(requested, WF, "review"),
                "approval_due_at": 8000,
            }
        items.append(item)
    return items


def test_the_inbox_check_wants_exactly_the_waiting_approvals_listed() -> None:
    definition = definitions()["sim_approval"]
    everyone = ("sim", ALICE, BOB)
    assert inbox_problems(_partition("WAITING", listed=everyone), definition) == []
    assert inbox_problems(_partition("SUCCEEDED", listed=()), definition) == []
    (stale,) = inbox_problems(_partition("FAILED", listed=(BOB,)), definition)
    assert stale == f"'review' is FAILED but is still listed in '{BOB}''s inbox"
    (missing,) = inbox_problems(_partition("WAITING", listed=("sim", BOB)), definition)
    assert f"'{ALICE}''s inbox item is not listed for it" in missing
    old = inbox_problems(_partition("WAITING", listed=everyone, requested=1000), definition)
    assert len(old) == 3  # listed for an earlier attempt's request, not this one's


def test_the_firing_check_wants_one_workflow_per_key() -> None:
    key = "schedule:n:2026-01-01T02:00:00"
    one = {"pk": "WF#a", "sk": "#WF", "owner": "o", "idempotency_key": key}
    firings = [Firing(1, key, "o", "ok", "a", True), Firing(2, key, "o", "ok", "a", False)]
    defs = definitions()
    assert check_schedule_firings(RunRecord([one], defs, firings=firings)) == []
    two = {**one, "pk": "WF#b"}
    twice = [*firings[:1], Firing(2, key, "o", "ok", "b", True)]
    (v,) = check_schedule_firings(RunRecord([one, two], defs, firings=twice))
    assert "2 workflows in the table" in v.message and "2 deliveries were told" in v.message
    failed = [Firing(1, key, "o", "error:StoreTimeout")]
    assert check_schedule_firings(RunRecord([one], defs, firings=failed)) == []
    (v,) = check_schedule_firings(RunRecord([], defs, firings=firings))
    assert "0 workflows in the table" in v.message


def test_an_intruder_told_anything_but_not_found_is_caught() -> None:
    """From the calls alone: someone in no Approvers list told ApprovalNotPending (the check
    came after the status) or making a write is a violation; told 'not found', none."""
    from shepherd_sim.invariants import check_approvals

    items = _partition("WAITING", listed=("sim", ALICE, BOB))
    defs = definitions()

    def call(outcome: str, writes: int = 0) -> ApprovalCall:
        return ApprovalCall(1, 2, WF, "review", "mallory", True, outcome, writes=writes)

    assert check_approvals(RunRecord(items, defs, approval_calls=[call("not_found")])) == []
    for bad in (call("not_pending"), call("ok"), call("not_found", writes=1)):
        (v,) = check_approvals(RunRecord(items, defs, approval_calls=[bad]))
        assert v.invariant == "approvals" and "may not answer" in v.message
