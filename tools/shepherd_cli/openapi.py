"""Write docs/openapi.json from the handlers' routes (`make openapi`); a test fails on drift."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "docs" / "openapi.json"


def document() -> dict[str, Any]:
    """One OpenAPI document for both resolvers behind the REST API (workflows and tasks)."""
    from shepherd_handlers import api, callbacks

    doc: dict[str, Any] = json.loads(api.openapi_json())
    tasks: dict[str, Any] = json.loads(
        callbacks.app.get_openapi_json_schema(title=api.TITLE, version=api.VERSION)
    )
    doc["paths"].update(tasks["paths"])
    doc.setdefault("components", {}).setdefault("schemas", {}).update(
        tasks.get("components", {}).get("schemas", {})
    )
    # Request validation errors are answered 400 with ErrorBody (shepherd_handlers.errors),
    # not with Powertools' default 422 shape: document what the API really returns.
    for operations in doc["paths"].values():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
    for unused in ("HTTPValidationError", "ValidationError"):
        doc["components"]["schemas"].pop(unused, None)
    doc["info"]["description"] = (
        "Shepherd's scheduler API. Every route requires AWS IAM (SigV4) authorization; the "
        "caller's IAM principal owns what it starts. Errors share one shape: ErrorBody."
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
