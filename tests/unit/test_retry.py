"""Retry policy: backoff, jitter bounds and when to give up (pure)."""

from __future__ import annotations

import random

import pytest
from shepherd.decisions.retry import GiveUp, RetryIn, backoff_ms, decide
from shepherd.definitions import RetryPolicy


@pytest.mark.parametrize(
    ("interval", "rate", "cap", "retry_number", "expected_ms"),
    [
        (1, 2, None, 1, 1000),
        (1, 2, None, 2, 2000),
        (1, 2, None, 4, 8000),
        (0.5, 3, None, 3, 4500),
        (1, 2, 5, 4, 5000),  # capped by MaxDelaySeconds
        (2, 1, None, 10, 2000),  # BackoffRate 1: constant
        (0, 2, None, 3, 0),
    ],
)
def test_backoff_without_jitter_is_exact(
    interval: float, rate: float, cap: float | None, retry_number: int, expected_ms: int
) -> None:
    policy = RetryPolicy(
        IntervalSeconds=interval, BackoffRate=rate, MaxDelaySeconds=cap, JitterStrategy="NONE"
    )
    assert backoff_ms(policy, retry_number, random.Random(0)) == expected_ms


@pytest.mark.parametrize("retry_number", [1, 2, 3, 6])
def test_full_jitter_stays_within_zero_and_the_capped_delay(retry_number: int) -> None:
    policy = RetryPolicy(
        IntervalSeconds=1, BackoffRate=2, MaxDelaySeconds=10, JitterStrategy="FULL"
    )
    ceiling = min(1000 * 2 ** (retry_number - 1), 10_000)
    rng = random.Random(retry_number)
    samples = [backoff_ms(policy, retry_number, rng) for _ in range(500)]
    assert all(0 <= s <= ceiling for s in samples)
    assert max(samples) > ceiling * 0.8 and min(samples) < ceiling * 0.2  # really spread


def test_retry_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        backoff_ms(RetryPolicy(), 0, random.Random(0))


POLICY = RetryPolicy(MaxAttempts=2, IntervalSeconds=1, NonRetryableErrors=("CardDeclined",))


@pytest.mark.parametrize(
    ("attempt", "error", "permanent", "unwinding", "expected"),
    [
        (1, "Timeout", False, False, RetryIn(1000)),
        (2, "Timeout", False, False, RetryIn(2000)),
        (3, "Timeout", False, False, GiveUp("exhausted")),  # MaxAttempts=2 retries: 3 attempts
        (1, "CardDeclined", False, False, GiveUp("permanent")),  # listed as non-retryable
        (1, "Anything", True, False, GiveUp("permanent")),  # PermanentError
        (1, "Timeout", False, True, GiveUp("unwinding")),  # no retries while unwinding
    ],
)
def test_decide(
    attempt: int, error: str, permanent: bool, unwinding: bool, expected: object
) -> None:
    decision = decide(
        POLICY,
        attempt=attempt,
        error_type=error,
        permanent=permanent,
        unwinding=unwinding,
        rng=random.Random(0),
    )
    assert decision == expected


def test_max_attempts_zero_never_retries() -> None:
    decision = decide(
        RetryPolicy(MaxAttempts=0),
        attempt=1,
        error_type="E",
        permanent=False,
        unwinding=False,
        rng=random.Random(0),
    )
    assert decision == GiveUp("exhausted")
