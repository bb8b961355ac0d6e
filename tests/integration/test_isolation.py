"""One workflow can never stall the others (issue 10): caps before every write, a sweep that
handles each due workflow on its own, and parking after a bounded number of failed looks.

Runs on the strict in-memory store (it refuses items over 400 KB and applies nothing, as
DynamoDB does) and on moto (which half-applies such a write: docs/architecture.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from shepherd import limits
from shepherd.engine.agent import AgentContext
from shepherd.engine.supervisor import MAX_FAILED_LOOKS, PARKED, look_backoff_ms
from shepherd.keys import wf_pk
from shepherd.model import StepStatus, WorkflowStatus, loads
from support import ENV, ORDER, Harness, registry_with


def _returns(size: int) -> Any:
    def agent(ctx: AgentContext) -> Any:
        return {"blob": "x" * size, "step": ctx.step}

    return agent


def test_the_issues_poison_workflow_now_succeeds_and_reads_back_whole(harness: Harness) -> None:
    """A 184 KB input and four steps returning 60 KB each: all within the caps. The finishing
    write used to copy every output into the workflow item (over 400 KB) and fail forever."""
    big = _returns(60_000)
    with registry_with(
        reserve_inventory=big, charge_payment=big, ship_order=big, notify_customer=big
    ) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", {**ORDER, "pad": "p" * 184_000})
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    output = harness.output(wf)
    # Every step that ran (a small order skips the fraud review and the reminder: no output).
    assert set(output) == {"reserve_inventory", "charge_payment", "ship_order", "notify_customer"}
    assert all(len(v["blob"]) == 60_000 for v in output.values())


@pytest.mark.parametrize(
    ("returns", "error"),
    [
        ({"blob": "x" * (limits.MAX_OUTPUT_BYTES + 1)}, "OutputTooLarge"),
        ({"amount": float("nan")}, "OutputInvalid"),
        ({"ids": {1, 2}}, "OutputInvalid"),
    ],
)
def test_an_output_over_its_cap_or_not_json_fails_the_attempt_for_good(
    harness: Harness, returns: Any, error: str
) -> None:
    with registry_with(charge_payment=lambda ctx: returns) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    charge = state.steps["charge_payment"]
    assert charge.status is StepStatus.FAILED and charge.attempt == 1  # never retried
    assert loads(charge.error)["type"] == error
    assert state.workflow.status is WorkflowStatus.COMPENSATED  # unwound like any failure


def test_the_workflows_outputs_together_are_capped(harness: Harness) -> None:
    """Five outputs just under the step cap are over the 1 MiB total only with enough steps:
    shrink the total for the test and watch the step that would cross it fail."""
    big = _returns(limits.MAX_OUTPUT_BYTES - 100)
    with registry_with(create_network=big, create_storage=big, create_compute=big) as agents:
        harness.runtime.agents = agents
        original = limits.MAX_WORKFLOW_OUTPUT_BYTES
        limits.MAX_WORKFLOW_OUTPUT_BYTES = 3 * limits.MAX_OUTPUT_BYTES - 1000
        try:
            wf = harness.start("provision_environment", ENV)
            state = harness.run(wf)
        finally:
            limits.MAX_WORKFLOW_OUTPUT_BYTES = original
    compute = state.steps["create_compute"]
    assert compute.status is StepStatus.FAILED
    assert "the workflow's outputs would total" in loads(compute.error)["message"]


def test_progress_details_over_their_cap_fail_in_the_agent_that_reported_them(
    harness: Harness,
) -> None:
    def chatty(ctx: AgentContext) -> Any:
        ctx.report_progress({"log": "x" * (limits.MAX_DETAILS_BYTES + 1)})
        return {}

    with registry_with(charge_payment=chatty) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    charge = state.steps["charge_payment"]
    assert charge.status is StepStatus.FAILED and charge.details is None
    assert loads(charge.error)["type"] == "DetailsTooLarge"


def test_error_messages_are_cut_to_their_cap_and_history_keeps_the_last_attempts(
    harness: Harness,
) -> None:
    from shepherd.decisions import transitions as tx
    from shepherd.decisions.retry import RetryIn

    def failing(ctx: AgentContext) -> Any:
        raise RuntimeError("e" * 50_000)

    with registry_with(charge_payment=failing) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.run(wf)
    charge = harness.step(wf, "charge_payment")
    assert len(loads(charge.error)["message"]) == limits.MAX_ERROR_MESSAGE
    # Many ended attempts (an operator's redrives could add up): the last N are kept.
    rec = charge
    for attempt in range(rec.attempt, rec.attempt + 3 * limits.MAX_HISTORY):
        rec = type(rec)(**{**rec.__dict__, "attempt": attempt, "status": StepStatus.RUNNING})
        write = tx.end_attempt(
            rec,
            attempt=attempt,
            now=attempt,
            error="{}",
            error_type="E",
            outcome="error",
            decision=RetryIn(0),
            expires_at=0,
        )
        item = write.update.apply(rec.to_item())
        rec = type(rec).from_item(item)
    assert len(rec.history) == limits.MAX_HISTORY
    assert rec.history[-1]["a"] == rec.attempt - 1
    assert rec.attempts_total == charge.attempts_total + 3 * limits.MAX_HISTORY


def _break(harness: Harness, workflow_id: str, def_hash: str = "no-such-version") -> str:
    """Point a workflow at a definition version nobody has: every look at it raises."""
    from shepherd.conditions import Update

    item = harness.store.get(wf_pk(workflow_id), "#WF")
    assert item is not None
    harness.store.update(wf_pk(workflow_id), "#WF", Update(set={"def_hash": def_hash}), None)
    return str(item["def_hash"])


def test_a_poisonous_workflow_never_stops_the_sweep_and_is_parked_after_bounded_looks(
    harness: Harness,
) -> None:
    poison = harness.start("order_fulfilment", ORDER)
    healthy = [harness.start("order_fulfilment", {**ORDER, "order_id": f"o-{i}"}) for i in (1, 2)]
    harness.queue.sent.clear()
    for m in harness.receive():  # every first message is lost: only the supervisor helps
        harness.queue.delete(m.receipt)
    good_hash = _break(harness, poison)
    harness.clock.advance(20)
    report = harness.sweep()
    assert report.failed_looks == 1 and report.actions["Redispatch"] == 2
    assert sorted(t.message.workflow_id for t in harness.queue.sent) == sorted(healthy)
    for wf in healthy:
        assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    # Looks back off (5 s, 10 s, ...) and the workflow is parked after MAX_FAILED_LOOKS.
    looks = 1
    for _ in range(200):
        if looks == MAX_FAILED_LOOKS:
            break
        harness.clock.advance(look_backoff_ms(looks) / 1000)
        looks += harness.sweep().failed_looks
    _break(harness, poison, good_hash)
    state = harness.state(poison)
    assert state.workflow.status is WorkflowStatus.FAILED
    error = loads(state.workflow.error)
    assert error["type"] == PARKED and error["code"] == "LookFailed"
    assert error["operator_needed"] is True and "UnknownWorkflowType" in error["message"]
    assert state.workflow.due_at is None and state.workflow.watch_shard is None
    assert "WorkflowFailed" in harness.events.types()
    # An operator fixed the cause: retry puts it back where it was, and it finishes.
    harness.operations.redrive(poison)
    assert harness.status(poison) is WorkflowStatus.RUNNING
    assert harness.run(poison).workflow.status is WorkflowStatus.SUCCEEDED


def test_a_failed_look_backs_off_without_moving_the_watch_entry(harness: Harness) -> None:
    poison = harness.start("order_fulfilment", ORDER)
    for m in harness.receive():
        harness.queue.delete(m.receipt)
    _break(harness, poison)
    harness.clock.advance(20)
    due_before = harness.store.get(wf_pk(poison), "#WF")["due_at"]  # type: ignore[index]
    assert harness.sweep().failed_looks == 1
    item = harness.store.get(wf_pk(poison), "#WF")
    assert item is not None and item["due_at"] == due_before  # still due: invariant 3
    assert item["look_failures"] == 1
    harness.clock.advance(1)
    report = harness.sweep()
    assert report.failed_looks == 0 and report.backing_off == 1


def test_one_failing_index_query_costs_one_shard_one_sweep(harness: Harness) -> None:
    ids = [harness.start("order_fulfilment", {**ORDER, "order_id": f"o-{i}"}) for i in range(6)]
    for m in harness.receive():
        harness.queue.delete(m.receipt)
    harness.queue.sent.clear()
    real = harness.store.query_due

    def flaky(shard: str, *args: Any) -> Any:
        if shard == "W#0":
            raise RuntimeError("throttled")
        return real(shard, *args)

    harness.store.query_due = flaky  # type: ignore[method-assign]
    harness.clock.advance(20)
    report = harness.sweep()
    assert report.failed_queries == 1
    redispatched = {t.message.workflow_id for t in harness.queue.sent}
    from shepherd.engine.scheduler import watch_shard

    assert redispatched == {w for w in ids if watch_shard(w, harness.shards) != "W#0"}


def test_detection_lag_is_recorded_for_every_timed_out_attempt(harness: Harness) -> None:
    """The supervisor used to read the last action after its loop: a look that timed out
    several attempts (or timed one out, then finished) recorded one lag, or none."""
    from shepherd_examples.agents.faults import SimulatedHang

    ids = [
        harness.start(
            "order_fulfilment", {**ORDER, "faults": {"reserve_inventory": {"mode": "hang"}}}
        )
        for _ in range(2)
    ]
    for m in harness.receive():
        with pytest.raises(SimulatedHang):
            harness.runtime.handle(m.task)
        harness.queue.delete(m.receipt)
    harness.clock.advance(4)  # HeartbeatSeconds 3: both attempts are a second overdue
    report = harness.sweep()
    assert report.actions["TimedOut"] == 2
    assert sorted(report.lags_ms) == [1000, 1000]
    assert json.dumps(ids)  # both were looked at
