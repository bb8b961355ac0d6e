"""Cancel, redrive and callback steps in the engine, on both stores, under a manual clock."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import limits
from shepherd.engine.agent import AgentContext, Outcome, Pending
from shepherd.errors import InvalidTransition, TaskTokenInvalid, TaskTokenStale, WorkflowNotFound
from shepherd.model import StepStatus, WorkflowStatus, loads
from shepherd_examples.agents import ledger
from shepherd_examples.agents.faults import SimulatedHang
from support import ENV, ORDER, Harness, registry_with


@pytest.fixture(autouse=True)
def _clean_ledger() -> None:
    ledger.reset()


def test_cancel_waits_for_the_running_step_and_compensates_it_too(harness: Harness) -> None:
    wf = harness.start("provision_environment", ENV)

    def cancel_midway(ctx: AgentContext) -> Any:
        # While this attempt runs, an operator cancels; the step still succeeds.
        if ctx.step == "create_network":
            assert harness.operations.cancel(wf).status is WorkflowStatus.CANCELLING
        return {"id": f"{ctx.step}-1"}

    with registry_with(create_network=cancel_midway, create_storage=cancel_midway) as agents:
        harness.runtime.agents = agents
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.CANCELLED
    # network was running when the cancel came and finished after it: compensated all the
    # same. storage was still queued: cancelled, it never ran and is not compensated.
    assert set(state.compensations) == {"create_network"}
    assert state.steps["create_storage"].status is StepStatus.CANCELLED
    assert state.steps["create_compute"].status is StepStatus.CANCELLED
    assert harness.sent(wf, "create_compute") == []
    assert harness.events.types()[-1] == "WorkflowCancelled"


def test_cancel_is_idempotent_while_cancelling_and_refused_when_finished(harness: Harness) -> None:
    idle = harness.start("order_fulfilment", {**ORDER, "order_id": "idle"})
    assert harness.operations.cancel(idle).status is WorkflowStatus.CANCELLED  # nothing had run
    late = harness.pump()  # the root's message arrives after the cancel: dropped
    assert [r.outcome for _, r in late] == [Outcome.DROPPED]
    with pytest.raises(InvalidTransition, match="cancel needs RUNNING or PAUSED"):
        harness.operations.cancel(idle)

    busy = harness.start(
        "order_fulfilment", {**ORDER, "faults": {"reserve_inventory": {"mode": "hang"}}}
    )
    with pytest.raises(SimulatedHang):
        harness.pump()
    assert harness.operations.cancel(busy).status is WorkflowStatus.CANCELLING
    assert harness.operations.cancel(busy).status is WorkflowStatus.CANCELLING  # idempotent
    with pytest.raises(WorkflowNotFound):
        harness.operations.cancel(busy, owner="somebody-else")
    state = harness.run(busy)  # the hung attempt times out; nothing is retried while unwinding
    assert state.workflow.status is WorkflowStatus.CANCELLED
    assert state.steps["reserve_inventory"].status is StepStatus.FAILED
    # It was claimed, so it may have acted: undone all the same, finding nothing to undo.
    assert set(state.compensations) == {"reserve_inventory"}
    assert loads(state.compensations["reserve_inventory"].output)["released"] is False


def test_redrive_retries_the_failed_compensation_with_a_fresh_budget(harness: Harness) -> None:
    payload = {
        **ORDER,
        "faults": {
            "ship_order": {"mode": "permanent"},
            # refund fails on attempts 1..6 (1 + MaxAttempts 5), succeeds from attempt 7
            "charge_payment:compensation": {"mode": "error", "times": 6},
        },
    }
    wf = harness.start("order_fulfilment", payload)
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.FAILED
    assert "reserve_inventory" not in state.compensations
    assert state.workflow.watch_shard is None  # a FAILED workflow is not watched

    redriven = harness.operations.redrive(wf)
    assert redriven.status is WorkflowStatus.COMPENSATING and redriven.redrives == 1
    assert redriven.watch_shard is not None and redriven.due_at is not None
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    refund = state.compensations["charge_payment"]
    assert refund.attempt == 7 and refund.budget_from == 6
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "charge", "refund", "release"]
    assert loads(state.workflow.error)["step"] == "ship_order"  # the cause, not the operator note
    with pytest.raises(InvalidTransition):
        harness.operations.redrive(wf)


def test_a_redriven_step_fences_every_attempt_from_before(harness: Harness) -> None:
    wf = harness.start(
        "order_fulfilment",
        {
            **ORDER,
            "faults": {
                "ship_order": {"mode": "permanent"},
                "charge_payment:compensation": {"mode": "error", "times": 99},
            },
        },
    )
    harness.run(wf)
    stale = harness.state(wf).compensations["charge_payment"]
    harness.operations.redrive(wf)
    from shepherd.decisions import transitions as tx
    from shepherd.errors import ConditionFailed

    write = tx.complete(stale, stale.attempt, harness.clock.now_ms(), "{}", 0)
    with pytest.raises(ConditionFailed):
        harness.store.update(write.pk, write.sk, write.update, write.condition)


def _callback_ship(tokens: list[str], resumed: list[Any] | None = None) -> Any:
    def ship(ctx: AgentContext) -> Any:
        if resumed is not None:
            resumed.append(ctx.previous_details)
        tokens.append(ctx.task_token())
        ctx.report_progress({"handed_to": "carrier"})
        return Pending()

    return ship


def test_callback_step_waits_then_a_callback_completes_it(harness: Harness) -> None:
    tokens: list[str] = []
    with registry_with(ship_order=_callback_ship(tokens)) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.pump()
        assert harness.step(wf, "ship_order").status is StepStatus.WAITING
        assert [r.outcome for m, r in harness.log if m.step == "ship_order"] == [Outcome.WAITING]
        harness.callbacks.callback(tokens[0], "success", output={"tracking": "CB-1"})
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert loads(state.steps["ship_order"].output) == {"tracking": "CB-1"}
    with pytest.raises(TaskTokenStale):
        harness.callbacks.callback(tokens[0], "success", output={})
    with pytest.raises(TaskTokenInvalid):
        harness.callbacks.callback("st1.garbage", "success")


def test_a_silent_callback_step_times_out_and_its_token_dies(harness: Harness) -> None:
    tokens: list[str] = []
    resumed: list[Any] = []
    with registry_with(ship_order=_callback_ship(tokens, resumed)) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.pump()
        harness.clock.advance(2.5)
        harness.callbacks.callback(tokens[0], "heartbeat", details={"at": "depot"})
        harness.clock.advance(2.5)  # 5 s after claim, 2.5 s after the heartbeat: alive
        assert harness.sweep().actions.get("TimedOut", 0) == 0
        harness.clock.advance(1)  # HeartbeatSeconds 3 without a callback heartbeat
        assert harness.sweep().actions["TimedOut"] == 1
        with pytest.raises(TaskTokenStale):
            harness.callbacks.callback(tokens[0], "success", output={})
        harness.clock.advance(1)  # the retry's backoff (whole-second SQS delay)
        harness.pump()
        assert len(tokens) == 2 and harness.step(wf, "ship_order").attempt == 2
        # The new attempt could resume from the details the earlier one left last (the
        # callback's heartbeat), and left its own.
        assert resumed == [None, {"at": "depot"}]
        assert loads(harness.step(wf, "ship_order").details) == {"handed_to": "carrier"}
        harness.callbacks.callback(tokens[1], "success", output={"tracking": "CB-2"})
        assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED


def test_a_callback_that_beats_the_agent_still_counts(harness: Harness) -> None:
    def instant(ctx: AgentContext) -> Any:
        harness.callbacks.callback(ctx.task_token(), "success", output={"tracking": "FAST"})
        return Pending()

    with registry_with(ship_order=instant) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert loads(state.steps["ship_order"].output) == {"tracking": "FAST"}


def test_pending_without_a_token_is_a_permanent_error(harness: Harness) -> None:
    with registry_with(ship_order=lambda ctx: Pending()) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert loads(state.steps["ship_order"].error)["type"] == "PendingWithoutToken"


def _forged(token: str) -> str:
    """The same attempt's coordinates with another secret."""
    from shepherd.engine.tokens import TaskToken

    real = TaskToken.decode(token)
    return TaskToken(real.workflow_id, real.kind, real.step, real.attempt, "x" * 32).encode()


def test_a_forged_token_is_unknown_whatever_state_its_attempt_is_in(harness: Harness) -> None:
    """Only the genuine token of an attempt that is over learns it is over (409); a forged
    one must not learn that the workflow, the step or the attempt exist (404)."""
    tokens: list[str] = []
    with registry_with(ship_order=_callback_ship(tokens)) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.pump()
        forged = _forged(tokens[0])
        with pytest.raises(TaskTokenInvalid):  # attempt waiting
            harness.callbacks.callback(forged, "success", output={})
        harness.callbacks.callback(tokens[0], "success", output={"tracking": "CB-1"})
        harness.run(wf)
        for action in ("success", "heartbeat", "failure"):
            with pytest.raises(TaskTokenInvalid):  # attempt over
                harness.callbacks.callback(forged, action, output={})
            with pytest.raises(TaskTokenStale):
                harness.callbacks.callback(tokens[0], action, output={})


def test_callback_payloads_obey_the_agents_caps(harness: Harness) -> None:
    from shepherd import limits
    from shepherd.errors import PayloadTooLarge

    tokens: list[str] = []
    with registry_with(ship_order=_callback_ship(tokens)) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.pump()
        big = "x" * (limits.MAX_DETAILS_BYTES + 1)
        with pytest.raises(PayloadTooLarge) as too_large:
            harness.callbacks.callback(tokens[0], "heartbeat", details={"d": big})
        assert too_large.value.code == "DetailsTooLarge"
        assert harness.step(wf, "ship_order").status is StepStatus.WAITING  # nothing written
        huge = "y" * (limits.MAX_OUTPUT_BYTES + 1)
        with pytest.raises(PayloadTooLarge) as rejected:
            harness.callbacks.callback(tokens[0], "success", output={"o": huge})
        assert rejected.value.code == "OutputTooLarge"
        state = harness.run(wf)
    # The over-cap output failed its attempt for good, and the workflow unwound.
    ship = state.steps["ship_order"]
    assert ship.status is StepStatus.FAILED and ship.output is None
    assert loads(ship.error)["type"] == "OutputTooLarge"
    assert state.workflow.status is WorkflowStatus.COMPENSATED


@pytest.mark.parametrize("action", ["cancel", "compensate"])
def test_an_operator_write_that_loses_to_the_supervisor_reads_again_and_wins(
    harness: Harness, action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every action goes through one optimistic loop: a write that loses (here: cancel and
    compensate pull the watch entry, which a sweep moves between the read and the write) is
    planned again on a fresh read, up to TRIES times, then refused as changed meanwhile."""
    from shepherd.conditions import Update
    from shepherd.engine import operations
    from shepherd.keys import WF_SK, wf_pk

    wf = harness.start("order_fulfilment", ORDER)
    real_owned = harness.scheduler.owned
    interfere = {"left": 1}

    def owned_then_moved(workflow_id: str, owner: str | None) -> Any:
        loaded = real_owned(workflow_id, owner)
        if interfere["left"]:
            interfere["left"] -= 1
            # What a sweep's look does between our read and our write: move the entry.
            item = harness.store.get(wf_pk(workflow_id), WF_SK)
            assert item is not None
            harness.store.update(
                wf_pk(workflow_id), WF_SK, Update(set={"due_at": int(item["due_at"]) + 1}), None
            )
        return loaded

    monkeypatch.setattr(harness.scheduler, "owned", owned_then_moved)
    getattr(harness.operations, action)(wf)
    assert interfere["left"] == 0
    expected = {"cancel": "CANCEL", "compensate": "COMPENSAT"}[action]
    assert harness.store.get(wf_pk(wf), WF_SK)["status"].startswith(expected)  # type: ignore[index]

    # A write that keeps losing is refused after TRIES reads, never applied half.
    again = harness.start("order_fulfilment", {**ORDER, "order_id": "again"})
    interfere["left"] = operations.TRIES
    with pytest.raises(InvalidTransition, match="changed meanwhile"):
        getattr(harness.operations, action)(again)
    assert harness.store.get(wf_pk(again), WF_SK)["status"] == "RUNNING"  # type: ignore[index]


def test_a_task_for_a_removed_pool_fails_its_step_once_and_never_loops(harness: Harness) -> None:
    """Issue 28: a pool no definition names any more (removed from the deployment) while a
    running workflow's version still names it: its task failed to send ("no queue
    configured"), the supervisor sent it again every grace, forever. Now the step fails for
    good with PoolRemoved (never claimed, so nothing to compensate for it) and the workflow
    unwinds as for any failure."""
    harness.queue.removed.add("payments")
    wf = harness.start("order_fulfilment", ORDER)
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    charge = state.steps["charge_payment"]
    assert charge.status is StepStatus.FAILED and charge.first_claimed_at is None
    assert (loads(charge.error) or {})["type"] == "PoolRemoved"
    assert [h["o"] for h in charge.history] == ["undeliverable"]
    # Why, in the attempts table too: the name and the start of the message (issue 29.5).
    assert charge.history[0]["e"] == "PoolRemoved"
    message = (loads(charge.error) or {})["message"]
    assert charge.history[0]["m"] == limits.truncate(message, limits.MAX_HISTORY_MESSAGE)
    assert set(state.compensations) == {"reserve_inventory"}  # what had run is undone
    assert harness.sent(wf, "charge_payment") == []  # never sent, never re-sent
