"""Every invariant checker fails on a hand-made state that violates it, and passes on the
same state made right: no check in the simulator is one that cannot fail."""

from __future__ import annotations

import random
from typing import Any

import pytest
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus
from shepherd_sim.invariants import (
    Handled,
    RunRecord,
    check_all,
    check_attempts_within_policy,
    check_compensation_exact,
    check_effects_once,
    check_findable,
    check_no_lost_workflow,
    check_no_superseded_result,
    check_status_consistent,
    check_terminal_within_bound,
)
from shepherd_sim.service import Call, Effect, FakeService
from shepherd_sim.sim import definitions

DEFS = definitions()
WF = "wf000001"
T0 = 1_767_225_600_000
ORDER_STEPS = ("reserve_inventory", "charge_payment", "ship_order", "notify_customer")
S, F, C = StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.CANCELLED


def ok(attempt: int, at: int) -> dict[str, Any]:
    return {"a": attempt, "o": "ok", "t": at}


def step(name: str, status: StepStatus, attempt: int = 1, at: int = 0, **kw: Any) -> StepRecord:
    """A step as the engine would leave it; a SUCCEEDED one finished at T0 + at seconds."""
    finished = T0 + at * 1000 if status.terminal else None
    history = kw.pop("history", None)
    if history is None:
        history = (ok(attempt, finished or 0),) if status is S else ()
    output = kw.pop("output", f'{{"attempt":{attempt}}}' if status is S else None)
    return StepRecord(
        WF,
        kw.pop("kind", "step"),
        name,
        status,
        attempt=attempt,
        finished_at=finished,
        history=tuple(history),
        output=output,
        **kw,
    )


def workflow(
    status: WorkflowStatus, steps: list[StepRecord], comps: list[StepRecord] = (), **kw: Any
) -> list[dict[str, Any]]:
    wf = WorkflowRecord(
        workflow_id=WF,
        wf_type=kw.pop("wf_type", "order_fulfilment"),
        def_hash="h",
        status=status,
        input="{}",
        owner="sim",
        request_hash="r",
        created_at=T0,
        updated_at=T0 + 60_000,
        finished_at=T0 + 60_000 if status.terminal else None,
        **kw,
    )
    return [wf.to_item(), *(s.to_item() for s in steps), *(c.to_item() for c in comps)]


def comp(name: str, status: StepStatus = S, attempt: int = 1, at: int = 50) -> StepRecord:
    return step(name, status, attempt, at, kind="compensation")


def record(items: list[dict[str, Any]], service: FakeService | None = None, **kw: Any) -> RunRecord:
    service = service or FakeService()
    return RunRecord(
        items=items,
        definitions=DEFS,
        calls=service.calls,
        effects=service.effect_list(),
        accepted={WF: T0},
        end_ms=T0 + 100_000,
        **kw,
    )


def apply(
    service: FakeService, name: str, kind: str = "step", attempt: int = 1, **kw: Any
) -> Effect:
    suffix = ":compensate" if kind == "compensation" else ""
    return service.apply(
        at=0,
        workflow_id=WF,
        kind=kind,
        step=name,
        attempt=attempt,
        key=kw.pop("key", f"{WF}:{name}{suffix}"),
        **kw,
    )


def succeeded_order() -> list[dict[str, Any]]:
    return workflow(
        WorkflowStatus.SUCCEEDED, [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    )


def compensated_order(undo_order: tuple[str, ...]) -> tuple[list[dict[str, Any]], FakeService]:
    """reserve and charge succeeded (at 1 s and 2 s), ship failed; undone in `undo_order`."""
    items = workflow(
        WorkflowStatus.COMPENSATED,
        [
            step("reserve_inventory", S, at=1),
            step("charge_payment", S, at=2),
            step("ship_order", F, at=3),
            step("notify_customer", C, at=3),
        ],
        [comp("reserve_inventory"), comp("charge_payment")],
    )
    service = FakeService()
    apply(service, "reserve_inventory")
    apply(service, "charge_payment")
    for name in undo_order:
        apply(service, name, "compensation", inputs=((name, 1),))
    return items, service


def test_a_clean_run_passes_every_checker() -> None:
    items, service = compensated_order(("charge_payment", "reserve_inventory"))
    assert check_all(record(items, service)) == []
    assert check_all(record(succeeded_order())) == []


# ----------------------------------------------------------------------- 1. termination


def test_terminal_fails_for_a_workflow_still_running() -> None:
    items = workflow(WorkflowStatus.RUNNING, [step(n, StepStatus.PENDING) for n in ORDER_STEPS])
    (v,) = check_terminal_within_bound(record(items))
    assert v.invariant == "terminal" and "still RUNNING" in v.message


def test_terminal_fails_when_the_bound_is_exceeded() -> None:
    items = succeeded_order()  # finished 60 s after it started
    assert check_terminal_within_bound(record(items, bounds={WF: T0 + 60_000})) == []
    (v,) = check_terminal_within_bound(record(items, bounds={WF: T0 + 59_999}))
    assert "later than its bound" in v.message


# ----------------------------------------------------------------------- 2. effects once


def test_effect_applied_twice_under_two_keys_is_caught() -> None:
    service = FakeService()
    apply(service, "charge_payment", attempt=1, key=f"{WF}:charge_payment:1")
    apply(service, "charge_payment", attempt=2, key=f"{WF}:charge_payment:2")
    found = check_effects_once(record(succeeded_order(), service))
    assert {v.invariant for v in found} == {"effect_once"}
    assert any("2 different idempotency keys" in v.message for v in found)
    assert any("applied its effect 2 times" in v.message for v in found)


def test_the_same_key_called_twice_applies_once() -> None:
    service = FakeService()
    first = apply(service, "charge_payment", attempt=1)
    again = apply(service, "charge_payment", attempt=2)
    assert first == again and len(service.calls) == 2 and len(service.effects) == 1
    assert check_effects_once(record(succeeded_order(), service)) == []


# ------------------------------------------------------------------ 3. exact compensation


def test_compensation_in_the_wrong_order_is_caught() -> None:
    items, service = compensated_order(("reserve_inventory", "charge_payment"))
    (v,) = check_compensation_exact(record(items, service))
    assert v.invariant == "compensation" and "before 'charge_payment'" in v.message


def test_a_dependent_is_undone_before_its_dependency_even_at_the_same_time() -> None:
    items = workflow(
        WorkflowStatus.COMPENSATED,
        [
            step("reserve_inventory", S, at=1),
            step("charge_payment", S, at=1),  # same finished_at (simulated clock)
            step("ship_order", F, at=3),
            step("notify_customer", C, at=3),
        ],
        [comp("reserve_inventory"), comp("charge_payment")],
    )
    service = FakeService()
    apply(service, "reserve_inventory", "compensation")
    apply(service, "charge_payment", "compensation")
    (v,) = check_compensation_exact(record(items, service))
    assert "depends on 'reserve_inventory'" in v.message


def test_missing_compensation_is_caught() -> None:
    items, service = compensated_order(("charge_payment",))
    found = check_compensation_exact(record(items, service))
    assert any(
        "'reserve_inventory', which may have acted, was never compensated" in v.message
        for v in found
    )
    assert any("SUCCEEDED but its effect was never applied" in v.message for v in found)


def test_compensating_a_step_that_never_succeeded_is_caught() -> None:
    items, service = compensated_order(("charge_payment", "reserve_inventory"))
    apply(service, "ship_order", "compensation")
    (v,) = check_compensation_exact(record(items, service))
    assert "'ship_order' was compensated but it is FAILED" in v.message


def test_a_claimed_step_that_failed_must_be_compensated_under_attempted() -> None:
    """`When: ATTEMPTED`: a failed step that was claimed may have acted; leaving it undone
    is a violation, and undoing it is not."""
    items, service = compensated_order(("charge_payment", "reserve_inventory"))
    items = [
        {**i, "first_claimed_at": T0 + 2500} if i["sk"] == "S#ship_order" else i for i in items
    ]
    found = check_compensation_exact(record(items, service))
    assert any("'ship_order', which may have acted" in v.message for v in found)
    # Undone first (its first claim is the latest, and it depends on charge_payment).
    items, service = compensated_order(())
    items = [
        {**i, "first_claimed_at": T0 + 2500} if i["sk"] == "S#ship_order" else i for i in items
    ]
    items.append(comp("ship_order").to_item())
    for name in ("ship_order", "charge_payment", "reserve_inventory"):
        apply(service, name, "compensation")
    assert check_compensation_exact(record(items, service)) == []


def test_undo_before_the_effect_it_undoes_is_caught() -> None:
    items, _ = compensated_order(())
    service = FakeService()
    apply(service, "reserve_inventory")
    apply(service, "charge_payment", "compensation")
    apply(service, "charge_payment")
    apply(service, "reserve_inventory", "compensation")
    (v,) = check_compensation_exact(record(items, service))
    assert "'charge_payment' was undone (call #2) before its effect" in v.message


# ------------------------------------------------------ 4. nothing from a superseded attempt


def test_zombie_result_in_history_or_output_is_caught() -> None:
    steps = [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    steps[2] = step(
        "ship_order",
        S,
        attempt=2,
        at=3,
        history=({"a": 1, "o": "ok", "t": 1}, {"a": 2, "o": "heartbeat_timeout", "t": 2}),
        output='{"attempt":1}',
    )
    found = check_no_superseded_result(record(workflow(WorkflowStatus.SUCCEEDED, steps)))
    messages = " | ".join(v.message for v in found)
    assert "accepted results of attempts [1]" in messages
    assert "recorded the output of attempt 1" in messages


def test_an_attempt_that_ended_twice_is_caught() -> None:
    steps = [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    steps[0] = step("reserve_inventory", S, history=(ok(1, 1), ok(1, 2)))
    found = check_no_superseded_result(record(workflow(WorkflowStatus.SUCCEEDED, steps)))
    assert any("attempt 1 ended 2x" in v.message for v in found)


def test_runtime_reporting_a_zombie_success_is_caught() -> None:
    steps = [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    steps[1] = step("charge_payment", S, attempt=2, at=2)
    handled = [
        Handled(T0, WF, "step", "charge_payment", 1, "succeeded"),
        Handled(T0, WF, "step", "charge_payment", 2, "succeeded"),
    ]
    found = check_no_superseded_result(
        record(workflow(WorkflowStatus.SUCCEEDED, steps), handled=handled)
    )
    assert any("results accepted for attempts [1, 2]" in v.message for v in found)
    only_zombie = check_no_superseded_result(
        record(workflow(WorkflowStatus.SUCCEEDED, steps), handled=handled[:1])
    )
    assert any(
        "attempt(s) [1] succeeded, but the step is SUCCEEDED at attempt 2" in v.message
        for v in only_zombie
    )
    assert (
        check_no_superseded_result(
            record(workflow(WorkflowStatus.SUCCEEDED, steps), handled=handled[1:])
        )
        == []
    )


def test_consuming_a_superseded_output_is_caught() -> None:
    steps = [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    steps[0] = step("reserve_inventory", S, attempt=2, at=1)
    service = FakeService()
    apply(service, "charge_payment", inputs=(("reserve_inventory", 1),))
    (v,) = check_no_superseded_result(record(workflow(WorkflowStatus.SUCCEEDED, steps), service))
    assert "given the output of 'reserve_inventory' attempt 1" in v.message


# ------------------------------------------------------------------------ 5 and 6


def test_an_accepted_workflow_that_vanished_is_lost() -> None:
    (v,) = check_no_lost_workflow(record([]))
    assert v.invariant == "lost" and v.workflow_id == WF
    assert check_no_lost_workflow(record(succeeded_order())) == []


def test_attempts_beyond_the_retry_policy_are_caught() -> None:
    steps = [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    steps[1] = step("charge_payment", S, attempt=5, at=2)  # MaxAttempts 3: at most 4
    (v,) = check_attempts_within_policy(record(workflow(WorkflowStatus.SUCCEEDED, steps)))
    assert "reached attempt 5; its policy allows 4" in v.message
    steps[1] = step("charge_payment", S, attempt=4, at=2)
    assert check_attempts_within_policy(record(workflow(WorkflowStatus.SUCCEEDED, steps))) == []


# -------------------------------------------------------------- 7. status agrees with steps


@pytest.mark.parametrize(
    ("status", "steps", "comps", "expected"),
    [
        (WorkflowStatus.SUCCEEDED, ["S", "S", "F", "C"], [], "SUCCEEDED but steps"),
        (WorkflowStatus.COMPENSATED, ["S", "C", "C", "C"], ["S"], "no step FAILED"),
        (
            WorkflowStatus.COMPENSATED,
            ["S", "S", "F", "C"],
            ["S"],
            "compensation of step 'charge_payment' (which may have acted) is missing",
        ),
        (WorkflowStatus.FAILED, ["S", "S", "F", "C"], ["S", "S"], "no compensation failed"),
        (
            WorkflowStatus.COMPENSATED,
            ["S", "F", "RUNNING", "C"],
            ["S"],
            "'ship_order' is still RUNNING",
        ),
        (
            WorkflowStatus.CANCELLED,
            ["S", "F", "C", "C"],
            ["S", "S"],
            "a compensation exists for 'charge_payment'",
        ),
    ],
)
def test_final_status_must_agree_with_the_steps(
    status: WorkflowStatus, steps: list[str], comps: list[str], expected: str
) -> None:
    statuses = {"S": S, "F": F, "C": C, "RUNNING": StepStatus.RUNNING}
    recs = [
        step(n, statuses[s], at=i + 1)
        for i, (n, s) in enumerate(zip(ORDER_STEPS, steps, strict=True))
    ]
    comp_recs = [comp(n, statuses[s]) for n, s in zip(ORDER_STEPS, comps, strict=False)]
    found = check_status_consistent(record(workflow(status, recs, comp_recs)))
    assert any(expected in v.message for v in found), found


def test_a_terminal_workflow_left_in_the_watch_index_is_caught() -> None:
    items = workflow(
        WorkflowStatus.SUCCEEDED,
        [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)],
        watch_shard="W#1",
        due_at=T0,
    )
    (v,) = check_status_consistent(record(items))
    assert "still in the watch index" in v.message


# ------------------------------------------------------------ the watch index, online check


def test_overdue_work_hidden_behind_a_later_due_at_is_caught() -> None:
    hb_at = T0 + 1000
    running = step("reserve_inventory", StepStatus.RUNNING, claimed_at=hb_at, heartbeat_at=hb_at)
    rest = [step(n, StepStatus.PENDING, attempt=0) for n in ORDER_STEPS[1:]]

    def state(due_at: int) -> WorkflowState:
        items = workflow(WorkflowStatus.RUNNING, [running, *rest], watch_shard="W#0", due_at=due_at)
        found = WorkflowState.from_items(items)
        assert found is not None
        return found

    now = hb_at + 3000  # HeartbeatSeconds 3: the heartbeat deadline is now
    definition = DEFS["order_fulfilment"]
    assert check_findable(state(now), definition, now, random.Random(0)) == []
    (v,) = check_findable(state(now + 1), definition, now, random.Random(0))
    assert v.invariant == "findable" and "EndAttempt of 'reserve_inventory'" in v.message
    gone = WorkflowState.from_items(workflow(WorkflowStatus.RUNNING, [running, *rest]))
    assert gone is not None
    (v,) = check_findable(gone, definition, now, random.Random(0))
    assert "not in the index" in v.message


def test_calls_record_what_each_attempt_was_given() -> None:
    service = FakeService()
    apply(service, "charge_payment", inputs=(("reserve_inventory", 1),))
    assert service.calls == [
        Call(
            1,
            0,
            WF,
            "step",
            "charge_payment",
            1,
            f"{WF}:charge_payment",
            (("reserve_inventory", 1),),
        )
    ]


def test_finishing_twice_or_as_the_wrong_status_is_caught() -> None:
    from shepherd_sim.invariants import check_finish_events, missing_events

    done = ("WorkflowSucceeded", {"workflow_id": WF})
    assert check_finish_events(record(succeeded_order(), events=[done])) == []
    twice = check_finish_events(record(succeeded_order(), events=[done, done]))
    assert any("finished 2 times" in v.message for v in twice)
    failed = ("WorkflowFailed", {"workflow_id": WF})
    redriven = workflow(
        WorkflowStatus.SUCCEEDED,
        [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)],
        redrives=1,
    )
    assert check_finish_events(record(redriven, events=[failed, done])) == []
    assert check_finish_events(record(redriven, events=[done, done])) != []
    assert check_finish_events(record(redriven, events=[failed])) == []  # end not announced
    assert check_finish_events(record(redriven, events=[failed, failed])) != []
    wrong = ("WorkflowFailed", {"workflow_id": WF})
    (v,) = check_finish_events(record(succeeded_order(), events=[wrong]))
    assert "announced ['WorkflowFailed'] but it is SUCCEEDED" in v.message
    assert missing_events(record(succeeded_order())) == [WF]
    assert missing_events(record(succeeded_order(), events=[done])) == []


def test_findable_tolerates_only_the_lateness_of_that_records_writes() -> None:
    hb_at = T0 + 1000
    running = step("reserve_inventory", StepStatus.RUNNING, claimed_at=hb_at, heartbeat_at=hb_at)
    rest = [step(n, StepStatus.PENDING, attempt=0) for n in ORDER_STEPS[1:]]
    now = hb_at + 3000
    items = workflow(WorkflowStatus.RUNNING, [running, *rest], watch_shard="W#0", due_at=now + 500)
    state = WorkflowState.from_items(items)
    assert state is not None
    definition = DEFS["order_fulfilment"]
    late = {running.key: 500}
    assert (
        check_findable(state, definition, now, random.Random(0), lambda r: late.get(r.key, 0)) == []
    )
    assert check_findable(state, definition, now, random.Random(0), lambda r: 499) != []
    assert check_findable(state, definition, now, random.Random(0)) != []
