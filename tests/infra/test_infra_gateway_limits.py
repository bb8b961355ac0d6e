"""API Gateway takes 10 MB, Lambda 6 MB: a body between the two never reaches a handler and
comes back from API Gateway as an integration failure, not a 413. The gateway's own replies
say so, with the way out (POST /payloads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from infra_support import Synth, one_step_template
from shepherd_infra import ApiThrottling, config


def _reply(synth: Synth, response_type: str) -> dict[str, object]:
    (props,) = [
        r["Properties"]
        for r in synth.of_type("AWS::ApiGateway::GatewayResponse").values()
        if r["Properties"]["ResponseType"] == response_type
    ]
    return dict(props)


def test_the_gateways_413_and_502_name_lambdas_6_mb_and_the_upload_route(shepherd: Synth) -> None:
    too_large = _reply(shepherd, "REQUEST_TOO_LARGE")
    failed = _reply(shepherd, "INTEGRATION_FAILURE")
    assert too_large["StatusCode"] == "413" and failed["StatusCode"] == "502"
    for reply in (too_large, failed):
        body = json.loads(
            str(reply["ResponseTemplates"]["application/json"]).replace("$context.requestId", "r-1")
        )
        assert "6 MB" in body["error"]["message"], body
        assert "POST /payloads" in body["error"]["message"], body


def _stage(tmp_path: Path, **props: Any) -> dict[str, Any]:
    resources = one_step_template(tmp_path, **props)["Resources"].values()
    (stage,) = [r for r in resources if r["Type"] == "AWS::ApiGateway::Stage"]
    return dict(stage["Properties"])


def _throttle(stage: dict[str, Any], path: str) -> tuple[float, int]:
    (setting,) = [m for m in stage["MethodSettings"] if m["ResourcePath"] == path]
    return setting["ThrottlingRateLimit"], setting["ThrottlingBurstLimit"]


def test_the_stage_throttles_at_its_documented_defaults_unless_configured(tmp_path: Path) -> None:
    default = _stage(tmp_path / "a")
    assert _throttle(default, "/*") == (config.API_RATE_LIMIT, config.API_BURST_LIMIT) == (100, 200)
    assert [m["ResourcePath"] for m in default["MethodSettings"]] == ["/*"]
    # The design load: 5,000 starts a second from one caller, the rest of the API lower.
    tuned = _stage(
        tmp_path / "b",
        api_throttling=ApiThrottling(
            rate_limit=1000, burst_limit=2000, starts_rate_limit=5000, starts_burst_limit=5000
        ),
    )
    assert _throttle(tuned, "/*") == (1000, 2000)
    assert _throttle(tuned, "/~1workflows") == (5000, 5000)
    (start,) = [m for m in tuned["MethodSettings"] if m["ResourcePath"] == "/~1workflows"]
    assert start["HttpMethod"] == "POST"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate_limit": 0}, "rate_limit"),
        ({"rate_limit": 20_000}, "rate_limit"),
        ({"burst_limit": 6_000}, "burst_limit"),
        ({"starts_rate_limit": 5000}, "starts_burst_limit"),
    ],
)
def test_throttling_outside_api_gateways_limits_is_refused_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        ApiThrottling(**kwargs)
