"""API Gateway takes 10 MB, Lambda 6 MB: a body between the two never reaches a handler and
comes back from API Gateway as an integration failure, not a 413. The gateway's own replies
say so, with the way out (POST /payloads)."""

from __future__ import annotations

import json

from infra_support import Synth


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
