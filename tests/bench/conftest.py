"""Fixtures of the bench tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aws_stack import plain_attribute_values


@pytest.fixture(scope="session", autouse=True)
def _plain_dynamodb_replies() -> Iterator[None]:
    """moto's DynamoDB replies written without its generic serializer, as in the handler tests
    (issue 36; see `aws_stack.plain_attribute_values`: the same bytes, which
    tests/handlers/test_moto_serializer.py proves on every type). The benches count requests
    and capacity units, never moto's time: a map's 30 items through the handlers took 3.8 s of
    CPU with moto's serializer, 2.6 s without."""
    with pytest.MonkeyPatch.context() as patch:
        plain_attribute_values(patch.setattr)
        yield
