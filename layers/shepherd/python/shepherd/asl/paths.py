"""JSONPath as Amazon States Language uses it: Paths (InputPath, OutputPath, ItemsPath, `.$`
values), Reference Paths (ResultPath: definite, no operators), payload templates and the
context object `$$`, and variable references `$name` (workflow variables).

A Path may use the JSONPath operators (`*`, `..`, slices, unions, filters `[?(...)]`); a path
that can select several values (an indefinite path) yields an array, a definite one its value.
A definite path that selects nothing raises `PathNotFound` for the caller to name the field.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import REFERENCE_PATH_CONFLICT, RESULT_PATH_MATCH_FAILURE, RUNTIME, StatesError
from .values import dumps

_MISSING: Any = object()


class PathNotFound(Exception):
    """A definite path that selects nothing."""


class PathSyntaxError(ValueError):
    """A path that is not valid JSONPath."""


@dataclass(frozen=True)
class _Step:
    kind: str  # "key", "index", "wild", "slice", "union", "filter", "descend", "function"
    arg: Any = None


_NAME = re.compile(r"[^.\[\]\s()'\"=<>!&|,@]+")
_VARIABLE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)")


def _parse_bracket(text: str, i: int) -> tuple[_Step, int]:
    end = _bracket_end(text, i)
    inner = text[i + 1 : end].strip()
    if inner.startswith("?"):
        return _Step("filter", _parse_filter(inner[1:].strip())), end + 1
    if inner == "*":
        return _Step("wild"), end + 1
    parts = [p.strip() for p in _split_top(inner, ",")]
    if len(parts) > 1:
        return _Step("union", [_literal_key(p) for p in parts]), end + 1
    if ":" in inner and not inner.startswith(("'", '"')):
        bounds = [int(b) if b.strip() else None for b in inner.split(":")]
        return _Step("slice", [*bounds, None, None][:3]), end + 1
    return _Step(*_key_step(_literal_key(inner))), end + 1


def _key_step(key: str | int) -> tuple[str, str | int]:
    return ("index", key) if isinstance(key, int) else ("key", key)


def _literal_key(text: str) -> str | int:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        raise PathSyntaxError(f"'{text}' is not a key or an index") from None


def _bracket_end(text: str, i: int) -> int:
    depth, quote = 0, ""
    for j in range(i, len(text)):
        c = text[j]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j
    raise PathSyntaxError("unclosed '['")


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, quote, start = [], 0, "", 0
    for j, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    parts.append(text[start:])
    return parts


def parse(path: str) -> tuple[str, list[_Step]]:
    """A path's root (`$`, `$$` or a variable name) and its steps."""
    if path.startswith("$$"):
        root, i = "$$", 2
    elif (m := _VARIABLE.match(path)) is not None:
        root, i = m.group(1), m.end()
    elif path.startswith("$"):
        root, i = "$", 1
    else:
        raise PathSyntaxError(f"'{path}' does not start with '$'")
    steps: list[_Step] = []
    while i < len(path):
        c = path[i]
        if path.startswith("..", i):
            steps.append(_Step("descend"))
            i += 2
            if i < len(path) and path[i] == "[":
                continue
            i = _parse_name(path, i, steps)
        elif c == ".":
            i = _parse_name(path, i + 1, steps)
        elif c == "[":
            step, i = _parse_bracket(path, i)
            steps.append(step)
        else:
            raise PathSyntaxError(f"'{path}': unexpected '{c}' at {i}")
    return root, steps


def _parse_name(path: str, i: int, steps: list[_Step]) -> int:
    if path.startswith("*", i):
        steps.append(_Step("wild"))
        return i + 1
    m = _NAME.match(path, i)
    if m is None:
        raise PathSyntaxError(f"'{path}': a name is missing at {i}")
    if path.startswith("()", m.end()) and m.end() + 2 == len(path):
        # A Jayway function (`$.items.length()`, `.sum()`): Step Functions accepts the path
        # and evaluates no function, so it selects nothing when the state runs (a recorded
        # cause: "The JSONPath '$.Jobs.sum()' ... could not be found in the input").
        steps.append(_Step("function", m.group(0)))
        return m.end() + 2
    steps.append(_Step("key", m.group(0)))
    return m.end()


def is_definite(steps: list[_Step]) -> bool:
    return all(s.kind in ("key", "index", "function") for s in steps)


def is_path(value: object) -> bool:
    """Whether a string is a path: a JSONPath, the context object or a variable."""
    if not isinstance(value, str):
        return False
    try:
        parse(value)
    except PathSyntaxError:
        return False
    return True


# --- evaluation ---------------------------------------------------------------------------


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _descendants(value: Any) -> list[Any]:
    out = [value]
    for child in _children(value):
        out.extend(_descendants(child))
    return out


def _apply(step: _Step, values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_apply_one(step, v))
    return out


def _apply_one(step: _Step, v: Any) -> list[Any]:
    kind, arg = step.kind, step.arg
    if kind == "key":
        return [v[arg]] if isinstance(v, dict) and arg in v else []
    if kind == "index":
        if isinstance(v, list) and -len(v) <= arg < len(v):
            return [v[arg]]
        return []
    if kind == "wild":
        return _children(v)
    if kind == "descend":
        return _descendants(v)
    if kind == "slice":
        if not isinstance(v, list):
            return []
        start, stop, stride = arg
        return list(v[slice(start, stop, stride)])
    if kind == "union":
        out: list[Any] = []
        for key in arg:
            out.extend(_apply_one(_Step(*_key_step(key)), v))
        return out
    if kind == "filter":
        return [item for item in _children(v) if arg(item)]
    if kind == "function":
        return []
    raise AssertionError(kind)


def select(
    path: str,
    data: Any,
    *,
    context: Any = None,
    variables: Mapping[str, Any] | None = None,
    index_past_end: Any = _MISSING,
) -> Any:
    """The value `path` selects; an indefinite path gives the array of its matches.

    `index_past_end`: what a definite path whose last step indexes past the end of an array
    that is there gives (Jayway's null, where Step Functions reads a path that way); by default
    it selects nothing (PathNotFound)."""
    root, steps = parse(path)
    if root == "$":
        base = data
    elif root == "$$":
        base = context
    else:
        if variables is None or root not in variables:
            raise PathNotFound(path)
        base = variables[root]
    values = [base]
    parents = values
    for step in steps:
        parents = values
        values = _apply(step, values)
    if is_definite(steps):
        if not values:
            if (
                index_past_end is not _MISSING
                and steps
                and steps[-1].kind == "index"
                and parents
                and isinstance(parents[0], list)
            ):
                return index_past_end
            raise PathNotFound(path)
        return values[0]
    return values


# --- filters: [?(@.a < 1 && @.b == 'x')] ---------------------------------------------------

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<=": lambda a, b: _ordered(a, b) and a <= b,
    ">=": lambda a, b: _ordered(a, b) and a >= b,
    "<": lambda a, b: _ordered(a, b) and a < b,
    ">": lambda a, b: _ordered(a, b) and a > b,
}


def _ordered(a: Any, b: Any) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return (isinstance(a, numbers) and isinstance(b, numbers)) or (
        isinstance(a, str) and isinstance(b, str)
    )


def _parse_filter(text: str) -> Callable[[Any], bool]:
    if not (text.startswith("(") and text.endswith(")")):
        raise PathSyntaxError(f"a filter '{text}' must be in parentheses")
    return _parse_or(text[1:-1].strip())


def _parse_or(text: str) -> Callable[[Any], bool]:
    parts = [p.strip() for p in re.split(r"\|\|", text)]
    if len(parts) > 1:
        terms = [_parse_and(p) for p in parts]
        return lambda item: any(t(item) for t in terms)
    return _parse_and(text)


def _parse_and(text: str) -> Callable[[Any], bool]:
    parts = [p.strip() for p in text.split("&&")]
    if len(parts) > 1:
        terms = [_parse_comparison(p) for p in parts]
        return lambda item: all(t(item) for t in terms)
    return _parse_comparison(text)


def _parse_comparison(text: str) -> Callable[[Any], bool]:
    m = re.fullmatch(r"(@[^=<>!]*?)\s*(==|!=|<=|>=|<|>)\s*(.+)", text)
    if m is None:
        if not text.startswith("@"):
            raise PathSyntaxError(f"a filter term '{text}' must start with '@'")
        sub = "$" + text[1:]
        parse(sub)
        return lambda item: _exists(sub, item)
    sub, op, literal = "$" + m.group(1).strip()[1:], m.group(2), m.group(3).strip()
    parse(sub)
    expected = _filter_literal(literal)
    compare = _OPS[op]

    def test(item: Any) -> bool:
        try:
            value = select(sub, item)
        except PathNotFound:
            return False
        return compare(value, expected)

    return test


def _exists(sub: str, item: Any) -> bool:
    try:
        select(sub, item)
    except PathNotFound:
        return False
    return True


def _filter_literal(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    literals = {"true": True, "false": False, "null": None}
    if text in literals:
        return literals[text]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise PathSyntaxError(f"'{text}' is not a literal") from None


# --- ResultPath ----------------------------------------------------------------------------


def check_reference_path(path: str) -> None:
    """A Reference Path: definite, rooted at `$` (ResultPath)."""
    root, steps = parse(path)
    if root != "$" or not is_definite(steps) or any(s.kind == "function" for s in steps):
        raise PathSyntaxError(f"'{path}' is not a reference path (definite, from '$')")


def put(path: str | None, data: Any, result: Any) -> Any:
    """ResultPath: the state's output from its (raw) input and its result. `None` (JSON null)
    discards the result; `$` replaces the input; `$.a.b` writes into a copy of the input,
    creating the objects it lacks. A step through a value that is not an object raises
    States.ResultPathMatchFailure."""
    if path is None:
        return data
    _, steps = parse(path)
    if not steps:
        return result
    out = copy.deepcopy(data)
    target: Any = out
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        if step.kind == "index":
            ok = isinstance(target, list) and -len(target) <= step.arg < len(target)
            if not ok:
                raise _match_failure(path, data)
            if last:
                target[step.arg] = result
            else:
                target = target[step.arg]
            continue
        if not isinstance(target, dict):
            raise _match_failure(path, data)
        if last:
            target[step.arg] = result
        else:
            target = target.setdefault(step.arg, {})
    return out


def _match_failure(path: str, data: Any) -> StatesError:
    return StatesError(
        RESULT_PATH_MATCH_FAILURE,
        f"Unable to apply ReferencePath {path} to input {dumps(data)}",
    )


def _normalized(path: str) -> str:
    """A path as the Jayway JSONPath library behind Step Functions spells it in its errors:
    `$.a.b[0]` is `$['a']['b'][0]`."""
    root, steps = parse(path)
    out = "$" if root == "$" else root if root == "$$" else f"${root}"
    for step in steps:
        if step.kind == "key":
            out += f"['{step.arg}']"
        elif step.kind == "index":
            out += f"[{step.arg}]"
        elif step.kind == "wild":
            out += "[*]"
        elif step.kind == "descend":
            out += ".."
        else:
            out += "[?]"
    return out


def invalid_path(path: str) -> StatesError:
    """The error InputPath or OutputPath raises when its path selects nothing, in Step
    Functions' words (its recorded cause for an OutputPath `$.Payload` that was not there)."""
    return StatesError(RUNTIME, f"Invalid path '{path}' : No results for path: {_normalized(path)}")


def items_not_found(path: str, data: Any) -> StatesError:
    """A Map's ItemsPath that selects nothing: Step Functions fails the state with
    States.ReferencePathConflict, naming the first step of the path it could not take
    (`Unable to apply step "objects" to input {...}`, as AWS runs quoted in public
    repositories show it), without the state's prefix."""
    step = path
    with contextlib.suppress(PathSyntaxError):
        _, steps = parse(path)
        node = data
        for s in steps:
            found = (s.kind == "key" and isinstance(node, dict) and s.arg in node) or (
                s.kind == "index"
                and isinstance(node, list)
                and isinstance(s.arg, int)
                and -len(node) <= s.arg < len(node)
            )
            if not found:
                step = str(s.arg)
                break
            node = node[s.arg]
    return StatesError(
        REFERENCE_PATH_CONFLICT,
        f'Unable to apply step "{step}" to input {dumps(data)}',
        passed_on=True,
    )


def runtime_not_found(path: str, field: str, data: Any) -> StatesError:
    """The error a JSONPath field raises when its path selects nothing."""
    return StatesError(
        RUNTIME,
        f"The JSONPath '{path}' specified for the field '{field}' could not be found in the "
        f"input '{dumps(data)}'",
    )
