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
* pauses: the time a workflow spent PAUSED waiting for an operator (from the write that paused
  it to the operator's write that ended it, like the time a FAILED workflow waits for its
  redrive), but never more than its pause timeout allows; a pause the supervisor ended is
  allowed PauseTimeoutSeconds plus one look (G + a sweep). See `paused_wait_ms`.
* paused pools: the time a pool the workflow uses was paused during its life, plus one
  fault penalty per pause (a message lost meanwhile is re-sent a dispatch grace after the
  resume). See `pool_wait_ms`.

`base_bound_ms` is the same budget with every attempt the policy allows: the most any run
of the definition can use, fault-free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from shepherd.definitions import Definition, StepSpec, TaskSpec
from shepherd.model import StepRecord, WorkflowState

from shepherd_sim.invariants import SUPERVISORS, StatusWrite


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


def used_budget_ms(
    state: WorkflowState,
    definition: Definition,
    timing: Timing,
    units: Sequence[StepRecord] = (),
) -> int:
    """The bound from the attempts the workflow actually made: each step and compensation
    that was dispatched costs at most `attempt_cost` per attempt it used plus the largest
    backoff before each retry; one more look (G + a sweep) finishes the workflow. A map's
    items (`units`: each item's unit and each item compensation's) are counted the same way,
    one after another, although up to MaxConcurrency of them run at once."""
    total = definition.watch_gap_ms + round(timing.sweep_interval_s * 1000)
    total += waits_budget_ms(definition, timing)
    total += approvals_budget_ms(state, definition, timing)
    for rec in [*state.steps.values(), *state.compensations.values(), *units]:
        if rec.attempt < 1 or (rec.kind == "step" and not definition.by_name[rec.name].is_task):
            continue
        spec = definition.spec(rec.kind, rec.name)
        total += rec.attempt * attempt_cost_ms(spec, definition, timing)
        total += sum(round((_max_backoff_s(spec, n) + 1) * 1000) for n in range(1, rec.attempt))
        if rec.kind == "step":
            total += rec.iterations * repeat_rest_ms(
                definition.by_name[rec.name], definition, timing
            )
    return total


def repeat_rest_ms(spec: StepSpec, definition: Definition, timing: Timing) -> int:
    """A `Repeat` step's rest after an iteration: its interval, and a look (G + a sweep) that
    sends the next one (0 for a step that does not repeat)."""
    if spec.repeat is None:
        return 0
    look = definition.watch_gap_ms + round(timing.sweep_interval_s * 1000)
    return spec.repeat.interval_seconds * 1000 + look


def waits_budget_ms(definition: Definition, timing: Timing) -> int:
    """Every `Seconds` wait of the definition, each woken by a look (G + a sweep) after it.
    (The simulator's definitions wait only for `Seconds`.)"""
    look = definition.watch_gap_ms + round(timing.sweep_interval_s * 1000)
    return sum(
        s.wait.seconds * 1000 + look
        for s in definition.steps
        if s.wait is not None and s.wait.seconds is not None
    )


def approval_cost_ms(definition: Definition, timing: Timing, timeout_seconds: int) -> int:
    """One attempt of an Approval: nobody answers, and a look (G + a sweep) times it out."""
    look = definition.watch_gap_ms + round(timing.sweep_interval_s * 1000)
    return timeout_seconds * 1000 + look


def approvals_budget_ms(state: WorkflowState, definition: Definition, timing: Timing) -> int:
    """Every attempt an Approval step rested (a resume asks again after a rejection or a
    timeout while paused), each as long as its timeout and one look."""
    total = 0
    for name, rec in state.steps.items():
        spec = definition.by_name[name].approval
        if spec is not None and rec.attempt >= 1:
            total += rec.attempt * approval_cost_ms(definition, timing, spec.timeout_seconds)
    return total


def base_bound_ms(definition: Definition, timing: Timing) -> int:
    total = sum(task_budget_ms(t, definition, timing) for t in definition.tasks)
    for step in definition.steps:  # a Repeat step: every iteration, each with its rest
        if step.repeat is not None:
            more = step.repeat.max_iterations - 1
            total += more * task_budget_ms(step, definition, timing)
            total += step.repeat.max_iterations * repeat_rest_ms(step, definition, timing)
    total += waits_budget_ms(definition, timing)
    total += sum(
        approval_cost_ms(definition, timing, s.approval.timeout_seconds)
        for s in definition.steps
        if s.approval is not None
    )
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


def pause_timeout_budget_ms(definition: Definition, timing: Timing) -> int | None:
    """The longest a pause may last when nobody ends it: PauseTimeoutSeconds, then one look
    (G + a sweep) to notice it has passed. None: the definition has no pause timeout."""
    timeout = definition.pause_timeout_seconds
    if timeout is None:
        return None
    return timeout * 1000 + definition.watch_gap_ms + round(timing.sweep_interval_s * 1000)


def paused_wait_ms(
    writes: Sequence[StatusWrite], definition: Definition, timing: Timing, end: int
) -> int:
    """The time one workflow may spend PAUSED: every pause in its status writes (in the order
    they landed), each from the write that paused it to the write that ended it (or `end`).

    A pause an operator ended is the operator's time, like a FAILED workflow waiting for its
    redrive, capped by the pause timeout's budget when the definition has one (a pause that
    outlived it was the supervisor's to end); a pause the supervisor ended is allowed that
    budget, so a late pause timeout still breaks the bound."""
    budget = pause_timeout_budget_ms(definition, timing)
    total = 0
    began: int | None = None
    for w in writes:
        if w.after == "PAUSED" and w.before != "PAUSED":
            began = w.at
        elif began is not None and w.before == "PAUSED" and w.after != "PAUSED":
            waited = w.at - began
            if w.role in SUPERVISORS and budget is not None:
                total += budget
            else:
                total += waited if budget is None else min(waited, budget)
            began = None
    if began is not None:
        total += end - began if budget is None else min(end - began, budget)
    return total


def pool_wait_ms(
    pauses: Sequence[tuple[int, int | None]],
    definition: Definition,
    timing: Timing,
    end: int,
) -> int:
    """The time the pools of one workflow were paused (`(began, ended)`, ended None: still
    paused at `end`), each pause also costing one fault penalty: a task that waited for the
    pool is sent again no sooner than a dispatch grace after the resume."""
    total = 0
    for began, ended in pauses:
        total += (end if ended is None else ended) - began
        total += fault_penalty_ms(definition, timing)
    return total
