"""A refused start input lists every way it breaks the InputSchema, each with its path (up to
`MAX_INPUT_PROBLEMS`), in the engine's error (so the API's 400 body, the CLI and `MemoryEngine`
all say it), and a misspelt workflow type gets the nearest name."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import parse_definition
from shepherd.errors import InputInvalid, UnknownWorkflowType
from shepherd.input_problems import problems
from shepherd.limits import MAX_INPUT_PROBLEMS
from shepherd.testing import MemoryEngine

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["order_id", "items", "amount"],
    "additionalProperties": False,
    "properties": {
        "order_id": {"type": "string", "minLength": 1},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "qty"],
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            },
        },
    },
}
ORDER = parse_definition(
    {
        "Name": "order",
        "InputSchema": SCHEMA,
        "Steps": [{"Name": "a", "Agent": "a", "Pool": "p", "TimeoutSeconds": 5}],
    },
    "order.yaml",
)


def test_a_valid_input_has_no_problem() -> None:
    assert problems(SCHEMA, {"order_id": "o", "amount": 5, "items": [{"sku": "A", "qty": 1}]}) == []


def test_every_problem_is_listed_with_its_path_in_document_order() -> None:
    bad = {
        "order_id": "",
        "amount": -1,
        "items": [{"sku": "A", "qty": 0}, {"qty": "two"}],
        "extra": True,
    }
    found = problems(SCHEMA, bad)
    assert [path for path, _ in found] == [
        "data.order_id",
        "data.amount",
        "data.items[0].qty",
        "data.items[1]",
        "data.items[1].qty",
        "data",
    ]
    messages = dict(found)
    assert "must be longer than or equal to 1 characters" in messages["data.order_id"]
    assert messages["data.items[1]"] == "data.items[1] must contain 'sku'"
    assert "must not contain {'extra'} properties" in messages["data"]


def test_the_problems_stop_at_the_cap() -> None:
    many = {"order_id": "o", "amount": 1, "items": [{"sku": "A", "qty": 0}] * 500}
    found = problems(SCHEMA, many)
    assert len(found) == MAX_INPUT_PROBLEMS
    assert found[-1][0] == f"data.items[{MAX_INPUT_PROBLEMS - 1}].qty"


def test_a_schema_with_refs_still_reports_its_first_problem() -> None:
    schema = {
        "$defs": {"qty": {"type": "integer", "minimum": 1}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/qty"}, "b": {"$ref": "#/$defs/qty"}},
    }
    assert [p for p, _ in problems(schema, {"a": 0, "b": 0})] == ["data.a"]


def test_memory_engine_start_lists_every_problem() -> None:
    engine = MemoryEngine({"order": ORDER})
    with pytest.raises(InputInvalid) as refused:
        engine.start("order", {"order_id": "o", "amount": 0, "items": []})
    assert refused.value.field == "input.amount"
    assert [p for p, _ in refused.value.problems] == ["input.amount", "input.items"]
    text = str(refused.value)
    assert text.startswith("input.amount: input.amount must be bigger than 0; input.items: ")
    assert text.endswith("(2 problems)")


def test_an_unknown_workflow_type_names_the_nearest() -> None:
    engine = MemoryEngine({"order": ORDER})
    with pytest.raises(
        UnknownWorkflowType, match=r"unknown workflow type 'ordr'; did you mean 'order'\?"
    ):
        engine.start("ordr", {})
    with pytest.raises(UnknownWorkflowType, match=r"unknown workflow type 'invoice'$"):
        engine.start("invoice", {})


def test_the_cli_prints_every_problem_on_its_own_line() -> None:
    import io
    import json
    import urllib.error

    from shepherd_cli.client import _api_error

    body = {
        "error": {
            "code": "InvalidInput",
            "message": "input.amount: ...; input.items: ... (2 problems)",
            "field": "input.amount",
            "problems": [
                {"field": "input.amount", "message": "input.amount must be bigger than 0"},
                {"field": "input.items", "message": "input.items must contain at least 1 items"},
            ],
        }
    }
    err = urllib.error.HTTPError(
        "http://x/workflows", 400, "Bad Request", {}, io.BytesIO(json.dumps(body).encode())
    )
    assert str(_api_error(err)).splitlines() == [
        "400 InvalidInput: 2 problems",
        "  input.amount: input.amount must be bigger than 0",
        "  input.items: input.items must contain at least 1 items",
    ]
    body["error"]["problems"] = body["error"]["problems"][:1]  # type: ignore[index]
    body["error"]["message"] = "input.amount: input.amount must be bigger than 0"
    err = urllib.error.HTTPError(
        "http://x/workflows", 400, "Bad Request", {}, io.BytesIO(json.dumps(body).encode())
    )
    assert str(_api_error(err)) == (
        "400 InvalidInput (input.amount): input.amount: input.amount must be bigger than 0"
    )
