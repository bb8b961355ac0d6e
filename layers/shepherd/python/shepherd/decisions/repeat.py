"""A step's `Repeat` (issue 42.5): what an iteration's result does to its step. Pure.

An iteration is one of the step's attempts that returned a result. Its result is recorded by
one fenced write (`transitions.iterate` or `transitions.complete`), chosen here:

* `Until` holds on `{"input": <workflow input>, "steps": {<step>: {"output": <result>}}}`: the
  step SUCCEEDS with that output, and its dependents run;
* else, with iterations left: the step is QUEUED for its next iteration at attempt + 1 (the
  fence: no late result of this iteration's attempts can count for the next), its Retry
  budget starting again (`budget_from`), resting `IntervalSeconds` with no message (the
  supervisor sends it when its time comes, through the watch index, as a long backoff);
* else (`MaxIterations` done): the step FAILS for good with `States.LoopLimitExceeded`.

The step keeps only its counter (`iterations`) and its last output: nothing an iteration
reads or writes grows with the iterations done.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shepherd.decisions import choice
from shepherd.definitions import RepeatSpec

LOOP_LIMIT = "States.LoopLimitExceeded"


@dataclass(frozen=True)
class Done:
    """`Until` holds: the step succeeds with the iteration's output."""


@dataclass(frozen=True)
class Again:
    """The next iteration, `delay_ms` from now."""

    delay_ms: int


@dataclass(frozen=True)
class LimitReached:
    """`MaxIterations` iterations ended and `Until` never held: the step fails for good."""

    message: str


Decision = Done | Again | LimitReached


def document(step: str, input_value: Any, output: Any) -> dict[str, Any]:
    """What `Until` reads after an iteration: the workflow input and the iteration's output."""
    return choice.document(input_value, {step: output})


def decide(spec: RepeatSpec, *, iteration: int, document: Any) -> Decision:
    """What the result of iteration `iteration` (1-based) does to its step."""
    if choice.evaluate(spec.until, document):
        return Done()
    if iteration >= spec.max_iterations:
        return LimitReached(
            f"Until did not hold after MaxIterations ({spec.max_iterations}) iterations"
        )
    return Again(spec.interval_seconds * 1000)
