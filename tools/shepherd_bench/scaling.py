"""Supervisor scaling: what one sweep reads as finished history and live-but-not-due work grow.

The engine core runs on DynamoDB (moto, in-process) with the request meter on its client.
A fixed set of due workflows (their root message lost, so every sweep re-dispatches them) sits
beside 10, 1,000 and 10,000 finished workflows, then beside 1,000 running steps that are not
due yet. Finished and running workflows are clones of real ones (batch writes of the items
the engine wrote), so the table holds what it would on AWS. moto scans its indexes, so its
time says nothing: the numbers are items read and read units, as DynamoDB would bill them.
"""

from __future__ import annotations

import contextlib
from typing import Any

from shepherd.adapters.dynamodb import DynamoStore, from_attr, to_attr
from shepherd.clock import ManualClock
from shepherd.keys import watch_shard

from shepherd_bench.core import Core, build_core, simulated_agent_time
from shepherd_bench.cost import ORDER
from shepherd_bench.meter import Meter, metered_table

TABLE = "shepherd-scaling"
REGION = "us-east-1"
SHARDS = 8
DUE = 20


def _items(raw: Any, workflow_id: str) -> list[dict[str, Any]]:
    got = raw.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": f"WF#{workflow_id}"}},
        ConsistentRead=True,
    )
    return [i for i in (from_attr(a) for a in got["Items"]) if i]


def _clone(
    raw: Any, template: list[dict[str, Any]], prefix: str, start: int, count: int, **wf: Any
) -> None:
    """`count` copies of a workflow's items under new ids, by batch writes (unmetered)."""
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        pending: dict[str, Any] = {TABLE: list(batch)}
        for _ in range(10):
            if not pending.get(TABLE):
                break
            pending = raw.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
        batch.clear()

    for n in range(start, start + count):
        workflow_id = f"{prefix}{n:06d}"
        for item in template:
            clone = {**item, "pk": f"WF#{workflow_id}"}
            if item["sk"] == "#WF":
                clone["list_sk"] = f"{item['created_at']}#{workflow_id}"
                if "watch_shard" in item:
                    clone["watch_shard"] = watch_shard(workflow_id, SHARDS)
                clone.update(wf)
            batch.append({"PutRequest": {"Item": to_attr(clone)}})
            if len(batch) == 25:
                flush()
    if batch:
        flush()


def _sweep(core: Core, meter: Meter, label: str, finished: int, running: int) -> dict[str, Any]:
    core.clock.advance(60)  # the due workflows are overdue again
    meter.reset()
    report = core.supervisor.sweep()
    core.drop_all()  # their re-dispatched messages are lost again
    return _row(label, finished, running, report, meter.total())


def _row(label: str, finished: int, running: int, report: Any, tally: Any) -> dict[str, Any]:
    """One line of the scaling table: what a sweep saw and what it cost."""
    return {
        "case": label,
        "finished_workflows": finished,
        "running_steps": running,
        "due_workflows": report.due,
        "looked_at": report.looked_at,
        "index_queries": report.index_queries,
        "index_items_read": tally.items_read.get("query index watch", 0),
        "table_items_read": tally.items_read.get("query table", 0),
        "rru": tally.total_rru,
        "wru": tally.total_wru,
        "requests": sum(tally.requests.values()),
        "actions": dict(report.actions),
    }


def run_scaling(
    finished: tuple[int, ...] = (10, 1_000, 10_000), running: int = 1_000, due: int = DUE
) -> list[dict[str, Any]]:
    from shepherd_examples.agents.faults import SimulatedHang

    rows: list[dict[str, Any]] = []
    with metered_table(TABLE, REGION) as (client, meter, raw):
        clock = ManualClock()
        core = build_core(DynamoStore(client, TABLE), clock, shards=SHARDS)
        with simulated_agent_time(clock), meter.paused():
            done = core.scheduler.start("order_fulfilment", ORDER).workflow_id
            core.pump()
            hung = core.scheduler.start(
                "order_fulfilment", {**ORDER, "faults": {"reserve_inventory": {"mode": "hang"}}}
            ).workflow_id
            for pool in core.pools():
                for m in core.queue.receive(pool, 10):
                    with contextlib.suppress(SimulatedHang):
                        core.runtime.handle(m.task)  # claimed, then hangs: a running step
                    core.queue.delete(m.receipt)
            for _ in range(due):
                core.scheduler.start("order_fulfilment", ORDER)
            core.drop_all()
        done_items = _items(raw, done)
        assert next(i for i in done_items if i["sk"] == "#WF")["status"] == "SUCCEEDED"
        # The template of running work is never due while we measure (clones neither).
        far = clock.now_ms() + 24 * 3600 * 1000
        raw.update_item(
            TableName=TABLE,
            Key=to_attr({"pk": f"WF#{hung}", "sk": "#WF"}),
            UpdateExpression="SET due_at = :d",
            ExpressionAttributeValues={":d": {"N": str(far)}},
        )
        # A first sweep (not counted) re-dispatches the due roots, which creates their items
        # (a never-claimed step has none): every counted sweep then reads the same partitions.
        _sweep(core, meter, "warm-up", 1, 1)
        made = 1
        for total in finished:
            _clone(raw, done_items, "done", made, total - made)
            made = total
            rows.append(_sweep(core, meter, f"{total:,} finished", total, 1))
        hung_template = [{**i, "due_at": far} if i["sk"] == "#WF" else i for i in _items(raw, hung)]
        _clone(raw, hung_template, "run", 1, running - 1)
        rows.append(_sweep(core, meter, f"{made:,} finished + {running:,} running", made, running))
        # An idle sweep: nothing due (everything re-dispatched moments ago).
        meter.reset()
        report = core.supervisor.sweep()
        tally = meter.total()
        rows.append(_row("idle (nothing due)", made, running, report, tally))
    return rows
