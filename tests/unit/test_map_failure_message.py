"""A map that failed says why in a person's words: how many items failed of how many, how many
it tolerates (never `count None, percentage None`), and the first failed item's own error, which
is what they fix."""

from __future__ import annotations

from typing import Any

from shepherd import AgentContext, AgentRegistry, PermanentError, parse_definition
from shepherd.testing import MemoryEngine, WorkflowStatus
from shepherd_cli.render import status_lines


def _run(tolerance: dict[str, Any]) -> Any:
    definition = parse_definition(
        {
            "Name": "batch",
            "Steps": [
                {"Name": "split", "Agent": "split", "Pool": "p", "TimeoutSeconds": 5},
                {
                    "Name": "each",
                    "DependsOn": ["split"],
                    "Map": {"ItemsPath": "$.steps.split.output", **tolerance},
                    "Agent": "each",
                    "Pool": "p",
                    "TimeoutSeconds": 5,
                    "Retry": {"MaxAttempts": 0},
                },
            ],
        },
        "batch.yaml",
    )
    registry = AgentRegistry()

    @registry.agent("split")
    def split(ctx: AgentContext) -> list[int]:
        return [1, 2, 3, 4]

    @registry.agent("each")
    def each(ctx: AgentContext) -> int:
        if ctx.item in (2, 4):
            raise PermanentError(f"chunk {ctx.item} is corrupt", name="CorruptChunk")
        return int(ctx.item)

    engine = MemoryEngine({"batch": definition}, agents=registry)
    return engine.run(engine.start("batch", {}))


def test_a_map_with_no_tolerance_names_its_first_failed_item() -> None:
    outcome = _run({})
    assert outcome.status is WorkflowStatus.COMPENSATED
    error = outcome.steps["each"].error
    assert error is not None and error.name == "States.ExceedToleratedFailureThreshold"
    assert "None" not in error.message
    # The first failure fails the map (the items after it are cancelled).
    assert (
        error.message
        == "1 of 4 items failed, none tolerated; item 1: CorruptChunk: chunk 2 is corrupt"
    )


def test_a_map_past_its_tolerance_says_the_tolerance_it_was_given() -> None:
    error = _run({"ToleratedFailureCount": 1}).steps["each"].error
    assert error is not None
    assert error.message == (
        "2 of 4 items failed, 1 tolerated (ToleratedFailureCount 1); "
        "item 1: CorruptChunk: chunk 2 is corrupt"
    )
    error = _run({"ToleratedFailurePercentage": 25}).steps["each"].error
    assert error is not None and "1 tolerated (ToleratedFailurePercentage 25)" in error.message


def test_the_cli_shows_the_items_error() -> None:
    outcome = _run({})
    view = {
        "workflow_id": outcome.workflow_id,
        "type": "batch",
        "status": outcome.status.value,
        "created_at": "2026-01-01T00:00:00Z",
        "steps": [],
        "compensations": [],
        "error": outcome.error,
    }
    text = "\n".join(status_lines(view))
    assert "item 1: CorruptChunk: chunk 2 is corrupt" in text, text
