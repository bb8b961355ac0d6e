"""The transcode example's map step (issue 24.5), on its real definition and agents, with the
inputs `make demo` starts (shepherd_cli.scenarios): a clean transcode; one whose chunk 2 fails
twice and whose chunk 5 hangs (timed out by its heartbeat, retried), which succeeds; one with
two corrupt chunks, one more than `encode_chunks` tolerates, which unwinds and deletes every
chunk it encoded. Each test asserts what the demo promises, exactly, under a manual clock.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from shepherd.decisions import fanout as fo
from shepherd.engine.maps import page_pk
from shepherd.model import StepRecord, StepStatus, WorkflowState, WorkflowStatus, loads
from shepherd_cli.scenarios import (
    CORRUPT_CHUNKS,
    FLAKY_CHUNK,
    HUNG_CHUNK,
    MAP_STEP,
    TRANSCODE_SCENARIOS,
    VIDEO,
    VIDEO_CHUNKS,
    Scenario,
)
from shepherd_examples.agents import ledger
from shepherd_examples.agents.faults import SimulatedCrash, SimulatedHang
from shepherd_examples.agents.transcode import plan_chunks
from support import Harness, memory_harness

SCENARIO = {s.label: s for s in TRANSCODE_SCENARIOS}
MAX_CONCURRENCY = 3  # encode_chunks' MaxConcurrency in statemachines/transcode_video.yaml


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    ledger.reset()


def _drive(h: Harness, wf: str, *, max_rounds: int = 400) -> WorkflowState:
    """Deliver, move the clock half a second, sweep, until the workflow ends; an agent that
    hangs or crashes in process leaves its message unacknowledged, as a stuck or dead worker
    would (the supervisor and the queue's visibility timeout deal with it)."""
    for _ in range(max_rounds):
        with contextlib.suppress(SimulatedHang, SimulatedCrash):
            h.pump()
        state = h.state(wf)
        if state.workflow.status.terminal:
            return state
        h.clock.advance(0.5)
        h.sweep()
    raise AssertionError(f"{wf} did not finish: {h.state(wf).workflow.status}")


def _items(h: Harness, state: WorkflowState) -> dict[int, StepRecord]:
    """Every item unit of the map step, by index (as GET .../items reads them)."""
    rows, _ = h.scheduler.maps.item_page(state.steps[MAP_STEP], 0, 100)
    return {row.index: row.unit for row in rows if row.unit is not None}


def _outcomes(unit: StepRecord) -> list[tuple[int, str, str | None]]:
    return [(a["a"], a["o"], a.get("e")) for a in unit.history]


def _start(h: Harness, scenario: Scenario) -> str:
    return h.start(scenario.wf_type, scenario.payload)


def _encoded(wf: str) -> dict[int, dict[str, Any] | None]:
    """Each chunk's effect in the example ledger, by index (None: that item encoded nothing)."""
    return {
        i: ledger.find("media", fo.item_idempotency_key(wf, MAP_STEP, i))
        for i in range(VIDEO_CHUNKS)
    }


def test_the_demo_video_has_eight_chunks_of_six_seconds() -> None:
    chunks = plan_chunks(VIDEO)
    assert len(chunks) == VIDEO_CHUNKS
    assert chunks[0] == {"start": 0.0, "end": 6.0} and chunks[-1] == {"start": 42.0, "end": 47.0}


def test_a_clean_transcode_encodes_every_chunk_once_three_at_a_time(harness: Harness) -> None:
    scenario = SCENARIO["video-clean"]
    wf = _start(harness, scenario)
    harness.pump(rounds=2)  # the split, then the map's open
    sent = [t.message.item for t in harness.queue.sent if t.message.item is not None]
    assert sent == [0, 1, 2]  # the first window: MaxConcurrency items
    state = _drive(harness, wf)

    assert state.workflow.status.value == scenario.expected
    assert {n: s.status.value for n, s in state.steps.items()} == dict(scenario.steps)
    encode = state.steps[MAP_STEP]
    assert encode.fanout is not None and encode.fanout.status == "SUCCEEDED"
    assert encode.fanout.counts()["succeeded"] == VIDEO_CHUNKS
    items = _items(harness, state)
    assert {i: _outcomes(u) for i, u in items.items()} == {
        i: [(1, "ok", None)] for i in range(VIDEO_CHUNKS)
    }
    # The map's output is the chunks in item order, whatever order they finished in.
    output = harness.output(wf)
    assert [c["chunk"] for c in output[MAP_STEP]] == list(range(VIDEO_CHUNKS))
    assert output[MAP_STEP][7]["object"] == "encoded/keynote/1080p/chunk-00007.mp4"
    assert output["package_video"] == {
        "manifest": "packages/keynote/1080p/index.m3u8",
        "chunks": VIDEO_CHUNKS,
        "bytes": 47 * 6_000_000 // 8,
        "software_encoded": [],
        "seconds": 47.0,
    }
    # Each chunk encoded once under its item's key, then the package; nothing undone.
    keys = [key for _, key, _ in ledger.effects(wf)]
    assert sorted(keys[:-1]) == sorted(
        fo.item_idempotency_key(wf, MAP_STEP, i) for i in range(VIDEO_CHUNKS)
    )
    assert keys[-1] == f"{wf}:package_video"
    assert all("undone_by" not in e for e in _encoded(wf).values() if e is not None)
    assert state.compensations == {}


def test_a_flaky_chunk_and_a_hung_chunk_are_retried_and_the_video_is_packaged(
    harness: Harness,
) -> None:
    scenario = SCENARIO["video-flaky-chunks"]
    wf = _start(harness, scenario)
    hung_at: int | None = None
    for _ in range(10):  # until the hung chunk's first attempt is claimed and hangs
        try:
            harness.pump()
        except SimulatedHang:
            hung_at = harness.clock.now_ms()
            break
        harness.clock.advance(0.5)
        harness.sweep()
    assert hung_at is not None
    hung = harness.state(wf).windows[("step", MAP_STEP)][HUNG_CHUNK]
    assert hung.status is StepStatus.RUNNING and hung.attempt == 1
    # HeartbeatSeconds is 3: no heartbeat for 3 s times the attempt out, not a moment before.
    harness.clock.advance(2.9)
    assert harness.sweep().actions.get("TimedOut", 0) == 0
    harness.clock.advance(0.1)
    assert harness.sweep().actions["TimedOut"] == 1
    state = _drive(harness, wf)

    assert state.workflow.status.value == scenario.expected
    assert {n: s.status.value for n, s in state.steps.items()} == dict(scenario.steps)
    items = _items(harness, state)
    assert _outcomes(items[FLAKY_CHUNK]) == [
        (1, "error", "TransientServiceError"),
        (2, "error", "TransientServiceError"),
        (3, "ok", None),
    ]
    assert _outcomes(items[HUNG_CHUNK]) == [
        (1, "heartbeat_timeout", "States.HeartbeatTimeout"),
        (2, "ok", None),
    ]
    others = {i: _outcomes(u) for i, u in items.items() if i not in (FLAKY_CHUNK, HUNG_CHUNK)}
    assert others == {i: [(1, "ok", None)] for i in others} and len(others) == VIDEO_CHUNKS - 2
    # What GET .../items shows the demo: the attempts and the last failed attempt's error.
    for index, expect in ((e.index, e) for e in scenario.map.marked):  # type: ignore[union-attr]
        unit = items[index]
        assert unit.status.value == expect.status and unit.attempt == expect.min_attempts
        assert loads(unit.error)["type"] == expect.error
    # Retries reuse the item's key: every chunk encoded exactly once, none undone.
    encoded = _encoded(wf)
    assert all(e is not None and "undone_by" not in e for e in encoded.values())
    assert len([e for e in ledger.effects(wf) if e[2] == "encode"]) == VIDEO_CHUNKS
    assert harness.output(wf)["package_video"]["software_encoded"] == []
    assert state.compensations == {}


def test_chunks_past_the_tolerance_fail_the_map_and_every_encoded_chunk_is_deleted(
    harness: Harness,
) -> None:
    scenario = SCENARIO["video-corrupt-chunks"]
    wf = _start(harness, scenario)
    state = _drive(harness, wf)

    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert state.workflow.status.value == scenario.expected
    assert {n: s.status.value for n, s in state.steps.items()} == dict(scenario.steps)
    assert harness.sent(wf, "package_video") == []  # never sent, never undone
    encode = state.steps[MAP_STEP]
    assert loads(encode.error)["type"] == "States.ExceedToleratedFailureThreshold"
    assert encode.fanout is not None and encode.fanout.status == "FAILED"
    error = loads(state.workflow.error)
    assert error["step"] == MAP_STEP
    items = _items(harness, state)
    for index in CORRUPT_CHUNKS:  # each failed for good at once (a PermanentError)
        assert items[index].status is StepStatus.FAILED
        assert _outcomes(items[index]) == [(1, "error", "CorruptChunk")]
    # Every item claimed may have acted (When: ATTEMPTED): each is undone once, the corrupt
    # ones too (their undo finds nothing); no item that was never claimed is.
    claimed = {i for i, u in items.items() if u.first_claimed_at is not None}
    comp = state.compensations[MAP_STEP]
    assert comp.status is StepStatus.SUCCEEDED and comp.fanout is not None
    # CompensationOrder: PARALLEL, so MaxConcurrency (3) item undos at a time.
    assert comp.fanout.succeeded == len(claimed) and comp.fanout.stride == MAX_CONCURRENCY
    encoded = {i: e for i, e in _encoded(wf).items() if e is not None}
    assert set(encoded) == claimed - set(CORRUPT_CHUNKS)
    assert all(
        e["undone_by"] == f"{fo.item_idempotency_key(wf, MAP_STEP, i)}:compensate"
        for i, e in encoded.items()
    )
    # Three undos were sent before any of them ended, each chunk deleted once.
    undos = [t.message for t in harness.queue.sent if t.message.kind == "compensation"]
    assert len({m.item for m in undos[:MAX_CONCURRENCY]}) == MAX_CONCURRENCY
    deleted = [
        int(key.split("[")[1].split("]")[0])
        for _, key, action in ledger.effects(wf)
        if action == "delete_chunk"
    ]
    assert sorted(deleted) == sorted(encoded)
    assert "WorkflowCompensated" in harness.events.types()


def test_one_corrupt_chunk_is_tolerated_and_encoded_again_by_the_packager() -> None:
    h = memory_harness()
    video = {**VIDEO, "faults": {f"{MAP_STEP}[4]": {"mode": "permanent"}}}
    wf = h.start("transcode_video", video)
    state = _drive(h, wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert state.steps[MAP_STEP].fanout.counts()["failed"] == 1  # type: ignore[union-attr]
    output = h.output(wf)
    assert output[MAP_STEP][4] is None  # a tolerated failure's place in the output
    assert output["package_video"]["software_encoded"] == [4]
    assert output["package_video"]["chunks"] == VIDEO_CHUNKS
    assert state.compensations == {}


def test_a_package_that_landed_but_never_reported_is_deleted_with_every_chunk() -> None:
    """The packager dies after writing the package, every attempt: the step fails, and its
    undo finds the package by the step's key (When: ATTEMPTED), then each chunk is deleted."""
    h = memory_harness()
    video = {**VIDEO, "faults": {"package_video": {"mode": "crash_after_effect", "times": 99}}}
    wf = h.start("transcode_video", video)
    state = _drive(h, wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert state.steps["package_video"].status is StepStatus.FAILED
    package = loads(state.compensations["package_video"].output)
    assert package == {"deleted": "packages/keynote/1080p/index.m3u8"}
    assert state.compensations[MAP_STEP].fanout.succeeded == VIDEO_CHUNKS  # type: ignore[union-attr]
    assert all(e is not None and "undone_by" in e for e in _encoded(wf).values())
    # The package is undone before the chunks it was made of.
    undos = [action for _, _, action in ledger.effects(wf) if action.startswith("delete_")]
    assert undos == ["delete_package"] + ["delete_chunk"] * VIDEO_CHUNKS


def test_faults_name_one_item_or_every_item_of_a_map() -> None:
    """`"<step>[<i>]"` targets item i alone (and `...:compensation` its undo); `"<step>"`
    targets every item."""
    h = memory_harness()
    every = {**VIDEO, "faults": {MAP_STEP: {"mode": "error", "times": 1}}}
    wf = h.start("transcode_video", every)
    state = _drive(h, wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert {i: u.attempt for i, u in _items(h, state).items()} == {
        i: 2 for i in range(VIDEO_CHUNKS)
    }

    one_undo = {
        **VIDEO,
        "video_id": "undo-retried",
        "faults": {
            f"{MAP_STEP}[0]": {"mode": "permanent"},
            f"{MAP_STEP}[1]": {"mode": "permanent"},
            f"{MAP_STEP}[2]:compensation": {"mode": "error", "times": 2},
        },
    }
    wf = h.start("transcode_video", one_undo)
    state = _drive(h, wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    _, undos = _item_undos(h, state)
    assert {i: u.attempt for i, u in undos.items()} == {i: 3 if i == 2 else 1 for i in undos}


def _item_undos(h: Harness, state: WorkflowState) -> tuple[StepRecord, dict[int, StepRecord]]:
    """The map step's compensation and its item compensations (units IC#<i>), by index."""
    comp = state.compensations[MAP_STEP]
    found: dict[int, StepRecord] = {}
    for page in range(VIDEO_CHUNKS // 1000 + 1):
        pk = page_pk(state.workflow.workflow_id, MAP_STEP, page)
        for item in h.store.query_after(pk, "IC#", 1000).items:
            if str(item["sk"]).startswith("IC#"):
                unit = StepRecord.from_item(item)
                assert unit.index is not None
                found[unit.index] = unit
    return comp, found
