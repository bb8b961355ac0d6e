"""Pause on failure, fix, resume; the operator's pause, resume and compensate; paused pools.

The first test is the race Temporal shipped its workflow pause with (temporalio/temporal
#10239): an attempt that completes while its workflow is PAUSED must be recorded, must not
flip the workflow back to RUNNING, and its successors must wait for the resume."""

from __future__ import annotations

import json
from typing import Any

import pytest
from shepherd.engine.agent import AgentContext, Outcome
from shepherd.errors import InvalidTransition
from shepherd.model import StepStatus, WorkflowStatus, loads
from support import ENV, ORDER, Harness, pausing_order, registry_with


def test_a_result_arriving_while_paused_is_recorded_but_its_successors_wait(
    harness: Harness,
) -> None:
    paused: list[str] = []

    def charge_while_paused(ctx: AgentContext) -> Any:
        # The operator pauses while this attempt runs; then it completes.
        harness.operations.pause(ctx.workflow_id)
        paused.append(harness.status(ctx.workflow_id).value)
        return {"charge_id": "ch-1", "amount": 1}

    with registry_with(charge_payment=charge_while_paused) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.pump()
        assert paused == ["PAUSED"]
        state = harness.state(wf)
        assert state.workflow.status is WorkflowStatus.PAUSED  # not flipped back
        assert state.steps["charge_payment"].status is StepStatus.SUCCEEDED  # recorded
        assert state.steps["ship_order"].status is StepStatus.PENDING
        assert harness.sent(wf, "ship_order") == []  # its successor waits
        # Time passes and sweeps run: still nothing is dispatched while it is paused.
        for _ in range(5):
            harness.clock.advance(30)
            harness.sweep()
        harness.pump()
        assert harness.sent(wf, "ship_order") == []
        assert harness.status(wf) is WorkflowStatus.PAUSED
        harness.operations.resume(wf)
        assert harness.sent(wf, "ship_order") == [1]
        assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.events.types().count("WorkflowPaused") == 1
    assert harness.events.types().count("WorkflowResumed") == 1


def _declined(times: int) -> dict[str, Any]:
    return {**ORDER, "faults": {"charge_payment": {"mode": "permanent", "times": times}}}


def test_a_step_failing_for_good_pauses_the_workflow_and_resume_retries_it(
    harness: Harness,
) -> None:
    pausing_order(harness)
    wf = harness.start(
        "order_fulfilment", {**ORDER, "faults": {"charge_payment": {"mode": "error", "times": 4}}}
    )
    for _ in range(40):
        harness.pump()
        if harness.status(wf) is WorkflowStatus.PAUSED:
            break
        harness.clock.advance(1)
        harness.sweep()
    state = harness.state(wf)
    assert state.workflow.status is WorkflowStatus.PAUSED
    pause = loads(state.workflow.pause)
    assert pause["reason"] == "failure" and pause["step"] == "charge_payment"
    assert state.steps["charge_payment"].status is StepStatus.FAILED
    assert state.compensations == {}  # nothing was unwound
    event = [e for e in harness.events.published if e.detail_type == "WorkflowPaused"][-1]
    assert event.detail["pause"]["step"] == "charge_payment"
    # The fault was for the first 4 attempts (1 + MaxAttempts 3): a resume with a fresh
    # budget runs attempt 5, which succeeds.
    harness.operations.resume(wf)
    charge = harness.step(wf, "charge_payment")
    assert charge.status is StepStatus.QUEUED and charge.attempt == 5 and charge.budget_from == 4
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED


def test_resume_with_a_replacement_input_records_who_changed_it(harness: Harness) -> None:
    pausing_order(harness)
    seen: list[Any] = []

    def charge(ctx: AgentContext) -> Any:
        seen.append(ctx.input.get("amount"))
        if ctx.input.get("amount", 0) > 100:
            from shepherd.errors import PermanentError

            raise PermanentError("over the card limit", name="CardDeclined")
        return {"charge_id": "ch", "amount": ctx.input["amount"]}

    with registry_with(charge_payment=charge) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", {**ORDER, "amount": 500})
        harness.pump()
        assert harness.status(wf) is WorkflowStatus.PAUSED
        harness.operations.resume(
            wf, owner=None, step="charge_payment", step_input={**ORDER, "amount": 90}
        )
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert seen == [500, 90]
    entry = [h for h in state.steps["charge_payment"].history if h["o"] == "input_replaced"]
    assert entry and entry[0]["by"] == "operator"
    assert loads(state.workflow.input)["amount"] == 500  # the workflow's own input is kept


def test_a_replacement_input_must_fit_the_definitions_schema(harness: Harness) -> None:
    """Issue 29.7: a replacement input stands in for the workflow input the step reads, so
    InputSchema checks it as it checked the start's; a refused resume changes nothing."""
    from shepherd.errors import InputInvalid

    pausing_order(harness)
    faults = {"charge_payment": {"mode": "permanent", "times": 1}}
    wf = harness.start("order_fulfilment", {**ORDER, "faults": faults})
    harness.pump()
    assert harness.status(wf) is WorkflowStatus.PAUSED
    before = harness.state(wf)
    with pytest.raises(InputInvalid, match=r"input\.amount") as refused:
        harness.operations.resume(wf, step="charge_payment", step_input={**ORDER, "amount": -5})
    assert refused.value.field == "input.amount"
    assert harness.state(wf) == before  # nothing written
    harness.operations.resume(wf, step="charge_payment", step_input={**ORDER, "amount": 5})
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED


def test_an_operator_gives_up_on_a_paused_workflow(harness: Harness) -> None:
    pausing_order(harness)
    wf = harness.start("order_fulfilment", _declined(99))
    harness.pump()
    assert harness.status(wf) is WorkflowStatus.PAUSED
    assert harness.operations.compensate(wf).status is WorkflowStatus.COMPENSATING
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    error = loads(state.workflow.error)
    assert error["type"] == "OperatorGaveUp" and error["cause"]["step"] == "charge_payment"
    # charge_payment was claimed: it may have acted, so it is undone too (ATTEMPTED).
    assert set(state.compensations) == {"charge_payment", "reserve_inventory"}


def test_a_paused_workflow_can_be_cancelled(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    harness.operations.pause(wf)
    assert harness.operations.cancel(wf).status in (
        WorkflowStatus.CANCELLING,
        WorkflowStatus.CANCELLED,
    )
    assert harness.run(wf).workflow.status is WorkflowStatus.CANCELLED


def test_operator_actions_from_a_status_where_they_make_no_sense_are_refused(
    harness: Harness,
) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    with pytest.raises(InvalidTransition, match="resume needs PAUSED"):
        harness.operations.resume(wf)
    harness.operations.pause(wf)
    assert harness.operations.pause(wf).status is WorkflowStatus.PAUSED  # idempotent
    harness.operations.resume(wf)
    harness.run(wf)
    for action in (
        harness.operations.pause,
        harness.operations.resume,
        harness.operations.compensate,
    ):
        with pytest.raises(InvalidTransition):
            action(wf)


def test_the_pause_timeout_gives_up_on_a_workflow_left_paused(harness: Harness) -> None:
    from shepherd.definitions import parse_definition

    pausing_order(harness)
    data = json.loads(harness.definitions["order_fulfilment"].canonical_json)
    data["PauseTimeoutSeconds"] = 60
    harness.definitions["order_fulfilment"] = parse_definition(data, "timeout")
    harness.catalog = type(harness.catalog)(harness.definitions, harness.store)
    harness.scheduler.catalog = harness.catalog
    wf = harness.start("order_fulfilment", _declined(99))
    harness.pump()
    assert harness.status(wf) is WorkflowStatus.PAUSED
    harness.clock.advance(30)
    harness.sweep()
    assert harness.status(wf) is WorkflowStatus.PAUSED
    harness.clock.advance(31)
    harness.sweep()
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert loads(state.workflow.error)["type"] == "PauseTimedOut"


def test_a_paused_workflow_with_nothing_in_flight_leaves_the_watch_index(harness: Harness) -> None:
    pausing_order(harness)
    wf = harness.start("order_fulfilment", _declined(99))
    harness.pump()
    harness.clock.advance(10)
    harness.sweep()
    wf_rec = harness.state(wf).workflow
    assert wf_rec.status is WorkflowStatus.PAUSED and wf_rec.due_at is None
    harness.operations.resume(wf)  # back in the index, due at once
    assert harness.state(wf).workflow.due_at is not None


def test_concurrent_operator_calls_are_safe(harness: Harness) -> None:
    """Two resumes racing: one wins, the other is refused; nothing is queued twice."""
    from support import HookStore

    pausing_order(harness)
    wf = harness.start("order_fulfilment", _declined(4))
    harness.pump()
    assert harness.status(wf) is WorkflowStatus.PAUSED
    hook = HookStore(harness.store)
    harness.ports.store = hook
    results: list[Any] = []

    def other_resume_first(pk: str) -> None:
        hook.after_load = None
        results.append(harness.operations.resume(wf).status)

    hook.after_load = other_resume_first
    with pytest.raises(InvalidTransition):
        harness.operations.resume(wf)
    harness.ports.store = harness.store
    assert results == [WorkflowStatus.RUNNING]
    assert harness.step(wf, "charge_payment").attempt == 2  # re-queued once, not twice


def test_in_flight_attempts_of_other_branches_finish_while_paused(harness: Harness) -> None:
    """provision: while network runs, storage fails for good and pauses the workflow;
    network finishes and is recorded; compute (the join) waits for the resume."""
    from shepherd.definitions import parse_definition

    data = harness.definitions["provision_environment"].model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    data["OnFailure"] = "PAUSE"
    harness.definitions["provision_environment"] = parse_definition(data, "p")
    harness.catalog = type(harness.catalog)(harness.definitions, harness.store)
    harness.scheduler.catalog = harness.catalog
    wf = harness.start("provision_environment", ENV)
    messages = {m.task.step: m for m in harness.receive()}
    during: list[Any] = []

    def network(ctx: AgentContext) -> Any:
        during.append(harness.runtime.handle(messages["create_storage"].task).outcome)
        during.append(harness.status(wf))
        return {"id": "net-1", "name": "n"}

    def storage(ctx: AgentContext) -> Any:
        if ctx.attempt == 1:
            from shepherd.errors import PermanentError

            raise PermanentError("quota", name="QuotaExceeded")
        return {"id": "st-1", "name": "s"}

    with registry_with(create_network=network, create_storage=storage) as agents:
        harness.runtime.agents = agents
        outcome = harness.runtime.handle(messages["create_network"].task).outcome
        assert outcome is Outcome.SUCCEEDED
        assert during == [Outcome.FAILED, WorkflowStatus.PAUSED]
        state = harness.state(wf)
        assert state.workflow.status is WorkflowStatus.PAUSED
        assert state.steps["create_network"].status is StepStatus.SUCCEEDED  # recorded
        assert state.steps["create_compute"].status is StepStatus.PENDING  # waits
        assert harness.sent(wf, "create_compute") == []
        harness.operations.resume(wf)  # storage again, with a fresh budget: it succeeds now
        assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED


def test_a_paused_pool_claims_nothing_and_its_wait_is_neither_lost_nor_timed_out(
    harness: Harness,
) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    view = harness.pools.pause("inventory", by="ops")
    assert view.state.paused and view.state.by == "ops"
    assert view.backlog is not None and view.backlog.visible == 1
    assert harness.pump() == []  # its agents receive nothing
    for _ in range(10):  # long past DispatchTimeoutSeconds (10 s)
        harness.clock.advance(30)
        report = harness.sweep()
        assert report.actions.get("Redispatch", 0) == 0 and report.actions.get("TimedOut", 0) == 0
    reserve = harness.step(wf, "reserve_inventory")
    assert reserve.status is StepStatus.PENDING and not reserve.stored  # nothing written
    assert reserve.attempt == 0  # no retry burned
    assert harness.sent(wf, "reserve_inventory") == [1]  # not re-sent either
    harness.pools.resume("inventory", by="ops")
    # The backlog drains; the wait just ended is not a lost message.
    assert harness.sweep().actions.get("Redispatch", 0) == 0
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    listed = {v.state.name: v.state.paused for v in harness.pools.list()}
    assert listed["inventory"] is False and set(listed) >= {"inventory", "payments", "cloud"}


def test_a_sweep_that_cannot_read_the_pools_takes_every_pool_as_running(
    harness: Harness,
) -> None:
    """Simulator seeds 26 and 5157 in miniature: the supervisor last read `inventory` paused;
    the pool resumed and a task's message was lost; the next sweep's read of the pools failed.
    Planning with the stale "paused" would leave the lost message unfound until a read works;
    taken as running, the task is sent again at once (the sweep cannot know when the pool
    resumed, so it takes the earliest deadline: a message still on its way is sent twice, a
    duplicate the claim drops)."""
    from shepherd.errors import StoreUnavailable
    from shepherd.keys import POOLS_PK
    from support import HookStore

    wf = harness.start("order_fulfilment", ORDER)
    harness.pools.pause("inventory", by="ops")
    harness.clock.advance(30)  # past DispatchTimeoutSeconds (10 s): waiting, not lost
    assert harness.sweep().actions.get("Redispatch", 0) == 0
    harness.pools.resume("inventory", by="ops")
    assert harness.pump(on_message=lambda task: "drop") == []  # the message is lost
    hook = HookStore(harness.store)

    def unreadable(pk: str) -> None:
        if pk == POOLS_PK:
            raise StoreUnavailable("throttled")

    hook.after_load = unreadable
    harness.ports.store = hook
    try:
        harness.clock.advance(5)
        report = harness.sweep()
        assert report.actions.get("Redispatch", 0) == 1
        assert report.pools_unread and report.lags_ms == []  # its lag is not known: not sampled
        harness.clock.advance(5)  # the next failed read: its grace from that send runs
        assert harness.sweep().actions.get("Redispatch", 0) == 0
    finally:
        harness.ports.store = harness.store
    assert harness.sent(wf, "reserve_inventory") == [1, 1]
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED


def test_an_unknown_pool_is_refused(harness: Harness) -> None:
    from shepherd.engine.pools import PoolNotFound

    with pytest.raises(PoolNotFound):
        harness.pools.pause("no-such-pool", by="ops")


def test_a_resume_never_makes_a_backoff_claimable_before_its_end(harness: Harness) -> None:
    """Found by the simulator (seed 2178): a resume re-sends a task still in its backoff with
    the time left as the message's delay. SQS delays are whole seconds; rounded down, the
    message became visible up to a second before `available_at`, and a claim there made the
    successors' deadlines earlier than the watch entry the deadline rule had computed from
    `available_at` (invariant 3). Rounded up, no claim comes before `available_at`."""
    from shepherd.definitions import parse_definition

    data = json.loads(harness.definitions["order_fulfilment"].canonical_json)
    data["Steps"][0]["Retry"] = {"MaxAttempts": 3, "IntervalSeconds": 2.5}
    harness.definitions["order_fulfilment"] = parse_definition(data, "o")
    harness.catalog = type(harness.catalog)(harness.definitions, harness.store)
    harness.scheduler.catalog = harness.catalog
    wf = harness.start("order_fulfilment", ORDER)
    (first,) = harness.receive()

    def flaky(ctx: AgentContext) -> Any:
        raise RuntimeError("the warehouse did not answer")

    with registry_with(reserve_inventory=flaky) as agents:
        harness.runtime.agents = agents
        assert harness.runtime.handle(first.task).outcome is Outcome.RETRYING
    harness.queue.delete(first.receipt)
    retry = harness.step(wf, "reserve_inventory")
    assert (retry.status, retry.attempt) == (StepStatus.QUEUED, 2)
    available = retry.available_at
    assert available is not None
    harness.operations.pause(wf)
    harness.clock.advance(0.2)  # 2.3 s of the backoff left: a fractional delay
    harness.operations.resume(wf)
    assert harness.sent(wf, "reserve_inventory")[-1] == 2
    seen_at = None
    while seen_at is None:
        harness.clock.advance(0.05)
        if any(m.task.step == "reserve_inventory" for m in harness.receive()):
            seen_at = harness.clock.now_ms()
    assert seen_at >= available


def test_a_resume_that_took_effect_answers_success_though_its_follow_up_is_throttled(
    harness: Harness,
) -> None:
    """Issue 41.3: the resume's transaction lands, then the store throttles the read that
    dispatches the re-queued step. The resume answers RUNNING (not a 503 whose retry would be
    refused with a 409), and the supervisor dispatches what the follow-up could not: the
    workflow succeeds with one more attempt of the failed step."""
    from shepherd.errors import StoreUnavailable
    from support import HookStore

    pausing_order(harness)
    wf = harness.start("order_fulfilment", _declined(1))
    harness.pump()
    assert harness.status(wf) is WorkflowStatus.PAUSED
    hook = HookStore(harness.store)
    harness.ports.store = hook
    written: list[str] = []

    def wrote(pk: str, sk: str, update: Any) -> None:
        written.append(sk)

    def throttled_after_the_write(pk: str) -> None:
        if written:
            raise StoreUnavailable("throttled: ProvisionedThroughputExceededException")

    hook.before_update = wrote
    hook.after_load = throttled_after_the_write
    original = hook.transact

    def transact(writes: Any) -> None:
        original(writes)
        written.append("transaction")

    hook.transact = transact  # type: ignore[method-assign]
    resumed = harness.operations.resume(wf)
    assert written  # the resume took effect before the throttled read
    assert resumed.status is WorkflowStatus.RUNNING
    harness.ports.store = harness.store
    assert harness.status(wf) is WorkflowStatus.RUNNING
    charge = harness.step(wf, "charge_payment")
    assert charge.status is StepStatus.QUEUED and charge.attempt == 2
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.step(wf, "charge_payment").attempt == 2
