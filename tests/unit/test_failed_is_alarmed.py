"""Every FAILED workflow is paged (invariant 6: FAILED needs an operator; an event and an alarm
say so), without a failure-rate alarm (issue 35's idle bill dropped it: two alarm metrics).

A workflow ends FAILED by exactly two routes, each alarmed before it lands: the planner's
unwinding when a compensation failed for good (its `StepFailed` of kind compensation is the
alarmed `CompensationsFailed`), and the supervisor parking a workflow whose looks kept failing
(`transitions.park`, after `LookFailures`, alarmed at the first). This test finds every place
the engine's source writes FAILED as a workflow's status: a third route fails it until that
route is alarmed and listed here."""

from __future__ import annotations

import re

from shepherd.model import DomainEvent
from shepherd.observability import Metric
from shepherd_handlers.runtime import derived_metrics
from support import ROOT

ENGINE = ROOT / "layers" / "shepherd" / "python" / "shepherd"
# A workflow status set to FAILED: a planner's Finish, or a write's "status".
SETS_FAILED = re.compile(
    r"Finish\(\s*WorkflowStatus\.FAILED|\"status\":\s*WorkflowStatus\.FAILED\.value"
)
ROUTES = {
    ("decisions/planner.py", "_compensations"): Metric.COMPENSATIONS_FAILED,
    ("decisions/transitions.py", "park"): Metric.LOOK_FAILURES,
}
# A state machine's designed end (issue 42.3: a Fail state, an uncaught error, its
# TimeoutSeconds) is FAILED with `failure: "definition"`, as Step Functions' ExecutionFailed:
# it needs no operator, so it is counted apart (WorkflowsFailedByDefinition) and pages nobody.
DESIGNED = {("asl/engine.py", "_cursor_write"): Metric.WORKFLOWS_FAILED_BY_DEFINITION}


def _enclosing_function(lines: list[str], index: int) -> str:
    for line in reversed(lines[: index + 1]):
        found = re.match(r"\s*def (\w+)\(", line)
        if found:
            return found.group(1)
    return "<module>"


def routes_to_failed() -> set[tuple[str, str]]:
    found = set()
    for path in ENGINE.rglob("*.py"):
        text = path.read_text()
        lines = text.splitlines()
        for match in SETS_FAILED.finditer(text):
            index = text.count("\n", 0, match.start())
            found.add((str(path.relative_to(ENGINE)), _enclosing_function(lines, index)))
    return found


def test_a_workflow_ends_failed_only_by_the_two_alarmed_routes() -> None:
    assert routes_to_failed() == set(ROUTES) | set(DESIGNED)


def test_a_designed_failure_is_counted_apart_and_never_as_one_that_needs_an_operator() -> None:
    from shepherd_handlers.runtime import event_metric

    designed = DomainEvent("WorkflowFailed", {"workflow_id": "w", "failure": "definition"})
    assert event_metric(designed) is Metric.WORKFLOWS_FAILED_BY_DEFINITION
    assert derived_metrics(designed) == []
    # No alarm reads it (the dashboard graphs it): tests/infra/test_infra_monitoring.py's
    # test_a_designed_failure_pages_nobody reads every alarm of the synthesized stack.


def test_each_route_has_its_alarm_and_the_compensation_failure_is_counted() -> None:
    text = (ROOT / "infra" / "shepherd_infra" / "monitoring.py").read_text()
    for metric in ROUTES.values():
        assert f"engine_metric(Metric.{metric.name}" in text, metric
    failed_undo = DomainEvent("StepFailed", {"workflow_id": "w", "kind": "compensation"})
    assert derived_metrics(failed_undo) == [Metric.COMPENSATIONS_FAILED]
    assert "WorkflowFailureRate" not in text.replace("No alarm on the rate", "")
