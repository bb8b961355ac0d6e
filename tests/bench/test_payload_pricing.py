"""The large-payload pricing (issue 12): a 100 KiB output costs one S3 PUT and its storage on
top of the clean order's DynamoDB units, which the reference keeps unchanged."""

from __future__ import annotations

from shepherd_bench.payloads import report, run


def test_a_large_output_costs_one_put_and_leaves_the_items_small() -> None:
    rows = {r["output_bytes"]: r for r in report(run(2))}
    small, large = rows[100 * 1024], rows[1024 * 1024]
    for row in (small, large):
        assert row["s3_puts_per_workflow"] == 1.0  # the output, once
        assert row["s3_gets_per_workflow"] == 0.0  # nobody read it: resolved lazily
    # The item holds a reference either way: the same DynamoDB writes for 100 KiB and 1 MiB.
    assert small["dynamodb_wru_per_workflow"] == large["dynamodb_wru_per_workflow"]
    assert large["usd_per_million_workflows_s3"] > small["usd_per_million_workflows_s3"] > 5.0
    assert (
        large["step_functions_needs_claim_check"] and not small["step_functions_needs_claim_check"]
    )
