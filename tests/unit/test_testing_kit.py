"""`shepherd.testing` as a user's test reads it: typed results (status enums, decoded outputs,
attempts with their errors and tracebacks) and agents overridden per engine."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from shepherd import AgentContext, AgentRegistry, PermanentError, parse_definition
from shepherd.testing import (
    Attempt,
    AttemptOutcome,
    MemoryEngine,
    StepError,
    StepResult,
    StepStatus,
    WorkflowStatus,
)

TRIP = {
    "Name": "trip",
    "Steps": [
        {
            "Name": "book",
            "Agent": "book",
            "Pool": "travel",
            "TimeoutSeconds": 30,
            "Retry": {"MaxAttempts": 2, "IntervalSeconds": 1},
            "Compensation": {"Agent": "cancel_booking", "Pool": "travel", "TimeoutSeconds": 30},
        },
        {
            "Name": "pay",
            "Agent": "pay",
            "Pool": "billing",
            "TimeoutSeconds": 30,
            "DependsOn": ["book"],
        },
    ],
}
DEFINITIONS = {"trip": parse_definition(TRIP, "trip.yaml")}


def _registry() -> AgentRegistry:
    registry = AgentRegistry()
    flaky = {"calls": 0}

    @registry.agent("book")
    def book(ctx: AgentContext) -> dict[str, Any]:
        flaky["calls"] += 1
        if ctx.input.get("flaky") and flaky["calls"] == 1:
            raise ConnectionError("the hotel's API blinked")
        return {"booking": "b-1", "notes": "n" * ctx.input.get("note_bytes", 0)}

    @registry.agent("pay")
    def pay(ctx: AgentContext) -> dict[str, Any]:
        if ctx.input.get("broke"):
            raise PermanentError("card declined", name="Declined")
        return {"paid": ctx.dependencies["book"]["booking"]}

    @registry.agent("cancel_booking")
    def cancel_booking(ctx: AgentContext) -> dict[str, bool]:
        return {"cancelled": True}

    return registry


def test_a_result_is_typed_with_enums_decoded_outputs_and_attempts() -> None:
    # Given a booking that fails once, then a payment declined for good
    engine = MemoryEngine(DEFINITIONS, agents=_registry())

    # When the workflow runs to its end
    outcome = engine.run(engine.start("trip", {"flaky": True, "broke": True}))

    # Then its status and its steps' are enums, outputs are values, and every attempt is there
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert outcome.workflow_type == "trip"
    assert outcome.error == {
        "type": "Declined",
        "message": "step 'pay' failed: card declined",
        "step": "pay",
    }
    book = outcome.steps["book"]
    assert isinstance(book, StepResult)
    assert (book.status, book.kind, book.output, book.error) == (
        StepStatus.SUCCEEDED,
        "step",
        {"booking": "b-1", "notes": ""},
        None,
    )
    first, second = book.attempts
    assert isinstance(first, Attempt)
    assert (first.number, first.outcome, second.number, second.outcome) == (
        1,
        AttemptOutcome.FAILED,
        2,
        AttemptOutcome.SUCCEEDED,
    )
    assert first.error is not None and second.error is None
    assert (first.error.name, first.error.message) == ("ConnectionError", "the hotel's API blinked")
    # the traceback is the agent's own, with this file and the line that raised
    assert first.error.traceback is not None
    assert __file__ in first.error.traceback
    assert 'raise ConnectionError("the hotel\'s API blinked")' in first.error.traceback
    assert first.ended_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert first.started_at is not None and first.started_at <= first.ended_at < second.ended_at

    pay = outcome.steps["pay"]
    assert pay.status is StepStatus.FAILED
    assert pay.error is not None
    assert (pay.error.name, pay.error.message) == ("Declined", "card declined")
    assert "PermanentError" in (pay.error.traceback or "")
    assert [a.outcome for a in pay.attempts] == [AttemptOutcome.FAILED]
    assert pay.attempts[0].error == pay.error

    cancel = outcome.compensations["book"]
    assert (cancel.kind, cancel.status, cancel.output) == (
        "compensation",
        StepStatus.SUCCEEDED,
        {"cancelled": True},
    )
    assert outcome.events[0] == "WorkflowStarted" and outcome.events[-1] == "WorkflowCompensated"


def test_a_large_output_is_a_value_not_a_reference() -> None:
    engine = MemoryEngine(DEFINITIONS, agents=_registry())
    outcome = engine.run(engine.start("trip", {"note_bytes": 50_000}))
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["book"].output["notes"] == "n" * 50_000
    assert outcome.output == {
        "book": {"booking": "b-1", "notes": "n" * 50_000},
        "pay": {"paid": "b-1"},
    }


def test_an_override_replaces_an_agent_for_one_engine_only() -> None:
    registry = _registry()
    original = registry.get("pay")
    seen: list[int] = []

    def declined(ctx: AgentContext) -> Any:
        seen.append(ctx.attempt)
        raise PermanentError("no funds", name="Declined")

    # Given one engine with a fake payment and one without
    faked = MemoryEngine(DEFINITIONS, agents=registry, overrides={"pay": declined})
    real = MemoryEngine(DEFINITIONS, agents=registry)

    # When both run the same workflow
    failed = faked.run(faked.start("trip", {}))
    succeeded = real.run(real.start("trip", {}))

    # Then only the first saw the fake, and the user's registry is untouched
    assert failed.status is WorkflowStatus.COMPENSATED and seen == [1]
    error = failed.steps["pay"].error
    assert isinstance(error, StepError) and (error.name, error.message) == ("Declined", "no funds")
    assert succeeded.status is WorkflowStatus.SUCCEEDED
    assert registry.get("pay") is original


def test_an_override_of_an_agent_no_definition_names_is_refused() -> None:
    with pytest.raises(
        ValueError, match="override 'pya': no definition names that agent; did you mean 'pay'"
    ):
        MemoryEngine(DEFINITIONS, agents=_registry(), overrides={"pya": lambda ctx: None})


def test_the_engine_reads_the_project_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a project whose [tool.shepherd] names its definitions and its agent module
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nagent-modules = ["kit_project_agents"]\n'
    )
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "hello.json").write_text(
        '{"Name": "hello", "Steps": [{"Name": "hi", "Agent": "hi", "Pool": "p", "TimeoutSeconds": 5}]}'
    )
    (tmp_path / "kit_project_agents.py").write_text(
        "from shepherd import AgentRegistry\n"
        "registry = AgentRegistry()\n"
        "registry.register('hi', lambda ctx: {'hello': ctx.input['who']})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        # When the engine is built from the project, from a folder inside it
        (tmp_path / "tests").mkdir()
        engine = MemoryEngine.from_project(tmp_path / "tests")
        outcome = engine.run(engine.start("hello", {"who": "ada"}))
    finally:
        sys.modules.pop("kit_project_agents", None)
    # Then it ran the project's definition with the project's agent
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["hi"].output == {"hello": "ada"}
