"""`shepherd asl run FILE`: run an Amazon States Language state machine in process, with the
project's registered agents as its Lambda functions (each Task runs the agent registered under
the function's name) and simulated time. It prints the execution's end on stdout as one JSON
object `{"status", "output", "error", "cause"}` and exits 0 when it SUCCEEDED, 1 when it FAILED or TIMED_OUT. `shepherd validate`
checks ASL files with the same loader.

This runs no engine: nothing is supervised or stored. It is for trying a state machine copied
from Step Functions before it runs on the engine. `--mock-config FILE --test-case NAME` answers
the Task states a Step Functions Local test case names with its recorded responses
(shepherd.asl.mocks), so a run can be compared with what AWS recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from shepherd.asl import StateMachine, asl_files, load_file, mocks, run_state_machine, workflow_type
from shepherd.asl.integrations import Integrations
from shepherd.asl.lambdas import INVOKE, WAIT_FOR_TOKEN, function_name
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.errors import DefinitionError


def lambda_functions(machine: StateMachine) -> set[str]:
    """The function names a state machine's Lambda tasks name statically (a FunctionName
    taken from the input at run time cannot be checked before)."""
    found: set[str] = set()
    for state in machine.states.values():
        for branch in state.branches:
            found |= lambda_functions(branch)
        if state.type != "Task":
            continue
        resource = str(state.raw["Resource"]).removesuffix(WAIT_FOR_TOKEN)
        if resource == INVOKE:
            args = state.get("Parameters") or state.get("Arguments") or {}
            name = args.get("FunctionName") if isinstance(args, dict) else None
            if isinstance(name, str) and not name.startswith("{%"):
                found.add(function_name(name))
        elif not resource.startswith("arn:aws:states:::"):
            found.add(function_name(resource))
    return found


def check_functions(machine: StateMachine, known: Iterable[str], source: str) -> list[str]:
    """One line per Lambda function no agent is registered for."""
    names = set(known)
    return [
        f"{source}: Resource: no agent is registered for the Lambda function '{name}'"
        for name in sorted(lambda_functions(machine) - names)
    ]


def as_functions(registry: AgentRegistry, wf_type: str) -> dict[str, Callable[[Any], Any]]:
    """Each registered agent as a Lambda function: it gets the payload as `ctx.input`."""

    def wrap(name: str) -> Callable[[Any], Any]:
        fn = registry.get(name)
        assert fn is not None
        counter = {"calls": 0}

        def call(payload: Any) -> Any:
            counter["calls"] += 1
            ctx = AgentContext(
                workflow_id="asl-run",
                workflow_type=wf_type,
                step=name,
                kind="step",
                attempt=counter["calls"],
                idempotency_key=f"asl-run:{name}",
                deadline_ms=2**62,
                _input_from=lambda: payload,
            )
            return fn(ctx)

        return call

    return {name: wrap(name) for name in registry.names()}


def aws_tasks() -> Integrations:
    """Service integrations through boto3 with the default credentials, region and endpoint
    (`AWS_ENDPOINT_URL` points them at a local stack's moto), made only when a Task calls."""
    import boto3
    from shepherd.adapters.services import AwsServices

    return Integrations(call=AwsServices(boto3.client).call)


def _siblings(path: Path, machine: StateMachine) -> dict[str, StateMachine]:
    """The state machines `states:startExecution` may name: those of the file's folder (one
    that does not validate is left out; `shepherd validate` reports it)."""
    found = {workflow_type(path): machine}
    for other in asl_files(path.parent):
        try:
            found.setdefault(workflow_type(other), load_file(other))
        except DefinitionError:
            continue
    return found


def cmd_asl_run(args: argparse.Namespace, registry: AgentRegistry) -> int:
    path = Path(args.file)
    machine = load_file(path)
    # Step Functions Local reads its mock configuration from SFN_MOCK_CONFIG; so does this.
    config = args.mock_config or os.environ.get("SFN_MOCK_CONFIG") or None
    if args.mock_config is not None and args.test_case is None:
        raise DefinitionError("--mock-config needs --test-case")
    if args.test_case is not None and config is None:
        raise DefinitionError("--test-case needs --mock-config (or SFN_MOCK_CONFIG)")
    mocked = None
    if args.test_case is not None and config is not None:
        mocked = mocks.load(
            config, args.state_machine or workflow_type(path), args.test_case, machine
        )
    result = run_state_machine(
        machine,
        args.input,
        functions=as_functions(registry, workflow_type(path)),
        tasks=aws_tasks(),
        machines=_siblings(path, machine),
        mocks=mocked,
    )
    if args.path:
        for visit in result.path:
            pad = "  " * visit.depth
            print(f"{pad}{visit.state} #{visit.visit}: {json.dumps(visit.input)}", file=sys.stderr)
    # stdout: one JSON object {"status", "output", "error", "cause"} (docs/definitions.md)
    print(json.dumps(result.describe(), indent=2, ensure_ascii=False))
    if result.status == "SUCCEEDED":
        return 0
    print(f"{result.status} {result.error}: {result.cause}", file=sys.stderr)
    return 1


def add_parser(sub: Any) -> None:
    asl = sub.add_parser("asl", help="Amazon States Language state machines")
    asl_sub = asl.add_subparsers(dest="asl_command", required=True)
    run = asl_sub.add_parser(
        "run",
        help="run an .asl.json in process, the project's agents as its Lambda functions "
        "(exit 0: SUCCEEDED)",
    )
    run.add_argument("file")
    run.add_argument("--input", default="{}", help="JSON, or @file")
    run.add_argument("--agents", metavar="MODULES", help="default: [tool.shepherd] agent-modules")
    run.add_argument("--path", action="store_true", help="print the states entered (stderr)")
    run.add_argument(
        "--mock-config",
        metavar="FILE",
        help="Step Functions Local's mock configuration (default: $SFN_MOCK_CONFIG): the Task "
        "states --test-case names answer with its recorded responses",
    )
    run.add_argument("--test-case", metavar="NAME", help="the test case of --mock-config to run")
    run.add_argument(
        "--state-machine",
        metavar="NAME",
        help="the state machine's name in --mock-config (default: the file's, <name>.asl.json)",
    )
