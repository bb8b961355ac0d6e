"""A native workflow's own TimeoutSeconds (issue 42.5), on the real engine over in-memory
ports and the manual clock: the supervisor finds it through the watch index at its time and
never before; the workflow fails with `States.Timeout` and unwinds (or pauses) by its
OnFailure; attempts in flight are fenced, so their late results are refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from shepherd import AgentRegistry, Pending
from shepherd.clock import iso
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.errors import TaskTokenStale
from shepherd.keys import WF_SK, wf_pk
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine
from shepherd_handlers.views import workflow_view

TIMEOUT = 60


def _task(name: str, *deps: str, agent: str = "work", **extra: Any) -> dict[str, Any]:
    return {
        "Name": name,
        "Agent": agent,
        "Pool": "p",
        "TimeoutSeconds": 3600,
        "Retry": {"MaxAttempts": 0},
        "DependsOn": list(deps),
        "Compensation": {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
        **extra,
    }


class Run:
    def __init__(
        self,
        *steps: dict[str, Any],
        on_failure: str = "COMPENSATE",
        slow: Callable[[Run, AgentContext], Any] | None = None,
        timeout: int | None = TIMEOUT,
    ) -> None:
        body: dict[str, Any] = {"Name": "timed", "OnFailure": on_failure, "Steps": list(steps)}
        if timeout is not None:
            body["TimeoutSeconds"] = timeout
        self.definition = parse_definition(body, "timed.yaml")
        self.tokens: list[str] = []
        self.undone: list[str] = []
        self.ran: list[str] = []
        registry = AgentRegistry()

        @registry.agent("work")
        def work(ctx: AgentContext) -> dict[str, Any]:
            self.ran.append(ctx.step)
            return {"step": ctx.step}

        @registry.agent("callback")
        def callback(ctx: AgentContext) -> Any:
            self.tokens.append(ctx.task_token())
            return Pending("handed off")

        @registry.agent("slow")
        def slow_agent(ctx: AgentContext) -> Any:
            assert slow is not None
            return slow(self, ctx)

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            self.undone.append(ctx.step)

        self.engine = MemoryEngine({"timed": self.definition}, agents=registry)
        self.start = self.engine.clock.now_ms()
        self.wf = self.engine.start("timed", {})

    @property
    def deadline(self) -> int:
        return self.start + TIMEOUT * 1000

    def due_at(self) -> int | None:
        item = self.engine.store.get(wf_pk(self.wf), WF_SK)
        assert item is not None
        return None if item.get("due_at") is None else int(item["due_at"])

    def sweep_at(self, at_ms: int) -> None:
        self.engine.advance((at_ms - self.engine.clock.now_ms()) / 1000)
        self.engine.sweep()
        self.engine.deliver()


def test_a_workflow_resting_past_its_timeout_unwinds_at_its_deadline_and_not_before() -> None:
    run = Run(
        _task("charge"), {"Name": "hold", "Wait": {"Seconds": 86_400}, "DependsOn": ["charge"]}
    )
    run.engine.deliver()
    assert run.engine.outcome(run.wf).steps["hold"].status is StepStatus.WAITING
    # The watch entry is due no later than the workflow's deadline (not the day's wait) ...
    due = run.due_at()
    assert due is not None and due <= run.deadline
    # ... and a look just before the deadline leaves it running.
    run.sweep_at(run.deadline - 1)
    assert run.engine.outcome(run.wf).status is WorkflowStatus.RUNNING
    assert run.undone == []
    due = run.due_at()
    assert due is not None and due <= run.deadline
    run.sweep_at(run.deadline)
    run.sweep_at(run.deadline + 1000)
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.error is not None and outcome.error["type"] == "States.Timeout"
    assert "TimeoutSeconds (60)" in outcome.error["message"]
    assert outcome.steps["hold"].status is StepStatus.CANCELLED
    assert run.undone == ["charge"]
    assert "WorkflowCompensating" in outcome.events or "WorkflowCompensated" in outcome.events


def test_a_callback_in_flight_is_fenced_and_its_late_answer_refused() -> None:
    run = Run(_task("book"), _task("carrier", "book", agent="callback"))
    run.engine.deliver()
    assert run.engine.outcome(run.wf).steps["carrier"].status is StepStatus.WAITING
    run.sweep_at(run.deadline)
    run.sweep_at(run.deadline + 1000)
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    carrier = outcome.steps["carrier"]
    assert carrier.status is StepStatus.FAILED
    assert carrier.error is not None and carrier.error.name == "States.Timeout"
    assert run.undone == ["carrier", "book"]  # it may have acted: undone
    with pytest.raises(TaskTokenStale):
        run.engine.callback(run.tokens[0], "success", output={"late": True})


def test_a_running_attempt_is_fenced_and_its_late_result_refused() -> None:
    def slow(run: Run, ctx: AgentContext) -> Any:
        run.engine.advance(TIMEOUT + 1)  # the attempt is still running at the deadline
        run.engine.sweep()  # the supervisor's look fences it
        return {"late": True}

    run = Run(
        _task("book"), _task("crunch", "book", agent="slow"), _task("after", "crunch"), slow=slow
    )
    run.engine.deliver()
    run.engine.advance(1)
    run.engine.sweep()
    run.engine.deliver()
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.steps["crunch"].status is StepStatus.FAILED
    crunch = outcome.steps["crunch"]
    assert crunch.output is None  # the late result was refused
    assert crunch.error is not None and crunch.error.name == "States.Timeout"
    assert outcome.steps["after"].status is StepStatus.CANCELLED
    assert "after" not in run.ran
    assert run.undone == ["crunch", "book"]


def test_on_failure_pause_pauses_at_the_timeout_and_a_resume_runs_on_without_it() -> None:
    run = Run(_task("book"), _task("carrier", "book", agent="callback"), on_failure="PAUSE")
    run.engine.deliver()
    run.sweep_at(run.deadline)
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.PAUSED
    loaded = run.engine.engine.scheduler.load(run.wf)
    assert loaded is not None
    view = workflow_view(*loaded, run.engine.engine.ports.payloads)
    assert view.pause is not None and view.pause["reason"] == "timeout"
    assert view.pause["error"]["type"] == "States.Timeout"
    run.engine.resume(run.wf)  # the carrier's failed step is sent again
    run.engine.deliver()
    assert len(run.tokens) == 2
    run.sweep_at(run.deadline + 10 * TIMEOUT * 1000)  # long past: it fired once
    assert run.engine.outcome(run.wf).status is WorkflowStatus.RUNNING
    run.engine.callback(run.tokens[1], "success", output={"ok": True})
    run.engine.deliver()
    assert run.engine.outcome(run.wf).status is WorkflowStatus.SUCCEEDED


def test_a_workflow_that_ends_in_time_is_untouched_and_leaves_the_index() -> None:
    run = Run(_task("a"), _task("b", "a"))
    run.engine.deliver()
    assert run.engine.outcome(run.wf).status is WorkflowStatus.SUCCEEDED
    run.sweep_at(run.deadline + 1000)
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED and run.undone == []
    assert run.due_at() is None


def test_a_success_after_the_deadline_sends_nothing_before_the_look() -> None:
    def slow(run: Run, ctx: AgentContext) -> Any:
        run.engine.advance(TIMEOUT + 1)  # returns after the deadline, before any look
        return {"slow": True}

    run = Run(_task("crunch", agent="slow"), _task("after", "crunch"), slow=slow)
    run.engine.deliver()
    assert "after" not in run.ran  # nobody but the supervisor acts past the deadline
    assert run.engine.queue.depth("p") == 0
    run.engine.sweep()
    run.engine.deliver()
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.error is not None and outcome.error["type"] == "States.Timeout"
    assert run.undone == ["crunch"]


def test_the_view_shows_when_a_running_workflow_times_out() -> None:
    run = Run(_task("book"), _task("carrier", "book", agent="callback"))
    run.engine.deliver()
    loaded = run.engine.engine.scheduler.load(run.wf)
    assert loaded is not None
    view = workflow_view(*loaded, run.engine.engine.ports.payloads)
    assert view.timeout_at is not None
    assert view.timeout_at.startswith("2") and view.timeout_at == _iso(run.deadline)
    run.sweep_at(run.deadline)
    loaded = run.engine.engine.scheduler.load(run.wf)
    assert loaded is not None
    view = workflow_view(*loaded, run.engine.engine.ports.payloads)
    assert view.timeout_at is None
    assert view.error is not None and view.error["type"] == "States.Timeout"


def _iso(ms: int) -> str:
    text = iso(ms)
    assert text is not None
    return text


def test_the_timeout_costs_no_write_on_the_happy_path() -> None:
    """The same workflow, with and without a TimeoutSeconds it never reaches: the same
    number of writes (the deadline is read from the start time, never written per step)."""
    counts = []
    for timeout in (None, TIMEOUT):
        run = Run(_task("a"), _task("b", "a"), _task("c", "b"), timeout=timeout)
        run.engine.deliver()
        assert run.engine.outcome(run.wf).status is WorkflowStatus.SUCCEEDED
        counts.append(run.engine.store.writes)
    assert counts[0] == counts[1]
