"""Wait steps (issue 25.2), on the real engine over in-memory ports: a wait rests WAITING
with no message and no agent, is woken by the supervisor through the watch index no earlier
than its time and no later than one sweep after it, and cancel, pause and compensation work
while it waits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from shepherd import AgentRegistry, PermanentError
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.errors import DefinitionError
from shepherd.keys import WF_SK, wf_pk
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine

DAY = 86_400


def _task(name: str, *deps: str, compensate: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Name": name,
        "Agent": "work",
        "Pool": "p",
        "TimeoutSeconds": 10,
        "Retry": {"MaxAttempts": 0},
        "DependsOn": list(deps),
    }
    if compensate:
        out["Compensation"] = {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10}
    return out


def _wait(name: str, wait: dict[str, Any], *deps: str, **extra: Any) -> dict[str, Any]:
    return {"Name": name, "Wait": wait, "DependsOn": list(deps), **extra}


def _definition(*steps: dict[str, Any]) -> Any:
    return parse_definition({"Name": "waits", "Steps": list(steps)}, "waits.yaml")


class Calls:
    def __init__(self) -> None:
        self.ran: list[tuple[str, int]] = []
        self.undone: list[str] = []

    def engine(self, definition: Any) -> MemoryEngine:
        registry = AgentRegistry()

        @registry.agent("work")
        def work(ctx: AgentContext) -> dict[str, Any]:
            self.ran.append((ctx.step, engine.clock.now_ms()))
            if ctx.step == "explode":
                raise PermanentError("no", name="Boom")
            return {"step": ctx.step, "dependencies": dict(ctx.dependencies)}

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            self.undone.append(ctx.step)

        engine = MemoryEngine({"waits": definition}, agents=registry)
        return engine


def _due_at(engine: MemoryEngine, wf: str) -> int | None:
    item = engine.store.get(wf_pk(wf), WF_SK)
    assert item is not None
    return None if item.get("due_at") is None else int(item["due_at"])


def _sweep_every(engine: MemoryEngine, seconds: float, until_ms: int) -> None:
    """Sweep on a fixed interval (as the deployed supervisor does) until the clock passes
    `until_ms`, delivering messages between sweeps."""
    for _ in range(100_000):
        if engine.clock.now_ms() > until_ms:
            return
        engine.advance(seconds)
        engine.sweep()
        engine.deliver()
    raise AssertionError("too many sweeps")


def test_a_seconds_wait_rests_with_no_message_and_wakes_within_one_sweep() -> None:
    calls = Calls()
    definition = _definition(
        _task("before"), _wait("hold", {"Seconds": DAY}, "before"), _task("after", "hold")
    )
    engine = calls.engine(definition)
    wf = engine.start("waits", {})
    engine.deliver()
    rec = engine.engine.scheduler.load(wf)[0].steps["hold"]  # type: ignore[index]
    before = engine.outcome(wf).steps["before"]
    assert rec.status is StepStatus.WAITING and rec.attempt == 1
    finished = engine.engine.scheduler.load(wf)[0].steps["before"].finished_at  # type: ignore[index]
    assert before.status is StepStatus.SUCCEEDED and finished is not None
    wake_at = finished + DAY * 1000
    assert rec.wake_at == wake_at
    assert engine.queue.depth("p") == 0  # nothing was sent for the wait
    # The watch entry is due no later than the wake (and not re-read every few seconds).
    due = _due_at(engine, wf)
    assert due is not None and due <= wake_at
    # Sweeps every 5 s up to a moment before the wake leave it resting ...
    engine.advance((wake_at - engine.clock.now_ms()) / 1000 - 1)
    engine.sweep()
    assert engine.outcome(wf).steps["hold"].status is StepStatus.WAITING
    # ... and the sweep after it wakes it, no later than one interval after its time.
    _sweep_every(engine, 5, wake_at + 5000)
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    state = engine.engine.scheduler.load(wf)[0]  # type: ignore[index]
    woke = state.steps["hold"].finished_at
    assert woke is not None and wake_at <= woke <= wake_at + 5000
    ((_, ran_at),) = [c for c in calls.ran if c[0] == "after"]
    assert ran_at >= wake_at
    assert outcome.output["after"]["dependencies"] == {"hold": None}  # a wait has no output


def test_an_until_path_root_wait_pulls_the_watch_entry_to_its_time() -> None:
    calls = Calls()
    definition = _definition(
        _wait("hold", {"UntilPath": "$.input.not_before"}), _task("after", "hold")
    )
    engine = calls.engine(definition)
    start = engine.clock.now_ms()
    wf = engine.start("waits", {"not_before": "2026-01-01T00:00:30+00:00"})
    wake_at = 1_767_225_630_000  # 2026-01-01T00:00:30Z
    assert start < wake_at
    rec = engine.engine.scheduler.load(wf)[0].steps["hold"]  # type: ignore[index]
    assert (rec.status, rec.wake_at) == (StepStatus.WAITING, wake_at)
    due = _due_at(engine, wf)
    assert due is not None and due <= wake_at
    _sweep_every(engine, 5, wake_at + 5000)
    assert engine.outcome(wf).status is WorkflowStatus.SUCCEEDED
    assert calls.ran[0][1] >= wake_at


def test_an_until_in_the_past_wakes_at_the_next_sweep() -> None:
    calls = Calls()
    definition = _definition(
        _wait("hold", {"Until": "2020-01-01T00:00:00Z"}), _task("after", "hold")
    )
    engine = calls.engine(definition)
    wf = engine.start("waits", {})
    assert engine.run(wf, max_seconds=30).status is WorkflowStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "UntilPath $.input.when is absent"),
        ("tomorrow", "is not an RFC 3339 timestamp"),
        ("2026-01-02T00:00:00", "has no time zone offset"),
        # Issue 35.1: Python's ISO 8601 reader took these; Step Functions' RFC 3339 does not.
        ("2026-01-02T00:00:00Z\x00", "is not an RFC 3339 timestamp"),
        ("2026-01-02 00:00:00Z", "is not an RFC 3339 timestamp"),
        ("2026-01-02t00:00:00z", "is not an RFC 3339 timestamp"),
        ("20260102T000000Z", "is not an RFC 3339 timestamp"),
        ("2026-01-02T00:00:00+0100", "is not an RFC 3339 timestamp"),
        ("\uff12026-01-02T00:00:00Z", "is not an RFC 3339 timestamp"),
        ("2099-01-01T00:00:00Z", "more than a year"),
    ],
)
def test_an_unreadable_until_path_fails_the_step_and_unwinds(value: Any, message: str) -> None:
    calls = Calls()
    definition = _definition(
        _task("first", compensate=True), _wait("hold", {"UntilPath": "$.input.when"}, "first")
    )
    engine = calls.engine(definition)
    wf = engine.start("waits", {} if value is None else {"when": value})
    outcome = engine.run(wf, max_seconds=60)
    assert outcome.status is WorkflowStatus.COMPENSATED
    hold = outcome.steps["hold"]
    assert hold.status is StepStatus.FAILED
    assert hold.error is not None and hold.error.name == "States.Runtime"
    assert message in hold.error.message
    assert calls.undone == ["first"]


def test_cancel_while_waiting_cancels_the_wait_and_compensates_what_ran() -> None:
    calls = Calls()
    definition = _definition(
        _task("first", compensate=True),
        _wait("hold", {"Seconds": 30 * DAY}, "first"),
        _task("after", "hold"),
    )
    engine = calls.engine(definition)
    wf = engine.start("waits", {})
    engine.deliver()
    assert engine.outcome(wf).steps["hold"].status is StepStatus.WAITING
    engine.cancel(wf)
    outcome = engine.run(wf, max_seconds=120)
    assert outcome.status is WorkflowStatus.CANCELLED
    assert outcome.steps["hold"].status is StepStatus.CANCELLED
    assert outcome.steps["after"].status is StepStatus.CANCELLED
    assert calls.undone == ["first"]
    assert "hold" not in outcome.compensations  # a wait never acted


def test_a_wait_wakes_while_paused_and_its_successor_waits_for_the_resume() -> None:
    calls = Calls()
    definition = _definition(_wait("hold", {"Seconds": 60}), _task("after", "hold"))
    engine = calls.engine(definition)
    wf = engine.start("waits", {})
    engine.pause(wf)
    _sweep_every(engine, 5, engine.clock.now_ms() + 70_000)
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.PAUSED
    assert outcome.steps["hold"].status is StepStatus.SUCCEEDED  # its time came
    assert calls.ran == []  # nothing new is dispatched while paused
    engine.resume(wf)
    assert engine.run(wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED
    assert [c[0] for c in calls.ran] == ["after"]


def test_a_wait_under_a_false_condition_is_skipped() -> None:
    calls = Calls()
    cond = {"Variable": "$.input.remind", "BooleanEquals": True}
    definition = _definition(
        _wait("hold", {"Seconds": DAY}, Condition=cond), _task("after", "hold")
    )
    engine = calls.engine(definition)
    wf = engine.start("waits", {"remind": False})
    outcome = engine.run(wf, max_seconds=30)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["hold"].status is StepStatus.SKIPPED


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (
            {"Name": "w", "Wait": {"Seconds": 5}, "Agent": "x", "Pool": "p"},
            "waits.yaml: Steps[0] (w): a Wait step names no Agent, Pool",
        ),
        (
            {"Name": "w", "Wait": {"Seconds": 5}, "Retry": {"MaxAttempts": 1}},
            "Steps[0] (w): a Wait step names no Retry",
        ),
        (
            {"Name": "w", "Wait": {"Seconds": 5, "Until": "2026-01-01T00:00:00Z"}},
            "Steps[0] (w).Wait: a Wait has exactly one of Seconds, Until, UntilPath, "
            "SecondsPath (got Seconds, Until)",
        ),
        ({"Name": "w", "Wait": {}}, "Steps[0] (w).Wait: a Wait has exactly one of"),
        (
            {"Name": "w", "Wait": {"Seconds": 366 * DAY + 1}},
            "Steps[0] (w).Wait.Seconds: must be at most 31622400",
        ),
        (
            {"Name": "w", "Wait": {"Until": "2026-01-01T00:00:00"}},
            "Steps[0] (w).Wait.Until",
        ),
        (
            {"Name": "w", "Wait": {"UntilPath": "$.steps.a.output.t"}},
            "Steps[0] (w).Wait.UntilPath: '$.steps.a.output.t' reads step 'a', which is not in "
            "its DependsOn",
        ),
        (
            {"Name": "w", "Pool": "p", "TimeoutSeconds": 5},
            "waits.yaml: Steps[0] (w).Agent: is required",
        ),
    ],
)
def test_a_bad_wait_names_the_file_the_step_and_the_field(
    step: dict[str, Any], expected: str
) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition({"Name": "waits", "Steps": [step]}, "waits.yaml")
    assert expected in str(err.value)


def test_a_wait_step_needs_no_pool_and_no_agent() -> None:
    definition = _definition(_wait("hold", {"Seconds": 5}), _task("after", "hold"))
    assert definition.agents() == {"work"}
    assert [t.pool for t in definition.tasks] == ["p"]
    # The wait's static time counts in the reach gap of every step upstream of it.
    assert definition.reach_gap_ms["hold"] == 5000


def test_a_wait_and_an_approval_survive_their_snapshot() -> None:
    """A workflow runs to its end on the version it started with, reloaded from the table's
    snapshot (its canonical JSON): a Wait or an Approval step must parse back the same."""
    definition = _definition(
        _wait("hold", {"Until": "2026-01-01T00:00:30+00:00"}),
        {"Name": "ask", "DependsOn": ["hold"], "Approval": {"TimeoutSeconds": 60}},
        _task("after", "ask"),
    )
    again = parse_definition(json.loads(definition.canonical_json), "snapshot")
    assert again.content_hash == definition.content_hash
    assert again.by_name["hold"].wait == definition.by_name["hold"].wait
    assert again.by_name["ask"].approval == definition.by_name["ask"].approval
