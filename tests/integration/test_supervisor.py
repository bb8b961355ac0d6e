"""The supervisor: concurrent sweeps, and work that grows with due items, not with history."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from shepherd.model import StepStatus, WorkflowStatus
from shepherd_examples.agents import ledger
from shepherd_examples.agents.faults import SimulatedHang
from support import ENV, ORDER, Harness, HookStore


@pytest.fixture(autouse=True)
def _clean_ledger() -> None:
    ledger.reset()


def _stall_everything(h: Harness) -> list[str]:
    """Workflows in every recoverable situation at once, all overdue."""
    ids = []
    lost_root = h.start("order_fulfilment", ORDER)  # root message will be lost
    hung = h.start("order_fulfilment", {**ORDER, "faults": {"reserve_inventory": {"mode": "hang"}}})
    failing = h.start(
        "provision_environment", {**ENV, "faults": {"create_storage": {"mode": "permanent"}}}
    )
    ids += [lost_root, hung, failing]
    for m in h.receive():
        if m.task.workflow_id == lost_root:
            h.queue.delete(m.receipt)
            continue
        with contextlib.suppress(SimulatedHang):
            h.runtime.handle(m.task)
        h.queue.delete(m.receipt)
    h.queue.sent.clear()
    h.clock.advance(60)
    return ids


@pytest.mark.parametrize("first", ["a", "b"])
def test_two_sweeps_at_once_never_double_dispatch_or_double_compensate(
    harness: Harness, first: str
) -> None:
    from shepherd.engine.supervisor import Supervisor

    hook = HookStore(harness.store)
    harness.ports.store = hook
    ids = _stall_everything(harness)
    a, b = Supervisor(harness.scheduler), Supervisor(harness.scheduler)
    inner_reports: list[Any] = []

    def other_sweeps_in_between(pk: str) -> None:
        # A has read its first due workflow; B runs a whole sweep before A acts on it.
        if not pk.startswith("WF#"):
            return  # the sweep's read of the pool states
        hook.after_load = None
        inner_reports.append((b if first == "a" else a).sweep())

    hook.after_load = other_sweeps_in_between
    outer = (a if first == "a" else b).sweep()
    inner = inner_reports[0]

    # Every overdue thing was acted on once in total, and the stale sweep lost its writes.
    # (the lost root message, and the compensation message never delivered above)
    assert inner.actions["Redispatch"] == 2 and inner.actions["TimedOut"] == 1
    for kind in ("Redispatch", "TimedOut", "StartCompensation", "Finish"):
        assert outer.actions.get(kind, 0) == 0, outer.actions
    assert outer.actions["DispatchLost"] + outer.actions["EndAttemptLost"] >= 1
    sent = [
        (t.message.workflow_id, t.message.step, t.message.kind, t.message.attempt)
        for t in harness.queue.sent
    ]
    assert len(sent) == len(set(sent)), f"double dispatch: {sent}"
    for wf in ids:
        state = harness.run(wf)
        assert state.workflow.status.terminal
    failing = harness.state(ids[2])
    assert failing.workflow.status is WorkflowStatus.COMPENSATED
    assert [c.attempt for c in failing.compensations.values()] == [1] * len(failing.compensations)
    undo = [e for e in ledger.effects(ids[2]) if e[2].startswith("delete")]
    assert len(undo) == len(set(undo))


@pytest.mark.slow  # 2,000 workflows on moto: make test runs it, make check does not
def test_sweep_reads_due_work_only(moto_engine: Harness) -> None:
    """Items read by a sweep are the same with 10 and with 2,000 finished workflows."""
    h = moto_engine
    client = h.dynamodb  # type: ignore[attr-defined]
    reads: list[int] = []

    def count(parsed: dict[str, Any], **_: Any) -> None:
        reads.append(int(parsed.get("Count", 1 if "Item" in parsed else 0)))

    client.meta.events.register("after-call.dynamodb.Query", count)
    client.meta.events.register("after-call.dynamodb.GetItem", count)

    def sweep_reads() -> tuple[int, int]:
        reads.clear()
        report = h.sweep()
        return sum(reads), report.index_queries

    # Ten finished workflows and two stalled ones.
    for i in range(10):
        assert (
            h.run(h.start("order_fulfilment", {**ORDER, "order_id": f"done-{i}"})).workflow.status
            is WorkflowStatus.SUCCEEDED
        )
    _stall_twice(h)
    h.clock.advance(60)
    few = sweep_reads()

    # Clone finished workflows (their real items, new ids) until there are 2,000.
    _clone_finished(h, client, 1990)

    _restore_stalls(h, client)
    many = sweep_reads()
    assert few == many
    assert few[1] == h.scheduler.config.watch_shards  # one query per shard, no pagination


_stalled: list[str] = []


def _stall_twice(h: Harness) -> None:
    _stalled.clear()
    for i in range(2):
        wf = h.start("order_fulfilment", {**ORDER, "order_id": f"stall-{i}"})
        _stalled.append(wf)
    for m in h.receive():
        h.queue.delete(m.receipt)  # both root messages lost


def _restore_stalls(h: Harness, client: Any) -> None:
    """Put the two stalled workflows back exactly as they were before the first sweep."""
    for wf in _stalled:
        step = h.state(wf).steps["reserve_inventory"]
        # The first sweep dispatched the never-claimed root again, which created its item;
        # before, the root had none (never claimed: shown PENDING from the definition).
        assert step.status is StepStatus.QUEUED and step.dispatches == 1
        pk, sk = step.key
        client.delete_item(TableName="shepherd-test", Key={"pk": {"S": pk}, "sk": {"S": sk}})
        assert not h.state(wf).steps["reserve_inventory"].stored
    h.clock.advance(60)  # overdue again: same due items, same reads


def _clone_finished(h: Harness, client: Any, count: int) -> None:
    from boto3.dynamodb.types import TypeSerializer
    from shepherd.adapters.dynamodb import from_attr

    ser = TypeSerializer()
    scanned = [from_attr(i) for i in client.scan(TableName="shepherd-test")["Items"]]
    # One load per workflow, not one per item (issue 36: the loads cost more than the scan).
    inputs = {
        pk: str(h.state(pk[3:]).workflow.input)
        for pk in {i["pk"] for i in scanned if i and i["pk"].startswith("WF#")}
    }
    done = [item for item in scanned if item and "done-0" in inputs.get(item["pk"], "")]
    assert done and all(i.get("due_at") is None for i in done)
    # Written straight into moto's table (issue 36: the ~20,000 puts' requests and replies,
    # then moto's own put_item, cost more CPU than the sweeps under test). moto checked each
    # original item's types and size when it was written; a clone differs only by a shorter
    # pk, so its items are built from the same attribute values without moto's size check,
    # which sums every attribute again for each attribute set. Nothing reads the clones'
    # stream records. The clone read back below is the original with its new pk.
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table("shepherd-test")
    attrs = [{k: ser.serialize(v) for k, v in item.items()} for item in done]
    for n in range(count):
        pk = {"S": f"WF#clone{n:05d}"}
        for values in attrs:
            clone = Item(DynamoType(pk), DynamoType(values["sk"]), {})
            dict.update(
                clone.attrs, {k: DynamoType(pk if k == "pk" else v) for k, v in values.items()}
            )
            table.items[clone.hash_key][clone.range_key] = clone
    last = f"WF#clone{count - 1:05d}"
    for item in done:
        key = {"pk": {"S": last}, "sk": {"S": item["sk"]}}
        read = client.get_item(TableName="shepherd-test", Key=key, ConsistentRead=True)
        assert from_attr(read["Item"]) == {**item, "pk": last}
