"""Strict JSON: every hostile payload is a JsonRejected naming why, never another error."""

from __future__ import annotations

import math

import pytest
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
