"""Fixtures of the handler tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aws_stack import Stack, plain_attribute_values
from moto import mock_aws
from shepherd.engine.agent import AgentContext, Pending
from shepherd_examples.agents import registry


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "shepherd")
    with mock_aws():
        yield Stack(monkeypatch)


@pytest.fixture
def callback_ship() -> Iterator[list[str]]:
    """ship_order as a callback step: it hands its task token to 'the carrier' and waits. The
    tokens it handed out, in order."""
    tokens: list[str] = []
    original = registry.get("ship_order")
    assert original is not None

    def ship(ctx: AgentContext) -> Any:
        tokens.append(ctx.task_token())
        return Pending("waiting for the carrier")

    registry.register("ship_order", ship)
    try:
        yield tokens
    finally:
        registry.register("ship_order", original)


@pytest.fixture(scope="session", autouse=True)
def _plain_dynamodb_replies() -> Iterator[None]:
    """moto's DynamoDB replies written without its generic serializer (issue 36; see
    `aws_stack.plain_attribute_values`), for every handler test."""
    with pytest.MonkeyPatch.context() as patch:
        plain_attribute_values(patch.setattr)
        yield
