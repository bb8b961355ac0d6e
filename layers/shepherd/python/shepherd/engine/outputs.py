"""A workflow's output, assembled from its steps' outputs when read (never stored on the
workflow item): what the API, `shepherd.testing` and a child-workflow step's parent read.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from typing import Any

from shepherd.definitions import Definition
from shepherd.model import StepStatus, WorkflowState, WorkflowStatus, loads
from shepherd.payloads import Payloads


def stored_output(state: WorkflowState, definition: Definition) -> dict[str, str | None] | None:
    """A succeeded workflow's output as stored: each step's stored output (inline or a payload
    reference) by step name; None before it succeeded.

    Assembled from the step items on every read, never stored on the workflow item, so the
    workflow item does not grow with its steps' outputs (shepherd.limits). A skipped step
    has no output and is not listed, nor is a caught step (its failure was its fallback's
    business: issue 42.5).
    """
    if state.workflow.status is not WorkflowStatus.SUCCEEDED:
        return None
    return {
        name: state.steps[name].output
        for name in definition.topological_order
        if name in state.steps and state.steps[name].status is StepStatus.SUCCEEDED
    }


def workflow_output(
    state: WorkflowState, definition: Definition, payloads: Payloads | None = None
) -> Any:
    """A succeeded workflow's output as a plain value (large step outputs fetched and verified
    through `payloads`), None before that."""
    stored = stored_output(state, definition)
    if stored is None:
        return None
    resolve = payloads.value if payloads is not None else loads
    return {name: resolve(text) for name, text in stored.items()}
