"""Behaviour unchanged, proven (issue 40.4): every pinned scenario of `make bench`, faults
included (a retry, an unwinding, a long heartbeating step), makes exactly the requests,
units, messages and events `tests/sim/equivalence.json` recorded before the step kinds moved
into `shepherd.kinds` (the clean ones are also pinned, with their reasons, by
`test_handler_accounting.py`)."""

from __future__ import annotations

import json

import pytest
from shepherd_bench.cost import MAP_SCENARIOS, SCENARIOS
from shepherd_sim.equivalence import FIXTURE, bench_counts

RECORDED = json.loads(FIXTURE.read_text())["bench"]
BY_NAME = {s.name: s for s in (*SCENARIOS, *MAP_SCENARIOS)}


def test_every_pinned_scenario_is_recorded() -> None:
    assert set(RECORDED) == set(BY_NAME)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_a_pinned_scenario_makes_the_recorded_requests(name: str) -> None:
    assert bench_counts(name) == RECORDED[name]
