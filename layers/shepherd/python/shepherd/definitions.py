"""Workflow definitions: data validated by pydantic, one source for runtime, CDK and local stack.

Field names follow Amazon States Language where the meaning is the same. A definition is
identified by its name and by the content hash of its canonical JSON, which every workflow
records at start so it runs to the end on that version.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import fastjsonschema
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from shepherd import fanout, limits, schedules
from shepherd.decisions.choice import PATH as CONDITION_PATH
from shepherd.decisions.choice import Condition, step_of
from shepherd.errors import DefinitionError
from shepherd.suggest import did_you_mean

NAME = r"^[a-z][a-z0-9_]{0,63}$"
LAMBDA_POOL = "asl"  # the pool of an ASL machine's Lambda tasks when the project names none
POOL = r"^[a-z][a-z0-9-]{0,31}$"
INPUT_PATH = r"^\$\.input(?:\[\d{1,6}\])*(?:\.[A-Za-z_][A-Za-z0-9_-]*(?:\[\d{1,6}\])*){0,32}$"
ONE_YEAR = 366 * 24 * 3600
MAX_SQS_DELAY = 900
VARIABLE = r"^[A-Za-z_][A-Za-z0-9_]{0,79}$"  # an `Assign` variable's name


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RetryPolicy(_Model):
    """When and how often a failed attempt is retried (ASL `Retry` semantics).

    `MaxAttempts` counts retries after the first attempt, as in ASL: 0 never retries.
    """

    max_attempts: Annotated[int, Field(alias="MaxAttempts", ge=0, le=100)] = 3
    interval_seconds: Annotated[float, Field(alias="IntervalSeconds", ge=0, le=86_400)] = 1.0
    backoff_rate: Annotated[float, Field(alias="BackoffRate", ge=1.0, le=10.0)] = 2.0
    max_delay_seconds: Annotated[
        float | None, Field(alias="MaxDelaySeconds", gt=0, le=ONE_YEAR)
    ] = None
    jitter_strategy: Annotated[Literal["FULL", "NONE"], Field(alias="JitterStrategy")] = "NONE"
    non_retryable_errors: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=128)], ...],
        Field(alias="NonRetryableErrors", max_length=50),
    ] = ()


class TaskSpec(_Model):
    """What runs an attempt and how long it may take; shared by steps and compensations."""

    agent: Annotated[str, Field(alias="Agent", pattern=NAME)]
    pool: Annotated[str, Field(alias="Pool", pattern=POOL)]
    timeout_seconds: Annotated[int, Field(alias="TimeoutSeconds", ge=1, le=ONE_YEAR)]
    # At least 2 s: heartbeats are written at most once a second, so a 1 s lease has no margin.
    heartbeat_seconds: Annotated[int | None, Field(alias="HeartbeatSeconds", ge=2)] = None
    retry: Annotated[RetryPolicy, Field(alias="Retry")] = RetryPolicy()

    @model_validator(mode="after")
    def _heartbeat_below_timeout(self) -> TaskSpec:
        if self.timeout_seconds is None:  # a Wait step: `StepSpec._kind_fields` says why
            return self
        if self.heartbeat_seconds is not None and self.heartbeat_seconds >= self.timeout_seconds:
            raise ValueError(
                f"HeartbeatSeconds ({self.heartbeat_seconds}) must be less than "
                f"TimeoutSeconds ({self.timeout_seconds})"
            )
        return self

    @property
    def liveness_seconds(self) -> int:
        """The soonest a claimed attempt can become overdue."""
        return min(self.heartbeat_seconds or self.timeout_seconds, self.timeout_seconds)


OnFailure = Literal["COMPENSATE", "PAUSE"]


class CompensationSpec(TaskSpec):
    """The undo of a step: its own agent, pool, timeouts and retry policy.

    `When: ATTEMPTED` (the default) undoes the step if it was claimed at least once (any
    attempt may have acted); `SUCCEEDED` only after a recorded success.
    """

    when: Annotated[Literal["ATTEMPTED", "SUCCEEDED"], Field(alias="When")] = "ATTEMPTED"


class WaitSpec(_Model):
    """A Wait step's time: `Seconds` after it became ready, an ISO 8601 `Until`, the
    timestamp at `UntilPath` or the seconds at `SecondsPath` (in the input or a dependency's
    output, issue 42.5). Exactly one; at most a year away."""

    seconds: Annotated[int | None, Field(alias="Seconds", ge=0, le=ONE_YEAR)] = None
    until: Annotated[AwareDatetime | None, Field(alias="Until")] = None
    until_path: Annotated[
        str | None, Field(alias="UntilPath", pattern=CONDITION_PATH, max_length=512)
    ] = None
    seconds_path: Annotated[
        str | None, Field(alias="SecondsPath", pattern=CONDITION_PATH, max_length=512)
    ] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> WaitSpec:
        given = [
            alias
            for alias, value in (
                ("Seconds", self.seconds),
                ("Until", self.until),
                ("UntilPath", self.until_path),
                ("SecondsPath", self.seconds_path),
            )
            if value is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "a Wait has exactly one of Seconds, Until, UntilPath, SecondsPath "
                f"(got {', '.join(given) or 'none'})"
            )
        return self


class ApprovalSpec(_Model):
    """An Approval step: it rests until a person answers (`POST .../approve|reject`) or
    `TimeoutSeconds` pass (`ApprovalTimedOut`). `Approvers` may answer besides the workflow's
    owner: IAM principal ARNs deployed, caller names locally."""

    timeout_seconds: Annotated[int, Field(alias="TimeoutSeconds", ge=1, le=ONE_YEAR)]
    approvers: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=limits.MAX_PRINCIPAL_CHARS)], ...],
        Field(alias="Approvers", max_length=limits.MAX_APPROVERS),
    ] = ()

    @field_validator("approvers")
    @classmethod
    def _can_match(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, approver in enumerate(value):
            why = never_matches(approver)
            if why is not None:
                raise ValueError(f"Approvers[{i}]: '{approver:.80}' can never answer: {why}")
        return value


# A session of a role (`arn:aws:sts::<account>:assumed-role/<Role>/<session>`) and a role ARN
# with a path: the caller identity a request carries is mapped to `...:iam::<account>:role/
# <Role>` (no path, no session; shepherd_handlers.runtime.owner_from_arn), so neither is ever a
# caller, and an approver is compared exactly (no wildcards).
_SESSION_ARN = re.compile(r"arn:aws[\w-]*:sts::(\d{12}):assumed-role/([^/]+)/.*")
_ROLE_WITH_PATH = re.compile(r"arn:aws[\w-]*:iam::(\d{12}):role/(?:[^/]+/)+([^/]+)")


def never_matches(approver: str) -> str | None:
    """Why no caller can ever be `approver` (None: one can). Approvers are compared exactly
    with the caller's principal, so these would pass validation and silently match nobody."""
    if any(ch in approver for ch in "*?"):
        return "approvers are compared exactly, with no wildcards"
    if approver != approver.strip() or any(ch.isspace() for ch in approver):
        return "it contains white space"
    session = _SESSION_ARN.fullmatch(approver)
    if session is not None:
        account, role = session.groups()
        return f"a role's sessions answer as the role: write arn:aws:iam::{account}:role/{role}"
    with_path = _ROLE_WITH_PATH.fullmatch(approver)
    if with_path is not None:
        account, role = with_path.groups()
        return (
            "a role's callers are known by its name without its path: write "
            f"arn:aws:iam::{account}:role/{role}"
        )
    return None


SIGNAL_NAME = limits.SIGNAL_NAME  # a signal's name (a URL path segment)


class WaitForSignalSpec(_Model):
    """A WaitForSignal step: it rests until a signal of `Name` is sent to its workflow
    (`POST /workflows/{id}/signals/{name}`), taking the oldest one kept if some came first,
    its output the signal's payload; or fails with `States.Timeout` after `TimeoutSeconds`
    (engine/signals.py)."""

    name: Annotated[str, Field(alias="Name", pattern=SIGNAL_NAME)]
    timeout_seconds: Annotated[int, Field(alias="TimeoutSeconds", ge=1, le=ONE_YEAR)]
    # A correlation by business key: field -> a `$.input...` path. The values it selects at the
    # start are indexed, so `POST /signals` naming them reaches this workflow (issue 37.3).
    match: Annotated[
        dict[
            Annotated[str, Field(pattern=limits.TAG_KEY)],
            Annotated[str, Field(min_length=1, max_length=fanout.MAX_PATH_CHARS)],
        ]
        | None,
        Field(alias="Match", min_length=1, max_length=limits.MAX_MATCH_FIELDS),
    ] = None
    # What its timeout does: FAIL (the default: States.Timeout, the workflow unwinds or
    # pauses), or CONTINUE: it succeeds with `{"timed_out": true}`, so a `Condition` on its
    # output picks a branch for the timer and one for the signal (native definitions have no
    # Catch; issue 37.2).
    on_timeout: Annotated[Literal["FAIL", "CONTINUE"] | None, Field(alias="OnTimeout")] = None

    @field_validator("match")
    @classmethod
    def _input_paths(cls, match: dict[str, str] | None) -> dict[str, str] | None:
        """Each matched value is a path into the workflow's input: known at its start, when
        the correlation is indexed (a step's output is not there yet)."""
        for field, text in (match or {}).items():
            try:
                path = fanout.parse_path(text)
            except fanout.PathError as exc:
                raise ValueError(f"Match.{field}: {exc}") from None
            if path.step is not None:
                raise ValueError(
                    f"Match.{field}: {text!r} must be a path into the input ($.input...): "
                    "a correlation is indexed when the workflow starts"
                )
        return match


class RepeatSpec(_Model):
    """A step that runs again until a rule holds (issue 42.5, decisions/repeat.py): after each
    iteration, `Until` (the rule language of `Condition`) is evaluated on the workflow input
    and the iteration's output (`$.steps.<this step>.output`); when it holds the step
    succeeds with that output, else the next iteration runs `IntervalSeconds` later (resting,
    with no message and no Lambda). `MaxIterations` iterations without `Until` holding fail
    the step for good with `States.LoopLimitExceeded`."""

    until: Annotated[Condition, Field(alias="Until")]
    interval_seconds: Annotated[
        int, Field(alias="IntervalSeconds", ge=0, le=limits.MAX_REPEAT_INTERVAL_SECONDS)
    ] = 0
    max_iterations: Annotated[
        int, Field(alias="MaxIterations", ge=1, le=limits.MAX_REPEAT_ITERATIONS)
    ]


class PassSpec(_Model):
    """A Pass step (`kinds/pass_step.py`): it runs no Lambda and sends no message; it
    succeeds in the write that finds it ready, its output its `Result` (any JSON; absent:
    null)."""

    result: Annotated[Any, Field(alias="Result")] = None


_ABSENT_WHEN_NONE = (
    "Repeat",
    "Pass",
    "Arguments",
    "Output",
    "Assign",
    "Detached",
    "Condition",
    "Wait",
    "Approval",
    "WaitForSignal",
    "Agent",
    "Pool",
    "TimeoutSeconds",
)
_RESTING = ("Wait", "Approval", "WaitForSignal")  # the step kinds that rest, running nothing
_NO_TASK = (*_RESTING, "Pass")  # the step kinds that run nothing (no task field)
_TASK_ONLY = ("Agent", "Pool", "TimeoutSeconds", "HeartbeatSeconds", "Retry", "Compensation")


class StepSpec(TaskSpec):
    """One step of a definition: a task that runs after the steps it `DependsOn`, with an
    optional `Compensation` that undoes it when the workflow unwinds."""

    name: Annotated[str, Field(alias="Name", pattern=NAME)]
    # A task step names all three; a Wait step none (`_kind_fields`). Typed as TaskSpec's for
    # the code that runs tasks: it only ever gets task steps (`Definition.tasks`, `spec`).
    agent: Annotated[str, Field(alias="Agent", pattern=NAME)] = None  # type: ignore[assignment]
    pool: Annotated[str, Field(alias="Pool", pattern=POOL)] = None  # type: ignore[assignment]
    timeout_seconds: Annotated[int, Field(alias="TimeoutSeconds", ge=1, le=ONE_YEAR)] = None  # type: ignore[assignment]
    depends_on: Annotated[tuple[str, ...], Field(alias="DependsOn", max_length=100)] = ()
    compensation: Annotated[CompensationSpec | None, Field(alias="Compensation")] = None
    comment: Annotated[str | None, Field(alias="Comment", max_length=1000)] = None
    # What this step failing for good does to the workflow (default: the definition's).
    on_failure: Annotated[OnFailure | None, Field(alias="OnFailure")] = None
    # Issue 24 (shepherd.fanout): a child workflow instead of Agent/Pool, a fan-out over
    # items, and where the step's input comes from.
    workflow: Annotated[str | None, Field(alias="Workflow", pattern=NAME)] = None
    # A child-workflow step that starts its child and goes on (Step Functions'
    # `startExecution` without `.sync`, issue 37.6): its output is the child's id; the child
    # is listed with its parent but neither waited for, cancelled nor compensated with it.
    detached: Annotated[bool | None, Field(alias="Detached")] = None
    map: Annotated[fanout.MapSpec | None, Field(alias="Map")] = None
    input_path: Annotated[
        str | None, Field(alias="InputPath", min_length=1, max_length=fanout.MAX_PATH_CHARS)
    ] = None
    # Runs only if this holds when its dependencies are done; else SKIPPED (choice.py).
    condition: Annotated[Condition | None, Field(alias="Condition")] = None
    # Instead of Agent/Pool: rest until a time, with no Lambda running (decisions/waits.py).
    wait: Annotated[WaitSpec | None, Field(alias="Wait")] = None
    # Instead of Agent/Pool: rest until a person answers (engine/approvals.py).
    approval: Annotated[ApprovalSpec | None, Field(alias="Approval")] = None
    # Instead of Agent/Pool: rest until a signal of its name comes (engine/signals.py).
    wait_for_signal: Annotated[WaitForSignalSpec | None, Field(alias="WaitForSignal")] = None
    # A task or child-workflow step that runs again until a rule holds (decisions/repeat.py).
    repeat: Annotated[RepeatSpec | None, Field(alias="Repeat")] = None

    # Instead of Agent/Pool: succeed at once with a fixed output, running nothing.
    pass_: Annotated[PassSpec | None, Field(alias="Pass")] = None
    # JSONata data expressions (issue 42.5, shepherd/expressions.py): the input an agent gets
    # (a Pass step's output), and what is stored as the output.
    arguments: Annotated[Any, Field(alias="Arguments")] = None
    output: Annotated[Any, Field(alias="Output")] = None
    # Variables its descendants' expressions read (`$name`), set with its result.
    assign: Annotated[
        dict[Annotated[str, Field(pattern=VARIABLE)], Any] | None,
        Field(alias="Assign", min_length=1, max_length=100),
    ] = None

    @model_validator(mode="wrap")
    @classmethod
    def _task_fields_required(cls, data: Any, handler: Any) -> Any:
        """A step without `Wait` is a task step: its Agent, Pool and TimeoutSeconds are
        required, reported as pydantic reports any missing field, beside the step's other
        mistakes (one line each), not instead of them."""
        missing: list[Any] = []
        if isinstance(data, dict) and not any(kind in data for kind in _NO_TASK):
            # A child-workflow step names no Agent or Pool; its TimeoutSeconds bounds the wait.
            needed = (
                ("TimeoutSeconds",) if "Workflow" in data else ("Agent", "Pool", "TimeoutSeconds")
            )
            missing = [
                {"type": "missing", "loc": (alias,), "input": data}
                for alias in needed
                if alias not in data
            ]
        try:
            result = handler(data)
        except ValidationError as exc:
            if not missing:
                raise
            others = [
                {k: e[k] for k in ("type", "loc", "input", "ctx") if k in e} for e in exc.errors()
            ]
            raise ValidationError.from_exception_data(cls.__name__, missing + others) from None
        if missing:
            raise ValidationError.from_exception_data(cls.__name__, missing)
        return result

    @model_validator(mode="after")
    def _kind_fields(self) -> StepSpec:
        """A Wait, an Approval or a WaitForSignal step names none of a task's fields (nothing
        runs, so nothing can time out, retry or need undoing); a task step's are required
        (`_task_fields_required`)."""
        kinds = [
            kind
            for kind, spec in (
                ("a Wait", self.wait),
                ("an Approval", self.approval),
                ("a WaitForSignal", self.wait_for_signal),
                ("a Pass", self.pass_),
            )
            if spec is not None
        ]
        if len(kinds) > 1:
            raise ValueError(f"a step is {' or '.join(kinds)}, not both")
        kind = kinds[0] if kinds else None
        if kind is not None:
            given = [
                a
                for a in (*_TASK_ONLY, "Workflow", "Map", "Repeat")
                if _alias_field(a) in self.model_fields_set
            ]
            if given:
                raise ValueError(f"{kind} step names no {', '.join(given)}")
        return self

    @model_validator(mode="after")
    def _detached_child(self) -> StepSpec:
        """`Detached` is a child-workflow step's (one child, not a map of them)."""
        if self.detached is not None and (self.workflow is None or self.map is not None):
            raise ValueError("Detached is for a child-workflow step (Workflow, without Map)")
        return self

    @model_validator(mode="after")
    def _repeat_fields(self) -> StepSpec:
        """`Repeat` is a task step's or a child-workflow step's (not a Map's, not a detached
        child's), and its `Until` reads only the workflow input and the step's own output."""
        if self.repeat is None:
            return self
        given = [a for a in ("Map", "Detached") if _alias_field(a) in self.model_fields_set]
        if given:
            raise ValueError(
                f"Repeat: a step with {given[0]} cannot repeat (a task step or a child-workflow "
                "step that waits for its child can; a map: repeat a step inside its items)"
            )
        for path in self.repeat.until.variables():
            read = step_of(path)
            if read is not None and read != self.name:
                raise ValueError(
                    f"Repeat.Until: '{path}' reads step '{read}'; Until reads only the input "
                    f"($.input...) and this step's own output ($.steps.{self.name}.output...)"
                )
        return self

    @property
    def is_task(self) -> bool:
        """Not a Wait, an Approval or a WaitForSignal: sent to an agent pool (or, with
        `Workflow`, run as a child workflow)."""
        return (
            self.wait is None
            and self.approval is None
            and self.wait_for_signal is None
            and self.pass_ is None
        )

    @property
    def runs_agent(self) -> bool:
        """A task step that runs an agent (Agent and Pool), not a child-workflow step."""
        return self.is_task and self.workflow is None


def _repeat_term(spec: StepSpec) -> tuple[int, ...]:
    """A `Repeat` step's iteration ending rests its next one `IntervalSeconds` unsent: the
    soonest deadline that write creates (with no interval its message is sent, and the
    dispatch grace counts it)."""
    if spec.repeat is None or spec.repeat.interval_seconds == 0:
        return ()
    return (spec.repeat.interval_seconds,)


# Fields of a kind's own spec left out when unset (as before they existed: the same version).
_INNER_WHEN_NONE = (("WaitForSignal", ("Match", "OnTimeout")), ("Wait", ("SecondsPath",)))


def _as_before(step: dict[str, Any]) -> None:
    """A step's canonical JSON: fields a step kind does not use are left out, so a definition
    that uses none of the newer fields keeps the hash (the version) it had before they
    existed."""
    for key in _ABSENT_WHEN_NONE:
        if step.get(key, 0) is None:
            del step[key]
    for kind, keys in _INNER_WHEN_NONE:
        inner = step.get(kind)
        for key in keys:
            if isinstance(inner, dict) and inner.get(key, 0) is None:
                del inner[key]
    if any(step.get(kind) is not None for kind in _NO_TASK):
        for key in _TASK_ONLY:  # a task's fields (their defaults): not this kind's
            step.pop(key, None)


def _alias_field(alias: str) -> str:
    return next(n for n, f in StepSpec.model_fields.items() if f.alias == alias)


SCHEDULE_NAME = r"^[A-Za-z0-9_.-]{1,64}$"


class ScheduleSpec(_Model):
    """A start on a clock: EventBridge Scheduler's `cron(...)`, `rate(...)` or `at(...)` in an
    IANA time zone, with the input each start gets (shepherd/schedules.py)."""

    name: Annotated[str, Field(alias="Name", pattern=SCHEDULE_NAME)]
    expression: Annotated[str, Field(alias="Expression", max_length=256)]
    timezone: Annotated[str, Field(alias="Timezone", max_length=64)] = "UTC"
    input: Annotated[Any, Field(alias="Input")] = None
    enabled: Annotated[bool, Field(alias="Enabled", strict=True)] = True

    @field_validator("expression")
    @classmethod
    def _expression(cls, value: str) -> str:
        schedules.parse(value)  # ScheduleError is a ValueError: it names what is wrong
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        schedules.zone(value)
        return value

    @model_validator(mode="after")
    def _computable(self) -> ScheduleSpec:
        """Every firing the expression can produce in its zone is an instant Shepherd (the
        list route, a resume, the local clock) can compute: refused here, not at the read."""
        try:
            schedules.check(self.expression, self.timezone)
        except schedules.ScheduleError as exc:
            raise ValueError(f"Expression: {exc}") from None
        return self


class Definition(_Model):
    """A workflow type: a DAG of steps."""

    name: Annotated[str, Field(alias="Name", pattern=NAME)]
    comment: Annotated[str | None, Field(alias="Comment", max_length=2000)] = None
    input_schema: Annotated[dict[str, Any] | None, Field(alias="InputSchema")] = None
    dispatch_timeout_seconds: Annotated[
        int, Field(alias="DispatchTimeoutSeconds", ge=1, le=43_200)
    ] = 60
    # A step failing for good unwinds the workflow (COMPENSATE) or pauses it for an operator.
    on_failure: Annotated[OnFailure, Field(alias="OnFailure")] = "COMPENSATE"
    # A workflow left PAUSED this long is unwound as if an operator had given up.
    pause_timeout_seconds: Annotated[
        int | None, Field(alias="PauseTimeoutSeconds", ge=1, le=ONE_YEAR)
    ] = None
    # A workflow not ended this long after its start fails with States.Timeout, then
    # unwinds or pauses by OnFailure (decisions/workflow_timeout.py).
    timeout_seconds: Annotated[int | None, Field(alias="TimeoutSeconds", ge=1, le=ONE_YEAR)] = None
    # REVERSE: one compensation at a time; PARALLEL: independent branches at once.
    compensation_order: Annotated[
        Literal["REVERSE", "PARALLEL"], Field(alias="CompensationOrder")
    ] = "REVERSE"
    # A native definition has at least one step (`_check_graph`); an Amazon States Language
    # one (`StateMachine`) has none: its machine says what runs (shepherd.asl.workflow).
    steps: Annotated[tuple[StepSpec, ...], Field(alias="Steps", max_length=90)]
    # Starts on a clock (EventBridge Scheduler deployed; `shepherd local`'s own clock).
    schedules: Annotated[
        tuple[ScheduleSpec, ...], Field(alias="Schedules", max_length=limits.MAX_SCHEDULES)
    ] = ()
    # Who may send its workflows signals besides their owner, matched as an Approval's
    # `Approvers` are: IAM principal ARNs deployed, caller names locally (engine/signals.py).
    signal_senders: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=limits.MAX_PRINCIPAL_CHARS)], ...],
        Field(alias="SignalSenders", max_length=limits.MAX_APPROVERS),
    ] = ()
    # An Amazon States Language state machine (`<name>.asl.json`): its document as written,
    # and the pools its Lambda tasks' agents run in (the project's settings; none: one
    # default pool). Set by the loader, never written in a native file (shepherd.asl.workflow).
    state_machine: Annotated[dict[str, Any] | None, Field(alias="StateMachine")] = None
    lambda_pool: Annotated[str, Field(alias="LambdaPool", pattern=POOL)] = LAMBDA_POOL
    lambda_pools: Annotated[dict[str, str], Field(alias="LambdaPools")] = {}

    @model_validator(mode="after")
    def _check_body(self) -> Definition:
        """A state machine's definition holds its document and no Steps; a native one has
        at least one step."""
        if self.state_machine is not None:
            if self.steps:
                raise ValueError("Steps: a state machine's definition has no Steps")
            self.machine  # noqa: B018 - validates the document (errors name state and field)
        elif not self.steps:
            raise ValueError("Steps: must have at least 1 step")
        return self

    @model_validator(mode="after")
    def _check_graph(self) -> Definition:
        seen: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            if step.name in seen:
                raise ValueError(
                    f"Steps[{i}].Name: duplicate step name '{step.name}' "
                    f"(also Steps[{seen[step.name]}])"
                )
            seen[step.name] = i
        for i, step in enumerate(self.steps):
            for dep in step.depends_on:
                if dep not in seen:
                    raise ValueError(
                        f"Steps[{i}] ({step.name}).DependsOn: unknown step '{dep}'"
                        + did_you_mean(dep, seen)
                    )
                if dep == step.name:
                    raise ValueError(f"Steps[{i}] ({step.name}).DependsOn: depends on itself")
            if len(set(step.depends_on)) != len(step.depends_on):
                raise ValueError(f"Steps[{i}] ({step.name}).DependsOn: lists a step twice")
        for i, step in enumerate(self.steps):
            _check_condition_reads(i, step)
            _check_wait_reads(i, step)
            _check_expressions(i, step)
        cycle = _find_cycle({s.name: s.depends_on for s in self.steps})
        if cycle:
            raise ValueError("Steps: dependency cycle " + " -> ".join(cycle))
        fanout.check_steps(self.steps)
        self._check_assigns()
        if self.input_schema is not None:
            try:
                fastjsonschema.compile(self.input_schema)
            except fastjsonschema.JsonSchemaDefinitionException as exc:
                raise ValueError(f"InputSchema: not a valid JSON Schema: {exc}") from exc
        self._check_schedules()
        self._check_matches()
        return self

    def _check_assigns(self) -> None:
        """Each variable is assigned by one step (issue 42.5): every step that sees it sees
        the one value, whichever way it came."""
        seen: dict[str, str] = {}
        for i, step in enumerate(self.steps):
            for name in step.assign or {}:
                other = seen.setdefault(name, step.name)
                if other != step.name:
                    raise ValueError(
                        f"Steps[{i}] ({step.name}).Assign.{name}: also assigned by step "
                        f"'{other}'; a variable is assigned by one step"
                    )

    @cached_property
    def assigners(self) -> dict[str, tuple[str, ...]]:
        """Per step, the steps whose `Assign` it sees: those it depends on, directly or
        through others (shepherd.expressions)."""
        out: dict[str, tuple[str, ...]] = {}
        for step in self.steps:
            out[step.name] = tuple(
                s.name
                for s in self.steps
                if s.assign is not None and step.name in self.dependents_closure[s.name]
            )
        return out

    def _check_matches(self) -> None:
        """At most limits.MAX_MATCH_STEPS steps name a Match: each is an index item written
        with the start's transaction."""
        matched = [s.name for s in self.steps if s.wait_for_signal and s.wait_for_signal.match]
        if len(matched) > limits.MAX_MATCH_STEPS:
            raise ValueError(
                f"Steps: {len(matched)} WaitForSignal steps name a Match; at most "
                f"{limits.MAX_MATCH_STEPS} may (each is an index entry written at the start)"
            )

    def _check_schedules(self) -> None:
        """Names are unique, and each schedule's Input is one the InputSchema accepts (a
        start from the clock is refused at load, not every night at 02:00)."""
        seen: set[str] = set()
        for i, schedule in enumerate(self.schedules):
            where = f"Schedules[{i}] ({schedule.name})"
            if schedule.name in seen:
                raise ValueError(f"{where}.Name: a schedule of this name is defined twice")
            seen.add(schedule.name)
            if self.input_schema is None:
                continue
            try:
                fastjsonschema.compile(self.input_schema)(schedule.input)
            except fastjsonschema.JsonSchemaValueException as exc:
                message = exc.message.replace("data", "Input", 1)
                raise ValueError(f"{where}.Input: {message}") from None

    # ----------------------------------------------------------------- derived, cached views

    @cached_property
    def machine(self) -> Any:
        """The validated `shepherd.asl.StateMachine` (None for a native definition)."""
        if self.state_machine is None:
            return None
        from shepherd.asl.document import parse  # noqa: PLC0415 - the ASL package needs ours

        return parse(self.state_machine, self.name)

    @cached_property
    def by_name(self) -> dict[str, StepSpec]:
        return {s.name: s for s in self.steps}

    @cached_property
    def dependents(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {s.name: [] for s in self.steps}
        for s in self.steps:
            for dep in s.depends_on:
                out[dep].append(s.name)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def depth(self) -> dict[str, int]:
        """Longest path from a root; breaks completion-time ties in compensation order."""
        depth: dict[str, int] = {}
        for name in self.topological_order:
            deps = self.by_name[name].depends_on
            depth[name] = 1 + max((depth[d] for d in deps), default=-1)
        return depth

    @cached_property
    def topological_order(self) -> tuple[str, ...]:
        order: list[str] = []
        done: set[str] = set()
        remaining = list(self.steps)
        while remaining:
            ready = [s for s in remaining if set(s.depends_on) <= done]
            for s in ready:
                order.append(s.name)
                done.add(s.name)
            remaining = [s for s in remaining if s.name not in done]
        return tuple(order)

    @cached_property
    def sinks(self) -> tuple[str, ...]:
        """Steps nothing depends on. Every step is one or an ancestor of one, and a step runs
        only after its dependencies succeeded: all sinks done means every step done."""
        return tuple(s.name for s in self.steps if not self.dependents[s.name])

    @cached_property
    def signal_waits(self) -> dict[str, tuple[str, ...]]:
        """The WaitForSignal steps waiting for each signal name, in topological order: the
        names a signal may have (any other is refused, so kept signals are bounded by the
        definition) and, of several steps, which takes a signal first."""
        out: dict[str, list[str]] = {}
        for name in self.topological_order:
            wait = self.by_name[name].wait_for_signal
            if wait is not None:
                out.setdefault(wait.name, []).append(name)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def matches(self) -> dict[str, WaitForSignalSpec]:
        """The WaitForSignal steps that name a `Match`, by step name (engine/correlation.py)."""
        return {
            s.name: s.wait_for_signal
            for s in self.steps
            if s.wait_for_signal is not None and s.wait_for_signal.match
        }

    @cached_property
    def roots(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps if not s.depends_on)

    @cached_property
    def tasks(self) -> tuple[TaskSpec, ...]:
        """Every step and compensation spec an agent pool runs (not a Wait, an Approval or a
        child-workflow step)."""
        if self.state_machine is not None:  # one per Lambda function its Tasks name
            from shepherd.asl import workflow  # noqa: PLC0415

            machine = self.machine
            found = [
                asl_task(self, *f)
                for f in workflow.lambda_functions(machine)
                if self.lambda_pools.get(f[0], self.lambda_pool) != workflow.INTEGRATIONS_POOL
            ]
            if workflow.needs_integrations(machine, self.lambda_pools, self.lambda_pool):
                found.append(integrations_task())
            return tuple(found)
        out: list[TaskSpec] = []
        for s in self.steps:
            if s.runs_agent:
                out.append(s)
            if s.compensation is not None:
                out.append(s.compensation)
        return tuple(out)

    @cached_property
    def reach_gap_ms(self) -> dict[str, int]:
        """`g(s)` of docs/architecture.md (the deadline rule), per step: the soonest an agent's
        write on step `s`, or on anything agents make ready from it without the supervisor,
        can create a deadline after it. The dispatch grace, and the liveness of `s`'s task and
        of every task downstream of it (agents chain through successors on their own)."""
        dispatch = self.dispatch_timeout_seconds
        return {
            s.name: 1000
            * min(
                (
                    dispatch,
                    *self._reach_term(s),
                    *(t for d in self.dependents_closure[s.name] for t in self._reach_term(d)),
                )
            )
            for s in self.steps
        }

    def _reach_term(self, step: StepSpec | str) -> tuple[int, ...]:
        """What one step adds to a reach gap: a task's liveness; a Wait's static first
        deadline (`Seconds`; an `Until` pulls `due_at` itself when it starts)."""
        spec = self.by_name[step] if isinstance(step, str) else step
        if spec.is_task:
            return (spec.liveness_seconds, *_repeat_term(spec))
        if spec.approval is not None:
            return (spec.approval.timeout_seconds,)
        if spec.wait_for_signal is not None:
            return (spec.wait_for_signal.timeout_seconds,)
        if spec.pass_ is not None:
            return ()  # passed in the write that finds it ready: no deadline of its own
        assert spec.wait is not None
        return () if spec.wait.seconds is None else (max(1, spec.wait.seconds),)

    @cached_property
    def compensation_gap_ms(self) -> int:
        """`g` of a compensation and of anything in flight while the workflow unwinds: the
        next compensation (any of them) is started by an agent's write on the one before."""
        comps = [s.compensation.liveness_seconds for s in self.steps if s.compensation]
        return 1000 * min((self.dispatch_timeout_seconds, *comps))  # none: the grace alone

    @cached_property
    def start_gap_ms(self) -> int:
        """When a new workflow's watch entry is due: its roots are sent with the start (and
        its own TimeoutSeconds, if that comes sooner)."""
        own = () if self.timeout_seconds is None else (1000 * self.timeout_seconds,)
        return min(
            (*(self.reach_gap_ms[name] for name in self.roots), *own),
            default=1000 * self.dispatch_timeout_seconds,  # a state machine: its first unit's
        )

    @cached_property
    def watch_gap_ms(self) -> int:
        """`G`: the soonest any new deadline can fall after any event, over the whole
        definition (the smallest timeout of any task, the dispatch grace, the pause timeout).
        No longer the watch rule (see `reach_gap_ms`); the fault simulator's time bounds use
        it as the longest a deadline can wait for a look."""
        pause = () if self.pause_timeout_seconds is None else (self.pause_timeout_seconds,)
        seconds: int = min(
            (
                self.dispatch_timeout_seconds,
                *(min(t.liveness_seconds, t.timeout_seconds) for t in self.tasks),
                *pause,
            )
        )
        return seconds * 1000

    @cached_property
    def canonical_json(self) -> str:
        body = fanout.unset_dropped(
            self.model_dump(mode="json", by_alias=True, exclude_defaults=False)
        )
        for key in ("Schedules", "SignalSenders", "TimeoutSeconds"):
            if not body.get(key):
                body.pop(key, None)  # as before they existed: the same version
        if body.get("StateMachine") is None:  # a native definition keeps its version
            for key in ("StateMachine", "LambdaPool", "LambdaPools"):
                body.pop(key, None)
        for step in body["Steps"]:
            _as_before(step)
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @cached_property
    def content_hash(self) -> str:
        return hashlib.sha256(self.canonical_json.encode()).hexdigest()[:20]

    @cached_property
    def input_validator(self) -> Any:
        return None if self.input_schema is None else fastjsonschema.compile(self.input_schema)

    def spec(self, kind: str, name: str) -> TaskSpec:
        """A unit's settings: a step's own, its compensation's; a child-workflow step's
        compensation is its child undoing itself, waited for under the step's settings."""
        step = self.by_name[name]
        if kind == "step" or step.workflow is not None:
            return step
        if step.compensation is None:
            raise KeyError(f"step '{name}' has no compensation")
        return step.compensation

    def agents(self) -> set[str]:
        return {t.agent for t in self.tasks if t.agent}

    def on_failure_of(self, step: str) -> OnFailure:
        """What a step failing for good does: its own `OnFailure`, else the definition's."""
        return self.by_name[step].on_failure or self.on_failure

    @cached_property
    def dependents_closure(self) -> dict[str, frozenset[str]]:
        """Every step that depends on each step, directly or through others."""
        out: dict[str, frozenset[str]] = {}
        for name in reversed(self.topological_order):
            direct = self.dependents[name]
            out[name] = frozenset(direct).union(*(out[d] for d in direct))
        return out


# An ASL Lambda task's lease when it names no TimeoutSeconds (Step Functions' default is a
# year, but a Lambda function runs 900 s at most).
ASL_TIMEOUT_SECONDS = 900


def asl_task(
    definition: Definition, function: str, timeout: float | None, heartbeat: float | None
) -> TaskSpec:
    """The settings of an ASL Lambda task's attempt: the agent registered under the
    function's name, its pool, its lease. ASL's retriers decide retries, so the unit's own
    policy never retries (`MaxAttempts: 0`). Built without validation: a Lambda function's
    name need not be a native agent name."""
    seconds = max(1, int(timeout)) if timeout else ASL_TIMEOUT_SECONDS
    beat = max(2, int(heartbeat)) if heartbeat else None
    return TaskSpec.model_construct(
        agent=function,
        pool=definition.lambda_pools.get(function, definition.lambda_pool),
        timeout_seconds=seconds,
        heartbeat_seconds=beat if beat is not None and beat < seconds else None,
        retry=RetryPolicy.model_validate({"MaxAttempts": 0}),
    )


def integrations_task(timeout: float | None = None, heartbeat: float | None = None) -> TaskSpec:
    """The settings of an attempt Shepherd's integration pool runs (a service call, another
    state machine, a deployed Lambda function): its built-in agent, the pool, the lease."""
    from shepherd.asl import workflow  # noqa: PLC0415

    seconds = max(1, int(timeout)) if timeout else workflow.INTEGRATIONS_TIMEOUT_SECONDS
    beat = max(2, int(heartbeat)) if heartbeat else None
    return TaskSpec.model_construct(
        agent=workflow.INTEGRATIONS_AGENT,
        pool=workflow.INTEGRATIONS_POOL,
        timeout_seconds=seconds,
        heartbeat_seconds=beat if beat is not None and beat < seconds else None,
        retry=RetryPolicy.model_validate({"MaxAttempts": 0}),
    )


def _check_condition_reads(index: int, step: StepSpec) -> None:
    """A condition reads only the input and the outputs of the steps the step depends on
    (nothing else is done, or even known to run, when it is evaluated)."""
    if step.condition is None:
        return
    for path in step.condition.variables():
        dep = step_of(path)
        if dep is not None and dep not in step.depends_on:
            raise ValueError(
                f"Steps[{index}] ({step.name}).Condition: '{path}' reads step '{dep}', "
                "which is not in its DependsOn"
            )


def _check_wait_reads(index: int, step: StepSpec) -> None:
    """The paths a step's kind reads besides its condition (a Wait's `UntilPath` or
    `SecondsPath`) read the input or the output of a step it depends on, as a condition does
    (issue 42.5)."""
    if step.wait is None:  # the kinds need this module: it cannot ask them (an import cycle)
        return
    wait = step.wait
    for field, path in (
        ("Wait.UntilPath", wait.until_path),
        ("Wait.SecondsPath", wait.seconds_path),
    ):
        if path is None:
            continue
        dep = step_of(path)
        if dep is not None and dep not in step.depends_on:
            raise ValueError(
                f"Steps[{index}] ({step.name}).{field}: '{path}' reads step '{dep}', "
                "which is not in its DependsOn" + did_you_mean(dep, step.depends_on)
            )


def _check_expressions(index: int, step: StepSpec) -> None:
    """`Arguments` and `Output` (issue 42.5): on a task step that runs an agent or a Pass
    step, each expression parsed, each `$steps.<name>` a dependency (shepherd.expressions)."""
    from shepherd import expressions  # noqa: PLC0415

    at = f"Steps[{index}] ({step.name})"
    fields = (("Arguments", step.arguments), ("Output", step.output), ("Assign", step.assign))
    for field, template in fields:
        if template is None:
            continue
        # A task that runs an agent (no map) or a Pass step; the kinds cannot be asked here
        # (they import this module).
        if not (step.runs_agent and step.map is None) and step.pass_ is None:
            raise ValueError(
                f"{at}.{field}: only a task step that runs an agent (no Map) or a Pass step "
                "takes data expressions"
            )
        try:
            expressions.check(template, f"{at}.{field}", step.depends_on)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
    for name in step.assign or {}:
        if name in ("states", "steps"):
            raise ValueError(f"{at}.Assign.{name}: ${name} is Shepherd's own: choose another name")
    if step.arguments is not None and step.input_path is not None:
        raise ValueError(f"{at}.Arguments: a step takes Arguments or InputPath, not both")
    if (
        step.arguments is not None
        and step.pass_ is not None
        and "result" in (step.pass_.model_fields_set)
    ):
        raise ValueError(f"{at}.Arguments: a Pass step takes Result or Arguments, not both")


def _find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A dependency cycle as a path that ends where it starts, or None."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(graph, white)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = grey
        stack.append(node)
        for dep in graph[node]:
            if color.get(dep) == grey:
                return [*stack[stack.index(dep) :], dep]
            if color.get(dep) == white:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        color[node] = black
        return None

    for node in graph:
        if color[node] == white:
            found = visit(node)
            if found:
                return found
    return None


def _format_loc(data: Any, loc: tuple[int | str, ...]) -> str:
    """`Steps[2] (charge_payment).Retry.MaxAttempts` from a pydantic error location."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            try:
                node = node[part]
            except (IndexError, KeyError, TypeError):
                node = None
            if isinstance(node, dict) and isinstance(node.get("Name"), str):
                out += f" ({node['Name']})"
        else:
            out += ("." if out else "") + part
            node = node.get(part) if isinstance(node, dict) else None
    return out


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, or inside a tuple, an optional or a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _fields_at(loc: tuple[int | str, ...]) -> list[str]:
    """The field names (aliases) of the object at `loc`, for suggesting the nearest one."""
    model: type[BaseModel] = Definition
    for part in loc:
        if isinstance(part, int):
            continue
        field = next((f for f in model.model_fields.values() if f.alias == part), None)
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return [f.alias for f in model.model_fields.values() if f.alias]


_PATTERNS = {
    NAME: "lowercase letters, digits and _, starting with a letter, at most 64",
    POOL: "lowercase letters, digits and -, starting with a letter, at most 32",
    CONDITION_PATH: "$.input.<path> or $.steps.<dependency>.output.<path>",
    INPUT_PATH: "$.input.<path>",
    VARIABLE: "letters, digits and _, not starting with a digit, at most 80",
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(err: Any) -> str:
    """A pydantic error in Shepherd's words: what the field must be, and what it was."""
    kind, ctx, loc = err["type"], err.get("ctx") or {}, tuple(err["loc"])
    got = f" (got {_shown(err['input'])})"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        fields = _fields_at(loc[:-1])
        hint = did_you_mean(str(loc[-1]), fields) or f" (fields here: {', '.join(fields)})"
        return f"unknown field{hint}"
    if kind == "string_pattern_mismatch":
        rule = _PATTERNS.get(str(ctx.get("pattern")), f"must match {ctx.get('pattern')}")
        what = "path" if ctx.get("pattern") in (CONDITION_PATH, INPUT_PATH) else "name"
        return f"{_shown(err['input'])} is not a valid {what}: {rule}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = did_you_mean(str(err["input"]), allowed)
        return f"must be one of {', '.join(allowed)}{got}{hint}"
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "less_than_equal": ("at most", "le"),
        "greater_than": ("more than", "gt"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        words, key = bounds[kind]
        return f"must be {words} {ctx.get(key)}{got}"
    if kind in ("too_short", "too_long"):
        words = "at least" if kind == "too_short" else "at most"
        count = ctx.get("min_length" if kind == "too_short" else "max_length")
        return f"must have {words} {count} item{'s' if count != 1 else ''}"
    if kind in ("string_too_short", "string_too_long"):
        words = "at least" if kind == "string_too_short" else "at most"
        count = ctx.get("min_length" if kind == "string_too_short" else "max_length")
        return f"must be {words} {count} character{'s' if count != 1 else ''} long"
    kinds = {
        ("int_parsing", "int_type", "int_from_float"): "must be a whole number",
        ("float_parsing", "float_type", "finite_number"): "must be a number",
        ("string_type", "string_unicode"): "must be a string",
        ("bool_parsing", "bool_type"): "must be true or false",
        ("dict_type", "model_type", "model_attributes_type"): "must be a mapping (Key: value)",
        ("tuple_type", "list_type"): "must be a list",
    }
    for names, words in kinds.items():
        if kind in names:
            return f"{words}{got}"
    # Our own validators (value_error) already speak Shepherd's words.
    return str(err["msg"]).removeprefix("Value error, ")


def _errors(exc: ValidationError) -> list[Any]:
    """The errors worth reading: a list that is "too short after validation" only because
    its items were invalid says nothing the items' own errors do not."""
    errors = exc.errors()
    inner = [tuple(e["loc"]) for e in errors]
    return [
        e
        for e in errors
        if not (
            e["type"] == "too_short"
            and any(len(o) > len(e["loc"]) and o[: len(e["loc"])] == tuple(e["loc"]) for o in inner)
        )
    ]


def parse_definition(data: Any, source: str) -> Definition:
    """Validate raw data; errors name the source, the step and every offending field, in
    Shepherd's words (never pydantic's), with the nearest field name for an unknown one."""
    if not isinstance(data, dict):
        raise DefinitionError(f"{source}: a definition must be a mapping (Name, Steps, ...)")
    try:
        definition = Definition.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in _errors(exc):
            where = _format_loc(data, tuple(err["loc"]))
            lines.append(f"{source}: {where + ': ' if where else ''}{_describe(err)}")
        raise DefinitionError("\n".join(lines)) from None
    size = len(definition.canonical_json.encode())
    if size > limits.MAX_DEFINITION_BYTES:  # its snapshot is one table item
        raise DefinitionError(
            f"{source}: the definition is {size} bytes as canonical JSON; "
            f"the limit is {limits.MAX_DEFINITION_BYTES}"
        )
    return definition


def _no_duplicate_keys_loader(fast: bool = False) -> type:
    """A SafeLoader that refuses a key given twice; `fast` builds it on libyaml's scanner and
    parser (CSafeLoader, when PyYAML was built with it) instead of the pure-Python ones."""
    import yaml  # noqa: PLC0415 - YAML is only needed where files are authored, never in Lambda

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if fast else yaml.SafeLoader

    class Loader(base):  # type: ignore[misc,valid-type]
        pass

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        keys = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in keys:
                raise DefinitionError(f"line {key_node.start_mark.line + 1}: duplicate key '{key}'")
            keys.add(key)
        return dict(loader.construct_mapping(node, deep=deep))

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return Loader


def _load_yaml(text: str) -> Any:
    """A definition's YAML: parsed by libyaml (about a tenth of the pure-Python parser's CPU;
    every engine build reads its definitions folder), and on a syntax error parsed again by
    PyYAML's own parser, whose error (and so the author's message) is the one documented."""
    import yaml  # noqa: PLC0415

    try:
        return yaml.load(text, Loader=_no_duplicate_keys_loader(fast=True))  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError:
        return yaml.load(text, Loader=_no_duplicate_keys_loader())  # noqa: S506 - SafeLoader subclass


def _yaml_problem(exc: Exception) -> str:
    """A YAML error on one line: where it is and what is wrong (PyYAML's own text spans
    several lines and quotes the document back)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}not valid YAML: {problem}{f' ({context})' if context else ''}"


def load_file(path: Path) -> Definition:
    """Load one YAML or JSON definition file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = _load_yaml(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except DefinitionError as exc:
        raise DefinitionError(f"{path}: {exc}") from None
    except ValueError as exc:  # json.JSONDecodeError and yaml.YAMLError both land here or below
        raise DefinitionError(f"{path}: not valid JSON: {exc}") from None
    except Exception as exc:
        if type(exc).__module__.startswith("yaml"):
            raise DefinitionError(f"{path}: {_yaml_problem(exc)}") from None
        raise
    definition = parse_definition(data, str(path))
    if path.stem != definition.name:
        raise DefinitionError(
            f"{path}: Name: '{definition.name}' must match the file name '{path.stem}'"
        )
    return definition


DEFINITION_SUFFIXES = (".yaml", ".yml", ".json")


def definition_files(directory: Path) -> list[Path]:
    """The native definitions of a folder: Amazon States Language files (`*.asl.json`,
    `*.asl.yaml`) beside them are `shepherd.asl`'s, not parsed here."""
    return sorted(
        p
        for p in directory.iterdir()
        if p.suffix in DEFINITION_SUFFIXES and not p.name.endswith(_ASL_SUFFIXES)
    )


_ASL_SUFFIXES = (".asl.json", ".asl.yaml", ".asl.yml")  # shepherd.asl.ASL_SUFFIXES


def load_asl_file(
    path: Path, *, pool: str | None = None, pools: Mapping[str, str] | None = None
) -> Definition:
    """`<name>.asl.json` as the definition of workflow type `<name>`: the ASL document
    validated (errors name the file, the state and the field), no native field needed."""
    from shepherd.asl.workflow import read_document  # noqa: PLC0415

    body = {
        "Name": _asl_name(path),
        "Steps": [],
        "StateMachine": read_document(path),
        "LambdaPool": pool or LAMBDA_POOL,
        "LambdaPools": dict(pools or {}),
    }
    return parse_definition(body, str(path))


def asl_files(directory: Path) -> list[Path]:
    """The Amazon States Language state machines of a folder (`<name>.asl.json`, `.asl.yaml`)."""
    return sorted(p for p in directory.iterdir() if p.name.endswith(_ASL_SUFFIXES))


def _asl_name(path: Path) -> str:
    return next(path.name[: -len(s)] for s in _ASL_SUFFIXES if path.name.endswith(s))


def load_directory(
    directory: Path,
    *,
    asl_pool: str | None = None,
    asl_pools: Mapping[str, str] | None = None,
) -> dict[str, Definition]:
    """Every definition in a directory, native and Amazon States Language (workflow type
    `<name>` of `<name>.asl.json`; its Lambda tasks' agents in `asl_pool`, or the pool
    `asl_pools` names for their function); all errors at once."""
    found: dict[str, Definition] = {}
    scheduled: dict[str, str] = {}  # schedule name -> its definition
    errors: list[str] = []
    loaders = [(p, load_file) for p in definition_files(directory)] + [
        (p, lambda p: load_asl_file(p, pool=asl_pool, pools=asl_pools))
        for p in asl_files(directory)
    ]
    for path, load in loaders:
        try:
            definition = load(path)
        except DefinitionError as exc:
            errors.append(str(exc))
            continue
        if definition.name in found:
            errors.append(f"{path}: Name: '{definition.name}' is defined twice")
        found[definition.name] = definition
        for i, schedule in enumerate(definition.schedules):
            other = scheduled.setdefault(schedule.name, definition.name)
            if other != definition.name:  # its firings' idempotency keys would collide
                errors.append(
                    f"{path}: Schedules[{i}] ({schedule.name}).Name: also a schedule of "
                    f"'{other}'; schedule names are unique across definitions"
                )
    sources = {n: str(p) for n, p in _sources(directory, found)}
    errors.extend(fanout.check_nesting(found, sources))
    errors.extend(check_repeated_children(found, sources))
    if errors:
        raise DefinitionError("\n".join(errors))
    return found


def check_repeated_children(
    definitions: Mapping[str, Definition], sources: Mapping[str, str]
) -> list[str]:
    """A child-workflow step with `Repeat` starts one child per iteration, and when its
    workflow unwinds only the last one undoes itself: the child's definition (and every
    workflow below it) may declare no `Compensation`, so no earlier iteration leaves
    anything that may have acted undone. Errors name the file, the step and the field."""
    errors: list[str] = []
    children = fanout._children(definitions, sources, [])  # unknown ones: `check_nesting`'s

    def compensated(name: str, seen: tuple[str, ...]) -> str | None:
        if name in seen:
            return None  # a cycle: `check_nesting` reports it
        for i, step in enumerate(definitions[name].steps):
            if step.compensation is not None:
                return f"'{name}' Steps[{i}] ({step.name}).Compensation"
        for _, _, child in children.get(name, []):
            below = compensated(child, (*seen, name))
            if below is not None:
                return below
        return None

    for name in sorted(children):
        for i, step_name, child in children[name]:
            if definitions[name].steps[i].repeat is None:
                continue
            found = compensated(child, ())
            if found is not None:
                errors.append(
                    f"{sources.get(name, name)}: Steps[{i}] ({step_name}).Repeat: its child "
                    f"workflow declares a compensation ({found}); a repeated child's earlier "
                    "iterations are never undone, so its workflow may declare none"
                )
    return errors


def _sources(directory: Path, found: Mapping[str, Definition]) -> list[tuple[str, Path]]:
    """Each definition's file, for errors found across files."""
    return [(p.stem, p) for p in definition_files(directory) if p.stem in found] + [
        (_asl_name(p), p) for p in asl_files(directory) if _asl_name(p) in found
    ]


def check_agents(definition: Definition, known: Iterable[str], source: str) -> None:
    """Every Agent a definition names must be registered (a misspelt one gets the nearest
    registered name)."""
    known = set(known)
    errors = []
    if definition.state_machine is not None:  # the agents its Lambda tasks invoke
        errors = [
            f"{source}: the Lambda function '{t.agent}' is no registered agent"
            + did_you_mean(t.agent, known)
            for t in definition.tasks
            if t.agent not in known
        ]
    for i, step in enumerate(definition.steps):
        if step.runs_agent and step.agent not in known:
            errors.append(
                f"{source}: Steps[{i}] ({step.name}).Agent: unknown agent '{step.agent}'"
                + did_you_mean(step.agent, known)
            )
        comp = step.compensation
        if comp is not None and comp.agent not in known:
            errors.append(
                f"{source}: Steps[{i}] ({step.name}).Compensation.Agent: "
                f"unknown agent '{comp.agent}'" + did_you_mean(comp.agent, known)
            )
    if errors:
        raise DefinitionError("\n".join(errors))
