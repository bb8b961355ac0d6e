"""Every way an input breaks its definition's InputSchema, not only the first.

fastjsonschema stops at the first error. A person fixing a start input wants them all, each
with its path: `problems` validates the input once (the fast path: a valid input costs one
call), and only when that fails walks the schema's `properties` and `items` down to the
values that are wrong, validating each part on its own against its own subschema. What a
subschema cannot be split by (`$ref`, combinators, `additionalProperties`) is checked as a
whole at its level and reported as its first error. At most `limits.MAX_INPUT_PROBLEMS` are
listed: a huge wrong array is not a huge reply.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import fastjsonschema

from shepherd import limits

Problem = tuple[str, str]  # (path, message), the path rooted at "data"


@lru_cache(maxsize=256)
def _compiled(text: str) -> Any:
    return fastjsonschema.compile(json.loads(text))


def _first(schema: Any, value: Any, name: str) -> Problem | None:
    try:
        _compiled(json.dumps(schema, sort_keys=True))(value, name_prefix=name)
    except fastjsonschema.JsonSchemaValueException as exc:
        return (str(exc.name or name), exc.message)
    return None


def _refers(schema: Any) -> bool:
    """A `$ref` anywhere: its subschemas cannot be validated apart from their root."""
    text = json.dumps(schema)
    return '"$ref"' in text


def problems(
    schema: dict[str, Any], value: Any, cap: int = limits.MAX_INPUT_PROBLEMS
) -> list[Problem]:
    """Every problem of `value` under `schema` (none: it is valid), in document order, at most
    `cap`."""
    first = _first(schema, value, "data")
    if first is None:
        return []
    if _refers(schema):
        return [first]
    out: list[Problem] = []
    _collect(schema, value, "data", out, cap)
    return out[:cap] or [first]


def _collect(schema: Any, value: Any, name: str, out: list[Problem], cap: int) -> None:
    if len(out) >= cap or not isinstance(schema, dict):
        return
    found = _first(schema, value, name)
    if found is None:
        return
    before = len(out)
    rest = dict(schema)
    properties = schema.get("properties")
    if isinstance(value, dict) and isinstance(properties, dict):
        required = schema.get("required")
        if isinstance(required, list):
            rest.pop("required")
            # At the object's path, as fastjsonschema reports it (the key is not there).
            out.extend(
                (name, f"{name} must contain '{key}'") for key in required if key not in value
            )
        for key, sub in properties.items():
            if key in value:
                _collect(sub, value[key], f"{name}.{key}", out, cap)
        # The rest of this level (its type, additionalProperties, its combinators) with the
        # properties themselves already checked above: each is true here.
        rest["properties"] = dict.fromkeys(properties, True)
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        for i, item in enumerate(value):
            _collect(items, item, f"{name}[{i}]", out, cap)
        rest["items"] = True
    if len(out) == before:
        out.append(found)  # nothing to split: the level's own (first) error
    elif rest != schema:
        also = _first(rest, value, name)
        if also is not None:
            out.append(also)
