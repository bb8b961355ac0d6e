"""An Amazon States Language file as a workflow definition (issue 42.1): what the one
definitions loader (`shepherd.definitions.load_directory`) needs of an ASL document.

`<name>.asl.json` / `.asl.yaml` in a definitions folder is a `Definition` of workflow type
`<name>` that holds the document (`StateMachine`) and no native `Steps`. What the rest of
Shepherd derives from a definition's tasks (its pools and queues, the CDK's agent check,
`shepherd validate`) comes from the machine's Lambda tasks (`lambda_functions`): each names
the agent registered under its function's name (`Definition.tasks`), in the pool the
project's settings give it (`[tool.shepherd] asl-pool` and `asl-pools`; none: `asl`).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shepherd.errors import DefinitionError

from . import integrations, lambdas, services
from .document import State, StateMachine, parse

# Shepherd's own pool: it runs a state machine's service Tasks (`sqs:sendMessage`,
# `aws-sdk:...`), its `states:startExecution` Tasks, and the Lambda functions the project maps
# to it (`[tool.shepherd] asl-pools`, or `asl-pool` for all of them), invoked as deployed.
# Its one agent is built in (`INTEGRATIONS_AGENT`); deployed, it runs as the integrations
# role the definitions derive (docs/architecture.md, "The integrations role").
INTEGRATIONS_POOL = "integrations"
INTEGRATIONS_AGENT = "shepherd.integrations"
# An integration's attempt: the longest a Lambda invocation can run.
INTEGRATIONS_TIMEOUT_SECONDS = 900


def read_document(path: Path) -> Any:
    """The ASL document of a file, validated (errors name the file, the state, the field)."""
    import yaml  # noqa: PLC0415 - only a file read needs it, never the engine

    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.name.endswith(".json") else yaml.safe_load(text)
    except OSError as exc:
        raise DefinitionError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise DefinitionError(f"{path}: not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise DefinitionError(f"{path}: not valid YAML: {exc}") from None
    parse(data, str(path))
    return data


def task_states(machine: StateMachine) -> Iterator[State]:
    """Every Task state of a machine, its Parallel branches' and Map processors' included."""
    for state in machine.states.values():
        if state.type == "Task":
            yield state
        for branch in state.branches:
            yield from task_states(branch)


def function_of(state: State) -> str | None:
    """The registered name of the Lambda function a Task state invokes, when the document
    names it (None: not a Lambda task, or its FunctionName is computed at run time)."""
    resource = state.raw.get("Resource")
    if not isinstance(resource, str):
        return None
    base = resource.removesuffix(lambdas.WAIT_FOR_TOKEN)
    if base == lambdas.INVOKE:
        args = state.raw.get("Parameters", state.raw.get("Arguments"))
        name = args.get("FunctionName") if isinstance(args, dict) else None
        if isinstance(name, str) and not name.startswith("{%"):
            return lambdas.function_name(name)
        return None
    if base.startswith("arn:aws:states:::") or (base.startswith("arn:") and ":lambda:" not in base):
        return None
    return lambdas.function_name(base)


def lambda_functions(machine: StateMachine) -> list[tuple[str, float | None, float | None]]:
    """Each Lambda function the machine names once: (its name, the TimeoutSeconds and
    HeartbeatSeconds of its first Task, when the document gives them as numbers)."""
    out: dict[str, tuple[str, float | None, float | None]] = {}
    for state in task_states(machine):
        function = function_of(state)
        if function is None or function in out:
            continue
        timeout = state.raw.get("TimeoutSeconds")
        heartbeat = state.raw.get("HeartbeatSeconds")
        out[function] = (
            function,
            timeout if isinstance(timeout, int | float) else None,
            heartbeat if isinstance(heartbeat, int | float) else None,
        )
    return list(out.values())


def runs_integration(resource: str) -> bool:
    """Whether a Task's resource is Shepherd's to carry out (a service call or another state
    machine), never a Lambda function's."""
    return integrations.is_start_execution(resource) or services.is_service(resource)


def needs_integrations(machine: StateMachine, pools: dict[str, str], pool: str) -> bool:
    """Whether a machine has a Task the integration pool runs: a service call, another state
    machine, or a Lambda function the project maps to that pool."""
    for state in task_states(machine):
        resource = state.raw.get("Resource")
        if isinstance(resource, str) and runs_integration(resource):
            return True
        function = function_of(state)
        if pools.get(function or "", pool) == INTEGRATIONS_POOL:
            return True
    return False
