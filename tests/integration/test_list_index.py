"""The list indexes (issue 23.7, 29.1): status keys follow every status change, and a page is
a correct, full, bounded merge of the caller's shards whatever the filter's rarity."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import pytest
from shepherd import keys
from shepherd.conditions import Item, Update
from shepherd.decisions.transitions import Write
from shepherd.engine import listing
from shepherd.engine.listing import ListFilter, Position, count_by_status, list_page
from shepherd.model import WorkflowRecord, WorkflowStatus
from shepherd.testing import MemoryStore
from support import ORDER, Harness, registry_with


def list_keys_true(items: Iterable[Item]) -> None:
    """Every workflow item's list keys are those of its owner, type, status and creation."""
    for item in items:
        if item["sk"] != keys.WF_SK:
            continue
        expected = keys.list_keys(
            item["owner"],
            item["wf_type"],
            item["status"],
            int(item["created_at"]),
            keys.workflow_id_of(item["pk"]),
        )
        assert {k: item.get(k) for k in expected} == expected, item["pk"]


def ids(h: Harness, **filters: Any) -> list[str]:
    page = list_page(h.store, "local", ListFilter(**filters), limit=100)
    return [keys.workflow_id_of(i["pk"]) for i in page.items]


def test_every_status_change_moves_the_status_keys(harness: Harness) -> None:
    done = harness.start("order_fulfilment", ORDER)
    harness.run(done)
    paused = harness.start("order_fulfilment", ORDER)
    harness.operations.pause(paused)
    cancelled = harness.start("order_fulfilment", ORDER)
    harness.operations.cancel(cancelled)
    harness.pump()
    assert ids(harness, status="SUCCEEDED") == [done]
    assert ids(harness, status="PAUSED") == [paused]
    assert ids(harness, status="CANCELLED") == [cancelled]
    assert ids(harness, status="PAUSED", wf_type="order_fulfilment") == [paused]
    assert ids(harness, status="PAUSED", wf_type="provision_environment") == []
    harness.operations.resume(paused)
    assert ids(harness, status="PAUSED") == []
    harness.run(paused)
    assert set(ids(harness, status="SUCCEEDED")) == {done, paused}
    assert ids(harness) == [cancelled, paused, done]  # newest first, every status
    if isinstance(harness.store, MemoryStore):
        list_keys_true(harness.store.items())


def test_a_failure_that_unwinds_is_listed_under_its_end(harness: Harness) -> None:
    def declined(ctx: Any) -> Any:
        from shepherd import PermanentError

        raise PermanentError("card declined")

    with registry_with(charge_payment=declined) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        end = harness.run(wf).workflow.status
    assert end in (WorkflowStatus.COMPENSATED, WorkflowStatus.FAILED)
    assert ids(harness, status=end.value) == [wf]
    assert ids(harness, status="RUNNING") == []
    assert ids(harness, status="COMPENSATING") == []
    if isinstance(harness.store, MemoryStore):
        list_keys_true(harness.store.items())


def test_a_status_write_without_its_workflow_is_refused() -> None:
    write = Write("WF#a", keys.WF_SK, Update(set={"status": "RUNNING"}), None)
    with pytest.raises(ValueError, match="needs the workflow"):
        listing.keyed(write, None)
    step_write = Write("WF#a", "S#x", Update(set={"status": "RUNNING"}), None)
    assert listing.keyed(step_write, None) is step_write  # a step's status is not listed
    record = WorkflowRecord(
        workflow_id="a",
        wf_type="t",
        def_hash="h",
        status=WorkflowStatus.PAUSED,
        input="{}",
        owner="o",
        request_hash="r",
        created_at=7,
        updated_at=7,
    )
    keyed = listing.keyed(write, record)
    assert keyed.update.set["status_sk"] == "RUNNING#" + keys.list_sk(7, "a")
    assert keyed.update.set["type_status_sk"] == "t#RUNNING#" + keys.list_sk(7, "a")


# ------------------------------------------------------------------ the merge, by reference


def seeded(n: int, seed: int, owner: str = "o") -> tuple[MemoryStore, list[Item]]:
    """n workflow items of `owner` (and some of another owner) with random times, types and a
    rare FAILED status, written in the real item layout."""
    rng = random.Random(seed)
    store = MemoryStore()
    items: list[Item] = []
    for i in range(n):
        status = "FAILED" if rng.random() < 0.01 else rng.choice(["SUCCEEDED", "RUNNING"])
        record = WorkflowRecord(
            workflow_id=f"w{i:05d}",
            wf_type=rng.choice(["alpha", "beta"]),
            def_hash="h",
            status=WorkflowStatus(status),
            input="{}",
            owner=owner,
            request_hash="r",
            created_at=rng.randrange(1_000, 50_000),  # ties on time are broken by the id
            updated_at=0,
        )
        store.put_new(record.to_item())
        items.append(record.to_item())
        if i % 10 == 0:
            other = WorkflowRecord(**{**record.__dict__, "workflow_id": f"x{i}", "owner": "other"})
            store.put_new(other.to_item())
    return store, items


def expected(items: list[Item], f: ListFilter) -> list[str]:
    keep = [
        i
        for i in items
        if f.status in (None, i["status"])
        and f.wf_type in (None, i["wf_type"])
        and (f.created_after is None or i["created_at"] >= f.created_after)
        and (f.created_before is None or i["created_at"] <= f.created_before)
    ]
    keep.sort(key=lambda i: i["list_sk"], reverse=f.newest_first)
    return [keys.workflow_id_of(i["pk"]) for i in keep]


def walk(store: MemoryStore, f: ListFilter, limit: int) -> tuple[list[str], list[int], int]:
    """Every page in turn: the ids, each page's size, the most queries one page made."""
    found: list[str] = []
    sizes: list[int] = []
    most = 0
    after: Position | None = None
    for _ in range(1_000):
        page = list_page(store, "o", f, limit=limit, after=after)
        found += [keys.workflow_id_of(i["pk"]) for i in page.items]
        sizes.append(len(page.items))
        most = max(most, page.queries)
        after = page.next_position
        if after is None:
            break
    return found, sizes, most


FILTERS = [
    ListFilter(),
    ListFilter(newest_first=False),
    ListFilter(status="FAILED"),
    ListFilter(status="FAILED", newest_first=False),
    ListFilter(wf_type="beta"),
    ListFilter(status="RUNNING", wf_type="alpha"),
    ListFilter(created_after=10_000, created_before=20_000),
    ListFilter(status="SUCCEEDED", created_after=30_000, newest_first=False),
    ListFilter(created_after=60_000),  # nothing matches
]


@pytest.mark.parametrize("f", FILTERS, ids=repr)
def test_pages_are_full_merges_in_order(f: ListFilter) -> None:
    store, items = seeded(600, seed=3)
    want = expected(items, f)
    for limit in (1, 7, 100):
        found, sizes, most = walk(store, f, limit)
        assert found == want
        # Full pages: every page but the last holds `limit`; an empty page only if nothing
        # matches at all.
        assert all(size == limit for size in sizes[:-1])
        assert sizes[-1] > 0 or want == []
        assert len(sizes) == max(1, -(-len(want) // limit))
        # Bounded: one query per shard, plus refills of shards holding more than their share.
        assert most <= keys.LIST_SHARDS + limit


def test_a_rare_status_costs_what_a_common_one_costs() -> None:
    store, items = seeded(2_000, seed=11)
    rare = [i for i in items if i["status"] == "FAILED"]
    assert 5 <= len(rare) <= 60
    page = list_page(store, "o", ListFilter(status="FAILED"), limit=20)
    assert [keys.workflow_id_of(i["pk"]) for i in page.items] == expected(
        items, ListFilter(status="FAILED")
    )[:20]
    assert page.queries <= keys.LIST_SHARDS + 4
    common = list_page(store, "o", ListFilter(), limit=20)
    assert len(common.items) == 20 and common.queries <= keys.LIST_SHARDS + 4


def test_a_workflow_started_between_pages_never_shifts_a_later_page() -> None:
    store, items = seeded(300, seed=5)
    first = list_page(store, "o", ListFilter(), limit=50)
    record = WorkflowRecord.from_item(items[0])
    late = WorkflowRecord(**{**record.__dict__, "workflow_id": "late", "created_at": 99_999})
    store.put_new(late.to_item())
    rest = walk_from(store, first.next_position)
    seen = [keys.workflow_id_of(i["pk"]) for i in first.items] + rest
    assert seen == expected(items, ListFilter())  # every one once, "late" not among them


def walk_from(store: MemoryStore, after: Position | None) -> list[str]:
    found: list[str] = []
    for _ in range(100):
        page = list_page(store, "o", ListFilter(), limit=50, after=after)
        found += [keys.workflow_id_of(i["pk"]) for i in page.items]
        after = page.next_position
        if after is None:
            break
    return found


def test_counts_per_status_with_filters_and_a_cap() -> None:
    store, items = seeded(900, seed=8)
    f = ListFilter(wf_type="alpha", created_after=5_000)
    got = {c.status: (c.count, c.capped) for c in count_by_status(store, "o", f)}
    for status in WorkflowStatus:
        want = len(expected(items, ListFilter(**{**f.__dict__, "status": status.value})))
        assert got[status.value] == (want, False)
    capped = {c.status: (c.count, c.capped) for c in count_by_status(store, "o", f, cap=50)}
    running = got["RUNNING"][0]
    assert running > 50 and capped["RUNNING"] == (50, True)
    assert capped["FAILED"] == (got["FAILED"][0], False)
