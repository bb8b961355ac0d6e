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
