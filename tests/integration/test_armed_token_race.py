"""A task token armed while the supervisor's timeout of that attempt is in flight (found by the
simulator as seed 20427, later 10041): the timeout was planned from a read with no token, and
used to land without the token's hash in the history, so the external system's late callback
with that genuine token was told 'unknown' (404) instead of 'stale' (409). The write ending an
attempt guards the token it saw: it loses, and the next plan carries the token's hash.

The simulator's seeds stopped reaching this interleaving when the supervisor was partitioned
(issue 23); this test drives it by hand."""

from __future__ import annotations

import pytest
from shepherd.decisions import transitions as tx
from shepherd.decisions.planner import EndAttempt
from shepherd.decisions.retry import GiveUp
from shepherd.engine.tokens import TaskToken
from shepherd.errors import TaskTokenStale
from shepherd.model import StepStatus
from support import ORDER, Harness


def test_a_timeout_planned_before_a_token_was_armed_loses_and_the_token_stays_stale(
    harness: Harness,
) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    now = harness.clock.now_ms()
    rec = harness.step(wf, "reserve_inventory")
    claim = tx.claim(rec, 1, now, "agent")
    harness.store.update(claim.pk, claim.sk, claim.update, claim.condition)
    seen = harness.step(wf, "reserve_inventory")  # the supervisor's read: running, no token
    assert seen.status is StepStatus.RUNNING and seen.callback_token is None

    harness.clock.advance(60_000)
    # The frozen agent wakes and arms its token (as `Heartbeat.task_token` does).
    issued = TaskToken.new(wf, "step", "reserve_inventory", 1)
    arm = tx.arm_callback(seen, 1, issued.hash)
    harness.store.update(arm.pk, arm.sk, arm.update, arm.condition)
    token = issued.encode()
    timeout = EndAttempt(
        seen=seen,
        error_type="TimedOut",
        message="no heartbeat",
        decision=GiveUp("timeout"),
        outcome="timeout",
    )
    definition = harness.definitions["order_fulfilment"]
    assert harness.scheduler.end_attempt(harness.state(wf), definition, timeout) is False
    armed = harness.step(wf, "reserve_inventory")
    assert armed.status is StepStatus.RUNNING and armed.callback_token is not None

    # Planned again from a fresh read, the timeout lands with the token's hash in the history.
    again = EndAttempt(armed, "TimedOut", "no heartbeat", GiveUp("timeout"), "timeout")
    assert harness.scheduler.end_attempt(harness.state(wf), definition, again) is True
    assert harness.step(wf, "reserve_inventory").status is StepStatus.FAILED
    with pytest.raises(TaskTokenStale):
        harness.callbacks.callback(token, "success", output={"late": True})
