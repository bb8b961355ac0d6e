"""Repeat steps (issue 42.5), on the real engine over in-memory ports and the manual clock: a
task step runs again until its `Until` holds, each iteration a fenced attempt of its own with
its own Retry budget, resting `IntervalSeconds` between iterations with no message out; it
succeeds with the last iteration's output, or fails for good with `States.LoopLimitExceeded`
after `MaxIterations`."""

from __future__ import annotations

import itertools
from typing import Any

from shepherd import AgentRegistry
from shepherd.decisions.repeat import LOOP_LIMIT
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.model import StepStatus, WorkflowStatus, loads
from shepherd.testing import MemoryEngine


def _definition(
    *,
    max_iterations: int = 10,
    interval: int = 0,
    retry: int = 0,
    compensate: bool = False,
    on_failure: str = "COMPENSATE",
) -> Any:
    poll: dict[str, Any] = {
        "Name": "poll",
        "DependsOn": ["start"],
        "Agent": "check",
        "Pool": "p",
        "TimeoutSeconds": 30,
        "Retry": {"MaxAttempts": retry, "IntervalSeconds": 1, "BackoffRate": 1},
        "Repeat": {
            "Until": {"Variable": "$.steps.poll.output.status", "StringEquals": "DONE"},
            "IntervalSeconds": interval,
            "MaxIterations": max_iterations,
        },
    }
    if compensate:
        poll["Compensation"] = {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10}
    steps = [
        {"Name": "start", "Agent": "begin", "Pool": "p", "TimeoutSeconds": 10},
        poll,
        {
            "Name": "after",
            "DependsOn": ["poll"],
            "Agent": "finish",
            "Pool": "p",
            "TimeoutSeconds": 10,
        },
    ]
    return parse_definition(
        {"Name": "loops", "OnFailure": on_failure, "Steps": steps}, "loops.yaml"
    )


class Export:
    """An export that is DONE at the `done_at`-th check (never, with None)."""

    def __init__(self, done_at: int | None, *, fail_on: tuple[int, ...] = ()) -> None:
        self.done_at = done_at
        self.fail_on = set(fail_on)  # iterations whose first attempt raises
        self.checks: list[dict[str, Any]] = []
        self.during: dict[int, Any] = {}  # iteration -> what happens while it runs
        self.finished: list[Any] = []
        self.undone = 0

    def engine(self, definition: Any) -> MemoryEngine:
        registry = AgentRegistry()

        @registry.agent("begin")
        def begin(ctx: AgentContext) -> dict[str, Any]:
            return {"export": "e-1"}

        @registry.agent("check")
        def check(ctx: AgentContext) -> dict[str, Any]:
            iteration = ctx.iteration
            assert iteration is not None
            self.checks.append(
                {
                    "iteration": iteration,
                    "attempt": ctx.attempt,
                    "previous": ctx.previous_output,
                    "key": ctx.idempotency_key,
                    "at": engine.clock.now_ms(),
                }
            )
            if iteration in self.during:
                self.during.pop(iteration)()
            if iteration in self.fail_on:
                self.fail_on.discard(iteration)
                raise RuntimeError("flaky")
            done = self.done_at is not None and iteration >= self.done_at
            return {"status": "DONE" if done else "RUNNING", "cursor": iteration}

        @registry.agent("finish")
        def finish(ctx: AgentContext) -> Any:
            self.finished.append(ctx.dependencies["poll"])
            return ctx.dependencies["poll"]

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            assert ctx.forward is not None
            self.undone += 1
            self.undo_keys = ctx.forward.idempotency_keys
            self.undo_output = ctx.step_output

        engine = MemoryEngine({"loops": definition}, agents=registry)
        return engine


def test_until_holding_at_the_first_iteration_succeeds_at_once() -> None:
    export = Export(done_at=1)
    engine = export.engine(_definition())
    wf = engine.start("loops", {})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert [c["iteration"] for c in export.checks] == [1]
    assert export.checks[0]["previous"] is None
    assert export.finished == [{"status": "DONE", "cursor": 1}]
    rec = engine.engine.scheduler.load(wf)[0].steps["poll"]  # type: ignore[index]
    assert rec.iterations == 1
    assert rec.attempt == 1


def test_it_runs_until_the_rule_holds_passing_the_last_output_on() -> None:
    export = Export(done_at=4)
    engine = export.engine(_definition())
    wf = engine.start("loops", {})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert [c["iteration"] for c in export.checks] == [1, 2, 3, 4]
    # Each iteration sees the one before's output (a cursor to go on from).
    assert [c["previous"] for c in export.checks] == [
        None,
        {"status": "RUNNING", "cursor": 1},
        {"status": "RUNNING", "cursor": 2},
        {"status": "RUNNING", "cursor": 3},
    ]
    # The step succeeds with the last iteration's output; its dependent ran once, after it.
    assert export.finished == [{"status": "DONE", "cursor": 4}]
    assert outcome.steps["poll"].output == {"status": "DONE", "cursor": 4}
    rec = engine.engine.scheduler.load(wf)[0].steps["poll"]  # type: ignore[index]
    assert rec.iterations == 4
    assert rec.status is StepStatus.SUCCEEDED


def test_max_iterations_without_until_fails_the_step_for_good_and_unwinds() -> None:
    export = Export(done_at=None)
    engine = export.engine(_definition(max_iterations=3, retry=2, compensate=True))
    wf = engine.start("loops", {})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert [c["iteration"] for c in export.checks] == [1, 2, 3]  # not retried: for good
    rec = engine.engine.scheduler.load(wf)[0].steps["poll"]  # type: ignore[index]
    assert rec.status is StepStatus.FAILED
    assert rec.iterations == 3
    assert loads(rec.error)["type"] == LOOP_LIMIT
    assert export.finished == []
    assert export.undone == 1  # its compensation runs once, however many iterations ran
    # ...given every iteration's key (and the next one's: the step did not succeed), to
    # undo what each did; no output (the step never succeeded).
    keys = [c["key"] for c in export.checks]
    assert export.undo_keys[:3] == tuple(keys)
    assert export.undo_keys[3].endswith("#4")
    assert export.undo_output is None
    # Announced as any step failing for good: StepFailed, with the loop limit as its error.
    assert "StepFailed" in outcome.events
    assert "StepRetried" not in outcome.events  # an iteration is no retry


def test_the_interval_is_honoured_never_early_and_nothing_is_sent_while_resting() -> None:
    export = Export(done_at=3)
    engine = export.engine(_definition(interval=60))
    wf = engine.start("loops", {})
    engine.deliver()
    assert [c["iteration"] for c in export.checks] == [1]
    first_at = export.checks[0]["at"]
    rec = engine.engine.scheduler.load(wf)[0].steps["poll"]  # type: ignore[index]
    assert rec.status is StepStatus.QUEUED
    assert rec.dispatched_at is None  # resting: no message out
    assert engine.queue.depth("p") == 0
    # Sweeps before the interval ends send nothing.
    for _ in range(59):
        engine.advance(1)
        engine.sweep()
        engine.deliver()
    assert [c["iteration"] for c in export.checks] == [1]
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    starts = [c["at"] for c in export.checks]
    assert [c["iteration"] for c in export.checks] == [1, 2, 3]
    assert starts[1] - first_at >= 60_000
    assert starts[2] - starts[1] >= 60_000
    # ...and woken through the watch index within a sweep of its time, not much later.
    assert starts[1] - first_at <= 62_000


def test_each_iteration_has_its_own_retry_budget() -> None:
    # MaxAttempts 1: one retry per iteration. Iterations 1 and 2 each fail once and are
    # retried: a budget shared across iterations would fail the step at iteration 2.
    export = Export(done_at=3, fail_on=(1, 2))
    engine = export.engine(_definition(retry=1))
    wf = engine.start("loops", {})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert [(c["iteration"], c["attempt"]) for c in export.checks] == [
        (1, 1),
        (1, 2),
        (2, 3),
        (2, 4),
        (3, 5),
    ]
    # An iteration's attempts share its idempotency key; the next iteration has its own.
    keys = [c["key"] for c in export.checks]
    assert keys[0] == keys[1] and keys[2] == keys[3]
    assert len({keys[0], keys[2], keys[4]}) == 3
    assert keys[4].endswith("#3")


def test_a_late_result_of_an_earlier_iteration_is_fenced_out() -> None:
    export = Export(done_at=3)
    engine = export.engine(_definition(interval=10))
    wf = engine.start("loops", {})
    engine.deliver()  # start, and poll's first iteration
    scheduler = engine.engine.scheduler
    state, _ = scheduler.load(wf)  # type: ignore[misc]
    queued = state.steps["poll"]
    assert queued.status is StepStatus.QUEUED and queued.iterations == 1
    # The first iteration's attempt (1), as its agent held it, records a result again late
    # (a duplicate delivery, a zombie): refused, nothing counted.
    stale = queued.__class__(
        **{**queued.__dict__, "status": StepStatus.RUNNING, "attempt": 1, "iterations": 0}
    )
    late = scheduler.record_result(state, stale, '{"status": "DONE"}')
    assert late is None
    rec = scheduler.load(wf)[0].steps["poll"]  # type: ignore[index]
    assert (rec.status, rec.attempt, rec.iterations) == (StepStatus.QUEUED, 2, 1)
    # Iteration 2 runs, and a late result of iteration 1 cannot end it either.
    engine.advance(10)
    engine.sweep()
    engine.deliver()
    state, _ = scheduler.load(wf)  # type: ignore[misc]
    assert state.steps["poll"].iterations == 2
    assert scheduler.record_result(state, stale, '{"status": "DONE"}') is None
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert [c["iteration"] for c in export.checks] == [1, 2, 3]
    assert export.finished == [{"status": "DONE", "cursor": 3}]


def test_the_workflow_view_shows_the_iterations_and_the_resting_iterations_deadline() -> None:
    from shepherd_handlers.views import workflow_view

    export = Export(done_at=2)
    engine = export.engine(_definition(interval=60))
    wf = engine.start("loops", {})
    engine.deliver()
    scheduler = engine.engine.scheduler
    now = engine.clock.now_ms()
    loaded = scheduler.load(wf)
    assert loaded is not None
    view = workflow_view(*loaded, engine.engine.ports.payloads, now=now)
    poll = next(s for s in view.steps if s.name == "poll")
    assert (poll.status, poll.iterations) == ("QUEUED", 1)
    assert poll.output == {"status": "RUNNING", "cursor": 1}
    assert poll.next_deadline is not None and poll.next_deadline.why == "backoff"
    start = next(s for s in view.steps if s.name == "start")
    assert start.iterations is None  # a step that does not repeat shows none
    assert engine.run(wf).status is WorkflowStatus.SUCCEEDED
    loaded = scheduler.load(wf)
    assert loaded is not None
    poll = next(
        s for s in workflow_view(*loaded, engine.engine.ports.payloads).steps if s.name == "poll"
    )
    assert (poll.status, poll.iterations) == ("SUCCEEDED", 2)


def test_a_cancel_while_an_iteration_rests_cancels_it_and_undoes_the_step_once() -> None:
    export = Export(done_at=None)
    engine = export.engine(_definition(interval=600, compensate=True))
    wf = engine.start("loops", {})
    engine.deliver()
    engine.advance(600)
    engine.sweep()
    engine.deliver()  # two iterations ran; the third rests
    assert [c["iteration"] for c in export.checks] == [1, 2]
    engine.cancel(wf)
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.CANCELLED
    assert [c["iteration"] for c in export.checks] == [1, 2]  # the resting one never ran
    assert export.undone == 1


def test_a_resume_after_the_loop_limit_goes_on_from_the_last_output_with_a_fresh_budget() -> None:
    export = Export(done_at=None)
    engine = export.engine(_definition(max_iterations=2, on_failure="PAUSE"))
    wf = engine.start("loops", {})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.PAUSED
    assert [c["iteration"] for c in export.checks] == [1, 2]
    export.done_at = 4  # the export finishes at the fourth check
    engine.resume(wf)
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert [c["iteration"] for c in export.checks] == [1, 2, 3, 4]
    assert export.checks[2]["previous"] == {"status": "RUNNING", "cursor": 2}
    assert export.finished == [{"status": "DONE", "cursor": 4}]


def test_until_may_compare_the_output_with_the_workflow_input() -> None:
    definition = parse_definition(
        {
            "Name": "loops",
            "Steps": [
                {
                    "Name": "page",
                    "Agent": "page",
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                    "Repeat": {
                        "Until": {
                            "Variable": "$.steps.page.output.cursor",
                            "NumericGreaterThanEqualsPath": "$.input.pages",
                        },
                        "MaxIterations": 50,
                    },
                }
            ],
        },
        "loops.yaml",
    )
    registry = AgentRegistry()

    @registry.agent("page")
    def page(ctx: AgentContext) -> dict[str, Any]:
        cursor = (ctx.previous_output or {}).get("cursor", 0)
        return {"cursor": cursor + 1}

    engine = MemoryEngine({"loops": definition}, agents=registry)
    wf = engine.start("loops", {"pages": 7})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["page"].output == {"cursor": 7}


def test_an_iteration_that_ends_while_its_workflow_is_paused_waits_for_the_resume() -> None:
    export = Export(done_at=3)
    engine = export.engine(_definition(interval=30))
    wf = engine.start("loops", {})
    export.during = {1: lambda: engine.pause(wf)}  # paused while iteration 1 runs
    engine.deliver()
    state, _ = engine.engine.scheduler.load(wf)  # type: ignore[misc]
    assert state.workflow.status is WorkflowStatus.PAUSED
    rec = state.steps["poll"]
    assert (rec.status, rec.iterations, rec.dispatched_at) == (StepStatus.QUEUED, 1, None)
    for _ in range(12):  # past its rest: a paused workflow's look sends nothing
        engine.advance(10)
        engine.sweep()
        engine.deliver()
    assert [c["iteration"] for c in export.checks] == [1]
    engine.resume(wf)
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert [c["iteration"] for c in export.checks] == [1, 2, 3]


# ------------------------------------------------------------- a child workflow's loop body

BODY = {
    "Name": "remind",
    "Steps": [
        {"Name": "send", "Agent": "send", "Pool": "p", "TimeoutSeconds": 10},
        {"Name": "look", "Agent": "look", "Pool": "p", "TimeoutSeconds": 10, "DependsOn": ["send"]},
    ],
}


def _chase(*, interval: int, max_iterations: int = 5) -> dict[str, Any]:
    return {
        "Name": "chase",
        "Steps": [
            {
                "Name": "reminders",
                "Workflow": "remind",
                "TimeoutSeconds": 600,
                "Retry": {"MaxAttempts": 0},
                "Repeat": {
                    "Until": {
                        "Variable": "$.steps.reminders.output.look.answered",
                        "BooleanEquals": True,
                    },
                    "IntervalSeconds": interval,
                    "MaxIterations": max_iterations,
                },
            },
            {
                "Name": "thank",
                "Agent": "thank",
                "Pool": "p",
                "TimeoutSeconds": 10,
                "DependsOn": ["reminders"],
            },
        ],
    }


class Reminders:
    def __init__(self, answered_at: int | None) -> None:
        self.answered_at = answered_at
        self.sent: list[tuple[str, int]] = []
        self.thanked: list[Any] = []

    def engine(self, parent: dict[str, Any]) -> MemoryEngine:
        registry = AgentRegistry()

        @registry.agent("send")
        def send(ctx: AgentContext) -> dict[str, Any]:
            self.sent.append((ctx.workflow_id, engine.clock.now_ms()))
            return {"sent": len(self.sent)}

        @registry.agent("look")
        def look(ctx: AgentContext) -> dict[str, Any]:
            answered = self.answered_at is not None and len(self.sent) >= self.answered_at
            return {"answered": answered}

        @registry.agent("thank")
        def thank(ctx: AgentContext) -> Any:
            self.thanked.append(ctx.dependencies["reminders"])
            return None

        definitions = {
            "remind": parse_definition(BODY, "remind.yaml"),
            "chase": parse_definition(parent, "chase.yaml"),
        }
        engine = MemoryEngine(definitions, agents=registry)
        return engine


def test_a_child_workflow_step_repeats_its_body_one_child_per_iteration() -> None:
    reminders = Reminders(answered_at=3)
    engine = reminders.engine(_chase(interval=3600))
    wf = engine.start("chase", {"to": "ada"})
    outcome = engine.run(wf, step_seconds=60)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    children = [child for child, _ in reminders.sent]
    assert len(children) == 3 and len(set(children)) == 3  # a child of its own each
    times = [at for _, at in reminders.sent]
    assert all(b - a >= 3_600_000 for a, b in itertools.pairwise(times))
    assert reminders.thanked == [{"send": {"sent": 3}, "look": {"answered": True}}]
    rec = engine.engine.scheduler.load(wf)[0].steps["reminders"]  # type: ignore[index]
    assert (rec.status, rec.iterations) == (StepStatus.SUCCEEDED, 3)


def test_a_child_loop_with_no_interval_starts_the_next_child_at_once() -> None:
    reminders = Reminders(answered_at=2)
    engine = reminders.engine(_chase(interval=0))
    wf = engine.start("chase", {})
    engine.deliver()  # no time passes, no sweep: each child's end starts the next
    state, _ = engine.engine.scheduler.load(wf)  # type: ignore[misc]
    assert len(reminders.sent) == 2
    assert state.workflow.status is WorkflowStatus.SUCCEEDED


def test_a_child_loop_that_never_ends_fails_with_the_loop_limit() -> None:
    reminders = Reminders(answered_at=None)
    engine = reminders.engine(_chase(interval=60, max_iterations=2))
    wf = engine.start("chase", {})
    outcome = engine.run(wf, step_seconds=30)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert len(reminders.sent) == 2
    rec = engine.engine.scheduler.load(wf)[0].steps["reminders"]  # type: ignore[index]
    assert rec.status is StepStatus.FAILED
    assert loads(rec.error)["type"] == LOOP_LIMIT
    assert reminders.thanked == []


def test_what_an_iteration_reads_and_writes_does_not_grow_with_the_iterations_done() -> None:
    """Each iteration's store calls and the step's item size are the same at iteration 150
    as at iteration 30 (the history holds its last 20 attempts): nothing is read back."""
    import json

    from shepherd.keys import item_sk, wf_pk

    export = Export(done_at=200)
    engine = export.engine(_definition(max_iterations=200))
    calls: list[str] = []
    store = engine.store
    for name in ("get", "get_many", "load", "update", "transact", "query_due", "create"):
        real = getattr(store, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        setattr(store, name, counted)
    wf = engine.start("loops", {})

    def one_message() -> None:
        (m,) = engine.queue.receive("p", 1)
        engine.engine.agent_runtime.handle(m.task)
        engine.queue.delete(m.receipt)

    one_message()  # `start`; its success sends poll's first iteration
    per_iteration: list[int] = []
    sizes: list[int] = []
    while len(export.checks) < 200:
        before = len(calls)
        # One iteration: its message delivered and recorded (no interval: the next is sent).
        one_message()
        per_iteration.append(len(calls) - before)
        item = store.get(wf_pk(wf), item_sk("step", "poll"))
        sizes.append(len(json.dumps(item, default=str)) if item else 0)
    assert len(export.checks) == 200
    assert per_iteration[30:40] == per_iteration[150:160]
    assert engine.outcome(wf).steps["poll"].status is StepStatus.SUCCEEDED
    # The item: the same fields, its numbers a digit longer (20 history entries' attempts).
    assert 0 <= sizes[150] - sizes[30] <= 64, (sizes[30], sizes[150])


def test_until_reads_the_output_as_shaped_and_assign_keeps_the_last_iteration() -> None:
    """With the data expressions: `Output` shapes each iteration's output before `Until` reads
    it (and before the next iteration sees it), and `Assign` sets its variables with the
    step's success, from its last iteration."""
    definition = parse_definition(
        {
            "Name": "loops",
            "Steps": [
                {
                    "Name": "page",
                    "Agent": "page",
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                    "Output": "{% {'n': $states.result.raw} %}",
                    "Assign": {"pages": "{% $states.result.raw %}"},
                    "Repeat": {
                        "Until": {"Variable": "$.steps.page.output.n", "NumericEquals": 3},
                        "MaxIterations": 5,
                    },
                },
                {
                    "Name": "after",
                    "DependsOn": ["page"],
                    "Agent": "after",
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                    "Arguments": {"pages": "{% $pages %}"},
                },
            ],
        },
        "loops.yaml",
    )
    seen: list[Any] = []
    registry = AgentRegistry()

    @registry.agent("page")
    def page(ctx: AgentContext) -> dict[str, Any]:
        seen.append(ctx.previous_output)
        return {"raw": ctx.iteration}

    @registry.agent("after")
    def after(ctx: AgentContext) -> Any:
        seen.append(ctx.input)
        return None

    engine = MemoryEngine({"loops": definition}, agents=registry)
    outcome = engine.run(engine.start("loops", {}))
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert seen == [None, {"n": 1}, {"n": 2}, {"pages": 3}]
    assert outcome.steps["page"].output == {"n": 3}


def test_an_iteration_write_that_landed_but_timed_out_still_sends_the_next_iteration() -> None:
    """The store applies an iteration's write and then fails (a timeout after the write):
    the agent's retry loses its fence, sees its own result accepted, and sends the next
    iteration at once, as if the first try had answered (no wait for a supervisor)."""
    from shepherd.errors import StoreUnavailable

    export = Export(done_at=3)
    engine = export.engine(_definition())
    store = engine.store
    real = store.update
    failed: list[str] = []

    def update(pk: str, sk: str, update: Any, condition: Any) -> Any:
        item = real(pk, sk, update, condition)
        if "iterations" in update.add and not failed:
            failed.append(sk)
            raise StoreUnavailable("timed out after the write")
        return item

    store.update = update  # type: ignore[method-assign]
    wf = engine.start("loops", {})
    engine.deliver()  # no time passes, no sweep
    assert failed  # the first iteration's write landed and failed
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert [c["iteration"] for c in export.checks] == [1, 2, 3]
