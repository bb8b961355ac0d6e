"""The step-kind registry (issue 40.1): one module per kind, one protocol
(`shepherd.kinds.base.StepKind`), and `kind_of`, the one place that tells which kind a step
is. Code outside this package asks a step's kind what to do instead of testing its fields
(`tests/unit/test_kind_branches.py` counts the places that still do).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from shepherd.definitions import StepSpec
from shepherd.kinds.approval import Approval
from shepherd.kinds.base import StepKind
from shepherd.kinds.child import Child
from shepherd.kinds.map import Map
from shepherd.kinds.pass_step import Pass
from shepherd.kinds.signal import Signal
from shepherd.kinds.task import Task
from shepherd.kinds.wait import Wait

# Asked in order, the first that matches wins: a map of child workflows is a map; a step of no
# other kind is a task.
KINDS: tuple[StepKind, ...] = (Wait(), Approval(), Signal(), Pass(), Map(), Child(), Task())

__all__ = ["KINDS", "StepKind", "kind_of"]


def kind_of(spec: StepSpec) -> StepKind:
    """The kind of `spec` (the first of `KINDS` that matches)."""
    return next(kind for kind in KINDS if kind.matches(spec))
