"""Shared fixtures. AWS calls only ever reach moto: fake credentials, a fixed region."""

from __future__ import annotations

import os

for _key, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}.items():
    os.environ[_key] = _value
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
from support import Harness, memory_harness, moto_harness  # noqa: E402


@pytest.fixture(params=["memory", "moto"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The engine over the in-memory store and over DynamoDB on moto: both must behave alike."""
    if request.param == "memory":
        yield memory_harness()
    else:
        with moto_harness() as h:
            yield h


@pytest.fixture
def moto_engine() -> Iterator[Harness]:
    with moto_harness() as h:
        yield h
