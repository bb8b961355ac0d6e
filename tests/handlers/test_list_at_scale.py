"""GET /workflows and GET /workflows/counts at 2,000 workflows with a rare status (issue 29.1),
in process on moto: filters that never lie, signed and stable pages, bounded counts."""

from __future__ import annotations

import random
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


@pytest.fixture
def seeded(stack: Stack) -> tuple[Stack, list[dict[str, Any]]]:
    """ALICE's 2,000 workflows in the real item layout (written in batches: starting 2,000
    through the API would only slow the test down), 14 of them FAILED among the oldest."""
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
    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
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
