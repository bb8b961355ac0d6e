"""A rate-limited pool (issue 26.1): claims take a token; a task that finds none goes back to
its queue with a delay, consumes no attempt and no retry budget, and its timeouts do not run.
On the in-memory store and on DynamoDB (moto), where the limiter's conditions compile."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from shepherd.engine.agent import Outcome
from shepherd.model import StepStatus, WorkflowStatus
from support import ORDER, Harness, memory_harness, moto_harness

LIMIT = {"payments": {"RateLimit": {"PerSecond": 2, "Burst": 2}}}


@pytest.fixture(params=["memory", "dynamodb"])
def limited(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "memory":
        yield memory_harness(pool_policies=LIMIT)
        return
    with contextlib.ExitStack() as stack:
        yield stack.enter_context(moto_harness(pool_policies=LIMIT))


def test_a_limited_pool_holds_what_it_has_no_token_for_and_spends_no_attempt(
    limited: Harness,
) -> None:
    h = limited
    workflows = [h.start("order_fulfilment", {**ORDER, "order_id": f"o-{i}"}) for i in range(10)]
    claims: list[int] = []  # claims of charge_payment in each simulated second
    for _ in range(120):
        claims.append(
            sum(
                1
                for message, result in h.pump()
                if message.step == "charge_payment" and result.outcome is not Outcome.HELD
            )
        )
        if all(h.status(wf).terminal for wf in workflows):
            break
        h.clock.advance(1)
        h.sweep()
    held = [r for m, r in h.log if r.outcome is Outcome.HELD]
    assert held and all(m.step == "charge_payment" for m, r in h.log if r.outcome is Outcome.HELD)
    for wf in workflows:
        state = h.state(wf)
        assert state.workflow.status is WorkflowStatus.SUCCEEDED
        charge = state.steps["charge_payment"]
        # Held many times, claimed once: no attempt, no retry budget, no timeout.
        assert charge.status is StepStatus.SUCCEEDED and charge.attempt == 1
        assert charge.attempts_total == 1
    # Never more than the burst plus the rate in any second.
    assert max(claims) <= 2 + 2 and sum(claims) == 10
    # A held task goes back to its own queue with a delay of whole seconds.
    resent = [t for t in h.queue.sent if t.message.step == "charge_payment" and t.delay_seconds]
    assert len(resent) >= len(held) and all(1 <= t.delay_seconds <= 900 for t in resent)


def test_an_unlimited_pool_is_never_held(limited: Harness) -> None:
    h = limited
    wf = h.start("order_fulfilment", ORDER)
    h.run(wf)
    assert not [r for m, r in h.log if r.outcome is Outcome.HELD and m.step != "charge_payment"]


def test_get_pools_shows_the_rate_limit(limited: Harness) -> None:
    views = {v.state.name: v for v in limited.pools.list()}
    limit = views["payments"].policy.rate_limit
    assert limit is not None and (limit.per_second, limit.burst) == (2, 2)
    assert views["inventory"].policy.rate_limit is None
