"""Tags an agent adds to its own workflow (`ctx.tag`, issue 37.5), on the real engine over
in-memory ports: written at once, with a start's caps checked before the write (at most 10 a
workflow, a key of at most 64 characters, a value of at most 256: `TagInvalid`, a permanent
error), idempotent (a retried attempt tags again and nothing more is written), fenced (a
superseded attempt writes nothing), exact under concurrent taggers (the cap holds), and listed
by `tag` through the same index as a start's tags."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from shepherd import AgentRegistry, limits
from shepherd.conditions import Cond, Update
from shepherd.definitions import parse_definition
from shepherd.engine import tagging
from shepherd.engine.agent import AgentContext
from shepherd.engine.listing import ListFilter, list_page
from shepherd.errors import AttemptSuperseded, TagInvalid
from shepherd.keys import WF_SK, tag_item_sk, wf_pk
from shepherd.model import StepRecord, StepStatus, WorkflowStatus, loads
from shepherd.testing import MemoryEngine

DEFINITION = parse_definition(
    {
        "Name": "order",
        "Steps": [
            {"Name": "reserve", "Agent": "reserve", "Pool": "p", "TimeoutSeconds": 60},
            {
                "Name": "ship",
                "DependsOn": ["reserve"],
                "Agent": "ship",
                "Pool": "p",
                "TimeoutSeconds": 60,
            },
        ],
    },
    "order.yaml",
)


def engine(
    reserve: Callable[[AgentContext], Any], ship: Callable[[AgentContext], Any] | None = None
) -> MemoryEngine:
    registry = AgentRegistry()
    registry.register("reserve", reserve)
    registry.register("ship", ship or (lambda ctx: {"shipped": True}))
    return MemoryEngine({"order": DEFINITION}, agents=registry, owner="alice")


def listed(eng: MemoryEngine, key: str, value: str, owner: str = "alice") -> list[str]:
    page = list_page(eng.store, owner, ListFilter(tag=(key, value)), limit=50)
    return [str(i["pk"]).removeprefix("WF#") for i in page.items]


def stored_tags(eng: MemoryEngine, wf: str) -> dict[str, str]:
    item = eng.store.get(wf_pk(wf), WF_SK)
    assert item is not None
    return dict(loads(item["tags"])) if item.get("tags") else {}


def test_an_agent_tags_its_workflow_and_the_tag_lists_it_at_once() -> None:
    def reserve(ctx: AgentContext) -> dict[str, Any]:
        ctx.tag("order_id", ctx.input["order_id"])
        return {"reserved": True}

    eng = engine(reserve)
    wf = eng.start("order", {"order_id": "o-42"}, tags={"customer": "ada"})
    other = eng.start("order", {"order_id": "o-43"})
    eng.deliver()
    assert listed(eng, "order_id", "o-42") == [wf]
    assert listed(eng, "order_id", "o-43") == [other]
    assert stored_tags(eng, wf) == {"customer": "ada", "order_id": "o-42"}
    assert listed(eng, "customer", "ada") == [wf]  # the start's tag is kept
    # Another caller's list of the same tag shows none of alice's.
    assert listed(eng, "order_id", "o-42", owner="bob") == []
    assert eng.run(wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED


def test_a_retried_attempt_tags_again_and_nothing_more_is_written() -> None:
    writes: list[int] = []

    def reserve(ctx: AgentContext) -> dict[str, Any]:
        before = len(eng.store.items())
        ctx.tag("order_id", "o-1")
        writes.append(len(eng.store.items()) - before)
        if ctx.attempt == 1:
            raise RuntimeError("crashed after tagging")
        return {"reserved": True}

    eng = engine(reserve)
    wf = eng.start("order", {"order_id": "o-1"})
    assert eng.run(wf, max_seconds=600).status is WorkflowStatus.SUCCEEDED
    assert writes == [1, 0]  # the index item once; the repeat wrote nothing
    assert listed(eng, "order_id", "o-1") == [wf]
    assert stored_tags(eng, wf) == {"order_id": "o-1"}


def test_a_new_value_for_a_key_replaces_the_old_one_in_the_index() -> None:
    def reserve(ctx: AgentContext) -> None:
        ctx.tag("stage", "reserved")

    def ship(ctx: AgentContext) -> None:
        ctx.tag("stage", "shipped")

    eng = engine(reserve, ship)
    wf = eng.start("order", {}, tags={"stage": "new"})
    assert eng.run(wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED
    assert listed(eng, "stage", "new") == []
    assert listed(eng, "stage", "reserved") == []
    assert listed(eng, "stage", "shipped") == [wf]
    item = eng.store.get(wf_pk(wf), tag_item_sk("stage"))
    assert item is not None and item["tag_value"] == "shipped"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("k" * (limits.MAX_TAG_KEY_CHARS + 1), "v"),
        ("", "v"),
        ("a:b", "v"),  # a colon would split a `tag=k:v` filter elsewhere
        ("a#b", "v"),  # a key separator
        ("ok", "v" * (limits.MAX_TAG_VALUE_CHARS + 1)),
        ("ok", 7),
        ("ok", "\ud800"),  # a lone surrogate: no UTF-8 encoder (nor DynamoDB) takes it
        (7, "v"),
    ],
)
def test_a_tag_past_its_caps_fails_the_step_at_once_and_writes_nothing(
    key: Any, value: Any
) -> None:
    def reserve(ctx: AgentContext) -> None:
        ctx.tag(key, value)

    eng = engine(reserve)
    wf = eng.start("order", {}, tags={"customer": "ada"})
    before = len(eng.store.items())
    eng.deliver()
    outcome = eng.outcome(wf)
    reserve_step = outcome.steps["reserve"]
    assert reserve_step.status is StepStatus.FAILED
    assert len(reserve_step.attempts) == 1  # permanent: never retried
    assert reserve_step.attempts[0].error is not None
    assert reserve_step.attempts[0].error.name == "TagInvalid"
    assert stored_tags(eng, wf) == {"customer": "ada"}
    tag_items = [i for i in eng.store.items() if str(i["sk"]).startswith("K#T#")]
    assert [i["tag_key"] for i in tag_items] == ["customer"]
    assert len(eng.store.items()) >= before


def test_the_eleventh_tag_is_refused_and_the_ten_stay() -> None:
    def reserve(ctx: AgentContext) -> None:
        for i in range(limits.MAX_TAGS - 1):
            ctx.tag(f"k{i}", "v")
        ctx.tag("k0", "v")  # a repeat of one it carries: not a new tag
        ctx.tag("k0", "w")  # a new value for one it carries: not a new tag either
        with pytest.raises(TagInvalid, match="at most 10"):
            ctx.tag("one_too_many", "v")

    eng = engine(reserve)
    wf = eng.start("order", {}, tags={"customer": "ada"})
    eng.deliver()
    assert eng.outcome(wf).steps["reserve"].status is StepStatus.SUCCEEDED
    tags = stored_tags(eng, wf)
    assert len(tags) == limits.MAX_TAGS and "one_too_many" not in tags and tags["k0"] == "w"
    assert listed(eng, "one_too_many", "v") == []


def test_a_superseded_attempt_tags_nothing() -> None:
    seen: list[str] = []

    def reserve(ctx: AgentContext) -> None:
        if ctx.attempt == 1:
            # The supervisor gives up on this attempt (its timeout) while it still runs.
            eng.advance(61)
            eng.sweep()
            try:
                ctx.tag("late", "yes")
            except AttemptSuperseded:
                seen.append("superseded")
                raise

    eng = engine(reserve)
    wf = eng.start("order", {})
    eng.deliver()
    assert seen == ["superseded"]
    assert "late" not in stored_tags(eng, wf)
    assert listed(eng, "late", "yes") == []


class _Racing:
    """A store where another tagger lands between this one's read and its write, once."""

    def __init__(self, store: Any, race: Callable[[], None]) -> None:
        self._store = store
        self._race: Callable[[], None] | None = race

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        race, self._race = self._race, None
        if race is not None:
            race()
        self._store.transact(writes)


def test_concurrent_taggers_never_pass_the_cap() -> None:
    refused: list[str] = []

    def reserve(ctx: AgentContext) -> None:
        for i in range(limits.MAX_TAGS - 1):
            ctx.tag(f"k{i}", "v")
        item = eng.store.get(wf_pk(ctx.workflow_id), "S#reserve")
        assert item is not None
        rec = StepRecord.from_item(item)
        ports = eng.engine.ports
        plain = ports.store
        # Another tagger of the same attempt (a thread of the agent) lands its 10th tag between
        # this one's read and its write: this one's guarded write loses, it reads again, sees
        # 10 tags and is refused.
        ports.store = _Racing(
            plain, lambda: tagging.add_tag(eng.engine.scheduler, rec, "other", "v")
        )
        try:
            ctx.tag("mine", "v")
        except TagInvalid as exc:
            refused.append(str(exc))
        finally:
            ports.store = plain

    eng = engine(reserve)
    wf = eng.start("order", {})
    eng.deliver()
    assert len(refused) == 1 and "at most 10" in refused[0]
    tags = stored_tags(eng, wf)
    assert len(tags) == limits.MAX_TAGS and "other" in tags and "mine" not in tags
    assert listed(eng, "mine", "v") == [] and listed(eng, "other", "v") == [wf]
