"""The Tasks of a state machine that are not Lambda functions: AWS service calls and other
state machines (`states:startExecution`), as the in-process runner carries them out.

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

    def service(self, resource: str, parameters: Any, idempotency_key: str) -> Any:
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
        pattern = resource[len(START_EXECUTION) :].lstrip(".")
        if not isinstance(parameters, dict) or not isinstance(
            parameters.get("StateMachineArn"), str
        ):
            raise StatesError(RUNTIME, "states:startExecution needs StateMachineArn")
        name = machine_name(parameters["StateMachineArn"])
        raw = parameters.get("Input", {})
        value = json.loads(raw) if isinstance(raw, str) else raw
        child = start(name, value, parameters.get("Name"))
        machine_arn = f"arn:aws:states:{self.region}:{self.account}:stateMachine:{name}"
        execution_arn = f"arn:aws:states:{self.region}:{self.account}:execution:{name}:{child.name}"
        if pattern in ("", "waitForTaskToken"):
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
        text = pattern == "sync"
        dumped_in = json.dumps(value, separators=(",", ":"))
        dumped_out = json.dumps(child.output, separators=(",", ":"))
        return {
            "ExecutionArn": execution_arn,
            "Input": dumped_in if text else value,
            "InputDetails": {"Included": True},
            "Name": child.name,
            "Output": dumped_out if text else child.output,
            "OutputDetails": {"Included": True},
            "StartDate": child.start_ms,
            "StateMachineArn": machine_arn,
            "Status": "SUCCEEDED",
            "StopDate": child.stop_ms,
        }


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
