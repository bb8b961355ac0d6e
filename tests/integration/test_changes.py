"""Lifecycle events come from the table's changes (issue 15): the in-memory store keeps a
change stream like DynamoDB Streams, and `shepherd.changes.events_of` turns each change into
the events it announces. Each scenario's events are spelled out, in stream order, with what
identifies them (type, step, kind, attempt, and the reason or next attempt); every one obeys
its documented schema."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from shepherd.changes import Change, event_id, events_of
from shepherd.model import DomainEvent
from shepherd.testing import MemoryStore
from support import ENV, ORDER, Harness, memory_harness, pausing_order, registry_with


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
    h.operations.resume(wf)
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


STARTED = ("WorkflowStarted", None, None, None, None)
# A small order skips its fraud review; one naming no remind_at skips the reminder's two steps.
NO_REVIEW = ("StepSkipped", "fraud_review", "step", 0, None)
NO_REMINDER = (
    ("StepSkipped", "until_reminder", "step", 0, None),
    ("StepSkipped", "send_reminder", "step", 0, None),
)


def _retried(step: str, kind: str, attempt: int) -> tuple[Any, ...]:
    return ("StepRetried", step, kind, attempt, attempt + 1)


EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    "happy": [STARTED, NO_REVIEW, *NO_REMINDER, ("WorkflowSucceeded", None, None, None, None)],
    "retries": [
        STARTED,
        NO_REVIEW,
        _retried("charge_payment", "step", 1),
        _retried("charge_payment", "step", 2),
        *NO_REMINDER,
        ("WorkflowSucceeded", None, None, None, None),
    ],
    "compensated": [
        STARTED,
        NO_REVIEW,
        ("StepFailed", "ship_order", "step", 1, "permanent"),
        # ship_order was claimed: it may have acted, so it is undone too (When: ATTEMPTED).
        ("StepCompensated", "ship_order", "compensation", 1, None),
        ("StepCompensated", "charge_payment", "compensation", 1, None),
        ("StepCompensated", "reserve_inventory", "compensation", 1, None),
        ("WorkflowCompensated", None, None, None, None),
    ],
    "failed compensation": [
        STARTED,
        NO_REVIEW,
        ("StepFailed", "ship_order", "step", 1, "permanent"),
        ("StepCompensated", "ship_order", "compensation", 1, None),
        *(_retried("charge_payment", "compensation", a) for a in range(1, 6)),
        ("StepFailed", "charge_payment", "compensation", 6, "exhausted"),
        ("WorkflowFailed", None, None, None, None),
    ],
    "dag": [STARTED, ("WorkflowSucceeded", None, None, None, None)],
    "paused on failure, resumed": [
        STARTED,
        NO_REVIEW,
        ("StepFailed", "charge_payment", "step", 1, "permanent"),
        ("WorkflowPaused", None, None, None, None),
        ("WorkflowResumed", None, None, None, None),
        *NO_REMINDER,
        ("WorkflowSucceeded", None, None, None, None),
    ],
}


def _what(event: DomainEvent) -> tuple[Any, ...]:
    d = event.detail
    return (
        event.detail_type,
        d.get("step"),
        d.get("kind"),
        d.get("attempt"),
        d.get("reason") or d.get("next_attempt"),
    )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_scenario_announces_exactly_its_transitions(scenario: str) -> None:
    h = memory_harness()
    SCENARIOS[scenario](h)
    assert isinstance(h.store, MemoryStore)
    assert [_what(e) for e in _derived(h.store)] == EXPECTED[scenario]
    assert {e.detail["workflow_id"] for e in _derived(h.store)} == {"wf000001"}


def test_timeouts_cancel_pause_and_resume_are_derived_too() -> None:
    from shepherd_examples.agents.faults import SimulatedHang

    h = memory_harness()
    hung = h.start("order_fulfilment", {**ORDER, "faults": {"reserve_inventory": {"mode": "hang"}}})
    with pytest.raises(SimulatedHang):
        h.pump()
    h.clock.advance(4)
    h.sweep()  # times the hung attempt out
    h.operations.pause(hung)
    h.operations.resume(hung)
    h.operations.cancel(hung)
    h.run(hung)
    assert isinstance(h.store, MemoryStore)
    types = {e.detail_type for e in _derived(h.store)}
    assert {"StepTimedOut", "StepRetried", "WorkflowPaused", "WorkflowResumed"} <= types
    assert "WorkflowCancelled" in types


def test_every_operator_action_is_announced_with_who_did_it() -> None:
    """Issue 29.4: the history says who cancelled, compensated, resumed or retried a
    workflow, from the write itself; a give-up no person asked for (the pause timeout) says
    no one, even after an earlier action by someone left its mark on the item."""
    h = memory_harness()
    pausing_order(h)
    faults = {"charge_payment": {"mode": "permanent", "times": 1}}
    resumed = h.start("order_fulfilment", {**ORDER, "faults": faults}, owner="alice")
    h.pump()
    h.operations.resume(resumed, owner="alice")
    h.run(resumed)
    cancelled = h.start("order_fulfilment", ORDER, owner="bob")
    h.operations.cancel(cancelled, owner="bob")
    h.run(cancelled)
    gave_up = h.start("order_fulfilment", {**ORDER, "faults": faults}, owner="carol")
    h.pump()
    h.operations.compensate(gave_up, owner="carol")
    h.run(gave_up)
    retried = h.start(
        "order_fulfilment",
        {
            **ORDER,
            "faults": {
                "ship_order": {"mode": "permanent"},
                "charge_payment:compensation": {"mode": "error", "times": 6},
            },
        },
        owner="dave",
    )
    h.run(retried)
    assert h.status(retried).value == "FAILED"
    h.operations.redrive(retried, owner="dave")
    h.run(retried)
    assert isinstance(h.store, MemoryStore)
    said = [
        (e.detail["workflow_id"], e.detail_type, e.detail.get("by"))
        for e in _derived(h.store)
        if e.detail_type
        in {
            "WorkflowResumed",
            "WorkflowCancelRequested",
            "WorkflowCompensationRequested",
            "WorkflowRetried",
        }
    ]
    assert said == [
        (resumed, "WorkflowResumed", "alice"),
        (cancelled, "WorkflowCancelRequested", "bob"),
        (gave_up, "WorkflowCompensationRequested", "carol"),
        (retried, "WorkflowRetried", "dave"),
    ]
    running = {"pk": "WF#w", "sk": "#WF", "status": "RUNNING", "updated_at": 5}
    earlier = '{"action": "compensate", "by": "carol", "at": 3}'  # left by an older write
    paused = {**running, "status": "PAUSED", "paused_at": 5, "acted": earlier}
    timed_out = {**paused, "status": "COMPENSATING", "updated_at": 9}
    assert events_of(Change(paused, timed_out, "7")) == []  # its StepFailed/pause said why


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


def test_pauses_and_resumes_in_one_millisecond_get_their_own_ids() -> None:
    """Pause, resume, pause again in one millisecond (found by the simulator: the moment of
    the pause alone made the two pauses one id, and a deduplicating subscriber lost one)."""
    running = {"pk": "WF#w", "sk": "#WF", "status": "RUNNING", "updated_at": 5}
    paused = {**running, "status": "PAUSED", "paused_at": 5}
    writes = [(running, paused, "1"), (paused, running, "2"), (running, paused, "3")]
    writes.append((paused, running, "4"))
    events = [e for old, new, seq in writes for e in events_of(Change(old, new, seq))]
    assert [e.detail_type for e in events] == ["WorkflowPaused", "WorkflowResumed"] * 2
    ids = [e.detail["event_id"] for e in events]
    assert len(set(ids)) == 4
    # ... and each stays the same when its record is delivered again.
    assert events_of(Change(running, paused, "3"))[0].detail["event_id"] == ids[2]


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


def test_moto_s_keys_only_insert_of_a_child_start_announces_nothing() -> None:
    """moto streams an update that creates an item (a child's start, in a transaction) as a
    keys-only INSERT, then the INSERT with the whole image: the first is read, announces
    nothing and is not a failed record (the relay had retried it until its DLQ); the second
    announces the start."""
    keys = {"pk": "WF#c", "sk": "#WF"}
    assert events_of(Change(None, keys, "1")) == []
    whole = {**keys, "status": "RUNNING", "wf_type": "kid", "owner": "o", "created_at": 1}
    whole |= {"updated_at": 1, "parent_id": "p", "parent_step": "kid"}
    started = events_of(Change(None, whole, "2"))
    assert [e.detail_type for e in started] == ["WorkflowStarted"]


def test_a_callback_arriving_before_its_agent_returned_announces_nothing_twice() -> None:
    """A callback step's success arriving before its agent returned: still one event each."""
    from shepherd.engine.agent import AgentContext, Pending

    harness = memory_harness()
    assert isinstance(harness.store, MemoryStore)

    def ship(ctx: AgentContext) -> Any:
        harness.callbacks.callback(ctx.task_token(), "success", output={"tracking": "T"})
        return Pending()

    with registry_with(ship_order=ship) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.run(wf)
    assert [_what(e) for e in _derived(harness.store)] == EXPECTED["happy"]


def _record(change: Change) -> dict[str, Any]:
    """A change as DynamoDB Streams reports it to the event source mapping."""
    from shepherd.adapters.dynamodb import record_of_change

    return record_of_change(change)


def test_the_stream_filters_drop_claims_and_heartbeats_and_never_an_announcing_change() -> None:
    from shepherd.adapters.dynamodb import change_of_record
    from shepherd.changes import STREAM_FILTERS, passes_filters

    changes: list[Change] = []
    for scenario in SCENARIOS.values():
        h = memory_harness()
        scenario(h)
        assert isinstance(h.store, MemoryStore)
        changes += h.store.changes
    kept = dropped = 0
    for change in changes:
        record = _record(change)
        passes = passes_filters(record, STREAM_FILTERS)
        # The relay's path (serialized and read back) derives exactly the same events.
        assert events_of(change_of_record(record)) == events_of(change), change
        if events_of(change):
            assert passes, change  # an announcing change always reaches the consumer
        kept += passes
        dropped += not passes
    # Claims (and, with real agents, heartbeats) are the bulk of the writes: filtered out free.
    assert dropped > kept / 4, (kept, dropped)
    heartbeat = Change(
        {"pk": "WF#w", "sk": "S#a", "status": "RUNNING", "attempt": 1, "heartbeat_at": 1},
        {"pk": "WF#w", "sk": "S#a", "status": "RUNNING", "attempt": 1, "heartbeat_at": 2},
        "1",
    )
    assert not passes_filters(_record(heartbeat), STREAM_FILTERS)
    assert not passes_filters(
        {"eventName": "REMOVE", "dynamodb": {"OldImage": {"sk": {"S": "#WF"}}}}, STREAM_FILTERS
    )  # TTL deletions announce nothing
