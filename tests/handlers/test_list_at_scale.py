"""GET /workflows, GET /workflows/counts and GET /workflows/series at 2,000 workflows with a
rare status (issues 29.1, 29.8), in process on moto: filters that never lie, signed and stable
pages, bounded counts, and a time series exact per bucket in 128 queries (or capped, saying so).

The 2,000 workflows are seeded once for the module (issue 36: they were seeded again for each
test); a test that writes takes back what it wrote. moto's Query walks every item of the table
for every query (hundreds here, 90 % of the module's time), so this moto reads each query's
partition only, as DynamoDB does: the local stack's patch (`shepherd_cli.moto_local`, 3 and 5),
which `tests/e2e/test_moto_local.py` proves answers every query as plain moto does."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_stack import ALICE, BOB, Stack
from shepherd import keys
from shepherd.adapters.dynamodb import to_attr
from shepherd.model import WorkflowRecord, WorkflowStatus
from support import ORDER

TOTAL = 2_000
RARE = 14  # failures, all among the oldest: the old code answered "No workflows match."
BASE = 1_750_000_000_000  # epoch ms of the oldest seeded start


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """One stack on moto for the module (the handlers' `stack`, module-scoped), whose queries
    read their partition only (the module's docstring)."""
    from moto import mock_aws
    from shepherd_cli import moto_local

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        patch.setenv("POWERTOOLS_SERVICE_NAME", "shepherd")
        moto_local.keep_tables_in_transactions(patch.setattr)
        moto_local.query_partitions(patch.setattr)
        with mock_aws():
            yield Stack(patch)


@pytest.fixture(scope="module")
def seeded(stack: Stack) -> tuple[Stack, list[dict[str, Any]]]:
    """ALICE's 2,000 workflows in the real item layout (written in batches: starting 2,000
    through the API would only slow the test down), 14 of them FAILED among the oldest.
    Shared by the module's tests: none may leave a workflow of its own behind."""
    started = stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    assert started[0] == 202, started
    client = stack.clients["dynamodb"]
    real = client.get_item(
        TableName="shepherd",
        Key={"pk": {"S": keys.wf_pk(started[2]["workflow_id"])}, "sk": {"S": keys.WF_SK}},
    )["Item"]
    owner = real["owner"]["S"]
    client.delete_item(TableName="shepherd", Key={"pk": real["pk"], "sk": real["sk"]})
    rng = random.Random(29)
    rows: list[dict[str, Any]] = []
    for n in range(TOTAL):
        status = "FAILED" if n < RARE * 10 and n % 10 == 3 else rng.choice(["SUCCEEDED", "RUNNING"])
        record = WorkflowRecord(
            workflow_id=f"wf{n:05d}",
            wf_type="provision_environment" if n % 7 == 0 else "order_fulfilment",
            def_hash="h",
            status=WorkflowStatus(status),
            input="{}",
            owner=owner,
            request_hash="r",
            created_at=BASE + n * 1_000,
            updated_at=BASE + n * 1_000,
            error='{"type": "CardDeclined", "message": "declined", "step": "charge_payment"}'
            if status == "FAILED"
            else None,
        )
        rows.append(record.to_item())
    for start in range(0, TOTAL, 25):
        client.batch_write_item(
            RequestItems={
                "shepherd": [
                    {"PutRequest": {"Item": to_attr(row)}} for row in rows[start : start + 25]
                ]
            }
        )
    return stack, rows


def walk(stack: Stack, caller: str = ALICE, **query: str) -> tuple[list[str], list[int]]:
    found: list[str] = []
    sizes: list[int] = []
    token: str | None = None
    for _ in range(200):
        q = dict(query, **({"next_token": token} if token else {}))
        status, _, reply = stack.api("GET", "/workflows", query=q, caller=caller)
        assert status == 200, reply
        found += [w["workflow_id"] for w in reply["items"]]
        sizes.append(len(reply["items"]))
        token = reply["next_token"]
        if token is None:
            break
    return found, sizes


def newest_first(rows: list[dict[str, Any]], **match: Any) -> list[str]:
    keep = [r for r in rows if all(r[k] == v for k, v in match.items())]
    return [keys.workflow_id_of(r["pk"]) for r in sorted(keep, key=lambda r: -r["created_at"])]


def test_a_rare_status_fills_its_pages(seeded: tuple[Stack, list[dict[str, Any]]]) -> None:
    stack, rows = seeded
    failed = newest_first(rows, status="FAILED")
    assert len(failed) == RARE
    status, _, first = stack.api("GET", "/workflows", query={"status": "FAILED", "limit": "20"})
    assert status == 200
    assert [w["workflow_id"] for w in first["items"]] == failed
    assert first["next_token"] is None
    row = first["items"][0]
    assert row["error"] == {"type": "CardDeclined", "message": "declined", "step": "charge_payment"}
    found, sizes = walk(stack, status="FAILED", limit="5")
    assert found == failed and sizes == [5, 5, 4]
    both = newest_first(rows, status="FAILED", wf_type="provision_environment")
    assert walk(stack, status="FAILED", type="provision_environment", limit="3")[0] == both
    # Nothing matches: one empty page, no token.
    status, _, none = stack.api("GET", "/workflows", query={"status": "PAUSED"})
    assert status == 200 and none == {"items": [], "next_token": None}


def test_time_range_and_oldest_first(seeded: tuple[Stack, list[dict[str, Any]]]) -> None:
    stack, rows = seeded
    after, before = BASE + 500_000, BASE + 899_000
    query = {"created_after": iso(after), "created_before": iso(before), "limit": "40"}
    found, sizes = walk(stack, **query)
    want = [
        keys.workflow_id_of(r["pk"])
        for r in sorted(rows, key=lambda r: -r["created_at"])
        if after <= r["created_at"] <= before
    ]
    assert found == want and len(want) == 400 and sizes == [40] * 10
    oldest, _ = walk(stack, sort="oldest", **query)
    assert oldest == list(reversed(want))
    status, _, reply = stack.api(
        "GET", "/workflows", query={"created_after": iso(before), "created_before": iso(after)}
    )
    assert status == 400 and reply["error"]["field"] == "created_after"
    status, _, reply = stack.api("GET", "/workflows", query={"created_after": "2026-01-01T00:00"})
    assert status == 400 and reply["error"]["field"] == "created_after"


def test_paging_is_stable_signed_and_owner_bound(
    seeded: tuple[Stack, list[dict[str, Any]]],
) -> None:
    stack, rows = seeded
    status, _, first = stack.api("GET", "/workflows", query={"limit": "100"})
    assert status == 200 and len(first["items"]) == 100
    # A workflow started now sorts before the position: later pages never shift.
    status, _, new = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    assert status == 202, new
    try:
        token = first["next_token"]
        later: list[str] = []
        for _ in range(40):
            status, _, page = stack.api(
                "GET", "/workflows", query={"limit": "100", "next_token": token}
            )
            assert status == 200
            later += [w["workflow_id"] for w in page["items"]]
            token = page["next_token"]
            if token is None:
                break
    finally:  # the other tests read the seeded 2,000 only
        stack.clients["dynamodb"].delete_item(
            TableName="shepherd",
            Key={"pk": {"S": keys.wf_pk(new["workflow_id"])}, "sk": {"S": keys.WF_SK}},
        )
    everything = newest_first(rows)
    assert [w["workflow_id"] for w in first["items"]] + later == everything
    # Signed: bound to the caller and every filter.
    token = first["next_token"]
    for query, caller in (
        ({"next_token": token, "limit": "100"}, BOB),
        ({"next_token": token, "sort": "oldest"}, ALICE),
        ({"next_token": token, "status": "FAILED"}, ALICE),
        ({"next_token": token, "created_after": iso(BASE)}, ALICE),
        ({"next_token": token[:-2] + ("AA" if not token.endswith("AA") else "BB")}, ALICE),
    ):
        status, _, reply = stack.api("GET", "/workflows", query=query, caller=caller)
        assert status == 400 and reply["error"]["field"] == "next_token", query


def test_counts_per_status_are_exact_below_the_cap(
    seeded: tuple[Stack, list[dict[str, Any]]],
) -> None:
    stack, rows = seeded
    status, _, reply = stack.api("GET", "/workflows/counts")
    assert status == 200, reply
    got = {c["status"]: c["count"] for c in reply["counts"]}
    for s in WorkflowStatus:
        assert got[s.value] == sum(1 for r in rows if r["status"] == s.value)
    assert reply["total"] == TOTAL and reply["capped"] is False
    typed = stack.api(
        "GET",
        "/workflows/counts",
        query={"type": "provision_environment", "created_before": iso(BASE + 99_000)},
    )[2]
    got = {c["status"]: c["count"] for c in typed["counts"]}
    assert got["FAILED"] == sum(
        1
        for r in rows
        if r["status"] == "FAILED"
        and r["wf_type"] == "provision_environment"
        and r["created_at"] <= BASE + 99_000
    )
    assert stack.api("GET", "/workflows/counts", caller=BOB)[2]["total"] == 0


def test_counts_stop_at_the_cap(
    seeded: tuple[Stack, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.engine import listing

    stack, _ = seeded
    monkeypatch.setattr(listing, "COUNT_CAP", 100)
    reply = stack.api("GET", "/workflows/counts")[2]
    got = {c["status"]: (c["count"], c["capped"]) for c in reply["counts"]}
    assert got["RUNNING"] == (100, True) and got["SUCCEEDED"] == (100, True)
    assert got["FAILED"] == (RARE, False)
    assert reply["capped"] is True


# ------------------------------------------------- GET /workflows/series: the console's chart


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every list-index query the API's engine makes (the series' cost)."""
    from shepherd_handlers import runtime

    store = runtime.engine().ports.store
    made: list[str] = []
    real = store.query_range

    def counted(index: Any, partition: str, *args: Any, **kwargs: Any) -> Any:
        made.append(f"{index.name} {partition}")
        return real(index, partition, *args, **kwargs)

    monkeypatch.setattr(store, "query_range", counted)
    return made


def _truth(
    rows: list[dict[str, Any]], after: int, width: int, count: int, **match: Any
) -> list[dict[str, int]]:
    out = [{"started": 0, "succeeded": 0, "failed": 0, "compensated": 0} for _ in range(count)]
    for r in rows:
        if not all(r[k] == v for k, v in match.items()):
            continue
        at = (r["created_at"] - after) // width
        if 0 <= at < count:
            out[at]["started"] += 1
            name = {"SUCCEEDED": "succeeded", "FAILED": "failed", "COMPENSATED": "compensated"}
            if r["status"] in name:
                out[at][name[r["status"]]] += 1
    return out


def _numbers(reply: dict[str, Any]) -> list[dict[str, int]]:
    names = ("started", "succeeded", "failed", "compensated")
    return [{n: b[n] for n in names} for b in reply["buckets"]]


def test_a_series_counts_every_bucket_exactly_in_128_queries(
    seeded: tuple[Stack, list[dict[str, Any]]], queries: list[str]
) -> None:
    stack, rows = seeded
    after, before = BASE, BASE + TOTAL * 1_000 - 1
    query = {"created_after": iso(after), "created_before": iso(before), "buckets": "20"}
    status, _, reply = stack.api("GET", "/workflows/series", query=query)
    assert status == 200, reply
    assert reply["created_after"] == "2025-06-15T15:06:40.000Z"
    assert reply["bucket_seconds"] == 100 and len(reply["buckets"]) == 20
    assert reply["buckets"][0]["start"] == "2025-06-15T15:06:40.000Z"
    assert reply["buckets"][0]["end"] == "2025-06-15T15:08:19.999Z"
    assert _numbers(reply) == _truth(rows, after, 100_000, 20)
    assert [b["started"] for b in reply["buckets"]] == [100] * 20
    assert sum(b["failed"] for b in reply["buckets"]) == RARE
    assert reply["capped"] is False and not any(b["capped"] for b in reply["buckets"])
    # One keys-only query per series (4) and shard (32), whatever the range holds.
    assert len(queries) == 4 * 32 == 128
    assert {q.split()[0] for q in queries} == {"by_owner", "by_status"}

    # Of one type: its own indexes, the same cost.
    queries.clear()
    typed_query = {**query, "type": "provision_environment"}
    typed = stack.api("GET", "/workflows/series", query=typed_query)[2]
    assert _numbers(typed) == _truth(rows, after, 100_000, 20, wf_type="provision_environment")
    assert len(queries) == 128 and {q.split()[0] for q in queries} == {"by_type", "by_type_status"}
    # Another caller's series is empty.
    other = stack.api("GET", "/workflows/series", query=query, caller=BOB)[2]
    assert sum(b["started"] for b in other["buckets"]) == 0


def test_a_series_stops_at_its_cap_and_says_which_buckets_are_at_least(
    seeded: tuple[Stack, list[dict[str, Any]]], queries: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd_handlers import series

    stack, rows = seeded
    monkeypatch.setattr(series, "SERIES_CAP", 320)  # 10 keys a shard, newest first
    after, before = BASE, BASE + TOTAL * 1_000 - 1
    query = {"created_after": iso(after), "created_before": iso(before), "buckets": "20"}
    reply = stack.api("GET", "/workflows/series", query=query)[2]
    truth = _truth(rows, after, 100_000, 20)
    got = _numbers(reply)
    capped = [b["capped"] for b in reply["buckets"]]
    assert reply["capped"] is True and capped[0] is True
    # The newest buckets are exact; from the first capped one back, all are (a prefix).
    assert capped == [True] * capped.count(True) + [False] * capped.count(False)
    assert capped.count(False) >= 1
    for bucket, want, at_least in zip(got, truth, capped, strict=True):
        if at_least:
            assert all(bucket[k] <= want[k] for k in want)
        else:
            assert bucket == want
    # At most 10 keys per series and shard were read, in at most one query each.
    assert sum(b["started"] for b in reply["buckets"]) <= 320
    assert len(queries) == 128


def test_a_series_refuses_what_is_not_a_time_range(
    seeded: tuple[Stack, list[dict[str, Any]]],
) -> None:
    stack, _ = seeded
    for query, field in (
        ({}, "created_after"),
        ({"created_after": "2026-01-01T00:00"}, "created_after"),
        (
            {"created_after": "2026-01-02T00:00Z", "created_before": "2026-01-01T00:00Z"},
            "created_after",
        ),
        ({"created_after": "2999-01-01T00:00Z"}, "created_after"),  # later than now
        ({"created_after": "2026-01-01T00:00Z", "buckets": "0"}, "buckets"),
        ({"created_after": "2026-01-01T00:00Z", "buckets": "61"}, "buckets"),
        ({"created_after": "2026-01-01T00:00Z", "status": "FAILED"}, "status"),
    ):
        status, _, reply = stack.api("GET", "/workflows/series", query=query)
        assert status == 400 and reply["error"]["code"] == "ValidationError", (query, reply)
        assert reply["error"]["field"] == field, (query, reply)
    # created_before defaults to now; a range shorter than its buckets has fewer.
    status, _, reply = stack.api(
        "GET", "/workflows/series", query={"created_after": "2026-01-01T00:00Z"}
    )
    assert status == 200 and len(reply["buckets"]) == 24
    tiny = {"created_after": "2026-01-01T00:00:00Z", "created_before": "2026-01-01T00:00:00.004Z"}
    reply = stack.api("GET", "/workflows/series", query=tiny)[2]
    assert len(reply["buckets"]) == 5 and reply["bucket_seconds"] == 0.001
