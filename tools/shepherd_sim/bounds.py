"""How long a workflow may take, in simulated time, before "it never finishes" is a bug.

The bound is computed from the definition, the simulator's settings, the attempts the
workflow actually made and the faults that hit it (docs/simulation.md explains each term):

    bound = created_at + used budget + penalty * (faults on it) + clock jumps + delays

* used budget: every step and compensation that was dispatched may have used each of its
  attempts to the full: waiting for its message, running up to TimeoutSeconds, being found
  overdue by the supervisor (G, the watch gap, plus one sweep interval), plus the longest
  delivery latency and the Lambda timeout grace; plus the largest backoff before each retry
  (rounded up to SQS's whole seconds). Steps are summed, not taken along the critical path,
  and one more look (G + a sweep) finishes the workflow. Agent faults (crashes, hangs,
  freezes, errors) cost attempts, so they are inside this budget.
* penalty: the most a fault that does not use up an attempt can add: a message that is lost,
  left unacknowledged or sent to the DLQ, or a store call or sweep that failed, is recovered
  by the next visibility timeout or the supervisor's re-dispatch (visibility +
  DispatchTimeoutSeconds + 2G + 2 sweeps + latency, plus the longest attempt).
* clock jumps and message delays add their own size.

`base_bound_ms` is the same budget with every attempt the policy allows: the most any run
of the definition can use, fault-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shepherd.definitions import Definition, TaskSpec
from shepherd.model import WorkflowState


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
    """Every attempt the policy allows, each as long as it can be, with every backoff."""
    attempts = 1 + spec.retry.max_attempts
    backoff = sum(_max_backoff_s(spec, n) + 1 for n in range(1, attempts))
    return attempts * attempt_cost_ms(spec, definition, timing) + round(backoff * 1000)


def attempt_cost_ms(spec: TaskSpec, definition: Definition, timing: Timing) -> int:
    """The longest one attempt can occupy, from its dispatch to the moment the next attempt
    (or the next step) may start: waiting for its message, running up to TimeoutSeconds,
    being found overdue (G + a sweep), plus delivery latency and the Lambda's grace."""
    gap_s = definition.watch_gap_ms / 1000
    seconds = (
        spec.timeout_seconds
        + definition.dispatch_timeout_seconds
        + gap_s
        + timing.sweep_interval_s
        + timing.max_latency_s
        + timing.lambda_grace_s
    )
    return round(seconds * 1000)


def used_budget_ms(state: WorkflowState, definition: Definition, timing: Timing) -> int:
    """The bound from the attempts the workflow actually made: each step and compensation
    that was dispatched costs at most `attempt_cost` per attempt it used plus the largest
    backoff before each retry; one more look (G + a sweep) finishes the workflow."""
    total = definition.watch_gap_ms + round(timing.sweep_interval_s * 1000)
    for rec in [*state.steps.values(), *state.compensations.values()]:
        if rec.attempt < 1:
            continue
        spec = definition.spec(rec.kind, rec.name)
        total += rec.attempt * attempt_cost_ms(spec, definition, timing)
        total += sum(round((_max_backoff_s(spec, n) + 1) * 1000) for n in range(1, rec.attempt))
    return total


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
