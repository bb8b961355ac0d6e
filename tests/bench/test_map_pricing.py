"""Map items priced by counting requests (issue 24): the map protocol's requests per item on
moto under the meter, pinned at a size where every item is under 1 KB and 4 KB; the Step
Functions prices it is compared with; the report's section."""

from __future__ import annotations

import pytest
from shepherd_bench import maps
from shepherd_bench.report import _maps


@pytest.fixture(autouse=True)
def _fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "bench")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def test_an_item_costs_a_claim_a_result_an_accounting_and_a_two_key_read() -> None:
    items = 20
    row = maps.measure(items, 5)
    units = row["units_per_item"]
    # Per item: claim (creates its unit), result, accounting on the map unit (all under
    # 1 KB here); once per map: the workflow item, the map unit's claim, the opening, the
    # verdict.
    assert units["dynamodb_wru_table"] == pytest.approx(3 + 4 / items)
    assert units["dynamodb_rru"] == pytest.approx(2.0)  # the claim's BatchGetItem, 2 keys
    assert row["requests"] == {"dynamodb.UpdateItem": 3 * items + 4, "dynamodb.BatchGetItem": items}
    assert (units["sqs_send"], units["sqs_event_source"], units["lambda_agent"]) == (1, 2, 1)
    assert row["max_keys_read"]["claim"] == 2


def test_the_accounting_write_is_billed_by_the_window_it_carries() -> None:
    narrow = maps.measure(300, 10)["units_per_item"]["dynamodb_wru_table"]
    wide = maps.measure(300, 300)["units_per_item"]["dynamodb_wru_table"]
    assert narrow < 3.2  # at most a 1 KB map unit: 1 WRU an accounting
    # Up to 300 window entries of epoch times (the window empties as the last stripes end):
    # several KB, so on average more than one more WRU an accounting.
    assert wide > narrow + 1


def test_step_functions_prices_by_hand() -> None:
    sfn = maps.step_functions_per_million_items()
    assert sfn["inline_map_standard"] == pytest.approx(25 + 0.2)
    assert sfn["distributed_map_standard_children"] == pytest.approx(50 + 0.2)
    express = 25 + 1 + 0.1 * 64 / 1024 * 0.00001667 * 1e6 + 0.2
    assert sfn["distributed_map_express_children"] == pytest.approx(express)


def test_the_report_section_names_every_row() -> None:
    rows = [
        {
            "items": 1000,
            "max_concurrency": 100,
            "units_per_item": {"dynamodb_wru_table": 3.8, "dynamodb_rru": 2.0},
            "usd_per_million_items": 4.04,
            "ratio_to_plain_step": 1.05,
            "max_keys_read": {"claim": 2},
        }
    ]
    sfn = maps.step_functions_per_million_items()
    text = "\n".join(
        _maps(
            {
                "maps": {
                    "rows": rows,
                    "step_functions": sfn,
                    "plain_step_core_usd_per_million_steps": 3.84,
                }
            }
        )
    )
    assert "## Map items (issue 24)" in text
    assert "| 1,000 | 100 | 3.80 | 2.00 | 4.04 | 1.05x | 2 |" in text
    assert "$25.20" in text and "($3.84 / M)" in text
    assert _maps({}) == []
