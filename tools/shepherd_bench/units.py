"""What AWS bills for one request, as pure functions of item images and payloads.

DynamoDB (Developer Guide, "Item sizes and formats", "Read/write capacity modes",
"Global secondary indexes"):

* item size = sum over attributes of (UTF-8 length of the name + size of the value); a string is
  its UTF-8 length, a number about 1 byte per two significant digits + 1, a binary its length,
  a boolean or null 1 byte, a list or map 3 bytes + 1 byte per element + its elements (a map's
  elements include their names), a set the sum of its elements;
* a standard write costs 1 WRU per started KB of the larger of the item before and after it;
  a transactional write twice that; a write whose condition fails still costs the size of the
  existing item, at least 1 WRU;
* each global secondary index the write touches costs WRU of its own: 1 per KB of the index entry
  when the index key appears, 1 when it disappears, 2 (delete + put) when it changes, 1 when a
  projected non-key attribute changes while the key stays (INCLUDE/ALL projections only);
* a strongly consistent read costs 1 RRU per started 4 KB (eventually consistent 0.5); a Query
  sums the sizes of the items it reads and rounds once per page, with a 1-unit minimum.

SQS and EventBridge bill per 64 KB chunk of a request's payload (a batch call is one request).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

KB = 1024
WRITE_UNIT_BYTES = 1 * KB
READ_UNIT_BYTES = 4 * KB
CHUNK_BYTES = 64 * KB

# An item in DynamoDB's wire format: {"name": {"S": "..."}, "n": {"N": "12"}, ...}.
WireItem = Mapping[str, Mapping[str, Any]]


# --------------------------------------------------------------------------- item sizes


def number_size(text: str) -> int:
    """1 byte per two significant digits, plus 1 (leading and trailing zeros trimmed)."""
    value = Decimal(text)
    if value.is_zero():
        return 1 + 1
    digits = value.normalize().as_tuple().digits
    return math.ceil(len(digits) / 2) + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Size of one attribute value in wire format (without its name)."""
    ((kind, body),) = value.items()
    match kind:
        case "S":
            return len(str(body).encode())
        case "N":
            return number_size(str(body))
        case "B":
            return len(body) if isinstance(body, bytes | bytearray) else len(str(body).encode())
        case "BOOL" | "NULL":
            return 1
        case "SS":
            return sum(len(str(s).encode()) for s in body)
        case "NS":
            return sum(number_size(str(n)) for n in body)
        case "BS":
            return sum(len(b) for b in body)
        case "L":
            return 3 + sum(1 + value_size(v) for v in body)
        case "M":
            return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in body.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: WireItem | None) -> int:
    """Bytes DynamoDB counts for an item: names plus values."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    """WRU of a standard write of an item this big: 1 per started KB, at least 1."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool) -> float:
    """RRU of reading this many bytes in one request: 1 per started 4 KB (eventual: 0.5)."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


# -------------------------------------------------------------------------------- indexes


@dataclass(frozen=True)
class Index:
    """A global secondary index as DescribeTable reports it."""

    name: str
    keys: tuple[str, ...]  # partition key, then sort key if any
    projection: Literal["KEYS_ONLY", "INCLUDE", "ALL"]
    non_key_attributes: tuple[str, ...] = ()

    def entry(self, item: WireItem | None, table_keys: Sequence[str]) -> dict[str, Any] | None:
        """The item's entry in this index, or None when the item is not in it (sparse)."""
        if not item or any(k not in item for k in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        names = [*table_keys, *self.keys]
        if self.projection == "INCLUDE":
            names += list(self.non_key_attributes)
        return {n: item[n] for n in names if n in item}


@dataclass(frozen=True)
class IndexWrite:
    index: str
    change: Literal["add", "remove", "move", "update"]
    units: int


def index_writes(
    before: WireItem | None,
    after: WireItem | None,
    indexes: Sequence[Index],
    table_keys: Sequence[str],
) -> list[IndexWrite]:
    """The index writes one successful item write causes (none if nothing indexed changed)."""
    out: list[IndexWrite] = []
    for index in indexes:
        old = index.entry(before, table_keys)
        new = index.entry(after, table_keys)
        if old is None and new is None:
            continue
        if old is None:
            out.append(IndexWrite(index.name, "add", write_units(item_size(new))))
        elif new is None:
            out.append(IndexWrite(index.name, "remove", write_units(item_size(old))))
        elif any(old.get(k) != new.get(k) for k in index.keys):
            units = write_units(item_size(old)) + write_units(item_size(new))
            out.append(IndexWrite(index.name, "move", units))
        elif old != new:
            out.append(IndexWrite(index.name, "update", write_units(item_size(new))))
    return out


# ------------------------------------------------------------------------ table writes


def item_write_units(
    before: WireItem | None, after: WireItem | None, *, transactional: bool = False
) -> int:
    """WRU of a successful write: the larger of the two images; doubled in a transaction."""
    units = write_units(max(item_size(before), item_size(after)))
    return 2 * units if transactional else units


def failed_write_units(existing: WireItem | None) -> int:
    """A write whose condition failed: the size of the existing item, at least 1 WRU."""
    return write_units(item_size(existing))


# ------------------------------------------------------------------------ queues, events


def chunks(payload_bytes: int) -> int:
    """64 KB chunks of one request's payload, at least one."""
    return max(1, math.ceil(payload_bytes / CHUNK_BYTES))


def sqs_message_size(entry: Mapping[str, Any]) -> int:
    """Body plus message attributes (name, type and value), as SQS counts the payload."""
    size = len(str(entry.get("MessageBody", "")).encode())
    for name, attr in (entry.get("MessageAttributes") or {}).items():
        size += len(name.encode()) + len(str(attr.get("DataType", "")).encode())
        if "StringValue" in attr:
            size += len(str(attr["StringValue"]).encode())
        if "BinaryValue" in attr:
            size += len(attr["BinaryValue"])
    return size


def sqs_send_requests(entries: Sequence[Mapping[str, Any]]) -> int:
    """A SendMessage(Batch) call: one request per 64 KB chunk of the whole batch's payload."""
    return chunks(sum(sqs_message_size(e) for e in entries))


def event_entry_size(entry: Mapping[str, Any]) -> int:
    """EventBridge PutEvents entry size (User Guide, "Calculating PutEvents event entry size")."""
    size = 14 if entry.get("Time") is not None else 0
    for name in ("Source", "DetailType", "Detail"):
        size += len(str(entry.get(name, "")).encode())
    size += sum(len(str(r).encode()) for r in entry.get("Resources") or [])
    return size


def event_units(entries: Sequence[Mapping[str, Any]]) -> int:
    """Billed custom events: each entry per 64 KB chunk."""
    return sum(chunks(event_entry_size(e)) for e in entries)


def lambda_invocations(messages: int, batch_size: int, *, full_batches: bool) -> int:
    """Invocations an SQS event source makes for `messages`: full batches, or one each."""
    if messages <= 0:
        return 0
    return math.ceil(messages / batch_size) if full_batches else messages
