"""The local stack's moto server (`shepherd_cli.moto_local`) behaves as DynamoDB does where
plain moto does not; each gap is shown on plain moto first (if moto closes it, that test
fails and its patch can go), then its absence with the patch.

Atomic requests: moto creates an item an UpdateItem names before applying the update to it,
and answers in threads: a Query in between read a step item with keys only (a 500 from GET
/workflows/{id} in `make demo`). Those tests widen that window (moto's update executor sleeps)
and read the partition while items are being created.

Memory, transactions, the stream and its iterators: see the module's docstring.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
from moto.dynamodb.responses import DynamoHandler
from moto.server import ThreadedMotoServer
from shepherd_cli import moto_local
from shepherd_cli.local import free_port
from shepherd_cli.moto_local import DYNAMODB_LOCK, serialized

TABLE = "moto-local-atomicity"
CREATED = 6


@pytest.fixture
def slow_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    real = UpdateExpressionExecutor.execute

    def slow(self: Any, node: Any = None) -> None:
        time.sleep(0.05)  # between moto's keys-only item and the update applied to it
        real(self, node)

    monkeypatch.setattr(UpdateExpressionExecutor, "execute", slow)


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    port = free_port()
    server = ThreadedMotoServer("127.0.0.1", port, verbose=False)
    server.start()
    client = boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    client.create_table(
        TableName=TABLE,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        yield client
    finally:
        client.delete_table(TableName=TABLE)
        server.stop()


def _half_made_items_read(client: Any) -> int:
    """Create step items by UpdateItem (as a claim does) while reading their partition."""

    def create() -> None:
        for i in range(CREATED):
            client.update_item(
                TableName=TABLE,
                Key={"pk": {"S": "WF#1"}, "sk": {"S": f"S#{i}"}},
                UpdateExpression="SET #s = :s, attempt = :a",
                ConditionExpression="attribute_not_exists(pk)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": "RUNNING"}, ":a": {"N": "1"}},
            )

    writer = threading.Thread(target=create)
    writer.start()
    half_made = 0
    deadline = time.monotonic() + 30
    while writer.is_alive() and time.monotonic() < deadline:
        items = client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "WF#1"}},
            ConsistentRead=True,
        )["Items"]
        half_made += sum("status" not in item for item in items)
    writer.join(timeout=30)
    final = client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "WF#1"}},
    )["Items"]
    assert len(final) == CREATED and all("status" in item for item in final)
    return half_made


@pytest.mark.usefixtures("slow_updates")
def test_plain_moto_lets_a_read_see_an_item_an_update_is_still_making(dynamodb: Any) -> None:
    """The gap (if moto closes it, this fails and `moto_local` can go)."""
    assert _half_made_items_read(dynamodb) > 0


@pytest.mark.usefixtures("slow_updates")
def test_the_local_stacks_moto_never_shows_a_half_made_item(
    monkeypatch: pytest.MonkeyPatch, dynamodb: Any
) -> None:
    monkeypatch.setattr(
        DynamoHandler, "call_action", serialized(DynamoHandler.call_action, DYNAMODB_LOCK)
    )
    assert _half_made_items_read(dynamodb) == 0


# ------------------------------------------------------------- memory, transactions, streams


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every moto_local patch, undone after the test."""
    moto_local.track_weakly(monkeypatch.setattr)
    moto_local.keep_tables_in_transactions(monkeypatch.setattr)
    moto_local.expire_shard_iterators(patch=monkeypatch.setattr)


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """In-process moto (its backends are the ones the patches change) with one streamed table."""
    from moto import mock_aws

    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        clients = {name: session.client(name) for name in ("dynamodb", "dynamodbstreams")}
        clients["dynamodb"].create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        yield clients


def _put(client: Any, sk: str, **attrs: str) -> None:
    item = {"pk": {"S": "WF#1"}, "sk": {"S": sk}, **{k: {"S": v} for k, v in attrs.items()}}
    client.put_item(TableName=TABLE, Item=item)


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "WF#1"}, "sk": {"S": sk}}


def _cancelled_transaction(client: Any) -> None:
    """A claim that loses to another writer: an update, a new item, then a failed check."""
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _key("S#0"),
                        "UpdateExpression": "SET #s = :s",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": {":s": {"S": "RUNNING"}},
                    }
                },
                {"Put": {"TableName": TABLE, "Item": {**_key("S#new"), "status": {"S": "x"}}}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("S#missing"),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )


def _live(kind: type) -> int:
    import gc

    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def _reads_and_transactions(client: Any) -> None:
    for i in range(10):
        _put(client, f"S#{i}", status="PENDING", pad="p" * 100)
    for _ in range(30):
        client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "WF#1"}},
        )
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _key("S#0"),
                        "UpdateExpression": "SET attempt = :a",
                        "ExpressionAttributeValues": {":a": {"S": "1"}},
                    }
                }
            ]
        )


def test_plain_moto_keeps_every_item_copy_and_table_copy_it_ever_made(
    aws: dict[str, Any],
) -> None:
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table

    _reads_and_transactions(aws["dynamodb"])
    assert _live(Table) > 1  # a copy per transaction
    assert _live(Item) > 300  # 10 items, a copy of each per query, a table copy's items


@pytest.mark.usefixtures("patched")
def test_the_local_stacks_moto_frees_what_it_no_longer_uses(aws: dict[str, Any]) -> None:
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table

    _reads_and_transactions(aws["dynamodb"])
    assert _live(Table) == 1
    assert _live(Item) <= 12  # the 10 items (and what a request still holds)
    listed = Item.instances_tracked  # type: ignore[attr-defined]
    assert len(list(listed)) == _live(Item)  # moto's list still names the ones in use


def test_plain_moto_swaps_the_table_for_a_copy_on_a_cancelled_transaction(
    aws: dict[str, Any],
) -> None:
    from moto.dynamodb.models import dynamodb_backends

    _put(aws["dynamodb"], "S#0", status="PENDING")
    tables = dynamodb_backends["123456789012"]["us-east-1"].tables
    before: Any = tables[TABLE]
    _cancelled_transaction(aws["dynamodb"])
    assert tables[TABLE] is not before


@pytest.mark.usefixtures("patched")
def test_a_cancelled_transaction_keeps_the_table_and_takes_back_all_it_wrote(
    aws: dict[str, Any],
) -> None:
    from moto.dynamodb.models import dynamodb_backends

    client = aws["dynamodb"]
    _put(client, "S#0", status="PENDING")
    tables = dynamodb_backends["123456789012"]["us-east-1"].tables
    before: Any = tables[TABLE]
    shard: Any = before.stream_shard
    stream_length = len(shard.items)
    _cancelled_transaction(client)
    assert tables[TABLE] is before
    assert client.get_item(TableName=TABLE, Key=_key("S#0"))["Item"]["status"] == {"S": "PENDING"}
    assert "Item" not in client.get_item(TableName=TABLE, Key=_key("S#new"))
    assert len(shard.items) == stream_length  # no record of what was undone
    # A transaction that passes still writes, and its records follow on.
    client.transact_write_items(
        TransactItems=[{"Put": {"TableName": TABLE, "Item": {**_key("S#new"), "v": {"S": "1"}}}}]
    )
    assert client.get_item(TableName=TABLE, Key=_key("S#new"))["Item"]["v"] == {"S": "1"}
    assert len(shard.items) == stream_length + 1


def _stream_keys_after_a_cancelled_transaction(aws: dict[str, Any]) -> list[str]:
    """A stream reader (the relay's) reads, a transaction is cancelled, an item is written:
    what does the reader read next?"""
    from shepherd_cli.streams import StreamReader, stream_arn

    client = aws["dynamodb"]
    reader = StreamReader(aws["dynamodbstreams"], stream_arn(client, TABLE))
    _put(client, "S#0", status="PENDING")
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in reader.read()] == ["S#0"]
    _cancelled_transaction(client)
    _put(client, "S#after", status="PENDING")
    return [r["dynamodb"]["Keys"]["sk"]["S"] for r in reader.read()]


def test_plain_moto_shows_a_reader_the_undone_writes_and_nothing_after(
    aws: dict[str, Any],
) -> None:
    # The reader's iterator is on the shard of the table moto swapped out: it reads the writes
    # the cancelled transaction made there, and never the table's later records.
    assert _stream_keys_after_a_cancelled_transaction(aws) == ["S#0", "S#new"]


@pytest.mark.usefixtures("patched")
def test_a_stream_reader_reads_on_after_a_cancelled_transaction(aws: dict[str, Any]) -> None:
    assert _stream_keys_after_a_cancelled_transaction(aws) == ["S#after"]


def _iterators_kept(aws: dict[str, Any], polls: int) -> int:
    from moto.dynamodbstreams.models import dynamodbstreams_backends
    from shepherd_cli.streams import StreamReader, stream_arn

    reader = StreamReader(aws["dynamodbstreams"], stream_arn(aws["dynamodb"], TABLE))
    for _ in range(polls):
        reader.read()
    return len(dynamodbstreams_backends["123456789012"]["us-east-1"].shard_iterators)


def test_plain_moto_keeps_every_shard_iterator(aws: dict[str, Any]) -> None:
    assert _iterators_kept(aws, 50) > 50


def test_shard_iterators_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws

    moto_local.expire_shard_iterators(0.2, monkeypatch.setattr)
    with mock_aws():  # the backends made now drop iterators 0.2 s after making them
        session = boto3.session.Session(region_name="us-east-1")
        dynamodb = session.client("dynamodb")
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        clients = {"dynamodb": dynamodb, "dynamodbstreams": session.client("dynamodbstreams")}
        assert _iterators_kept(clients, 10) > 10
        time.sleep(0.3)
        assert _iterators_kept(clients, 3) <= 5  # the earlier ones expired


# ------------------------------------------------------------------ queries by partition


@pytest.fixture
def indexed_table(aws: dict[str, Any]) -> Any:
    """The local stack's own table (both indexes) in in-process moto."""
    from shepherd_cli.resources import create_table

    create_table(aws["dynamodb"], "shepherd-table")
    return aws["dynamodb"]


def _writes(client: Any) -> None:
    """Puts, updates that move items between index partitions, deletes, transactions."""
    for i in range(40):
        client.put_item(
            TableName="shepherd-table",
            Item={
                "pk": {"S": f"WF#{i % 8}"},
                "sk": {"S": f"S#{i:02d}"},
                "watch_shard": {"S": f"W#{i % 3}"},
                "due_at": {"N": str(1000 - i)},
            },
        )
    for i in range(0, 40, 4):  # leave the watch index, or move to another shard
        key = {"pk": {"S": f"WF#{i % 8}"}, "sk": {"S": f"S#{i:02d}"}}
        expression = "REMOVE watch_shard" if i % 8 else "SET watch_shard = :w"
        values = {} if i % 8 else {"ExpressionAttributeValues": {":w": {"S": "W#9"}}}
        client.update_item(
            TableName="shepherd-table", Key=key, UpdateExpression=expression, **values
        )
    client.delete_item(TableName="shepherd-table", Key={"pk": {"S": "WF#1"}, "sk": {"S": "S#01"}})
    client.transact_write_items(  # a transaction that lands
        TransactItems=[
            {
                "Put": {
                    "TableName": "shepherd-table",
                    "Item": {
                        "pk": {"S": "WF#1"},
                        "sk": {"S": "S#99"},
                        "watch_shard": {"S": "W#0"},
                        "due_at": {"N": "1"},
                    },
                }
            }
        ]
    )
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(  # and one undone: its put must not stay in the index
            TransactItems=[
                {
                    "Put": {
                        "TableName": "shepherd-table",
                        "Item": {
                            "pk": {"S": "WF#2"},
                            "sk": {"S": "S#98"},
                            "watch_shard": {"S": "W#0"},
                            "due_at": {"N": "2"},
                        },
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": "shepherd-table",
                        "Key": {"pk": {"S": "none"}, "sk": {"S": "none"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )


def _queries(client: Any) -> dict[str, list[str]]:
    """Every partition of the table and of the watch index, one page of 5 and all of it."""
    out: dict[str, list[str]] = {}
    for w in ("W#0", "W#1", "W#2", "W#9", "W#none"):
        for limit in (5, 100):
            items = client.query(
                TableName="shepherd-table",
                IndexName="watch",
                KeyConditionExpression="watch_shard = :w AND due_at < :d",
                ExpressionAttributeValues={":w": {"S": w}, ":d": {"N": "999"}},
                Limit=limit,
            )["Items"]
            out[f"{w}/{limit}"] = [i["sk"]["S"] for i in items]
    for p in range(9):
        items = client.query(
            TableName="shepherd-table",
            KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": {"S": f"WF#{p}"}, ":s": {"S": "S#"}},
            ScanIndexForward=False,
        )["Items"]
        out[f"WF#{p}"] = [i["sk"]["S"] for i in items]
    return out


def test_queries_by_partition_answer_as_moto_does_and_never_walk_the_table(
    indexed_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.models.table import Table

    _writes(indexed_table)
    expected = _queries(indexed_table)  # plain moto's answers, walking the table
    assert expected["W#0/5"] and expected["WF#1"] and expected["W#9/100"]
    moto_local.keep_tables_in_transactions(monkeypatch.setattr)
    moto_local.query_partitions(monkeypatch.setattr)
    assert _queries(indexed_table) == expected  # partitions made from the table as it is
    _writes(indexed_table)  # the same writes again, now followed by the partitions

    def walk(self: Any) -> Any:
        raise AssertionError("a Query walked the whole table")

    monkeypatch.setattr(Table, "all_items", walk)
    assert _queries(indexed_table) == expected


def test_plain_moto_walks_the_whole_table_for_a_query(
    indexed_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.models.table import Table

    walks: list[int] = []
    real = Table.all_items

    def counted(self: Any) -> Any:
        walks.append(1)
        return real(self)

    monkeypatch.setattr(Table, "all_items", counted)
    _queries(indexed_table)
    assert len(walks) == 19


# ----------------------------------------------------------------- stream records packed


def _deep_size(value: Any, seen: set[int] | None = None) -> int:
    """Bytes held by a value and everything it holds (dicts, lists, objects' attributes)."""
    import sys

    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple | set):
        size += sum(_deep_size(v, seen) for v in value)
    elif hasattr(value, "__dict__"):
        size += _deep_size(vars(value), seen)
    return size


def _stream_after_writes(aws: dict[str, Any]) -> tuple[list[Any], int]:
    """A step's life in the stream (creation, updates with large attributes, a delete):
    what a reader reads, and the bytes moto holds for the stream's records."""
    from moto.dynamodb.models import dynamodb_backends

    client = aws["dynamodb"]
    for i in range(60):
        client.put_item(
            TableName=TABLE,
            Item={
                **_key(f"S#{i % 6}"),
                "status": {"S": "RUNNING"},
                "attempt": {"N": str(i)},
                "history": {
                    "L": [{"M": {"a": {"N": str(n)}, "o": {"S": "ok" * 40}}} for n in range(12)]
                },
                "blob": {"B": b"\x00\xff" * 64},
                "tags": {"SS": ["a", "b"]},
            },
        )
    client.delete_item(TableName=TABLE, Key=_key("S#0"))
    shard: Any = dynamodb_backends["123456789012"]["us-east-1"].tables[TABLE].stream_shard
    held = sum(_deep_size(vars(record)) for record in shard.items)
    from shepherd_cli.streams import StreamReader, stream_arn

    records = StreamReader(aws["dynamodbstreams"], stream_arn(client, TABLE)).read()
    for record in records:
        record.pop("eventID")
        record.pop("eventSourceARN")
    return records, held


def test_packed_stream_records_read_as_moto_gives_them_and_take_a_fraction_of_the_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto import mock_aws

    results = []
    for packed in (False, True):
        if packed:
            moto_local.pack_stream_records(monkeypatch.setattr)
        with mock_aws():
            session = boto3.session.Session(region_name="us-east-1")
            clients = {name: session.client(name) for name in ("dynamodb", "dynamodbstreams")}
            clients["dynamodb"].create_table(
                TableName=TABLE,
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            )
            results.append(_stream_after_writes(clients))
    (plain, plain_bytes), (packed, packed_bytes) = results
    assert len(plain) == 61
    for a, b in zip(plain, packed, strict=True):
        # The same records, their times aside (moto's SizeBytes counts the time's digits too).
        for record in (a, b):
            record["dynamodb"].pop("ApproximateCreationDateTime")
            record["dynamodb"].pop("SizeBytes")
        assert a == b
    assert packed_bytes < plain_bytes / 3, (packed_bytes, plain_bytes)


# ------------------------------------------------------------- presigned POST policies


@pytest.fixture
def s3_server() -> Iterator[Any]:
    port = free_port()
    server = ThreadedMotoServer("127.0.0.1", port, verbose=False)
    server.start()
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    client.create_bucket(Bucket="payloads")
    try:
        yield client
    finally:
        server.stop()


def _presign(s3: Any, size: int, expires: int = 300) -> dict[str, Any]:
    """As the payload store presigns an upload (`shepherd.adapters.s3`)."""
    post: dict[str, Any] = s3.generate_presigned_post(
        Bucket="payloads",
        Key="up/1",
        Fields={"Content-Type": "application/json"},
        Conditions=[{"Content-Type": "application/json"}, ["content-length-range", size, size]],
        ExpiresIn=expires,
    )
    return post


def _refusals(s3: Any) -> dict[str, str]:
    """Each way an upload breaks its policy: what the POST answers ("ok" if stored)."""
    from shepherd_cli.client import CliError, post_form

    def attempt(post: dict[str, Any], data: bytes, **fields: str) -> str:
        try:
            post_form(post["url"], {**post["fields"], **fields}, data, timeout=30)
            return "ok"
        except CliError as exc:
            return str(exc).split(" b'")[0]

    good = _presign(s3, 4)
    return {
        "right": attempt(good, b"abcd"),
        "too large": attempt(good, b"abcde"),
        "too small": attempt(good, b"abc"),
        "other type": attempt(good, b"abcd", **{"Content-Type": "text/html"}),
        "other key": attempt(good, b"abcd", key="up/2"),
        "extra field": attempt(good, b"abcd", acl="public-read"),
        "expired": attempt(_presign(s3, 4, expires=-10), b"abcd"),
    }


def test_plain_motos_s3_stores_any_presigned_post(s3_server: Any) -> None:
    assert set(_refusals(s3_server).values()) == {"ok"}


def test_the_local_stacks_s3_enforces_presigned_post_policies(
    s3_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    moto_local.enforce_post_policies(monkeypatch.setattr)
    assert _refusals(s3_server) == {
        "right": "ok",
        "too large": "the upload was refused: 400",
        "too small": "the upload was refused: 400",
        "other type": "the upload was refused: 403",
        "other key": "the upload was refused: 403",
        "extra field": "the upload was refused: 403",
        "expired": "the upload was refused: 403",
    }


# ------------------------------------------------------------------ a COUNT query counts


def _list_counts(client: Any) -> dict[str, int]:
    """The list counts' queries (as `DynamoStore.count_range` sends them), and a few that are
    not theirs: a filtered COUNT, a limited one, an items query."""
    out: dict[str, int] = {}
    for shard in ("OWNER#o#0", "OWNER#o#1", "OWNER#none#0"):
        for low, high in (("A", "Z"), ("FAILED#", "FAILED#~"), ("RUNNING#0005", "RUNNING#~")):
            for extra in ({}, {"Limit": 3}, {"FilterExpression": "attribute_exists(pk)"}):
                answer = client.query(
                    TableName="shepherd-table",
                    IndexName="by_status",
                    Select="COUNT",
                    KeyConditionExpression="#p = :p AND #s BETWEEN :lo AND :hi",
                    ExpressionAttributeNames={"#p": "list_pk", "#s": "status_sk"},
                    ExpressionAttributeValues={
                        ":p": {"S": shard},
                        ":lo": {"S": low},
                        ":hi": {"S": high},
                    },
                    **extra,
                )
                out[f"{shard} {low}..{high} {sorted(extra)}"] = answer["Count"]
    return out


def _list_entries(client: Any) -> None:
    for i in range(60):
        status = ("RUNNING", "FAILED", "SUCCEEDED")[i % 3]
        client.put_item(
            TableName="shepherd-table",
            Item={
                "pk": {"S": f"WF#{i}"},
                "sk": {"S": "WF"},
                "list_pk": {"S": f"OWNER#o#{i % 2}"},
                "status_sk": {"S": f"{status}#{i:013d}#wf{i}"},
            },
        )


def test_a_count_query_is_counted_as_moto_counts_it_without_copying_the_partition(
    indexed_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.models.dynamo_type import Item

    _list_entries(indexed_table)
    expected = _list_counts(indexed_table)  # plain moto's answers
    assert expected["OWNER#o#0 A..Z []"] == 30 and expected["OWNER#o#1 FAILED#..FAILED#~ []"]
    moto_local.keep_tables_in_transactions(monkeypatch.setattr)
    moto_local.query_partitions(monkeypatch.setattr)
    moto_local.count_queries(monkeypatch.setattr)
    copies: list[int] = []
    real_copy = Item.__deepcopy__

    def copied(self: Any, memo: Any) -> Any:
        copies.append(1)
        return real_copy(self, memo)

    monkeypatch.setattr(Item, "__deepcopy__", copied)
    assert _list_counts(indexed_table) == expected
    plain_queries = len(expected) * 2 // 3  # the limited and filtered ones go to moto
    assert len(copies) <= plain_queries * 30  # the list counts' own copied no item
    copies.clear()
    for key in [k for k in expected if k.endswith(" []")]:
        shard, span, _ = key.split(" ")
        low, high = span.split("..")
        indexed_table.query(
            TableName="shepherd-table",
            IndexName="by_status",
            Select="COUNT",
            KeyConditionExpression="#p = :p AND #s BETWEEN :lo AND :hi",
            ExpressionAttributeNames={"#p": "list_pk", "#s": "status_sk"},
            ExpressionAttributeValues={":p": {"S": shard}, ":lo": {"S": low}, ":hi": {"S": high}},
        )
    assert copies == []
