"""Business keys (issue 37.3, 37.5), on the real engine over in-memory ports: a WaitForSignal
step's `Match` is indexed at the start, so a signal sent by its values reaches every open
workflow of the caller waiting on them (and no other: another caller's, another value, a
finished one), through the by_key index, bounded before anything is sent; a start's tags
list it by `tag`, newest first, each shard of the tag's index one partition."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import AgentRegistry, limits
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.engine.listing import ListFilter, list_page
from shepherd.errors import DefinitionError, InputInvalid, TagInvalid, TooManyMatches
from shepherd.keys import KEY_SHARDS, key_shard, match_item_sk, tag_item_sk, wf_pk
from shepherd.model import StepStatus, WorkflowRecord, WorkflowStatus, loads
from shepherd.testing import MemoryEngine
from shepherd.topology import TABLE


def order_definition(**match: str) -> Any:
    wait: dict[str, Any] = {"Name": "amended", "TimeoutSeconds": 3600}
    if match:
        wait["Match"] = match
    return parse_definition(
        {
            "Name": "order",
            "Steps": [
                {"Name": "reserve", "Agent": "work", "Pool": "p", "TimeoutSeconds": 10},
                {"Name": "amend", "DependsOn": ["reserve"], "WaitForSignal": wait},
                {
                    "Name": "ship",
                    "DependsOn": ["amend"],
                    "Agent": "work",
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                },
            ],
        },
        "order.yaml",
    )


def engine(owner: str = "alice", **match: str) -> MemoryEngine:
    registry = AgentRegistry()

    @registry.agent("work")
    def work(ctx: AgentContext) -> dict[str, Any]:
        return {"step": ctx.step}

    definition = order_definition(**(match or {"order_id": "$.input.order_id"}))
    return MemoryEngine({"order": definition}, agents=registry, owner=owner)


def test_a_signal_by_its_match_reaches_each_open_workflow_waiting_on_it_and_no_other() -> None:
    eng = engine()
    first = eng.start("order", {"order_id": "o-1"})
    second = eng.start("order", {"order_id": "o-1"})
    other = eng.start("order", {"order_id": "o-2"})
    eng.deliver()  # reserve runs in each; amend rests
    receipts = eng.signal_matching("amended", {"order_id": "o-1"}, {"quantity": 3})
    assert sorted(r.workflow_id for r in receipts) == sorted([first, second])
    assert all(r.taken_by == "amend" for r in receipts)
    for wf in (first, second):
        assert eng.outcome(wf).steps["amend"].status is StepStatus.SUCCEEDED
        assert eng.run(wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED
    assert eng.outcome(other).steps["amend"].status is StepStatus.WAITING
    # Compared as JSON: "7" is not 7; a value nobody waits on reaches nobody (202, none).
    assert eng.signal_matching("amended", {"order_id": "o-9"}, 1) == []
    assert eng.signal_matching("amended", {"order_id": 2}, 1) == []


def test_a_signal_by_its_match_sent_before_the_step_waits_is_kept_until_it_does() -> None:
    eng = engine()
    wf = eng.start("order", {"order_id": "o-1"})  # indexed at the start: nothing waits yet
    (receipt,) = eng.signal_matching("amended", {"order_id": "o-1"}, {"n": 1}, signal_id="a-1")
    assert receipt.workflow_id == wf and receipt.taken_by is None
    # A retry with the same id is kept once.
    (again,) = eng.signal_matching("amended", {"order_id": "o-1"}, {"n": 1}, signal_id="a-1")
    assert again.duplicate
    eng.deliver()
    assert eng.outcome(wf).steps["amend"].status is StepStatus.SUCCEEDED
    assert eng.outcome(wf).steps["amend"].output == {"n": 1}


def test_another_callers_workflows_and_finished_ones_are_not_reached() -> None:
    eng = engine()
    mine = eng.start("order", {"order_id": "o-1"})
    eng.owner = "mallory"
    theirs = eng.start("order", {"order_id": "o-1"})
    assert [r.workflow_id for r in eng.signal_matching("amended", {"order_id": "o-1"})] == [theirs]
    eng.owner = "alice"
    eng.engine.operations.cancel(mine, owner="alice")
    eng.run(mine, max_seconds=60)
    assert eng.outcome(mine).status is WorkflowStatus.CANCELLED
    assert eng.signal_matching("amended", {"order_id": "o-1"}) == []


def test_more_matches_than_the_cap_are_refused_before_anything_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "MAX_MATCHED", 3)
    eng = engine()
    ids = [eng.start("order", {"order_id": "o-1"}) for _ in range(4)]
    with pytest.raises(TooManyMatches):
        eng.signal_matching("amended", {"order_id": "o-1"}, 1)
    assert all(eng.store.get(f"SIG#{wf}", "#SIG") is None for wf in ids)
    eng.engine.operations.cancel(ids[0], owner="alice")
    eng.run(ids[0], max_seconds=60)
    assert len(eng.signal_matching("amended", {"order_id": "o-1"}, 1)) == 3


def test_a_workflow_that_ended_or_unwinds_leaves_the_match_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its correlations are released when it ends (or starts to unwind): a signal by the same
    values reads only the workflows still open, however many ended before (before: a finished
    workflow's entry stayed until TTL, and 1,000 of them made every signal by it 409)."""
    eng = engine()
    done = eng.start("order", {"order_id": "o-1"})
    cancelled = eng.start("order", {"order_id": "o-1"})
    failed = eng.start("order", {"order_id": "o-1"})
    eng.deliver()
    eng.signal(done, "amended", {"n": 1})
    assert eng.run(done, max_seconds=60).status is WorkflowStatus.SUCCEEDED
    eng.cancel(cancelled)
    assert eng.run(cancelled, max_seconds=60).status is WorkflowStatus.CANCELLED
    eng.compensate(failed)  # an operator gives up on it: it unwinds
    assert eng.run(failed, max_seconds=60).status is WorkflowStatus.COMPENSATED
    still_open = eng.start("order", {"order_id": "o-1"})
    for wf in (done, cancelled, failed):
        item = eng.store.get(wf_pk(wf), match_item_sk("amend"))
        assert item is not None and "key_pk" not in item and "key_sk" not in item
    assert "key_pk" in (eng.store.get(wf_pk(still_open), match_item_sk("amend")) or {})
    values = '{"order_id":"o-1"}'
    page = list_page(eng.store, "alice", ListFilter(match=("amended", values)), limit=10)
    assert [WorkflowRecord.from_item(i).workflow_id for i in page.items] == [still_open]
    # The reader's bound counts open workflows only: one entry a page, at most two read.
    monkeypatch.setattr(limits, "MAX_MATCHED", 1)
    monkeypatch.setattr(limits, "MAX_MATCH_ENTRIES", 2)
    (receipt,) = eng.signal_matching("amended", {"order_id": "o-1"}, {"n": 2})
    assert receipt.workflow_id == still_open


def test_the_match_is_indexed_in_one_write_with_the_start_and_a_missing_key_refuses_it() -> None:
    eng = engine(order_id="$.input.order.id", region="$.input.region")
    wf = eng.start("order", {"order": {"id": "o-1"}, "region": "eu"})
    item = eng.store.get(wf_pk(wf), match_item_sk("amend"))
    assert item is not None and item["key_pk"].endswith(f"#{key_shard(wf)}")
    assert item["match"] == '{"order_id":"o-1","region":"eu"}'
    assert [
        r.workflow_id for r in eng.signal_matching("amended", {"region": "eu", "order_id": "o-1"})
    ] == [wf]
    # Only both values reach it.
    assert eng.signal_matching("amended", {"order_id": "o-1"}) == []
    writes = eng.store.writes
    with pytest.raises(InputInvalid, match="selects nothing"):
        eng.start("order", {"region": "eu"})
    assert eng.store.writes == writes


@pytest.mark.parametrize(
    ("match", "problem"),
    [
        ({"order_id": "$.steps.reserve.output.id"}, "path into the input"),
        ({"order_id": "order_id"}, "must be"),
        ({f"k{i}": "$.input.a" for i in range(5)}, "at most 4"),
    ],
)
def test_a_match_is_checked_at_load(match: dict[str, str], problem: str) -> None:
    with pytest.raises(DefinitionError, match=problem):
        order_definition(**match)


def test_tags_list_a_callers_workflows_newest_first_from_the_tags_own_shards() -> None:
    eng = engine()
    tagged = []
    for i in range(12):
        eng.advance(1)
        tagged.append(eng.start("order", {"order_id": f"o-{i}"}, tags={"customer": "ada"}))
        eng.start("order", {"order_id": f"x-{i}"}, tags={"customer": "bob"})
    eng.start("order", {"order_id": "z"})
    store = eng.store
    filters = ListFilter(tag=("customer", "ada"))
    page = list_page(store, "alice", filters, limit=5)
    assert page.queries == KEY_SHARDS
    got = [loads(i["tags"]) for i in page.items]
    assert got == [{"customer": "ada"}] * 5
    listed = [str(i["pk"])[3:] for i in page.items]
    rest = list_page(store, "alice", filters, limit=20, after=page.next_position)
    listed += [str(i["pk"])[3:] for i in rest.items]
    assert listed == list(reversed(tagged))
    assert rest.next_position is None
    # Another caller's tag of the same name and value lists nothing of alice's.
    assert list_page(store, "bob", filters, limit=5).items == []
    # Each tag is one index item in the workflow's partition, keyed to one shard.
    item = store.get(wf_pk(tagged[0]), tag_item_sk("customer"))
    assert item is not None and item["key_pk"].endswith(f"#{key_shard(tagged[0])}")
    assert TABLE.key_index.partition_key in item


def test_tags_spread_one_callers_starts_over_every_shard() -> None:
    eng = engine()
    ids = [eng.start("order", {"order_id": f"o-{i}"}, tags={"env": "prod"}) for i in range(200)]
    per_shard = [sum(1 for wf in ids if key_shard(wf) == k) for k in range(KEY_SHARDS)]
    assert min(per_shard) > 0 and max(per_shard) < 200 / KEY_SHARDS * 2


@pytest.mark.parametrize(
    "tags",
    [
        {f"k{i}": "v" for i in range(11)},
        {"k" * 65: "v"},
        {"has space": "v"},
        {"k": "v" * 257},
        {"k:v": "v"},
    ],
)
def test_tags_past_their_caps_are_refused_before_anything_is_written(
    tags: dict[str, str],
) -> None:
    eng = engine()
    writes = eng.store.writes
    with pytest.raises(TagInvalid):
        eng.start("order", {"order_id": "o-1"}, tags=tags)
    assert eng.store.writes == writes


def test_a_replay_with_other_tags_is_an_idempotency_conflict() -> None:
    from shepherd.errors import IdempotencyConflict

    eng = engine()
    wf = eng.start("order", {"order_id": "o-1"}, idempotency_key="k", tags={"a": "1"})
    assert eng.start("order", {"order_id": "o-1"}, idempotency_key="k", tags={"a": "1"}) == wf
    with pytest.raises(IdempotencyConflict):
        eng.start("order", {"order_id": "o-1"}, idempotency_key="k", tags={"a": "2"})
