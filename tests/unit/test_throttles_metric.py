"""Throttling says so: every AWS call answered "slow down" is counted per service by a botocore
hook on the engine's clients, the SDK's own retries included, and the handlers emit the count
as the `Throttles` metric with a `Service` dimension."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from shepherd import wiring


def _throttled_then_ok(times: int) -> Any:
    calls = {"n": 0}

    def before_send(request: Any, **_: Any) -> AWSResponse:
        calls["n"] += 1
        if calls["n"] <= times:
            body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"})
            return AWSResponse(request.url, 400, {}, _Raw(body.encode()))
        return AWSResponse(request.url, 200, {}, _Raw(b'{"Item": {}}'))

    return before_send, calls


class _Raw:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data

    def read(self, *_: Any) -> bytes:
        return self._data


def test_throttled_attempts_are_counted_per_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    wiring.THROTTLES.take()
    client = wiring.client("dynamodb")
    before_send, calls = _throttled_then_ok(times=2)
    client.meta.events.register_first("before-send", before_send)
    monkeypatch.setattr("time.sleep", lambda _: None)  # the SDK's backoff
    client.get_item(TableName="t", Key={"pk": {"S": "a"}})
    assert calls["n"] == 3  # two throttled attempts, retried by the SDK, then one that passed
    assert wiring.THROTTLES.take() == {"dynamodb": 2}
    assert wiring.THROTTLES.take() == {}  # an invocation's own, reset


def test_the_handlers_emit_throttles_with_a_service_dimension(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the deployment's own `service` (what its stack's alarm and dashboard read), not
    the library's default name."""
    from shepherd_handlers import runtime
    from shepherd_handlers.runtime import count_throttles

    monkeypatch.setattr(runtime, "service", "staging-Shepherd")

    @count_throttles
    def handler() -> str:
        wiring.THROTTLES.hook(
            response=(None, {"Error": {"Code": "ProvisionedThroughputExceededException"}}),
            event_name="needs-retry.dynamodb.UpdateItem",
        )
        wiring.THROTTLES.hook(
            response=(None, {"Error": {"Code": "AccessDenied"}}),  # not a throttle
            event_name="needs-retry.sqs.SendMessageBatch",
        )
        return "done"

    assert handler() == "done"
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "Throttles" in ln]
    emf = json.loads(line)
    assert emf["Throttles"] == [1.0] and emf["Service"] == "dynamodb"
    assert emf["service"] == "staging-Shepherd"
    assert ["service", "Service"] in emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
