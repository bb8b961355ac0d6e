"""The committed OpenAPI document is what the handlers serve: regenerate with `make openapi`."""

from __future__ import annotations

import json

from shepherd_cli.openapi import TARGET, render


def test_openapi_document_matches_the_code() -> None:
    assert TARGET.read_text() == render(), "docs/openapi.json is stale: run `make openapi`"


def test_openapi_document_covers_every_route_with_the_error_shape() -> None:
    doc = json.loads(render())
    assert set(doc["paths"]) == {
        "/workflows",
        "/workflows/{workflow_id}",
        "/workflows/{workflow_id}/cancel",
        "/workflows/{workflow_id}/retry",
        "/definitions",
        "/definitions/{name}",
        "/tasks/{token}/heartbeat",
        "/tasks/{token}/success",
        "/tasks/{token}/failure",
    }
    start = doc["paths"]["/workflows"]["post"]
    assert {"202", "400", "409", "413"} <= set(start["responses"])
    assert start["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorBody"
    )
    assert any(
        p["name"].lower() == "idempotency-key" and p["in"] == "header" for p in start["parameters"]
    )
    assert "422" not in start["responses"]
    assert "HTTPValidationError" not in json.dumps(doc)
