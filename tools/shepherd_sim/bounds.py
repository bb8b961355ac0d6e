"""How long a workflow may take, in simulated time, before "it never finishes" is a bug.

The bound is computed from the definition, the simulator's settings and the faults that hit
the workflow (docs/simulation.md explains each term):

    bound = created_at + base(definition) + penalty * (faults on it) + clock jumps + delays

* base: every step and every compensation may use all its attempts (1 + MaxAttempts), each
  costing the longest it can take before the supervisor ends it and the message that starts
  the next one arrives: TimeoutSeconds + DispatchTimeoutSeconds + G (the watch gap: how late
  the supervisor may look) + one sweep interval + the longest delivery latency + the Lambda
  timeout grace; plus the largest backoff before each retry (rounded up to SQS's whole
  seconds). Steps are summed, not taken along the critical path, and compensations are added
  on top, so the base holds for any interleaving of a fault-free run with slow attempts.
* penalty: the most a single fault can add that does not use up a retry: a message that is
  lost, left unacknowledged or sent to the DLQ is recovered by the next visibility timeout or
  the supervisor's re-dispatch (visibility + DispatchTimeoutSeconds + 2G + 2 sweeps + latency),
  and a frozen or hung process occupies at most the longest pause or Lambda timeout.
* clock jumps and message delays add their own size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shepherd.definitions import Definition, TaskSpec


@dataclass(frozen=True)
class Timing:
    sweep_interval_s: float
    visibility_s: float
    lambda_grace_s: float
    max_latency_s: float
    max_pause_s: float


def _max_backoff_s(spec: TaskSpec, retry_number: int) -> float:
    policy = spec.retry
    delay = policy.interval_seconds * policy.backoff_rate ** (retry_number - 1)
    if policy.max_delay_seconds is not None:
        delay = min(delay, policy.max_delay_seconds)
    # SQS delays are whole seconds, rounded up; longer ones wait for a sweep (counted apart).
    return float(math.ceil(delay))


def task_budget_ms(spec: TaskSpec, definition: Definition, timing: Timing) -> int:
    gap_s = definition.watch_gap_ms / 1000
    per_attempt = (
        spec.timeout_seconds
        + definition.dispatch_timeout_seconds
        + gap_s
        + timing.sweep_interval_s
        + timing.max_latency_s
        + timing.lambda_grace_s
    )
    attempts = 1 + spec.retry.max_attempts
    backoff = sum(_max_backoff_s(spec, n) + 1 for n in range(1, attempts))
    return round((attempts * per_attempt + backoff) * 1000)


def base_bound_ms(definition: Definition, timing: Timing) -> int:
    total = sum(task_budget_ms(t, definition, timing) for t in definition.tasks)
    return total + definition.watch_gap_ms + round(timing.sweep_interval_s * 1000)


def fault_penalty_ms(definition: Definition, timing: Timing) -> int:
    gap_s = definition.watch_gap_ms / 1000
    longest = max(t.timeout_seconds for t in definition.tasks) + timing.lambda_grace_s
    recover = (
        timing.visibility_s
        + definition.dispatch_timeout_seconds
        + 2 * gap_s
        + 2 * timing.sweep_interval_s
        + timing.max_latency_s
    )
    return round((recover + max(longest, timing.max_pause_s)) * 1000)
