"""Every invariant checker fails on a hand-made state that violates it, and passes on the
same state made right: no check in the simulator is one that cannot fail."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from shepherd.changes import Change, events_of
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus
from shepherd_sim.bounds import Timing, pause_timeout_budget_ms, paused_wait_ms
from shepherd_sim.invariants import (
    Claim,
    Handled,
    Redispatch,
    RunRecord,
    Sent,
    StatusWrite,
    check_all,
    check_attempts_within_policy,
    check_circuit_moves,
    check_claims,
    check_compensation_exact,
    check_effects_once,
    check_findable,
    check_inputs_given,
    check_no_lost_workflow,
    check_no_orphaned_effects,
    check_no_superseded_result,
    check_open_circuit_claims_nothing,
    check_pause_respected,
    check_paused_pools_wait,
    check_paused_starts_nothing,
    check_skips_and_waits,
    check_status_consistent,
    check_terminal_within_bound,
    decided_before_pause,
    orphaned_effects,
)
from shepherd_sim.relay import Delivery
from shepherd_sim.service import Call, Effect, FakeService
from shepherd_sim.sim import definitions
from support import order_tasks_only

# The hand-made orders are the example's saga of 4 tasks (its fraud review and reminder, which
# the simulated small orders skip, are left out: `check_skips_and_waits` has its own states).
DEFS = {**definitions(), "order_fulfilment": order_tasks_only()}
WF = "wf000001"
T0 = 1_767_225_600_000
ORDER_STEPS = ("reserve_inventory", "charge_payment", "ship_order", "notify_customer")
S, F, C = StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.CANCELLED


def ok(attempt: int, at: int) -> dict[str, Any]:
    return {"a": attempt, "o": "ok", "t": at}


def step(name: str, status: StepStatus, attempt: int = 1, at: int = 0, **kw: Any) -> StepRecord:
    """A step as the engine would leave it; a SUCCEEDED one finished at T0 + at seconds."""
    finished = T0 + at * 1000 if status.terminal else None
    if status is S:  # claimed half a second before it finished
        kw.setdefault("first_claimed_at", (finished or T0) - 500)
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


def claims_of(items: list[dict[str, Any]]) -> list[Claim]:
    """The claims a consistent record implies: one per item with a `first_claimed_at`."""
    out = []
    for item in items:
        if item["sk"][:2] in ("S#", "C#") and item.get("first_claimed_at") is not None:
            rec = StepRecord.from_item(item)
            at = int(item["first_claimed_at"])
            out.append(Claim(at, WF, rec.kind, rec.name, max(rec.attempt, 1), at))
    return sorted(out, key=lambda c: c.at)


def stream_of(items: list[dict[str, Any]]) -> list[Change]:
    """The table's stream a consistent record implies for its workflow item: created RUNNING,
    then one write to the status it is in."""
    wf = next((i for i in items if i["sk"] == "#WF"), None)
    if wf is None:
        return []
    running = {**wf, "status": "RUNNING"}
    changes = [Change(None, running, f"{1:021d}")]
    if wf["status"] != "RUNNING":
        changes.append(Change(running, wf, f"{2:021d}"))
    return changes


def record(items: list[dict[str, Any]], service: FakeService | None = None, **kw: Any) -> RunRecord:
    """A RunRecord of hand-made items; unless told otherwise, the claims that landed are the
    ones the items' `first_claimed_at` imply, the stream is `stream_of` (each event it
    announces delivered once), and the service's undo memory is its own."""
    service = service or FakeService()
    kw.setdefault("claims", claims_of(items))
    kw.setdefault("changes", stream_of(items))
    kw.setdefault("deliveries", _delivered(kw["changes"]))
    kw.setdefault("undone", dict(service.undone))
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
    """One service call, as a sim agent makes it: an undo names the forward key it undoes."""
    suffix = ":compensate" if kind == "compensation" else ""
    if kind == "compensation":
        kw.setdefault("undoes", f"{WF}:{name}")
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
    """reserve and charge succeeded (at 1 s and 2 s), ship failed; undone in `undo_order`
    (each compensation claimed and finished in that order, from 50 s on)."""
    at = {name: 50 + i for i, name in enumerate(undo_order)}
    items = workflow(
        WorkflowStatus.COMPENSATED,
        [
            step("reserve_inventory", S, at=1),
            step("charge_payment", S, at=2),
            step("ship_order", F, at=3),
            step("notify_customer", C, at=3),
        ],
        [
            comp(name, at=at.get(name, 50 + len(undo_order)))
            for name in ("reserve_inventory", "charge_payment")
        ],
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
    """Undone (effects) and started (claims) in the wrong order: each is caught."""
    items, service = compensated_order(("reserve_inventory", "charge_payment"))
    found = check_compensation_exact(record(items, service))
    assert {v.invariant for v in found} == {"compensation"}
    assert any("undone (call #3) before 'charge_payment'" in v.message for v in found)
    assert any(
        "compensation of 'reserve_inventory' was claimed at" in v.message
        and "that of 'charge_payment' (which must be undone first)" in v.message
        for v in found
    )
    assert len(found) == 2


def test_a_dependent_is_undone_before_its_dependency_even_at_the_same_time() -> None:
    items = workflow(
        WorkflowStatus.COMPENSATED,
        [
            step("reserve_inventory", S, at=1),
            step("charge_payment", S, at=1),  # same finished_at (simulated clock)
            step("ship_order", F, at=3),
            step("notify_customer", C, at=3),
        ],
        [comp("reserve_inventory", at=50), comp("charge_payment", at=51)],
    )
    service = FakeService()
    apply(service, "reserve_inventory", "compensation")
    apply(service, "charge_payment", "compensation")
    found = check_compensation_exact(record(items, service))
    assert any("depends on 'reserve_inventory'" in v.message for v in found)
    assert any("of 'reserve_inventory' was claimed at" in v.message for v in found)
    assert len(found) == 2


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
    items, service = compensated_order(("ship_order", "charge_payment", "reserve_inventory"))
    items = [
        {**i, "first_claimed_at": T0 + 2500} if i["sk"] == "S#ship_order" else i for i in items
    ]
    items.append(comp("ship_order", at=50).to_item())
    for name in ("ship_order", "charge_payment", "reserve_inventory"):
        apply(service, name, "compensation")
    assert check_compensation_exact(record(items, service)) == []


def test_undo_before_the_effect_it_undoes_is_caught() -> None:
    items, _ = compensated_order(("charge_payment", "reserve_inventory"))
    service = FakeService()
    apply(service, "reserve_inventory")
    # A service that does not remember the undone key (so the late forward call applies).
    apply(service, "charge_payment", "compensation", undoes=None)
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


def _wf_change(before: str | None, after: str, seq: int, redrives: int = 0) -> Change:
    """A write of the workflow item moving it from `before` (None: created) to `after`."""
    new = {**workflow(WorkflowStatus(after), [], redrives=redrives)[0], "updated_at": T0 + seq}
    old = None if before is None else {**new, "status": before}
    return Change(old, new, f"{seq:021d}")


def _started_and(*ends: tuple[str, str, int]) -> list[Change]:
    """Start, then each (from, to, redrives) status write, in order."""
    changes = [_wf_change(None, "RUNNING", 1)]
    changes += [_wf_change(a, b, i + 2, r) for i, (a, b, r) in enumerate(ends)]
    return changes


def test_finishing_twice_or_as_the_wrong_status_is_caught() -> None:
    from shepherd_sim.invariants import check_finish_events

    done = ("RUNNING", "SUCCEEDED", 0)
    assert check_finish_events(record(succeeded_order(), changes=_started_and(done))) == []
    twice = check_finish_events(
        record(succeeded_order(), changes=_started_and(done, ("SUCCEEDED", "RUNNING", 0), done))
    )
    assert any("finished 2 times" in v.message for v in twice)
    redriven = workflow(
        WorkflowStatus.SUCCEEDED,
        [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)],
        redrives=1,
    )
    failed = ("COMPENSATING", "FAILED", 0)
    redrive = ("FAILED", "COMPENSATING", 1)
    fine = _started_and(failed, redrive, ("COMPENSATING", "SUCCEEDED", 1))
    assert check_finish_events(record(redriven, changes=fine)) == []
    wrong_first = _started_and(("RUNNING", "CANCELLED", 0), redrive, ("RUNNING", "SUCCEEDED", 1))
    assert check_finish_events(record(redriven, changes=wrong_first)) != []
    # A terminal workflow whose end no write announced (its last end was a FAILED since
    # redriven) is caught: the events would say it is still failed.
    (v,) = check_finish_events(record(redriven, changes=_started_and(failed, redrive)))
    assert "announced ['WorkflowFailed'] but it is SUCCEEDED" in v.message
    (v,) = check_finish_events(
        record(succeeded_order(), changes=_started_and(("RUNNING", "FAILED", 0)))
    )
    assert "announced ['WorkflowFailed'] but it is SUCCEEDED" in v.message
    (v,) = check_finish_events(record(succeeded_order(), changes=_started_and()))
    assert "announced [] but it is SUCCEEDED" in v.message


def _delivered(changes: list[Change], *, via: str = "relay") -> list[Delivery]:
    """Every event the changes announce, delivered once, in order."""
    return [
        Delivery(T0, e.detail_type, dict(e.detail), via)
        for change in changes
        for e in events_of(change)
    ]


def test_an_announced_event_never_delivered_is_caught() -> None:
    from shepherd_sim.invariants import check_events_delivered, missing_events

    changes = _started_and(("RUNNING", "SUCCEEDED", 0))
    delivered = _delivered(changes)
    assert [d.detail_type for d in delivered] == ["WorkflowStarted", "WorkflowSucceeded"]
    ok_record = record(succeeded_order(), changes=changes, deliveries=delivered)
    assert check_events_delivered(ok_record) == [] and missing_events(ok_record) == []
    # Delivered twice is fine (at least once); never delivered is not.
    twice = record(succeeded_order(), changes=changes, deliveries=[*delivered, *delivered])
    assert check_events_delivered(twice) == []
    lost = record(succeeded_order(), changes=changes, deliveries=delivered[:1])
    (v,) = check_events_delivered(lost)
    assert v.invariant == "events_delivered" and "terminal event WorkflowSucceeded" in v.message
    assert [e.detail_type for e in missing_events(lost)] == ["WorkflowSucceeded"]


def test_an_invented_or_altered_event_or_a_reused_id_is_caught() -> None:
    from shepherd_sim.invariants import check_events_real

    changes = _started_and(("RUNNING", "SUCCEEDED", 0))
    delivered = _delivered(changes)
    assert check_events_real(record(succeeded_order(), changes=changes, deliveries=delivered)) == []
    # A duplicate with its own id is an invented event (a subscriber could not drop it).
    fresh_id = replace(delivered[1], detail={**delivered[1].detail, "event_id": "f" * 32})
    (v,) = check_events_real(
        record(succeeded_order(), changes=changes, deliveries=[*delivered, fresh_id])
    )
    assert v.invariant == "events_real" and "matches no change" in v.message
    # The right id on a different event (another status) is an altered one.
    altered = replace(delivered[1], detail={**delivered[1].detail, "status": "FAILED"})
    (v,) = check_events_real(record(succeeded_order(), changes=changes, deliveries=[altered]))
    assert "differs from what its change announced" in v.message
    # No change at all behind an event: invented.
    (v,) = check_events_real(record(succeeded_order(), changes=[], deliveries=delivered[:1]))
    assert "matches no change" in v.message
    # Two different transitions with one id: a deduplicating subscriber would lose one.
    again = _started_and(
        ("RUNNING", "SUCCEEDED", 0), ("SUCCEEDED", "RUNNING", 0), ("RUNNING", "SUCCEEDED", 0)
    )
    (v,) = check_events_real(record(succeeded_order(), changes=again, deliveries=[]))
    assert "reuses the event_id" in v.message


def test_a_workflow_s_events_out_of_order_are_caught() -> None:
    from shepherd_sim.invariants import check_events_ordered

    changes = _started_and(("RUNNING", "PAUSED", 0), ("PAUSED", "RUNNING", 0))
    started, paused, resumed = _delivered(changes)
    fine = [started, paused, started, paused, resumed]  # a redelivery repeats older ones
    assert check_events_ordered(record(succeeded_order(), deliveries=fine)) == []
    (v,) = check_events_ordered(record(succeeded_order(), deliveries=[started, resumed, paused]))
    assert v.invariant == "events_ordered" and "WorkflowPaused" in v.message
    # A record replayed from the on-failure queue comes late by design.
    late = replace(paused, via="replay")
    assert (
        check_events_ordered(record(succeeded_order(), deliveries=[started, resumed, late])) == []
    )


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
        check_findable(state, definition, now, random.Random(0), lambda key: late.get(key, 0)) == []
    )
    assert check_findable(state, definition, now, random.Random(0), lambda key: 499) != []
    assert check_findable(state, definition, now, random.Random(0)) != []


def test_findable_gives_a_task_its_pool_held_one_look_after_the_release() -> None:
    """A retry never sent (a long backoff) whose pool was held past its end (paused, or its
    circuit open) is looked at every `g` while held: due at most `g` after the pool's
    release, not at the backoff's end (seeds 4818, 6835 and 8924); a pool released long
    before the backoff ended gives no such grace."""
    from shepherd.decisions.planner import reach_gap
    from shepherd.model import PoolState

    definition = DEFS["order_fulfilment"]
    pool = definition.by_name["reserve_inventory"].pool
    gap = reach_gap(definition, "step", "reserve_inventory", True)
    available = T0 + 1000
    queued = step("reserve_inventory", StepStatus.QUEUED, available_at=available)
    rest = [step(n, StepStatus.PENDING, attempt=0) for n in ORDER_STEPS[1:]]

    def violations(due_at: int, released: int | None, now: int) -> list[Any]:
        items = workflow(WorkflowStatus.RUNNING, [queued, *rest], watch_shard="W#0", due_at=due_at)
        state = WorkflowState.from_items(items)
        assert state is not None
        pools = {pool: PoolState(pool, resumed_at=released)}
        return check_findable(state, definition, now, random.Random(0), pools=pools)

    released = available + 9_000  # its circuit went half-open 9 s after the backoff ended
    now = released + 500
    assert violations(released + gap, released, now) == []
    (v,) = violations(released + gap + 1, released, now)
    assert v.invariant == "findable" and "Dispatch of 'reserve_inventory'" in v.message
    # Never held at its deadline: the backoff's end, exactly.
    assert violations(available, available - gap, now) == []
    assert violations(available + 1, available - gap, now) != []
    assert violations(available + 1, None, now) != []


# ---------------------------------------------------------------------- orphaned effects


def failed_ship_order(*, undo_ship: bool, names_key: bool = True) -> RunRecord:
    """ship_order was claimed, applied its effect and failed; reserve and charge succeeded.
    All three are undone, except ship_order's effect unless `undo_ship` (and an undo that
    does not name the forward key it undoes undoes nothing the service remembers)."""
    items = workflow(
        WorkflowStatus.COMPENSATED,
        [
            step("reserve_inventory", S, at=1),
            step("charge_payment", S, at=2),
            step("ship_order", F, at=3, first_claimed_at=T0 + 2500),
            step("notify_customer", C, at=3),
        ],
        [
            comp("ship_order", at=50),
            comp("charge_payment", at=51),
            comp("reserve_inventory", at=52),
        ],
    )
    service = FakeService()
    for name in ("reserve_inventory", "charge_payment", "ship_order"):
        apply(service, name)
    if undo_ship:
        undoes = f"{WF}:ship_order" if names_key else None
        apply(service, "ship_order", "compensation", undoes=undoes)
    apply(service, "charge_payment", "compensation")
    apply(service, "reserve_inventory", "compensation")
    return record(items, service)


def test_an_effect_never_undone_under_attempted_is_an_orphan_and_a_violation() -> None:
    assert check_no_orphaned_effects(failed_ship_order(undo_ship=True)) == []
    (v,) = check_no_orphaned_effects(failed_ship_order(undo_ship=False))
    assert v.invariant == "orphaned" and "'ship_order' (attempt 1, call #3)" in v.message
    assert "ended COMPENSATED (its compensation is When: ATTEMPTED)" in v.message
    # An undo the service cannot tie to the forward key has undone nothing.
    (v,) = check_no_orphaned_effects(failed_ship_order(undo_ship=True, names_key=False))
    assert "'ship_order'" in v.message


def fan_with_a_failed_south(status: WorkflowStatus) -> RunRecord:
    """sim_fan: south (When: SUCCEEDED) was claimed, applied its effect and failed; the
    others that ran succeeded and were undone."""
    items = workflow(
        status,
        [
            step("north", S, at=1),
            step("south", F, at=2, first_claimed_at=T0 + 1500),
            step("east", S, at=1),
            step("north_two", S, at=2),
            step("merge", C, at=3),
            step("report", C, at=3),
        ],
        [comp("north_two", at=50), comp("north", at=51), comp("east", at=50)],
        wf_type="sim_fan",
    )
    service = FakeService()
    for name in ("north", "south", "east", "north_two"):
        apply(service, name)
    for name in ("north_two", "east", "north"):
        apply(service, name, "compensation")
    return record(items, service)


def test_an_effect_never_undone_under_succeeded_is_counted_not_failed() -> None:
    for status in (WorkflowStatus.COMPENSATED, WorkflowStatus.CANCELLED):
        run = fan_with_a_failed_south(status)
        (orphan,) = orphaned_effects(run)
        assert (orphan.effect.step, orphan.when, orphan.status) == ("south", "SUCCEEDED", status)
        assert check_no_orphaned_effects(run) == []


def test_effects_of_steps_without_compensation_or_of_finished_workflows_are_not_orphans() -> None:
    """sim_flash's beta has no compensation; a SUCCEEDED workflow undoes nothing; a FAILED
    one is an operator's to finish."""
    items = workflow(
        WorkflowStatus.COMPENSATED,
        [step("alpha", S, at=1), step("beta", S, at=2), step("gamma", S, at=2), step("delta", F)],
        [comp("gamma", at=50), comp("alpha", at=51)],
        wf_type="sim_flash",
    )
    service = FakeService()
    for name in ("alpha", "beta", "gamma"):
        apply(service, name)
    for name in ("gamma", "alpha"):
        apply(service, name, "compensation")
    assert orphaned_effects(record(items, service)) == []
    service = FakeService()
    for name in ORDER_STEPS:
        apply(service, name)
    assert orphaned_effects(record(succeeded_order(), service)) == []
    failed = failed_ship_order(undo_ship=False)
    failed.items = [{**i, "status": "FAILED"} if i["sk"] == "#WF" else i for i in failed.items]
    assert orphaned_effects(failed) == []


# ---------------------------------------------------------------- claims (ground truth)


def test_a_compensation_of_a_step_never_claimed_is_caught() -> None:
    items, service = compensated_order(("charge_payment", "reserve_inventory"))
    assert check_claims(record(items, service)) == []
    with_ship = [*items, comp("ship_order", at=49).to_item()]
    found = check_claims(record(with_ship, service))
    assert any(
        "step 'ship_order' was never claimed, but its compensation was created" in v.message
        for v in found
    )
    # Only a service call of its compensation (no item left): caught too.
    apply(service, "ship_order", "compensation")
    found = check_claims(record(items, service))
    assert any("its compensation called the service" in v.message for v in found)


def test_first_claimed_at_must_be_the_first_claim_that_landed() -> None:
    items = succeeded_order()
    claims = claims_of(items)
    assert check_claims(record(items, claims=claims)) == []
    moved = [replace(claims[0], claimed_at=claims[0].claimed_at + 1), *claims[1:]]
    (v,) = check_claims(record(items, claims=moved))
    assert (
        v.invariant == "claims" and "step 'reserve_inventory' records first_claimed_at" in v.message
    )
    found = check_claims(record(items, claims=claims[1:]))
    assert any("the first claim that landed wrote None" in v.message for v in found)
    assert any("attempt 1 ended (ok) but was never claimed" in v.message for v in found)
    assert len(found) == 2


def test_an_agent_must_get_the_input_its_step_held_when_claimed() -> None:
    items = succeeded_order()
    claims = [
        replace(c, input_tag=3) if c.step == "charge_payment" else c for c in claims_of(items)
    ]
    given = {(WF, "step", "charge_payment", 1): 3}
    assert check_inputs_given(record(items, claims=claims, given_inputs=given)) == []
    (v,) = check_inputs_given(record(items, given_inputs=given))
    assert v.invariant == "inputs" and "was given input 3, but the step held None" in v.message
    late = {(WF, "step", "charge_payment", 2): None}
    (v,) = check_inputs_given(record(items, given_inputs=late))
    assert "attempt 2 ran, but no claim of it landed" in v.message


# --------------------------------------------------------------------------------- pauses


def sw(at_s: float, role: str, label: str, before: str, after: str, **kw: Any) -> StatusWrite:
    return StatusWrite(T0 + round(at_s * 1000), WF, 0, role, label, before, after, **kw)


PAUSED_BY_FAILURE = sw(
    1, "agent", "", "RUNNING", "PAUSED", pause_reason="failure", paused_at=T0 + 1000
)


@pytest.mark.parametrize(
    ("end", "ok"),
    [
        (sw(5, "client", "resume", "PAUSED", "RUNNING"), True),
        (sw(5, "client", "compensate", "PAUSED", "COMPENSATING"), True),
        (sw(5, "client", "cancel", "PAUSED", "CANCELLING"), True),
        (sw(2, "supA", "", "PAUSED", "COMPENSATING", error_type="PauseTimedOut"), True),
        (sw(5, "agent", "", "PAUSED", "RUNNING"), False),  # temporalio/temporal#10239
        (sw(5, "client", "callback", "PAUSED", "RUNNING"), False),  # a late callback
        (sw(5, "supB", "", "PAUSED", "RUNNING"), False),
        (sw(5, "client", "resume", "PAUSED", "COMPENSATING"), False),
        (sw(5, "client", "redrive", "PAUSED", "COMPENSATING"), False),
        (sw(1.999, "supA", "", "PAUSED", "COMPENSATING", error_type="PauseTimedOut"), False),
    ],
)
def test_a_pause_ends_only_by_an_operator_or_its_timeout(end: StatusWrite, ok: bool) -> None:
    items = workflow(WorkflowStatus.COMPENSATED, [], wf_type="sim_fan")  # PauseTimeoutSeconds 1
    found = check_pause_respected(record(items, status_writes=[PAUSED_BY_FAILURE, end]))
    assert (found == []) is ok, found
    assert all(v.invariant == "paused" for v in found)


def test_a_pause_timeout_needs_a_pause_timeout_and_an_operator_pause_an_operator() -> None:
    items = workflow(WorkflowStatus.COMPENSATED, [], wf_type="sim_hold")  # no pause timeout
    timeout = sw(9, "supA", "", "PAUSED", "COMPENSATING", error_type="PauseTimedOut")
    (v,) = check_pause_respected(record(items, status_writes=[PAUSED_BY_FAILURE, timeout]))
    assert "it was due at None" in v.message
    by_operator = sw(1, "client", "pause", "RUNNING", "PAUSED", pause_reason="operator")
    assert check_pause_respected(record(items, status_writes=[by_operator])) == []
    not_an_operator = replace(by_operator, role="supA", label="")
    (v,) = check_pause_respected(record(items, status_writes=[not_an_operator]))
    assert "paused 'by an operator' by supA" in v.message


def test_nothing_starts_while_paused_unless_decided_before_the_pause() -> None:
    def sent(paused_by: int | None, read: int | None) -> Sent:
        return Sent(T0, WF, "step", "ship_order", 1, "agent", "", paused_by, read)

    assert decided_before_pause(None, None) and decided_before_pause(5, 4)
    items = succeeded_order()
    ok = [sent(None, 3), sent(5, 4)]
    assert check_paused_starts_nothing(record(items, sent=ok)) == []
    for bad in (sent(5, 5), sent(5, 9), sent(5, None)):
        (v,) = check_paused_starts_nothing(record(items, sent=[bad]))
        assert v.invariant == "paused" and "sent step ship_order#1 while" in v.message
    claim = Claim(T0, WF, "step", "ship_order", 1, T0, paused_by=5, read=6)
    found = check_paused_starts_nothing(record(items, claims=[claim]))
    assert any("ship_order#1 was claimed while the workflow was PAUSED" in v.message for v in found)
    assert check_paused_starts_nothing(record(items, claims=[replace(claim, read=4)])) == []


def paused_state(wf_type: str, steps: list[StepRecord], **kw: Any) -> WorkflowState:
    items = workflow(WorkflowStatus.PAUSED, steps, wf_type=wf_type, paused_at=T0, **kw)
    found = WorkflowState.from_items(items)
    assert found is not None
    return found


def test_a_paused_workflow_may_leave_the_index_only_with_nothing_to_watch() -> None:
    hold, fan = DEFS["sim_hold"], DEFS["sim_fan"]
    idle = [step("load", S, at=1), step("apply", F, at=2), step("audit", StepStatus.PENDING)]
    now = T0 + 10_000
    assert check_findable(paused_state("sim_hold", idle), hold, now, random.Random(0)) == []
    running = [*idle[:2], step("audit", StepStatus.RUNNING, claimed_at=now, heartbeat_at=now)]
    (v,) = check_findable(paused_state("sim_hold", running), hold, now, random.Random(0))
    assert "PAUSED but not in the index" in v.message
    fan_steps = [step(n, StepStatus.PENDING, attempt=0) for n in ("north", "south", "east")]
    fan_steps += [step(n, StepStatus.PENDING, attempt=0) for n in ("north_two", "merge", "report")]
    (v,) = check_findable(paused_state("sim_fan", fan_steps), fan, now, random.Random(0))
    assert "PAUSED but not in the index" in v.message  # it has a pause timeout to watch


def test_a_pause_timeout_hidden_behind_a_later_due_at_is_caught() -> None:
    fan = DEFS["sim_fan"]
    steps = [step(n, StepStatus.PENDING, attempt=0) for n in ("north", "south", "east")]
    steps += [step(n, StepStatus.PENDING, attempt=0) for n in ("north_two", "merge", "report")]
    now = T0 + 1500  # PauseTimeoutSeconds 1: due at T0 + 1000
    late = paused_state("sim_fan", steps, watch_shard="W#0", due_at=T0 + 1001)
    (v,) = check_findable(late, fan, now, random.Random(0))
    assert v.message == f"GiveUp was due at {T0 + 1000} but the watch index says {T0 + 1001}"
    wf_key = (f"WF#{WF}", "#WF")
    slack = {wf_key: 1}
    assert check_findable(late, fan, now, random.Random(0), lambda k: slack.get(k, 0)) == []
    in_time = paused_state("sim_fan", steps, watch_shard="W#0", due_at=T0 + 1000)
    assert check_findable(in_time, fan, now, random.Random(0)) == []


def test_no_dispatch_is_due_before_the_workflow_was_resumed() -> None:
    """A message lost before a pause is re-sent by the resume, or found by the supervisor
    right after it (the resume writes the workflow due at once), not during the pause."""
    queued = step("reserve_inventory", StepStatus.QUEUED, dispatched_at=T0, available_at=T0)
    rest = [step(n, StepStatus.PENDING, attempt=0) for n in ORDER_STEPS[1:]]
    resumed = T0 + 30_000
    items = workflow(WorkflowStatus.RUNNING, [queued, *rest], watch_shard="W#0", due_at=resumed)
    state = WorkflowState.from_items(items)
    assert state is not None
    definition = DEFS["order_fulfilment"]  # DispatchTimeoutSeconds 10: due at T0 + 10 s
    (v,) = check_findable(state, definition, resumed + 500, random.Random(0))
    assert "Dispatch of 'reserve_inventory' was due at" in v.message
    found = check_findable(state, definition, resumed + 500, random.Random(0), resumed_at=resumed)
    assert found == []


def test_compensated_without_a_failed_step_needs_an_operator_or_a_pause_timeout() -> None:
    steps = [
        step(n, s, at=i + 1) for i, (n, s) in enumerate(zip(ORDER_STEPS, [S, S, C, C], strict=True))
    ]
    comps = [comp("charge_payment", at=50), comp("reserve_inventory", at=51)]
    for error in ("OperatorGaveUp", "PauseTimedOut"):
        text = f'{{"type":"{error}"}}'
        items = workflow(WorkflowStatus.COMPENSATED, steps, comps, error=text)
        assert check_status_consistent(record(items)) == []
    (v,) = check_status_consistent(record(workflow(WorkflowStatus.COMPENSATED, steps, comps)))
    assert "COMPENSATED but no step FAILED" in v.message
    paused = workflow(
        WorkflowStatus.COMPENSATED, steps, comps, error='{"type":"OperatorGaveUp"}', paused_at=T0
    )
    (v,) = check_status_consistent(record(paused))
    assert "still records a pause" in v.message


def test_a_genuine_task_token_is_never_unknown_while_its_attempt_is_in_the_history() -> None:
    handled = [Handled(T0, WF, "step", "charge_payment", 1, "stale:TaskTokenInvalid")]
    (v,) = check_no_superseded_result(record(succeeded_order(), handled=handled))
    assert (
        "genuine token of step 'charge_payment' attempt 1 was answered 'unknown token'" in v.message
    )
    ok = [replace(handled[0], outcome="stale:TaskTokenStale")]
    assert check_no_superseded_result(record(succeeded_order(), handled=ok)) == []
    # Attempt 1 has left the history (the last 20 ended attempts): unknown is all it can be.
    history = [{"a": a, "o": "error", "t": T0} for a in range(2, 21)] + [ok_entry(21)]
    steps = [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    steps[1] = step("charge_payment", S, attempt=21, at=2, history=history, output='{"attempt":21}')
    items = workflow(WorkflowStatus.SUCCEEDED, steps)
    assert check_no_superseded_result(record(items, handled=handled)) == []


def ok_entry(attempt: int) -> dict[str, Any]:
    return ok(attempt, T0 + 2000)


# ------------------------------------------------------------------------- the time bound


def test_the_bound_allows_the_time_paused_waiting_for_the_operator() -> None:
    timing = Timing(
        sweep_interval_s=1.0, visibility_s=30, lambda_grace_s=2, max_latency_s=3, max_pause_s=14
    )
    began = sw(10, "agent", "", "RUNNING", "PAUSED", pause_reason="failure", paused_at=T0 + 10_000)
    resumed = sw(25, "client", "resume", "PAUSED", "RUNNING")
    hold, fan = DEFS["sim_hold"], DEFS["sim_fan"]
    assert paused_wait_ms([began, resumed], hold, timing, T0 + 60_000) == 15_000
    # sim_fan's pause timeout (1 s) plus one look (G 1 s + a 1 s sweep) caps it.
    assert pause_timeout_budget_ms(fan, timing) == 3_000
    assert paused_wait_ms([began, resumed], fan, timing, T0 + 60_000) == 3_000
    timed_out = sw(11.5, "supA", "", "PAUSED", "COMPENSATING", error_type="PauseTimedOut")
    assert paused_wait_ms([began, timed_out], fan, timing, T0 + 60_000) == 3_000
    assert paused_wait_ms([began], hold, timing, T0 + 60_000) == 50_000  # still paused
    assert paused_wait_ms([began, resumed, began, resumed], hold, timing, T0) == 30_000


# ---------------------------------------------------------------------------- paused pools


def test_a_task_waiting_for_a_paused_pool_is_not_sent_again() -> None:
    def again(role: str, label: str, paused_by: int | None, read: int | None) -> Redispatch:
        return Redispatch(
            T0, WF, "step", "reserve_inventory", 1, role, label, "inventory", paused_by, read
        )

    items = succeeded_order()
    fine = [
        again("supA", "", None, 3),  # the pool is not paused
        again("supA", "", 4, 3),  # the sweep read the pools before the pause
        again("client", "resume", 4, None),  # an operator's resume sends every queued step
    ]
    assert check_paused_pools_wait(record(items, redispatches=fine)) == []
    for bad in (again("supA", "", 4, 4), again("supB", "", 4, None), again("agent", "", 4, 9)):
        (v,) = check_paused_pools_wait(record(items, redispatches=[bad]))
        assert v.invariant == "pools" and "while its pool 'inventory' was paused" in v.message


def test_an_attempt_that_ended_without_a_claim_is_caught() -> None:
    """A task that waited (for a paused pool, a paused workflow) must not burn an attempt."""
    steps = [step(n, S, at=i + 1) for i, n in enumerate(ORDER_STEPS)]
    burned = ({"a": 1, "o": "timeout", "t": T0 + 1000}, ok(2, T0 + 2000))
    steps[0] = step("reserve_inventory", S, attempt=2, at=2, history=burned, output='{"attempt":2}')
    items = workflow(WorkflowStatus.SUCCEEDED, steps)
    claims = claims_of(items)  # reserve_inventory: attempt 2 only
    (v,) = check_claims(record(items, claims=claims))
    assert "'reserve_inventory' attempt 1 ended (timeout) but was never claimed" in v.message
    first = replace(claims[0], attempt=1)
    assert check_claims(record(items, claims=[first, *claims])) == []


def branch_run(*, wake_at: int, woke_at: int, small: StepRecord | None = None) -> list[Any]:
    """A sim_branch run that took the big branch: `small` skipped, `settle` rested until
    `wake_at` and was woken at `woke_at`."""
    settle = step(
        "settle",
        S,
        at=0,
        output=None,
        wake_at=wake_at,
        claimed_at=T0 + 2000,
        history=(ok(1, woke_at),),
    )
    settle = replace(settle, finished_at=woke_at, first_claimed_at=None)
    return workflow(
        WorkflowStatus.SUCCEEDED,
        [
            step("probe", S, at=1),
            step("big", S, at=2),
            small or StepRecord(WF, "step", "small", StepStatus.SKIPPED, finished_at=T0 + 1000),
            settle,
            step("join", S, at=4),
        ],
        wf_type="sim_branch",
    )


def test_a_skipped_step_claimed_dispatched_or_compensated_is_caught() -> None:
    clean = branch_run(wake_at=T0 + 3000, woke_at=T0 + 3000)
    assert check_skips_and_waits(record(clean)) == []
    assert check_claims(record(clean)) == []
    assert check_status_consistent(record(clean)) == []
    claims = [*claims_of(clean), Claim(T0 + 1500, WF, "step", "small", 1, T0 + 1500)]
    (v,) = check_skips_and_waits(record(clean, claims=claims))
    assert v.message == "SKIPPED step 'small' was claimed"
    sent = StepRecord(
        WF, "step", "small", StepStatus.SKIPPED, finished_at=T0 + 1000, dispatched_at=T0 + 900
    )
    (v,) = check_skips_and_waits(
        record(branch_run(wake_at=T0 + 3000, woke_at=T0 + 3000, small=sent))
    )
    assert v.message == "SKIPPED step 'small' was dispatched"
    undone = [*clean, comp("small").to_item()]
    found = check_skips_and_waits(record(undone))
    assert [v.message for v in found] == ["SKIPPED step 'small' was compensated"]


def test_a_wait_woken_early_or_claimed_by_an_agent_is_caught() -> None:
    early = branch_run(wake_at=T0 + 3000, woke_at=T0 + 2999)
    (v,) = check_skips_and_waits(record(early))
    assert v.invariant == "waits" and "before its time" in v.message
    clean = branch_run(wake_at=T0 + 3000, woke_at=T0 + 3000)
    claims = [*claims_of(clean), Claim(T0 + 2500, WF, "step", "settle", 1, T0 + 2500)]
    (v,) = check_skips_and_waits(record(clean, claims=claims))
    assert v.message == "wait 'settle' was claimed by an agent"


def test_a_claim_while_its_pools_circuit_is_open_is_caught() -> None:
    """Versions are the pools' writes: the circuit opened at 5 (it left closed at 5), or went
    half-open at 7 after leaving closed at 5."""

    def claim(circuit: str, read: int | None, probe: int | None = None) -> Claim:
        entered, left = (5, 5) if circuit == "open" else (7, 5)
        return Claim(
            T0, WF, "step", "charge_payment", 1, T0, pool="payments", circuit=circuit,
            circuit_read=read, circuit_probe=probe, circuit_entered_by=entered,
            circuit_left_closed_by=left,
        )  # fmt: skip

    items = succeeded_order()
    fine = [
        claim("open", 4),  # its breaker read the pool before it opened (the documented race)
        claim("open", 4, probe=3),  # a probe of an earlier half-open, landing after it reopened
        claim("half_open", 7, probe=8),  # a half-open probe
        claim("half_open", 4),  # decided while the circuit was still closed
        Claim(T0, WF, "step", "charge_payment", 1, T0, pool="payments", circuit_read=None),
    ]
    assert check_open_circuit_claims_nothing(record(items, claims=fine)) == []
    for bad in (claim("open", 5), claim("open", None), claim("half_open", 7)):
        (v,) = check_open_circuit_claims_nothing(record(items, claims=[bad]))
        assert v.invariant == "circuit" and "pool 'payments' circuit was" in v.message


def test_a_circuit_move_the_breaker_does_not_make_is_caught() -> None:
    def move(was: str | None, to: str, mode: str = "auto", said: str | None = None) -> Change:
        old = None if was is None else {"pk": "POOLS", "sk": "payments", "circuit": was}
        entry = {"from": was or "closed", "to": said or to}
        new = {
            "pk": "POOLS", "sk": "payments", "circuit": to, "circuit_mode": mode,
            "circuit_history": [entry],
        }  # fmt: skip
        return Change(old, new, "1")

    items = succeeded_order()
    legal = [move(None, "open"), move("open", "half_open"), move("half_open", "closed")]
    legal += [move("half_open", "open"), move("closed", "half_open", mode="closed")]
    assert check_circuit_moves(record(items, changes=legal)) == []
    (v,) = check_circuit_moves(record(items, changes=[move("open", "closed")]))
    assert v.invariant == "circuit" and "moved open -> closed" in v.message
    (v,) = check_circuit_moves(record(items, changes=[move("closed", "open", said="half_open")]))
    assert "its history's last entry says closed -> half_open" in v.message
