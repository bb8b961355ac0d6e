"""Map items priced on the engine (issue 24): a small map through the real handlers on moto
under the meter, pinned request by request where every item is under 1 KB and 4 KB; the
accounting write billed by its window shard, whatever MaxConcurrency; the keys a look, a claim and the console's
reads take, the same at 10 times the items; the Step Functions prices; the report's section."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from shepherd.clock import ManualClock
from shepherd_bench import maps
from shepherd_bench.meter import Meter
from shepherd_bench.report import _maps

FAKE = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}


@pytest.fixture(scope="module")
def measured() -> Iterator[dict[Any, dict[str, Any]]]:
    """On one stack: a map of 30 items at MaxConcurrency 10, one of 100 at 100; then the
    bounded operations on maps of 100 and 1,000 items at 10."""
    saved = {k: os.environ.get(k) for k in (*FAKE, "AWS_DEFAULT_REGION")}
    os.environ.update({**FAKE, "AWS_DEFAULT_REGION": "us-east-1"})
    try:
        with maps.map_stack(Meter(), ManualClock()) as (stack, counter):
            out: dict[Any, dict[str, Any]] = {
                (n, c): maps.measure(stack, counter, n, c) for n, c in ((30, 10), (100, 100))
            }
            for n in (100, 1_000):
                out[n] = maps.bounded_requests(stack, counter, n, 10)
            yield out
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def rows(measured: dict[Any, dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    return {k: v for k, v in measured.items() if isinstance(k, tuple)}


def test_an_item_costs_a_claim_of_three_keys_a_result_an_accounting_and_a_message(
    rows: dict[tuple[int, int], dict[str, Any]],
) -> None:
    items, row = 30, rows[(30, 10)]
    by = row["per_item_by_request"]
    # The claim: one consistent BatchGetItem of the workflow item, the item's unit (absent
    # before its first claim: still a unit) and its items page.
    # A supervisor look that falls in the run (a sweep looks ahead to an item's dispatch
    # deadline) reads the workflow's partition (a query: with it the window's one shard,
    # K = ceil(C / 32) = 1) and the window's C = 10 units; the accounting of the map's last
    # item reads its K shards once.
    looks = row["looks"]
    assert by["rru"]["batch get workflow"] == 1.0
    assert by["rru"]["batch get item"] == pytest.approx(2.0 + (looks * 10 + 1) / items)
    assert set(by["rru"]) <= {"batch get workflow", "batch get item", "query table"}
    assert row["max_keys_read"]["claim"] == 3
    # The result reads nothing; an accounting reads nothing either, but the one that counts
    # the map's last item reads its K shards once (the verdict's sums).
    assert row["max_keys_read"]["result"] == 0
    assert row["max_keys_read"]["accounting"] == 1
    # The claim creates the item's unit, the result ends it, the accounting (and its refill)
    # writes the item's window shard: 1 WRU each; the shard's done marker on the map's unit
    # once per shard.
    assert by["wru"]["item update: create"] == 1.0
    assert by["wru"]["item update: RUNNING->SUCCEEDED"] == 1.0
    accounting = sum(v for k, v in by["wru"].items() if k.startswith("item update: None (m_"))
    assert accounting == pytest.approx(1.0)
    assert by["wru"]["step update: RUNNING (m_done_0)"] == pytest.approx(1 / items)
    assert by["requests"]["dynamodb.BatchGetItem"] == pytest.approx(1.0 + (looks + 1) / items)
    assert by["requests"]["dynamodb.UpdateItem"] == pytest.approx(3.0 + 1 / items)
    # The map's requests, all told: every item's (and the looks'), then the map's own.
    assert row["requests"]["dynamodb.BatchGetItem"] >= items
    assert row["requests"]["dynamodb.UpdateItem"] >= 3 * items
    units = row["units_per_item_variable"]
    assert (units["lambda_agent"], units["sqs_event_source"]) == (1.0, 2.0)  # worst case
    # The first window's ten messages in one request (the opener's), then a refill's each.
    assert units["sqs_send"] == pytest.approx((1 + items - 10) / items)
    assert row["delivery"]["agent_invocations_as_delivered"] < items  # batches of up to 10
    # Per map: the map step's own message (one invocation), its claim and open write, the
    # end; spread over the items in the all-in price.
    fixed = row["fixed_units_per_map"]
    assert (fixed["lambda_agent"], fixed["sqs_event_source"]) == (1.0, 2.0)
    assert row["usd_per_million_items"] == pytest.approx(
        row["usd_per_million_items_variable"] + 1e6 * row["fixed_usd_per_map"] / items
    )


def test_the_accounting_write_is_billed_by_its_shard_not_by_the_window(
    rows: dict[tuple[int, int], dict[str, Any]],
) -> None:
    """A hundred entries of ~12 bytes took the map's unit past 1 KB while they sat on it (1.4
    WRU an item at C = 100): on shards of at most 32 each write stays within 1 KB."""

    def accounting(row: dict[str, Any]) -> float:
        wru = row["per_item_by_request"]["wru"]
        return sum(v for k, v in wru.items() if k.startswith("item update: None (m_"))

    narrow, wide = accounting(rows[(30, 10)]), accounting(rows[(100, 100)])
    assert narrow == pytest.approx(1.0) and wide == pytest.approx(1.0)
    # Four shards at C = 100, each marked done on the map's unit once.
    done = rows[(100, 100)]["per_item_by_request"]["wru"]
    assert sorted(k for k in done if k.startswith("step update: RUNNING (m_done_")) == [
        f"step update: RUNNING (m_done_{s})" for s in range(4)
    ]
    assert rows[(100, 100)]["max_keys_read"]["claim"] == 3
    assert rows[(100, 100)]["max_keys_read"]["accounting"] == 4  # the last one reads K = 4


def test_reads_stay_bounded_as_the_items_grow_tenfold(
    measured: dict[Any, dict[str, Any]],
) -> None:
    small, large = measured[100], measured[1_000]
    # A sweep looks ahead: it may look at the map again at its next deadline before the next
    # sweep, so a look's figures are per look.
    assert small["looks"] >= 1 and large["looks"] >= 1
    for case in (small, large):
        keys, ops = case["max_keys_read"], case["operations"]
        assert keys["claim"] == 3  # the workflow item, the item's unit, its items page
        assert ops["claim"]["by_request"] == {"dynamodb.BatchGetItem": 1}
        assert keys["result"] == keys["accounting"] == 0
        assert ops["result"]["rru"] == ops["accounting"]["rru"] == 0
        # The workflow's partition (its item, the map's unit, its window shard) and the
        # window's 10 units.
        assert keys["look"] == keys["view"] == 10 + 3
        assert ops["look"]["rru"] > 0 and ops["view"]["rru"] > 0
    # Ten times the items: the same requests and read units, operation by operation.
    for op in maps.OPERATIONS:
        assert small["operations"][op]["by_request"] == large["operations"][op]["by_request"], op
        assert small["operations"][op]["rru"] == large["operations"][op]["rru"], op
    assert small["max_keys_read"] == large["max_keys_read"]


def test_step_functions_prices_by_hand() -> None:
    sfn = maps.step_functions_per_million_items()
    assert sfn["inline_map_standard"] == pytest.approx(25 + 0.2)
    assert sfn["distributed_map_standard_children"] == pytest.approx(50 + 0.2)
    express = 25 + 1 + 0.1 * 64 / 1024 * 0.00001667 * 1e6 + 0.2
    assert sfn["distributed_map_express_children"] == pytest.approx(express)


def test_the_report_section_names_every_row() -> None:
    keys = {"look": 102, "claim": 3, "view": 102, "items": 203}
    rows = [
        {
            "items": 1000,
            "max_concurrency": 100,
            "units_per_item": {
                "dynamodb_wru_table": 3.9,
                "dynamodb_wru_index": 0.01,
                "dynamodb_rru": 3.04,
                "sqs_send": 0.91,
                "sqs_event_source": 2.0,
                "lambda_agent": 1.0,
                "s3_get": 0.1,
                "s3_put": 0.003,
            },
            "usd_per_million_items": 4.27,
            "usd_per_million_items_variable": 4.24,
            "fixed_usd_per_map": 0.000035,
            "ratio_to_plain_step": 1.11,
            "looks": 0,
            "max_keys_read": keys,
            "per_item_by_request": {"wru": {"item update: create": 1.0}, "rru": {}},
        }
    ]
    spent = {"requests": 2, "rru": 4.5, "wru": 0, "by_request": {}}
    bounded = [
        {
            "items": 10_000,
            "max_concurrency": 100,
            "looks": 1,
            "operations": {"look": spent},
            "max_keys_read": keys,
        }
    ]
    sfn = maps.step_functions_per_million_items()
    section = {
        "rows": rows,
        "step_functions": sfn,
        "plain_step_core_usd_per_million_steps": 3.84,
        "bounded_reads": bounded,
    }
    text = "\n".join(_maps({"maps": section}))
    assert "## Map items (issue 24)" in text
    assert (
        "| 1,000 | 100 | 3.91 | 3.04 | 0.91 | 4.24 | 35.00 | 4.27 | 1.11x | 0 | 102, 3, 102, 203 |"
        in text
    )
    assert "| write: item update: create | 1.000 WRU |" in text
    assert "| 10,000 | 100 | look | 2 | 4.5 | 0 | 102 |" in text
    assert "$25.20" in text and "($3.84 / M)" in text
    assert _maps({}) == []
