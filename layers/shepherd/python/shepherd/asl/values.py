"""JSON values as Step Functions writes them: compact JSON text (no spaces), and the JSON
type tests Choice rules and intrinsics use (a bool is not a number)."""

from __future__ import annotations

import json
import math
from typing import Any


def dumps(value: Any) -> str:
    """Compact JSON, as States.JsonToString and error causes print it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def normalize(value: Any) -> Any:
    """A whole float is an integer in JSON (`1.0` prints `1` in Step Functions' output)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value
