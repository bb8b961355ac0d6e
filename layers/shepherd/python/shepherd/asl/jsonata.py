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
import hashlib
import inspect
import json
import math
import random as _random
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any, TypeVar

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
        from jsonata.jexception import JException  # type: ignore[import-untyped]  # noqa: PLC0415
        from jsonata.utils import Utils  # type: ignore[import-untyped]  # noqa: PLC0415
    finally:
        sys.setrecursionlimit(limit)

    class JavaScriptArithmetic(Jsonata):  # type: ignore[misc]
        """The package's evaluator with JavaScript's arithmetic, as jsonata-js and Step
        Functions compute: a division by zero or an overflow is a non-finite number (`1/0` is
        Infinity, `0/0` NaN), not a Python exception; an operand that is already infinite is
        still D1001, which the package's number test raises."""

        def evaluate_numeric_expression(self, lhs: Any, rhs: Any, op: Any) -> Any:
            if lhs is not None and not Utils.is_numeric(lhs) and not _is_nan(lhs):
                raise JException("T2001", -1, op, lhs)
            if rhs is not None and not Utils.is_numeric(rhs) and not _is_nan(rhs):
                raise JException("T2002", -1, op, rhs)
            if lhs is None or rhs is None:
                return None
            result = _javascript_arithmetic(float(lhs), float(rhs), op)
            return Utils.convert_number(result) if math.isfinite(result) else result

        def _eval(self, expr: Any, input: Any, environment: Any) -> Any:
            _BOUNDS.steps += 1
            if _BOUNDS.steps > MAX_STEPS:
                raise StatesError(QUERY_EVALUATION_ERROR, EVALUATION_TIMEOUT)
            return super()._eval(expr, input, environment)

        def apply_procedure(self, proc: Any, args: Any) -> Any:
            """A lambda's body, within the call depth AWS allows (a tail call does not nest:
            the package unwinds it first, as jsonata-js does)."""
            _BOUNDS.depth += 1
            try:
                if _BOUNDS.depth > MAX_CALL_DEPTH:
                    raise StatesError(QUERY_EVALUATION_ERROR, STACK_OVERFLOW)
                return super().apply_procedure(proc, args)
            finally:
                _BOUNDS.depth -= 1

        def evaluate_range_expression(self, lhs: Any, rhs: Any) -> Any:
            """`[a..b]` within the memory AWS lets one value hold."""
            integers = all(isinstance(v, int) and not isinstance(v, bool) for v in (lhs, rhs))
            if integers and rhs - lhs + 1 > _MAX_SEQUENCE:
                raise StatesError(QUERY_EVALUATION_ERROR, MEMORY_LIMIT)
            return super().evaluate_range_expression(lhs, rhs)

    return JavaScriptArithmetic, Utils.NULL_VALUE


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _javascript_arithmetic(lhs: float, rhs: float, op: str) -> float:
    """`lhs op rhs` as IEEE 754 doubles in JavaScript: no exception, a non-finite result."""
    if op == "+":
        return lhs + rhs
    if op == "-":
        return lhs - rhs
    if op == "*":
        return lhs * rhs
    if op == "/":
        if rhs == 0:
            if lhs == 0 or math.isnan(lhs):
                return math.nan
            return math.copysign(math.inf, lhs) * math.copysign(1.0, rhs)
        return lhs / rhs
    # `%`: JavaScript's remainder keeps the dividend's sign (math.fmod); by zero it is NaN.
    return math.nan if rhs == 0 else math.fmod(lhs, rhs)


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


CONTEXT_ITEM, ROOT, ERROR_OUTPUT = "$", "$$", "$states.errorOutput"


@functools.lru_cache(maxsize=512)
def references(expression: str) -> tuple[str, ...]:
    """What a `{% %}` expression reads that AWS refuses when the definition is created: a name
    read from the top-level context (`phone`, which an expression with no context item cannot
    have), the context item `$`, `$$`, and `$states.errorOutput` (which only a catcher's Output
    and Assign have). Only a path's first step reads the top-level context; a lambda's body
    keeps its definer's (measured against AWS, as the floci emulator's JsonataTopLevelReferences
    records it)."""
    _library()
    from jsonata.parser import Parser  # type: ignore[import-untyped]  # noqa: PLC0415

    found: dict[str, None] = {}
    _collect(Parser().parse(expression[len(OPEN) : -len(CLOSE)].strip()), found)
    return tuple(found)


def _collect(node: Any, found: dict[str, None]) -> None:
    kind = getattr(node, "type", None)
    if kind == "path":
        steps = node.steps or []
        if len(steps) >= 2 and [(t.type, t.value) for t in steps[:2]] == [
            ("variable", "states"),
            ("name", "errorOutput"),
        ]:
            found[ERROR_OUTPUT] = None
    elif kind == "name":
        found[str(node.value)] = None
    elif kind == "variable" and node.value in ("", "$"):  # `$`, and `$$` (a variable named `$`)
        found[CONTEXT_ITEM if node.value == "" else ROOT] = None
    for child in _children(node, kind):
        _collect(child, found)


def _children(node: Any, kind: str | None) -> list[Any]:
    """The parts of a parse-tree node that are read in the top-level context."""
    if kind == "path":
        return (node.steps or [])[:1]
    if kind == "unary" and node.value == "[":
        return list(node.expressions or [])
    if kind == "unary" and node.value == "{":
        return [part for pair in node.lhs_object or [] for part in pair]
    parts: dict[str | None, list[Any]] = {
        "unary": [node.expression] if kind == "unary" else [],
        "binary": [getattr(node, "lhs", None), getattr(node, "rhs", None)],
        "apply": [getattr(node, "lhs", None), getattr(node, "rhs", None)],
        "function": [getattr(node, "procedure", None), *(getattr(node, "arguments", None) or [])],
        "partial": [getattr(node, "procedure", None), *(getattr(node, "arguments", None) or [])],
        "lambda": [getattr(node, "body", None)],
        "condition": [
            getattr(node, "condition", None),
            getattr(node, "then", None),
            getattr(node, "_else", None),
        ],
        "block": list(getattr(node, "expressions", None) or []),
        "bind": [getattr(node, "rhs", None)],
    }
    return [part for part in parts.get(kind, []) if part is not None]


def _to_jsonata(value: Any) -> Any:
    if value is None:
        return _library()[1]
    if isinstance(value, dict):
        return {k: _to_jsonata(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_jsonata(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -_LONG <= value < _LONG:
        # AWS reads an integer as a long while it fits and as a double past it (measured:
        # 9223372036854775808 comes out as 9.223372036854776E18).
        return float(value)
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
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no non-finite number: Step Functions writes the name JavaScript gives it.
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, float) and abs(value) >= _LONG:
        return value  # a double past a long stays one (9.223372036854776E18), as on AWS
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


class _FunctionError(Exception):
    """An error one of Step Functions' own JSONata functions raises: its JSONata code and
    message as AWS words them (`D3137: Invalid JSON`), which the cause carries."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _signature(function: str, argument: int) -> _FunctionError:
    return _FunctionError(
        "T0410", f'Argument {argument} of function "{function}" does not match function signature'
    )


def _toward_zero(value: Any, function: str, argument: int) -> int:
    """AWS cuts a fractional argument toward zero (-1.7 is -1); a non-number is T0410."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _signature(function, argument)
    return int(value)


def _java_next_double(seed: int) -> float:
    """`new java.util.Random(seed).nextDouble()`: AWS's `$random(seed)` draws from Java's
    generator, so `$random(42)` is 0.7275636800328681 there (and here)."""
    mask = (1 << 48) - 1
    state = (seed ^ 0x5DEECE66D) & mask

    def next_bits(bits: int) -> int:
        nonlocal state
        state = (state * 0x5DEECE66D + 0xB) & mask
        return state >> (48 - bits)

    return ((next_bits(26) << 27) + next_bits(27)) * 2.0**-53


_MISSING = object()  # an argument the call left out
# AWS bounds the memory one value of an expression holds (measured against AWS, as the floci
# emulator's JsonataEvaluatorTest records): [1..873782] evaluates and one element more does
# not; $range(1, 360145, 1) does and $range(1, 360146, 1) does not. Both fail with this cause.
_MAX_SEQUENCE = 873_782
_MAX_RANGE = 360_145
MEMORY_LIMIT = "Expression evaluation memory limit exceeded: Check for excessive memory usage"
# AWS fails a recursion that nests 33 calls of a lambda ($f(31) counting down to 0 evaluates,
# $f(32) does not) and stops an expression that runs too long (a tail-recursive loop without
# a base case), with these causes (measured, as the floci emulator's JsonataEvaluatorTest
# records). The interpreter reads no clock, so the time bound is a count of evaluation steps:
# a runaway expression fails the same way on every run, after about as many steps as the
# largest sequence AWS holds ([1..873782]) mapped through a small function takes.
MAX_CALL_DEPTH = 32
MAX_STEPS = 3_000_000
STACK_OVERFLOW = (
    "Stack overflow error: Check for non-terminating recursive function. "
    "Consider rewriting as tail-recursive"
)
EVALUATION_TIMEOUT = "Expression evaluation timeout: Check for infinite loop"
_BOUNDS = threading.local()


def _surplus(function: str, extra: tuple[Any, ...], first: int) -> None:
    if extra:
        raise _signature(function, first)


_F = TypeVar("_F", bound=Callable[..., Any])


def _arity(count: int) -> Callable[[_F], _F]:
    """Declare the arguments AWS's function takes, though it accepts more (to refuse them as
    AWS does, T0410): the evaluator passes a function given to `$map` as many arguments as its
    signature names, so `$map(texts, $parse)` parses each text."""

    def declare(function: _F) -> _F:
        parameters = [
            inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_ONLY, default=None)
            for i in range(count)
        ]
        function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        return function

    return declare


@_arity(2)
def _partition(array: Any = _MISSING, size: Any = _MISSING, *extra: Any) -> Any:
    _surplus("partition", extra, 3)
    if array is _MISSING or array is None:
        return None
    if not isinstance(array, list):
        raise _FunctionError(
            "T0412", 'Argument 1 of function "partition" must be an array of undefined'
        )
    if not array:
        return None
    if size is _MISSING:
        return [array]
    chunk = _toward_zero(size, "partition", 2)
    if chunk < 0:
        raise _FunctionError("D3137", "Second argument must be zero or greater")
    if chunk == 0:
        return None
    return [array[i : i + chunk] for i in range(0, len(array), chunk)]


@_arity(3)
def _range(start: Any = _MISSING, end: Any = _MISSING, step: Any = _MISSING, *extra: Any) -> Any:
    _surplus("range", extra, 4)
    first = _toward_zero(None if start is _MISSING else start, "range", 1)
    last = _toward_zero(None if end is _MISSING else end, "range", 2)
    if step is _MISSING or step is None:
        return None
    by = _toward_zero(step, "range", 3)
    if by == 0 or (by > 0 and first > last) or (by < 0 and first < last):
        return None
    if first == last:
        return first  # one element: the value itself, as a JSONata singleton
    count = (last - first) // by + 1
    if count > _MAX_RANGE:
        raise StatesError(QUERY_EVALUATION_ERROR, MEMORY_LIMIT)
    return [first + i * by for i in range(count)]


@_arity(2)
def _hash(value: Any = _MISSING, algorithm: Any = _MISSING, *extra: Any) -> Any:
    _surplus("hash", extra, 3)
    if not isinstance(value, str):
        raise _signature("hash", 1)
    if algorithm is _MISSING or algorithm is None:
        return None
    if not isinstance(algorithm, str):
        raise _signature("hash", 2)
    if algorithm not in intrinsics.HASHES:
        raise _FunctionError(
            "D3137",
            f"Hash algorithm '{algorithm}' must be one of SHA-1, SHA-384, SHA-256, SHA-512, MD5",
        )
    return hashlib.new(intrinsics.HASHES[algorithm], value.encode()).hexdigest()


@_arity(1)
def _parse(text: Any = _MISSING, *extra: Any) -> Any:
    _surplus("parse", extra, 2)
    if text is _MISSING or text is None:
        return None
    if not isinstance(text, str):
        raise _signature("parse", 1)

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("a repeated key")
        return dict(pairs)

    try:
        # AWS's reader refuses a repeated key, a second document and an empty string.
        return _to_jsonata(json.loads(text, object_pairs_hook=unique))
    except ValueError:
        raise _FunctionError("D3137", "Invalid JSON") from None


_LONG = 2**63


def javascript_number(value: int | float) -> str:
    """A number as `$string` writes it on Step Functions (measured by the floci emulator): an
    integer within Java's long exactly; any other whole number as JavaScript prints a double
    (every digit below 10^21: 1e20 is `100000000000000000000`, 2^63 `9223372036854776000`;
    `1e+21` from there); a fraction rounded to 15 significant digits (`$string(1/3)` is
    `0.333333333333333`) and printed as JavaScript does (`1e-7`, `0.000001`)."""
    if isinstance(value, int) and -_LONG <= value < _LONG:
        return str(value)
    number = float(value)
    if not number.is_integer():
        number = float(f"{number:.15g}")
    if number == 0:
        return "0"
    _, digits, exponent = Decimal(repr(abs(number))).normalize().as_tuple()
    shown = "".join(str(d) for d in digits)
    assert isinstance(exponent, int)
    point = len(shown) + exponent  # JavaScript's n: the decimal point after n digits
    text: str
    if len(shown) <= point <= 21:
        text = shown + "0" * (point - len(shown))
    elif 0 < point <= 21:
        text = shown[:point] + "." + shown[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * -point + shown
    else:
        mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
        text = f"{mantissa}e{'+' if point - 1 >= 0 else '-'}{abs(point - 1)}"
    return ("-" if number < 0 else "") + text


def _string_json(value: Any, indent: int | None, depth: int = 0) -> str:
    """JSON text as `$string` writes a structure: each number as `javascript_number` does."""
    null, callable_type = _library()[1], _library()[0].JFunctionCallable
    if value is None or value is null:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            from jsonata.jexception import JException  # noqa: PLC0415

            raise JException("D1001", 0, value)
        return javascript_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, callable_type):
        return '""'
    pad = "" if indent is None else "\n" + " " * (indent * (depth + 1))
    end = "" if indent is None else "\n" + " " * (indent * depth)
    colon = ":" if indent is None else ": "
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = ",".join(
            pad
            + json.dumps(str(k), ensure_ascii=False)
            + colon
            + _string_json(v, indent, depth + 1)
            for k, v in value.items()
        )
        return "{" + inner + end + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[" + ",".join(pad + _string_json(v, indent, depth + 1) for v in value) + end + "]"
    return json.dumps(str(value))


class _Overrides:
    """Built-in functions whose answers the package gives differently from Step Functions,
    bound in their place with the built-in's own signature (so `$string()` still reads the
    context value, as jsonata-js does)."""

    @staticmethod
    def string(arg: Any, prettify: Any = None) -> Any:
        from jsonata.functions import Functions  # type: ignore[import-untyped]  # noqa: PLC0415
        from jsonata.utils import Utils  # noqa: PLC0415

        if isinstance(arg, Utils.JList) and arg.outer_wrapper:
            arg = arg[0]
        if arg is None or isinstance(arg, str):
            return arg
        if isinstance(arg, float) and not math.isfinite(arg):
            return Functions.string(arg, prettify)  # the package's D3001, as jsonata-js's
        return _string_json(arg, 2 if prettify else None)

    @staticmethod
    def power(base: Any, exponent: Any) -> Any:
        """jsonata-js's D3061 for a power that is no JSON number (`$power(-1, 0.5)`), where
        the package lets Python's complex-number error out."""
        from jsonata.functions import Functions  # noqa: PLC0415
        from jsonata.jexception import JException  # noqa: PLC0415

        try:
            return Functions.power(base, exponent)
        except (TypeError, ValueError, OverflowError):
            raise JException("D3061", 1, base, exponent) from None

    @staticmethod
    def to_millis(timestamp: Any, picture: Any = None) -> Any:
        """jsonata-js's D3110 for a timestamp that is not ISO 8601 (`$toMillis('nope')`),
        where the package lets Python's parser error out."""
        from jsonata.functions import Functions  # noqa: PLC0415
        from jsonata.jexception import JException  # noqa: PLC0415

        try:
            return Functions.datetime_to_millis(timestamp, picture)
        except ValueError:
            if picture is not None:
                raise
            raise JException("D3110", -1, timestamp) from None


@functools.cache
def _overridden() -> dict[str, Any]:
    jsonata_class = _library()[0]
    native = functools.partial(jsonata_class.function, clazz=_Overrides)
    return {
        "string": native("string", "<x-b?:s>", method_name="string"),
        "power": native("power", "<n-n:n>", method_name="power"),
        "toMillis": native("toMillis", "<s-s?:n>", method_name="to_millis"),
    }


def _functions(rng: _random.Random, millis: int = 0) -> dict[str, Any]:
    """Step Functions' JSONata functions as AWS answers them (the floci emulator's
    JsonataEvaluator records each answer, measured against AWS): a call with too many
    arguments or one of the wrong type is T0410, a missing or empty input gives nothing."""

    @_arity(1)
    def random(seed: Any = _MISSING, *extra: Any) -> float:
        _surplus("random", extra, 2)
        if seed is _MISSING or seed is None:
            return rng.random()
        return _java_next_double(_toward_zero(seed, "random", 1))

    @_arity(0)
    def uuid(*extra: Any) -> str:
        _surplus("uuid", extra, 1)
        return intrinsics.f_uuid(rng)

    def now(picture: Any = None, timezone: Any = None) -> Any:
        from jsonata.functions import Functions  # noqa: PLC0415

        return Functions.datetime_from_millis(millis, picture, timezone)

    def millis_() -> int:
        return millis

    def parse_integer(value: Any = None, picture: Any = None) -> Any:
        """AWS answers NaN for a value the picture cannot read (the package lets Python's
        int() error out); a value it reads is the integer."""
        from jsonata.functions import Functions  # noqa: PLC0415

        try:
            return Functions.parse_integer(value, picture)
        except ValueError:
            return math.nan

    def no_eval(*_: Any) -> Any:
        """The guide: every JSONata 2.0.6 function but `$eval`, "not available: use $parse
        instead"; a call is what calling a name that is no function is (T1006)."""
        from jsonata.jexception import JException  # noqa: PLC0415

        raise JException("T1006", -1)

    return {
        "now": now,
        "millis": millis_,
        "parseInteger": parse_integer,
        "partition": _partition,
        "range": _range,
        "hash": _hash,
        "random": random,
        "uuid": uuid,
        "parse": _parse,
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
    if isinstance(exc, _FunctionError):
        return True, f"{exc.code}: {exc}"
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
    if not re.fullmatch(r"[A-Z]\d{4}", code):
        # The package throws a few errors with the whole message in the code's place; AWS
        # gives that message alone (no code), as it does `$replace('a', '', 'b')`'s.
        return False, code
    words = catalog.get(code)
    try:
        text = words() if words else _catalog_text(exc, code)
    except (TypeError, ValueError, IndexError):
        text = str(exc)
    return True, f"{code}: {text}"


def _catalog_text(exc: Exception, code: str) -> str:
    """A library error's message in jsonata-js's words, as AWS gives it: the package's
    catalog (ported from Java) says "Object" wherever jsonata-js says "function", and
    jsonata-js writes each value into its message as JSON (`-1`, `"a"`)."""
    from jsonata.jexception import JException  # noqa: PLC0415

    template = JException.error_codes.get(code)
    if not isinstance(template, str) or template == "{{{message}}}":
        return str(exc)
    template = re.sub(r"\bObject\b", "function", template)
    values = [getattr(exc, "current", None), getattr(exc, "expected", None)]
    if getattr(exc, "extra", None) is not None:
        values.append(exc.extra)  # type: ignore[attr-defined]
    slots = iter(values)

    def value(_: re.Match[str]) -> str:
        return json.dumps(_from_jsonata(next(slots)), ensure_ascii=False)

    return re.sub(r"\{\{\w+\}\}", value, template)


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
    _BOUNDS.steps, _BOUNDS.depth = 0, 0
    try:
        for name, function in _functions(rng, _millis(states)).items():
            compiled.register_lambda(name, function)
        for name, native in _overridden().items():
            compiled.register_function(name, native)
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
