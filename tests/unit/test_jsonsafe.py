"""Strict JSON: every hostile payload is a JsonRejected naming why, never another error."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shepherd import jsonsafe
from shepherd.jsonsafe import JsonRejected
from shepherd.limits import MAX_JSON_DEPTH


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("NaN", "NonFiniteNumber"),
        ('{"amount": NaN}', "NonFiniteNumber"),
        ("Infinity", "NonFiniteNumber"),
        ("-Infinity", "NonFiniteNumber"),
        ("1e400", "NumberOutOfRange"),
        ("-1e400", "NumberOutOfRange"),
        ("9" * 5000, "NumberOutOfRange"),  # Python would raise past 4,300 digits
        ("1" + "0" * 309, "NumberOutOfRange"),
        ('"\\ud800"', "InvalidUnicode"),  # a lone surrogate
        ('{"\\udfff": 1}', "InvalidUnicode"),
        (nested(MAX_JSON_DEPTH + 1), "JsonTooDeep"),
        (nested(900), "JsonTooDeep"),  # accepted by json.loads, unreadable later
        (nested(100_000), "JsonTooDeep"),  # json.loads raises RecursionError
        ('{"a": 1', "InvalidJson"),
        ("", "InvalidJson"),
        ("{'a': 1}", "InvalidJson"),
        (b"\xff\xfe{}", "InvalidJson"),
    ],
)
def test_hostile_json_is_rejected_with_a_stable_code(text: str | bytes, code: str) -> None:
    with pytest.raises(JsonRejected) as rejected:
        jsonsafe.parse(text, what="body")
    assert rejected.value.code == code
    assert "body" in rejected.value.message


def test_the_depth_limit_is_named_in_the_message() -> None:
    with pytest.raises(JsonRejected, match=f"more than {MAX_JSON_DEPTH} levels"):
        jsonsafe.parse(nested(MAX_JSON_DEPTH + 1))


@pytest.mark.parametrize(
    "text",
    [
        nested(MAX_JSON_DEPTH),
        '{"amount": 1.7976931348623157e308}',
        '"\\ud83d\\ude00"',  # an escaped surrogate pair is one valid character
        '{"a": [1, 2.5, true, null, "x"]}',
        "-0",
        "1" + "0" * 300,
    ],
)
def test_valid_json_within_the_limits_is_accepted(text: str) -> None:
    assert jsonsafe.parse(text) is not None or text == "null"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (math.nan, "NonFiniteNumber"),
        ({"x": math.inf}, "NonFiniteNumber"),
        (10**400, "NumberOutOfRange"),
        ({1: "a"}, "InvalidJson"),
        ({"s": {1, 2}}, "InvalidJson"),
        ("\ud800", "InvalidUnicode"),
    ],
)
def test_python_values_that_are_not_json_are_rejected(value: object, code: str) -> None:
    with pytest.raises(JsonRejected) as rejected:
        jsonsafe.dumps(value, what="output")
    assert rejected.value.code == code


def test_a_value_nested_far_too_deep_is_rejected_without_recursing() -> None:
    value: list[object] = []
    for _ in range(50_000):
        value = [value]
    with pytest.raises(JsonRejected) as rejected:
        jsonsafe.check(value, what="output")
    assert rejected.value.code == "JsonTooDeep"


def test_dumps_is_canonical() -> None:
    assert jsonsafe.dumps({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert jsonsafe.size('"é"') == 4


# ------------------------------------------------- the fast walks against a plain reference


def _reference(value: object, depth: int = 0) -> str | None:
    """The rules, written plainly (recursive, one value at a time): the code of the first
    problem found, or None. The fast walks must agree on whether a value is refused."""
    if isinstance(value, dict | list | tuple):
        if depth + 1 > MAX_JSON_DEPTH:
            return "JsonTooDeep"
        problems = []
        if isinstance(value, dict):
            for key in value:
                if not isinstance(key, str):
                    problems.append("InvalidJson")
                else:
                    problems.append(_reference(key, depth))
        children = value.values() if isinstance(value, dict) else value
        problems += [_reference(child, depth + 1) for child in children]
        return next((p for p in problems if p), None)
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return "InvalidUnicode"
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return "NumberOutOfRange" if abs(value) > jsonsafe.MAX_NUMBER else None
    if isinstance(value, float):
        return None if math.isfinite(value) else "NonFiniteNumber"
    return "InvalidJson"


class Tagged(dict):  # type: ignore[type-arg]
    """A dict subclass: still an object."""


def _values() -> st.SearchStrategy[object]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**310), max_value=10**310),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(alphabet=st.characters(codec=None), max_size=5),
        st.sampled_from(["\ud800", "é", "\udfff x", 10**309, -(10**309), 2**1023]),
        st.sampled_from([b"bytes", {1, 2}, object()]),
    )
    keys = st.one_of(st.text(max_size=3), st.sampled_from(["\ud801", 1, None, 2.5]))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.tuples(inner, inner),
            st.dictionaries(keys, inner, max_size=4),
            st.dictionaries(st.text(max_size=2), inner, max_size=2).map(Tagged),
        ),
        max_leaves=30,
    )


def _deep(depth: int, leaf: object) -> object:
    value = leaf
    for level in range(depth - 1):
        value = {"k": value} if level % 2 else [value]
    return value


@settings(max_examples=600, deadline=None, derandomize=True)
@given(_values())
def test_check_refuses_exactly_what_the_rules_refuse(value: object) -> None:
    if _reference(value) is None:
        jsonsafe.check(value, what="output")
    else:
        with pytest.raises(JsonRejected):
            jsonsafe.check(value, what="output")


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
@pytest.mark.parametrize("leaf", [1, "x", "\ud800", [], {}])
def test_check_and_parse_agree_with_the_rules_at_the_depth_limit(depth: int, leaf: object) -> None:
    value = _deep(depth, leaf)
    expected = _reference(value)
    for refuse in (
        lambda: jsonsafe.check(value, what="x"),
        # through text: the parse walk (depth only unless the text escapes a surrogate)
        lambda: jsonsafe.parse(json.dumps(value)),
    ):
        if expected is None:
            refuse()
        else:
            with pytest.raises(JsonRejected) as rejected:
                refuse()
            assert rejected.value.code == expected


def test_parse_checks_every_string_when_the_text_escapes_a_surrogate() -> None:
    # a valid pair anywhere makes the parse walk every string, and it still finds a lone one
    text = json.dumps({"ok": "\ud83d\ude00", "rows": [{"bad": "\udc00"}]})
    with pytest.raises(JsonRejected) as rejected:
        jsonsafe.parse(text)
    assert rejected.value.code == "InvalidUnicode"
    assert jsonsafe.parse(json.dumps({"ok": "\ud83d\ude00"})) == {"ok": "😀"}
