"""The meter on the real handlers: one workflow's requests land where the architecture says."""

from __future__ import annotations

from shepherd.clock import ManualClock
from shepherd_bench.cost import SCENARIOS, run_workflow
from shepherd_bench.meter import Meter
from shepherd_bench.stack import handler_stack


def test_one_clean_order_is_counted_request_by_request() -> None:
    meter, clock = Meter(), ManualClock()
    with handler_stack(meter, clock) as stack:
        workflow_id, _took = run_workflow(stack, SCENARIOS[0])
        assert stack.status(workflow_id) == "SUCCEEDED"
    api, agent = meter.tallies["api"], meter.tallies["agent"]
    # The start: one transaction (workflow + 4 steps, each at least 2 WRU), the definition
    # snapshot once, the first task message, the WorkflowStarted event.
    assert api.requests["dynamodb.TransactWriteItems"] == 1
    assert api.wru["workflow transact: create"] >= 2
    assert api.wru["step transact: create"] >= 4 * 2
    assert api.wru["step transact: create"] % 2 == 0
    assert api.gsi_wru == {"watch add": 1, "by_owner add": 1}
    assert api.sqs_messages == {"shepherd-inventory": 1}
    assert api.events == {}  # no writer publishes: the relay does, from the stream
    # Four steps: a claim and a result each, one message per successor, the finish; agents
    # never move a watch entry (only the finishing write removes it).
    claims = sum(v for k, v in agent.wru.items() if k.endswith("->RUNNING"))
    results = sum(v for k, v in agent.wru.items() if k.endswith("RUNNING->SUCCEEDED"))
    assert claims >= 4
    assert results >= 4
    assert agent.gsi_wru == {"watch remove": 1, "by_owner update": 1}
    assert sum(agent.sqs_messages.values()) == 3
    assert agent.events == {}
    assert agent.failed_writes == 0
    relay = meter.tallies["relay"]
    assert relay.events == {"WorkflowStarted": 1, "WorkflowSucceeded": 1}
    assert relay.wru == {} and relay.rru == {}  # reads the stream (free), writes nothing
    assert relay.requests == {"events.PutEvents": 2}
