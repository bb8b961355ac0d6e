"""The interpreter as a pure transition function.

An execution of one states list (the top level, a Parallel branch or a Map iteration) is a
`Frame`: the current state, its raw input, the variables it can read and assign, counters.
`Interpreter.start` and `Interpreter.advance` take a frame and an event (a task's result or
error, a wait's end, the branches' outcomes) and give the new frame and the actions to carry
out (run a task, wait until a time, run branches, or the frame's end: succeeded or failed).

Control states (Pass, Choice, Succeed, Fail, a Wait that is already due) are evaluated inside
one transition, several in a row. A loop is a Next back to an earlier state; every state
entered counts one transition and a frame stops with States.Runtime past `max_transitions`
(Step Functions' own bound is 25,000 history events per execution).

No clock, no I/O and no global randomness: the caller passes `now`, and every random number
(jitter, States.UUID, $random, task tokens) is drawn from a generator seeded by the frame's
seed and its transition count, so an execution replays identically.
"""

from __future__ import annotations

import datetime as _dt
import random as _random
import uuid as _uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from . import distributed, errors, jsonata, paths, rules, templates
from .document import JSONATA, State, StateMachine
from .errors import RUNTIME, StatesError
from .values import dumps, is_number

MAX_TRANSITIONS = 25_000
# Step Functions' cause for States.ExceedToleratedFailureThreshold (emulators measured against AWS).
EXCEEDED = "The specified tolerated failure threshold was exceeded"
MAX_PAYLOAD_BYTES = 256 * 1024  # Step Functions' limit on a state's input, output or result


def check_size(state: str, value: Any) -> None:
    """A state's output over 256 KiB is States.DataLimitExceeded (never retried or caught)."""
    if len(dumps(value).encode()) > MAX_PAYLOAD_BYTES:
        raise StatesError(
            errors.DATA_LIMIT_EXCEEDED,
            f"The state/task '{state}' returned a result with a size exceeding the maximum "
            "number of bytes service limit.",
        )


def _check_result_size(resource: str, result: Any) -> None:
    """A task's result over 256 KiB fails the task (TaskFailed, so Retry and Catch see it) with
    States.DataLimitExceeded, naming the service of an optimized integration (`lambda` for
    `arn:aws:states:::lambda:invoke`) or the resource itself (a Lambda ARN), as recorded."""
    if len(dumps(result).encode()) <= MAX_PAYLOAD_BYTES:
        return
    service = "arn:aws:states:::"
    name = (
        resource[len(service) :].split(":", maxsplit=1)[0]
        if resource.startswith(service)
        else resource
    )
    raise StatesError(
        errors.DATA_LIMIT_EXCEEDED,
        f"The state/task '{name}' returned a result with a size exceeding the maximum number "
        "of bytes service limit.",
        passed_on=True,
    )


# --- the execution's facts for $$ ----------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What the context object says about the execution (`$$.Execution`, `$$.StateMachine`)."""

    execution_id: str = "arn:aws:states:us-east-1:123456789012:execution:machine:execution"
    execution_name: str = "execution"
    state_machine_id: str = "arn:aws:states:us-east-1:123456789012:stateMachine:machine"
    state_machine_name: str = "machine"
    role_arn: str = "arn:aws:iam::123456789012:role/shepherd"
    start_time: str = "1970-01-01T00:00:00.000Z"
    input: Any = None
    seed: int = 0


def iso(now: _dt.datetime) -> str:
    """A timestamp as Step Functions writes it: UTC, milliseconds, `Z`."""
    utc = now.astimezone(_dt.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


# --- events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSucceeded:
    output: Any


@dataclass(frozen=True)
class TaskFailed:
    error: str
    cause: str = ""


@dataclass(frozen=True)
class WaitElapsed:
    pass


@dataclass(frozen=True)
class BranchOutcome:
    """One Parallel branch's or Map item's end: its output, or its error and cause."""

    output: Any = None
    failed: bool = False
    error: str | None = None
    cause: str | None = None
    events: int = 0  # the id of the last history event the branch published


@dataclass(frozen=True)
class BranchesFinished:
    outcomes: tuple[BranchOutcome, ...]
    events: int = 0  # the id of the last history event the branches published


Event = TaskSucceeded | TaskFailed | WaitElapsed | BranchesFinished


# --- actions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunTask:
    state: str
    visit: int
    attempt: int
    resource: str
    payload: Any
    timeout_seconds: float | None
    heartbeat_seconds: float | None
    token: str | None


@dataclass(frozen=True)
class StartWait:
    until: _dt.datetime
    retry: bool = False


@dataclass(frozen=True)
class RunBranches:
    """Run each machine on its input (a Parallel's branches, or a Map's one processor once per
    item), at most `max_concurrency` at a time (0: no limit), with `variables` readable."""

    state: str
    kind: str  # "Parallel" or "Map"
    machines: tuple[StateMachine, ...]
    inputs: tuple[Any, ...]
    max_concurrency: int
    variables: Mapping[str, Any]
    tolerated_count: int | None = None
    tolerated_percentage: float | None = None
    events: int = 0  # the id of the ParallelStateStarted or MapStateStarted event
    # A distributed Map's children: each one's context object `Map.Item` ({Index, Value}, and
    # Key for an object's entry), which the child reads as `$$.Map.Item` (empty otherwise).
    items: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Entered:
    """A state was entered (for the execution's path; nothing to carry out)."""

    state: str
    visit: int
    input: Any


@dataclass(frozen=True)
class Exited:
    """A state ended with `output` (for the execution's path)."""

    state: str
    output: Any


@dataclass(frozen=True)
class Succeeded:
    output: Any


@dataclass(frozen=True)
class Failed:
    error: str | None  # None: a Fail state without an Error
    cause: str | None


Action = RunTask | StartWait | RunBranches | Entered | Exited | Succeeded | Failed


# --- the frame -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    state: str
    raw_input: Any = None
    effective_input: Any = None
    own: Mapping[str, Any] = field(default_factory=dict)  # variables this frame assigns
    outer: Mapping[str, Any] = field(default_factory=dict)  # variables it can only read
    transitions: int = 0
    visits: Mapping[str, int] = field(default_factory=dict)
    retries: tuple[int, ...] = ()
    attempt: int = 0
    entered_time: str = ""
    pending: str = ""  # "task", "wait", "retry", "branches", "" when ended
    token: str | None = None
    events: int = 1  # the id of the last history event so far (1: ExecutionStarted)
    entered_event: int = 0  # the id of this state's *StateEntered event

    @property
    def variables(self) -> dict[str, Any]:
        return {**self.outer, **self.own}


def frame_to_json(frame: Frame) -> dict[str, Any]:
    """A frame as a JSON object, for a driver that stores it between events (the engine)."""
    return {
        "state": frame.state,
        "raw_input": frame.raw_input,
        "effective_input": frame.effective_input,
        "own": dict(frame.own),
        "outer": dict(frame.outer),
        "transitions": frame.transitions,
        "visits": dict(frame.visits),
        "retries": list(frame.retries),
        "attempt": frame.attempt,
        "entered_time": frame.entered_time,
        "pending": frame.pending,
        "token": frame.token,
        "events": frame.events,
        "entered_event": frame.entered_event,
    }


def frame_from_json(data: Mapping[str, Any]) -> Frame:
    return Frame(
        state=data["state"],
        raw_input=data["raw_input"],
        effective_input=data["effective_input"],
        own=dict(data["own"]),
        outer=dict(data["outer"]),
        transitions=data["transitions"],
        visits=dict(data["visits"]),
        retries=tuple(data["retries"]),
        attempt=data["attempt"],
        entered_time=data["entered_time"],
        pending=data["pending"],
        token=data["token"],
        events=data.get("events", 1),
        entered_event=data.get("entered_event", 0),
    )


def _uuid_from(rng: _random.Random) -> _uuid.UUID:
    return _uuid.UUID(int=rng.getrandbits(128), version=4)


def _no_next_state() -> StatesError:
    """A Choice that matched no rule and has no Default: Step Functions fails the execution
    with States.Runtime in these words (recorded against AWS), not States.NoChoiceMatched."""
    return StatesError(
        RUNTIME,
        "Failed to transition out of the state. The state does not point to a next state.",
    )


@dataclass(frozen=True)
class _Next:
    """A state's own end: go to `next` (or end) with `output`, assigning `assign`."""

    output: Any
    next: str | None
    assign: Mapping[str, Any] = field(default_factory=dict)


class Interpreter:
    def __init__(
        self,
        machine: StateMachine,
        context: Context | None = None,
        *,
        max_transitions: int = MAX_TRANSITIONS,
        map_item: Mapping[str, Any] | None = None,
    ) -> None:
        self.machine = machine
        self.context = context or Context()
        self.max_transitions = max_transitions
        self.map_item = map_item
        self._trail: list[Action] = []  # the Entered/Exited of the call in progress

    # -- entry points --

    def start(
        self,
        input: Any,
        now: _dt.datetime,
        variables: Mapping[str, Any] | None = None,
        events: int = 1,
    ) -> tuple[Frame, list[Action]]:
        """Enter the start state. `events`: the id of the last history event before it (1, the
        ExecutionStarted, at the top; a branch's or an iteration's started event inside)."""
        frame = Frame(state=self.machine.start_at, outer=dict(variables or {}), events=events)
        self._trail = []
        frame, actions = self._enter(frame, self.machine.start_at, input, now)
        return frame, [*self._trail, *actions]

    def advance(self, frame: Frame, event: Event, now: _dt.datetime) -> tuple[Frame, list[Action]]:
        self._trail = []
        frame, actions = self._advance(frame, event, now)
        return frame, [*self._trail, *actions]

    def _advance(self, frame: Frame, event: Event, now: _dt.datetime) -> tuple[Frame, list[Action]]:
        state = self.machine.states[frame.state]
        try:
            if isinstance(event, WaitElapsed) and frame.pending == "retry":
                return self._execute(replace(frame, attempt=frame.attempt + 1), state, now)
            if isinstance(event, WaitElapsed) and frame.pending == "wait":
                return self._finish(frame, state, self._wait_done(frame, state), now)
            if isinstance(event, TaskFailed | TaskSucceeded) and frame.pending == "reader":
                return self._items_read(frame, state, event)
            if isinstance(event, TaskFailed | TaskSucceeded) and frame.pending == "writer":
                return self._written(frame, state, event, now)
            if isinstance(event, TaskFailed) and frame.pending == "task":
                frame = replace(frame, events=frame.events + 1)  # TaskFailed
                raise StatesError(event.error, event.cause, passed_on=True)
            if isinstance(event, TaskSucceeded) and frame.pending == "task":
                frame = replace(frame, events=frame.events + 1)  # TaskSucceeded (or Failed)
                _check_result_size(state.raw["Resource"], event.output)
                return self._finish(frame, state, self._task_done(frame, state, event.output), now)
            if isinstance(event, BranchesFinished) and frame.pending == "branches":
                frame = replace(frame, events=max(frame.events, event.events))
                result = self._branches_done(frame, state, event.outcomes)
                if state.type == "Map" and state.has("ResultWriter"):
                    return self._write_results(frame, state, event.outcomes, result, now)
                frame = replace(frame, events=frame.events + 1)  # *StateSucceeded
                return self._finish(frame, state, self._task_done(frame, state, result), now)
        except StatesError as exc:
            return self._error(frame, state, exc, now)
        raise ValueError(f"{type(event).__name__} does not apply to a frame {frame.pending!r}")

    # -- helpers shared by every state --

    def _rng(self, frame: Frame, salt: str = "") -> _random.Random:
        return _random.Random(f"{self.context.seed}:{frame.transitions}:{frame.attempt}:{salt}")

    def _context(self, frame: Frame, state: State) -> dict[str, Any]:
        # Keys in the order Step Functions writes the context object (a recorded cause that
        # quotes it: Execution {Id, Input, StartTime, Name, RoleArn, RedriveCount},
        # StateMachine {Id, Name}, State {Name, EnteredTime, RetryCount}).
        ctx: dict[str, Any] = {
            "Execution": {
                "Id": self.context.execution_id,
                "Input": self.context.input,
                "StartTime": self.context.start_time,
                "Name": self.context.execution_name,
                "RoleArn": self.context.role_arn,
                "RedriveCount": 0,
            },
            "StateMachine": {
                "Id": self.context.state_machine_id,
                "Name": self.context.state_machine_name,
            },
            "State": {"Name": state.name, "EnteredTime": frame.entered_time},
        }
        if state.type in ("Task", "Parallel", "Map"):  # the states that retry
            ctx["State"]["RetryCount"] = frame.attempt
        if frame.token is not None:
            ctx["Task"] = {"Token": frame.token}
        if self.map_item is not None:
            ctx["Map"] = {"Item": dict(self.map_item)}
        return ctx

    def _states(self, frame: Frame, state: State, **extra: Any) -> dict[str, Any]:
        return {"input": frame.raw_input, "context": self._context(frame, state), **extra}

    def _jsonata(
        self, frame: Frame, state: State, template: Any, *, field: str | None = None, **extra: Any
    ) -> Any:
        return jsonata.render(
            template, self._states(frame, state, **extra), frame.variables, self._rng(frame), field
        )

    def _template(self, frame: Frame, state: State, template: Any, data: Any, name: str) -> Any:
        return templates.render(
            template,
            data,
            context=self._context(frame, state),
            variables=frame.variables,
            rng=self._rng(frame),
            field=name,
        )

    def _path(self, frame: Frame, state: State, name: str, data: Any) -> Any:
        """InputPath/OutputPath/ItemsPath...: null gives `{}` (for the two I/O paths)."""
        path = state.get(name, "$")
        if path is None:
            return {}
        io = name in ("InputPath", "OutputPath")
        try:
            # Jayway, as Step Functions reads these: an index past the end of an array reads null
            return paths.select(
                path,
                data,
                context=self._context(frame, state),
                variables=frame.variables,
                **({"index_past_end": None} if io else {}),
            )
        except paths.PathNotFound:
            if io:
                raise paths.invalid_path(path) from None
            if name == "ItemsPath":
                raise paths.items_not_found(path, data) from None
            raise paths.runtime_not_found(path, name, data) from None

    # -- entering states: control states run here, in a row --

    def _enter(
        self, frame: Frame, name: str, raw_input: Any, now: _dt.datetime
    ) -> tuple[Frame, list[Action]]:
        while True:
            if frame.transitions >= self.max_transitions:
                return frame, [
                    Failed(
                        RUNTIME,
                        f"The execution entered more than {self.max_transitions} states",
                    )
                ]
            state = self.machine.states[name]
            visits = {**frame.visits, name: frame.visits.get(name, 0) + 1}
            frame = replace(
                frame,
                state=name,
                raw_input=raw_input,
                effective_input=None,
                transitions=frame.transitions + 1,
                visits=visits,
                retries=tuple(0 for _ in state.retriers),
                attempt=0,
                entered_time=iso(now),
                pending="",
                token=None,
                events=frame.events + 1,
                entered_event=frame.events + 1,
            )
            self._trail.append(Entered(name, visits[name], raw_input))
            try:
                outcome = self._control(frame, state, now)
                if isinstance(outcome, _Next) and state.type != "Fail":
                    check_size(name, outcome.output)
            except StatesError as exc:
                return self._error(frame, state, exc, now)
            if not isinstance(outcome, _Next):
                return self._execute(frame, state, now)
            frame = replace(frame, own={**frame.own, **outcome.assign})
            if state.type != "Fail":
                frame = replace(frame, events=frame.events + 1)  # *StateExited
                self._trail.append(Exited(name, outcome.output))
            if outcome.next is None:
                if state.type == "Fail":
                    return frame, [Failed(*outcome.output)]
                return frame, [Succeeded(outcome.output)]
            name, raw_input = outcome.next, outcome.output

    def _control(self, frame: Frame, state: State, now: _dt.datetime) -> _Next | None:
        """A control state's end, or None for a state that waits or works."""
        if state.type == "Pass":
            return self._pass(frame, state)
        if state.type == "Choice":
            return self._choice(frame, state)
        if state.type == "Succeed":
            return _Next(self._plain_output(frame, state, frame.raw_input), None)
        if state.type == "Fail":
            return _Next(self._fail(frame, state), None)
        if state.type == "Wait":
            until = self._wait_until(frame, state, now)
            if until <= now:
                return self._wait_done(frame, state)
        return None

    def _execute(self, frame: Frame, state: State, now: _dt.datetime) -> tuple[Frame, list[Action]]:
        """Start the work of a Task, Wait, Parallel or Map (again, on a retry)."""
        try:
            if state.type == "Wait":
                return replace(frame, pending="wait"), [
                    StartWait(self._wait_until(frame, state, now))
                ]
            if state.type == "Task":
                return self._task(frame, state)
            return self._branches(frame, state)
        except StatesError as exc:
            return self._error(frame, state, exc, now)

    def _finish(
        self, frame: Frame, state: State, outcome: _Next, now: _dt.datetime
    ) -> tuple[Frame, list[Action]]:
        try:
            check_size(state.name, outcome.output)
        except StatesError as exc:
            return replace(frame, pending=""), [Failed(exc.error, exc.cause)]
        frame = replace(
            frame, own={**frame.own, **outcome.assign}, pending="", events=frame.events + 1
        )
        self._trail.append(Exited(state.name, outcome.output))
        if outcome.next is None:
            return frame, [Succeeded(outcome.output)]
        return self._enter(frame, outcome.next, outcome.output, now)

    # -- data flow --

    def _effective_input(self, frame: Frame, state: State) -> Any:
        """InputPath then Parameters (JSONPath), or Arguments (JSONata)."""
        if state.query_language == JSONATA:
            if state.has("Arguments"):
                return self._jsonata(frame, state, state.raw["Arguments"], field="Arguments")
            return frame.raw_input
        data = self._path(frame, state, "InputPath", frame.raw_input)
        if state.has("Parameters"):
            return self._template(frame, state, state.raw["Parameters"], data, "Parameters")
        return data

    def _plain_output(self, frame: Frame, state: State, data: Any) -> Any:
        """A state without a result (Succeed, Wait): InputPath then OutputPath, or Output."""
        if state.query_language == JSONATA:
            if state.has("Output"):
                return self._jsonata(frame, state, state.raw["Output"], field="Output")
            return frame.raw_input
        return self._path(frame, state, "OutputPath", self._path(frame, state, "InputPath", data))

    def _assign(self, frame: Frame, state: State, template: Any, data: Any, **extra: Any) -> Any:
        if template is None:
            return {}
        if state.query_language == JSONATA:
            return self._jsonata(frame, state, template, field="Assign", **extra)
        return self._template(frame, state, template, data, "Assign")

    def _result_output(self, frame: Frame, state: State, result: Any) -> _Next:
        """A state with a result (Pass, Task, Parallel, Map): ResultSelector, Assign,
        ResultPath, OutputPath; or, in JSONata, Output and Assign (both see the variables as
        they were before the state)."""
        if state.query_language == JSONATA:
            output = (
                self._jsonata(frame, state, state.raw["Output"], field="Output", result=result)
                if state.has("Output")
                else result
            )
            assign = self._assign(frame, state, state.get("Assign"), None, result=result)
            return _Next(output, state.next, assign)
        # Assign reads the raw result, before ResultSelector (Step Functions' evaluation order).
        assign = self._assign(frame, state, state.get("Assign"), result)
        if state.has("ResultSelector"):
            result = self._template(
                frame, state, state.raw["ResultSelector"], result, "ResultSelector"
            )
        output = paths.put(state.get("ResultPath", "$"), frame.raw_input, result)
        return _Next(self._path(frame, state, "OutputPath", output), state.next, assign)

    # -- the states --

    def _pass(self, frame: Frame, state: State) -> _Next:
        if state.query_language == JSONATA:
            output = (
                self._jsonata(frame, state, state.raw["Output"], field="Output")
                if state.has("Output")
                else frame.raw_input
            )
            return _Next(output, state.next, self._assign(frame, state, state.get("Assign"), None))
        effective = self._effective_input(frame, state)
        result = state.raw["Result"] if state.has("Result") else effective
        assign = self._assign(frame, state, state.get("Assign"), result)
        output = paths.put(state.get("ResultPath", "$"), frame.raw_input, result)
        return _Next(self._path(frame, state, "OutputPath", output), state.next, assign)

    def _choice(self, frame: Frame, state: State) -> _Next:
        if state.query_language == JSONATA:
            return self._choice_jsonata(frame, state)
        data = self._path(frame, state, "InputPath", frame.raw_input)
        evaluator = rules.Evaluator(
            data, context=self._context(frame, state), variables=frame.variables
        )
        output = self._path(frame, state, "OutputPath", data)
        for rule in state.raw["Choices"]:
            if evaluator.test(rule):
                assign = self._assign(frame, state, rule.get("Assign"), data)
                return _Next(output, rule["Next"], assign)
        if not state.has("Default"):
            raise _no_next_state()
        assign = self._assign(frame, state, state.get("Assign"), data)
        return _Next(output, state.raw["Default"], assign)

    def _choice_jsonata(self, frame: Frame, state: State) -> _Next:
        for index, rule in enumerate(state.raw["Choices"]):
            # AWS names a rule's fields by its index: 'Choices[1]/Condition'
            where = f"Choices[{index}]"
            condition = self._jsonata(frame, state, rule["Condition"], field=f"{where}/Condition")
            if not isinstance(condition, bool):
                raise StatesError(
                    errors.QUERY_EVALUATION_ERROR,
                    f"The Condition of a choice rule of '{state.name}' must be a boolean, got "
                    f"{dumps(condition)}",
                )
            if condition:
                return self._choice_end(frame, state, rule, rule["Next"], f"{where}/")
        if not state.has("Default"):
            raise _no_next_state()
        return self._choice_end(frame, state, state.raw, state.raw["Default"], "")

    def _choice_end(
        self, frame: Frame, state: State, holder: Mapping[str, Any], target: str, where: str
    ) -> _Next:
        """A matched rule's own Output and Assign, or for the Default the state's: a rule
        without them passes the input on and assigns nothing."""
        output = (
            self._jsonata(frame, state, holder["Output"], field=f"{where}Output")
            if "Output" in holder
            else frame.raw_input
        )
        assign = (
            self._jsonata(frame, state, holder["Assign"], field=f"{where}Assign")
            if holder.get("Assign") is not None
            else {}
        )
        return _Next(output, target, assign)

    def _fail(self, frame: Frame, state: State) -> tuple[str | None, str | None]:
        """A Fail state's Error and Cause; one it does not give is absent (None), as in
        Step Functions' ExecutionFailed event."""

        def text(name: str) -> str | None:
            if not state.has(name) and not state.has(f"{name}Path"):
                return None
            if state.has(f"{name}Path"):
                value = templates.resolve(
                    state.raw[f"{name}Path"],
                    frame.raw_input,
                    context=self._context(frame, state),
                    variables=frame.variables,
                    rng=self._rng(frame),
                    field=f"{name}Path",
                )
            elif state.query_language == JSONATA and state.has(name):
                value = self._jsonata(frame, state, state.raw[name], field=name)
            else:
                value = state.raw[name]
            if not isinstance(value, str):
                raise StatesError(RUNTIME, f"The {name} of '{state.name}' must be a string")
            return value

        return text("Error"), text("Cause")

    def _wait_until(self, frame: Frame, state: State, now: _dt.datetime) -> _dt.datetime:
        raw = state.raw
        seconds: Any
        if state.query_language == JSONATA:
            seconds = (
                self._jsonata(frame, state, raw["Seconds"], field="Seconds")
                if "Seconds" in raw
                else None
            )
            stamp = (
                self._jsonata(frame, state, raw["Timestamp"], field="Timestamp")
                if "Timestamp" in raw
                else None
            )
        else:
            data = self._path(frame, state, "InputPath", frame.raw_input)
            seconds = raw.get("Seconds")
            stamp = raw.get("Timestamp")
            if "SecondsPath" in raw:
                seconds = self._seconds_path(frame, state, data)
            if "TimestampPath" in raw:
                try:
                    stamp = paths.select(
                        raw["TimestampPath"],
                        data,
                        context=self._context(frame, state),
                        variables=frame.variables,
                    )
                except paths.PathNotFound:
                    raise StatesError(
                        RUNTIME,
                        "The TimestampPath parameter does not reference an input value: "
                        f"{raw['TimestampPath']}",
                    ) from None
        if "Seconds" in raw or "SecondsPath" in raw:
            if not is_number(seconds) or seconds < 0:
                raise StatesError(
                    RUNTIME, f"The Wait '{state.name}' needs a non-negative number of seconds"
                )
            delay: float = seconds
            return now + _dt.timedelta(seconds=delay)
        parsed = rules.parse_timestamp(stamp)
        if parsed is None:
            if "TimestampPath" in raw:  # Step Functions' words for this case (its recorded cause)
                shown = stamp if isinstance(stamp, str) else dumps(stamp)
                raise StatesError(
                    RUNTIME,
                    "The TimestampPath parameter does not reference a valid ISO-8601 extended "
                    f"offset date-time format string: {raw['TimestampPath']} == {shown}",
                )
            raise StatesError(RUNTIME, f"The Wait '{state.name}' needs an ISO-8601 timestamp")
        return parsed

    def _seconds_path(self, frame: Frame, state: State, data: Any) -> int:
        """A Wait's SecondsPath: a non-negative integer, or States.Runtime in Step Functions'
        words (as LocalStack's AWS-recorded Wait tests word them)."""
        path = state.raw["SecondsPath"]
        try:
            seconds = paths.select(
                path, data, context=self._context(frame, state), variables=frame.variables
            )
        except paths.PathNotFound:
            raise StatesError(
                RUNTIME, f"The SecondsPath parameter does not reference an input value: {path}"
            ) from None
        shown = seconds if isinstance(seconds, str) else dumps(seconds)
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise StatesError(
                RUNTIME,
                f"The SecondsPath parameter cannot be parsed as a long value: {path} == {shown}",
            )
        if seconds < 0:
            raise StatesError(
                RUNTIME,
                f"The SecondsPath parameter references a negative value: {path} == {shown}",
            )
        return seconds

    def _wait_done(self, frame: Frame, state: State) -> _Next:
        output = self._plain_output(frame, state, frame.raw_input)
        data = frame.raw_input
        if state.query_language != JSONATA:
            data = self._path(frame, state, "InputPath", frame.raw_input)
        return _Next(output, state.next, self._assign(frame, state, state.get("Assign"), data))

    def _seconds(self, frame: Frame, state: State, name: str) -> float | None:
        if state.has(f"{name}Path"):
            value = self._path(frame, state, f"{name}Path", frame.raw_input)
        elif state.query_language == JSONATA and jsonata.is_expression(state.get(name)):
            value = self._jsonata(frame, state, state.raw[name], field=name)
        else:
            value = state.get(name)
        if value is not None and (not is_number(value) or value <= 0):
            raise StatesError(RUNTIME, f"The {name} of '{state.name}' must be a positive number")
        return None if value is None else float(value)

    def _task(self, frame: Frame, state: State) -> tuple[Frame, list[Action]]:
        resource = state.raw["Resource"]
        token = None
        if resource.endswith(".waitForTaskToken"):
            token = str(
                _random.Random(
                    f"{self.context.seed}:token:{frame.transitions}:{frame.attempt}"
                ).getrandbits(128)
            )
            frame = replace(frame, token=f"{state.name}-{token}")
        payload = self._effective_input(frame, state)
        timeout = self._seconds(frame, state, "TimeoutSeconds")
        heartbeat = self._seconds(frame, state, "HeartbeatSeconds")
        # *Scheduled and *Started, and TaskSubmitted for a task that waits for its token
        published = 3 if token is not None else 2
        frame = replace(
            frame, effective_input=payload, pending="task", events=frame.events + published
        )
        return frame, [
            RunTask(
                state=state.name,
                visit=frame.visits[state.name],
                attempt=frame.attempt,
                resource=resource,
                payload=payload,
                timeout_seconds=timeout,
                heartbeat_seconds=heartbeat,
                token=frame.token,
            )
        ]

    def _task_done(self, frame: Frame, state: State, result: Any) -> _Next:
        return self._result_output(frame, state, result)

    def _branches(self, frame: Frame, state: State) -> tuple[Frame, list[Action]]:
        effective = self._effective_input(frame, state) if state.type == "Parallel" else None
        if state.type == "Parallel":
            frame = replace(frame, events=frame.events + 1)  # ParallelStateStarted
            action = RunBranches(
                state=state.name,
                kind="Parallel",
                machines=state.branches,
                inputs=tuple(effective for _ in state.branches),
                max_concurrency=0,
                variables=frame.variables,
                events=frame.events,
            )
            return replace(frame, effective_input=effective, pending="branches"), [action]
        if not distributed.is_distributed(state.raw) and any(
            state.has(name) for name in ("ItemReader", "ItemBatcher", "ResultWriter")
        ):
            # Step Functions' words, at run time (the floci emulator's AWS-measured test)
            raise StatesError(
                RUNTIME,
                "The ItemReader, ItemBatcher and ResultWriter fields are not supported for "
                "INLINE maps",
            )
        if state.has("ItemReader"):
            return self._read_items(frame, state)
        return self._start_map(frame, state, *self._map_items(frame, state))

    def _start_map(
        self, frame: Frame, state: State, items: list[Any], infos: list[dict[str, Any]]
    ) -> tuple[Frame, list[Action]]:
        """Run the processor on each input; `infos`: each child's `Map.Item` (a distributed
        Map's children read it in their context object)."""
        concurrency = self._concurrency(frame, state)
        tolerated_count = self._tolerance(frame, state, "ToleratedFailureCount")
        tolerated_percentage = self._tolerance(frame, state, "ToleratedFailurePercentage")
        frame = replace(frame, events=frame.events + 1)  # MapStateStarted
        action = RunBranches(
            state=state.name,
            kind="Map",
            machines=state.branches,
            inputs=tuple(items),
            max_concurrency=concurrency,
            # A distributed Map's children are executions of their own: no outer variables.
            variables={} if distributed.is_distributed(state.raw) else frame.variables,
            tolerated_count=tolerated_count,
            tolerated_percentage=tolerated_percentage,
            events=frame.events,
            items=tuple(infos) if distributed.is_distributed(state.raw) else (),
        )
        # A ResultWriter writes each child's input beside its output: keep them until then.
        kept = {"inputs": list(items)} if state.has("ResultWriter") else None
        return replace(frame, pending="branches", effective_input=kept), [action]

    # -- the distributed Map: ItemReader, ItemBatcher, ResultWriter --

    def _reader_field(
        self, frame: Frame, state: State, holder: Mapping[str, Any], name: str, where: str
    ) -> Any:
        """A field of ItemReader or ItemBatcher: JSONata, a payload template on the state's
        input (after InputPath), or its `<name>Path`."""
        if state.query_language == JSONATA:
            value = holder.get(name)
            return (
                None
                if value is None
                else self._jsonata(frame, state, value, field=f"{where}.{name}")
            )
        data = self._path(frame, state, "InputPath", frame.raw_input)
        if f"{name}Path" in holder:
            try:
                return paths.select(
                    holder[f"{name}Path"],
                    data,
                    context=self._context(frame, state),
                    variables=frame.variables,
                )
            except paths.PathNotFound:
                raise paths.runtime_not_found(holder[f"{name}Path"], name, data) from None
        if name in holder and isinstance(holder[name], dict | list):
            return self._template(frame, state, holder[name], data, f"{where}.{name}")
        return holder.get(name)

    def _read_items(self, frame: Frame, state: State) -> tuple[Frame, list[Action]]:
        """Read the items from S3: an `s3:getObject` Task whose result `_items_read` parses,
        or `s3:listObjectsV2` pages (an `aws-sdk:s3:listObjectsV2` Task per page)."""
        reader = state.raw["ItemReader"]
        arguments = "Arguments" if state.query_language == JSONATA else "Parameters"
        payload = self._reader_field(frame, state, reader, arguments, "ItemReader") or {}
        pending: dict[str, Any] = {"payload": payload, "contents": []}
        return self._read_page(replace(frame, pending="reader", effective_input=pending), state)

    def _read_page(self, frame: Frame, state: State) -> tuple[Frame, list[Action]]:
        reader = state.raw["ItemReader"]
        pending = dict(frame.effective_input)
        payload = pending["payload"]
        resource = reader["Resource"]
        if resource == distributed.LIST_OBJECTS:
            resource = distributed.SDK_LIST_OBJECTS
            if pending.get("token"):
                payload = {**payload, "ContinuationToken": pending["token"]}
        return frame, [
            RunTask(
                state=state.name,
                visit=frame.visits[state.name],
                attempt=frame.attempt,
                resource=resource,
                payload=payload,
                timeout_seconds=None,
                heartbeat_seconds=None,
                token=None,
            )
        ]

    def _items_read(
        self, frame: Frame, state: State, event: TaskFailed | TaskSucceeded
    ) -> tuple[Frame, list[Action]]:
        if isinstance(event, TaskFailed):
            raise StatesError(
                errors.ITEM_READER_FAILED,
                f"The ItemReader could not read its object: {event.error}: {event.cause}",
            )
        reader = state.raw["ItemReader"]
        config = reader.get("ReaderConfig") or {}
        limit = distributed.max_items(
            self._reader_field(frame, state, config, "MaxItems", "ItemReader.ReaderConfig")
        )
        if reader["Resource"] == distributed.LIST_OBJECTS:
            pending = dict(frame.effective_input)
            page = event.output if isinstance(event.output, dict) else {}
            pending["contents"] = [*pending["contents"], *(page.get("Contents") or [])]
            enough = limit is not None and len(pending["contents"]) >= limit
            if page.get("IsTruncated") and page.get("NextContinuationToken") and not enough:
                pending["token"] = page["NextContinuationToken"]
                return self._read_page(replace(frame, effective_input=pending), state)
            objects = distributed.listed(pending["contents"], state.query_language == JSONATA)
            read = [
                {"Index": i, "Value": v}
                for i, v in enumerate(objects[:limit] if limit else objects)
            ]
        else:
            read = distributed.entries(event.output, config, limit)
        frame = replace(frame, effective_input=None)
        return self._start_map(frame, state, *self._map_items(frame, state, read))

    def _batched(self, frame: Frame, state: State, items: list[Any]) -> list[Any]:
        batcher = state.raw["ItemBatcher"]
        most = self._reader_field(frame, state, batcher, "MaxItemsPerBatch", "ItemBatcher")
        size = self._reader_field(frame, state, batcher, "MaxInputBytesPerBatch", "ItemBatcher")
        given = self._reader_field(frame, state, batcher, "BatchInput", "ItemBatcher")
        return list(
            distributed.batches(
                items,
                int(most) if is_number(most) else None,
                int(size) if is_number(size) else None,
                given,
                "BatchInput" in batcher,
            )
        )

    def _write_results(
        self,
        frame: Frame,
        state: State,
        outcomes: Sequence[BranchOutcome],
        outputs: list[Any],
        now: _dt.datetime,
    ) -> tuple[Frame, list[Action]]:
        """A ResultWriter: the children's results written to S3 (one `s3:putObject` Task per
        file, the manifest last); the Map's result is where they are. Without a Resource
        (WriterConfig alone) nothing is written and the result is the transformed outputs."""
        writer = state.raw["ResultWriter"]
        config = writer.get("WriterConfig") or {}
        transformation = config.get("Transformation", "NONE")
        if "Resource" not in writer:
            frame = replace(frame, events=frame.events + 1)  # MapStateSucceeded
            result = distributed.flattened(outputs) if transformation == "FLATTEN" else outputs
            return self._finish(frame, state, self._task_done(frame, state, result), now)
        arguments = "Arguments" if state.query_language == JSONATA else "Parameters"
        where = f"ResultWriter/{arguments}"
        if state.query_language == JSONATA:
            target = self._jsonata(frame, state, writer.get(arguments, {}), field=where)
        else:
            data = self._path(frame, state, "InputPath", frame.raw_input)
            target = self._template(frame, state, writer.get(arguments, {}), data, where)
        if not isinstance(target, dict) or not isinstance(target.get("Bucket"), str):
            raise StatesError(
                errors.RESULT_WRITER_FAILED, "The ResultWriter's Bucket must resolve to a string"
            )
        prefix = target.get("Prefix", "")
        if not isinstance(prefix, str):
            raise StatesError(
                errors.RESULT_WRITER_FAILED, "The ResultWriter's Prefix must resolve to a string"
            )
        run_id = str(_uuid_from(self._rng(frame, "map-run")))
        label = state.get("Label", state.name)
        map_run = distributed.map_run_arn(self.context.state_machine_id, label, run_id)
        inputs = self._map_inputs_for_writer(frame, state, len(outcomes))
        files, written = distributed.result_files(
            target["Bucket"],
            prefix,
            run_id,
            map_run,
            distributed.child_arns(self.context.state_machine_id, label),
            [
                (inputs[i] if i < len(inputs) else None, o.output, o.failed, o.error, o.cause)
                for i, o in enumerate(outcomes)
            ],
            frame.entered_time,
            transformation,
            config.get("OutputType", "JSON"),
        )
        pending = {"bucket": target["Bucket"], "files": files, "result": written}
        return self._write_next(replace(frame, pending="writer", effective_input=pending), state)

    def _map_inputs_for_writer(self, frame: Frame, state: State, count: int) -> list[Any]:
        stored = frame.effective_input
        if isinstance(stored, dict) and isinstance(stored.get("inputs"), list):
            return list(stored["inputs"])
        return [None] * count

    def _write_next(self, frame: Frame, state: State) -> tuple[Frame, list[Action]]:
        pending = dict(frame.effective_input)
        key, body = pending["files"][0]
        return frame, [
            RunTask(
                state=state.name,
                visit=frame.visits[state.name],
                attempt=frame.attempt,
                resource=state.raw["ResultWriter"]["Resource"],
                payload={"Bucket": pending["bucket"], "Key": key, "Body": body},
                timeout_seconds=None,
                heartbeat_seconds=None,
                token=None,
            )
        ]

    def _written(
        self, frame: Frame, state: State, event: TaskFailed | TaskSucceeded, now: _dt.datetime
    ) -> tuple[Frame, list[Action]]:
        if isinstance(event, TaskFailed):
            raise StatesError(
                errors.RESULT_WRITER_FAILED,
                f"The ResultWriter could not write its results: {event.error}: {event.cause}",
            )
        pending = dict(frame.effective_input)
        pending["files"] = pending["files"][1:]
        frame = replace(frame, effective_input=pending)
        if pending["files"]:
            return self._write_next(frame, state)
        frame = replace(frame, events=frame.events + 1)  # MapStateSucceeded
        return self._finish(frame, state, self._task_done(frame, state, pending["result"]), now)

    def _map_items(
        self, frame: Frame, state: State, read: list[dict[str, Any]] | None = None
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """The children's inputs (after ItemSelector and ItemBatcher) and each one's Map.Item
        (none for batches)."""
        items, infos = self._selected_items(frame, state, read)
        if state.has("ItemBatcher"):
            return self._batched(frame, state, items), []
        return items, infos

    def _selected_items(
        self, frame: Frame, state: State, read: list[dict[str, Any]] | None
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        infos: list[dict[str, Any]] | None = None
        if read is not None:
            infos = read
            items: Any = [distributed.child_input(entry) for entry in read]
            data = (
                frame.raw_input
                if state.query_language == JSONATA
                else self._path(frame, state, "InputPath", frame.raw_input)
            )
        elif state.query_language == JSONATA:
            items = (
                self._jsonata(frame, state, state.raw["Items"], field="Items")
                if state.has("Items")
                else frame.raw_input
            )
            data = frame.raw_input
        else:
            data = self._path(frame, state, "InputPath", frame.raw_input)
            items = self._path(frame, state, "ItemsPath", data)
        if not isinstance(items, list):
            if state.query_language == JSONATA and jsonata.is_expression(state.get("Items")):
                # Step Functions' words (as LocalStack's AWS-validated Map writes them)
                expression = state.raw["Items"][2:-2].strip()
                kind = (
                    "null"
                    if items is None
                    else "boolean"
                    if isinstance(items, bool)
                    else "number"
                    if is_number(items)
                    else "string"
                    if isinstance(items, str)
                    else "object"
                )
                raise StatesError(
                    errors.QUERY_EVALUATION_ERROR,
                    f"The JSONata expression '{expression}' specified for the field 'Items' "
                    f"returned an unexpected result type. Expected 'array', but was '{kind}' "
                    f"for value: {dumps(items)}",
                )
            raise StatesError(
                RUNTIME,
                f"The Map '{state.name}' needs an array of items, got {dumps(items)}",
            )
        if infos is None:
            infos = [{"Index": index, "Value": item} for index, item in enumerate(items)]
        selector = state.get("ItemSelector", state.get("Parameters"))
        if selector is None:
            return items, infos
        out = []
        for info in infos:
            ctx = self._context(frame, state)
            ctx["Map"] = {"Item": dict(info)}
            if state.query_language == JSONATA:
                states = {"input": frame.raw_input, "context": ctx}
                out.append(
                    jsonata.render(
                        selector, states, frame.variables, self._rng(frame), "ItemSelector"
                    )
                )
            else:
                out.append(
                    templates.render(
                        selector,
                        data,
                        context=ctx,
                        variables=frame.variables,
                        rng=self._rng(frame),
                        field="ItemSelector",
                    )
                )
        return out, infos

    def _concurrency(self, frame: Frame, state: State) -> int:
        if state.has("MaxConcurrencyPath"):
            value = self._path(frame, state, "MaxConcurrencyPath", frame.raw_input)
        elif state.query_language == JSONATA and jsonata.is_expression(state.get("MaxConcurrency")):
            value = self._jsonata(frame, state, state.raw["MaxConcurrency"], field="MaxConcurrency")
        else:
            value = state.get("MaxConcurrency", 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise StatesError(RUNTIME, f"MaxConcurrency of '{state.name}' must be an integer >= 0")
        return value

    def _tolerance(self, frame: Frame, state: State, name: str) -> Any:
        if state.has(f"{name}Path"):
            return self._path(frame, state, f"{name}Path", frame.raw_input)
        if state.query_language == JSONATA and jsonata.is_expression(state.get(name)):
            return self._jsonata(frame, state, state.raw[name], field=name)
        return state.get(name)

    def _branches_done(
        self, frame: Frame, state: State, outcomes: Sequence[BranchOutcome]
    ) -> list[Any]:
        failed = [o for o in outcomes if o.failed]
        if state.type == "Map" and failed and self._tolerates(state, frame, len(failed), outcomes):
            if distributed.is_distributed(state.raw):
                # A tolerated failed child leaves no result (the floci emulator's AWS-measured
                # tests); a ResultWriter still lists it in FAILED_0.json.
                return [o.output for o in outcomes if not o.failed]
            return [
                o.output if not o.failed else errors.error_output(o.error or "", o.cause or "")
                for o in outcomes
            ]
        if failed:
            first = failed[0]
            if state.type == "Map" and any(
                state.has(f"ToleratedFailure{kind}{path}")
                for kind in ("Count", "Percentage")
                for path in ("", "Path")
            ):
                raise StatesError(errors.EXCEED_TOLERATED_FAILURE_THRESHOLD, EXCEEDED)
            raise StatesError(
                first.error or errors.BRANCH_FAILED, first.cause or "", passed_on=True
            )
        return [o.output for o in outcomes]

    def _tolerates(
        self, state: State, frame: Frame, failures: int, outcomes: Sequence[BranchOutcome]
    ) -> bool:
        count = self._tolerance(frame, state, "ToleratedFailureCount")
        percentage = self._tolerance(frame, state, "ToleratedFailurePercentage")
        if count is None and percentage is None:
            return False
        ok_count = count is not None and failures <= count
        ok_share = percentage is not None and 100.0 * failures / len(outcomes) <= percentage
        return ok_count or ok_share

    # -- errors: Retry, then Catch, then the frame fails --

    def _error(
        self, frame: Frame, state: State, exc: StatesError, now: _dt.datetime
    ) -> tuple[Frame, list[Action]]:
        if not exc.passed_on and exc.error == errors.QUERY_EVALUATION_ERROR:
            frame = replace(frame, events=frame.events + 1)  # EvaluationFailed
        exc = errors.located(exc, state.name, frame.entered_event)
        if state.type not in ("Task", "Parallel", "Map") or exc.error in errors.TERMINAL:
            return replace(frame, pending=""), [Failed(exc.error, exc.cause)]
        index = errors.pick_retrier(state.retriers, exc.error)
        if index is not None and frame.retries[index] < state.retriers[index].max_attempts:
            retrier = state.retriers[index]
            done = frame.retries[index]
            delay = errors.retry_delay(retrier, done, self._rng(frame, "jitter").random())
            retries = tuple(n + 1 if i == index else n for i, n in enumerate(frame.retries))
            frame = replace(frame, retries=retries, pending="retry")
            return frame, [StartWait(now + _dt.timedelta(seconds=delay), retry=True)]
        if state.type in ("Parallel", "Map"):
            # ParallelStateFailed/MapStateFailed, once the error is not retried (a retried
            # attempt is followed by the next *StateStarted, as AWS's history shows)
            frame = replace(frame, events=frame.events + 1)
        for catcher in state.catchers:
            if errors.matches(catcher.error_equals, exc.error):
                return self._catch(frame, state, catcher, exc, now)
        return replace(frame, pending=""), [Failed(exc.error, exc.cause)]

    def _catch(
        self,
        frame: Frame,
        state: State,
        catcher: Any,
        exc: StatesError,
        now: _dt.datetime,
    ) -> tuple[Frame, list[Action]]:
        error_output = errors.error_output(exc.error, exc.cause)
        where = f"Catch[{list(state.catchers).index(catcher)}]"
        try:
            if state.query_language == JSONATA:
                output = (
                    self._jsonata(
                        frame,
                        state,
                        catcher.output,
                        field=f"{where}/Output",
                        errorOutput=error_output,
                    )
                    if catcher.has_output
                    else error_output
                )
                assign = (
                    self._jsonata(
                        frame,
                        state,
                        catcher.assign,
                        field=f"{where}/Assign",
                        errorOutput=error_output,
                    )
                    if catcher.assign is not None
                    else {}
                )
            else:
                assign = self._assign(frame, state, catcher.assign, error_output)
                output = paths.put(catcher.result_path, frame.raw_input, error_output)
        except StatesError as inner:
            inner = errors.located(inner, state.name, frame.entered_event)
            return replace(frame, pending=""), [Failed(inner.error, inner.cause)]
        frame = replace(frame, own={**frame.own, **assign}, pending="", events=frame.events + 1)
        self._trail.append(Exited(state.name, output))
        return self._enter(frame, catcher.next, output, now)
