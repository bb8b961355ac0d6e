"""Metrics come from the events: an alarm watches what a subscriber would be told."""

from __future__ import annotations

from shepherd.model import DomainEvent
from shepherd.observability import Metric
from shepherd_handlers.runtime import EVENT_METRICS, derived_metrics


def _paused(reason: str) -> DomainEvent:
    return DomainEvent(
        "WorkflowPaused", {"workflow_id": "w", "status": "PAUSED", "pause": {"reason": reason}}
    )


def test_only_a_pause_on_failure_raises_the_paused_on_failure_alarm_metric() -> None:
    assert EVENT_METRICS["WorkflowPaused"] is Metric.WORKFLOWS_PAUSED  # every pause counts
    assert derived_metrics(_paused("failure")) == [Metric.PAUSED_ON_FAILURE]
    assert derived_metrics(_paused("operator")) == []  # an operator's pause is not an incident


def test_a_compensation_failing_for_good_raises_its_alarm_metric_and_a_step_does_not() -> None:
    failed = {"workflow_id": "w", "step": "s", "reason": "exhausted"}
    compensation = DomainEvent("StepFailed", {**failed, "kind": "compensation"})
    step = DomainEvent("StepFailed", {**failed, "kind": "step"})
    assert derived_metrics(compensation) == [Metric.COMPENSATIONS_FAILED]
    assert derived_metrics(step) == []
