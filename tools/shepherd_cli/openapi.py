"""Write docs/openapi.json from the handlers' routes (`make openapi`); a test fails on drift.

One document for both resolvers behind the REST API (workflows and tasks). Every operation
documents its success response and every error it can return, all in the one error shape
(ErrorBody), and requires the SigV4 (IAM) security scheme, as API Gateway enforces.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "docs" / "openapi.json"
SECURITY = "sigv4"
SECURITY_SCHEME = {
    "type": "apiKey",
    "name": "Authorization",
    "in": "header",
    "description": "AWS Signature Version 4 (IAM): sign every request for the execute-api "
    "service with the caller's AWS credentials; the signing principal owns what it starts",
    "x-amazon-apigateway-authtype": "awsSigv4",
}


def document() -> dict[str, Any]:
    from shepherd_handlers import api, callbacks

    doc: dict[str, Any] = json.loads(api.openapi_json())
    tasks: dict[str, Any] = json.loads(
        callbacks.app.get_openapi_json_schema(title=api.TITLE, version=api.VERSION)
    )
    doc["paths"].update(tasks["paths"])
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(tasks.get("components", {}).get("schemas", {}))
    # Request validation errors are answered 400 with ErrorBody (shepherd_handlers.errors),
    # not with Powertools' default 422 shape; responses are never validated against their
    # models at run time: drop what documents either.
    for operations in doc["paths"].values():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
            operation["security"] = [{SECURITY: []}]
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    doc["components"]["securitySchemes"] = {SECURITY: SECURITY_SCHEME}
    doc["security"] = [{SECURITY: []}]
    doc["info"]["description"] = (
        "Shepherd's scheduler API. Every route requires AWS IAM (SigV4) authorization; the "
        "caller's IAM principal owns what it starts. Errors share one shape: ErrorBody. "
        "JSON bodies are strict RFC 8259 JSON; a value in one nests at most 64 levels."
    )
    return doc


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    TARGET.write_text(render())
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
