"""The order amendment example (`statemachines/order_amendment.yaml`, issue 37.8) on its real
definition and agents: its customer amends an order by a signal matched on the order id
(`POST /signals`), which `await_amendment` takes and `apply_amendment` applies; an order
nobody amends times out and takes the other branch (`OnTimeout: CONTINUE`, a `Condition`
each). `make demo` runs the same on the local stack through the API."""

from __future__ import annotations

import pytest
from shepherd.model import StepStatus, WorkflowStatus, loads
from shepherd_examples.agents import ledger
from support import ORDER, Harness


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    ledger.reset()


def test_an_order_is_amended_by_a_signal_matched_on_its_order_id(harness: Harness) -> None:
    h = harness
    wf = h.start("order_amendment", {**ORDER, "order_id": "o-amend"})
    # Sent right after the start, before the window opens: kept, then taken as it opens.
    (receipt,) = h.engine.signals.send_matching(
        "amend", {"order_id": "o-amend"}, {"items": [{"sku": "A", "qty": 3}]}, principal="local"
    )
    assert receipt.workflow_id == wf and receipt.taken_by is None
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert loads(state.steps["await_amendment"].output) == {"items": [{"sku": "A", "qty": 3}]}
    assert state.steps["apply_amendment"].status is StepStatus.SUCCEEDED
    assert state.steps["confirm_as_placed"].status is StepStatus.SKIPPED
    applied = loads(state.steps["apply_amendment"].output)
    assert applied == {"amended": {"items": [{"sku": "A", "qty": 3}]}}


def test_an_order_nobody_amends_times_out_and_takes_the_other_branch(harness: Harness) -> None:
    h = harness
    wf = h.start("order_amendment", {**ORDER, "order_id": "o-as-placed"})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert loads(state.steps["await_amendment"].output) == {"timed_out": True}
    assert state.steps["confirm_as_placed"].status is StepStatus.SUCCEEDED
    assert state.steps["apply_amendment"].status is StepStatus.SKIPPED
