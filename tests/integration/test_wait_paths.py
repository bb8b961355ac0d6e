"""Waits timed from a dependency's output (issue 42.5): `UntilPath` and `SecondsPath` read
`$.steps.<dep>.output...` (a step in DependsOn) beside `$.input...`; on the real engine over
in-memory ports and the manual clock: woken no earlier than the time read, the watch entry
due no later than it, and an absent or invalid value fails the step for good
(`States.Runtime`)."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import AgentRegistry
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.errors import DefinitionError
from shepherd.keys import WF_SK, wf_pk
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine

DAY = 86_400


def _engine(returns: Any, *steps: dict[str, Any]) -> tuple[MemoryEngine, list[tuple[str, int]]]:
    ran: list[tuple[str, int]] = []
    registry = AgentRegistry()

    @registry.agent("work")
    def work(ctx: AgentContext) -> Any:
        ran.append((ctx.step, engine.clock.now_ms()))
        return returns if ctx.step == "plan" else {}

    definition = parse_definition({"Name": "waits", "Steps": list(steps)}, "waits.yaml")
    engine = MemoryEngine({"waits": definition}, agents=registry)
    return engine, ran


def _task(name: str, *deps: str) -> dict[str, Any]:
    return {
        "Name": name,
        "Agent": "work",
        "Pool": "p",
        "TimeoutSeconds": 10,
        "Retry": {"MaxAttempts": 0},
        "DependsOn": list(deps),
    }


def _chain(wait: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _task("plan"),
        {"Name": "hold", "Wait": wait, "DependsOn": ["plan"]},
        _task("after", "hold"),
    ]


def _due_at(engine: MemoryEngine, wf: str) -> int:
    item = engine.store.get(wf_pk(wf), WF_SK)
    assert item is not None and item.get("due_at") is not None
    return int(item["due_at"])


def _hold(engine: MemoryEngine, wf: str) -> Any:
    loaded = engine.engine.scheduler.load(wf)
    assert loaded is not None
    return loaded[0].steps["hold"]


def _wakes_at(engine: MemoryEngine, wf: str, wake_at: int, ran: list[tuple[str, int]]) -> None:
    """Resting until `wake_at`: not woken a moment before it, woken by a sweep after it."""
    due = _due_at(engine, wf)
    assert due <= wake_at
    engine.advance((wake_at - engine.clock.now_ms()) / 1000 - 1)
    engine.sweep()
    engine.deliver()
    assert _hold(engine, wf).status is StepStatus.WAITING
    engine.advance(1)
    engine.sweep()
    engine.deliver()
    assert engine.outcome(wf).status is WorkflowStatus.SUCCEEDED
    ((_, after_at),) = [r for r in ran if r[0] == "after"]
    assert after_at >= wake_at


def test_seconds_path_reads_a_dependency_output() -> None:
    engine, ran = _engine(
        {"delay": {"s": 3600}}, *_chain({"SecondsPath": "$.steps.plan.output.delay.s"})
    )
    wf = engine.start("waits", {})
    engine.deliver()
    hold = _hold(engine, wf)
    finished = engine.engine.scheduler.load(wf)[0].steps["plan"].finished_at  # type: ignore[index]
    assert hold.status is StepStatus.WAITING
    assert finished is not None
    assert hold.wake_at == finished + 3600 * 1000
    _wakes_at(engine, wf, hold.wake_at, ran)


def test_until_path_reads_a_dependency_output() -> None:
    engine, ran = _engine(
        {"at": "2026-01-02T00:00:00Z"}, *_chain({"UntilPath": "$.steps.plan.output.at"})
    )
    wf = engine.start("waits", {})
    assert engine.clock.now_ms() < 1_767_312_000_000
    engine.deliver()
    hold = _hold(engine, wf)
    assert (hold.status, hold.wake_at) == (StepStatus.WAITING, 1_767_312_000_000)
    _wakes_at(engine, wf, hold.wake_at, ran)


def test_seconds_path_reads_the_input_of_a_root_wait() -> None:
    engine, ran = _engine(
        None, {"Name": "hold", "Wait": {"SecondsPath": "$.input.wait"}}, _task("after", "hold")
    )
    start = engine.clock.now_ms()
    wf = engine.start("waits", {"wait": 90})
    hold = _hold(engine, wf)
    assert (hold.status, hold.wake_at) == (StepStatus.WAITING, start + 90_000)
    _wakes_at(engine, wf, start + 90_000, ran)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({}, "SecondsPath $.steps.plan.output.delay is absent"),
        ({"delay": -5}, "SecondsPath $.steps.plan.output.delay is negative (-5)"),
        ({"delay": "60"}, "SecondsPath $.steps.plan.output.delay is not a whole number"),
        ({"delay": 1.5}, "SecondsPath $.steps.plan.output.delay is not a whole number"),
        ({"delay": True}, "SecondsPath $.steps.plan.output.delay is not a whole number"),
        ({"delay": 366 * DAY + 1}, "more than a year"),
    ],
)
def test_an_unreadable_seconds_path_fails_the_wait_for_good(output: Any, message: str) -> None:
    engine, ran = _engine(output, *_chain({"SecondsPath": "$.steps.plan.output.delay"}))
    wf = engine.start("waits", {})
    engine.deliver()
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.COMPENSATED
    hold = outcome.steps["hold"]
    assert hold.status is StepStatus.FAILED
    assert hold.error is not None and hold.error.name == "States.Runtime"
    assert message in hold.error.message
    assert [r[0] for r in ran] == ["plan"]


def test_an_until_path_of_a_dependency_that_is_no_timestamp_fails_the_wait() -> None:
    engine, _ = _engine({"at": 5}, *_chain({"UntilPath": "$.steps.plan.output.at"}))
    wf = engine.start("waits", {})
    engine.deliver()
    hold = engine.outcome(wf).steps["hold"]
    assert hold.status is StepStatus.FAILED
    assert hold.error is not None and hold.error.name == "States.Runtime"
    assert "UntilPath $.steps.plan.output.at is not a string" in hold.error.message


@pytest.mark.parametrize(
    ("wait", "deps", "expected"),
    [
        (
            {"SecondsPath": "$.steps.plan.output.s"},
            [],
            "waits.yaml: Steps[1] (hold).Wait.SecondsPath: '$.steps.plan.output.s' reads step "
            "'plan', which is not in its DependsOn",
        ),
        (
            {"UntilPath": "$.steps.plam.output.t"},
            ["plan"],
            "waits.yaml: Steps[1] (hold).Wait.UntilPath: '$.steps.plam.output.t' reads step "
            "'plam', which is not in its DependsOn; did you mean 'plan'?",
        ),
        (
            {"SecondsPath": "$.input.s", "Seconds": 4},
            [],
            "Steps[1] (hold).Wait: a Wait has exactly one of Seconds, Until, UntilPath, "
            "SecondsPath (got Seconds, SecondsPath)",
        ),
        (
            {"SecondsPath": "$.elsewhere"},
            [],
            "Steps[1] (hold).Wait.SecondsPath: '$.elsewhere' is not a valid path: "
            "$.input.<path> or $.steps.<dependency>.output.<path>",
        ),
    ],
)
def test_a_wait_path_names_the_file_the_step_and_the_field(
    wait: dict[str, Any], deps: list[str], expected: str
) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(
            {
                "Name": "waits",
                "Steps": [_task("plan"), {"Name": "hold", "Wait": wait, "DependsOn": deps}],
            },
            "waits.yaml",
        )
    assert expected in str(err.value)
