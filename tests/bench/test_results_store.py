"""The hand-run benchmarks store their results without touching anyone else's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shepherd_bench import results


def test_a_result_is_stored_at_its_keys_and_every_other_result_stays(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps({"pools": {"rate_limit": {"x": 1}}, "meta": {"date": "d"}}))
    results.store("pools", "local_stack_rate", value={"achieved": 4.8}, path=path)
    results.store("local_day", value={"workflows": 10}, path=path)
    assert json.loads(path.read_text()) == {
        "pools": {"rate_limit": {"x": 1}, "local_stack_rate": {"achieved": 4.8}},
        "meta": {"date": "d"},
        "local_day": {"workflows": 10},
    }


def test_make_bench_keeps_what_the_hand_run_benchmarks_stored() -> None:
    """`make bench` rewrites benchmarks.json, and `--refresh-pools` its `pools`: the local
    day and the local rate limit (an hour's run each, by hand) stay."""
    before = {
        "local_day": {"workflows": 10_000},
        "pools": {"local_stack_rate": {"achieved_per_second": 4.8}, "rate_limit": {"old": 1}},
    }
    after: dict[str, Any] = {"pools": {"rate_limit": {"new": 2}}}
    results.keep_hand_run(before, after)
    assert after == {
        "local_day": {"workflows": 10_000},
        "pools": {"local_stack_rate": {"achieved_per_second": 4.8}, "rate_limit": {"new": 2}},
    }
    fresh: dict[str, Any] = {"pools": {}}
    results.keep_hand_run({}, fresh)  # nothing stored by hand yet: nothing made up
    assert fresh == {"pools": {}}


def test_the_demo_time_and_the_other_engines_prices_are_kept() -> None:
    """The README quotes both (tests/handlers/test_docs_agree.py): `make bench` keeps them."""
    before = {"demo": {"runs": [{"exit": 0, "seconds": 200.0}]}, "others": {"inngest": {}}}
    after: dict[str, Any] = {"cost": {}}
    results.keep_hand_run(before, after)
    assert after == {"cost": {}, **before}
