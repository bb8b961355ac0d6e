"""The Pass kind (`Pass`, issue 42.5): runs no Lambda and sends no message. Whoever finds it
ready (the writer that ended its last dependency, the start for a root, a resume, or a look
when that writer died) writes it SUCCEEDED with its output in one conditional write, as a
Condition's skip is written, and the winner advances past it: its dependents proceed in the
same advance. Its output is its `Result` (absent: null), or its `Arguments` rendered, shaped
by its `Output` (shepherd/expressions.py); an expression that fails fails it for good
(`States.QueryEvaluationError`), in the same one write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shepherd import expressions, jsonsafe
from shepherd.decisions.actions import Action, PassThrough
from shepherd.definitions import StepSpec
from shepherd.kinds.base import DecidedWhenReady, Planning
from shepherd.model import StepRecord, StepStatus


class Pass(DecidedWhenReady):
    name = "pass"

    def matches(self, spec: StepSpec) -> bool:
        return spec.pass_ is not None

    def plan_ready(
        self, p: Planning, rec: StepRecord, spec: StepSpec, ready_at: int
    ) -> list[Action]:
        return [PassThrough(rec)]  # by whoever sees it first: one conditional write

    def plan_resend(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action]:
        return [PassThrough(rec)]  # a resume's: nothing to send, it passes

    def plan_at_start(
        self, rec: StepRecord, spec: StepSpec, created_at: int, document: Any
    ) -> Action:
        return PassThrough(rec)

    def supervise(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action] | None:
        """A look passes one a resume queued whose writer died; else nothing (it never runs,
        so nothing can time out)."""
        return [PassThrough(rec)] if rec.status is StepStatus.QUEUED else []


def has_expressions(spec: StepSpec) -> bool:
    """Whether its output is computed from data expressions (`Arguments`, `Output`,
    `Assign`)."""
    return spec.arguments is not None or spec.output is not None or spec.assign is not None


def output_json(
    spec: StepSpec,
    workflow_input: Any,
    steps: Mapping[str, Any],
    variables: Mapping[str, Any],
    seed: str,
) -> tuple[str, str | None]:
    """A Pass step's output as JSON text: its `Result`, else its `Arguments` rendered, else
    null; shaped by its `Output` (`$states.result` is that value); and the variables its
    `Assign` sets (None: it has none). Raises `expressions.ExpressionError` (an expression
    failed) or `jsonsafe.JsonRejected`."""
    assert spec.pass_ is not None
    value = spec.pass_.result
    if spec.arguments is not None:
        value = expressions.render(
            spec.arguments,
            "Arguments",
            workflow_input=workflow_input,
            steps=steps,
            variables=variables,
            seed=seed,
        )
    assigned = None
    if spec.assign is not None:
        assigned = expressions.assign(
            spec.assign,
            workflow_input=workflow_input,
            steps=steps,
            variables=variables,
            result=value,
            seed=seed,
        )
    if spec.output is not None:
        value = expressions.render(
            spec.output,
            "Output",
            workflow_input=workflow_input,
            steps=steps,
            variables=variables,
            result=value,
            seed=seed,
        )
    return jsonsafe.dumps(value, what="output"), assigned
