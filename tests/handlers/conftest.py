"""Fixtures of the handler tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aws_stack import Stack
from moto import mock_aws


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "shepherd")
    with mock_aws():
        yield Stack(monkeypatch)
