"""What a cold start loads: no X-Ray SDK unless tracing is switched on, and an engine session
that never lists every service botocore ships. (Times are measured by `make bench`.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from shepherd.observability import ENV_TRACING

PROBE = """
import json, sys
import shepherd_handlers.{name}
from shepherd_handlers import runtime
print(json.dumps({{
    "xray": any(m.startswith("aws_xray_sdk") for m in sys.modules),
    "boto3": "boto3" in sys.modules,
    "tracing": runtime.tracer.enabled,
}}))
"""


def _probe(name: str, tracing: str | None) -> dict[str, Any]:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop(ENV_TRACING, None)
    if tracing is not None:
        env[ENV_TRACING] = tracing
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(name=name)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("name", ["api", "agent", "supervisor", "callbacks", "events"])
def test_a_handler_imports_neither_the_xray_sdk_nor_boto3_by_default(name: str) -> None:
    assert _probe(name, None) == {"xray": False, "boto3": False, "tracing": False}


def test_the_stream_relay_imports_no_xray_sdk_by_default() -> None:
    # It decodes stream images with boto3's deserializer, so boto3 itself is loaded.
    assert _probe("stream", None) == {"xray": False, "boto3": True, "tracing": False}


def test_tracing_is_switched_on_by_configuration() -> None:
    probe = _probe("agent", "true")
    assert (probe["xray"], probe["tracing"]) == (True, True)


def test_without_tracing_the_decorators_return_the_function_itself() -> None:
    from shepherd_handlers.runtime import Tracing

    def work() -> int:
        return 1

    off = Tracing(enabled=False)
    assert off.capture_method(work) is work
    assert off.capture_lambda_handler(work) is work


def test_the_engine_session_knows_its_services_without_listing_botocore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import boto3
    from shepherd import wiring

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    wiring._own_session.cache_clear()
    session = wiring._default_session()
    loader = session._session.get_component("data_loader")
    assert loader.list_available_services("service-2") == sorted(wiring.ENGINE_SERVICES)
    for service in sorted(wiring.ENGINE_SERVICES):
        client = wiring._client(service)
        assert client.meta.service_model.service_name == service
    # The engine's short list stays the engine's: agent code in the same sandbox still gets a
    # client of any service from boto3's default session.
    assert boto3.DEFAULT_SESSION is None
    assert boto3.client("stepfunctions", region_name="us-east-1").meta.service_model
    assert "dynamodbstreams" in boto3.DEFAULT_SESSION.get_available_services()


def test_hooks_on_boto3_s_default_session_see_the_engine_s_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import boto3
    from shepherd import wiring

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    boto3.setup_default_session(region_name="us-east-1")
    assert wiring._client("sqs").meta.events is not None
    assert wiring._default_session() is boto3.DEFAULT_SESSION


HEAVY = """
import json, sys
import shepherd_handlers.{name}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""
# What a handler's cold import must not load (issue 40.6): the agent runtime, the engine's
# wiring and the definition models are built on first use by the handlers that use them.
NOT_IMPORTED = {
    "stream": ("shepherd.engine.agent", "shepherd.wiring", "shepherd.definitions"),
    "events": ("shepherd.engine.agent", "shepherd.wiring", "shepherd.definitions"),
    "api": ("shepherd.engine.agent", "shepherd.wiring", "shepherd.engine.scheduler"),
    "callbacks": ("shepherd.engine.agent", "shepherd.wiring"),
    "agent": ("shepherd.wiring", "shepherd.engine.operations", "shepherd.engine.approvals"),
    "supervisor": ("shepherd.wiring", "shepherd.engine.operations", "shepherd.engine.approvals"),
}


@pytest.mark.parametrize("name", sorted(NOT_IMPORTED))
def test_a_handler_imports_only_what_it_uses(name: str) -> None:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop(ENV_TRACING, None)
    out = subprocess.run(
        [sys.executable, "-c", HEAVY.format(name=name, heavy=NOT_IMPORTED[name])],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
