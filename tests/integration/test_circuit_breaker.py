"""A pool's circuit breaker (issue 26.2): retryable failures over the window open it, which
pauses the pool exactly as an operator's pause does (no attempt consumed while open); after
the cooldown a probe goes through (half-open); a failing probe opens it again, a succeeding
one closes it, and the workflows that waited succeed without an operator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from shepherd.engine.agent import AgentContext, Outcome
from shepherd.errors import PermanentError
from shepherd.model import WorkflowStatus
from support import ORDER, Harness, memory_harness, registry_with

BREAKER = {
    "payments": {
        "CircuitBreaker": {
            "FailureRatio": 0.5,
            "MinimumAttempts": 4,
            "WindowSeconds": 60,
            "CooldownSeconds": 30,
            "ProbeAttempts": 1,
        }
    }
}


class Downstream:
    """The payment provider: down (every call raises) until told otherwise."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0
        self.error: Exception = RuntimeError("503 from the provider")

    def charge(self, ctx: AgentContext) -> Any:
        self.calls += 1
        if self.down:
            raise self.error
        return {"charge_id": f"ch-{ctx.workflow_id}", "amount": 1}


def _attempts(h: Harness, workflows: list[str]) -> int:
    return sum(h.step(wf, "charge_payment").attempt for wf in workflows)


def _tick(h: Harness, seconds: float = 1) -> None:
    h.pump()
    h.clock.advance(seconds)
    h.sweep()


def test_an_outage_opens_the_circuit_probes_and_closes_with_every_workflow_done() -> None:
    service = Downstream()
    with registry_with(charge_payment=service.charge) as agents:
        h = memory_harness(agents=agents, pool_policies=BREAKER)
        workflows = [h.start("order_fulfilment", {**ORDER, "order_id": f"o-{i}"}) for i in range(6)]
        for _ in range(5):
            _tick(h)
            if h.pools.get("payments").state.circuit == "open":
                break
        pool = h.pools.get("payments").state
        assert pool.circuit == "open" and pool.paused  # paused as an operator's pause is
        assert "payments" in h.queue.paused  # its consumers stopped
        assert not any(h.status(wf).terminal for wf in workflows)
        # While open (the 30 s cooldown), no attempt is consumed, nothing fails or times out.
        before, calls = _attempts(h, workflows), service.calls
        for _ in range(25):
            _tick(h)
        assert _attempts(h, workflows) == before and service.calls == calls
        assert h.pools.get("payments").state.circuit == "open"
        # Half-open: one probe goes through, fails (still down), the circuit opens again.
        for _ in range(10):
            _tick(h)
            if service.calls > calls:
                break
        assert service.calls == calls + 1  # exactly ProbeAttempts probes
        _tick(h)
        assert h.pools.get("payments").state.circuit == "open"
        # The provider recovers; the next probe succeeds and closes the circuit.
        service.down = False
        for _ in range(120):
            _tick(h)
            if all(h.status(wf).terminal for wf in workflows):
                break
        assert [h.status(wf) for wf in workflows] == [WorkflowStatus.SUCCEEDED] * 6
        pool = h.pools.get("payments").state
        assert pool.circuit == "closed" and not pool.paused
        path = [(e["from"], e["to"]) for e in pool.circuit_history]
        assert path[:4] == [
            ("closed", "open"),
            ("open", "half_open"),
            ("half_open", "open"),
            ("open", "half_open"),
        ]
        assert path[-1] == ("half_open", "closed")


def test_errors_the_agent_declares_non_retryable_never_count() -> None:
    service = Downstream()
    service.error = PermanentError("card declined", name="CardDeclined")
    with registry_with(charge_payment=service.charge) as agents:
        h = memory_harness(agents=agents, pool_policies=BREAKER)
        workflows = [h.start("order_fulfilment", {**ORDER, "order_id": f"o-{i}"}) for i in range(6)]
        for _ in range(60):
            _tick(h)
            if all(h.status(wf).terminal for wf in workflows):
                break
        assert all(h.status(wf) is WorkflowStatus.COMPENSATED for wf in workflows)
        assert h.pools.get("payments").state.circuit == "closed"


def test_an_operator_forces_the_circuit_open_and_gives_it_back() -> None:
    h = memory_harness(pool_policies=BREAKER)
    view = h.pools.circuit("payments", "open", by="ops")
    assert view.state.circuit == "open" and view.state.circuit_mode == "open"
    assert "payments" in h.queue.paused
    wf = h.start("order_fulfilment", ORDER)
    for _ in range(40):  # forced open: no cooldown ends it
        _tick(h)
    assert h.step(wf, "charge_payment").attempt == 0 and not h.status(wf).terminal
    view = h.pools.circuit("payments", "close", by="ops")
    assert view.state.circuit == "closed" and "payments" not in h.queue.paused
    h.pools.circuit("payments", "auto", by="ops")
    assert h.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    with pytest.raises(ValueError, match="open, close or auto"):
        h.pools.circuit("payments", "flip", by="ops")


def test_a_pool_without_a_breaker_has_no_circuit_to_force() -> None:
    from shepherd.engine.pools import NoCircuitBreaker

    h = memory_harness(pool_policies=BREAKER)
    with pytest.raises(NoCircuitBreaker):
        h.pools.circuit("shipping", "open", by="ops")


def test_a_task_met_while_open_is_held_not_claimed() -> None:
    h = memory_harness(pool_policies=BREAKER)
    wf = h.start("order_fulfilment", ORDER)
    h.pump(rounds=1)  # reserve_inventory runs; charge_payment's message waits in its queue
    h.pools.circuit("payments", "open", by="ops")
    h.queue.set_enabled("payments", True)  # a batch received just before it opened
    handled = h.pump()
    held = [r for m, r in handled if m.step == "charge_payment"]
    assert held and all(r.outcome is Outcome.HELD for r in held)
    assert h.step(wf, "charge_payment").claimed_at is None


def test_the_breakers_transitions_are_lifecycle_events_from_the_table() -> None:
    from pathlib import Path

    import fastjsonschema

    h = memory_harness(pool_policies=BREAKER)
    h.pools.circuit("payments", "open", by="ops")
    h.pools.circuit("payments", "open", by="ops")  # no transition: no second event
    h.pools.circuit("payments", "close", by="ops")
    assert h.events is not None
    events = [e for e in h.events.published if e.detail_type.startswith("PoolCircuit")]
    assert [e.detail_type for e in events] == ["PoolCircuitOpened", "PoolCircuitClosed"]
    opened, closed = (e.detail for e in events)
    assert (opened["pool"], opened["from"], opened["why"]) == ("payments", "closed", "forced open")
    assert (closed["from"], closed["state"]) == ("open", "closed")
    assert opened["event_id"] != closed["event_id"]
    docs = Path(__file__).resolve().parents[2] / "docs" / "events"
    for event in events:
        schema = (docs / f"{event.detail_type}.schema.json").read_text()
        fastjsonschema.compile(json.loads(schema))(event.detail)


def test_the_counters_of_a_slot_are_a_partition_per_shard_and_the_window_sums_them() -> None:
    """Issue 41.2: every ended attempt of a guarded pool writes a counter of the current slot;
    the shards of a slot are partition keys of their own (a partition takes 1,000 WCU a second,
    and 5,000 attempts a second on one pool would be 5x that under one key), and the
    supervisor's window reads every shard's and sums them."""
    from shepherd.decisions import circuit as cb
    from shepherd.keys import CIRCUIT_PREFIX

    h = memory_harness(pool_policies=BREAKER)
    breakers = h.engine.breakers
    assert breakers is not None
    for i in range(200):
        breakers.record("payments", failed=i % 4 == 0)
    counters = [
        item
        for (pk, _), item in h.store._items.items()  # type: ignore[attr-defined]
        if pk.startswith(CIRCUIT_PREFIX)
    ]
    partitions = {item["pk"] for item in counters}
    assert len(partitions) == len(counters) == cb.COUNTER_SHARDS  # one item a partition
    assert sum(int(item["ended"]) for item in counters) == 200
    state = breakers.state("payments", fresh=True)
    assert breakers.window("payments", state, h.clock.now_ms()) == (200, 50)
