"""Conditions: Amazon States Language's Choice rules, as a step's `Condition`.

The model (validated when a definition loads) and its pure evaluation on a document
`{"input": ..., "steps": {<dependency>: {"output": ...}}}` that the scheduler assembles for a
ready conditional step (docs/architecture.md, conditions). One difference from ASL: a
comparison whose variable is absent is false, not a `States.Runtime` error (test for it with
`IsPresent`), so a step never fails on the shape of its data.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from shepherd.decisions import wildcard

# `$.input`, `$.input.a.b[0]`, `$.steps.<step>.output`, `$.steps.<step>.output.a[2].b`
_SEGMENT = r"[A-Za-z_][A-Za-z0-9_-]*(?:\[\d{1,6}\])*"
PATH = (
    r"^\$\.(?:input(?:\[\d{1,6}\])*|steps\.[a-z][a-z0-9_]{0,63}\.output(?:\[\d{1,6}\])*)"
    rf"(?:\.{_SEGMENT}){{0,32}}$"
)
MAX_DEPTH = 8  # nested And / Or / Not
MAX_RULES = 50  # comparisons in one condition

NUMERIC = {
    "NumericEquals": lambda a, b: a == b,
    "NumericLessThan": lambda a, b: a < b,
    "NumericLessThanEquals": lambda a, b: a <= b,
    "NumericGreaterThan": lambda a, b: a > b,
    "NumericGreaterThanEquals": lambda a, b: a >= b,
}
_FIELDS = {
    "string_equals": "StringEquals",
    "string_matches": "StringMatches",
    "numeric_equals": "NumericEquals",
    "numeric_less_than": "NumericLessThan",
    "numeric_less_than_equals": "NumericLessThanEquals",
    "numeric_greater_than": "NumericGreaterThan",
    "numeric_greater_than_equals": "NumericGreaterThanEquals",
    "boolean_equals": "BooleanEquals",
    "is_present": "IsPresent",
    "is_null": "IsNull",
    "string_equals_path": "StringEqualsPath",
    "numeric_equals_path": "NumericEqualsPath",
    "numeric_less_than_path": "NumericLessThanPath",
    "numeric_less_than_equals_path": "NumericLessThanEqualsPath",
    "numeric_greater_than_path": "NumericGreaterThanPath",
    "numeric_greater_than_equals_path": "NumericGreaterThanEqualsPath",
    "boolean_equals_path": "BooleanEqualsPath",
}
_COMBINATORS = ("And", "Or", "Not")


def _number_only(value: Any) -> Any:
    """A finite JSON number; `true` is not one (pydantic would take it as 1)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"must be a number (got {value!r:.40})")
    return value


Path = Annotated[str, Field(pattern=PATH, max_length=512)]
Number = Annotated[Any, BeforeValidator(_number_only)]


class Condition(BaseModel):
    """One Choice rule: a `Variable` with exactly one comparison, or `And` / `Or` / `Not`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    variable: Annotated[Path | None, Field(alias="Variable")] = None
    string_equals: Annotated[str | None, Field(alias="StringEquals", max_length=1024)] = None
    string_matches: Annotated[
        str | None, Field(alias="StringMatches", max_length=wildcard.MAX_PATTERN)
    ] = None
    numeric_equals: Annotated[Number | None, Field(alias="NumericEquals")] = None
    numeric_less_than: Annotated[Number | None, Field(alias="NumericLessThan")] = None
    numeric_less_than_equals: Annotated[Number | None, Field(alias="NumericLessThanEquals")] = None
    numeric_greater_than: Annotated[Number | None, Field(alias="NumericGreaterThan")] = None
    numeric_greater_than_equals: Annotated[
        Number | None, Field(alias="NumericGreaterThanEquals")
    ] = None
    boolean_equals: Annotated[bool | None, Field(alias="BooleanEquals", strict=True)] = None
    is_present: Annotated[bool | None, Field(alias="IsPresent", strict=True)] = None
    is_null: Annotated[bool | None, Field(alias="IsNull", strict=True)] = None
    string_equals_path: Annotated[Path | None, Field(alias="StringEqualsPath")] = None
    numeric_equals_path: Annotated[Path | None, Field(alias="NumericEqualsPath")] = None
    numeric_less_than_path: Annotated[Path | None, Field(alias="NumericLessThanPath")] = None
    numeric_less_than_equals_path: Annotated[
        Path | None, Field(alias="NumericLessThanEqualsPath")
    ] = None
    numeric_greater_than_path: Annotated[Path | None, Field(alias="NumericGreaterThanPath")] = None
    numeric_greater_than_equals_path: Annotated[
        Path | None, Field(alias="NumericGreaterThanEqualsPath")
    ] = None
    boolean_equals_path: Annotated[Path | None, Field(alias="BooleanEqualsPath")] = None
    and_: Annotated[
        tuple[Condition, ...] | None, Field(alias="And", min_length=1, max_length=MAX_RULES)
    ] = None
    or_: Annotated[
        tuple[Condition, ...] | None, Field(alias="Or", min_length=1, max_length=MAX_RULES)
    ] = None
    not_: Annotated[Condition | None, Field(alias="Not")] = None

    @model_validator(mode="after")
    def _one_rule(self) -> Condition:
        comparisons = [alias for name, alias in _FIELDS.items() if getattr(self, name) is not None]
        combinators = [
            alias
            for alias, value in zip(_COMBINATORS, (self.and_, self.or_, self.not_), strict=True)
            if value is not None
        ]
        rules = comparisons + combinators
        if len(rules) != 1:
            which = ", ".join(rules) if rules else "none"
            raise ValueError(
                "a condition has exactly one comparison (StringEquals, NumericLessThan, ...) "
                f"or one of And, Or, Not (got {which})"
            )
        if comparisons and self.variable is None:
            raise ValueError(f"Variable: is required with {comparisons[0]}")
        if combinators and self.variable is not None:
            raise ValueError(f"Variable: not allowed with {combinators[0]}")
        if self.string_matches is not None:
            try:
                wildcard.check(self.string_matches)
            except wildcard.PatternError as exc:
                raise ValueError(f"StringMatches: {exc}") from None
        if _depth(self) > MAX_DEPTH:
            raise ValueError(f"And / Or / Not are nested more than {MAX_DEPTH} deep")
        if _count(self) > MAX_RULES:
            raise ValueError(f"more than {MAX_RULES} comparisons in one condition")
        return self

    def variables(self) -> list[str]:
        """Every path the condition reads (to check each names a dependency)."""
        own = [self.variable] if self.variable is not None else []
        own += [
            getattr(self, n)
            for n in _FIELDS
            if n.endswith("_path") and getattr(self, n) is not None
        ]
        for child in self.children():
            own += child.variables()
        return own

    def children(self) -> tuple[Condition, ...]:
        return (*(self.and_ or ()), *(self.or_ or ()), *((self.not_,) if self.not_ else ()))


def _depth(cond: Condition) -> int:
    return 1 + max((_depth(c) for c in cond.children()), default=0)


def _count(cond: Condition) -> int:
    kids = cond.children()
    return sum(_count(c) for c in kids) if kids else 1


def step_of(path: str) -> str | None:
    """The dependency a `$.steps.<step>.output...` path reads (None for `$.input...`)."""
    if path.startswith("$.steps."):
        return path.split(".", 3)[2]
    return None


# ------------------------------------------------------------------------------ evaluation


class _Missing:
    """An absent value (distinct from JSON null)."""


MISSING = _Missing()


@lru_cache(maxsize=1024)
def _parts(path: str) -> tuple[str | int, ...]:
    out: list[str | int] = []
    for segment in path[2:].split("."):
        name, *indexes = segment.split("[")
        out.append(name)
        out += [int(i.rstrip("]")) for i in indexes]
    return tuple(out)


def resolve(path: str, document: Any) -> Any:
    """The value at `path` in `document`, or MISSING."""
    node = document
    for part in _parts(path):
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return MISSING
            node = node[part]
        else:
            if not isinstance(node, Mapping) or part not in node:
                return MISSING
            node = node[part]
    return node


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def evaluate(cond: Condition, document: Any) -> bool:
    """Whether the condition holds on `document`. Pure; never raises on the data's shape."""
    if cond.and_ is not None:
        return all(evaluate(c, document) for c in cond.and_)
    if cond.or_ is not None:
        return any(evaluate(c, document) for c in cond.or_)
    if cond.not_ is not None:
        return not evaluate(cond.not_, document)
    assert cond.variable is not None  # checked by the model
    value = resolve(cond.variable, document)
    if cond.is_present is not None:
        return (value is not MISSING) == cond.is_present
    if value is MISSING:
        return False
    if cond.is_null is not None:
        return (value is None) == cond.is_null
    for name, alias in _FIELDS.items():
        operand = getattr(cond, name)
        if operand is None or name in ("is_present", "is_null"):
            continue
        if name.endswith("_path"):
            operand = resolve(operand, document)
            if operand is MISSING:
                return False
        return _compare(alias.removesuffix("Path"), value, operand)
    return False  # pragma: no cover - the model holds exactly one rule


def _compare(op: str, value: Any, operand: Any) -> bool:
    if op in NUMERIC:
        return _number(value) and _number(operand) and bool(NUMERIC[op](value, operand))
    if op == "BooleanEquals":
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    if op == "StringEquals":
        return isinstance(value, str) and isinstance(operand, str) and value == operand
    if op == "StringMatches":
        return isinstance(value, str) and wildcard.matches(operand, value)
    raise ValueError(op)  # pragma: no cover


def document(input_value: Any, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """What a condition reads: the workflow input and its dependencies' outputs (a skipped
    dependency is listed with no output, so `IsPresent: false` sees it was skipped)."""
    return {
        "input": input_value,
        "steps": {
            name: ({} if value is MISSING else {"output": value}) for name, value in outputs.items()
        },
    }
