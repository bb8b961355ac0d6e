"""An attempt's whole read replaces its view of the workflow (found by the fault simulator,
`make sim SEEDS=10000`, seed 8144): an agent claimed with the workflow RUNNING, an operator
paused it, the attempt's large output made the agent read the whole workflow (to check the
workflow's output total), and then the output's put failed: the retry was dispatched on the
workflow as claimed, though the agent's own read had seen the pause. The seed stopped
reaching it as the engine grew; this drives the same reads by hand."""

from __future__ import annotations

import json

from shepherd.model import WorkflowStatus
from support import ORDER, Harness


def test_a_whole_read_for_a_large_output_refreshes_the_attempts_view(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    loaded = harness.scheduler.load_units(wf, [("step", "reserve_inventory")])
    assert loaded is not None
    state, _ = loaded  # the claim's bounded read: RUNNING
    assert state.partial and state.workflow.status is WorkflowStatus.RUNNING
    harness.operations.pause(wf)  # meanwhile, an operator
    large = json.dumps("x" * (harness.scheduler.ports.payloads.inline_bytes + 1))
    whole = harness.scheduler.whole_if_large(state, large)
    assert whole.workflow.status is WorkflowStatus.PAUSED
    # The attempt's own view, which its later decisions (a retry's dispatch) plan on.
    assert state.workflow.status is WorkflowStatus.PAUSED
    small = harness.scheduler.load_units(wf, [("step", "reserve_inventory")])
    assert small is not None
    assert harness.scheduler.whole_if_large(small[0], json.dumps("x")) is small[0]  # no read
