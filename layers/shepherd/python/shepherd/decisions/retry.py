"""Pure retry decisions: what happens to a step whose attempt failed.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from shepherd.definitions import RetryPolicy


@dataclass(frozen=True)
class RetryIn:
    """Run attempt `attempt + 1` after `delay_ms`."""

    delay_ms: int


@dataclass(frozen=True)
class GiveUp:
    """The step fails for good. `reason` is `permanent`, `exhausted` or `unwinding`."""

    reason: str


RetryDecision = RetryIn | GiveUp


def backoff_ms(policy: RetryPolicy, retry_number: int, rng: random.Random) -> int:
    """Delay before retry `n` (n >= 1).

    `d = min(IntervalSeconds * BackoffRate ** (n - 1), MaxDelaySeconds)`; with FULL jitter the
    delay is uniform in [0, d] (the AWS "full jitter" scheme), else exactly d.
    """
    if retry_number < 1:
        raise ValueError("retry_number starts at 1")
    delay = policy.interval_seconds * policy.backoff_rate ** (retry_number - 1)
    if policy.max_delay_seconds is not None:
        delay = min(delay, policy.max_delay_seconds)
    if policy.jitter_strategy == "FULL":
        delay = rng.uniform(0, delay)
    return round(delay * 1000)


def decide(
    policy: RetryPolicy,
    *,
    attempt: int,
    error_type: str,
    permanent: bool,
    unwinding: bool,
    rng: random.Random,
) -> RetryDecision:
    """Retry or give up after attempt `attempt` failed with `error_type`.

    `MaxAttempts` counts retries (ASL): attempt `a` may be retried while `a <= MaxAttempts`.
    Nothing is retried while the workflow unwinds: the attempt simply ends.
    """
    if unwinding:
        return GiveUp("unwinding")
    if permanent or error_type in policy.non_retryable_errors:
        return GiveUp("permanent")
    if attempt > policy.max_attempts:
        return GiveUp("exhausted")
    return RetryIn(backoff_ms(policy, attempt, rng))
