"""The caps add up to items DynamoDB accepts, and item sizes are counted as DynamoDB does."""

from __future__ import annotations

from decimal import Decimal

import pytest
from shepherd import limits


def test_every_item_the_caps_allow_fits_the_budget_and_the_budget_fits_dynamodb() -> None:
    assert limits.ITEM_BUDGET < limits.DYNAMODB_ITEM_LIMIT
    assert limits.workflow_item_budget() <= limits.ITEM_BUDGET
    assert limits.step_item_budget() <= limits.ITEM_BUDGET


def test_request_caps_leave_room_for_what_they_carry() -> None:
    assert limits.MAX_START_BODY_BYTES > limits.MAX_INPUT_BYTES
    assert limits.MAX_CALLBACK_BODY_BYTES > limits.MAX_CALLBACK_INLINE_BYTES
    assert limits.MAX_WORKFLOW_OUTPUT_BYTES >= limits.MAX_OUTPUT_BYTES
    assert limits.MAX_REQUEST_BYTES == 10 * 1024 * 1024
    # API Gateway -> Lambda caps a request near 6 MB: what the API takes inline stays under it
    assert limits.MAX_START_BODY_BYTES < 6_000_000
    assert limits.MAX_CALLBACK_BODY_BYTES < 6_000_000


def test_the_caps_the_issue_promises() -> None:
    assert limits.MAX_INPUT_BYTES == 5 * 1024 * 1024  # straight through the API
    assert limits.MAX_OUTPUT_BYTES >= 100 * 1024 * 1024  # step and callback outputs
    assert limits.MAX_UPLOAD_BYTES >= limits.MAX_OUTPUT_BYTES  # larger ones are uploaded


def test_a_stored_payload_never_takes_more_of_an_item_than_the_inline_cap() -> None:
    # Payloads are capped in MiB, but an item holds at most the inline threshold or a ref.
    assert limits.stored_payload_budget() < limits.MAX_INPUT_BYTES // 64
    assert limits.PAYLOAD_INLINE_BYTES <= limits.MAX_PAYLOAD_INLINE_BYTES


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("", 0),
        ("abc", 3),
        ("é", 2),  # UTF-8 bytes, not characters
        (True, 1),
        (None, 1),
        (7, 2),
        (12345, 4),
        (Decimal("1.5"), 2),
        ([], 3),
        (["ab", 1], 3 + (1 + 2) + (1 + 2)),
        ({"k": "v"}, 3 + 1 + 1 + 1),
    ],
)
def test_attribute_sizes_follow_dynamodbs_rules(value: object, size: int) -> None:
    assert limits.attribute_size(value) == size


def test_an_items_size_counts_attribute_names_too() -> None:
    assert limits.item_size({"pk": "WF#1", "sk": "#WF"}) == 2 + 4 + 2 + 3


def test_truncate_marks_what_it_cut() -> None:
    assert limits.truncate("short", 10) == "short"
    cut = limits.truncate("x" * 50, 10)
    assert len(cut) == 10 and cut.endswith("…")


def test_the_largest_history_entry_fits_its_budget() -> None:
    """An ended attempt's entry keeps its error name and the start of its message: at their
    caps, in 4-byte characters, with a token hash and times, it fits MAX_HISTORY_ENTRY_BYTES."""
    from shepherd.decisions import transitions as tx

    widest = "\U0001f600" * 1000
    entry = tx._history(
        2**31,
        "heartbeat_timeout",
        2**53,
        limits.truncate(widest, limits.MAX_ERROR_NAME),
        "f" * 64,
        2**53,
        tx.error_json(widest, widest),
    )
    assert len(entry["m"]) == limits.MAX_HISTORY_MESSAGE and entry["m"].endswith("…")
    assert limits.attribute_size(entry) <= limits.MAX_HISTORY_ENTRY_BYTES
