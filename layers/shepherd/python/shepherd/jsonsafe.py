"""Strict JSON for every user payload: RFC 8259 values only, with bounded depth.

Python's `json` accepts `NaN` and `Infinity`, turns `1e400` into infinity, decodes a lone
surrogate (`"\\ud800"`) into a string no UTF-8 encoder accepts, raises `RecursionError` on
deep nesting and `ValueError` on integers over 4,300 digits. Each of those once reached a
handler as a 500 or broke a later read. Everything that enters the engine from outside (API
bodies, callback payloads, agent outputs, progress details) goes through `parse`, `check` or
`dumps` here, which raise `JsonRejected` (a `ValueError`) with a message naming the limit.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from shepherd.limits import MAX_JSON_DEPTH

# The largest finite IEEE 754 double: RFC 8259 section 6 advises numbers within its range.
MAX_NUMBER = 1.7976931348623157e308
_MAX_INT_DIGITS = 310  # no integer of more digits is within MAX_NUMBER
_MAX_INT = int(MAX_NUMBER)  # an int beyond it is out of range
# A lone surrogate can only come from an escape in the text (UTF-8 cannot encode one); a text
# without any surrogate escape parses into valid Unicode only.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_CONTAINERS = (dict, list, tuple)


class JsonRejected(ValueError):
    """A payload is not acceptable JSON. `code` is stable, `message` names what and why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _reject_constant(name: str) -> Any:
    raise JsonRejected(
        "NonFiniteNumber", f"{name} is not a JSON number (RFC 8259 has no NaN or Infinity)"
    )


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise JsonRejected("NumberOutOfRange", "a number is out of range (beyond ±1.8e308)")
    value = int(text)
    if abs(value) > MAX_NUMBER:
        raise JsonRejected("NumberOutOfRange", "a number is out of range (beyond ±1.8e308)")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected("NumberOutOfRange", f"{text[:40]} is out of range (beyond ±1.8e308)")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all distinct: RFC 8259 leaves duplicates to the parser, which
    keeps the last (a second `"type"` would silently win over the one a reviewer read)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonRejected("DuplicateKey", f"an object has the key {key[:64]!r} twice")
            seen.add(key)
    return obj


def parse(text: str | bytes, *, what: str = "body", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse one JSON text strictly; raise JsonRejected naming `what`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonRejected("InvalidJson", f"{what} is not valid UTF-8") from None
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
            object_pairs_hook=_unique_keys,
        )
    except JsonRejected as exc:
        raise JsonRejected(exc.code, f"{what}: {exc.message}") from None
    except RecursionError:
        raise _too_deep(what, max_depth) from None
    except ValueError as exc:
        raise JsonRejected("InvalidJson", f"{what} is not valid JSON: {exc}") from None
    # The hooks refused bad numbers and keys are strings: what is left is the depth, and the
    # strings only if the text has surrogate escapes (a 100 MiB upload is checked in ~1 s).
    if _SURROGATE_ESCAPE.search(text):
        check(value, what=what, max_depth=max_depth)
    else:
        _check_depth(value, what, max_depth)
    return value


def _check_depth(value: Any, what: str, max_depth: int) -> None:
    """Level by level, containers only."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise _too_deep(what, max_depth)
        below: list[Any] = []
        for node in level:
            children = node.values() if isinstance(node, dict) else node
            below += [c for c in children if isinstance(c, _CONTAINERS)]
        level = below


def _too_deep(what: str, max_depth: int) -> JsonRejected:
    return JsonRejected(
        "JsonTooDeep", f"{what} is nested more than {max_depth} levels deep (the limit)"
    )


def check(value: Any, *, what: str, max_depth: int = MAX_JSON_DEPTH) -> None:  # noqa: C901, PLR0912 - one loop, inlined for speed
    """Raise JsonRejected unless `value` is a JSON value within the limits.

    Iterative, so a value nested far too deep is rejected without recursing. Only containers
    go on the stack and the common scalars are checked inline by exact type (an ASCII string
    needs no surrogate check: `str.isascii` reads a flag): a 100 MiB output of small records
    is millions of values, and this walk runs on every payload an agent returns (a helper
    call per container made it 40% slower).
    """
    if not isinstance(value, _CONTAINERS):
        _check_scalar(value, what)
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise _too_deep(what, max_depth)
        if isinstance(node, dict):
            for key in node:
                if type(key) is not str or not key.isascii():
                    _check_key(key, what)
            node = node.values()
        for child in node:
            kind = type(child)
            if kind is str:
                if not child.isascii():
                    _check_string(child, what)
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is int:
                if child > _MAX_INT or child < -_MAX_INT:
                    _check_scalar(child, what)
            elif kind is float:
                if not math.isfinite(child):
                    _check_scalar(child, what)
            elif child is None or kind is bool:
                continue
            elif isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))
            else:
                _check_scalar(child, what)


def _check_key(key: Any, what: str) -> None:
    if not isinstance(key, str):
        raise JsonRejected("InvalidJson", f"{what}: object keys must be strings")
    _check_string(key, what)


def _check_scalar(node: Any, what: str) -> None:
    if isinstance(node, str):
        _check_string(node, what)
    elif isinstance(node, bool) or node is None:
        return
    elif isinstance(node, int):
        if abs(node) > MAX_NUMBER:
            raise JsonRejected("NumberOutOfRange", f"{what}: a number is out of range")
    elif isinstance(node, float):
        if not math.isfinite(node):
            raise JsonRejected(
                "NonFiniteNumber", f"{what}: {node} is not a JSON number (no NaN or Infinity)"
            )
    else:
        raise JsonRejected("InvalidJson", f"{what}: a {type(node).__name__} is not a JSON value")


def _check_string(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonRejected(
            "InvalidUnicode", f"{what}: a string holds a lone surrogate (not valid Unicode)"
        ) from None


def dumps(value: Any, *, what: str = "value", max_depth: int = MAX_JSON_DEPTH) -> str:
    """Canonical JSON (sorted keys, no spaces, UTF-8 text) of a checked value."""
    check(value, what=what, max_depth=max_depth)
    return canonical(value)


def canonical(value: Any) -> str:
    """The canonical JSON of `dumps` without its walk: for a value already checked (`parse`
    returned it), or one whose receiver checks it (a client measuring what it sends)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def size(text: str) -> int:
    """UTF-8 bytes of a JSON text (what caps are measured in)."""
    return len(text.encode("utf-8"))
