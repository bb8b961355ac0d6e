"""The public API: `import shepherd` gives what a user writes against, light and complete."""

from __future__ import annotations

import enum
import inspect
import json
import re
import subprocess
import sys
from typing import Any

import shepherd
from shepherd import AgentContext, AgentRegistry, Pending, PermanentError, parse_definition
from shepherd.testing import MemoryEngine, StepStatus, WorkflowStatus

PUBLIC = [
    "AgentContext",
    "AgentFunction",
    "AgentRegistry",
    "AttemptSuperseded",
    "CompensationSpec",
    "Definition",
    "DefinitionError",
    "DetailsTooLarge",
    "Forward",
    "IdempotencyConflict",
    "InputInvalid",
    "OutputInvalid",
    "OutputTooLarge",
    "Pending",
    "PermanentError",
    "RetryPolicy",
    "ShepherdError",
    "StepSpec",
    "TaskSpec",
    "UnknownWorkflowType",
    "WorkflowNotFound",
    "__version__",
    "load_definition",
    "load_definitions",
    "parse_definition",
]
HEAVY = ("boto3", "botocore", "aws_lambda_powertools", "yaml", "moto", "aws_cdk", "jsii")


def test_the_public_names_are_pinned() -> None:
    # A change here is a change of the public API: deliberate, documented, versioned.
    assert shepherd.__all__ == PUBLIC
    assert all(hasattr(shepherd, name) for name in PUBLIC)
    assert sorted(__import__("shepherd.testing").testing.__all__) == [
        "Attempt",
        "AttemptOutcome",
        "ManualClock",
        "MemoryEngine",
        "Outcome",
        "StepError",
        "StepResult",
        "StepStatus",
        "WorkflowStatus",
    ]


def test_every_public_name_has_a_docstring() -> None:
    for name in PUBLIC:
        value = getattr(shepherd, name)
        if callable(value) and name != "AgentFunction":
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    testing = __import__("shepherd.testing").testing
    for name in testing.__all__:
        value = getattr(testing, name)
        assert (value.__doc__ or "").strip(), f"shepherd.testing.{name} has no docstring"
        if isinstance(value, type) and issubclass(value, enum.Enum):
            # every member says what it means (the docstring under it, as the enums write it)
            source = inspect.getsource(value)
            for member in value:
                assert re.search(rf"{member.name} = .*\n\s+\"\"\"\S", source), member


def test_importing_shepherd_and_its_testing_kit_loads_no_sdk() -> None:
    # A fresh interpreter: what `import shepherd` costs a user (and a Lambda cold start).
    probe = (
        "import json, sys, shepherd, shepherd.testing; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(out))
    assert loaded.isdisjoint(HEAVY), loaded & set(HEAVY)


def test_a_users_own_definition_and_agents_run_in_memory() -> None:
    # Given a definition and agents written only against `shepherd`
    registry = AgentRegistry()
    calls: list[str] = []

    @registry.agent("book")
    def book(ctx: AgentContext) -> dict[str, Any]:
        calls.append(ctx.step)
        return {"booking": f"b-{ctx.input['trip']}"}

    @registry.agent("pay")
    def pay(ctx: AgentContext) -> Any:
        if ctx.input["trip"] == "broke":
            raise PermanentError("card declined", name="Declined")
        return {"paid": ctx.dependencies["book"]["booking"]}

    @registry.agent("cancel_booking")
    def cancel_booking(ctx: AgentContext) -> dict[str, bool]:
        calls.append("cancel")
        return {"cancelled": True}

    definition = parse_definition(
        {
            "Name": "trip",
            "Steps": [
                {
                    "Name": "book",
                    "Agent": "book",
                    "Pool": "travel",
                    "TimeoutSeconds": 30,
                    "Compensation": {
                        "Agent": "cancel_booking",
                        "Pool": "travel",
                        "TimeoutSeconds": 30,
                    },
                },
                {
                    "Name": "pay",
                    "Agent": "pay",
                    "Pool": "travel",
                    "TimeoutSeconds": 30,
                    "DependsOn": ["book"],
                },
            ],
        },
        "trip.yaml",
    )
    engine = MemoryEngine({"trip": definition}, agents=registry)

    # When one workflow succeeds and one fails for good
    ok = engine.run(engine.start("trip", {"trip": "rome"}))
    bad = engine.run(engine.start("trip", {"trip": "broke"}))

    # Then the first has its output, the second was compensated, on a clock that never slept
    assert ok.status is WorkflowStatus.SUCCEEDED
    assert ok.steps["pay"].status is StepStatus.SUCCEEDED
    assert ok.output == {"book": {"booking": "b-rome"}, "pay": {"paid": "b-rome"}}
    assert bad.status is WorkflowStatus.COMPENSATED
    assert bad.steps["pay"].error is not None and bad.steps["pay"].error.name == "Declined"
    assert calls == ["book", "book", "cancel"]
    assert isinstance(Pending(), Pending)
