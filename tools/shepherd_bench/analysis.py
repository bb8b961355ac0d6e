"""Where the cost goes, why the floor is where it is, and what design changes would buy."""

from __future__ import annotations

from typing import Any

from shepherd.definitions import Definition

from shepherd_bench.prices import PRICES

WRU = PRICES["dynamodb_wru"].usd
RRU = PRICES["dynamodb_rru"].usd
SQS = PRICES["sqs_request"].usd
LAMBDA = PRICES["lambda_request"].usd
EVENT = PRICES["eventbridge_event"].usd
TARGET_PER_MILLION_STEPS = 2.50


def chained_steps(definition: Definition) -> int:
    """Steps whose only dependency runs in the same pool: an agent could run them in-line."""
    return sum(
        1
        for s in definition.steps
        if len(s.depends_on) == 1 and definition.by_name[s.depends_on[0]].pool == s.pool
    )


def what_if(summary: dict[str, Any], definition: Definition) -> list[dict[str, Any]]:
    """Per design change: dollars saved per million steps, measured units x price.

    Starts from the worst-case batching, core + events-out figure of a clean run.
    """
    steps = summary["steps_per_workflow"]
    tally = summary["tally"]
    per_wf = 1.0 / summary["workflows"]
    chained = chained_steps(definition)
    table_queries = summary["requests"].get("dynamodb.Query", 0) * per_wf
    rows = [
        {
            "change": "no filter indexes (by_status, by_type, by_type_status): only the "
            "unfiltered list index",
            "saves_usd_per_million_steps": sum(
                units
                for name, units in tally["gsi_wru"].items()
                if name.split()[0] in ("by_status", "by_type", "by_type_status")
            )
            * per_wf
            * WRU
            * 1e6
            / steps,
            "price": "GET /workflows?status= reads on through every entry to fill a page: "
            "unbounded for a rare status (issue 29: it answered an empty page instead)",
        },
        {
            "change": "publish terminal workflow events only (no WorkflowStarted)",
            "saves_usd_per_million_steps": tally["events"].get("WorkflowStarted", 0)
            * per_wf
            * EVENT
            * 1e6
            / steps,
            "price": "subscribers learn of a start from the API reply only",
        },
        {
            "change": f"eager same-pool chaining ({chained} of {steps} steps follow a step of "
            "their own pool): the agent claims and runs the successor in-line",
            "saves_usd_per_million_steps": chained * (3 * SQS + LAMBDA) * 1e6 / steps,
            "price": "one invocation runs several steps (its timeout must cover them); a "
            "crash between them is recovered by the supervisor after DispatchTimeoutSeconds",
        },
        {
            "change": "full SQS batches (10 messages per invocation) instead of one",
            "saves_usd_per_million_steps": summary["worst"]["usd_per_million_steps"]["core"]
            - summary["best"]["usd_per_million_steps"]["core"],
            "price": "needs load (or a batching window, which adds latency to every step)",
        },
        {
            "change": "reuse the agent's loaded state in `advance` for a single-dependency "
            "successor (skip the second consistent query)",
            # about one 1-RRU query per step but the last (the agent's first load stays)
            "saves_usd_per_million_steps": min(steps - 1, table_queries / 2) * RRU * 1e6 / steps,
            "price": "an engine change on the hot path; joins still need the re-read",
        },
    ]
    base = summary["worst"]["usd_per_million_steps"]["core_and_events"]
    total = sum(r["saves_usd_per_million_steps"] for r in rows)
    rows.append(
        {
            "change": "all of the above",
            "saves_usd_per_million_steps": total,
            "price": f"{base:.2f} -> {base - total:.2f} $/M steps",
        }
    )
    return rows


def floor(summary: dict[str, Any]) -> dict[str, float]:
    """The cost no design under the accounting rules can avoid, per step, in dollars per million.

    Whatever the start writes, every step is claimed and completed by fenced conditional
    writes (invariant 2: 1 WRU each), and reaches its agent as one task message: one send, and
    with one message per invocation the event source's receive and delete and one Lambda
    invocation. Until issue 16 the start's transaction of every step item (2 WRU each) came
    on top; step items are now created by their claim (or a join's dispatch).
    """
    per_step_worst = 2 * WRU + 3 * SQS + LAMBDA
    per_step_full = 2 * WRU + SQS + 2 * SQS / 10 + LAMBDA / 10
    return {
        "mandated_wru_per_step": 2,
        "mandated_usd_per_million_steps": 2 * WRU * 1e6,
        "per_step_floor_worst_usd_per_million_steps": per_step_worst * 1e6,
        "per_step_floor_full_batches_usd_per_million_steps": per_step_full * 1e6,
        "eager_step_items_usd_per_million_steps": (4 * WRU + 3 * SQS + LAMBDA) * 1e6,
        "target": TARGET_PER_MILLION_STEPS,
    }


def running_cost(
    slow: dict[str, Any], clean: dict[str, Any], seconds: int, heartbeat_seconds: int
) -> dict[str, Any]:
    """What a step costs per second it runs: `slow` is `clean` with one step running longer.

    Heartbeats (one fenced write per HeartbeatSeconds/2) and supervisor looks (while a step
    runs its workflow is due again within G seconds; a look whose next deadline is near
    leaves the entry due and re-reads it at the next sweeps, a consistent read each, instead of
    moving it: 1 WRU + 2 index WRU).
    """

    def per_wf(summary: dict[str, Any], section: str, match: str) -> float:
        values = summary["tally"][section]
        total = float(sum(v for k, v in values.items() if match in k))
        return total / int(summary["workflows"])

    heartbeats = per_wf(slow, "wru", "heartbeat_at") - per_wf(clean, "wru", "heartbeat_at")
    look_writes = per_wf(slow, "wru", "(due_at)") - per_wf(clean, "wru", "(due_at)")
    look_index = per_wf(slow, "gsi_wru", "watch move") - per_wf(clean, "gsi_wru", "watch move")
    extra = (
        slow["worst"]["usd_per_million_workflows"]["core_and_events"]
        - clean["worst"]["usd_per_million_workflows"]["core_and_events"]
    )
    per_heartbeat = seconds / heartbeat_seconds
    return {
        "seconds": seconds,
        "heartbeat_seconds": heartbeat_seconds,
        "wru_per_heartbeat_seconds": (heartbeats + look_writes + look_index) / per_heartbeat,
        "heartbeat_wru_per_workflow": heartbeats,
        "look_wru_per_workflow": look_writes + look_index,
        "extra_usd_per_million_workflows": extra,
        "usd_per_million_step_seconds": extra / seconds,
        "heartbeat_usd_per_million_step_seconds": heartbeats * WRU * 1e6 / seconds,
        "look_usd_per_million_step_seconds": (look_writes + look_index) * WRU * 1e6 / seconds,
    }
