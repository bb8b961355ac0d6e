"""The committed OpenAPI document is what the handlers serve (regenerate with `make openapi`),
whole: every route of `shepherd.routes`, every success and error documented, SigV4 required,
no dangling `$ref`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from shepherd import routes
from shepherd_cli.openapi import TARGET, render

ROUTES = {(r.method, r.resource): r for r in routes.ROUTES}


def _doc() -> dict[str, Any]:
    return dict(json.loads(render()))


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            yield method.upper(), path, operation


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"only local references: {ref}"
    node: Any = doc
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"dangling $ref {ref}"
        node = node[part]
    return node


def test_openapi_document_matches_the_code() -> None:
    assert TARGET.read_text() == render(), "docs/openapi.json is stale: run `make openapi`"


def test_every_ref_resolves() -> None:
    doc = _doc()
    refs = set(_refs(doc))
    assert "#/components/schemas/ErrorBody" in refs
    for ref in refs:
        _resolve(doc, ref)


def test_the_resolvers_the_document_and_the_route_list_agree() -> None:
    from shepherd_handlers import api, callbacks

    registered = {
        (route.method, route.openapi_path, target)
        for target, app in (("api", api.app), ("callbacks", callbacks.app))
        for route in app._static_routes + app._dynamic_routes
    }
    assert registered == {(r.method, r.resource, r.target) for r in routes.ROUTES}
    documented = {(method, path) for method, path, _ in _operations(_doc())}
    assert documented == set(ROUTES)


def test_each_operation_documents_exactly_the_query_parameters_its_route_reads() -> None:
    for method, path, operation in _operations(_doc()):
        names = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert names == set(ROUTES[(method, path)].query), (method, path, names)


@pytest.mark.parametrize(("method", "resource"), sorted(ROUTES))
def test_every_operation_documents_its_success_and_every_error(method: str, resource: str) -> None:
    doc = _doc()
    operation = doc["paths"][resource][method.lower()]
    responses = operation["responses"]
    success = [s for s in responses if s.startswith("2")]
    if ROUTES[(method, resource)].deprecated:
        # A former route answers only what replaced it: 410, in the error shape.
        assert operation["deprecated"] is True and success == [] and "410" in responses
    else:
        assert len(success) == 1, responses
        assert "$ref" in responses[success[0]]["content"]["application/json"]["schema"]
    # API Gateway's own replies and the last-resort boundary can answer any operation.
    # 400 too: any request may carry a query parameter its route does not read.
    expected = {"400", "401", "403", "413", "429", "500", "502", "504"}
    if ROUTES[(method, resource)].json_body:
        expected |= {"400", "415"}
    if "{" in resource:
        expected |= {"400", "404"}
    assert expected <= set(responses), (method, resource, sorted(responses))
    assert "422" not in responses
    for status, response in responses.items():
        if not status.startswith("2"):
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (status, schema)
    assert operation["security"] == [{"sigv4": []}]


def test_sigv4_is_the_security_scheme_of_the_whole_api() -> None:
    doc = _doc()
    scheme = doc["components"]["securitySchemes"]["sigv4"]
    assert scheme["type"] == "apiKey" and scheme["in"] == "header"
    assert scheme["name"] == "Authorization"
    assert scheme["x-amazon-apigateway-authtype"] == "awsSigv4"
    assert doc["security"] == [{"sigv4": []}]


def test_the_start_documents_its_location_header_and_idempotency_key() -> None:
    start = _doc()["paths"]["/workflows"]["post"]
    assert {"202", "400", "409", "413", "415"} <= set(start["responses"])
    assert "Location" in start["responses"]["202"]["headers"]
    assert any(
        p["name"].lower() == "idempotency-key" and p["in"] == "header" for p in start["parameters"]
    )
    assert "HTTPValidationError" not in json.dumps(_doc())
    error = _resolve(_doc(), "#/components/schemas/ErrorDetail")
    assert {"code", "message", "field", "request_id"} <= set(error["properties"])
