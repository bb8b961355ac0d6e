"""The Store port on DynamoDB. `ClientError` becomes a domain error here and nowhere else.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from shepherd.changes import Change
from shepherd.conditions import And, Cond, Eq, Exists, Ge, In, Item, Lt, Missing, Or, Update
from shepherd.errors import ConditionFailed, ItemTooLarge, StoreUnavailable, TransactionConflict
from shepherd.keys import workflow_id_of
from shepherd.ports import MAX_BATCH_GET, DueEntry, DuePage, ListPage
from shepherd.topology import TABLE, IndexSpec

_ser = TypeSerializer()
_de = TypeDeserializer()
TRANSACTION_RETRIES = 3


def to_attr(item: Item) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [_plain(v) for v in value]
    return value


def from_attr(attrs: dict[str, Any] | None) -> Item | None:
    if attrs is None:
        return None
    return {k: _plain(_de.deserialize(v)) for k, v in attrs.items()}


def change_of_record(record: Mapping[str, Any]) -> Change:
    """The write a DynamoDB Streams record reports (as Lambda or GetRecords delivers it), as
    items in the engine's own form."""
    raw = record.get("dynamodb", {})
    return Change(
        old=from_attr(raw.get("OldImage")),
        new=from_attr(raw.get("NewImage")),
        sequence=str(raw.get("SequenceNumber", "")),
    )


def record_of_change(change: Change) -> dict[str, Any]:
    """A change as DynamoDB Streams reports it (NEW_AND_OLD_IMAGES), the inverse of
    `change_of_record`: what the relay's filters and handler are given, for the simulator and
    the tests."""
    item = change.new if change.new is not None else change.old
    if item is None:
        raise ValueError("a change needs an old or a new image")
    raw: dict[str, Any] = {
        "Keys": to_attr({"pk": item["pk"], "sk": item["sk"]}),
        "SequenceNumber": change.sequence,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if change.new is not None:
        raw["NewImage"] = to_attr(dict(change.new))
    if change.old is not None:
        raw["OldImage"] = to_attr(dict(change.old))
    if change.old is None:
        name = "INSERT"
    elif change.new is None:
        name = "REMOVE"
    else:
        name = "MODIFY"
    return {"eventID": change.sequence, "eventName": name, "dynamodb": raw}


class _Expr:
    """Collects placeholders while compiling conditions and updates."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, name: str) -> str:
        for placeholder, existing in self.names.items():
            if existing == name:
                return placeholder
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = name
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = _ser.serialize(value)
        return placeholder

    def condition(self, cond: Cond) -> str:
        match cond:
            case Eq(name, value):
                return f"{self.name(name)} = {self.value(value)}"
            case In(name, values):
                return f"{self.name(name)} IN ({', '.join(self.value(v) for v in values)})"
            case Lt(name, value):
                return f"{self.name(name)} < {self.value(value)}"
            case Ge(name, value):
                return f"{self.name(name)} >= {self.value(value)}"
            case Exists(name):
                return f"attribute_exists({self.name(name)})"
            case Missing(name):
                return f"attribute_not_exists({self.name(name)})"
            case And(parts):
                return " AND ".join(f"({self.condition(p)})" for p in parts)
            case Or(parts):
                return " OR ".join(f"({self.condition(p)})" for p in parts)
        raise TypeError(f"not a condition: {cond!r}")  # pragma: no cover

    def update(self, update: Update) -> str:
        sets = [f"{self.name(k)} = {self.value(v)}" for k, v in update.set.items() if v is not None]
        for k, v in update.set_if_missing.items():
            n = self.name(k)
            sets.append(f"{n} = if_not_exists({n}, {self.value(v)})")
        for k, values in update.append.items():
            n = self.name(k)
            sets.append(
                f"{n} = list_append(if_not_exists({n}, {self.value([])}), {self.value(values)})"
            )
        removes = [self.name(k) for k, v in update.set.items() if v is None]
        removes += [self.name(k) for k in update.remove]
        adds = [f"{self.name(k)} {self.value(v)}" for k, v in update.add.items()]
        parts = []
        if sets:
            parts.append("SET " + ", ".join(sets))
        if removes:
            parts.append("REMOVE " + ", ".join(removes))
        if adds:
            parts.append("ADD " + ", ".join(adds))
        return " ".join(parts)

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = self.names
        if self.values:
            out["ExpressionAttributeValues"] = self.values
        return out


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


# Errors that pass: the SDK (standard retry mode) has already retried them; what is left is
# reported as StoreUnavailable so callers can tell them from a bug.
THROTTLING = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
    }
)
TRANSIENT = THROTTLING | {
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionInProgressException",
}
# Why DynamoDB cancels a transaction for a reason that passes: capacity, or another
# transaction on the same items (TransactWriteItems reports it per item; botocore does not
# retry a cancelled transaction).
TRANSIENT_REASONS = frozenset(
    {
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "TransactionConflict",
        "RequestLimitExceeded",
    }
)
TRANSACTION_BACKOFF_MS = 25  # before the n-th retry: uniform in [0, 25 ms x 2^n], full jitter


def _too_large(err: ClientError) -> bool:
    """DynamoDB's answer to a write whose item would exceed 400 KB (a ValidationException)."""
    message = str(err.response.get("Error", {}).get("Message", ""))
    return _code(err) == "ValidationException" and "maximum allowed size" in message


def _index_not_ready(err: ClientError) -> bool:
    """A query of an index the table does not have yet, or is still building: an upgrade in
    place adds this release's indexes one deploy at a time (docs/upgrading.md). It passes.
    (DynamoDB says ValidationException; moto ResourceNotFoundException, "Invalid index".)"""
    message = str(err.response.get("Error", {}).get("Message", ""))
    code = _code(err)
    if code == "ResourceNotFoundException":
        return message.startswith("Invalid index")
    return code == "ValidationException" and (
        "does not have the specified index" in message or "backfilling" in message
    )


def translate(operation: str, err: ClientError | BotoCoreError) -> Exception:
    """The one translation of a DynamoDB error into the store port's own: a lost condition
    (with the item as it now is), a lost transaction (with the index and item of the failed
    condition), an item over 400 KB, a reason that passes (throttling, a timeout, a 5xx, a
    transaction cancelled for capacity or a conflict), or the error itself (a bug)."""
    unchanged: Exception = err
    if isinstance(err, BotoCoreError):  # connection and read timeouts, endpoint errors
        return StoreUnavailable(f"{operation}: {err}")
    code = _code(err)
    if code == "ConditionalCheckFailedException":
        return ConditionFailed(from_attr(err.response.get("Item")))
    if _too_large(err):
        return ItemTooLarge(str(err))
    if _index_not_ready(err):
        return StoreUnavailable(f"{operation}: an index is not there yet (an upgrade?): {err}")
    if code == "TransactionCanceledException":
        reasons = err.response.get("CancellationReasons", [])
        for i, reason in enumerate(reasons):
            if reason.get("Code") == "ConditionalCheckFailed":
                return TransactionConflict(i, from_attr(reason.get("Item")))
        codes = {str(r.get("Code")) for r in reasons} - {"None"}
        if codes and codes <= TRANSIENT_REASONS:
            throttled = bool(codes & {"ThrottlingError", "ProvisionedThroughputExceeded"})
            return StoreUnavailable(
                f"{operation}: cancelled ({sorted(codes)})", throttled=throttled
            )
        return unchanged
    if code in TRANSIENT:
        return StoreUnavailable(f"{operation}: {err}", throttled=code in THROTTLING)
    return unchanged


class DynamoStore:
    """The state store on one DynamoDB table (layout in docs/architecture.md).

    Every SDK call goes through `_call`, which translates its errors once (`translate`).
    """

    def __init__(self, client: Any, table_name: str, *, rng: random.Random | None = None) -> None:
        self._client = client
        self._table = table_name
        self._rng = rng or random.Random()

    def _call(self, operation: str, **params: Any) -> Any:
        """One SDK call; its error translated into the port's own (see `translate`)."""
        try:
            return getattr(self._client, operation)(**params)
        except (ClientError, BotoCoreError) as err:
            translated = translate(operation, err)
            if translated is err:
                raise
            raise translated from err

    def create(self, items: Sequence[Item]) -> None:
        request = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_attr(item),
                    "ConditionExpression": "attribute_not_exists(pk)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
            for item in items
        ]
        self._transact(request)

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        actions = []
        for pk, sk, update, condition in writes:
            expr = _Expr()
            action: dict[str, Any] = {
                "TableName": self._table,
                "Key": to_attr({"pk": pk, "sk": sk}),
                "UpdateExpression": expr.update(update),
                "ConditionExpression": expr.condition(condition),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
            action.update(expr.params())
            actions.append({"Update": action})
        self._transact(actions)

    def _transact(self, actions: list[dict[str, Any]]) -> None:
        """A transaction, retried with jittered backoff while it is cancelled for a reason
        that passes (botocore retries none of them); then StoreUnavailable, which callers
        treat like any throttled call: nothing was written, read again later."""
        for attempt in range(TRANSACTION_RETRIES):
            try:
                self._call("transact_write_items", TransactItems=actions)
                return
            except StoreUnavailable:
                if attempt == TRANSACTION_RETRIES - 1:
                    raise
                ceiling = TRANSACTION_BACKOFF_MS * 2**attempt
                time.sleep(self._rng.uniform(0, ceiling) / 1000)

    def put_new(self, item: Item) -> None:
        self._call(
            "put_item",
            TableName=self._table,
            Item=to_attr(item),
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        expr = _Expr()
        params: dict[str, Any] = {
            "TableName": self._table,
            "Key": to_attr({"pk": pk, "sk": sk}),
            "UpdateExpression": expr.update(update),
            "ReturnValues": "ALL_NEW",
        }
        if condition is not None:
            params["ConditionExpression"] = expr.condition(condition)
            params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        params.update(expr.params())
        response = self._call("update_item", **params)
        item = from_attr(response["Attributes"])
        assert item is not None
        return item

    def load(self, pk: str) -> list[Item]:
        items: list[Item] = []
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ConsistentRead": True,
        }
        while True:
            response = self._call("query", **params)
            items += [i for i in (from_attr(a) for a in response.get("Items", [])) if i]
            if "LastEvaluatedKey" not in response:
                return items
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def get(self, pk: str, sk: str) -> Item | None:
        response = self._call(
            "get_item",
            TableName=self._table,
            Key=to_attr({"pk": pk, "sk": sk}),
            ConsistentRead=True,
        )
        return from_attr(response.get("Item"))

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        """One consistent BatchGetItem; keys DynamoDB leaves unprocessed (throttling) are
        asked again with jittered backoff, then StoreUnavailable."""
        if len(keys) > MAX_BATCH_GET:
            raise ValueError(f"at most {MAX_BATCH_GET} keys in one batch read")
        request: dict[str, Any] = {
            self._table: {
                "Keys": [to_attr({"pk": pk, "sk": sk}) for pk, sk in dict.fromkeys(keys)],
                "ConsistentRead": True,
            }
        }
        items: list[Item] = []
        for attempt in range(TRANSACTION_RETRIES + 1):
            response = self._call("batch_get_item", RequestItems=request)
            items += [
                i for i in (from_attr(a) for a in response["Responses"].get(self._table, [])) if i
            ]
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return items
            if attempt < TRANSACTION_RETRIES:
                time.sleep(self._rng.uniform(0, TRANSACTION_BACKOFF_MS * 2**attempt) / 1000)
        raise StoreUnavailable("BatchGetItem: keys left unprocessed", throttled=True)

    def query_due(
        self, shard: str, until_ms: int, limit: int, cursor: dict[str, object] | None
    ) -> DuePage:
        idx = TABLE.watch_index
        params: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": idx.name,
            "KeyConditionExpression": "#s = :s AND #d <= :t",
            "ExpressionAttributeNames": {"#s": idx.partition_key, "#d": idx.sort_key},
            "ExpressionAttributeValues": {":s": {"S": shard}, ":t": {"N": str(until_ms)}},
            "Limit": limit,
        }
        if cursor:
            params["ExclusiveStartKey"] = cursor
        response = self._call("query", **params)
        entries = []
        for attrs in response.get("Items", []):
            item = from_attr(attrs) or {}
            entries.append(DueEntry(workflow_id_of(str(item["pk"])), int(item[idx.sort_key])))
        return DuePage(entries, response.get("LastEvaluatedKey"), int(response.get("Count", 0)))

    def _range_params(
        self, index: IndexSpec, partition: str, low: str, high: str
    ) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "IndexName": index.name,
            "KeyConditionExpression": "#p = :p AND #s BETWEEN :lo AND :hi",
            "ExpressionAttributeNames": {"#p": index.partition_key, "#s": index.sort_key},
            "ExpressionAttributeValues": {
                ":p": {"S": partition},
                ":lo": {"S": low},
                ":hi": {"S": high},
            },
        }

    def query_range(
        self,
        index: IndexSpec,
        partition: str,
        low: str,
        high: str,
        *,
        limit: int,
        newest_first: bool,
        cursor: dict[str, object] | None,
    ) -> ListPage:
        params = self._range_params(index, partition, low, high)
        params["ScanIndexForward"] = not newest_first
        params["Limit"] = limit
        if cursor:
            params["ExclusiveStartKey"] = cursor
        response = self._call("query", **params)
        items = [i for i in (from_attr(a) for a in response.get("Items", [])) if i]
        return ListPage(items, response.get("LastEvaluatedKey"))

    def query_after(self, pk: str, after_sk: str, limit: int) -> ListPage:
        values: dict[str, Any] = {":p": {"S": pk}}
        condition = "pk = :p"
        if after_sk:  # DynamoDB takes no empty key value: "" is the partition's start
            condition += " AND sk > :s"
            values[":s"] = {"S": after_sk}
        response = self._call(
            "query",
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=values,
            Limit=limit,
            # As every read of the table's own items here: a map's output and its undo order
            # are read right after its items' last writes (an eventually consistent Query may
            # miss them: the last item's output read as null).
            ConsistentRead=True,
        )
        items = [i for i in (from_attr(a) for a in response.get("Items", [])) if i]
        return ListPage(items, response.get("LastEvaluatedKey"))

    def count_range(self, index: IndexSpec, partition: str, low: str, high: str, cap: int) -> int:
        """Select=COUNT pages (each reads at most 1 MB) until the range ends or `cap`."""
        params = self._range_params(index, partition, low, high)
        params["Select"] = "COUNT"
        counted = 0
        while counted < cap:
            response = self._call("query", **params)
            counted += int(response.get("Count", 0))
            if not response.get("LastEvaluatedKey"):
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return min(counted, cap)
