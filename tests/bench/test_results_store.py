"""The hand-run benchmarks store their results without touching anyone else's."""

from __future__ import annotations

import json
from pathlib import Path

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
