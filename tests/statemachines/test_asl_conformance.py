"""Every case of the ASL conformance suite (tests/statemachines/conformance/*.json) through the runner."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd_asl_conformance import checked, load, run_all, table

CASES = [(feature, case) for feature, cases in load().items() for case in cases]


@pytest.mark.parametrize(("feature", "case"), CASES, ids=[f"{f}: {c['name']}" for f, c in CASES])
def test_case(feature: str, case: dict[str, Any]) -> None:
    assert checked(case) is None


def test_table_counts_every_case() -> None:
    results = run_all()
    assert len(results) == len(CASES) >= 100
    assert table(results).splitlines()[-1].split() == ["total", str(len(CASES)), "0"]
