"""The engine end to end over its ports, on the in-memory store and on DynamoDB (moto).

Each test drives the real scheduler, agent runtime and supervisor under a manual clock.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from shepherd.decisions import transitions as tx
from shepherd.engine.agent import AgentContext, Outcome
from shepherd.errors import IdempotencyConflict, InputInvalid, UnknownWorkflowType
from shepherd.model import StepStatus, WorkflowStatus, loads
from shepherd_examples.agents import ledger
from shepherd_examples.agents.faults import SimulatedCrash, SimulatedHang
from support import ENV, ORDER, Harness, registry_with, step_named


@pytest.fixture(autouse=True)
def _clean_ledger() -> None:
    ledger.reset()


def with_faults(payload: dict[str, Any], **faults: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "faults": {k.replace("__", ":"): v for k, v in faults.items()}}


def test_order_happy_path(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    output = harness.output(wf)
    assert output["charge_payment"]["amount"] == 42.5
    assert output["notify_customer"]["tracking"] == output["ship_order"]["tracking"]
    # A small order skips the fraud review, and one naming no remind_at the reminder: never
    # claimed, no output.
    assert {n: (s.status, s.attempt) for n, s in state.steps.items()} == {
        "reserve_inventory": (StepStatus.SUCCEEDED, 1),
        "fraud_review": (StepStatus.SKIPPED, 0),
        "charge_payment": (StepStatus.SUCCEEDED, 1),
        "ship_order": (StepStatus.SUCCEEDED, 1),
        "notify_customer": (StepStatus.SUCCEEDED, 1),
        "until_reminder": (StepStatus.SKIPPED, 0),
        "send_reminder": (StepStatus.SKIPPED, 0),
    }
    assert set(output) == {"reserve_inventory", "charge_payment", "ship_order", "notify_customer"}
    assert state.workflow.watch_shard is None and state.workflow.due_at is None  # left the index
    assert harness.events.types() == [
        "WorkflowStarted",
        "StepSkipped",
        "StepSkipped",
        "StepSkipped",
        "WorkflowSucceeded",
    ]
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "charge", "ship", "send"]


def test_provision_happy_path_runs_branches_in_parallel(harness: Harness) -> None:
    wf = harness.start("provision_environment", ENV)
    first = harness.receive()
    assert sorted(m.task.step for m in first) == ["create_network", "create_storage"]
    for m in first:
        harness.queue.release(m.receipt)
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.output(wf)["verify"]["healthy"] is True
    assert harness.sent(wf, "create_compute") == [1]


def test_parallel_join_finishing_at_the_same_moment_is_dispatched_once(harness: Harness) -> None:
    wf = harness.start("provision_environment", ENV)
    messages = {m.task.step: m for m in harness.receive()}
    network, storage = messages["create_network"], messages["create_storage"]
    original = harness.scheduler.advance
    calls: list[str | None] = []

    def advance(workflow_id: str, *, completed: str | None = None, **kwargs: Any) -> Any:
        # Storage completes (and reads) after network's result is written but before
        # network's own advance reads: both completers see the join ready.
        calls.append(completed)
        if completed == "create_network":
            assert harness.runtime.handle(storage.task).outcome is Outcome.SUCCEEDED
        return original(workflow_id, completed=completed, **kwargs)

    harness.scheduler.advance = advance  # type: ignore[method-assign]
    applied = harness.runtime.handle(network.task)
    harness.scheduler.advance = original  # type: ignore[method-assign]

    assert applied.outcome is Outcome.SUCCEEDED
    assert calls == ["create_network", "create_storage"]
    assert harness.sent(wf, "create_compute") == [1]
    assert harness.step(wf, "create_compute").dispatches == 1
    for m in (network, storage):
        harness.queue.delete(m.receipt)
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED


def test_retryable_error_is_retried_after_the_backoff(harness: Harness) -> None:
    # charge_payment: IntervalSeconds 0.5, BackoffRate 2, FULL jitter, MaxDelay 4.
    claims: list[tuple[int, int]] = []
    from shepherd_examples.agents.order import charge_payment

    def flaky(ctx: AgentContext) -> Any:
        claims.append((ctx.attempt, harness.clock.now_ms()))
        if ctx.attempt < 3:
            raise ConnectionError("payment service unavailable")
        return charge_payment(ctx)

    with registry_with(charge_payment=flaky) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf, step_seconds=0.1)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert [a for a, _ in claims] == [1, 2, 3]
    history = state.steps["charge_payment"].history
    assert [(h["a"], h["o"], h.get("e")) for h in history] == [
        (1, "error", "ConnectionError"),
        (2, "error", "ConnectionError"),
        (3, "ok", None),
    ]
    # Retry n waits a jittered delay of at most 0.5 * 2^(n-1) s, delivered by an SQS message
    # delay, which has whole-second granularity and is rounded up (never early); plus the
    # 0.1 s the test clock moves per round.
    for (_, failed_at), (_, claimed_at), ceiling in zip(
        claims, claims[1:], (1000, 1000), strict=False
    ):
        assert 0 <= claimed_at - failed_at <= ceiling + 100
    assert harness.events.types().count("StepRetried") == 2


def test_retry_backoff_is_respected_exactly_without_jitter(harness: Harness) -> None:
    import json

    from shepherd.definitions import parse_definition

    data = json.loads(harness.definitions["order_fulfilment"].canonical_json)
    step_named(data, "charge_payment")["Retry"] = {
        "MaxAttempts": 2,
        "IntervalSeconds": 2,
        "BackoffRate": 3,
    }
    harness.catalog._current["order_fulfilment"] = definition = parse_definition(data, "test")
    harness.catalog._by_hash[(definition.name, definition.content_hash)] = definition
    seen: list[int] = []

    def flaky(ctx: AgentContext) -> Any:
        seen.append(harness.clock.now_ms())
        if ctx.attempt < 3:
            raise TimeoutError("slow")
        return {"charge_id": "c", "amount": 1}

    with registry_with(charge_payment=flaky) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.run(wf, step_seconds=0.25)
    assert [b - a for a, b in itertools.pairwise(seen)] == [2000, 6000]


def test_hung_agent_is_timed_out_by_heartbeat_and_retried(harness: Harness) -> None:
    wf = harness.start(
        "order_fulfilment", with_faults(ORDER, ship_order={"mode": "hang", "times": 1})
    )
    with pytest.raises(SimulatedHang):
        harness.pump()
    ship = harness.step(wf, "ship_order")
    assert ship.status is StepStatus.RUNNING and ship.attempt == 1
    harness.clock.advance(2.9)
    assert harness.sweep().actions.get("TimedOut", 0) == 0  # HeartbeatSeconds is 3
    harness.clock.advance(0.1)
    report = harness.sweep()
    assert report.actions["TimedOut"] == 1 and report.lags_ms == [0]
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    history = state.steps["ship_order"].history
    assert [(h["a"], h["o"], h.get("e")) for h in history] == [
        (1, "heartbeat_timeout", "States.HeartbeatTimeout"),
        (2, "ok", None),
    ]
    assert "StepTimedOut" in harness.events.types()


def test_agent_that_claimed_and_died_is_recovered(harness: Harness) -> None:
    wf = harness.start(
        "order_fulfilment", with_faults(ORDER, charge_payment={"mode": "crash", "times": 1})
    )
    with pytest.raises(SimulatedCrash):
        harness.pump()  # the worker dies inside charge_payment; its message is never deleted
    charge = harness.step(wf, "charge_payment")
    assert charge.status is StepStatus.RUNNING and charge.attempt == 1
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert state.steps["charge_payment"].attempt == 2
    # The payment was charged once although the step ran twice: same idempotency key.
    assert [e for e in ledger.effects(wf) if e[0] == "payments"] == [
        ("payments", f"{wf}:charge_payment", "charge")
    ]
    # The dead worker's message comes back after its visibility timeout: stale, dropped.
    harness.clock.advance(400)
    late = harness.pump()
    assert [(m.step, r.outcome) for m, r in late] == [("charge_payment", Outcome.DROPPED)]


@pytest.mark.parametrize("lost", ["reserve_inventory", "charge_payment"])
def test_lost_dispatch_message_is_recovered(harness: Harness, lost: str) -> None:
    # reserve_inventory is a root (dispatched in the start transaction); charge_payment is
    # dispatched implicitly by reserve_inventory's completer (no write).
    dropped: list[int] = []

    def lose_first(task: Any) -> str:
        if task.step == lost and not dropped:
            dropped.append(task.attempt)
            return "drop"
        return "handle"

    wf = harness.start("order_fulfilment", ORDER)
    harness.pump(on_message=lose_first)
    assert harness.step(wf, lost).status in (StepStatus.QUEUED, StepStatus.PENDING)
    harness.clock.advance(9.9)
    assert harness.sweep().actions.get("Redispatch", 0) == 0  # DispatchTimeoutSeconds 10
    harness.clock.advance(0.1)
    report = harness.sweep()
    assert report.actions["Redispatch"] == 1
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.sent(wf, lost) == [1, 1]
    assert harness.handled(wf, lost) == [(1, "succeeded")]


def test_duplicate_message_is_ignored(harness: Harness) -> None:
    calls: list[int] = []
    from shepherd_examples.agents.order import charge_payment

    def counting(ctx: AgentContext) -> Any:
        calls.append(ctx.attempt)
        return charge_payment(ctx)

    with registry_with(charge_payment=counting) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(
            wf, on_message=lambda t: "duplicate" if t.step == "charge_payment" else "handle"
        )
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls == [1]
    assert harness.handled(wf, "charge_payment") == [(1, "succeeded"), (1, "dropped")]


def test_duplicate_racing_past_the_read_loses_the_conditional_claim(moto_engine: Harness) -> None:
    """Two deliveries pass the read-only check at once; the claim's condition picks one."""
    from support import HookStore

    h = moto_engine
    hook = HookStore(h.store)
    h.ports.store = hook
    wf = h.start("order_fulfilment", ORDER)
    (message,) = h.receive()
    results: list[Any] = []

    def twin_claims_first(pk: str, sk: str, update: Any) -> None:
        if update.set.get("status") == "RUNNING" and not results:
            results.append(None)
            hook.before_update = None
            results.append(h.runtime.handle(message.task))  # the twin wins the claim

    hook.before_update = twin_claims_first
    loser = h.runtime.handle(message.task)
    assert results[1].outcome is Outcome.SUCCEEDED
    assert loser.outcome is Outcome.DROPPED and "claim lost" in loser.reason
    assert h.step(wf, "reserve_inventory").history[0]["a"] == 1
    assert len(h.step(wf, "reserve_inventory").history) == 1


def test_zombie_result_after_the_supervisor_moved_on_is_rejected(harness: Harness) -> None:
    def slow_then_fresh(ctx: AgentContext) -> Any:
        if ctx.attempt == 1:
            # Frozen past HeartbeatSeconds; meanwhile the supervisor gives up on attempt 1.
            harness.clock.advance(5)
            assert harness.sweep().actions["TimedOut"] == 1
            return {"tracking": "ZOMBIE"}
        return {"tracking": "FRESH"}

    with registry_with(ship_order=slow_then_fresh) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.handled(wf, "ship_order") == [(1, "fenced"), (2, "succeeded")]
    assert loads(state.steps["ship_order"].output) == {"tracking": "FRESH"}
    assert "ZOMBIE" not in json.dumps(harness.output(wf))
    assert [h["a"] for h in state.steps["ship_order"].history] == [1, 2]  # no "ok" for 1


def test_zombie_result_is_rejected_while_the_newer_attempt_is_running(harness: Harness) -> None:
    """The status alone cannot tell the zombie apart: the attempt number must."""

    def slow_then_fresh(ctx: AgentContext) -> Any:
        if ctx.attempt == 1:
            harness.clock.advance(5)
            assert harness.sweep().actions["TimedOut"] == 1
            harness.clock.advance(1)  # past the retry's backoff
            (retry,) = harness.receive()
            assert (retry.task.step, retry.task.attempt) == ("ship_order", 2)
            # Attempt 2 is claimed (RUNNING) by another worker that then goes silent ...
            rec = harness.step(ctx.workflow_id, "ship_order")
            claim = tx.claim(rec, 2, harness.clock.now_ms(), "other-worker")
            harness.store.update(claim.pk, claim.sk, claim.update, claim.condition)
            harness.queue.delete(retry.receipt)
            return {"tracking": "ZOMBIE"}  # ... when the zombie of attempt 1 reports
        return {"tracking": "FRESH"}

    with registry_with(ship_order=slow_then_fresh) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert loads(state.steps["ship_order"].output) == {"tracking": "FRESH"}
    assert [(h["a"], h["o"]) for h in state.steps["ship_order"].history] == [
        (1, "heartbeat_timeout"),
        (2, "heartbeat_timeout"),
        (3, "ok"),
    ]


def test_zombie_cannot_heartbeat_or_fail_either(harness: Harness) -> None:
    from shepherd.decisions import transitions as tx
    from shepherd.errors import ConditionFailed

    wf = harness.start("order_fulfilment", with_faults(ORDER, reserve_inventory={"mode": "hang"}))
    with pytest.raises(SimulatedHang):
        harness.pump()
    stale = harness.step(wf, "reserve_inventory")
    harness.clock.advance(3)
    harness.sweep()
    assert harness.step(wf, "reserve_inventory").attempt == 2
    write = tx.heartbeat(stale, 1, harness.clock.now_ms(), '{"p":1}')
    with pytest.raises(ConditionFailed) as lost:
        harness.store.update(write.pk, write.sk, write.update, write.condition)
    assert lost.value.current is not None and lost.value.current["attempt"] == 2


def test_a_permanent_error_compensates_every_step_that_may_have_acted_in_reverse(
    harness: Harness,
) -> None:
    """`When: ATTEMPTED` (the default): the failed step was claimed, so it may have acted; it
    is undone first (its first claim is the latest), and its undo finds nothing to undo."""
    wf = harness.start("order_fulfilment", with_faults(ORDER, ship_order={"mode": "permanent"}))
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert state.steps["ship_order"].status is StepStatus.FAILED
    assert state.steps["notify_customer"].status is StepStatus.CANCELLED  # never claimed
    undone = [
        e.detail["step"] for e in harness.events.published if e.detail_type == "StepCompensated"
    ]
    assert undone == ["ship_order", "charge_payment", "reserve_inventory"]
    assert loads(state.compensations["ship_order"].output) == {"cancelled": False}
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "charge", "refund", "release"]
    error = loads(state.workflow.error)
    assert error["step"] == "ship_order" and error["type"] == "AddressInvalid"
    assert harness.events.types().count("StepCompensated") == 3
    assert harness.events.types()[-1] == "WorkflowCompensated"


def test_when_succeeded_compensates_only_recorded_successes(harness: Harness) -> None:
    from shepherd.definitions import parse_definition

    data = json.loads(harness.definitions["order_fulfilment"].canonical_json)
    step_named(data, "ship_order")["Compensation"]["When"] = "SUCCEEDED"
    harness.definitions["order_fulfilment"] = parse_definition(data, "variant")
    harness.catalog = type(harness.catalog)(harness.definitions, harness.store)
    harness.scheduler.catalog = harness.catalog
    wf = harness.start("order_fulfilment", with_faults(ORDER, ship_order={"mode": "permanent"}))
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert set(state.compensations) == {"charge_payment", "reserve_inventory"}


def test_dag_failure_compensates_created_resources_in_reverse_completion(harness: Harness) -> None:
    wf = harness.start("provision_environment", {**ENV, "fail_verification": True})
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    comps = sorted(state.compensations.values(), key=lambda c: c.finished_at or 0)
    steps_by_completion = sorted(
        (s for s in state.steps.values() if s.status is StepStatus.SUCCEEDED),
        key=lambda s: s.finished_at or 0,
        reverse=True,
    )
    assert [c.name for c in comps][:2] == ["configure", "create_compute"]
    assert {c.name for c in comps} == {s.name for s in steps_by_completion}
    assert "verify" not in state.compensations


def test_failing_compensation_is_retried(harness: Harness) -> None:
    wf = harness.start(
        "order_fulfilment",
        with_faults(
            ORDER,
            ship_order={"mode": "permanent"},
            charge_payment__compensation={"mode": "error", "times": 2},
        ),
    )
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    refund = state.compensations["charge_payment"]
    assert refund.attempt == 3 and [h["o"] for h in refund.history] == ["error", "error", "ok"]
    assert [e[2] for e in ledger.effects(wf)] == ["reserve", "charge", "refund", "release"]


def test_exhausted_compensation_leaves_the_workflow_failed_for_an_operator(
    harness: Harness,
) -> None:
    wf = harness.start(
        "order_fulfilment",
        with_faults(
            ORDER,
            ship_order={"mode": "permanent"},
            charge_payment__compensation={"mode": "error", "times": 99},
        ),
    )
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.FAILED
    error = loads(state.workflow.error)
    assert error["operator_needed"] is True and "charge_payment" in error["message"]
    assert state.compensations["charge_payment"].attempt == 6  # 1 + MaxAttempts 5
    assert "reserve_inventory" not in state.compensations  # stops at the failure, in order
    assert harness.events.types()[-1] == "WorkflowFailed"


def test_idempotent_and_conflicting_starts(harness: Harness) -> None:
    first = harness.scheduler.start("order_fulfilment", ORDER, idempotency_key="k1", owner="alice")
    again = harness.scheduler.start("order_fulfilment", ORDER, idempotency_key="k1", owner="alice")
    assert first.created and not again.created
    assert again.workflow_id == first.workflow_id
    other_owner = harness.scheduler.start(
        "order_fulfilment", ORDER, idempotency_key="k1", owner="bob"
    )
    assert other_owner.workflow_id != first.workflow_id
    with pytest.raises(IdempotencyConflict) as conflict:
        harness.scheduler.start(
            "order_fulfilment", {**ORDER, "amount": 1}, idempotency_key="k1", owner="alice"
        )
    assert conflict.value.workflow_id == first.workflow_id
    assert harness.sent(first.workflow_id, "reserve_inventory") == [1]  # no second dispatch
    # Nothing accepted before was lost or changed.
    assert harness.state(first.workflow_id).workflow.input == first.workflow.input


def test_bad_starts_are_rejected_before_anything_is_written(harness: Harness) -> None:
    with pytest.raises(UnknownWorkflowType):
        harness.start("no_such_flow", {})
    with pytest.raises(InputInvalid) as bad:
        harness.start("order_fulfilment", {"order_id": "x", "items": [], "amount": 3})
    assert bad.value.field == "input.items"
    with pytest.raises(InputInvalid, match="amount"):
        harness.start(
            "order_fulfilment", {"order_id": "x", "items": [{"sku": "a", "qty": 1}], "amount": -1}
        )
    assert harness.queue.sent == []


def test_workflow_runs_to_the_end_on_the_definition_it_started_with(harness: Harness) -> None:
    import json

    from shepherd.definitions import parse_definition
    from shepherd.engine.catalog import Catalog
    from shepherd.engine.scheduler import Scheduler

    wf = harness.start("order_fulfilment", ORDER)
    old_hash = harness.state(wf).workflow.def_hash
    # The file changes: ship_order now goes to a pool and agent this deploy no longer has.
    data = json.loads(harness.definitions["order_fulfilment"].canonical_json)
    step_named(data, "ship_order")["Agent"] = "ship_order_v2"
    changed = parse_definition(data, "order_fulfilment.yaml")
    assert changed.content_hash != old_hash
    harness.catalog = Catalog({**harness.definitions, "order_fulfilment": changed}, harness.store)
    harness.scheduler = Scheduler(harness.ports, harness.catalog, harness.scheduler.config)
    harness.runtime.scheduler = harness.scheduler
    harness.supervisor.scheduler = harness.scheduler
    state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED  # old Agent ship_order ran
    assert state.workflow.def_hash == old_hash
    new = harness.start("order_fulfilment", {**ORDER, "order_id": "o-2"})
    assert harness.state(new).workflow.def_hash == changed.content_hash
