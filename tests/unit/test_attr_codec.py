"""The DynamoDB adapter's own attribute codec (`to_attr`, `from_attr`) is boto3's, faster:
for every value an item may hold, it writes and reads exactly what boto3's TypeSerializer and
TypeDeserializer (with the adapter's plain numbers) do, and refuses what boto3 refuses."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from hypothesis import given, settings
from hypothesis import strategies as st
from shepherd.adapters.dynamodb import _plain, from_attr, to_attr

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.integers(),  # beyond 38 digits boto3 refuses, and so must the adapter
    st.integers(-(10**40), 10**40).map(Decimal),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
    st.binary(max_size=4),
    st.frozensets(st.text(max_size=3), min_size=1, max_size=3).map(set),
    st.frozensets(st.integers(-99, 99), min_size=1, max_size=3).map(set),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


def _boto3(item: dict[str, Any]) -> dict[str, Any] | Exception:
    try:
        return {k: TypeSerializer().serialize(v) for k, v in item.items()}
    except Exception as exc:  # the refusal itself is what is compared
        return exc


@settings(max_examples=200, deadline=None, database=None)
@given(st.dictionaries(st.text(max_size=4), VALUES, max_size=4))
def test_to_attr_writes_what_boto3_writes_and_from_attr_reads_it_back_as_boto3_does(
    item: dict[str, Any],
) -> None:
    expected = _boto3(item)
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            to_attr(item)
        return
    attrs = to_attr(item)
    assert attrs == expected
    assert repr(attrs) == repr(expected)  # the same types too (a str, never a Decimal)
    read = from_attr(attrs)
    boto3_read = {k: _plain(TypeDeserializer().deserialize(v)) for k, v in attrs.items()}
    assert read == boto3_read
    assert repr(read) == repr(boto3_read)


def test_a_float_is_refused_as_boto3_refuses_it_and_a_bool_is_no_number() -> None:
    with pytest.raises(TypeError):
        to_attr({"x": 1.5})
    assert to_attr({"t": True, "n": 1, "z": None}) == {
        "t": {"BOOL": True},
        "n": {"N": "1"},
        "z": {"NULL": True},
    }
    assert from_attr({"b": {"B": b"\x01"}}) == {"b": Binary(b"\x01")}


@pytest.mark.parametrize("n", [10**38 - 1, -(10**38) + 1, 10**38, -(10**38), 10**38 + 1])
def test_an_integer_at_dynamodbs_38_digits_is_written_or_refused_as_boto3_does(n: int) -> None:
    expected = _boto3({"n": n})
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            to_attr({"n": n})
    else:
        assert to_attr({"n": n}) == expected == {"n": {"N": str(n)}}
