"""Control flow in native definitions (issue 42.5), end to end on the engine over in-memory
ports: a step's `Catch` runs its fallback with the error instead of unwinding, a `Choice`
step picks one step in the write that makes it ready, and a branch no dependency of which
ran is out of scope (SKIPPED) with no repeated Condition."""

from __future__ import annotations

from typing import Any

from shepherd import AgentRegistry, PermanentError
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine


def _task(name: str, *deps: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Name": name,
        "Agent": "work",
        "Pool": "p",
        "TimeoutSeconds": 10,
        "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0},
    }
    if deps:
        out["DependsOn"] = list(deps)
    out.update(extra)
    return out


class Flaky(Exception):
    """An error that is retried (not permanent): its class name is its error name."""


class Calls:
    def __init__(self, failing: dict[str, str] | None = None) -> None:
        self.failing = failing or {}
        self.ran: list[str] = []
        self.inputs: dict[str, Any] = {}
        self.deps: dict[str, dict[str, Any]] = {}
        self.undone: list[str] = []

    def registry(self) -> AgentRegistry:
        registry = AgentRegistry()

        @registry.agent("work")
        def work(ctx: AgentContext) -> dict[str, Any]:
            self.ran.append(ctx.step)
            self.inputs[ctx.step] = ctx.input
            self.deps[ctx.step] = dict(ctx.dependencies)
            error = self.failing.get(ctx.step)
            if error == "Flaky":
                raise Flaky(f"{ctx.step} flaked")
            if error is not None:
                raise PermanentError(f"{ctx.step} cannot", name=error)
            return {"done": ctx.step}

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            self.undone.append(ctx.step)

        return registry


CHECKOUT = parse_definition(
    {
        "Name": "checkout",
        "Steps": [
            _task(
                "charge",
                Catch=[
                    {"ErrorEquals": ["CardDeclined"], "Next": "apologise"},
                    {"ErrorEquals": ["States.ALL"], "Next": "escalate"},
                ],
                Compensation={"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
            ),
            _task("ship", "charge"),
            _task("receipt", "ship"),
            _task("apologise"),
            _task("escalate"),
        ],
    },
    "checkout.yaml",
)


def _run(definition: Any, calls: Calls, payload: Any = None) -> Any:
    engine = MemoryEngine({definition.name: definition}, agents=calls.registry())
    wf = engine.start(definition.name, payload if payload is not None else {})
    return engine, wf, engine.run(wf)


def test_a_caught_failure_runs_its_fallback_with_the_error_and_the_workflow_succeeds() -> None:
    calls = Calls({"charge": "CardDeclined"})
    _, _, outcome = _run(CHECKOUT, calls)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    statuses = {n: s.status for n, s in outcome.steps.items()}
    assert statuses == {
        "charge": StepStatus.FAILED,
        "ship": StepStatus.SKIPPED,  # the caught step's dependents are out of scope
        "receipt": StepStatus.SKIPPED,
        "apologise": StepStatus.SUCCEEDED,
        "escalate": StepStatus.SKIPPED,  # named by the other catcher: not entered
    }
    assert calls.ran == ["charge", "apologise"]  # a permanent error: one attempt
    assert calls.inputs["apologise"] == {"Error": "CardDeclined", "Cause": "charge cannot"}
    assert calls.deps["apologise"] == {
        "charge": {"Error": "CardDeclined", "Cause": "charge cannot"}
    }
    assert calls.undone == []  # caught: nothing unwinds
    assert set(outcome.output) == {"apologise"}  # out-of-scope steps are left out


def test_states_all_takes_any_other_error_once_the_retries_are_spent() -> None:
    calls = Calls({"charge": "Flaky"})
    _, _, outcome = _run(CHECKOUT, calls)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["escalate"].status is StepStatus.SUCCEEDED
    assert outcome.steps["apologise"].status is StepStatus.SKIPPED
    assert calls.ran == ["charge", "charge", "escalate"]  # retried first (MaxAttempts 1)
    assert calls.inputs["escalate"]["Error"] == "Flaky"


def test_without_a_failure_the_fallbacks_never_run() -> None:
    calls = Calls()
    _, _, outcome = _run(CHECKOUT, calls)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert sorted(calls.ran) == ["charge", "receipt", "ship"]
    assert outcome.steps["apologise"].status is StepStatus.SKIPPED
    assert outcome.steps["escalate"].status is StepStatus.SKIPPED
    assert set(outcome.output) == {"charge", "ship", "receipt"}


def test_a_fallback_that_fails_for_good_unwinds_the_workflow() -> None:
    calls = Calls({"charge": "CardDeclined", "apologise": "MailDown"})
    _, _, outcome = _run(CHECKOUT, calls)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert calls.undone == ["charge"]  # it was claimed: it may have acted


def test_an_error_no_catcher_takes_unwinds_as_before() -> None:
    definition = parse_definition(
        {
            "Name": "narrow",
            "Steps": [
                _task("charge", Catch=[{"ErrorEquals": ["CardDeclined"], "Next": "apologise"}]),
                _task("apologise"),
            ],
        },
        "narrow.yaml",
    )
    calls = Calls({"charge": "Flaky"})
    _, _, outcome = _run(definition, calls)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert calls.ran == ["charge", "charge"]  # retried once, then failed for good
    assert outcome.steps["apologise"].status is not StepStatus.SUCCEEDED


BIG = {"Variable": "$.steps.quote.output.total", "NumericGreaterThan": 1000}
ROUTE = parse_definition(
    {
        "Name": "route",
        "Steps": [
            _task("quote"),
            {
                "Name": "size",
                "DependsOn": ["quote"],
                "Choice": {
                    "Choices": [{"Condition": BIG, "Next": "deposit"}],
                    "Default": "waive",
                },
            },
            # Two branches, each its own chain with no repeated Condition, and a join.
            _task("deposit"),
            _task("deposit_receipt", "deposit"),
            _task("waive"),
            _task("waive_note", "waive"),
            _task("waive_log", "waive_note"),
            _task("confirm", "deposit_receipt", "waive_log"),
        ],
    },
    "route.yaml",
)


class Quotes(Calls):
    def __init__(self, total: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.total = total

    def registry(self) -> AgentRegistry:
        registry = super().registry()
        base = registry.get("work")
        assert base is not None

        @registry.agent("work")
        def work(ctx: AgentContext) -> Any:
            out = base(ctx)
            return {"total": self.total} if ctx.step == "quote" else out

        return registry


def test_a_choice_runs_the_step_it_picks_and_the_other_branch_is_out_of_scope() -> None:
    calls = Quotes(5000)
    _, _, outcome = _run(ROUTE, calls)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    statuses = {n: s.status for n, s in outcome.steps.items()}
    assert statuses == {
        "quote": StepStatus.SUCCEEDED,
        "size": StepStatus.SUCCEEDED,
        "deposit": StepStatus.SUCCEEDED,
        "deposit_receipt": StepStatus.SUCCEEDED,
        "waive": StepStatus.SKIPPED,  # not chosen
        "waive_note": StepStatus.SKIPPED,  # out of scope: no Condition repeated
        "waive_log": StepStatus.SKIPPED,
        "confirm": StepStatus.SUCCEEDED,  # the join: one dependency ran
    }
    assert calls.ran == ["quote", "deposit", "deposit_receipt", "confirm"]
    assert calls.deps["confirm"] == {
        "deposit_receipt": {"done": "deposit_receipt"},
        "waive_log": None,
    }
    assert set(outcome.output) == {"quote", "size", "deposit", "deposit_receipt", "confirm"}
    assert outcome.output["size"] is None  # a Choice's output is null


def test_the_default_runs_when_no_rule_holds() -> None:
    calls = Quotes(10)
    _, _, outcome = _run(ROUTE, calls)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert calls.ran == ["quote", "waive", "waive_note", "waive_log", "confirm"]
    assert outcome.steps["deposit"].status is StepStatus.SKIPPED
    assert outcome.steps["deposit_receipt"].status is StepStatus.SKIPPED


def test_a_choice_with_no_match_and_no_default_fails_with_no_choice_matched() -> None:
    definition = parse_definition(
        {
            "Name": "strict",
            "Steps": [
                _task("quote"),
                {
                    "Name": "size",
                    "DependsOn": ["quote"],
                    "Choice": {"Choices": [{"Condition": BIG, "Next": "deposit"}]},
                },
                _task("deposit"),
            ],
        },
        "strict.yaml",
    )
    calls = Quotes(10)
    _, _, outcome = _run(definition, calls)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.steps["size"].status is StepStatus.FAILED
    assert outcome.steps["size"].error is not None
    assert outcome.steps["size"].error.name == "States.NoChoiceMatched"
    assert calls.ran == ["quote"]


def test_a_root_choice_is_decided_with_the_start_on_the_input() -> None:
    definition = parse_definition(
        {
            "Name": "plans",
            "Steps": [
                {
                    "Name": "plan",
                    "Choice": {
                        "Choices": [
                            {
                                "Condition": {"Variable": "$.input.plan", "StringEquals": "pro"},
                                "Next": "pro",
                            }
                        ],
                        "Default": "free",
                    },
                },
                _task("pro"),
                _task("free"),
                _task("welcome", "pro", "free"),
            ],
        },
        "plans.yaml",
    )
    calls = Calls()
    _, _, outcome = _run(definition, calls, {"plan": "pro"})
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert calls.ran == ["pro", "welcome"]
    assert outcome.steps["free"].status is StepStatus.SKIPPED


def test_a_fallback_s_condition_reads_the_error() -> None:
    definition = parse_definition(
        {
            "Name": "reads",
            "Steps": [
                _task("charge", Catch=[{"ErrorEquals": ["States.ALL"], "Next": "refund"}]),
                _task(
                    "refund",
                    Condition={"Variable": "$.steps.charge.output.Error", "StringEquals": "Flaky"},
                ),
                _task("after_refund", "refund"),
            ],
        },
        "reads.yaml",
    )
    calls = Calls({"charge": "CardDeclined"})
    _, _, outcome = _run(definition, calls)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["refund"].status is StepStatus.SKIPPED  # its Condition: false
    assert calls.ran == ["charge", "after_refund"]  # a Condition skip counts as done


def test_the_workflow_view_shows_the_catch_the_choice_and_why_steps_were_skipped() -> None:
    from shepherd_handlers.views import workflow_view

    calls = Calls({"charge": "CardDeclined"})
    engine, wf, _ = _run(CHECKOUT, calls)
    loaded = engine.engine.scheduler.load(wf)
    assert loaded is not None
    state, definition = loaded
    view = workflow_view(state, definition, engine.engine.scheduler.ports.payloads)
    steps = {s.name: s for s in view.steps}
    assert view.status == "SUCCEEDED"
    charge = steps["charge"]
    assert (charge.status, charge.caught_by) == ("FAILED", "apologise")
    assert charge.error is not None and charge.error["type"] == "CardDeclined"
    assert charge.output == {"Error": "CardDeclined", "Cause": "charge cannot"}
    assert (steps["ship"].status, steps["ship"].skip_reason) == ("SKIPPED", "out_of_scope")
    assert steps["escalate"].skip_reason == "out_of_scope"  # a catcher's Next not taken
    assert view.output == {"apologise": {"done": "apologise"}}

    calls = Quotes(5000)
    engine, wf, _ = _run(ROUTE, calls)
    loaded = engine.engine.scheduler.load(wf)
    assert loaded is not None
    state, definition = loaded
    view = workflow_view(state, definition, engine.engine.scheduler.ports.payloads)
    steps = {s.name: s for s in view.steps}
    assert (steps["size"].status, steps["size"].chosen) == ("SUCCEEDED", "deposit")
    assert (steps["waive"].status, steps["waive"].skip_reason) == ("SKIPPED", "not_chosen")
    assert steps["waive_note"].skip_reason == "out_of_scope"
    assert steps["confirm"].skip_reason is None


def test_a_catch_lost_with_its_writer_is_recorded_by_the_supervisor() -> None:
    """The agent whose step failed for good dies before its advance: the supervisor finds the
    failure its catcher takes, records the catch and sends the fallback; nothing unwinds."""
    calls = Calls({"charge": "CardDeclined"})
    engine = MemoryEngine({"checkout": CHECKOUT}, agents=calls.registry())
    wf = engine.start("checkout", {})
    scheduler = engine.engine.scheduler
    original = scheduler.advance_after
    scheduler.advance_after = lambda *a, **k: None  # type: ignore[method-assign]
    engine.deliver()  # charge fails for good; nothing is advanced
    scheduler.advance_after = original  # type: ignore[method-assign]
    charge = engine.outcome(wf).steps["charge"]
    assert charge.status is StepStatus.FAILED
    outcome = engine.run(wf, max_seconds=600)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert calls.ran == ["charge", "apologise"]
    assert calls.undone == []


def test_a_timeout_is_caught_as_states_timeout() -> None:
    definition = parse_definition(
        {
            "Name": "slow",
            "Steps": [
                _task(
                    "call",
                    TimeoutSeconds=5,
                    Retry={"MaxAttempts": 0},
                    Catch=[{"ErrorEquals": ["States.Timeout"], "Next": "fallback"}],
                ),
                _task("fallback"),
            ],
        },
        "slow.yaml",
    )
    calls = Calls()
    registry = calls.registry()
    base = registry.get("work")
    assert base is not None

    @registry.agent("work")
    def work(ctx: AgentContext) -> Any:
        if ctx.step == "call":
            from shepherd.engine.agent import Pending

            ctx.task_token()  # handed to nobody: the callback never comes
            return Pending("waiting for a callback that never comes")
        return base(ctx)

    engine = MemoryEngine({"slow": definition}, agents=registry)
    wf = engine.start("slow", {})
    outcome = engine.run(wf, max_seconds=600)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert calls.inputs["fallback"]["Error"] == "States.Timeout"
    assert outcome.steps["call"].status is StepStatus.FAILED


def test_a_rejected_approval_and_a_signal_wait_that_timed_out_are_caught() -> None:
    definition = parse_definition(
        {
            "Name": "gate",
            "Steps": [
                {
                    "Name": "review",
                    "Approval": {"TimeoutSeconds": 60},
                    "Catch": [{"ErrorEquals": ["Rejected"], "Next": "declined"}],
                },
                _task("declined"),
                {
                    "Name": "amend",
                    "WaitForSignal": {"Name": "amended", "TimeoutSeconds": 30},
                    "Catch": [{"ErrorEquals": ["States.Timeout"], "Next": "no_amendment"}],
                },
                _task("no_amendment"),
            ],
        },
        "gate.yaml",
    )
    calls = Calls()
    engine = MemoryEngine({"gate": definition}, agents=calls.registry())
    wf = engine.start("gate", {})
    outcome = engine.run(wf, max_seconds=600, approvals={"review": "reject"})
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert sorted(calls.ran) == ["declined", "no_amendment"]
    assert calls.inputs["declined"]["Error"] == "Rejected"
    assert calls.inputs["no_amendment"]["Error"] == "States.Timeout"


def test_a_failure_caught_while_paused_runs_its_fallback_at_the_resume_not_its_step() -> None:
    """A callback fails for good while an operator has the workflow paused: the resume runs
    its fallback; the caught step is not redriven as a failed step is."""
    definition = parse_definition(
        {
            "Name": "held",
            "Steps": [
                _task(
                    "call",
                    Retry={"MaxAttempts": 0},
                    TimeoutSeconds=600,
                    Catch=[{"ErrorEquals": ["Refused"], "Next": "fallback"}],
                ),
                _task("fallback"),
            ],
        },
        "held.yaml",
    )
    calls = Calls()
    registry = calls.registry()
    base = registry.get("work")
    assert base is not None
    tokens: list[str] = []

    @registry.agent("work")
    def work(ctx: AgentContext) -> Any:
        if ctx.step == "call":
            from shepherd.engine.agent import Pending

            tokens.append(ctx.task_token())
            return Pending("the partner answers later")
        return base(ctx)

    engine = MemoryEngine({"held": definition}, agents=registry)
    wf = engine.start("held", {})
    engine.deliver()
    engine.pause(wf)
    engine.callback(tokens[0], "failure", error="Refused", cause="no stock")
    assert engine.outcome(wf).status is WorkflowStatus.PAUSED
    engine.resume(wf)
    outcome = engine.run(wf, max_seconds=600)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert len(tokens) == 1  # the caught step was not run again
    assert calls.inputs["fallback"] == {"Error": "Refused", "Cause": "no stock"}


def test_a_failed_map_and_a_failed_child_workflow_are_caught() -> None:
    child = parse_definition(
        {"Name": "child", "Steps": [_task("inner", Retry={"MaxAttempts": 0})]}, "child.yaml"
    )
    parent = parse_definition(
        {
            "Name": "parent",
            "Steps": [
                _task(
                    "each",
                    Map={"ItemsPath": "$.input.items"},
                    Catch=[{"ErrorEquals": ["States.ALL"], "Next": "after_map"}],
                ),
                _task("after_map"),
                {
                    "Name": "sub",
                    "Workflow": "child",
                    "TimeoutSeconds": 60,
                    "Retry": {"MaxAttempts": 0},
                    "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "after_child"}],
                },
                _task("after_child"),
            ],
        },
        "parent.yaml",
    )
    calls = Calls({"inner": "ChildBroke"})
    registry = calls.registry()
    base = registry.get("work")
    assert base is not None

    @registry.agent("work")
    def work(ctx: AgentContext) -> Any:
        if ctx.step == "each" and ctx.item == "bad":
            raise PermanentError("a bad item", name="BadItem")
        return base(ctx)

    engine = MemoryEngine({"parent": parent, "child": child}, agents=registry)
    wf = engine.start("parent", {"items": ["ok", "bad"]})
    outcome = engine.run(wf, max_seconds=600)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["each"].status is StepStatus.FAILED
    assert outcome.steps["sub"].status is StepStatus.FAILED
    assert "after_map" in calls.ran and "after_child" in calls.ran
    assert calls.inputs["after_map"]["Error"] == outcome.steps["each"].error.name  # type: ignore[union-attr]
    assert calls.inputs["after_child"]["Error"] == outcome.steps["sub"].error.name  # type: ignore[union-attr]


def test_a_fallback_s_dispatch_grace_counts_from_its_catch() -> None:
    """A failure caught at a resume, long after it landed: the fallback is sent by the resume,
    and the supervisor does not take it for a lost message at once (its `ready_at` is the
    catch's write, not the failure's)."""
    from shepherd.decisions.deadlines import ready_at

    definition = parse_definition(
        {
            "Name": "late",
            "Steps": [
                _task("call", Catch=[{"ErrorEquals": ["States.ALL"], "Next": "fallback"}]),
                _task("fallback"),
            ],
        },
        "late.yaml",
    )
    calls = Calls({"call": "Refused"})
    engine = MemoryEngine({"late": definition}, agents=calls.registry())
    wf = engine.start("late", {})
    scheduler = engine.engine.scheduler
    original = scheduler.advance_after
    scheduler.advance_after = lambda *a, **k: None  # type: ignore[method-assign]
    engine.deliver()  # call fails for good; its catch is not recorded yet
    scheduler.advance_after = original  # type: ignore[method-assign]
    failed_at = engine.outcome(wf).steps["call"].finished_at
    engine.clock.advance(3600)  # an hour later
    scheduler.advance(wf)  # a look at last: the catch, and the fallback sent
    loaded = scheduler.load(wf)
    assert loaded is not None
    state, _ = loaded
    assert state.steps["call"].caught_by == "fallback"
    at = ready_at(state, definition.by_name["fallback"], definition)
    assert failed_at is not None and at is not None
    assert at >= int(failed_at.timestamp() * 1000) + 3_600_000
    outcome = engine.run(wf, max_seconds=600)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert calls.ran == ["call", "fallback"]
