"""Choice rules of JSONPath states (the spec's "Choice Rules"): every comparison operator and
its `...Path` variant, the `Is*` type tests, And/Or/Not. A comparison between values of
different types is false, never an error; a Variable whose path selects nothing is a
States.Runtime error (IsPresent excepted), as Step Functions has it."""

from __future__ import annotations

import datetime as _dt
import operator
from collections.abc import Callable, Mapping
from typing import Any

from shepherd.timestamps import rfc3339

from . import paths, wildcard
from .errors import RUNTIME, StatesError
from .values import is_number

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "Equals": operator.eq,
    "LessThan": operator.lt,
    "GreaterThan": operator.gt,
    "LessThanEquals": operator.le,
    "GreaterThanEquals": operator.ge,
}

TYPES = ("String", "Numeric", "Boolean", "Timestamp")
TESTS = ("IsNull", "IsPresent", "IsNumeric", "IsString", "IsBoolean", "IsTimestamp")

COMPARISONS: frozenset[str] = frozenset(
    [f"{t}{o}" for t in TYPES for o in _ORDER if not (t == "Boolean" and o != "Equals")]
    + [f"{t}{o}Path" for t in TYPES for o in _ORDER if not (t == "Boolean" and o != "Equals")]
    + ["StringMatches", *TESTS]
)


def parse_timestamp(value: Any) -> _dt.datetime | None:
    """An RFC 3339 timestamp as the guide's Choice rules take one (uppercase `T`, `Z` or a
    numeric offset: state-choice.html), else None; the native Wait's reader is the one owner."""
    return rfc3339(value) if isinstance(value, str) else None


def _typed(kind: str, value: Any) -> Any:
    """`value` as a comparable of `kind`, or None when it is not one."""
    if kind == "String":
        # Ordered as Java orders strings (UTF-16 code units), which UTF-16BE bytes preserve.
        return value.encode("utf-16-be", "surrogatepass") if isinstance(value, str) else None
    if kind == "Numeric":
        return value if is_number(value) else None
    if kind == "Boolean":
        return value if isinstance(value, bool) else None
    return parse_timestamp(value)


class Evaluator:
    """Evaluates one Choice rule against a state's effective input."""

    def __init__(
        self, data: Any, *, context: Any = None, variables: Mapping[str, Any] | None = None
    ) -> None:
        self.data = data
        self.context = context
        self.variables = variables or {}

    def select(self, path: str) -> Any:
        try:
            return paths.select(path, self.data, context=self.context, variables=self.variables)
        except paths.PathNotFound:
            raise StatesError(
                RUNTIME,
                f"Invalid path '{path}': The choice state's condition path references an "
                "invalid value.",
            ) from None

    def test(self, rule: Mapping[str, Any]) -> bool:
        if "And" in rule:
            return all(self.test(r) for r in rule["And"])
        if "Or" in rule:
            return any(self.test(r) for r in rule["Or"])
        if "Not" in rule:
            return not self.test(rule["Not"])
        operator_name = next(k for k in rule if k in COMPARISONS)
        variable = rule["Variable"]
        expected = rule[operator_name]
        if operator_name == "IsPresent":
            try:
                paths.select(variable, self.data, context=self.context, variables=self.variables)
            except paths.PathNotFound:
                return expected is False
            return expected is True
        value = self.select(variable)
        if operator_name in TESTS:
            return bool(_type_test(operator_name, value) == expected)
        if operator_name.endswith("Path"):
            operator_name = operator_name[:-4]
            expected = self.select(expected)
        return compare(operator_name, value, expected)


def _type_test(test: str, value: Any) -> bool:
    if test == "IsNull":
        return value is None
    if test == "IsNumeric":
        return is_number(value)
    if test == "IsString":
        return isinstance(value, str)
    if test == "IsBoolean":
        return isinstance(value, bool)
    return parse_timestamp(value) is not None  # IsTimestamp


def compare(operator_name: str, value: Any, expected: Any) -> bool:
    """`value <operator> expected`; false when either is not of the operator's type."""
    if operator_name == "StringMatches":
        return (
            isinstance(value, str)
            and isinstance(expected, str)
            and (wildcard.matches(value, expected))
        )
    kind = next(t for t in TYPES if operator_name.startswith(t))
    a, b = _typed(kind, value), _typed(kind, expected)
    if a is None or b is None:
        return False
    return _ORDER[operator_name[len(kind) :]](a, b)
