"""One deadline rule (issue 40.2): when the supervisor acts on a step (`planner.plan`), when
the workflow's watch entry is due (`planner.next_due`) and the countdown `GET /workflows/{id}`
shows (`deadlines.next_deadline`) read the same functions (`shepherd.decisions.deadlines`),
so they agree: after a dependency a condition skipped, over generated states of every status
a task step passes through."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from shepherd.decisions.deadlines import Deadline, lost_at, next_deadline
from shepherd.decisions.planner import Action, next_due, plan
from shepherd.definitions import parse_definition
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus

T0 = 1_767_225_600_000
NEVER = {"Variable": "$.input.x", "NumericEquals": 2}


def _task(name: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {
        "Name": name,
        "Agent": "work",
        "Pool": "p",
        "TimeoutSeconds": 30,
        "HeartbeatSeconds": 7,
        "DependsOn": list(deps),
        **extra,
    }


DEFINITION = parse_definition(
    {
        "Name": "chain",
        "DispatchTimeoutSeconds": 20,
        "Steps": [_task("a"), _task("b", "a", Condition=NEVER), _task("c", "b")],
    },
    "chain",
)


def _state(**steps: StepRecord) -> WorkflowState:
    wf = WorkflowRecord(
        workflow_id="wf1",
        wf_type="chain",
        def_hash=DEFINITION.content_hash,
        status=WorkflowStatus.RUNNING,
        input='{"x": 1}',
        created_at=T0,
        updated_at=T0,
        owner="ada",
        request_hash="h",
    )
    state = WorkflowState(wf)
    for name in DEFINITION.topological_order:
        rec = steps.get(name) or StepRecord("wf1", "step", name, StepStatus.PENDING)
        state.put(replace(rec, wf_type="chain"))
    return state


def _on(actions: list[Action], name: str) -> list[Action]:
    return [a for a in actions if getattr(getattr(a, "seen", None), "name", None) == name]


def _supervisor(state: WorkflowState, now: int) -> list[Action]:
    return plan(state, DEFINITION, now, supervisor=True, rng=random.Random(0))


def test_a_step_after_a_skipped_dependency_shows_the_deadline_the_supervisor_acts_on() -> None:
    done = T0 + 2_000
    state = _state(
        a=StepRecord("wf1", "step", "a", StepStatus.SUCCEEDED, attempt=1, finished_at=T0 + 1_000),
        b=StepRecord("wf1", "step", "b", StepStatus.SKIPPED, finished_at=done),
    )
    c = state.steps["c"]
    shown = next_deadline(state, DEFINITION, "step", c, done, {})
    # Its message went out with the skip: lost if unclaimed for the dispatch grace.
    assert shown == Deadline(done + 20_000, "dispatch")
    assert not _on(_supervisor(state, done + 19_999), "c")
    assert _on(_supervisor(state, done + 20_000), "c")
    due = next_due(state, DEFINITION, done, {})
    assert due is not None and due <= done + 20_000


def _generated(rng: random.Random) -> tuple[WorkflowState, int]:
    """A RUNNING chain at a random point: `a` in any live status, or done and `c` (past the
    skipped `b`) in any live status, with random times; and a moment to look at it."""
    now = T0 + rng.randrange(1_000, 60_000)
    live = rng.choice(["PENDING", "QUEUED_SENT", "QUEUED_BACKOFF", "QUEUED_LONG", "RUNNING"])
    name = rng.choice(["a", "c"])
    t = lambda: now - rng.randrange(0, 40_000)  # noqa: E731 - a time before now
    rec = StepRecord("wf1", "step", name, StepStatus.PENDING)
    if live == "QUEUED_SENT":  # a dispatch write records both
        sent = t()
        rec = replace(
            rec, status=StepStatus.QUEUED, attempt=1, dispatched_at=sent, available_at=sent
        )
    elif live == "QUEUED_BACKOFF":  # a short retry's message sent with its delay
        sent = t()
        delay = rng.randrange(0, 10_000)
        rec = replace(
            rec, status=StepStatus.QUEUED, attempt=2, dispatched_at=sent, available_at=sent + delay
        )
    elif live == "QUEUED_LONG":  # a long backoff, sent by the supervisor when it ends
        rec = replace(
            rec,
            status=StepStatus.QUEUED,
            attempt=2,
            available_at=now + rng.randrange(-5_000, 5_000),
        )
    elif live == "RUNNING":
        claimed = t()
        beat = rng.choice([None, claimed + rng.randrange(0, 20_000)])
        rec = replace(
            rec,
            status=StepStatus.RUNNING,
            attempt=1,
            dispatched_at=claimed,
            claimed_at=claimed,
            heartbeat_at=beat,
        )
    if name == "a":
        return _state(a=rec), now
    a = StepRecord("wf1", "step", "a", StepStatus.SUCCEEDED, attempt=1, finished_at=t())
    b = StepRecord("wf1", "step", "b", StepStatus.SKIPPED, finished_at=a.finished_at)
    return _state(a=a, b=b, c=rec), now


@pytest.mark.parametrize("seed", range(300))
def test_the_view_the_watch_and_the_supervisor_agree(seed: int) -> None:
    rng = random.Random(seed)
    state, now = _generated(rng)
    name = "a" if state.steps["a"].status is not StepStatus.SUCCEEDED else "c"
    rec = state.steps[name]
    shown = next_deadline(state, DEFINITION, "step", rec, now, {})
    assert shown is not None and shown.at is not None, rec
    # The watch entry is due no later than the deadline the view shows.
    due = next_due(state, DEFINITION, now, {})
    assert due is not None and due <= max(shown.at, now), (due, shown, rec)
    # The supervisor acts on the step at that deadline, and not a moment before it.
    at = max(shown.at, now)
    assert _on(_supervisor(state, at), name), (shown, rec)
    if shown.at > now:
        assert not _on(_supervisor(state, shown.at - 1), name), (shown, rec)


def test_the_dispatch_grace_is_one_function() -> None:
    """The view's dispatch deadline is the supervisor's `lost_at` (a rate-limited pool's
    reservation included), never a grace of its own."""
    state = _state()
    a = state.steps["a"]
    from shepherd.model import PoolState

    pools = {"p": PoolState("p", reserved_until=T0 + 5_000)}
    shown = next_deadline(state, DEFINITION, "step", a, T0, pools)
    assert shown == Deadline(lost_at(T0, pools["p"], DEFINITION), "dispatch")
    assert shown.at == T0 + 5_000 + 20_000
