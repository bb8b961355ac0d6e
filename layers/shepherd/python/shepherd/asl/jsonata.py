"""JSONata in Step Functions (the developer guide's "Transforming data with JSONata"): a
string `{% expression %}` is evaluated with `$states` (input, result, errorOutput, context)
and the workflow variables bound, plus the functions Step Functions adds: `$partition`,
`$range`, `$hash`, `$random`, `$uuid`, `$parse`, and without `$eval`, which it leaves out.
The evaluator is the `jsonata-python` package; a failed evaluation, or an expression that
yields nothing where a value is needed, is States.QueryEvaluationError.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import random as _random
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from . import intrinsics
from .errors import QUERY_EVALUATION_ERROR, StatesError
from .values import normalize

OPEN, CLOSE = "{%", "%}"


@functools.cache
def _library() -> tuple[Any, Any]:
    """The evaluator and its null marker, imported on first use: a state machine without
    JSONata (and the Lambda layer, until it ships the package) never needs it. The package
    raises the interpreter's recursion limit to 10,000 when it is imported: that global is put
    back at once, and raised only while an expression is evaluated (`_deep`), so nothing else
    in the process runs with it."""
    limit = sys.getrecursionlimit()
    try:
        from jsonata import Jsonata  # type: ignore[import-untyped]  # noqa: PLC0415
        from jsonata.utils import Utils  # type: ignore[import-untyped]  # noqa: PLC0415
    finally:
        sys.setrecursionlimit(limit)
    return Jsonata, Utils.NULL_VALUE


JSONATA_RECURSION = 10_000  # what the package asks for (as JavaScript's stack allows)


@contextlib.contextmanager
def _deep() -> Iterator[None]:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, JSONATA_RECURSION))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def is_expression(value: object) -> bool:
    return (
        isinstance(value, str)
        and value.startswith(OPEN)
        and value.endswith(CLOSE)
        and len(value) >= 4
    )


@functools.lru_cache(maxsize=512)
def _compiled(expression: str) -> Any:
    try:
        compiled = _library()[0](expression)
    except Exception as exc:
        raise StatesError(QUERY_EVALUATION_ERROR, f"'{expression}': {exc}") from None
    compiled.set_output_convert_nulls(False)
    return compiled


def check(expression: str) -> None:
    """Raise StatesError when an expression does not parse (for the document's validation)."""
    _compiled(expression[len(OPEN) : -len(CLOSE)].strip())


def _to_jsonata(value: Any) -> Any:
    if value is None:
        return _library()[1]
    if isinstance(value, dict):
        return {k: _to_jsonata(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_jsonata(v) for v in value]
    return value


_UNDEFINED = object()


def _from_jsonata(value: Any) -> Any:
    if value is _library()[1]:
        return None
    if isinstance(value, dict):
        return {k: _from_jsonata(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_from_jsonata(v) for v in value if v is not None]
    if callable(value):
        return _UNDEFINED
    return normalize(value)


def _millis(states: Mapping[str, Any]) -> int:
    """The evaluation's instant: the state's entered time from the context object (the
    interpreter reads no clock, so `$now()` and `$millis()` are the simulated time)."""
    context = states.get("context")
    entered = None
    if isinstance(context, Mapping) and isinstance(context.get("State"), Mapping):
        entered = context["State"].get("EnteredTime")
    if not isinstance(entered, str) or not entered:
        return 0
    stamp = _dt.datetime.fromisoformat(entered.replace("Z", "+00:00"))
    return int(stamp.timestamp() * 1000)


def _functions(rng: _random.Random, millis: int = 0) -> dict[str, Any]:
    def partition(array: Any, size: Any) -> Any:
        return intrinsics.f_array_partition(list(array), size)

    def range_(start: Any, end: Any, step: Any) -> Any:
        return intrinsics.f_array_range(start, end, step)

    def hash_(value: Any, algorithm: Any) -> Any:
        return intrinsics.f_hash(value, algorithm)

    def random(seed: Any = None) -> float:
        return (_random.Random(seed) if seed is not None else rng).random()

    def uuid() -> str:
        return intrinsics.f_uuid(rng)

    def parse(text: Any) -> Any:
        try:
            return _to_jsonata(json.loads(text))
        except (TypeError, ValueError):
            raise StatesError(QUERY_EVALUATION_ERROR, "$parse: not valid JSON text") from None

    def now(picture: Any = None, timezone: Any = None) -> Any:
        from jsonata.functions import Functions  # type: ignore[import-untyped]  # noqa: PLC0415

        return Functions.datetime_from_millis(millis, picture, timezone)

    def millis_() -> int:
        return millis

    def no_eval(*_: Any) -> Any:
        """The guide: every JSONata 2.0.6 function but `$eval`, "not available: use $parse
        instead"; a call is what calling a name that is no function is (T1006)."""
        from jsonata.jexception import JException  # type: ignore[import-untyped]  # noqa: PLC0415

        raise JException("T1006", -1)

    return {
        "now": now,
        "millis": millis_,
        "partition": partition,
        "range": range_,
        "hash": hash_,
        "random": random,
        "uuid": uuid,
        "parse": parse,
        "eval": no_eval,
    }


# jsonata-js's words for the errors an expression most often raises at run time, which Step
# Functions puts in its cause as "<code>: <message>" ({{token}} is quoted, as jsonata-js's
# JSON.stringify does). The evaluator here (a port of jsonata-java) words some of them
# differently ("Argument 1 of Object abs"), so they are rebuilt from the error's parts.
_ARRAY_OF = {
    "a": "arrays",
    "b": "booleans",
    "f": "functions",
    "n": "numbers",
    "o": "objects",
    "s": "strings",
}


def _message(exc: Exception) -> tuple[bool, str]:
    """(whether it has a JSONata error code, the text after the cause's sentence)."""
    if isinstance(exc, StatesError):  # a Step Functions function's own error: no code
        return False, exc.cause
    code = getattr(exc, "error", None)
    if not isinstance(code, str):
        if isinstance(exc, ValueError) and "convert string to float" in str(exc):
            value = str(exc).split(": ", 1)[-1].strip("'")
            return True, f"D3030: Unable to cast value to a number: {json.dumps(value)}"
        return False, str(exc)
    current = getattr(exc, "current", None)
    expected = getattr(exc, "expected", None)
    extra = getattr(exc, "extra", None)
    q = json.dumps
    catalog: dict[str, Callable[[], str]] = {
        "T0410": lambda: (
            f"Argument {current} of function {q(expected)} does not match function signature"
        ),
        "T0411": lambda: (
            "Context value is not a compatible type with argument "
            f"{current} of function {q(expected)}"
        ),
        "T0412": lambda: (
            f"Argument {current} of function {q(expected)} must be an array of "
            f"{q(_ARRAY_OF.get(str(extra), str(extra)))}"
        ),
        "T1006": lambda: "Attempted to invoke a non-function",
        "T2001": lambda: f"The left side of the {q(current)} operator must evaluate to a number",
        "T2002": lambda: f"The right side of the {q(current)} operator must evaluate to a number",
        "T2009": lambda: (
            f"The values {q(current)} and {q(expected)} either side of operator "
            f"{q(extra)} must be of the same data type"
        ),
        "T2010": lambda: (
            f"The expressions either side of operator {q(current)} must evaluate "
            "to numeric or string values"
        ),
        "D1002": lambda: f"Cannot negate a non-numeric value: {q(expected)}",
        "D3137": lambda: str(current),
        "D3141": lambda: str(current),
    }
    words = catalog.get(code)
    try:
        text = words() if words else str(exc)
    except (TypeError, ValueError):
        text = str(exc)
    return True, f"{code}: {text}"


def evaluate(
    text: str,
    states: Mapping[str, Any],
    variables: Mapping[str, Any],
    rng: _random.Random,
    field: str | None = None,
) -> Any:
    """The value of one `{% ... %}` string; raises when it yields nothing, naming the field it
    was written in as Step Functions does (`Output`, `Arguments/Input/key`, `Items[0]`)."""
    expression = text[len(OPEN) : -len(CLOSE)].strip()
    compiled = _compiled(expression)
    bindings: dict[str, Any] = {k: _to_jsonata(v) for k, v in variables.items()}
    bindings["states"] = _to_jsonata(dict(states))
    where = f" specified for the field '{field}'" if field else ""
    try:
        for name, function in _functions(rng, _millis(states)).items():
            compiled.register_lambda(name, function)
        with _deep():
            raw = compiled.evaluate(bindings["states"].get("input"), bindings)
    except Exception as exc:
        coded, message = _message(exc)
        raise StatesError(
            QUERY_EVALUATION_ERROR,
            f"The JSONata expression '{expression}'{where} threw an error during evaluation"
            + (f". {message}" if coded else f": {message}"),
        ) from None
    if raw is None:
        raise StatesError(
            QUERY_EVALUATION_ERROR,
            f"The JSONata expression '{expression}'{where} returned nothing (undefined).",
        )
    value = _from_jsonata(raw)
    if value is _UNDEFINED:
        raise StatesError(
            QUERY_EVALUATION_ERROR,
            f"The JSONata expression '{expression}' returned an unsupported result type.",
        )
    return value


def render(
    template: Any,
    states: Mapping[str, Any],
    variables: Mapping[str, Any],
    rng: _random.Random,
    field: str | None = None,
) -> Any:
    """A JSONata field (Arguments, Output, Assign values, Items...): every `{% %}` string in
    it, at any depth, replaced by its value; everything else as written. `field` names it for
    an error's cause; a key inside adds `/key`, an array index `[i]`."""
    if is_expression(template):
        return evaluate(template, states, variables, rng, field)
    if isinstance(template, dict):
        return {
            k: render(v, states, variables, rng, f"{field}/{k}" if field else None)
            for k, v in template.items()
        }
    if isinstance(template, list):
        return [
            render(v, states, variables, rng, f"{field}[{i}]" if field else None)
            for i, v in enumerate(template)
        ]
    return template
