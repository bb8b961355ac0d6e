"""The billing model against hand-computed cases (DynamoDB, SQS, EventBridge, Lambda)."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd_bench import units
from shepherd_bench.units import Index

KEYS = ("pk", "sk")
WATCH = Index("watch", ("watch_shard", "due_at"), "KEYS_ONLY")
LIST = Index(
    "by_owner",
    ("list_pk", "list_sk"),
    "INCLUDE",
    ("wf_type", "status", "created_at", "finished_at"),
)


def s(text: str) -> dict[str, Any]:
    return {"S": text}


def n(number: int | str) -> dict[str, Any]:
    return {"N": str(number)}


def padded(total: int) -> dict[str, Any]:
    """An item of exactly `total` bytes: pk (2+1) + sk (2+1) + data (4+len)."""
    return {"pk": s("k"), "sk": s("s"), "data": s("x" * (total - 10))}


def test_sizes_count_names_and_values() -> None:
    assert units.item_size(padded(3584)) == 3584
    assert units.item_size({"status": s("RUNNING")}) == 6 + 7
    # numbers: 1 byte per two significant digits + 1; zeros trimmed
    assert units.number_size("12345") == 4
    assert units.number_size("1767225600000") == 4 + 1  # trimmed: 17672256, 8 digits
    assert units.number_size("0") == 2
    assert units.item_size({"ok": {"BOOL": True}, "no": {"NULL": True}}) == 3 + 3
    # a list: 3 + per element (1 + size); a map: 3 + per entry (1 + name + size)
    assert units.value_size({"L": [s("ab"), n(7)]}) == 3 + (1 + 2) + (1 + 2)
    assert units.value_size({"M": {"a": s("xyz")}}) == 3 + (1 + 1 + 3)


def test_write_units_round_up_per_kb() -> None:
    assert units.item_write_units(None, padded(3584)) == 4  # a 3.5 KB put
    assert units.item_write_units(None, padded(1024)) == 1
    assert units.item_write_units(None, padded(1025)) == 2
    assert units.item_write_units(None, padded(10)) == 1  # never below 1


def test_update_costs_the_larger_image() -> None:
    assert units.item_write_units(padded(3000), padded(500)) == 3
    assert units.item_write_units(padded(500), padded(2100)) == 3


def test_transactional_writes_cost_double() -> None:
    two_half_kb = [units.item_write_units(None, padded(512), transactional=True)] * 2
    assert sum(two_half_kb) == 4


def test_failed_conditional_write_costs_the_existing_item() -> None:
    assert units.failed_write_units(padded(300)) == 1
    assert units.failed_write_units(None) == 1  # no item at all: still 1 WRU
    assert units.failed_write_units(padded(2500)) == 3


def _wf(**extra: Any) -> dict[str, Any]:
    return {"pk": s("WF#1"), "sk": s("#WF"), "status": s("RUNNING"), **extra}


def test_index_writes_add_remove_move_and_projected_update() -> None:
    live = _wf(watch_shard=s("W#1"), due_at=n(1000))
    added = units.index_writes(_wf(), live, [WATCH], KEYS)
    assert [(w.change, w.units) for w in added] == [("add", 1)]
    removed = units.index_writes(live, _wf(), [WATCH], KEYS)
    assert [(w.change, w.units) for w in removed] == [("remove", 1)]
    moved = units.index_writes(live, {**live, "due_at": n(2000)}, [WATCH], KEYS)
    assert [(w.change, w.units) for w in moved] == [("move", 2)]
    # KEYS_ONLY: a non-key change is free; INCLUDE: a projected change costs 1, another none
    listed = _wf(list_pk=s("OWNER#a"), list_sk=s("1#1"), input=s("{}"), watch_shard=s("W#1"))
    assert units.index_writes(live, {**live, "status": s("X")}, [WATCH], KEYS) == []
    changed = units.index_writes(listed, {**listed, "status": s("SUCCEEDED")}, [LIST], KEYS)
    assert [(w.index, w.change, w.units) for w in changed] == [("by_owner", "update", 1)]
    assert units.index_writes(listed, {**listed, "input": s("[]")}, [LIST], KEYS) == []


def test_an_update_moving_a_gsi_key_costs_one_plus_two() -> None:
    live = _wf(watch_shard=s("W#1"), due_at=n(1000))
    after = {**live, "due_at": n(5000)}
    table = units.item_write_units(live, after)
    index = sum(w.units for w in units.index_writes(live, after, [WATCH, LIST], KEYS))
    assert (table, index) == (1, 2)


def test_reads_round_per_4kb_and_halve_when_eventual() -> None:
    assert units.read_units(9 * 1024, consistent=True) == 3  # a consistent query of 9 KB
    assert units.read_units(9 * 1024, consistent=False) == 1.5
    assert units.read_units(0, consistent=True) == 1  # an empty query still costs a unit
    assert units.read_units(4096, consistent=False) == 0.5


def test_sqs_batches_bill_per_64kb_chunk() -> None:
    small = [{"MessageBody": "x" * 100} for _ in range(10)]
    assert units.sqs_send_requests(small) == 1  # a batch call is one request
    big = [{"MessageBody": "x" * 7 * 1024} for _ in range(10)]  # 70 KB in all
    assert units.sqs_send_requests(big) == 2
    attrs = {
        "MessageBody": "ab",
        "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}},
    }
    assert units.sqs_message_size(attrs) == 2 + 1 + 6 + 1


def test_eventbridge_bills_each_entry_per_64kb_chunk() -> None:
    entry = {"Source": "shepherd", "DetailType": "WorkflowStarted", "Detail": "{}"}
    assert units.event_entry_size(entry) == 8 + 15 + 2
    assert units.event_units([entry, entry]) == 2
    assert units.event_units([{**entry, "Detail": "x" * 65 * 1024}]) == 2


@pytest.mark.parametrize(
    ("messages", "full", "expected"), [(25, True, 3), (25, False, 25), (0, True, 0), (10, True, 1)]
)
def test_lambda_invocations_from_batches(messages: int, full: bool, expected: int) -> None:
    assert units.lambda_invocations(messages, 10, full_batches=full) == expected
