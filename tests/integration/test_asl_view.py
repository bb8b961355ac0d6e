"""The view of a state machine on the engine (issue 42.3): `GET /workflows/{id}` shows the
machine's output as `output`; a Fail state (or an uncaught error) ends it FAILED with `error`,
`cause` and `failure: "definition"`, in the view and in its lifecycle event, counted apart
from the failures an operator is alarmed for."""

from __future__ import annotations

from test_asl_engine import FAIL, World


def test_the_api_view_shows_the_output_or_the_designed_failure() -> None:
    from shepherd.observability import Metric
    from shepherd_handlers.runtime import event_metric
    from shepherd_handlers.views import workflow_view

    w = World(FAIL)
    failed, ok = w.start({"ok": False}), w.start({"ok": True, "v": [1, 2]})
    views = {}
    for wf in (failed, ok):
        loaded = w.h.scheduler.load(wf)
        assert loaded is not None
        views[wf] = workflow_view(*loaded, w.h.ports.payloads)
    bad, good = views[failed], views[ok]
    assert (bad.status, bad.failure, bad.cause) == ("FAILED", "definition", "the input was not ok")
    assert bad.error is not None and bad.error["type"] == "NotOk"
    assert bad.output is None and bad.steps == []
    assert (good.status, good.output, good.failure) == (
        "SUCCEEDED",
        {"ok": True, "v": [1, 2]},
        None,
    )
    # The designed failure is its own metric: the operator's WorkflowsFailed alarm never
    # counts it; a failure that needs an operator still does.
    assert w.h.events is not None
    (event,) = [e for e in w.h.events.published if e.detail_type == "WorkflowFailed"]
    assert event_metric(event) is Metric.WORKFLOWS_FAILED_BY_DEFINITION
    operator = type(event)(event.detail_type, {**event.detail, "failure": None})
    assert event_metric(operator) is Metric.WORKFLOWS_FAILED
