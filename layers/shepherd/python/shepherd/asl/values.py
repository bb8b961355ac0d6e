"""JSON values as Step Functions writes them: compact JSON text (no spaces), and the JSON
type tests Choice rules and intrinsics use (a bool is not a number)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any


def dumps(value: Any) -> str:
    """Compact JSON, as States.JsonToString and error causes print it: Step Functions writes
    JSON with Jackson, so a fractional number is Java's `Double.toString` (`1.0E21`, `1.0E-4`,
    `1.0E7`; `1.5` and `1.0` as Python writes them)."""
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, dict):
        inner = ",".join(f"{dumps(str(k))}:{dumps(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def java_double(value: float) -> str:
    """A double as Java's Double.toString writes it: the shortest digits that read back the
    same; plain notation from 10^-3 up to 10^7, computerized scientific notation outside
    (`d.dddE±n`), always with a fractional part."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "e" not in text else f"{value:f}".rstrip("0") + "0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    shown = "".join(str(d) for d in digits).rstrip("0") or "0"
    assert isinstance(exponent, int)
    power = len(digits) + exponent - 1
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


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
