"""Throttling loses nothing and costs no attempt (issue 23): each write of a step's life is
throttled in turn, on the strict in-memory store (StoreUnavailable, as the adapter reports it)
and on DynamoDB (moto, a `ThrottlingException` from the SDK, through the adapter's one
translation). Every workflow still succeeds with one attempt per step."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from shepherd.conditions import Cond, Update
from shepherd.errors import StoreUnavailable
from shepherd.model import StepStatus, WorkflowStatus
from shepherd_examples.agents import ledger
from support import ORDER, ORDER_EXTRAS, Harness, memory_harness, moto_harness, registry_with


@pytest.fixture(params=["memory", "moto"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """On both stores whatever SHEPHERD_ENGINE_STORES says (support.ENGINE_STORES): on DynamoDB
    this is the adapter's test, its translation of the SDK's throttle inside a whole run."""
    if request.param == "memory":
        yield memory_harness()
    else:
        with moto_harness() as h:
            yield h


# Which write to throttle: (pk, sk, the attributes it SETs) -> True for the writes to refuse.
Match = Callable[[str, str, dict[str, Any]], bool]

WRITES: dict[str, Match] = {
    "claim": lambda pk, sk, sets: sk.startswith("S#") and sets.get("status") == "RUNNING",
    "heartbeat": lambda pk, sk, sets: (
        sk.startswith("S#") and "heartbeat_at" in sets and "status" not in sets
    ),
    "result": lambda pk, sk, sets: sk.startswith("S#") and sets.get("status") == "SUCCEEDED",
    "finish": lambda pk, sk, sets: sk == "#WF" and sets.get("status") == "SUCCEEDED",
}


@pytest.fixture(autouse=True)
def _clean_ledger() -> None:
    ledger.reset()


class Throttle:
    """Refuse the first `times` writes that `match`, then let everything through."""

    def __init__(self, match: Match, times: int) -> None:
        self.match = match
        self.left = times
        self.refused = 0

    def hit(self, pk: str, sk: str, sets: dict[str, Any]) -> bool:
        if self.left and self.match(pk, sk, sets):
            self.left -= 1
            self.refused += 1
            return True
        return False


def _memory(harness: Harness, throttle: Throttle | Episode | Window) -> None:
    real = harness.store.update

    def update(pk: str, sk: str, update: Update, condition: Cond | None) -> Any:
        if throttle.hit(pk, sk, dict(update.set)):
            raise StoreUnavailable("UpdateItem: throttled", throttled=True)
        return real(pk, sk, update, condition)

    harness.store.update = update  # type: ignore[method-assign]


def _sets(params: dict[str, Any]) -> dict[str, Any]:
    """The attributes an UpdateItem request SETs to a plain value, by name."""
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    clause = params["UpdateExpression"].split(" REMOVE ")[0].split(" ADD ")[0]
    out: dict[str, Any] = {}
    for name, value in re.findall(r"(#n\d+) = (:v\d+)", clause):
        raw = values[value]
        out[names[name]] = raw.get("S", raw.get("N"))
    return out


def _dynamodb(harness: Harness, throttle: Throttle | Episode) -> None:
    client = harness.store._client  # type: ignore[attr-defined]
    real = client.update_item

    def update_item(**params: Any) -> Any:
        if throttle.hit(params["Key"]["pk"]["S"], params["Key"]["sk"]["S"], _sets(params)):
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                "UpdateItem",
            )
        return real(**params)

    client.update_item = update_item


def _deliver(harness: Harness, rounds: int = 60) -> Iterator[None]:
    """Deliver messages like the event source mapping: a handler that raises (a throttled
    claim) leaves its message for a later receive; time moves, the supervisor sweeps."""
    for _ in range(rounds):
        for m in harness.receive():
            try:
                harness.runtime.handle(m.task)
            except StoreUnavailable:
                # A batch item failure whose message the handler makes visible again soon
                # (shepherd_handlers.agent): nothing was claimed, no attempt was spent.
                harness.queue.release(m.receipt)
                continue
            harness.queue.delete(m.receipt)
        yield
        harness.clock.advance(5)
        harness.sweep()


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_throttled_write_costs_no_attempt_and_loses_nothing(harness: Harness, write: str) -> None:
    throttle = Throttle(WRITES[write], times=2)
    if harness.store.__class__.__name__ == "DynamoStore":
        _dynamodb(harness, throttle)
    else:
        _memory(harness, throttle)
    from shepherd_examples.agents import registry

    real = registry.get("reserve_inventory")
    assert real is not None

    def reserve(ctx: Any) -> Any:
        # Long enough to heartbeat: HeartbeatSeconds 3, a beat due every 1.5 s of work.
        for done in (1, 2):
            harness.clock.advance(1.6)
            ctx.report_progress({"done": done})
        return real(ctx)

    with registry_with(reserve_inventory=reserve) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        for _ in _deliver(harness):
            if harness.state(wf).workflow.status.terminal:
                break
    state = harness.state(wf)
    assert throttle.refused >= 1, f"no {write} write was throttled"
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    for name, rec in state.steps.items():
        if name in ORDER_EXTRAS:  # a small order naming no remind_at: skipped, never claimed
            assert rec.status is StepStatus.SKIPPED and rec.attempt == 0 and not rec.history
            continue
        assert rec.status is StepStatus.SUCCEEDED
        assert rec.attempt == 1, f"{name} used {rec.attempt} attempts"
        assert [h["o"] for h in rec.history] == ["ok"], f"{name}: {rec.history}"
    effects = ledger.effects()
    assert len(effects) == len(set(effects)) == 4  # each step's effect once


class Episode:
    """Refuse every write that `match` for `seconds` of the harness's clock from the first
    one (a hot partition's episode, longer than an attempt's lease)."""

    def __init__(self, harness: Harness, match: Match, seconds: float) -> None:
        self.harness = harness
        self.match = match
        self.seconds = seconds
        self.until: int | None = None
        self.refused = 0

    def hit(self, pk: str, sk: str, sets: dict[str, Any]) -> bool:
        if not self.match(pk, sk, sets):
            return False
        now = self.harness.clock.now_ms()
        if self.until is None:
            self.until = now + int(self.seconds * 1000)
        if now < self.until:
            self.refused += 1
            return True
        return False


def _reserve_results(pk: str, sk: str, sets: dict[str, Any]) -> bool:
    return sk.endswith("reserve_inventory") and WRITES["result"](pk, sk, sets)


@pytest.mark.parametrize("store", ["memory", "moto"])
def test_a_result_refused_past_its_lease_is_parked_and_recorded_by_the_supervisor(
    store: str,
) -> None:
    """Issue 41.3: reserve_inventory (TimeoutSeconds 8) returns, and its result write is
    refused for 60 s: its agent parks the result in the payload bucket when the lease ends;
    the supervisor, about to time the attempt out once the episode is over, records it
    instead. One attempt, the agent's own output, one effect."""
    with contextlib.ExitStack() as stack:
        harness = memory_harness() if store == "memory" else stack.enter_context(moto_harness())
        episode = Episode(harness, _reserve_results, 60.0)
        if store == "moto":
            _dynamodb(harness, episode)
        else:
            _memory(harness, episode)
        wf = harness.start("order_fulfilment", ORDER)
        for _ in _deliver(harness, rounds=40):
            if harness.state(wf).workflow.status.terminal:
                break
        state = harness.state(wf)
        assert episode.refused >= 2 and episode.until is not None
        assert state.workflow.status is WorkflowStatus.SUCCEEDED
        rec = state.steps["reserve_inventory"]
        assert rec.attempt == 1 and [h["o"] for h in rec.history] == ["ok"]
        assert (rec.finished_at or 0) >= episode.until  # recorded after the episode, not in it
        assert not [k for k in harness.payload_store.objects if "/parked/" in k]  # taken
        effects = ledger.effects()
        assert len(effects) == len(set(effects)) == 4


def test_a_result_returned_after_its_deadline_is_not_taken_from_the_bucket() -> None:
    """A parked result whose function returned after the attempt's deadline (as the table
    reads it) does not outweigh the timeout: the attempt is timed out and retried."""
    harness = memory_harness()
    episode = Episode(harness, _reserve_results, 60.0)
    _memory(harness, episode)
    from shepherd_examples.agents import registry

    real = registry.get("reserve_inventory")
    assert real is not None
    calls: list[int] = []

    def reserve(ctx: Any) -> Any:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            harness.clock.advance(9)  # past TimeoutSeconds 8 (its heartbeats are written)
        return real(ctx)

    with registry_with(reserve_inventory=reserve) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        for _ in _deliver(harness, rounds=60):
            if harness.state(wf).workflow.status.terminal:
                break
    rec = harness.state(wf).steps["reserve_inventory"]
    assert calls[:2] == [1, 2]
    assert rec.attempt >= 2 and rec.history[0]["o"] != "ok"


class Window:
    """Refuse every update of one partition while the clock is in [start, end)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.pk: str | None = None
        self.start = self.end = 0
        self.refused = 0

    def hit(self, pk: str, sk: str, sets: dict[str, Any]) -> bool:
        now = self.harness.clock.now_ms()
        if pk == self.pk and self.start <= now < self.end:
            self.refused += 1
            return True
        return False


def test_heartbeats_refused_past_the_lease_do_not_time_a_running_attempt_out() -> None:
    """Issue 41.3, a heartbeat: reserve_inventory (HeartbeatSeconds 3, TimeoutSeconds 8)
    works 6.4 s; every write to its workflow's partition is refused from 1 s to 4.6 s into it,
    so its heartbeats at 1.6 s and 3.2 s are refused and its lease lapses at 3 s. A sweep at
    4.8 s (the episode over, before its next heartbeat) finds the heartbeat it parked in the
    bucket at 3.2 s and writes it instead of timing the attempt out: one attempt."""
    harness = memory_harness()
    window = Window(harness)
    _memory(harness, window)
    from shepherd_examples.agents import registry

    real = registry.get("reserve_inventory")
    assert real is not None
    swept: list[Any] = []

    def reserve(ctx: Any) -> Any:
        start = harness.clock.now_ms()
        window.pk, window.start, window.end = f"WF#{ctx.workflow_id}", start + 1000, start + 4600
        for n in range(4):
            harness.clock.advance(1.6)
            if n == 2:
                swept.append(harness.sweep())  # the supervisor, meanwhile
            ctx.report_progress({"working": n})
        return real(ctx)

    with registry_with(reserve_inventory=reserve) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        for _ in _deliver(harness, rounds=40):
            if harness.state(wf).workflow.status.terminal:
                break
    state = harness.state(wf)
    assert window.refused >= 2 and swept
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    rec = state.steps["reserve_inventory"]
    assert rec.attempt == 1 and [h["o"] for h in rec.history] == ["ok"]
