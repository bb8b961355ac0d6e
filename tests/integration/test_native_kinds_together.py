"""The control-flow and data features of issue 42.5 together, as they landed from separate
branches: a loop whose limit is caught by a fallback, a Choice that picks a Pass step and a
join that reads it, with data expressions shaping what the join's agent receives."""

from __future__ import annotations

from typing import Any

from shepherd import AgentRegistry
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine


def _task(name: str, *deps: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Name": name,
        "Agent": name,
        "Pool": "p",
        "TimeoutSeconds": 10,
        "Retry": {"MaxAttempts": 0},
    }
    if deps:
        out["DependsOn"] = list(deps)
    return {**out, **extra}


def test_a_loop_that_reaches_its_limit_is_caught_and_the_workflow_succeeds() -> None:
    definition = parse_definition(
        {
            "Name": "export",
            "Steps": [
                _task(
                    "poll",
                    Repeat={
                        "Until": {"Variable": "$.steps.poll.output.done", "BooleanEquals": True},
                        "IntervalSeconds": 5,
                        "MaxIterations": 3,
                    },
                    Catch=[{"ErrorEquals": ["States.LoopLimitExceeded"], "Next": "give_up"}],
                ),
                _task("fetch", "poll"),
                _task("give_up"),
            ],
        },
        "export.yaml",
    )
    seen: dict[str, list[Any]] = {"poll": [], "give_up": [], "fetch": []}
    registry = AgentRegistry()

    def poll(ctx: AgentContext) -> dict[str, Any]:
        seen["poll"].append(ctx.iteration)
        return {"done": False}

    def record(ctx: AgentContext) -> dict[str, Any]:
        seen[ctx.step].append(ctx.input)
        return {"ran": ctx.step}

    registry.register("poll", poll)
    registry.register("fetch", record)
    registry.register("give_up", record)
    engine = MemoryEngine({"export": definition}, agents=registry)
    outcome = engine.run(engine.start("export", {}))

    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert seen["poll"] == [1, 2, 3]  # every iteration once, then the limit
    assert seen["fetch"] == []  # the caught step's dependent is out of scope
    assert outcome.steps["fetch"].status is StepStatus.SKIPPED
    assert [i["Error"] for i in seen["give_up"]] == ["States.LoopLimitExceeded"]
    assert outcome.steps["poll"].status is StepStatus.FAILED
    assert set(outcome.output) == {"give_up"}


def test_a_choice_picks_a_pass_step_and_the_join_reads_it_through_arguments() -> None:
    definition = parse_definition(
        {
            "Name": "quote",
            "Steps": [
                {
                    "Name": "route",
                    "Choice": {
                        "Choices": [
                            {
                                "Condition": {"Variable": "$.input.total", "NumericLessThan": 100},
                                "Next": "free",
                            }
                        ],
                        "Default": "priced",
                    },
                },
                {"Name": "free", "Pass": {"Result": {"fee": 0}}},
                _task("priced"),
                _task(
                    "confirm",
                    "free",
                    "priced",
                    Arguments={
                        "fee": "{% $steps.free.fee %}",
                        "total": "{% $states.input.total %}",
                    },
                ),
            ],
        },
        "quote.yaml",
    )
    got: list[Any] = []
    ran: list[str] = []
    registry = AgentRegistry()

    def priced(ctx: AgentContext) -> dict[str, Any]:
        ran.append(ctx.step)
        return {"fee": 10}

    registry.register("priced", priced)

    def confirm(ctx: AgentContext) -> dict[str, Any]:
        got.append(ctx.input)
        return {"ok": True}

    registry.register("confirm", confirm)
    engine = MemoryEngine({"quote": definition}, agents=registry)
    outcome = engine.run(engine.start("quote", {"total": 40}))

    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert ran == []  # the Default not chosen: no agent ran for it
    assert outcome.steps["priced"].status is StepStatus.SKIPPED
    assert outcome.steps["free"].status is StepStatus.SUCCEEDED
    assert got == [{"fee": 0, "total": 40}]
