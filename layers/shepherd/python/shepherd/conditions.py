"""A tiny algebra of conditions and updates.

Every state change in Shepherd is one conditional write. Transitions are built from these
named parts, so the DynamoDB adapter can compile them to expressions and the in-memory store
can evaluate them; the contract tests prove both agree.

Comparison semantics follow DynamoDB: a comparison with a missing attribute is false.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Item = dict[str, Any]


@dataclass(frozen=True)
class Eq:
    name: str
    value: Any


@dataclass(frozen=True)
class In:
    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Lt:
    """`name < value`."""

    name: str
    value: Any


@dataclass(frozen=True)
class Ge:
    """`name >= value` (a rate limiter's bucket is busy: its `tat` is not in the past)."""

    name: str
    value: Any


@dataclass(frozen=True)
class Exists:
    name: str


@dataclass(frozen=True)
class Missing:
    name: str


@dataclass(frozen=True)
class And:
    parts: tuple[Cond, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Cond, ...]


Cond = Eq | In | Lt | Ge | Exists | Missing | And | Or


def all_of(*parts: Cond) -> Cond:
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def any_of(*parts: Cond) -> Cond:
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def evaluate(cond: Cond, item: Mapping[str, Any] | None) -> bool:
    """Evaluate a condition against an item (None: the item does not exist)."""
    item = item or {}
    match cond:
        case Eq(name, value):
            return name in item and item[name] == value
        case In(name, values):
            return name in item and item[name] in values
        case Lt(name, value):
            return name in item and item[name] is not None and item[name] < value
        case Ge(name, value):
            return name in item and item[name] is not None and item[name] >= value
        case Exists(name):
            return name in item
        case Missing(name):
            return name not in item
        case And(parts):
            return all(evaluate(p, item) for p in parts)
        case Or(parts):
            return any(evaluate(p, item) for p in parts)
    raise TypeError(f"not a condition: {cond!r}")  # pragma: no cover - exhaustive match


@dataclass(frozen=True)
class Update:
    """SET, SET-if-missing, REMOVE, list append and numeric ADD on one item."""

    set: Mapping[str, Any] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    append: Mapping[str, list[Any]] = field(default_factory=dict)
    add: Mapping[str, int] = field(default_factory=dict)
    set_if_missing: Mapping[str, Any] = field(default_factory=dict)  # if_not_exists

    def apply(self, item: Mapping[str, Any]) -> Item:
        """The item after this update, as the store would write it."""
        new = dict(item)
        for name, value in self.set_if_missing.items():
            new.setdefault(name, value)
        for name, value in self.set.items():
            if value is None:
                new.pop(name, None)
            else:
                new[name] = value
        for name in self.remove:
            new.pop(name, None)
        for name, values in self.append.items():
            new[name] = [*new.get(name, []), *values]
        for name, delta in self.add.items():
            new[name] = new.get(name, 0) + delta
        return new

    def names(self) -> frozenset[str]:
        return frozenset({*self.set, *self.remove, *self.append, *self.add, *self.set_if_missing})
