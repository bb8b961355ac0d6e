"""Price a step with a large output (100 KiB, 1 MiB), S3 requests and storage included,
beside Step Functions: `python -m shepherd_bench.payloads [--workflows N]`.

Runs the order workflow through the handlers on moto (the same metered stack as the cost
scenarios), with `charge_payment` returning the large value through the demo agents'
`output_bytes` option, and merges the result into docs/benchmarks.json under `payloads`.
Step Functions Standard cannot carry either output in its state without a hand-made claim
check beyond 256 KiB; its row adds that claim check's S3 PUT and GETs to the transitions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shepherd_bench.cost import PAYLOAD_SCENARIOS, ScenarioRun, run_scenarios, summary
from shepherd_bench.prices import usd

ROOT = Path(__file__).resolve().parents[2]
SFN_STATE_LIMIT = 256 * 1024


def run(workflows: int) -> list[ScenarioRun]:
    return run_scenarios(workflows, scenarios=PAYLOAD_SCENARIOS)


def report(runs: list[ScenarioRun]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        s = summary(r)
        worst = s["worst"]
        size = int(r.scenario.payload["output_bytes"]["charge_payment"])
        units = worst["units_per_workflow"]
        sfn = s["step_functions"]
        # Step Functions with a hand-made claim check: a PUT by the producing task, a GET by
        # each reader (the next task), on top of the transitions.
        claim_check = usd("s3_put", 1) + usd("s3_get", 1) if size > SFN_STATE_LIMIT else 0.0
        standard = sfn["standard_usd_per_million_workflows"] / 1e6 + claim_check
        rows.append(
            {
                "scenario": r.scenario.name,
                "output_bytes": size,
                "workflows": r.workflows,
                "s3_puts_per_workflow": units["s3_put"],
                "s3_gets_per_workflow": units["s3_get"],
                "dynamodb_wru_per_workflow": units["dynamodb_wru_table"]
                + units["dynamodb_wru_index"],
                "dynamodb_rru_per_workflow": units["dynamodb_rru"],
                "usd_per_million_workflows": worst["usd_per_million_workflows"],
                "usd_per_million_workflows_s3": sum(
                    worst["usd_per_million_steps_by_kind"][k] * r.steps_per_workflow
                    for k in ("s3_put", "s3_get", "s3_gb_month")
                ),
                "step_functions_standard_usd_per_million_workflows": standard * 1e6,
                "step_functions_needs_claim_check": size > SFN_STATE_LIMIT,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench.payloads", description=__doc__)
    parser.add_argument("--workflows", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.json")
    args = parser.parse_args()
    rows = report(run(args.workflows))
    for row in rows:
        print(json.dumps(row, indent=1))
    data = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    data["payloads"] = rows
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
