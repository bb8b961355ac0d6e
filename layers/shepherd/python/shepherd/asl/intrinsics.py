"""The intrinsic functions `States.*` of JSONPath states (the developer guide's "Intrinsic
functions"): a small parser for `States.Name(arg, ...)` (string literals in single quotes with
the escapes `\\'`, `\\{`, `\\}`, `\\\\`; numbers; true, false, null; paths `$...`, `$$...`,
`$variable`; nested calls) and the functions. A wrong argument raises States.Runtime with the
cause `Invalid arguments in States.<Name>...`: that is what Step Functions reports when it
runs (not the States.IntrinsicFailure its error table lists), so no Retry or Catch sees it.

Randomness (MathRandom without a seed, UUID) comes from the `random.Random` the caller passes,
so an execution is deterministic per seed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random as _random
import struct
import uuid as _uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import paths
from .errors import RUNTIME, StatesError
from .values import dumps, is_number, normalize

MAX_STRING = 10_000  # Base64Encode/Decode and Hash take at most 10,000 characters
MAX_RANGE = 1_000  # ArrayRange makes at most 1,000 elements


@dataclass(frozen=True)
class _Literal:
    value: Any
    raw: str | None = None  # a string literal as written (escapes kept), for States.Format
    # A backslash before anything but ' { } \ : the guide's "open escape backslash", which the
    # interpreter "will throw a runtime error" for (States.Runtime when the call runs).
    open_escape: str | None = None


@dataclass(frozen=True)
class _Path:
    path: str


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[Any, ...]


def is_intrinsic(text: object) -> bool:
    return isinstance(text, str) and text.startswith("States.")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def fail(self, why: str) -> StatesError:
        return StatesError(RUNTIME, f"'{self.text}': {why} at {self.i}")

    def skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i] == " ":
            self.i += 1

    def call(self) -> _Call:
        start = self.i
        while self.i < len(self.text) and (
            self.text[self.i].isalnum() or self.text[self.i] in "._"
        ):
            self.i += 1
        name = self.text[start : self.i]
        if name not in FUNCTIONS:
            raise StatesError(RUNTIME, f"'{name}' is not an intrinsic function")
        if not self.text.startswith("(", self.i):
            raise self.fail("'(' expected")
        self.i += 1
        args: list[Any] = []
        self.skip()
        if self.text.startswith(")", self.i):
            self.i += 1
            return _Call(name, ())
        while True:
            self.skip()
            args.append(self.arg())
            self.skip()
            if self.text.startswith(")", self.i):
                self.i += 1
                return _Call(name, tuple(args))
            if not self.text.startswith(",", self.i):
                raise self.fail("',' or ')' expected")
            self.i += 1

    def arg(self) -> Any:
        rest = self.text[self.i :]
        if rest.startswith("'"):
            return self.string()
        if rest.startswith("States."):
            return self.call()
        if rest.startswith("$"):
            return self.path()
        return self.scalar()

    def string(self) -> _Literal:
        self.i += 1
        out, raw = [], []
        open_escape: str | None = None
        while self.i < len(self.text):
            c = self.text[self.i]
            if c == "\\" and self.i + 1 < len(self.text):
                nxt = self.text[self.i + 1]
                if nxt not in "'{}\\" and open_escape is None:
                    open_escape = c + nxt
                out.append(nxt)
                raw.append(c + nxt)
                self.i += 2
                continue
            if c == "'":
                self.i += 1
                return _Literal("".join(out), "".join(raw), open_escape)
            out.append(c)
            raw.append(c)
            self.i += 1
        raise self.fail("unclosed string")

    def path(self) -> _Path:
        start, depth, quote = self.i, 0, ""
        while self.i < len(self.text):
            c = self.text[self.i]
            if quote:
                quote = "" if c == quote else quote
            elif c in "'\"" and depth:
                quote = c
            elif c in "[(":
                depth += 1
            elif c in "])":
                if depth == 0:
                    break
                depth -= 1
            elif c == "," and depth == 0:
                break
            self.i += 1
        text = self.text[start : self.i].strip()
        if not paths.is_path(text):
            raise self.fail(f"'{text}' is not a path")
        return _Path(text)

    def scalar(self) -> _Literal:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] not in ",)":
            self.i += 1
        text = self.text[start : self.i].strip()
        try:
            value = json.loads(text)
        except ValueError:
            raise self.fail(f"'{text}' is not a value") from None
        if isinstance(value, dict | list | str):
            raise self.fail(f"'{text}' is not a value")
        return _Literal(value)


def parse(text: str) -> _Call:
    parser = _Parser(text.strip())
    call = parser.call()
    parser.skip()
    if parser.i != len(parser.text):
        raise parser.fail("unexpected text after the call")
    return call


def evaluate(
    text: str,
    data: Any,
    *,
    context: Any = None,
    variables: Mapping[str, Any] | None = None,
    rng: _random.Random | None = None,
) -> Any:
    """The value of an intrinsic function call on a state's data."""
    env = _Env(data, context, variables or {}, rng or _random.Random(0))
    return env.call(parse(text))


@dataclass
class _Env:
    data: Any
    context: Any
    variables: Mapping[str, Any]
    rng: _random.Random

    def value(self, arg: Any) -> Any:
        if isinstance(arg, _Literal):
            return _checked(arg).value
        if isinstance(arg, _Path):
            # A path that selects nothing raises PathNotFound: the field holding the call
            # reports it as States.Runtime, as it does for a plain path.
            return paths.select(arg.path, self.data, context=self.context, variables=self.variables)
        return self.call(arg)

    def call(self, call: _Call) -> Any:
        if call.name == "States.Format":
            return _format(self, call.args)
        args = [self.value(a) for a in call.args]
        function = FUNCTIONS[call.name]
        if call.name in ("States.MathRandom", "States.UUID"):
            return function(self.rng, *args)
        return function(*args)


def _checked(literal: _Literal) -> _Literal:
    """The literal, unless it has an open escape backslash (States.Runtime, as the guide's
    "Reserved characters in intrinsic functions" says)."""
    if literal.open_escape is not None:
        raise StatesError(
            RUNTIME,
            f"The intrinsic function's string literal has an open escape backslash "
            f"'{literal.open_escape}': only \\', \\{{, \\}} and \\\\ are escapes",
        )
    return literal


def _fail(function: str, why: str) -> StatesError:
    return StatesError(RUNTIME, f"Invalid arguments in {function}: {why}")


def _text(value: Any) -> str:
    """An argument of States.Format as Step Functions writes it: a string as it is, an array
    as `[a, b]` and an object as `{key=value, ...}` (Java's notation, strings unquoted), any
    other value as its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_text(v)}" for k, v in value.items()) + "}"
    return dumps(value)


def _format(env: _Env, args: tuple[Any, ...]) -> str:
    name = "States.Format"
    if not args:
        raise _fail(name, "a template string is required")
    # A literal keeps its escapes for the placeholders; a template from a path or a variable
    # is taken as it is.
    first = args[0]
    raw = _checked(first).raw if isinstance(first, _Literal) else env.value(first)
    if not isinstance(raw, str):
        raise _fail(name, "the template must be a string")
    values = [env.value(a) for a in args[1:]]
    out, used, i = [], 0, 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        elif raw.startswith("{}", i):
            if used >= len(values):
                raise _fail(name, "more placeholders '{}' than arguments")
            out.append(_text(values[used]))
            used += 1
            i += 2
        elif raw[i] in "{}":  # a brace that is not part of `{}` must be escaped (AWS refuses it)
            raise _fail(name, f"an unescaped '{raw[i]}' in the template")
        else:
            out.append(raw[i])
            i += 1
    if used != len(values):
        raise _fail(name, "more arguments than placeholders '{}'")
    return "".join(out)


def _json_key(value: Any) -> str:
    """Equality as JSON has it: `true` is not `1`, `1` is `1.0`."""
    return json.dumps(normalize(value), sort_keys=True)


def _array(name: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(name, f"{dumps(value)} is not an array")
    return value


def _int(name: str, value: Any) -> int:
    """An integer argument (a size, an index, a bound): a fraction is cut toward zero, as
    Step Functions' Java does (`ArrayPartition(.., 2.6)` chunks by 2; `ArrayRange(1.6, 1.4,
    1)` is `[1]`). Only States.MathAdd rounds."""
    if not is_number(value) or not math.isfinite(value):
        raise _fail(name, f"{dumps(value)} is not a number")
    return int(value)


def _string(name: str, value: Any, limit: int | None = None) -> str:
    if not isinstance(value, str):
        raise _fail(name, f"{dumps(value)} is not a string")
    if limit is not None and len(value) > limit:
        raise _fail(name, f"the string is longer than {limit} characters")
    return value


def _arity(name: str, args: tuple[Any, ...], n: int) -> None:
    if len(args) != n:
        raise _fail(name, f"takes {n} arguments, {len(args)} given")


def f_array(*args: Any) -> list[Any]:
    return list(args)


def f_array_partition(*args: Any) -> list[list[Any]]:
    name = "States.ArrayPartition"
    _arity(name, args, 2)
    array, size = _array(name, args[0]), _int(name, args[1])
    if size <= 0:
        raise _fail(name, "the chunk size must be a positive integer")
    return [array[i : i + size] for i in range(0, len(array), size)]


def f_array_contains(*args: Any) -> bool:
    name = "States.ArrayContains"
    _arity(name, args, 2)
    key = _contains_key(args[1])
    return any(_contains_key(v) == key for v in _array(name, args[0]))


def _contains_key(value: Any) -> str:
    """What States.ArrayContains compares, as AWS was seen to: a string as its text, anything
    else as its JSON with the keys in their order (so `true` finds "true", and {"a":1,"b":2}
    does not find {"b":2,"a":1})."""
    return value if isinstance(value, str) else json.dumps(normalize(value), separators=(",", ":"))


def f_array_range(*args: Any) -> list[int]:
    name = "States.ArrayRange"
    _arity(name, args, 3)
    start, end, step = (_int(name, a) for a in args)
    if step == 0:
        raise _fail(name, "the step must not be 0")
    out = list(range(start, end + (1 if step > 0 else -1), step))
    if len(out) > MAX_RANGE:
        raise _fail(name, f"the range has more than {MAX_RANGE} elements")
    return out


def f_array_get_item(*args: Any) -> Any:
    name = "States.ArrayGetItem"
    _arity(name, args, 2)
    array, index = _array(name, args[0]), _int(name, args[1])
    if not array:
        return None  # AWS answers null for any index into an empty array
    if not 0 <= index < len(array):
        raise _fail(name, f"index {index} is out of bounds")
    return array[index]


def f_array_length(*args: Any) -> int:
    name = "States.ArrayLength"
    _arity(name, args, 1)
    return len(_array(name, args[0]))


def f_array_unique(*args: Any) -> list[Any]:
    """The distinct values, in the order a Java HashSet of the values gives them back (what
    AWS returns: [true, false, true] is [false, true]; [[1, 2], [2, 1]] is [[2, 1], [1, 2]];
    [null, 1] keeps null first)."""
    name = "States.ArrayUnique"
    _arity(name, args, 1)
    seen: set[str] = set()
    kept: list[tuple[int, Any]] = []
    capacity = 16
    for v in _array(name, args[0]):
        key = _json_key(v)
        if key not in seen:
            seen.add(key)
            h = _java_hash(v)
            kept.append((h ^ (h >> 16), v))  # HashMap.hash: the high bits folded in
            if len(kept) > capacity * 3 // 4:  # the load factor 0.75 doubles the table
                capacity *= 2
    return [v for _, v in sorted(kept, key=lambda e: e[0] & (capacity - 1))]


def _int32(value: int) -> int:
    """A Java int's 32 bits, as an unsigned number (enough for hashing and bucketing)."""
    return value & 0xFFFFFFFF


def _java_hash(value: Any) -> int:
    """Java's hashCode (as 32 unsigned bits) of a JSON value read into plain Java objects:
    null, Boolean, Integer/Long/Double, String, List, Map."""
    if value is None:
        return 0  # HashMap hashes a null key as 0
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return _int32(value)  # Integer
        return _int32(value ^ (value >> 32))  # Long
    if isinstance(value, float):
        bits = int.from_bytes(struct.pack(">d", value), "big", signed=True)
        return _int32(bits ^ (bits >> 32))  # Double
    if isinstance(value, str):
        h = 0
        for unit in struct.unpack(
            f">{len(value.encode('utf-16-be')) // 2}H", value.encode("utf-16-be")
        ):
            h = _int32(31 * h + unit)
        return h
    if isinstance(value, list):
        h = 1
        for item in value:
            h = _int32(31 * h + _java_hash(item))
        return h
    return _int32(sum(_java_hash(k) ^ _java_hash(v) for k, v in value.items()))


def f_base64_encode(*args: Any) -> str:
    name = "States.Base64Encode"
    _arity(name, args, 1)
    return base64.b64encode(_string(name, args[0], MAX_STRING).encode()).decode()


def f_base64_decode(*args: Any) -> str:
    name = "States.Base64Decode"
    _arity(name, args, 1)
    text = _string(name, args[0], MAX_STRING)
    # AWS decodes leniently (seen: ' YWJjZA== ', 'abc', 'ab==cd' and '!!!invalid!!!' all give
    # a value): characters outside the alphabet and padding are skipped, a dangling sixth of
    # a byte dropped, and bytes that are not UTF-8 become U+FFFD.
    digits = "".join(c for c in text if c.isascii() and (c.isalnum() or c in "+/"))
    digits = digits[: len(digits) - len(digits) % 4] if len(digits) % 4 == 1 else digits
    return base64.b64decode(digits + "=" * (-len(digits) % 4)).decode(errors="replace")


# The digests Step Functions names (States.Hash, JSONata's $hash), by its names.
HASHES = {
    "MD5": "md5",
    "SHA-1": "sha1",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
}


def f_hash(*args: Any) -> str:
    name = "States.Hash"
    _arity(name, args, 2)
    data = args[0] if isinstance(args[0], str) else _text(args[0])
    if len(data) > MAX_STRING:
        raise _fail(name, f"the data is longer than {MAX_STRING} characters")
    algorithm = _string(name, args[1])
    if algorithm not in HASHES:
        raise _fail(name, f"the algorithm must be one of {', '.join(HASHES)}")
    return hashlib.new(HASHES[algorithm], data.encode()).hexdigest()


def f_json_merge(*args: Any) -> dict[str, Any]:
    name = "States.JsonMerge"
    _arity(name, args, 3)
    a, b, deep = args
    if not isinstance(a, dict) or not isinstance(b, dict):
        raise _fail(name, "both values to merge must be JSON objects")
    if deep is True:  # anything else (even the string 'false') merges shallowly on AWS
        raise _fail(name, "only a shallow merge (false) is supported")
    return {**a, **b}


def f_string_to_json(*args: Any) -> Any:
    name = "States.StringToJson"
    _arity(name, args, 1)
    text = _string(name, args[0])
    if not text.strip():
        return None  # AWS answers null for an empty or blank string, not a failure
    try:
        return json.loads(text)
    except ValueError:
        raise _fail(name, "not valid JSON text") from None


def f_json_to_string(*args: Any) -> str:
    _arity("States.JsonToString", args, 1)
    return dumps(args[0])


def f_math_random(rng: _random.Random, *args: Any) -> int:
    name = "States.MathRandom"
    if len(args) not in (2, 3):
        raise _fail(name, f"takes 2 or 3 arguments, {len(args)} given")
    start, end = _int(name, args[0]), _int(name, args[1])
    if end <= start:
        raise _fail(name, "the end must be greater than the start")
    source = _random.Random(_int(name, args[2])) if len(args) == 3 else rng
    return source.randrange(start, end)


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def f_math_add(*args: Any) -> int:
    name = "States.MathAdd"
    _arity(name, args, 2)
    if not all(is_number(a) for a in args):
        raise _fail(name, "both values must be numbers")
    # A non-integer is rounded to the nearest integer first, halves up (Java's Math.round);
    # the operands and the sum are Java ints (32 bits): past them is a bad argument.
    rounded: list[int] = [math.floor(a + 0.5) for a in args]
    total: int = sum(rounded)
    if any(not _INT_MIN <= v <= _INT_MAX for v in (*rounded, total)):
        raise _fail(name, "the values and their sum must be 32-bit integers")
    return total


def f_string_split(*args: Any) -> list[str]:
    name = "States.StringSplit"
    _arity(name, args, 2)
    text, delimiters = _string(name, args[0]), _string(name, args[1])
    tokens: list[str] = []
    current: list[str] = []
    for c in text:
        if c in delimiters:
            tokens.append("".join(current))
            current = []
        else:
            current.append(c)
    tokens.append("".join(current))
    return [t for t in tokens if t]  # each delimiter character splits; empty tokens drop


def f_uuid(rng: _random.Random, *args: Any) -> str:
    _arity("States.UUID", args, 0)
    return str(_uuid.UUID(int=rng.getrandbits(128), version=4))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "States.Format": lambda *a: None,  # evaluated by _format: it needs its raw template
    "States.StringToJson": f_string_to_json,
    "States.JsonToString": f_json_to_string,
    "States.Array": f_array,
    "States.ArrayPartition": f_array_partition,
    "States.ArrayContains": f_array_contains,
    "States.ArrayRange": f_array_range,
    "States.ArrayGetItem": f_array_get_item,
    "States.ArrayLength": f_array_length,
    "States.ArrayUnique": f_array_unique,
    "States.Base64Encode": f_base64_encode,
    "States.Base64Decode": f_base64_decode,
    "States.Hash": f_hash,
    "States.JsonMerge": f_json_merge,
    "States.MathRandom": f_math_random,
    "States.MathAdd": f_math_add,
    "States.StringSplit": f_string_split,
    "States.UUID": f_uuid,
}
