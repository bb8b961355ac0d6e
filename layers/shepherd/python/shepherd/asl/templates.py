"""Payload templates (Parameters, ResultSelector, ItemSelector, Assign, Arguments of JSONPath
states): a JSON value whose object keys ending in `.$` take their value from a path, the
context object, a variable or an intrinsic function; the key loses its `.$`."""

from __future__ import annotations

import random as _random
from collections.abc import Mapping
from typing import Any

from . import intrinsics, paths
from .errors import RUNTIME, StatesError
from .values import dumps


def render(
    template: Any,
    data: Any,
    *,
    context: Any = None,
    variables: Mapping[str, Any] | None = None,
    rng: _random.Random | None = None,
    field: str = "Parameters",
) -> Any:
    if isinstance(template, dict):
        out: dict[str, Any] = {}
        for key, value in template.items():
            if key.endswith(".$"):
                out[key[:-2]] = resolve(
                    value, data, context=context, variables=variables, rng=rng, field=key
                )
            else:
                out[key] = render(
                    value, data, context=context, variables=variables, rng=rng, field=field
                )
        return out
    if isinstance(template, list):
        return [
            render(v, data, context=context, variables=variables, rng=rng, field=field)
            for v in template
        ]
    return template


def resolve(
    expression: Any,
    data: Any,
    *,
    context: Any = None,
    variables: Mapping[str, Any] | None = None,
    rng: _random.Random | None = None,
    field: str,
) -> Any:
    """One `.$` value: a path, `$$...`, `$variable` or `States.*(...)`."""
    if not isinstance(expression, str):
        raise StatesError(RUNTIME, f"The value of the field '{field}' must be a path")
    intrinsic = intrinsics.is_intrinsic(expression)
    try:
        if intrinsic:
            return intrinsics.evaluate(
                expression, data, context=context, variables=variables, rng=rng
            )
        # Jayway's read, which Step Functions uses here: an index past the end of an array
        # that is there reads null (recorded: `"idx.$": "$.items[5]"` on [1,2] gives null).
        return paths.select(
            expression, data, context=context, variables=variables, index_past_end=None
        )
    except paths.PathNotFound as missing:
        path = str(missing)
        source = context if path.startswith("$$") else data
        if intrinsic:  # Step Functions names the whole call, then the argument's path
            raise StatesError(
                RUNTIME,
                f"The function '{expression}' had the following error: The JsonPath argument "
                f"for the field '{path}' could not be found in the input '{dumps(source)}'",
            ) from None
        raise paths.runtime_not_found(path, field, source) from None
