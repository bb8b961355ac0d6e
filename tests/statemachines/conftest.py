"""The ASL tests run the example agents in process (`shepherd asl run --agents
shepherd_examples.agents`): the examples' in-memory ledger (effects, outages) is put back as it
was after each test, so a later test's workflows meet the services as they would alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_example_ledger() -> Iterator[None]:
    from shepherd_examples.agents import ledger

    yield
    ledger.reset()
