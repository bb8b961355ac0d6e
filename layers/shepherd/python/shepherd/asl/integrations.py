"""The Tasks of a state machine that are not Lambda functions: AWS service calls and other
state machines (`states:startExecution`), as the in-process runner and the engine's
integration pool (`shepherd.asl.engine`) carry them out.

Pure apart from what it is given: a service call goes through `call(resource, parameters,
idempotency_key)` (`shepherd.adapters.services.AwsServices.call` against AWS or the local
stack's moto), and another state machine is run by `start(name, input)`, which the runner
provides. Outputs are shaped as Step Functions shapes each form of `startExecution`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import services
from .errors import RUNTIME, TASK_FAILED, StatesError

START_EXECUTION = "arn:aws:states:::states:startExecution"
ServiceCall = Callable[[str, Any, str | None], Any]


@dataclass(frozen=True)
class ChildRun:
    """Another state machine's run, as `start` reports it."""

    name: str  # the execution's name
    status: str  # SUCCEEDED | FAILED
    output: Any = None
    error: str | None = None
    cause: str | None = None
    start_ms: int = 0
    stop_ms: int = 0


def is_start_execution(resource: str) -> bool:
    return resource == START_EXECUTION or resource.startswith(START_EXECUTION + ".")


def machine_name(reference: str) -> str:
    """`arn:aws:states:r:a:stateMachine:NAME` (or a bare NAME) -> NAME."""
    parts = reference.split(":")
    if "stateMachine" in parts:
        return parts[parts.index("stateMachine") + 1]
    return parts[-1]


@dataclass(frozen=True)
class Integrations:
    """What a runner needs to carry out non-Lambda Tasks."""

    call: ServiceCall | None = None
    region: str = "us-east-1"
    account: str = "123456789012"

    def service(self, resource: str, parameters: Any, idempotency_key: str | None) -> Any:
        if self.call is None:
            raise StatesError(
                services.PERMISSIONS,
                f"'{resource}' calls an AWS service, and this run was given no service client",
            )
        return self.call(resource, parameters, idempotency_key)

    def start_execution(
        self, resource: str, parameters: Any, start: Callable[[str, Any, str | None], ChildRun]
    ) -> Any:
        """Run the named state machine and give what Step Functions gives for this form."""
        request = start_request(resource, parameters)
        child = start(request.machine, request.input, request.execution)
        return self.child_result(request, child)

    def child_result(self, request: StartRequest, child: ChildRun) -> Any:
        """What a `startExecution` Task's result is, for its form: the start's answer (plain,
        `.waitForTaskToken`), or the child's end (`.sync`: its input and output as JSON text;
        `.sync:2`: as JSON values); a child that did not succeed fails the Task with its error
        (`States.TaskFailed` when it has none) and the DescribeExecution fields as the cause."""
        name = request.machine
        machine_arn = f"arn:aws:states:{self.region}:{self.account}:stateMachine:{name}"
        execution_arn = f"arn:aws:states:{self.region}:{self.account}:execution:{name}:{child.name}"
        if not request.sync:
            return {"ExecutionArn": execution_arn, "StartDate": child.start_ms}
        if child.status != "SUCCEEDED":
            raise StatesError(
                TASK_FAILED if child.error is None else child.error,
                json.dumps(
                    {
                        "ExecutionArn": execution_arn,
                        "Error": child.error,
                        "Cause": child.cause,
                        "Status": child.status,
                    },
                    separators=(",", ":"),
                ),
            )
        text = request.pattern == "sync"
        dumped_in = json.dumps(request.input, separators=(",", ":"))
        dumped_out = json.dumps(child.output, separators=(",", ":"))
        return {
            "ExecutionArn": execution_arn,
            "Input": dumped_in if text else request.input,
            "InputDetails": {"Included": True},
            "Name": child.name,
            "Output": dumped_out if text else child.output,
            "OutputDetails": {"Included": True},
            "StartDate": child.start_ms,
            "StateMachineArn": machine_arn,
            "Status": "SUCCEEDED",
            "StopDate": child.stop_ms,
        }


@dataclass(frozen=True)
class StartRequest:
    """A `startExecution` Task's request: the state machine, its input, the execution's name
    (None: one is made), and the form (`""`, `sync`, `sync:2`, `waitForTaskToken`)."""

    machine: str
    input: Any
    execution: str | None
    pattern: str

    @property
    def sync(self) -> bool:
        """Whether the Task ends when the child ends (`.sync`, `.sync:2`)."""
        return self.pattern in ("sync", "sync:2")


def start_request(resource: str, parameters: Any) -> StartRequest:
    pattern = resource[len(START_EXECUTION) :].lstrip(".")
    if not isinstance(parameters, dict) or not isinstance(parameters.get("StateMachineArn"), str):
        raise StatesError(RUNTIME, "states:startExecution needs StateMachineArn")
    raw = parameters.get("Input", {})
    value = json.loads(raw) if isinstance(raw, str) else raw
    execution = parameters.get("Name")
    return StartRequest(
        machine_name(parameters["StateMachineArn"]),
        value,
        execution if isinstance(execution, str) else None,
        pattern,
    )


def waits_for_child(resource: str) -> bool:
    """A `startExecution.sync` or `.sync:2` Task: it ends when the child execution ends."""
    return is_start_execution(resource) and resource.removeprefix(START_EXECUTION).lstrip(".") in (
        "sync",
        "sync:2",
    )


def validate_resource(resource: str) -> str | None:
    """Why a Task's resource cannot run (None when it can): checked when a state machine is
    loaded, so the message names the state."""
    if is_start_execution(resource):
        pattern = resource[len(START_EXECUTION) :].lstrip(".")
        if pattern not in ("", "sync", "sync:2", "waitForTaskToken"):
            return f"'{resource}': startExecution takes .sync, .sync:2 or .waitForTaskToken"
        return None
    return services.refusal(resource)


def known_machines(names: Mapping[str, Any]) -> str:
    return ", ".join(sorted(names)) or "none"
