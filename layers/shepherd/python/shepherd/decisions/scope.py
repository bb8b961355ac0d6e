"""Which steps a native workflow still runs (issue 42.5): Catch, Choice and branch scoping.

Pure: a workflow's state and its definition in, a verdict out; the planner and the deadline
rule ask here instead of testing each dependency's status themselves.

* A step **ran** when it SUCCEEDED, or was SKIPPED by its own Condition (as before: a
  condition-skipped step counts as done for its dependents).
* A step is **out of scope** when it FAILED and a catcher took the failure (`caught_by`), or
  it was SKIPPED as out of scope (`skip_reason`), or, for the step a Catch or a Choice names
  (it is *entered* by that step), when that step settled without sending it there.
* A step with `DependsOn` is ready when every dependency settled (ran or out of scope) and
  at least one ran; when every one is out of scope it is itself out of scope (SKIPPED,
  `out_of_scope`). A step entered by a Catch runs when the Catch that names it fired; by a
  Choice, when the Choice picked it.

Without any Catch or Choice nothing is ever out of scope, so every verdict is the one the
engine gave before (`ready_at` over done dependencies).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from typing import Literal

from shepherd.definitions import Definition, StepSpec
from shepherd.model import StepRecord, StepStatus, WorkflowState, loads

OUT_OF_SCOPE = "out_of_scope"  # a SKIPPED step's `skip_reason`: no dependency of it ran
NOT_CHOSEN = "not_chosen"  # ... a step a Choice named and did not pick
CAUGHT = "caught"  # the error type a caught step's failure is announced with

Verdict = Literal["run", "out"]


def catcher_of(spec: StepSpec, rec: StepRecord) -> str | None:
    """The step a FAILED step's catchers send its failure to (the first whose ErrorEquals
    names its error, or `States.ALL`), or None: not caught. A step that failed because its
    workflow was already unwinding (or cancelled) is never caught: that failure unwinds."""
    if spec.catch is None or rec.status is not StepStatus.FAILED:
        return None
    if rec.fail_reason == "unwinding":
        return None
    error_type = error_type_of(rec)
    return next((c.next for c in spec.catch if c.matches(error_type)), None)


def error_type_of(rec: StepRecord) -> str:
    error = loads(rec.error) or {}
    return str(error.get("type", "StepFailed"))


def caught_output(rec: StepRecord) -> dict[str, str]:
    """What a caught step hands its fallback (its input, its `output` as a dependency):
    ASL's error output, `{"Error": <name>, "Cause": <message>}`."""
    error = loads(rec.error) or {}
    return {
        "Error": str(error.get("type", "StepFailed")),
        "Cause": str(error.get("message", "")),
    }


def to_catch(state: WorkflowState, definition: Definition, rec: StepRecord) -> str | None:
    """A FAILED step a catcher takes and whose catch is not recorded yet: its fallback."""
    if rec.caught_by is not None:
        return None
    spec = definition.by_name.get(rec.name)
    return None if spec is None else catcher_of(spec, rec)


def settled_failure(definition: Definition, rec: StepRecord) -> bool:
    """A FAILED step that does not fail its workflow: a catcher took it (recorded, or to be
    recorded by the next write: it never unwinds)."""
    if rec.status is not StepStatus.FAILED:
        return False
    if rec.caught_by is not None:
        return True
    spec = definition.by_name.get(rec.name)
    return spec is not None and catcher_of(spec, rec) is not None


def settled(rec: StepRecord) -> bool:
    """Whether a step is over for its workflow's success: done (SUCCEEDED or SKIPPED), or
    FAILED with its catch recorded."""
    return rec.status.done or (rec.status is StepStatus.FAILED and rec.caught_by is not None)


def _outcome(rec: StepRecord) -> Verdict | None:
    """What a dependency means for its dependents: it ran, it is out of scope, or None (not
    settled yet)."""
    if rec.status is StepStatus.SUCCEEDED:
        return "run"
    if rec.status is StepStatus.SKIPPED:
        return "out" if rec.skip_reason is not None else "run"
    if rec.status is StepStatus.FAILED and rec.caught_by is not None:
        return "out"
    return None


def verdict(
    state: WorkflowState, definition: Definition, spec: StepSpec
) -> tuple[Verdict, int] | None:
    """Whether a PENDING step runs or is out of scope, and since when (the moment its last
    input settled; the workflow's start for a root), or None while an input has not settled."""
    source = definition.entered_from.get(spec.name)
    if source is not None:
        rec = state.steps[source]
        at = rec.finished_at or 0
        if rec.status is StepStatus.FAILED and rec.caught_by is not None:
            return ("run" if rec.caught_by == spec.name else "out", at)
        if rec.status is StepStatus.SUCCEEDED:
            return ("run" if rec.chosen == spec.name else "out", at)
        if rec.status is StepStatus.SKIPPED:
            return ("out", at)
        return None
    ran = False
    finished = []
    for dep in spec.depends_on:
        rec = state.steps[dep]
        outcome = _outcome(rec)
        if outcome is None:
            return None
        ran = ran or outcome == "run"
        finished.append(rec.finished_at or 0)
    if not finished:
        return ("run", state.workflow.created_at)
    return ("run" if ran else "out", max(finished))


def skip_reason(definition: Definition, spec: StepSpec) -> str:
    """Why an out-of-scope step is skipped: not picked by its Choice, or out of scope."""
    source = definition.entered_from.get(spec.name)
    if source is not None and definition.by_name[source].choice is not None:
        return NOT_CHOSEN
    return OUT_OF_SCOPE


def input_path(definition: Definition, spec: StepSpec) -> str | None:
    """Where a step's input comes from: its own `InputPath`; for a fallback (a step a Catch
    names) with none, the error it was entered with (`$.steps.<caught>.output`)."""
    if spec.input_path is not None:
        return spec.input_path
    source = definition.entered_from.get(spec.name)
    if source is not None and definition.by_name[source].choice is None:
        return f"$.steps.{source}.output"
    return None
