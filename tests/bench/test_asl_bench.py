"""The ASL benchmark's measures (issue 42), small: a loop's store requests stay flat per
iteration, and each machine of the mix counts the transitions its definition makes."""

from __future__ import annotations

import pytest
from shepherd_bench import asl


def test_a_loops_requests_per_iteration_do_not_grow_with_its_history() -> None:
    loop = asl.loop_store_requests(300, 50)
    assert loop["iterations"] == 300
    assert loop["flat"], (loop["first"], loop["last"])
    # One read of the state, one write of the visit: never a scan of the loop's past.
    assert loop["last"]["items written"] == loop["first"]["items written"] > 0


@pytest.mark.slow
def test_the_mix_counts_each_machines_transitions_and_prices_them() -> None:
    measured = asl.run_machines(1)
    mix = measured["mix"]
    per_machine = {r["machine"]: r["transitions_per_workflow"] for r in mix["machines"]}
    assert per_machine == {
        "bench_asl_chain": 6,
        "bench_asl_parallel": 3,
        "bench_asl_map": 5,
        "bench_asl_loop": 22,
    }
    # Issue 38's three machines, one execution each: the chain, the Map whose items put a
    # DynamoDB item (1 + 4 states entered), the callback (its Task and a Pass).
    three = asl.per_execution(measured)
    assert [(r["machine"], r["transitions_per_workflow"]) for r in three] == [
        ("bench_asl_chain", 6),
        ("bench_asl_service_map", 5),
        ("bench_asl_callback", 2),
    ]
    for row in [*mix["machines"], *three]:
        # One execution on Standard is its transitions at $25 per million.
        standard = row["standard_usd_per_million_executions"]
        assert standard == pytest.approx(25 * row["transitions_per_workflow"])
        express = row["express_usd_per_million_executions"]
        if row["machine"] == "bench_asl_callback":
            assert express is None  # Express runs no .waitForTaskToken Task
        else:
            assert 0 < express < standard
        assert row["usd_per_million_executions"] == pytest.approx(
            row["usd_per_million_transitions"] * row["transitions_per_workflow"]
        )
    # The service calls are units of the integration pool; the puts themselves (the user's
    # requests, paid alike on Step Functions) are not metered: the Map of puts costs what the
    # Map of Lambda tasks does, request for request.
    service_map, lambda_map = (
        three[1],
        next(r for r in mix["machines"] if r["machine"] == "bench_asl_map"),
    )
    assert service_map["requests_per_workflow"] == lambda_map["requests_per_workflow"]
    totals = mix["mix"]
    assert totals["transitions"] == sum(per_machine.values())
    assert totals["usd_per_million_transitions"] > 0
    assert totals["ratio_standard_to_ours"] == pytest.approx(
        totals["step_functions_standard_usd_per_million_transitions"]
        / totals["usd_per_million_transitions"]
    )
