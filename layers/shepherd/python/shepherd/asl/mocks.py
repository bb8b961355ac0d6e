"""Step Functions Local's mock configuration (`shepherd asl run --mock-config FILE --test-case
NAME`): Task states answered by recorded responses instead of a Lambda function or a service,
so a state machine's run can be compared with what AWS recorded for it.

The file is the one AWS documents ("Configuration file for mocked service integrations in Step
Functions Local"): `StateMachines.<machine>.TestCases.<case>.<Task state>: <response name>`,
and `MockedResponses.<response name>` maps invocation numbers (`"0"`, or an inclusive range
`"1-2"`, numbered from 0 without gaps) to `{"Return": <result>}` or `{"Throw": {"Error",
"Cause"}}`. Each time a mocked state runs (every retry, loop visit and Map iteration counts) it
takes the next invocation's response: a `Return` is the task's result (ResultSelector,
ResultPath and Output then apply as to a real one; a `.waitForTaskToken` task ends with it), a
`Throw` fails the task with that error, which Retry and Catch see as any task's. A state with
no response for its invocation fails the execution (`States.Runtime`), as AWS says a mocked
Task must have a response for every invocation. A Task the test case does not name runs as it
would without mocks (AWS's "HybridPath").

Pure: parsing and the invocation counts; the runner asks `Mocks.answer` before running a task.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shepherd.errors import DefinitionError

from .document import StateMachine
from .errors import RUNTIME, StatesError

_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class Response:
    """One invocation's answer: `returned` (a Return), or `error` and `cause` (a Throw)."""

    returned: Any = None
    error: str | None = None
    cause: str = ""


@dataclass(frozen=True)
class MockCase:
    """The responses of one test case, by Task state: (response name, one per invocation)."""

    machine: str
    name: str
    states: Mapping[str, tuple[str, tuple[Response, ...]]]


class Mocks:
    """A test case's responses and how often each mocked state has run in this execution."""

    def __init__(self, case: MockCase) -> None:
        self.case = case
        self.calls: Counter[str] = Counter()

    def answer(self, state: str) -> Response | None:
        """The response for `state`'s next invocation; None when the test case does not mock
        it. Raises States.Runtime when its responses are used up."""
        mocked = self.case.states.get(state)
        if mocked is None:
            return None
        name, responses = mocked
        invocation = self.calls[state]
        self.calls[state] += 1
        if invocation >= len(responses):
            raise StatesError(
                RUNTIME,
                f"The mocked response '{name}' of the state '{state}' (test case "
                f"'{self.case.name}') has no response for invocation {invocation} (it defines "
                f"{len(responses)})",
            )
        return responses[invocation]


def _where(source: str, field: str) -> str:
    return f"{source}: {field}"


def _responses(name: str, raw: Any, source: str) -> tuple[Response, ...]:
    """The responses of one mocked response, one per invocation, in order."""
    field = f"MockedResponses.{name}"
    if not isinstance(raw, dict) or not raw:
        raise DefinitionError(_where(source, f"{field}: must be an object of invocations"))
    ranged: list[tuple[int, int, Response]] = []
    for key, value in raw.items():
        match = _RANGE.match(key)
        if match is None:
            raise DefinitionError(
                _where(source, f"{field}.{key}: an invocation is a number ('0') or a range ('1-2')")
            )
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise DefinitionError(_where(source, f"{field}.{key}: the range ends before it starts"))
        ranged.append((first, last, _response(value, f"{field}.{key}", source)))
    ranged.sort(key=lambda r: r[0])
    out: list[Response] = []
    for first, last, response in ranged:
        if first != len(out):
            raise DefinitionError(
                _where(
                    source,
                    f"{field}: invocations are numbered from 0 without gaps or overlaps; "
                    f"expected {len(out)}, found {first}",
                )
            )
        out.extend([response] * (last - first + 1))
    return tuple(out)


def _response(raw: Any, field: str, source: str) -> Response:
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in ("Return", "Throw"):
        raise DefinitionError(
            _where(source, f"{field}: must have exactly one field, Return or Throw")
        )
    if "Return" in raw:
        return Response(returned=raw["Return"])
    throw = raw["Throw"]
    if (
        not isinstance(throw, dict)
        or not isinstance(throw.get("Error"), str)
        or not isinstance(throw.get("Cause"), str)
    ):
        raise DefinitionError(
            _where(source, f"{field}.Throw: must be an object with string Error and Cause")
        )
    return Response(error=throw["Error"], cause=throw["Cause"])


def task_states(machine: StateMachine) -> set[str]:
    """Every Task state's name, in branches and Map processors too."""
    found: set[str] = set()
    for name, state in machine.states.items():
        if state.type == "Task":
            found.add(name)
        for branch in state.branches:
            found |= task_states(branch)
    return found


def select(
    config: Any, machine_name: str, case: str, machine: StateMachine, source: str
) -> MockCase:
    """The test case `case` of the state machine `machine_name` in a parsed mock configuration,
    checked against `machine` (each state it names is a Task state there)."""
    if not isinstance(config, dict):
        raise DefinitionError(_where(source, "a mock configuration is a JSON object"))
    machines = config.get("StateMachines")
    if not isinstance(machines, dict) or machine_name not in machines:
        known = ", ".join(sorted(machines)) if isinstance(machines, dict) else "none"
        raise DefinitionError(
            _where(source, f"StateMachines: no state machine '{machine_name}' (it has: {known})")
        )
    entry = machines[machine_name]
    cases = entry.get("TestCases") if isinstance(entry, dict) else None
    if not isinstance(cases, dict) or case not in cases:
        known = ", ".join(sorted(cases)) if isinstance(cases, dict) else "none"
        raise DefinitionError(
            _where(
                source,
                f"StateMachines.{machine_name}.TestCases: no test case '{case}' (it has: {known})",
            )
        )
    mapping = cases[case]
    field = f"StateMachines.{machine_name}.TestCases.{case}"
    if not isinstance(mapping, dict):
        raise DefinitionError(_where(source, f"{field}: must map Task states to mocked responses"))
    responses = config.get("MockedResponses")
    if not isinstance(responses, dict):
        responses = {}
    tasks = task_states(machine)
    states: dict[str, tuple[str, tuple[Response, ...]]] = {}
    for state, response in mapping.items():
        if state not in tasks:
            raise DefinitionError(
                _where(source, f"{field}.{state}: the state machine has no Task state '{state}'")
            )
        if not isinstance(response, str) or response not in responses:
            raise DefinitionError(
                _where(source, f"{field}.{state}: no mocked response {json.dumps(response)}")
            )
        states[state] = (response, _responses(response, responses[response], source))
    return MockCase(machine_name, case, states)


def load(path: Path | str, machine_name: str, case: str, machine: StateMachine) -> Mocks:
    """Read a mock configuration file and select one test case of it."""
    path = Path(path)
    try:
        config = json.loads(path.read_text())
    except OSError as exc:
        raise DefinitionError(f"{path}: {exc.strerror}") from None
    except ValueError as exc:
        raise DefinitionError(f"{path}: not valid JSON: {exc}") from None
    return Mocks(select(config, machine_name, case, machine, str(path)))
