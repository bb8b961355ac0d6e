"""Request accounting: a botocore event hook that counts every AWS request and what it bills.

Install it on a boto3 session *before* the engine builds its clients (every client copies its
session's event handlers when it is created), or on one client's `meta.events`:

    meter = Meter()
    meter.install(boto3.DEFAULT_SESSION.events)
    with meter.component("agent"):
        ...  # every request made here is tallied under "agent"

DynamoDB write units need the item before and after each write: the hook reads them from the
same endpoint with its own, unhooked client (a consistent GetItem per item, not counted). It
never changes a request or a response.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shepherd_bench import units
from shepherd_bench.units import Index, WireItem

DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
STATE = "shepherd_bench"


@dataclass
class Tally:
    """What one component's requests cost, by kind. Units, not dollars."""

    requests: Counter[str] = field(default_factory=Counter)  # "dynamodb.UpdateItem" -> calls
    wru: Counter[str] = field(default_factory=Counter)  # table write units by label
    gsi_wru: Counter[str] = field(default_factory=Counter)  # "watch add" -> units
    rru: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    items_read: Counter[str] = field(default_factory=Counter)  # label -> items
    sqs: Counter[str] = field(default_factory=Counter)  # operation -> billed requests
    sqs_messages: Counter[str] = field(default_factory=Counter)  # queue name -> messages
    events: Counter[str] = field(default_factory=Counter)  # detail-type -> billed events
    failed_writes: int = 0

    def add(self, other: Tally) -> None:
        for name in ("requests", "wru", "gsi_wru", "items_read", "sqs", "sqs_messages"):
            getattr(self, name).update(getattr(other, name))
        for label, value in other.rru.items():
            self.rru[label] += value
        self.events.update(other.events)
        self.failed_writes += other.failed_writes

    @property
    def total_wru(self) -> int:
        return sum(self.wru.values()) + sum(self.gsi_wru.values())

    @property
    def total_rru(self) -> float:
        return float(sum(self.rru.values()))

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": dict(sorted(self.requests.items())),
            "wru": dict(sorted(self.wru.items())),
            "gsi_wru": dict(sorted(self.gsi_wru.items())),
            "rru": dict(sorted(self.rru.items())),
            "items_read": dict(sorted(self.items_read.items())),
            "sqs": dict(sorted(self.sqs.items())),
            "sqs_messages": dict(sorted(self.sqs_messages.items())),
            "events": dict(sorted(self.events.items())),
            "failed_writes": self.failed_writes,
        }


@dataclass(frozen=True)
class TableInfo:
    keys: tuple[str, ...]
    indexes: tuple[Index, ...]


def describe(client: Any, table: str) -> TableInfo:
    """Key schema and global secondary indexes, from DescribeTable."""
    desc = client.describe_table(TableName=table)["Table"]
    keys = tuple(k["AttributeName"] for k in desc["KeySchema"])
    indexes = tuple(
        Index(
            g["IndexName"],
            tuple(k["AttributeName"] for k in g["KeySchema"]),
            g["Projection"]["ProjectionType"],
            tuple(g["Projection"].get("NonKeyAttributes", ())),
        )
        for g in desc.get("GlobalSecondaryIndexes", [])
    )
    return TableInfo(keys, indexes)


def _status(item: WireItem | None) -> str | None:
    if not item or "status" not in item:
        return None
    return str(next(iter(item["status"].values())))


def _key_of(item: Mapping[str, Any]) -> tuple[str, str]:
    return (str(item["pk"].get("S")), str(item["sk"].get("S")))


def _kind(key: Mapping[str, Any]) -> str:
    pk = str(next(iter(key.get("pk", {}).values()), ""))
    sk = str(next(iter(key.get("sk", {}).values()), ""))
    if pk.startswith("DEF#"):
        return "definition"
    if sk == "#WF":
        return "workflow"
    if sk.startswith("S#"):
        return "step"
    if sk.startswith("C#"):
        return "compensation"
    return "item"


def write_label(
    op: str, key: Mapping[str, Any], before: WireItem | None, after: WireItem | None
) -> str:
    """A readable name for one item write: what kind of item, which transition."""
    kind = _kind(key)
    verb = {"TransactWriteItems": "transact", "BatchWriteItem": "batch"}.get(op, op[:-4].lower())
    if before is None:
        return f"{kind} {verb}: create"
    if after is None:
        return f"{kind} {verb}: delete"
    old, new = _status(before), _status(after)
    if old != new:
        return f"{kind} {verb}: {old}->{new}"
    changed = sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))
    return f"{kind} {verb}: {old} ({', '.join(changed) or 'no change'})"


class Meter:
    """Counts requests by component, service and operation, and models the bill."""

    def __init__(self, reader: Callable[[], Any] | None = None) -> None:
        self._reader_factory = reader or _default_reader
        self._reader: Any = None
        self._tables: dict[str, TableInfo] = {}
        self._lock = threading.RLock()
        # Context variables, not thread-locals: each thread and each greenlet has its own (a
        # sweep the bench parks in a greenlet keeps counting as the supervisor while the
        # harness goes on as itself: `shepherd_bench.cost.Timeline`).
        self._component: contextvars.ContextVar[str] = contextvars.ContextVar(
            f"bench-component-{id(self)}", default="other"
        )
        self._paused: contextvars.ContextVar[bool] = contextvars.ContextVar(
            f"bench-paused-{id(self)}", default=False
        )
        self.tallies: dict[str, Tally] = {}
        self._installed: list[Any] = []

    # ------------------------------------------------------------------------- control

    def install(self, emitter: Any) -> None:
        emitter.register("before-parameter-build", self._before, unique_id=f"bench-b-{id(self)}")
        emitter.register("after-call", self._after, unique_id=f"bench-a-{id(self)}")
        self._installed.append(emitter)

    def uninstall(self) -> None:
        for emitter in self._installed:
            emitter.unregister("before-parameter-build", unique_id=f"bench-b-{id(self)}")
            emitter.unregister("after-call", unique_id=f"bench-a-{id(self)}")
        self._installed.clear()

    @contextlib.contextmanager
    def component(self, name: str) -> Iterator[None]:
        """Tally requests made by this thread (or greenlet) under `name`."""
        token = self._component.set(name)
        try:
            yield
        finally:
            self._component.reset(token)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        token = self._paused.set(True)
        try:
            yield
        finally:
            self._paused.reset(token)

    def reset(self) -> None:
        with self._lock:
            self.tallies = {}

    def total(self, components: Sequence[str] | None = None) -> Tally:
        out = Tally()
        with self._lock:
            for name, tally in self.tallies.items():
                if components is None or name in components:
                    out.add(tally)
        return out

    def tally(self, component: str) -> Tally:
        with self._lock:
            return self.tallies.setdefault(component, Tally())

    # --------------------------------------------------------------------------- hooks

    @property
    def reader(self) -> Any:
        if self._reader is None:
            self._reader = self._reader_factory()
        return self._reader

    def table(self, name: str) -> TableInfo:
        if name not in self._tables:
            self._tables[name] = describe(self.reader, name)
        return self._tables[name]

    def _get(self, table: str, key: Mapping[str, Any]) -> WireItem | None:
        item = self.reader.get_item(TableName=table, Key=dict(key), ConsistentRead=True)
        return item.get("Item")  # type: ignore[no-any-return]

    def _before(
        self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        if self._paused.get():
            return
        service = model.service_model.service_name
        state: dict[str, Any] = {
            "component": self._component.get(),
            "params": params,
            "service": service,
            "op": model.name,
        }
        if service == "dynamodb" and model.name in DYNAMODB_WRITES:
            state["writes"] = [
                (table, key, self._get(table, key)) for table, key, _ in self._targets(params)
            ]
        context[STATE] = state

    def _targets(self, params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
        """(table, key, action) of every item a write request touches."""
        out: list[tuple[str, dict[str, Any], str]] = []
        if "TransactItems" in params:
            for action in params["TransactItems"]:
                ((verb, body),) = action.items()
                out.append((body["TableName"], self._key(body), verb))
        elif "RequestItems" in params:
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    ((verb, body),) = request.items()
                    out.append((table, self._key({"TableName": table, **body}), verb))
        else:
            out.append((params["TableName"], self._key(params), "Single"))
        return out

    def _key(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if "Key" in body:
            return dict(body["Key"])
        info = self.table(body["TableName"])
        return {k: body["Item"][k] for k in info.keys}

    def _after(
        self,
        http_response: Any,
        parsed: dict[str, Any],
        model: Any,
        context: dict[str, Any],
        **_: Any,
    ) -> None:
        state = context.get(STATE)
        if state is None:
            return
        ok = int(getattr(http_response, "status_code", 200)) < 300
        with self._lock:
            tally = self.tally(state["component"])
            tally.requests[f"{state['service']}.{state['op']}"] += 1
            if state["service"] == "dynamodb":
                self._dynamodb(tally, state, parsed, ok)
            elif state["service"] == "sqs":
                self._sqs(tally, state, parsed)
            elif state["service"] == "events":
                entries = state["params"].get("Entries", [])
                for entry in entries:
                    tally.events[str(entry.get("DetailType"))] += units.chunks(
                        units.event_entry_size(entry)
                    )

    # ---------------------------------------------------------------------- per service

    def _dynamodb(
        self, tally: Tally, state: dict[str, Any], parsed: dict[str, Any], ok: bool
    ) -> None:
        op, params = state["op"], state["params"]
        if op in DYNAMODB_WRITES:
            self._writes(tally, op, params, state["writes"], parsed, ok)
        elif op in {"Query", "Scan"} and ok:
            items = parsed.get("Items", [])
            size = sum(units.item_size(i) for i in items)
            index = params.get("IndexName")
            label = f"{op.lower()} index {index}" if index else f"{op.lower()} table"
            consistent = bool(params.get("ConsistentRead")) and not index
            tally.rru[label] += units.read_units(size, consistent=consistent)
            tally.items_read[label] += int(parsed.get("ScannedCount", len(items)))
        elif op == "BatchGetItem" and ok:
            # Each key is read as a GetItem of its own: its item's size rounded up to 4 KB,
            # at least one unit even when the item does not exist.
            for table, request in params.get("RequestItems", {}).items():
                found = parsed.get("Responses", {}).get(table, [])
                by_key = {_key_of(i): i for i in found}
                consistent = bool(request.get("ConsistentRead"))
                for key in request.get("Keys", []):
                    item = by_key.get(_key_of(key))
                    label = f"batch get {_kind(key)}"
                    tally.rru[label] += units.read_units(
                        units.item_size(item), consistent=consistent
                    )
                    tally.items_read[label] += 1 if item else 0
        elif op == "GetItem" and ok:
            item = parsed.get("Item")
            kind = _kind(params["Key"])
            label = f"get {kind}"
            consistent = bool(params.get("ConsistentRead"))
            tally.rru[label] += units.read_units(units.item_size(item), consistent=consistent)
            tally.items_read[label] += 1 if item else 0

    def _writes(
        self,
        tally: Tally,
        op: str,
        params: dict[str, Any],
        before: list[tuple[str, dict[str, Any], WireItem | None]],
        parsed: dict[str, Any],
        ok: bool,
    ) -> None:
        transactional = op == "TransactWriteItems"
        code = str(parsed.get("Error", {}).get("Code", ""))
        if not ok:
            if code not in {"ConditionalCheckFailedException", "TransactionCanceledException"}:
                return  # validation and throttling errors consume nothing
            tally.failed_writes += 1
            for _table, key, image in before:
                # A failed transaction is modelled as its prepare phase: 1x per item, no commit.
                tally.wru[f"{_kind(key)} {op[:-4].lower()}: condition failed"] += (
                    units.failed_write_units(image)
                )
            return
        unprocessed = parsed.get("UnprocessedItems") or {}
        actions = [a for _, _, a in self._targets(params)]
        for (table, key, old), action in zip(before, actions, strict=True):
            if op == "BatchWriteItem" and any(
                _same_key(key, r) for r in unprocessed.get(table, [])
            ):
                continue
            if action == "ConditionCheck":
                tally.wru[f"{_kind(key)} condition check"] += units.item_write_units(
                    old, old, transactional=True
                )
                continue
            new = self._after_image(op, table, key, params, parsed, action)
            label = write_label(op, key, old, new)
            tally.wru[label] += units.item_write_units(old, new, transactional=transactional)
            info = self.table(table)
            for w in units.index_writes(old, new, info.indexes, info.keys):
                tally.gsi_wru[f"{w.index} {w.change}"] += w.units

    def _after_image(
        self,
        op: str,
        table: str,
        key: dict[str, Any],
        params: dict[str, Any],
        parsed: dict[str, Any],
        action: str,
    ) -> WireItem | None:
        if action in {"DeleteRequest", "Delete"} or op == "DeleteItem":
            return None
        if op == "PutItem":
            return params["Item"]  # type: ignore[no-any-return]
        if op == "UpdateItem" and params.get("ReturnValues") == "ALL_NEW":
            return parsed.get("Attributes")
        return self._get(table, key)

    def _sqs(self, tally: Tally, state: dict[str, Any], parsed: dict[str, Any]) -> None:
        op, params = state["op"], state["params"]
        queue = str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]
        if op == "SendMessageBatch":
            entries = params.get("Entries", [])
            tally.sqs[op] += units.sqs_send_requests(entries)
            tally.sqs_messages[queue] += len(entries)
        elif op == "SendMessage":
            tally.sqs[op] += units.chunks(units.sqs_message_size(params))
            tally.sqs_messages[queue] += 1
        elif op == "ReceiveMessage":
            body = sum(len(m.get("Body", "").encode()) for m in parsed.get("Messages", []))
            tally.sqs[op] += units.chunks(body)
        else:
            tally.sqs[op] += 1


def _same_key(key: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    ((_, body),) = request.items()
    found = body.get("Key") or body.get("Item") or {}
    return all(found.get(k) == v for k, v in key.items())


def _default_reader() -> Any:
    import boto3

    return boto3.session.Session().client("dynamodb")


@contextlib.contextmanager
def metered_table(table: str, region: str) -> Iterator[tuple[Any, Meter, Any]]:
    """A DynamoDB table on moto: a client of it whose every request the meter counts, the
    meter, and a client that is not counted (the meter reads item sizes through it; a
    benchmark sets its scene with it)."""
    import boto3
    from moto import mock_aws
    from shepherd_cli.resources import create_table

    with mock_aws():
        session = boto3.session.Session(region_name=region)
        raw, client = session.client("dynamodb"), session.client("dynamodb")
        create_table(raw, table)
        meter = Meter(reader=lambda: raw)
        meter.install(client.meta.events)
        yield client, meter, raw
