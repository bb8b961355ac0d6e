"""An in-process driver for the interpreter: runs a state machine to its end with Python
callables as its Lambda functions, Parallel branches and Map items run one after another
(recursively), and simulated time (a Wait or a retry's delay moves the clock; nothing sleeps).

For tests, `shepherd asl run` and the conformance suite. The engine's supervised run of ASL
tasks drives the same `machine.Interpreter` through its own steps.
"""

from __future__ import annotations

import datetime as _dt
import random as _random
import uuid as _uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from . import integrations, lambdas, services
from .document import StateMachine
from .errors import RUNTIME, TIMEOUT, StatesError
from .machine import (
    Action,
    BranchesFinished,
    BranchOutcome,
    Context,
    Entered,
    Event,
    Exited,
    Failed,
    Interpreter,
    RunBranches,
    RunTask,
    StartWait,
    Succeeded,
    TaskFailed,
    TaskSucceeded,
    WaitElapsed,
    iso,
)
from .mocks import Mocks

EPOCH = _dt.datetime(2024, 1, 1, tzinfo=_dt.UTC)


@dataclass
class Visit:
    """One state entered: its input and (once it ended) its output."""

    state: str
    visit: int
    input: Any
    output: Any = None
    ended: bool = False
    depth: int = 0


@dataclass
class ExecutionResult:
    status: str  # SUCCEEDED, FAILED or TIMED_OUT (the state machine's TimeoutSeconds passed)
    output: Any = None
    error: str | None = None
    cause: str | None = None
    path: list[Visit] = field(default_factory=list)
    transitions: int = 0
    seconds: float = 0.0  # simulated time the execution took

    def describe(self) -> dict[str, Any]:
        """The execution's end as `shepherd asl run` prints it (docs/definitions.md): always
        the four keys, in this order, as DescribeExecution names them; `output` is null for a
        failed execution, `error` and `cause` for a successful one (and either may be null
        for a Fail state that gives none)."""
        return {
            "status": self.status,
            "output": self.output,
            "error": self.error,
            "cause": self.cause,
        }


class Callbacks:
    """Task tokens of `.waitForTaskToken` tasks: a function completes its token (during its
    call or later, before the runner needs it) as SendTaskSuccess/SendTaskFailure would."""

    def __init__(self) -> None:
        self._done: dict[str, Event] = {}

    def succeed(self, token: str, output: Any) -> None:
        self._done[token] = TaskSucceeded(output)

    def fail(self, token: str, error: str, cause: str = "") -> None:
        self._done[token] = TaskFailed(error, cause)

    def take(self, token: str) -> Event | None:
        return self._done.pop(token, None)


class _TimedOut(Exception):
    """The execution's TimeoutSeconds passed (on the simulated clock)."""


class _Run:
    def __init__(
        self,
        functions: Mapping[str, Callable[[Any], Any]],
        context: Context,
        now: _dt.datetime,
        callbacks: Callbacks,
        deadline: _dt.datetime | None,
        tasks: integrations.Integrations | None = None,
        machines: Mapping[str, StateMachine] | None = None,
        mocks: Mocks | None = None,
    ) -> None:
        self.tasks = tasks or integrations.Integrations()
        self.mocks = mocks
        self.machines = machines or {}
        self.functions = functions
        self.context = context
        self.now = now
        self.start = now
        self.callbacks = callbacks
        self.deadline = deadline
        self.path: list[Visit] = []
        self.transitions = 0
        self.open: dict[tuple[int, str], Visit] = {}
        self.rng = _random.Random(f"{context.seed}:requests")

    def run(
        self,
        machine: StateMachine,
        input: Any,
        variables: Mapping[str, Any],
        depth: int,
        events: int = 1,
        map_item: Mapping[str, Any] | None = None,
    ) -> BranchOutcome:
        """Run one states list to its end; `events` is the id of the history event before its
        first state's, and the outcome carries the id of the last one it published."""
        interpreter = Interpreter(machine, self.context, map_item=map_item)
        frame, actions = interpreter.start(input, self.now, variables, events)
        while True:
            event: Event | None = None
            for action in actions:
                ended = self.record(action, depth)
                if ended is not None:
                    self.transitions += frame.transitions
                    return replace(ended, events=frame.events)
                event = self.carry_out(action, depth) or event
            if event is None:
                raise AssertionError(f"no event after {actions}")
            if self.deadline is not None and self.now > self.deadline:
                raise _TimedOut  # the whole execution ends, whatever a Catch says
            frame, actions = interpreter.advance(frame, event, self.now)

    def record(self, action: Action, depth: int) -> BranchOutcome | None:
        if isinstance(action, Entered):
            visit = Visit(action.state, action.visit, action.input, depth=depth)
            self.path.append(visit)
            self.open[(depth, action.state)] = visit
        elif isinstance(action, Exited):
            if (depth, action.state) in self.open:
                visit = self.open.pop((depth, action.state))
                visit.output, visit.ended = action.output, True
        elif isinstance(action, Succeeded):
            return BranchOutcome(output=action.output)
        elif isinstance(action, Failed):
            return BranchOutcome(failed=True, error=action.error, cause=action.cause)
        return None

    def carry_out(self, action: Action, depth: int) -> Event | None:
        if isinstance(action, StartWait):
            self.now = max(self.now, action.until)
            return WaitElapsed()
        if isinstance(action, RunTask):
            return self.task(action)
        if isinstance(action, RunBranches):
            # One after another, so the history's event ids are as if the branches (or the
            # iterations) ran in order: a Map iteration is framed by MapIterationStarted and
            # MapIterationSucceeded/Failed.
            events = action.events
            outcomes = []
            for i, item in enumerate(action.inputs):
                if action.kind == "Map":
                    events += 1
                outcome = self.run(
                    action.machines[0] if action.kind == "Map" else action.machines[i],
                    item,
                    action.variables,
                    depth + 1,
                    events,
                    action.items[i] if i < len(action.items) else None,
                )
                events = outcome.events + (1 if action.kind == "Map" else 0)
                outcomes.append(outcome)
                tolerant = action.tolerated_count is not None or (
                    action.tolerated_percentage is not None
                )
                if outcome.failed and not tolerant:
                    break  # Step Functions aborts the other branches or iterations
            return BranchesFinished(tuple(outcomes), events)
        return None

    def task(self, action: RunTask) -> Event:
        request_id = str(_uuid.UUID(int=self.rng.getrandbits(128), version=4))
        mocked = self.mocked(action)
        if mocked is not None:
            return mocked
        if integrations.is_start_execution(action.resource) or services.is_service(action.resource):
            return self.integration(action)
        try:
            invoked = lambdas.invocation(action.resource, action.payload)
        except StatesError as exc:
            return TaskFailed(exc.error, exc.cause)
        function = self.functions.get(invoked.function)
        if function is None:
            known = ", ".join(sorted(self.functions)) or "none"
            return TaskFailed(
                "Lambda.ResourceNotFoundException",
                f"Function not found: {invoked.function} (registered: {known})",
            )
        try:
            result = function(invoked.payload)
        except Exception as exc:
            error = lambdas.error_of(exc, request_id)
            return TaskFailed(error.error, error.cause)
        if invoked.callback:
            return self.answer(action)
        return TaskSucceeded(lambdas.shape(invoked, result, request_id, iso(self.now)))

    def mocked(self, action: RunTask) -> Event | None:
        """The test case's recorded response for this invocation (shepherd.asl.mocks), or
        None when the state is not mocked."""
        if self.mocks is None:
            return None
        try:
            response = self.mocks.answer(action.state)
        except StatesError as exc:
            return TaskFailed(exc.error, exc.cause)
        if response is None:
            return None
        if response.error is not None:
            return TaskFailed(response.error, response.cause)
        return TaskSucceeded(response.returned)

    def answer(self, action: RunTask) -> Event:
        """A `.waitForTaskToken` task's outcome: what its token was completed with."""
        done = self.callbacks.take(action.token or "")
        if done is not None:
            return done
        # Never completed: the first of its heartbeat and its timeout ends it, on the clock,
        # with States.Timeout and no cause either way (measured against us-east-1, as the floci
        # emulator's tests record; a Retry or Catch on States.HeartbeatTimeout matches it too);
        # with neither, nothing would (AWS waits up to a year), and the run fails at once.
        heartbeat, timeout = action.heartbeat_seconds, action.timeout_seconds
        if heartbeat is not None and (timeout is None or heartbeat < timeout):
            self.now += _dt.timedelta(seconds=heartbeat)
            return TaskFailed(TIMEOUT, "")
        if timeout is not None:
            self.now += _dt.timedelta(seconds=timeout)
            return TaskFailed(TIMEOUT, "")
        return TaskFailed(RUNTIME, f"The task token of '{action.state}' was never completed")

    def integration(self, action: RunTask) -> Event:
        """A service call or another state machine, instead of a Lambda function."""
        try:
            if integrations.is_start_execution(action.resource):
                result = self.tasks.start_execution(action.resource, action.payload, self.child)
            else:
                key = f"{self.context.execution_id}/{action.state}/{action.visit}"
                result = self.tasks.service(action.resource, action.payload, key)
        except StatesError as exc:
            return TaskFailed(exc.error, exc.cause)
        if action.resource.endswith(lambdas.WAIT_FOR_TOKEN):
            return self.answer(action)
        return TaskSucceeded(result)

    def child(self, name: str, value: Any, execution: str | None) -> integrations.ChildRun:
        """Run the state machine `name` to its end, on this run's clock."""
        machine = self.machines.get(name)
        if machine is None:
            raise StatesError(
                "StepFunctions.StateMachineDoesNotExistException",
                f"State Machine Does Not Exist: '{name}' "
                f"(known: {integrations.known_machines(self.machines)})",
            )
        execution = execution or str(_uuid.UUID(int=self.rng.getrandbits(128), version=4))
        started = self.now
        result = run_state_machine(
            machine,
            value,
            functions=self.functions,
            clock=self.now,
            context=Context(
                execution_id=f"arn:aws:states:{self.tasks.region}:{self.tasks.account}"
                f":execution:{name}:{execution}",
                execution_name=execution,
                state_machine_id=f"arn:aws:states:{self.tasks.region}:{self.tasks.account}"
                f":stateMachine:{name}",
                state_machine_name=name,
                seed=self.rng.getrandbits(32),
            ),
            callbacks=self.callbacks,
            tasks=self.tasks,
            machines=self.machines,
        )
        self.now = started + _dt.timedelta(seconds=result.seconds)
        return integrations.ChildRun(
            name=execution,
            status=result.status,
            output=result.output,
            error=result.error,
            cause=result.cause,
            start_ms=int(started.timestamp() * 1000),
            stop_ms=int(self.now.timestamp() * 1000),
        )


def run_state_machine(
    machine: StateMachine,
    input: Any,
    *,
    functions: Mapping[str, Callable[[Any], Any]] | None = None,
    clock: _dt.datetime = EPOCH,
    context: Context | None = None,
    callbacks: Callbacks | None = None,
    tasks: integrations.Integrations | None = None,
    machines: Mapping[str, StateMachine] | None = None,
    mocks: Mocks | None = None,
) -> ExecutionResult:
    """Run `machine` on `input` to its end, in process, with simulated time from `clock`;
    `mocks` answers the Task states its test case names (not those of child executions)."""
    context = context or Context()
    context = Context(
        **{**context.__dict__, "input": input, "start_time": iso(clock)},
    )
    deadline = (
        clock + _dt.timedelta(seconds=machine.timeout_seconds) if machine.timeout_seconds else None
    )
    run = _Run(
        functions or {}, context, clock, callbacks or Callbacks(), deadline, tasks, machines, mocks
    )
    try:
        outcome = run.run(machine, input, {}, 0)
    except _TimedOut:
        # Step Functions ends it TIMED_OUT; its ExecutionTimedOut event (recorded) carries
        # neither an error nor a cause. It ends when the budget runs out, mid-wait or
        # mid-backoff, not when the wait would have ended.
        seconds = min((run.now - clock).total_seconds(), float(machine.timeout_seconds or 0))
        return ExecutionResult("TIMED_OUT", None, None, None, run.path, run.transitions, seconds)
    seconds = (run.now - clock).total_seconds()
    if outcome.failed:
        # A task that timed out fails the execution with no cause (AWS's ExecutionFailed)
        cause = None if outcome.error == TIMEOUT and not outcome.cause else outcome.cause
        return ExecutionResult(
            "FAILED", None, outcome.error, cause, run.path, run.transitions, seconds
        )
    return ExecutionResult(
        "SUCCEEDED", outcome.output, None, None, run.path, run.transitions, seconds
    )
