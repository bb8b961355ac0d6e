"""Conditions end to end (issue 25.1), on the real engine over in-memory ports: a false
condition skips its step (no message, no claim, no compensation), its dependents treat it as
done with no output, and a chain of skips is followed by whoever wins each skip."""

from __future__ import annotations

from typing import Any

from shepherd import AgentRegistry, PermanentError
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.keys import wf_pk
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine


def _step(name: str, *deps: str, condition: Any = None, compensate: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Name": name,
        "Agent": "work",
        "Pool": "p",
        "TimeoutSeconds": 10,
        "Retry": {"MaxAttempts": 0},
    }
    if deps:
        out["DependsOn"] = list(deps)
    if condition is not None:
        out["Condition"] = condition
    if compensate:
        out["Compensation"] = {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10}
    return out


BIG = {"Variable": "$.steps.check.output.amount", "NumericGreaterThan": 100}
DEFINITION = parse_definition(
    {
        "Name": "branch",
        "Steps": [
            _step("check"),
            # The two-way branch: two steps with opposite conditions.
            _step("deposit", "check", condition=BIG, compensate=True),
            _step("no_deposit", "check", condition={"Not": BIG}, compensate=True),
            # A chain behind the skipped branch, and a join of both branches.
            _step("deposit_receipt", "deposit", compensate=True),
            _step("finish", "deposit_receipt", "no_deposit"),
            _step(
                "fail_if_asked", "finish", condition={"Variable": "$.input.fail", "IsPresent": True}
            ),
        ],
    },
    "branch.yaml",
)


class Calls:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.undone: list[str] = []
        self.seen: dict[str, dict[str, Any]] = {}

    def registry(self) -> AgentRegistry:
        registry = AgentRegistry()

        @registry.agent("work")
        def work(ctx: AgentContext) -> dict[str, Any]:
            self.ran.append(ctx.step)
            if ctx.step == "fail_if_asked":
                raise PermanentError("asked to fail", name="Asked")
            if ctx.step == "check":
                return {"amount": ctx.input["amount"]}
            self.seen[ctx.step] = dict(ctx.dependencies)
            return {"done": ctx.step}

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            self.undone.append(ctx.step)

        return registry


def _engine(calls: Calls) -> MemoryEngine:
    return MemoryEngine({"branch": DEFINITION}, agents=calls.registry())


def test_the_false_branch_is_skipped_and_its_dependents_run_without_its_output() -> None:
    calls = Calls()
    engine = _engine(calls)
    wf = engine.start("branch", {"amount": 20})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    statuses = {n: s.status for n, s in outcome.steps.items()}
    assert statuses == {
        "check": StepStatus.SUCCEEDED,
        "deposit": StepStatus.SKIPPED,
        "no_deposit": StepStatus.SUCCEEDED,
        "deposit_receipt": StepStatus.SUCCEEDED,  # its only dependency was skipped: done
        "finish": StepStatus.SUCCEEDED,
        "fail_if_asked": StepStatus.SKIPPED,
    }
    assert sorted(calls.ran) == ["check", "deposit_receipt", "finish", "no_deposit"]
    assert calls.seen["deposit_receipt"] == {"deposit": None}  # skipped: no output
    assert set(outcome.output) == {"check", "no_deposit", "deposit_receipt", "finish"}
    assert outcome.steps["deposit"].attempts == ()


def test_deposit_receipt_runs_after_a_skip_free_path_and_nothing_is_sent_for_skips() -> None:
    calls = Calls()
    engine = _engine(calls)
    wf = engine.start("branch", {"amount": 500})
    assert engine.run(wf).status is WorkflowStatus.SUCCEEDED
    assert sorted(calls.ran) == ["check", "deposit", "deposit_receipt", "finish"]
    items = {i["sk"]: i for i in engine.store.load(wf_pk(wf))}
    assert items["S#no_deposit"]["status"] == "SKIPPED"
    assert "first_claimed_at" not in items["S#no_deposit"]
    assert "StepSkipped" in engine.outcome(wf).events


def test_a_skipped_step_is_never_compensated() -> None:
    calls = Calls()
    engine = _engine(calls)
    wf = engine.start("branch", {"amount": 20, "fail": True})
    outcome = engine.run(wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    # `deposit` was skipped: never compensated; the steps that ran are undone.
    assert sorted(calls.undone) == ["deposit_receipt", "no_deposit"]
    assert set(outcome.compensations) == {"deposit_receipt", "no_deposit"}


def test_a_root_whose_condition_is_false_is_skipped_at_the_start() -> None:
    definition = parse_definition(
        {
            "Name": "roots",
            "Steps": [
                _step("free", condition={"Variable": "$.input.plan", "StringEquals": "free"}),
                _step("pro", condition={"Variable": "$.input.plan", "StringEquals": "pro"}),
                _step("after_free", "free"),
                _step("both", "free", "pro"),
            ],
        },
        "roots.yaml",
    )
    calls = Calls()
    engine = MemoryEngine({"roots": definition}, agents=calls.registry())
    wf = engine.start("roots", {"plan": "pro"})
    # The start skipped `free` and, as the winner of that skip, `after_free` was sent.
    assert engine.outcome(wf).steps["free"].status is StepStatus.SKIPPED
    assert engine.run(wf).status is WorkflowStatus.SUCCEEDED
    assert sorted(calls.ran) == ["after_free", "both", "pro"]


def test_a_skip_lost_with_its_writer_is_done_by_the_supervisor() -> None:
    """The agent whose success made the step ready dies before its advance: the supervisor
    finds the ready step and skips it, and the workflow finishes."""
    calls = Calls()
    engine = _engine(calls)
    wf = engine.start("branch", {"amount": 20})
    scheduler = engine.engine.scheduler
    original = scheduler.advance_after
    scheduler.advance_after = lambda *a, **k: None  # type: ignore[method-assign]
    engine.deliver()  # check succeeds; nothing is advanced
    scheduler.advance_after = original  # type: ignore[method-assign]
    assert engine.outcome(wf).steps["no_deposit"].status is StepStatus.PENDING
    outcome = engine.run(wf, max_seconds=600)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["deposit"].status is StepStatus.SKIPPED
    assert sorted(calls.ran) == ["check", "deposit_receipt", "finish", "no_deposit"]
