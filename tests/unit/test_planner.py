"""The planner (pure): what happens to each kind of step, given its state, policy and time."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from shepherd.decisions.planner import (
    HEARTBEAT_TIMEOUT,
    TIMEOUT,
    Cancel,
    Dispatch,
    EndAttempt,
    Finish,
    SendImplicit,
    StartCompensation,
    Unwind,
    compensation_order,
    next_due,
    plan,
)
from shepherd.decisions.retry import GiveUp, RetryIn
from shepherd.model import (
    PoolState,
    StepRecord,
    StepStatus,
    WorkflowRecord,
    WorkflowState,
    WorkflowStatus,
)
from support import DEFINITIONS, order_tasks_only

ORDER = order_tasks_only()  # reserve -> charge -> ship -> notify, DispatchTimeout 10
ENV = DEFINITIONS["provision_environment"]  # network, storage -> compute -> configure -> verify
T0 = 1_000_000
S = 1000


def wf(status: WorkflowStatus = WorkflowStatus.RUNNING, definition: Any = ORDER) -> WorkflowRecord:
    return WorkflowRecord(
        workflow_id="w",
        wf_type=definition.name,
        def_hash=definition.content_hash,
        status=status,
        input="{}",
        owner="o",
        request_hash="h",
        created_at=T0,
        updated_at=T0,
    )


def step(name: str, status: StepStatus, **kw: Any) -> StepRecord:
    attempt = kw.pop("attempt", 0 if status is StepStatus.PENDING else 1)
    return StepRecord("w", kw.pop("kind", "step"), name, status, attempt=attempt, **kw)


def done(name: str, at: int) -> StepRecord:
    return step(name, StepStatus.SUCCEEDED, finished_at=at, output='{"ok":true}')


def state(
    *records: StepRecord,
    status: WorkflowStatus = WorkflowStatus.RUNNING,
    definition: Any = ORDER,
) -> WorkflowState:
    s = WorkflowState(wf(status, definition))
    for name in definition.topological_order:
        s.put(step(name, StepStatus.PENDING))
    for r in records:
        s.put(r)
    return s


def run(
    s: WorkflowState,
    now: int,
    *,
    supervisor: bool = True,
    completed: str | None = None,
    definition: Any = ORDER,
) -> list[Any]:
    return plan(
        s, definition, now, supervisor=supervisor, completed=completed, rng=random.Random(0)
    )


# ------------------------------------------------------------------ supervisor, per kind of step

RUNNING_CHARGE = dict(claimed_at=T0, heartbeat_at=T0)  # charge: Timeout 8 s, Heartbeat 3 s


@pytest.mark.parametrize(
    ("charge", "now", "expected"),
    [
        # dispatched, not yet overdue (DispatchTimeoutSeconds 10)
        (
            step("charge_payment", StepStatus.QUEUED, dispatched_at=T0, available_at=T0),
            T0 + 9 * S,
            None,
        ),
        # dispatched, never claimed, overdue: the message was lost -> re-dispatch
        (
            step("charge_payment", StepStatus.QUEUED, dispatched_at=T0, available_at=T0),
            T0 + 10 * S,
            "redispatch",
        ),
        # a retry whose backoff was too long for an SQS delay: dispatch when due, not before
        (
            step("charge_payment", StepStatus.QUEUED, attempt=2, available_at=T0 + 5 * S),
            T0 + 4 * S,
            None,
        ),
        (
            step("charge_payment", StepStatus.QUEUED, attempt=2, available_at=T0 + 5 * S),
            T0 + 5 * S,
            "dispatch",
        ),
        # running with a fresh heartbeat
        (step("charge_payment", StepStatus.RUNNING, **RUNNING_CHARGE), T0 + 2 * S, None),
        # heartbeat missed: timed out, retried (attempt 1 of 1 + 3)
        (
            step("charge_payment", StepStatus.RUNNING, **RUNNING_CHARGE),
            T0 + 3 * S,
            HEARTBEAT_TIMEOUT,
        ),
        # heartbeating but past TimeoutSeconds
        (
            step("charge_payment", StepStatus.RUNNING, claimed_at=T0, heartbeat_at=T0 + 7 * S),
            T0 + 8 * S,
            TIMEOUT,
        ),
    ],
)
def test_supervisor_action_per_kind_of_step(
    charge: StepRecord, now: int, expected: str | None
) -> None:
    s = state(done("reserve_inventory", T0 - S), charge)
    actions = run(s, now)
    if expected is None:
        assert actions == []
    elif expected in ("redispatch", "dispatch"):
        assert actions == [
            Dispatch(charge, lost=expected == "redispatch", overdue_ms=now - T0 - 10 * S)
        ] or (expected == "dispatch" and actions == [Dispatch(charge, lost=False)])
    else:
        (action,) = actions
        assert isinstance(action, EndAttempt)
        assert action.error_type == expected and action.seen == charge
        assert isinstance(action.decision, RetryIn)


def test_timed_out_last_attempt_fails_the_step() -> None:
    charge = step(
        "charge_payment", StepStatus.RUNNING, attempt=4, **RUNNING_CHARGE
    )  # 1 + 3 retries
    (action,) = run(state(done("reserve_inventory", T0 - S), charge), T0 + 3 * S)
    assert isinstance(action, EndAttempt) and action.decision == GiveUp("exhausted")


def test_agents_never_act_on_time() -> None:
    charge = step("charge_payment", StepStatus.RUNNING, **RUNNING_CHARGE)
    assert (
        run(state(done("reserve_inventory", T0 - S), charge), T0 + 60 * S, supervisor=False) == []
    )


# ------------------------------------------------------------------------------- DAG readiness


def test_single_dependency_successor_is_sent_implicitly_by_its_completer() -> None:
    s = state(done("reserve_inventory", T0))
    assert run(s, T0, supervisor=False, completed="reserve_inventory") == [
        SendImplicit("charge_payment")
    ]
    # Anyone else leaves it alone until the dispatch deadline passes.
    assert run(s, T0 + 9 * S) == []
    charge = s.steps["charge_payment"]
    assert run(s, T0 + 10 * S) == [Dispatch(charge, lost=True, overdue_ms=0)]


def test_join_waits_for_every_dependency_and_is_dispatched_by_a_write() -> None:
    one = state(done("create_network", T0), definition=ENV)
    assert run(one, T0, supervisor=False, completed="create_network", definition=ENV) == []
    both = state(done("create_network", T0), done("create_storage", T0), definition=ENV)
    compute = both.steps["create_compute"]
    for completer in ("create_network", "create_storage"):
        actions = run(both, T0, supervisor=False, completed=completer, definition=ENV)
        assert actions == [Dispatch(compute, lost=False)]


def test_all_steps_succeeded_finishes_and_reads_back_every_output() -> None:
    """The workflow output is its steps' outputs, assembled on read, never copied into the
    workflow item (which would then grow with every step: shepherd.limits)."""
    from shepherd.engine.outputs import workflow_output

    s = state(*(done(n, T0 + i) for i, n in enumerate(ORDER.topological_order)))
    (action,) = run(s, T0 + 10, supervisor=False)
    assert isinstance(action, Finish) and action.status is WorkflowStatus.SUCCEEDED
    assert action.error is None
    assert workflow_output(s, ORDER) is None  # not yet SUCCEEDED
    s.workflow = replace(s.workflow, status=WorkflowStatus.SUCCEEDED)
    assert workflow_output(s, ORDER) == {n: {"ok": True} for n in ORDER.topological_order}


# ------------------------------------------------------------------------------- compensation


def test_a_failed_step_starts_unwinding() -> None:
    failed = step(
        "charge_payment", StepStatus.FAILED, error='{"type":"CardDeclined","message":"no"}'
    )
    (action,) = run(state(done("reserve_inventory", T0), failed), T0, supervisor=False)
    assert isinstance(action, Unwind) and action.failed_step == "charge_payment"
    assert "CardDeclined" in action.error


def test_unwinding_cancels_unclaimed_steps_and_waits_for_running_ones() -> None:
    s = state(
        done("create_network", T0),
        step("create_storage", StepStatus.RUNNING, claimed_at=T0, heartbeat_at=T0),
        step("create_compute", StepStatus.PENDING),
        status=WorkflowStatus.COMPENSATING,
        definition=ENV,
    )
    actions = run(s, T0 + 1, supervisor=False, definition=ENV)
    assert {a.seen.name for a in actions if isinstance(a, Cancel)} == {
        "create_compute",
        "configure",
        "verify",
    }
    for name in ("create_compute", "configure", "verify"):
        s.put(replace(s.steps[name], status=StepStatus.CANCELLED))
    assert run(s, T0 + 1, supervisor=False, definition=ENV) == []  # storage may still succeed
    # A running attempt that times out while unwinding is not retried.
    (timeout,) = run(s, T0 + 4 * S, definition=ENV)
    assert isinstance(timeout, EndAttempt) and timeout.decision == GiveUp("unwinding")


def test_compensations_run_one_at_a_time_in_reverse_completion_order() -> None:
    s = state(
        done("create_storage", T0 + 1),
        done("create_network", T0 + 5),  # finished after storage
        done("create_compute", T0 + 9),
        step("configure", StepStatus.FAILED),
        step("verify", StepStatus.CANCELLED),
        status=WorkflowStatus.COMPENSATING,
        definition=ENV,
    )
    assert compensation_order(s, ENV) == ["create_compute", "create_network", "create_storage"]
    seen = []
    for _ in range(4):
        actions = run(s, T0 + 100, supervisor=False, definition=ENV)
        if isinstance(actions[0], Finish):
            break
        (start,) = actions
        assert isinstance(start, StartCompensation)
        seen.append(start.name)
        comp = step(start.name, StepStatus.SUCCEEDED, kind="compensation", finished_at=T0 + 200)
        s.put(comp)
    assert seen == ["create_compute", "create_network", "create_storage"]
    assert actions == [Finish(WorkflowStatus.COMPENSATED)]


def test_equal_completion_times_undo_dependents_first() -> None:
    s = state(done("reserve_inventory", T0), done("charge_payment", T0), done("ship_order", T0))
    assert compensation_order(s, ORDER) == ["ship_order", "charge_payment", "reserve_inventory"]


def test_steps_without_compensation_or_success_are_never_compensated() -> None:
    s = state(
        done("reserve_inventory", T0),
        done("charge_payment", T0 + 1),
        step("ship_order", StepStatus.FAILED),
        status=WorkflowStatus.COMPENSATING,
    )
    assert compensation_order(s, ORDER) == ["charge_payment", "reserve_inventory"]
    s.put(done("notify_customer", T0 + 2))  # has no compensation
    assert "notify_customer" not in compensation_order(s, ORDER)


def test_a_failed_compensation_needs_an_operator() -> None:
    s = state(
        done("reserve_inventory", T0),
        done("charge_payment", T0 + 1),
        step("ship_order", StepStatus.FAILED),
        step("notify_customer", StepStatus.CANCELLED),
        step("charge_payment", StepStatus.FAILED, kind="compensation", attempt=6),
        status=WorkflowStatus.COMPENSATING,
    )
    (action,) = run(s, T0 + 10, supervisor=False)
    assert isinstance(action, Finish) and action.status is WorkflowStatus.FAILED
    assert "operator" in (action.error or "") and "charge_payment" in (action.error or "")


def test_cancelling_ends_cancelled() -> None:
    s = state(
        step("reserve_inventory", StepStatus.CANCELLED),
        step("charge_payment", StepStatus.CANCELLED),
        step("ship_order", StepStatus.CANCELLED),
        step("notify_customer", StepStatus.CANCELLED),
        status=WorkflowStatus.CANCELLING,
    )
    assert run(s, T0) == [Finish(WorkflowStatus.CANCELLED)]


# ------------------------------------------------------------------------- the watch deadline


def test_next_due_is_never_later_than_any_deadline() -> None:
    charge = step("charge_payment", StepStatus.RUNNING, claimed_at=T0, heartbeat_at=T0 + 2 * S)
    s = state(done("reserve_inventory", T0 - S), charge)
    # heartbeat deadline T0+5s, timeout T0+8s, and now + G (G = 2 s for order_fulfilment)
    assert next_due(s, ORDER, T0 + 2 * S) == T0 + 4 * S
    assert next_due(s, ORDER, T0 + 4 * S) == T0 + 5 * S


def test_next_due_covers_a_ready_step_whose_message_may_be_lost() -> None:
    s = state(done("reserve_inventory", T0))
    assert next_due(s, ORDER, T0 + 9 * S) == T0 + 10 * S  # dispatch deadline before now + G


def test_a_task_a_rate_limiter_holds_is_lost_only_a_grace_after_the_furthest_reserved_slot() -> (
    None
):
    """A rate-limited pool's task may wait with a ticket for a slot up to the furthest its
    limiter reserved (`reserved_until`, as the sweep read it): not lost before a grace after
    that, nor later than a grace after a reservation's horizon (issue 26.1: a copy sent
    earlier reserved a slot nobody used). A pool reserved nothing ahead: the grace alone."""
    queued = step("charge_payment", StepStatus.QUEUED, dispatched_at=T0, available_at=T0)
    ready = state(done("reserve_inventory", T0))  # sent when it became ready (PENDING)
    for s, rec in ((state(done("reserve_inventory", T0 - S), queued), queued),
                   (ready, ready.steps["charge_payment"])):  # fmt: skip
        pool = ORDER.by_name["charge_payment"].pool
        ahead = {pool: PoolState(pool, reserved_until=T0 + 300 * S)}
        assert plan(s, ORDER, T0 + 10 * S, supervisor=True, rng=random.Random(1), pools=ahead) == []
        assert plan(s, ORDER, T0 + 310 * S, supervisor=True, rng=random.Random(1), pools=ahead) == [
            Dispatch(rec, lost=True, overdue_ms=0)
        ]
        assert next_due(s, ORDER, T0 + 309 * S, ahead) == T0 + 310 * S
        far = {pool: PoolState(pool, reserved_until=T0 + 10_000 * S)}
        assert next_due(s, ORDER, T0 + 908 * S, far) == T0 + (899 + 10) * S
        idle = {pool: PoolState(pool, reserved_until=T0 - S)}
        assert next_due(s, ORDER, T0 + 9 * S, idle) == T0 + 10 * S


def test_terminal_workflows_have_no_due() -> None:
    assert next_due(state(status=WorkflowStatus.SUCCEEDED), ORDER, T0) is None
