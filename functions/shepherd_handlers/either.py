"""A payload comes inline or as an upload, never both: one rule for every body that can name
one (a start, a callback's success, a StartWorkflow event's detail)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def inline_or_upload(model: BaseModel, inline: str, upload: str) -> None:
    """Refuse a body that sets both fields (even to null: the schema says `not required` both)."""
    if {inline, upload} <= model.model_fields_set:
        raise ValueError(f"give either {inline} or {upload}, not both")


def schema(inline: str, upload: str) -> dict[str, Any]:
    """The same rule in JSON Schema, for the OpenAPI document (and the contract fuzz)."""
    return {"not": {"required": [inline, upload]}}
