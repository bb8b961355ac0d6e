"""Map items priced by counting requests (issue 24), beside a plain step and Step Functions.

The map protocol (`shepherd_sim.mapsim`: open, claim, result, accounting with refill,
verdict) runs fault-free on DynamoDB (moto, in process) with the request meter on its
client, so write units are billed by item size as DynamoDB bills them (the accounting write
grows with the window on the map unit). What the protocol run does not make, the model adds
with the same conventions as `shepherd_bench.cost` for a plain step (worst case: one agent
invocation per message, the event source's receive and delete per invocation, one send per
item). Items announce no lifecycle events, so the relay adds nothing per item.

Not measured here: the map's opening (its item pages, one S3 PUT per 1,000 items) and the
assembly of its output (one paged read of the item partitions), both once per map; the engine
does not run maps on this branch, so these are the protocol's requests, not the engine's.
"""

from __future__ import annotations

from typing import Any

from shepherd.adapters.dynamodb import DynamoStore
from shepherd.fanout import MapSpec
from shepherd_sim import mapsim

from shepherd_bench.meter import metered_table
from shepherd_bench.prices import usd

TABLE = "shepherd-maps"
EPOCH_MS = 1_767_225_600_000
REGION = "us-east-1"
NO_FAULTS = mapsim.Faults(
    lose=0,
    dup=0,
    late=0,
    crash_before_effect=0,
    crash_after_effect=0,
    crash_before_account=0,
    fail=0,
    retries=0,
)


def measure(items: int, concurrency: int) -> dict[str, Any]:
    """One fault-free map's billed units per item."""

    with metered_table(TABLE, REGION) as (client, meter, _):
        spec = MapSpec.model_validate(
            {"ItemsPath": "$.input.chunks", "MaxConcurrency": concurrency}
        )
        run = mapsim.Run(
            0,
            items,
            spec,
            NO_FAULTS,
            store=DynamoStore(client, TABLE),
            now=EPOCH_MS,  # window entries hold epoch milliseconds, as on AWS
            looks=False,
            unmetered=meter.paused,
        )
        run.run(max_ms=10**9)
        tally = meter.total()
        assert not run.violations, run.violations
        assert run.map_state().status == "SUCCEEDED"
    sends = run.sends
    units = {
        "dynamodb_wru_table": tally.total_wru / items,
        "dynamodb_rru": tally.total_rru / items,
        "sqs_send": sends / items,
        "sqs_event_source": 2 * sends / items,
        "lambda_agent": sends / items,
    }
    return {
        "items": items,
        "max_concurrency": concurrency,
        "requests": dict(tally.requests),
        "units_per_item": units,
        "usd_per_million_items": 1e6 * _dollars(units),
        "max_keys_read": {
            "look": run.max_look_keys,
            "claim": run.max_claim_keys,
            "accounting": run.max_account_keys,
        },
    }


PRICE_OF = {
    "dynamodb_wru_table": "dynamodb_wru",
    "dynamodb_rru": "dynamodb_rru",
    "sqs_send": "sqs_request",
    "sqs_event_source": "sqs_request",
    "lambda_agent": "lambda_request",
}


def _dollars(units: dict[str, float]) -> float:
    return sum(usd(PRICE_OF[k], v) for k, v in units.items())


def step_functions_per_million_items() -> dict[str, float]:
    """Step Functions' price of the same item: an inline `Map` (Standard) enters one Task
    state per item (one state transition), a Distributed Map runs one child execution per
    item (Standard: the child's Task transition plus its start, counted as a transition of
    the map run; Express children: one request and at least 100 ms at 64 MB), each Task a
    Lambda invocation; as `shepherd_bench.cost` prices a step."""
    lambda_task = usd("lambda_request", 1)
    express_child = usd("sfn_express_request", 1) + usd("sfn_express_gb_s", 0.1 * 64 / 1024)
    return {
        "inline_map_standard": 1e6 * (usd("sfn_standard_transition", 1) + lambda_task),
        "distributed_map_standard_children": 1e6
        * (usd("sfn_standard_transition", 2) + lambda_task),
        "distributed_map_express_children": 1e6
        * (usd("sfn_standard_transition", 1) + express_child + lambda_task),
    }


def run_maps(
    plain_step_usd_per_million: float | None, items: tuple[int, ...] = (100, 1_000)
) -> dict[str, Any]:
    """The `maps` section of benchmarks.json: per-item cost at C = 10 and 100 for each item
    count, the plain step it is compared with (`cost`'s clean order, core), Step Functions."""
    rows = [measure(n, c) for n in items for c in (10, 100) if c <= n]
    rows.append(measure(max(items), 1_000))  # the largest window: the accounting's worst
    out: dict[str, Any] = {"rows": rows, "step_functions": step_functions_per_million_items()}
    if plain_step_usd_per_million is not None:
        out["plain_step_core_usd_per_million_steps"] = plain_step_usd_per_million
        for row in rows:
            row["ratio_to_plain_step"] = row["usd_per_million_items"] / plain_step_usd_per_million
    return out


def main() -> None:
    import json
    import os
    from pathlib import Path

    for key, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(key, value)

    root = Path(__file__).resolve().parents[2]
    path = root / "docs" / "benchmarks.json"
    results = json.loads(path.read_text())
    clean = next(s for s in results["cost"]["scenarios"] if s["scenario"] == "order clean")
    plain = clean["worst"]["usd_per_million_steps"]["core"]
    results["maps"] = run_maps(plain)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    for row in results["maps"]["rows"]:
        print(
            f"map of {row['items']} items, MaxConcurrency {row['max_concurrency']}: "
            f"${row['usd_per_million_items']:.2f}/M items "
            f"({row['ratio_to_plain_step']:.2f}x a plain step's ${plain:.2f}/M), "
            f"{row['units_per_item']['dynamodb_wru_table']:.2f} WRU and "
            f"{row['units_per_item']['dynamodb_rru']:.2f} RRU an item; most keys read "
            f"{row['max_keys_read']}"
        )
    for name, value in results["maps"]["step_functions"].items():
        print(f"Step Functions {name}: ${value:.2f}/M items")


if __name__ == "__main__":
    main()
