"""Shepherd: Scheduler-Agent-Supervisor workflows on AWS serverless.

The public API: what a Shepherd user writes against, and nothing else.

- Agents: `AgentRegistry` (with its `@registry.agent("name")` decorator) holds the functions
  that do a step's work; each gets an `AgentContext`; returning `Pending` makes a callback step
  wait for its task token; raising `PermanentError` fails the step without retries.
- Definitions: `Definition` and the models it is made of, and `load_definitions` /
  `load_definition` / `parse_definition` to read and validate them.
- Errors a user raises or catches: `ShepherdError` and its public subclasses.
- `shepherd.testing`: `MemoryEngine`, the real engine over in-memory ports under a manual
  clock, to run your own definitions and agents in a unit test in milliseconds.

Every other module (`shepherd.engine`, `shepherd.adapters`, `shepherd.decisions`, `shepherd.keys`,
`shepherd.wiring`, ...) is internal: it serves the Lambda handlers, the CDK construct and the
developer tools, and may change in any release. Importing `shepherd` imports no AWS SDK.
"""

from typing import TYPE_CHECKING, Any

from shepherd.errors import (
    AttemptSuperseded,
    DefinitionError,
    DetailsTooLarge,
    IdempotencyConflict,
    InputInvalid,
    OutputInvalid,
    OutputTooLarge,
    PermanentError,
    ShepherdError,
    UnknownWorkflowType,
    WorkflowNotFound,
)

if TYPE_CHECKING:
    from shepherd.definitions import (
        CompensationSpec,
        Definition,
        RetryPolicy,
        StepSpec,
        TaskSpec,
        parse_definition,
    )
    from shepherd.definitions import load_directory as load_definitions
    from shepherd.definitions import load_file as load_definition
    from shepherd.engine.agent import AgentContext, AgentFunction, AgentRegistry, Forward, Pending

# Imported on first use (PEP 562): a Lambda handler that imports one internal module
# (`shepherd.changes` for the stream relay) does not pay for the definition models and the
# agent runtime it never uses (issue 40.6).
_LAZY = {
    "CompensationSpec": ("shepherd.definitions", "CompensationSpec"),
    "Definition": ("shepherd.definitions", "Definition"),
    "RetryPolicy": ("shepherd.definitions", "RetryPolicy"),
    "StepSpec": ("shepherd.definitions", "StepSpec"),
    "TaskSpec": ("shepherd.definitions", "TaskSpec"),
    "parse_definition": ("shepherd.definitions", "parse_definition"),
    "load_definitions": ("shepherd.definitions", "load_directory"),
    "load_definition": ("shepherd.definitions", "load_file"),
    "AgentContext": ("shepherd.engine.agent", "AgentContext"),
    "AgentFunction": ("shepherd.engine.agent", "AgentFunction"),
    "AgentRegistry": ("shepherd.engine.agent", "AgentRegistry"),
    "Forward": ("shepherd.engine.agent", "Forward"),
    "Pending": ("shepherd.engine.agent", "Pending"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'shepherd' has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


__all__ = [
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
__version__ = "0.1.0"
