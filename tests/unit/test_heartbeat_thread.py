"""The background heartbeat survives a failed heartbeat write (found while modelling store
faults for the simulator, which runs heartbeats in the agent's own code instead)."""

from __future__ import annotations

import time
from typing import Any

from shepherd.decisions import transitions as tx
from shepherd.engine.agent import Heartbeat
from shepherd.model import StepRecord
from support import ORDER, Harness, HookStore, memory_harness


def _claimed_attempt() -> tuple[Harness, HookStore, Heartbeat]:
    """A claimed attempt of reserve_inventory, its store behind a hook, and its heartbeat."""
    h = memory_harness()
    hook = HookStore(h.store)
    h.ports.store = hook
    wf = h.start("order_fulfilment", ORDER)
    rec = h.step(wf, "reserve_inventory")
    claim = tx.claim(rec, 1, h.clock.now_ms(), "test")
    rec = StepRecord.from_item(hook.update(claim.pk, claim.sk, claim.update, claim.condition))
    spec = h.scheduler.catalog.current("order_fulfilment").by_name["reserve_inventory"]
    return h, hook, Heartbeat(h.scheduler, rec, spec, h.clock.now_ms() + 3_600_000)


def test_a_throttled_heartbeat_does_not_stop_the_heartbeats() -> None:
    h, hook, heartbeat = _claimed_attempt()
    failures: list[str] = []

    def throttle_once(pk: str, sk: str, update: Any) -> None:
        if "heartbeat_at" in update.set and not failures:
            failures.append(sk)
            raise RuntimeError("ProvisionedThroughputExceededException")

    hook.before_update = throttle_once
    heartbeat.interval_ms = 10  # beat often, so the test runs in a fraction of a second
    heartbeat.start_background()
    try:
        for _ in range(100):
            h.clock.advance(0.02)
            time.sleep(0.005)
            if heartbeat.writes >= 3:
                break
    finally:
        heartbeat.stop()
    assert failures == ["S#reserve_inventory"]
    assert heartbeat.writes >= 3, "the heartbeat thread died on the first failed write"
    assert not heartbeat.fenced


def test_a_failed_progress_write_never_reaches_the_agent_and_keeps_the_details() -> None:
    h, hook, heartbeat = _claimed_attempt()

    def throttled(pk: str, sk: str, update: Any) -> None:
        raise RuntimeError("ThrottlingException")

    hook.before_update = throttled
    h.clock.advance(5)  # a heartbeat is due, so reporting tries to write
    heartbeat.report('{"percent": 40}')  # must not raise into the agent function
    assert heartbeat.writes == 0
    assert heartbeat.take_details() == '{"percent": 40}'  # kept for the attempt's next write
