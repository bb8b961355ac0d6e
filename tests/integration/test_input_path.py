"""InputPath (issue 24): a step's ctx.input is the value its path selects in the workflow
input or in a dependency's output, read on first use; its compensation sees the same; a path
that selects nothing fails the step at once (never retried)."""

from __future__ import annotations

from typing import Any

from shepherd import AgentContext, PermanentError
from shepherd.definitions import parse_definition
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine

TASK = {"Pool": "p", "TimeoutSeconds": 10}


def engine(steps: list[dict[str, Any]], agents: dict[str, Any]) -> MemoryEngine:
    definition = parse_definition({"Name": "wf", "Steps": steps}, "wf.yaml")
    return MemoryEngine({"wf": definition}, overrides=agents)


def test_a_path_into_the_input_and_into_a_dependencys_output() -> None:
    seen: dict[str, Any] = {}

    def split(ctx: AgentContext) -> Any:
        return {"chunks": [{"n": 0}, {"n": 1}, {"n": 2}], "note": ctx.input["title"]}

    def keep(name: str) -> Any:
        def agent(ctx: AgentContext) -> Any:
            seen[name] = ctx.input
            return name

        return agent

    e = engine(
        [
            {"Name": "split", "Agent": "split", **TASK},
            {"Name": "title", "Agent": "title", "InputPath": "$.input.meta.title", **TASK},
            {
                "Name": "second",
                "Agent": "second",
                "DependsOn": ["split"],
                "InputPath": "$.steps.split.output.chunks[1]",
                **TASK,
            },
            {"Name": "whole", "Agent": "whole", "DependsOn": ["split"], **TASK},
        ],
        {"split": split, "title": keep("title"), "second": keep("second"), "whole": keep("whole")},
    )
    payload = {"title": "t", "meta": {"title": "Big Buck Bunny"}}
    outcome = e.run(e.start("wf", payload))
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert seen == {"title": "Big Buck Bunny", "second": {"n": 1}, "whole": payload}


def test_a_path_that_selects_nothing_fails_the_step_at_once_and_unwinds() -> None:
    undone: list[Any] = []

    def first(ctx: AgentContext) -> Any:
        return {"items": []}

    def undo_first(ctx: AgentContext) -> Any:
        undone.append(ctx.input)
        return None

    def second(ctx: AgentContext) -> Any:
        return ctx.input

    e = engine(
        [
            {
                "Name": "first",
                "Agent": "first",
                "InputPath": "$.input.order",
                "Compensation": {"Agent": "undo_first", **TASK},
                **TASK,
            },
            {
                "Name": "second",
                "Agent": "second",
                "DependsOn": ["first"],
                "InputPath": "$.steps.first.output.items[0]",
                "Retry": {"MaxAttempts": 3},
                **TASK,
            },
        ],
        {"first": first, "undo_first": undo_first, "second": second},
    )
    outcome = e.run(e.start("wf", {"order": {"id": "o-1"}}))
    assert outcome.status is WorkflowStatus.COMPENSATED
    step = outcome.steps["second"]
    assert step.status is StepStatus.FAILED and len(step.attempts) == 1  # never retried
    assert step.error is not None and step.error.name == "InputPathNotFound"
    assert (
        "InputPath $.steps.first.output.items[0]: .items[0]: no item 0 here" in step.error.message
    )
    # The compensation of `first` saw what `first` saw.
    assert undone == [{"id": "o-1"}]


def test_an_agent_that_never_reads_its_input_never_fails_on_its_path() -> None:
    e = engine(
        [{"Name": "a", "Agent": "a", "InputPath": "$.input.missing", **TASK}],
        {"a": lambda ctx: "done"},
    )
    assert e.run(e.start("wf", {})).status is WorkflowStatus.SUCCEEDED


def test_the_error_is_permanent() -> None:
    from shepherd.errors import InputPathNotFound

    assert issubclass(InputPathNotFound, PermanentError)
