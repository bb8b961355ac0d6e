"""Map steps in the engine (issue 24): a step over many items, each item a unit with a step's
guarantees, on the in-memory store and on DynamoDB (moto).

Each test drives the real scheduler, agent runtime and supervisor under a manual clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from shepherd import limits
from shepherd.decisions import fanout as fo
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry, Outcome
from shepherd.errors import PermanentError
from shepherd.model import StepStatus, WorkflowStatus, loads
from support import DEFINITIONS, Harness, engine_stores, memory_harness, moto_harness

MAP = {
    "Name": "batch",
    "Steps": [
        {"Name": "split", "Agent": "split", "Pool": "work", "TimeoutSeconds": 30},
        {
            "Name": "each",
            "Agent": "each",
            "Pool": "work",
            "TimeoutSeconds": 30,
            "HeartbeatSeconds": 10,
            "DependsOn": ["split"],
            "Retry": {"MaxAttempts": 2, "IntervalSeconds": 1},
            "Map": {"ItemsPath": "$.steps.split.output.chunks", "MaxConcurrency": 3},
            "Compensation": {"Agent": "undo_each", "Pool": "work", "TimeoutSeconds": 30},
        },
        {
            "Name": "join",
            "Agent": "join",
            "Pool": "work",
            "TimeoutSeconds": 30,
            "DependsOn": ["each"],
        },
    ],
}


def definition(**map_fields: Any) -> Definition:
    steps = [dict(s) for s in MAP["Steps"]]  # type: ignore[union-attr]
    steps[1] = {**steps[1], "Map": {**steps[1]["Map"], **map_fields}}
    return parse_definition({**MAP, "Steps": steps}, "batch")


class Calls:
    """What the agents did: every item attempt, every undo, and the joined output."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int, str]] = []  # (index, attempt, idempotency key)
        self.undone: list[int] = []
        self.fail: dict[int, int] = {}  # index -> attempts that raise
        self.permanent: set[int] = set()
        self.hang: set[int] = set()  # indexes whose first attempt hangs
        self.undo_fails: set[int] = set()  # indexes whose undo fails for good
        self.inputs: dict[int, Any] = {}  # index -> the ctx.input its last attempt was given
        self.joined: Any = None

    def registry(self) -> AgentRegistry:
        registry = AgentRegistry()

        @registry.agent("split")
        def split(ctx: AgentContext) -> Any:
            return {"chunks": [{"n": i} for i in range(ctx.input["items"])]}

        @registry.agent("each")
        def each(ctx: AgentContext) -> Any:
            assert ctx.item_index is not None
            self.items.append((ctx.item_index, ctx.attempt, ctx.idempotency_key))
            self.inputs[ctx.item_index] = ctx.input
            if ctx.item_index in self.hang and ctx.attempt == 1:
                from shepherd_examples.agents.faults import SimulatedHang

                raise SimulatedHang
            if ctx.item_index in self.permanent:
                raise PermanentError(f"item {ctx.item_index} is bad")
            if self.fail.get(ctx.item_index, 0) >= ctx.attempt:
                raise RuntimeError(f"item {ctx.item_index} flaked")
            return {"doubled": ctx.item["n"] * 2}

        @registry.agent("undo_each")
        def undo_each(ctx: AgentContext) -> Any:
            assert ctx.item_index is not None and ctx.forward is not None
            self.undone.append(ctx.item_index)
            if ctx.item_index in self.undo_fails:
                raise PermanentError(f"the undo of item {ctx.item_index} is impossible")
            return {"undone": ctx.item["n"], "key": ctx.forward.idempotency_key}

        @registry.agent("join")
        def join(ctx: AgentContext) -> Any:
            self.joined = ctx.dependencies["each"]
            return {"count": len(self.joined)}

        return registry


@pytest.fixture(params=engine_stores())
def world(request: pytest.FixtureRequest) -> Iterator[tuple[Harness, Calls]]:
    calls = Calls()
    defs = {**DEFINITIONS, "batch": definition()}
    if request.param == "memory":
        yield memory_harness(definitions=defs, agents=calls.registry()), calls
    else:
        with moto_harness(definitions=defs, agents=calls.registry()) as h:
            yield h, calls


def test_a_map_runs_every_item_once_and_outputs_them_in_item_order(
    world: tuple[Harness, Calls],
) -> None:
    h, calls = world
    wf = h.start("batch", {"items": 10})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert sorted(i for i, _, _ in calls.items) == list(range(10))
    assert calls.joined == [{"doubled": 2 * i} for i in range(10)]
    each = state.steps["each"]
    assert each.status is StepStatus.SUCCEEDED
    assert each.fanout is not None
    assert each.fanout.counts()["succeeded"] == 10
    # Each item's key is its own, stable across retries, distinct per item.
    assert {k for _, _, k in calls.items} == {
        fo.item_idempotency_key(wf, "each", i) for i in range(10)
    }


def test_at_most_max_concurrency_items_are_in_flight(world: tuple[Harness, Calls]) -> None:
    h, _ = world
    wf = h.start("batch", {"items": 10})
    h.pump(rounds=2)  # split, then the map's open
    in_flight = [
        t for t in h.queue.sent if t.message.workflow_id == wf and t.message.item is not None
    ]
    assert sorted(t.message.item for t in in_flight) == [0, 1, 2]  # type: ignore[type-var]
    h.run(wf)


def test_failed_items_are_retried_with_their_own_attempts(world: tuple[Harness, Calls]) -> None:
    h, calls = world
    calls.fail = {4: 1, 7: 2}
    wf = h.start("batch", {"items": 8})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    attempts = {i: sorted(a for j, a, _ in calls.items if j == i) for i in range(8)}
    assert attempts[4] == [1, 2] and attempts[7] == [1, 2, 3]
    assert all(attempts[i] == [1] for i in (0, 1, 2, 3, 5, 6))


def test_past_the_tolerance_the_map_fails_and_items_that_acted_are_undone(
    world: tuple[Harness, Calls],
) -> None:
    h, calls = world
    calls.permanent = {2}
    wf = h.start("batch", {"items": 8})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    each = state.steps["each"]
    assert each.status is StepStatus.FAILED
    # Its ended attempt says why, name and message, as any step's does (issue 29.5).
    error = loads(each.error)
    (ended,) = each.history
    assert (ended["o"], ended["e"]) == ("error", error["type"])
    assert ended["m"] == limits.truncate(error["message"], limits.MAX_HISTORY_MESSAGE)
    claimed = {i for i, _, _ in calls.items}
    # Every item claimed was undone (When: ATTEMPTED), never one that was not.
    assert sorted(calls.undone) == sorted(claimed)
    assert len(calls.undone) == len(set(calls.undone))
    assert len(claimed) < 8  # it stopped sending items once it failed


def test_a_tolerated_failure_lets_the_map_succeed_with_null_for_the_item() -> None:
    calls = Calls()
    calls.permanent = {1}
    defs = {**DEFINITIONS, "batch": definition(ToleratedFailureCount=1)}
    h = memory_harness(definitions=defs, agents=calls.registry())
    wf = h.start("batch", {"items": 5})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == [{"doubled": 0}, None, {"doubled": 4}, {"doubled": 6}, {"doubled": 8}]


def test_an_empty_map_succeeds_at_once(world: tuple[Harness, Calls]) -> None:
    h, calls = world
    wf = h.start("batch", {"items": 0})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == []


def test_lost_item_messages_are_sent_again_by_the_supervisor(world: tuple[Harness, Calls]) -> None:
    h, calls = world
    wf = h.start("batch", {"items": 6})
    lost = itertools.count()

    def lose_some(message: Any) -> str:
        return "drop" if message.item is not None and next(lost) % 3 == 0 else "handle"

    state = h.run(wf, on_message=lose_some, step_seconds=5)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == [{"doubled": 2 * i} for i in range(6)]


def test_a_duplicate_item_message_runs_nothing_twice(world: tuple[Harness, Calls]) -> None:
    h, calls = world
    wf = h.start("batch", {"items": 6})
    state = h.run(wf, on_message=lambda m: "duplicate" if m.item is not None else "handle")
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert sorted(i for i, _, _ in calls.items) == list(range(6))
    dropped = [r for m, r in h.log if m.item is not None and r.outcome is Outcome.DROPPED]
    assert len(dropped) == 6


def test_an_items_path_selecting_no_array_fails_the_step_for_good() -> None:
    calls = Calls()
    defs = {**DEFINITIONS, "batch": definition(ItemsPath="$.input.items")}
    h = memory_harness(definitions=defs, agents=calls.registry())
    wf = h.start("batch", {"items": 3})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    error = state.steps["each"].error or ""
    assert "MapItemsInvalid" in error
    assert calls.items == [] and calls.undone == []


def test_cancel_halts_a_running_map_and_undoes_what_acted(world: tuple[Harness, Calls]) -> None:
    h, calls = world
    wf = h.start("batch", {"items": 30})
    h.pump(rounds=3)  # split, the open, the first items (and their refills)
    h.operations.cancel(wf)
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.CANCELLED
    each = state.steps["each"]
    assert each.status is StepStatus.FAILED and "MapHalted" in (each.error or "")
    assert each.fanout is not None and each.fanout.status == "CANCELLED"
    claimed = {i for i, _, _ in calls.items}
    assert 0 < len(claimed) < 30
    assert sorted(calls.undone) == sorted(claimed)  # every item that may have acted, once
    counts = each.fanout.counts()
    assert counts["succeeded"] + counts["failed"] + counts["cancelled"] == 30


def test_items_are_undone_one_at_a_time_in_reverse_order_of_completion() -> None:
    calls = Calls()
    calls.permanent = {5}
    defs = {**DEFINITIONS, "batch": definition(MaxConcurrency=1)}
    h = memory_harness(definitions=defs, agents=calls.registry())
    wf = h.start("batch", {"items": 8})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    # One at a time: items 0..5 ran in order (5 failed for good, ambiguous: undone too).
    assert [i for i, _, _ in calls.items] == [0, 1, 2, 3, 4, 5]
    assert calls.undone == [5, 4, 3, 2, 1, 0]
    comp = state.compensations["each"]
    assert comp.status is StepStatus.SUCCEEDED and comp.fanout is not None
    assert comp.fanout.stride == 1 and comp.fanout.succeeded == 6


def test_parallel_compensation_undoes_up_to_max_concurrency_at_once() -> None:
    calls = Calls()
    calls.permanent = {9}
    parallel = {**MAP, "CompensationOrder": "PARALLEL"}
    steps = [dict(s) for s in parallel["Steps"]]  # type: ignore[union-attr]
    steps[1] = {**steps[1], "Map": {**steps[1]["Map"], "MaxConcurrency": 4}}
    defs = {**DEFINITIONS, "batch": parse_definition({**parallel, "Steps": steps}, "batch")}
    h = memory_harness(definitions=defs, agents=calls.registry())
    wf = h.start("batch", {"items": 12})
    h.run(wf)
    first_sent = [t.message for t in h.queue.sent if t.message.kind == "compensation"][:4]
    assert len({m.item for m in first_sent}) == 4  # four undos sent before any ended
    assert sorted(calls.undone) == sorted({i for i, _, _ in calls.items})


def test_a_hung_item_is_timed_out_by_its_heartbeat_and_retried(
    world: tuple[Harness, Calls],
) -> None:
    from shepherd_examples.agents.faults import SimulatedHang

    h, calls = world
    calls.hang = {2}
    wf = h.start("batch", {"items": 5})
    with pytest.raises(SimulatedHang):
        h.pump()
    item = h.state(wf).windows[("step", "each")][2]
    assert item.status is StepStatus.RUNNING and item.attempt == 1
    h.clock.advance(9.9)
    assert h.sweep().actions.get("TimedOut", 0) == 0  # HeartbeatSeconds is 10
    h.clock.advance(0.1)
    assert h.sweep().actions["TimedOut"] == 1
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == [{"doubled": 2 * i} for i in range(5)]
    assert sorted(a for i, a, _ in calls.items if i == 2) == [1, 2]


def _dies_before_counting(h: Harness, index: int) -> list[int]:
    """The process of item `index`'s first result dies between the item's write and its map's
    accounting (once); returns the list it records that in."""
    original = h.scheduler.after_item
    skipped: list[int] = []

    def after_item(state: Any, definition: Any, unit: Any) -> None:
        if unit.index == index and not skipped:
            skipped.append(index)
            return
        original(state, definition, unit)

    h.scheduler.after_item = after_item  # type: ignore[method-assign]
    return skipped


def test_an_item_whose_process_died_before_counting_it_is_counted_by_a_look() -> None:
    calls = Calls()
    defs = {**DEFINITIONS, "batch": definition()}
    h = memory_harness(definitions=defs, agents=calls.registry())
    skipped = _dies_before_counting(h, 1)
    wf = h.start("batch", {"items": 6})
    state = h.run(wf, step_seconds=5)
    assert skipped == [1]
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == [{"doubled": 2 * i} for i in range(6)]
    assert sorted(i for i, _, _ in calls.items) == list(range(6))  # item 1 did not run twice


def test_a_look_reads_at_most_the_window_whatever_the_item_count() -> None:
    calls = Calls()
    defs = {**DEFINITIONS, "batch": definition(MaxConcurrency=10)}
    h = memory_harness(definitions=defs, agents=calls.registry())
    reads: list[int] = []
    get_many = h.store.get_many

    def counted(keys: Any) -> Any:
        reads.append(len(keys))
        return get_many(keys)

    h.store.get_many = counted  # type: ignore[method-assign]
    wf = h.start("batch", {"items": 2000})
    state = h.run(wf, step_seconds=2)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert len(calls.joined) == 2000
    assert max(reads) <= 10 + 1  # a look: the window (10); a claim: 4 keys


def test_a_failed_map_is_not_run_again_by_a_resume() -> None:
    from shepherd.errors import InvalidTransition

    calls = Calls()
    calls.permanent = {0}
    paused = {**MAP, "OnFailure": "PAUSE"}
    defs = {**DEFINITIONS, "batch": parse_definition(paused, "batch")}
    h = memory_harness(definitions=defs, agents=calls.registry())
    wf = h.start("batch", {"items": 4})
    for _ in range(40):
        h.pump()
        if h.status(wf) is WorkflowStatus.PAUSED:
            break
        h.clock.advance(1)
        h.sweep()
    assert h.status(wf) is WorkflowStatus.PAUSED
    with pytest.raises(InvalidTransition, match="a failed map is not run again"):
        h.operations.resume(wf)
    assert h.status(wf) is WorkflowStatus.PAUSED  # nothing changed
    h.operations.compensate(wf)
    assert h.run(wf).workflow.status is WorkflowStatus.COMPENSATED


def _last_attempt_map() -> Definition:
    """`batch` whose map step has no retry: an attempt that ends fails the step for good."""
    steps = [dict(s) for s in MAP["Steps"]]  # type: ignore[union-attr]
    steps[1] = {**steps[1], "Retry": {"MaxAttempts": 0}}
    return parse_definition({**MAP, "Steps": steps}, "batch")


def test_an_open_write_that_timed_out_after_it_landed_does_not_end_the_opener() -> None:
    """Found by the fault simulator (`make sim`, seeds 24 and 217 with `--types sim_map`): the
    map's open write landed, then the call timed out; the opener took the error for its
    attempt's and ended it, leaving the map open under a step failed for good (its items
    entered the window, never sent, never counted; with retries left, queued again with its
    map's deadlines unwatched). The write that ends an opener's attempt now requires the map
    unopened: it loses, and the open map runs (its items sent again after the dispatch
    grace, as for an opener that died after opening)."""
    from shepherd.errors import StoreUnavailable

    calls = Calls()
    defs = {**DEFINITIONS, "batch": _last_attempt_map()}
    h = memory_harness(definitions=defs, agents=calls.registry())
    update = h.store.update
    timed_out: list[str] = []

    def open_then_time_out(pk: str, sk: str, change: Any, condition: Any) -> Any:
        item = update(pk, sk, change, condition)
        if fo.TOTAL in change.set and not timed_out:
            timed_out.append(sk)
            raise StoreUnavailable("timed out after it was applied")
        return item

    h.store.update = open_then_time_out  # type: ignore[method-assign]
    wf = h.start("batch", {"items": 5})
    h.pump()
    assert timed_out == ["S#each"]
    each = h.step(wf, "each")
    assert each.status is StepStatus.RUNNING and each.attempt == 1  # the attempt goes on
    # Its window is on its shards, which the opener did not get to write: a look enters it.
    assert each.fanout is not None and each.fanout.window == {}
    state = h.run(wf, step_seconds=5)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == [{"doubled": 2 * i} for i in range(5)]
    assert [h["o"] for h in state.steps["each"].history] == ["ok"]


def test_a_timeout_planned_before_the_map_opened_loses_to_the_open() -> None:
    """The same end by another writer: a look read the opener RUNNING, unopened, past its
    TimeoutSeconds, and planned its timeout; the open write landed before the timeout's. The
    timeout loses and is planned again on the open map (its window supervised), instead of
    queueing the step again over an open map."""
    from shepherd.decisions.planner import EndAttempt, plan

    calls = Calls()
    defs = {**DEFINITIONS, "batch": _last_attempt_map()}
    h = memory_harness(definitions=defs, agents=calls.registry())
    wf = h.start("batch", {"items": 5})
    real_open = h.scheduler.maps.open
    looks: list[Any] = []

    def open_late(state: Any, definition: Definition, rec: Any) -> Any:
        h.clock.advance(31)  # the opener is slow: past TimeoutSeconds (30) ...
        looks.append(h.scheduler.load(wf))  # ... when a look reads it, not yet open
        return real_open(state, definition, rec)

    h.scheduler.maps.open = open_late  # type: ignore[method-assign]
    h.pump(rounds=2)  # split, then the open (its items are sent, not yet run)
    (look,) = looks
    state, definition = look
    now = h.clock.now_ms()
    planned = plan(state, definition, now, supervisor=True, rng=h.ports.rng)
    assert [type(a) for a in planned] == [EndAttempt]  # the timeout, on the read before it
    h.scheduler.run(state, definition, supervisor=True, now=now)
    each = h.step(wf, "each")
    assert each.status is StepStatus.RUNNING and each.attempt == 1 and each.fanout is not None
    state = h.run(wf, step_seconds=5)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == [{"doubled": 2 * i} for i in range(5)]


def test_a_look_at_a_paused_workflow_counts_an_ended_item_and_sends_nothing() -> None:
    """Found by the fault simulator (`make sim SEEDS=2000`, seed 1601, `paused`): a look at a
    PAUSED workflow counted an item its process had not (it died, or was timed out), and the
    accounting brought the stripe's next item into the window and sent its message: a task
    sent while paused, by a supervisor that had read the pause. The item still enters the
    window; its message waits for the resume (a look sends it then, its grace run out)."""
    calls = Calls()
    defs = {**DEFINITIONS, "batch": definition(MaxConcurrency=1)}
    h = memory_harness(definitions=defs, agents=calls.registry())
    skipped = _dies_before_counting(h, 0)
    wf = h.start("batch", {"items": 3})
    h.pump()  # split, the open, item 0 (its process dies before counting it)
    assert skipped == [0]
    h.operations.pause(wf)
    before = len(h.queue.sent)
    h.clock.advance(31)
    h.sweep()  # the look counts item 0; item 1 enters the window
    each = h.step(wf, "each")
    assert each.fanout is not None and each.fanout.succeeded == 1
    assert sorted(each.fanout.window) == [1]
    assert [t.message for t in h.queue.sent[before:] if t.message.workflow_id == wf] == []
    h.operations.resume(wf)
    state = h.run(wf, step_seconds=5)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.joined == [{"doubled": 2 * i} for i in range(3)]


def test_a_replacement_input_for_a_map_step_reaches_every_item(
    world: tuple[Harness, Calls],
) -> None:
    """Found by the fault simulator (`make sim SEEDS=10000`, seeds 4578, 5171, 5173 and 7208,
    `inputs`): an operator resumed a workflow with a new input for its map step before the map
    opened, and its items were given the workflow's input instead (an item's claim reads its
    page, not the map's unit, which holds the replacement). The open copies it onto the pages."""
    h, calls = world
    wf = h.start("batch", {"items": 4})
    h.operations.pause(wf)
    h.pump()  # split's message is dropped while paused
    h.operations.resume(wf, step="each", step_input={"fixed": True})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.inputs == {i: {"fixed": True} for i in range(4)}


def test_items_are_given_the_workflow_input_when_no_replacement_was_made(
    world: tuple[Harness, Calls],
) -> None:
    h, calls = world
    wf = h.start("batch", {"items": 2})
    assert h.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    assert calls.inputs == {0: {"items": 2}, 1: {"items": 2}}


def test_reverse_undo_stops_at_an_item_whose_undo_failed() -> None:
    """Found by the fault simulator (`make sim SEEDS=10000`, seeds 2712, 6311 and 6319,
    `item_compensation`): under REVERSE the items are undone one at a time, each after the one
    before it succeeded; when an item's undo failed for good, the write that counted it still
    brought the next item into the compensation's window and sent it, so an item was undone
    after an undo that had failed (the workflow ended FAILED for an operator, with more undone
    than the order allows). A map's compensation tolerates no failure: its failure refills
    nothing."""
    calls = Calls()
    calls.permanent = {5}
    calls.undo_fails = {3}
    defs = {**DEFINITIONS, "batch": definition(MaxConcurrency=1)}
    h = memory_harness(definitions=defs, agents=calls.registry())
    wf = h.start("batch", {"items": 8})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.FAILED  # an operator is needed
    assert calls.undone == [5, 4, 3]  # in reverse order, none after the undo that failed
    sent = [t.message.item for t in h.queue.sent if t.message.kind == "compensation"]
    assert sorted(set(sent)) == [3, 4, 5]
    comp = state.compensations["each"]
    assert comp.status is StepStatus.FAILED and comp.fanout is not None
    assert comp.fanout.failed == 1 and sorted(comp.fanout.window) == []


def test_the_failure_that_fails_a_map_brings_no_item_into_its_window() -> None:
    """The same write for a map step: past its tolerance the map fails at once, so the failure
    that decides it sends no further item (with a tolerance of one failure, the first failure
    still does)."""
    for tolerance, never_sent in (({}, [2, 3]), ({"ToleratedFailureCount": 1}, [3])):
        calls = Calls()
        calls.permanent = {0, 1}
        defs = {**DEFINITIONS, "batch": definition(MaxConcurrency=2, **tolerance)}
        h = memory_harness(definitions=defs, agents=calls.registry())
        wf = h.start("batch", {"items": 4})
        state = h.run(wf)
        assert state.workflow.status is WorkflowStatus.COMPENSATED
        sent = {t.message.item for t in h.queue.sent if t.message.kind == "step"}
        assert not sent & set(never_sent), (tolerance, sorted(i for i in sent if i is not None))
