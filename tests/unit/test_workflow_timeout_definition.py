"""A workflow's own TimeoutSeconds in a definition (issue 42.5): 1 s to a year, named on a
mistake; absent, the definition keeps its version; present, it bounds the start's first
watch entry and joins the watch candidates while the workflow runs (no write per step)."""

from __future__ import annotations

import random

import pytest
from shepherd.decisions import workflow_timeout
from shepherd.decisions.planner import EndAttempt, TimeOutWorkflow, next_due, plan
from shepherd.definitions import ONE_YEAR, parse_definition
from shepherd.errors import DefinitionError
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus

T0 = 1_700_000_000_000
STEP = {"Name": "a", "Agent": "a", "Pool": "q", "TimeoutSeconds": 600}


def _definition(**top: object) -> object:
    return parse_definition({"Name": "t", "Steps": [STEP], **top}, "t.yaml")


@pytest.mark.parametrize(("value", "words"), [(0, "at least 1"), (ONE_YEAR + 1, "at most")])
def test_the_timeout_is_bounded_and_named(value: int, words: str) -> None:
    with pytest.raises(DefinitionError, match=f"t.yaml: TimeoutSeconds: must be {words}"):
        _definition(TimeoutSeconds=value)


def test_absent_it_keeps_the_version_and_present_it_changes_it() -> None:
    plain = parse_definition({"Name": "t", "Steps": [STEP]}, "t.yaml")
    timed = parse_definition({"Name": "t", "Steps": [STEP], "TimeoutSeconds": 30}, "t.yaml")
    assert 'TimeoutSeconds":30' in timed.canonical_json
    assert '"TimeoutSeconds":null' not in plain.canonical_json
    assert plain.content_hash != timed.content_hash
    # The start's first watch entry is no later than the deadline (here sooner than the
    # task's lease) ...
    assert timed.start_gap_ms == 30_000 and plain.start_gap_ms == 60_000


def _state(definition: object, status: StepStatus, **wf: object) -> WorkflowState:
    record = WorkflowRecord(
        workflow_id="wf",
        wf_type="t",
        def_hash="h",
        status=WorkflowStatus.RUNNING,
        input="{}",
        created_at=T0,
        updated_at=T0,
        owner="o",
        request_hash="h",
    )
    for key, value in wf.items():
        object.__setattr__(record, key, value)
    state = WorkflowState(record)
    running = status is StepStatus.RUNNING
    state.put(
        StepRecord(
            "wf",
            "step",
            "a",
            status,
            attempt=1 if running else 0,
            claimed_at=T0 if running else None,
            wf_type="t",
        )
    )
    return state


def test_the_deadline_joins_the_watch_and_only_the_supervisor_acts_on_it() -> None:
    d = parse_definition({"Name": "t", "Steps": [STEP], "TimeoutSeconds": 30}, "t.yaml")
    state = _state(d, StepStatus.RUNNING)
    assert next_due(state, d, T0 + 1000) == T0 + 30_000  # sooner than the lease's 600 s
    rng = random.Random(0)
    assert plan(state, d, T0 + 29_999, supervisor=True, rng=rng) == []
    assert plan(state, d, T0 + 30_000, supervisor=False, rng=rng) == []
    actions = plan(state, d, T0 + 30_500, supervisor=True, rng=rng)
    assert [type(a) for a in actions] == [EndAttempt, TimeOutWorkflow]
    fence, end = actions
    assert isinstance(fence, EndAttempt) and fence.error_type == "States.Timeout"
    assert isinstance(end, TimeOutWorkflow) and end.overdue_ms == 500
    # Fired once: a workflow resumed afterwards has no deadline.
    fired = _state(d, StepStatus.RUNNING, timed_out_at=T0 + 30_500)
    assert workflow_timeout.deadline(fired, d) is None
    assert next_due(fired, d, T0 + 31_000) != T0 + 30_000


def test_a_workflow_with_nothing_to_wait_for_is_due_now_not_at_its_deadline() -> None:
    """All its steps done and its finish lost: due at once, as without a TimeoutSeconds."""
    d = parse_definition({"Name": "t", "Steps": [STEP], "TimeoutSeconds": 3600}, "t.yaml")
    state = _state(d, StepStatus.SUCCEEDED)
    assert next_due(state, d, T0 + 5000) == T0 + 5000
