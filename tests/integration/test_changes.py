"""Events derived from the table's changes (issue 15) announce exactly what the engine's
writers announce, whatever the scenario: the in-memory store keeps a change stream like
DynamoDB Streams, and `shepherd.changes.events_of` turns each change into its events.

Compared on what identifies an event (type, workflow, step, kind, attempt and the fields a
subscriber reads), over scenarios that reach every event type."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from shepherd.changes import Change, event_id, events_of
from shepherd.model import DomainEvent
from shepherd.testing import MemoryStore
from support import ENV, ORDER, Harness, memory_harness, pausing_order, registry_with

KEYS = ("workflow_id", "step", "kind", "attempt", "status", "reason", "next_attempt")


def _identity(event: DomainEvent) -> tuple[Any, ...]:
    return (event.detail_type, *(event.detail.get(k) for k in KEYS))


@cache
def _schema(detail_type: str) -> Any:
    path = Path(__file__).resolve().parents[2] / "docs" / "events" / f"{detail_type}.schema.json"
    return fastjsonschema.compile(json.loads(path.read_text()))


def _derived(store: MemoryStore) -> list[DomainEvent]:
    events = [event for change in store.changes for event in events_of(change)]
    for event in events:  # what the stream consumer publishes obeys the documented schemas
        _schema(event.detail_type)(event.detail)
    return events


def _run(h: Harness, wf_type: str, payload: Any) -> None:
    wf = h.start(wf_type, payload)
    h.run(wf)


def _paused_and_resumed(h: Harness) -> None:
    pausing_order(h)
    faults = {"charge_payment": {"mode": "permanent", "times": 1}}
    wf = h.start("order_fulfilment", {**ORDER, "faults": faults})
    h.pump()
    assert h.status(wf).value == "PAUSED"
    h.scheduler.resume(wf)
    h.run(wf)


SCENARIOS = {
    "happy": lambda h: _run(h, "order_fulfilment", ORDER),
    "retries": lambda h: _run(
        h,
        "order_fulfilment",
        {**ORDER, "faults": {"charge_payment": {"mode": "error", "times": 2}}},
    ),
    "compensated": lambda h: _run(
        h, "order_fulfilment", {**ORDER, "faults": {"ship_order": {"mode": "permanent"}}}
    ),
    "failed compensation": lambda h: _run(
        h,
        "order_fulfilment",
        {
            **ORDER,
            "faults": {
                "ship_order": {"mode": "permanent"},
                "charge_payment:compensation": {"mode": "error", "times": 99},
            },
        },
    ),
    "dag": lambda h: _run(h, "provision_environment", ENV),
    "paused on failure, resumed": _paused_and_resumed,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_derived_events_are_the_published_events(scenario: str) -> None:
    h = memory_harness()
    SCENARIOS[scenario](h)
    assert isinstance(h.store, MemoryStore)
    derived = Counter(_identity(e) for e in _derived(h.store))
    published = Counter(_identity(e) for e in h.events.published)
    assert derived == published


def test_timeouts_cancel_pause_and_resume_are_derived_too() -> None:
    from shepherd_agents.faults import SimulatedHang

    h = memory_harness()
    hung = h.start("order_fulfilment", {**ORDER, "faults": {"reserve_inventory": {"mode": "hang"}}})
    with pytest.raises(SimulatedHang):
        h.pump()
    h.clock.advance(4)
    h.sweep()  # times the hung attempt out
    h.scheduler.pause(hung)
    h.scheduler.resume(hung)
    h.scheduler.cancel(hung)
    h.run(hung)
    assert isinstance(h.store, MemoryStore)
    derived = Counter(_identity(e) for e in _derived(h.store))
    published = Counter(_identity(e) for e in h.events.published)
    assert derived == published
    types = {e.detail_type for e in _derived(h.store)}
    assert {"StepTimedOut", "StepRetried", "WorkflowPaused", "WorkflowResumed"} <= types
    assert "WorkflowCancelled" in types


def test_every_event_has_a_deterministic_id_and_a_growing_sequence() -> None:
    h = memory_harness()
    SCENARIOS["compensated"](h)
    assert isinstance(h.store, MemoryStore)
    events = _derived(h.store)
    ids = [e.detail["event_id"] for e in events]
    assert len(ids) == len(set(ids))  # one id per transition
    again = [e.detail["event_id"] for c in h.store.changes for e in events_of(c)]
    assert again == ids  # the same change always gives the same id (a redelivery dedups)
    sequences = [e.detail["sequence"] for e in events]
    assert sequences == sorted(sequences)


def test_a_write_that_announces_nothing_derives_nothing() -> None:
    heartbeat = Change(
        {"pk": "WF#w", "sk": "S#a", "status": "RUNNING", "attempt": 1, "heartbeat_at": 1},
        {"pk": "WF#w", "sk": "S#a", "status": "RUNNING", "attempt": 1, "heartbeat_at": 2},
        "1",
    )
    assert events_of(heartbeat) == []
    removed = Change({"pk": "WF#w", "sk": "#WF", "status": "SUCCEEDED"}, None, "2")
    assert events_of(removed) == []  # a TTL deletion
    assert event_id("w", "StepFailed", "step", "a", 1) != event_id(
        "w", "StepFailed", "step", "a", 2
    )


def test_callback_heavy_runs_derive_the_same() -> None:
    """A callback step's success arriving before its agent returned: still one event each."""
    from shepherd.engine.agent import AgentContext, Pending

    harness = memory_harness()
    assert isinstance(harness.store, MemoryStore)

    def ship(ctx: AgentContext) -> Any:
        harness.scheduler.callback(ctx.task_token(), "success", output={"tracking": "T"})
        return Pending()

    with registry_with(ship_order=ship) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.run(wf)
    derived = Counter(_identity(e) for e in _derived(harness.store))
    published = Counter(_identity(e) for e in harness.events.published)
    assert derived == published
