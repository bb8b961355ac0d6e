"""Pass steps (issue 42.5), on the real engine over in-memory ports: a Pass runs no Lambda
and sends no message; it succeeds with its `Result` in the write that finds it ready (the
completion of its last dependency, or the start for a root), and its dependents proceed in
the same advance, with no look of the supervisor."""

from __future__ import annotations

from typing import Any

from shepherd import AgentRegistry, PermanentError
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine
from shepherd_handlers.views import workflow_view


def _task(name: str, *deps: str, compensate: bool = False, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Name": name,
        "Agent": "work",
        "Pool": "p",
        "TimeoutSeconds": 10,
        "Retry": {"MaxAttempts": 0},
        "DependsOn": list(deps),
        **extra,
    }
    if compensate:
        out["Compensation"] = {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10}
    return out


def _pass(name: str, body: dict[str, Any], *deps: str, **extra: Any) -> dict[str, Any]:
    return {"Name": name, "Pass": body, "DependsOn": list(deps), **extra}


class Calls:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.seen: dict[str, dict[str, Any]] = {}
        self.undone: list[str] = []

    def engine(self, *steps: dict[str, Any]) -> MemoryEngine:
        definition = parse_definition({"Name": "passes", "Steps": list(steps)}, "passes.yaml")
        registry = AgentRegistry()

        @registry.agent("work")
        def work(ctx: AgentContext) -> dict[str, Any]:
            self.ran.append(ctx.step)
            self.seen[ctx.step] = dict(ctx.dependencies)
            if ctx.step == "explode":
                raise PermanentError("no", name="Boom")
            return {"step": ctx.step}

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            self.undone.append(ctx.step)

        return MemoryEngine({"passes": definition}, agents=registry)


def test_a_pass_between_tasks_succeeds_with_its_result_and_sends_nothing() -> None:
    calls = Calls()
    engine = calls.engine(
        _task("before"),
        _pass("shape", {"Result": {"tier": "gold", "n": [1, 2]}}, "before"),
        _task("after", "shape"),
    )
    wf = engine.start("passes", {})
    sent_before = engine.queue.depth("p")
    assert sent_before == 1  # the root alone
    engine.deliver()  # no sweep: the happy path never waits for the supervisor
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert calls.ran == ["before", "after"]  # the Pass ran no agent
    assert calls.seen["after"] == {"shape": {"tier": "gold", "n": [1, 2]}}
    state = engine.engine.scheduler.load(wf)[0]  # type: ignore[index]
    rec = state.steps["shape"]
    assert (rec.status, rec.attempt, rec.dispatched_at, rec.claimed_at) == (
        StepStatus.SUCCEEDED,
        1,
        None,
        None,
    )
    assert rec.finished_at == state.steps["before"].finished_at  # in the same advance
    assert outcome.output["shape"] == {"tier": "gold", "n": [1, 2]}


def test_a_root_pass_passes_with_the_start_and_an_empty_one_outputs_null() -> None:
    calls = Calls()
    engine = calls.engine(
        _pass("first", {}), _pass("second", {"Result": 7}, "first"), _task("t", "second")
    )
    wf = engine.start("passes", {"x": 1})
    state = engine.engine.scheduler.load(wf)[0]  # type: ignore[index]
    assert state.steps["first"].status is StepStatus.SUCCEEDED
    assert state.steps["second"].status is StepStatus.SUCCEEDED
    assert engine.queue.depth("p") == 1  # the task after them, sent by the start's advance
    engine.deliver()
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["first"].output is None
    assert calls.seen["t"] == {"second": 7}


def test_a_pass_joining_two_branches_passes_once_when_both_are_done() -> None:
    calls = Calls()
    engine = calls.engine(
        _task("a"), _task("b"), _pass("join", {"Result": "both"}, "a", "b"), _task("end", "join")
    )
    wf = engine.start("passes", {})
    engine.deliver()
    assert engine.outcome(wf).status is WorkflowStatus.SUCCEEDED
    assert calls.ran.count("end") == 1
    state = engine.engine.scheduler.load(wf)[0]  # type: ignore[index]
    assert state.steps["join"].history[-1]["o"] == "ok" and len(state.steps["join"].history) == 1


def test_a_pass_under_a_false_condition_is_skipped() -> None:
    calls = Calls()
    condition = {"Variable": "$.input.go", "BooleanEquals": True}
    engine = calls.engine(
        _pass("maybe", {"Result": 1}, Condition=condition), _task("after", "maybe")
    )
    wf = engine.start("passes", {"go": False})
    engine.deliver()
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["maybe"].status is StepStatus.SKIPPED


def test_unwinding_cancels_a_pending_pass_and_never_compensates_one() -> None:
    calls = Calls()
    engine = calls.engine(
        _task("charge", compensate=True),
        _pass("noted", {"Result": 1}, "charge"),
        _task("explode", "noted"),
        _pass("never", {}, "explode"),
    )
    wf = engine.start("passes", {})
    engine.deliver()
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.steps["noted"].status is StepStatus.SUCCEEDED
    assert outcome.steps["never"].status is StepStatus.CANCELLED
    assert calls.undone == ["charge"]


def test_the_workflow_view_shows_a_pass_succeeded_with_its_output_and_no_deadline() -> None:
    calls = Calls()
    engine = calls.engine(_task("before"), _pass("shape", {"Result": {"a": 1}}, "before"))
    wf = engine.start("passes", {})
    loaded = engine.engine.scheduler.load(wf)
    assert loaded is not None
    view = workflow_view(*loaded, engine.engine.ports.payloads, now=engine.clock.now_ms())
    shape = next(s for s in view.steps if s.name == "shape")
    assert (shape.status, shape.output, shape.next_deadline) == ("PENDING", None, None)
    engine.deliver()
    loaded = engine.engine.scheduler.load(wf)
    assert loaded is not None
    view = workflow_view(*loaded, engine.engine.ports.payloads, now=engine.clock.now_ms())
    shape = next(s for s in view.steps if s.name == "shape")
    assert (shape.status, shape.output, shape.attempt) == ("SUCCEEDED", {"a": 1}, 1)
    assert view.output is not None and view.output["shape"] == {"a": 1}


def test_a_pass_costs_one_write_and_no_message() -> None:
    """A Pass between two tasks adds its one write (no claim, no result write) and sends
    nothing: the same tasks run."""
    counts = []
    for middle in (False, True):
        calls = Calls()
        steps = [_task("a")]
        if middle:
            steps.append(_pass("mid", {"Result": 1}, "a"))
        steps.append(_task("b", "mid" if middle else "a"))
        engine = calls.engine(*steps)
        wf = engine.start("passes", {})
        engine.deliver()
        assert engine.outcome(wf).status is WorkflowStatus.SUCCEEDED
        assert calls.ran == ["a", "b"]
        counts.append(engine.store.writes)
    assert counts[1] == counts[0] + 1


def test_a_large_pass_output_goes_to_the_payload_bucket_and_is_read_back() -> None:
    calls = Calls()
    big = {"text": "x" * 20_000}
    engine = calls.engine(_pass("big", {"Result": big}), _task("use", "big"))
    wf = engine.start("passes", {})
    engine.deliver()
    assert engine.outcome(wf).status is WorkflowStatus.SUCCEEDED
    state = engine.engine.scheduler.load(wf)[0]  # type: ignore[index]
    stored = state.steps["big"].output
    assert stored is not None and len(stored) < 1000  # a reference, not the value
    assert calls.seen["use"] == {"big": big}


def test_a_workflow_of_pass_steps_alone_ends_with_its_start() -> None:
    calls = Calls()
    engine = calls.engine(_pass("a", {"Result": 1}), _pass("b", {"Result": 2}, "a"))
    wf = engine.start("passes", {})
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.output == {"a": 1, "b": 2}
    assert calls.ran == []
