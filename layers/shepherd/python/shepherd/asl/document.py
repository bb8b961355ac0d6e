"""An Amazon States Language document, parsed and validated into typed models.

Every mistake is a `DefinitionError` naming the file (the caller's `source`), the state (by its
path through Parallel branches and Map processors) and the field, never a traceback. A feature
this interpreter does not run (an ItemReader other than an S3 object's items or a bucket
listing, Credentials, Activity resources) is refused the same way, so a state machine never runs
half-understood.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shepherd.errors import DefinitionError

from . import intrinsics, jsonata, paths, rules
from .distributed import GET_OBJECT, INPUT_TYPES, LIST_OBJECTS, MAX_ITEMS, PUT_OBJECT
from .errors import Retrier, StatesError
from .integrations import validate_resource

JSONPATH, JSONATA = "JSONPath", "JSONata"
# The codes of CreateStateMachine's InvalidDefinition error.
SCHEMA_VALIDATION_FAILED = "SCHEMA_VALIDATION_FAILED"
MAX_WAIT_SECONDS = 99_999_999  # the guide's bound on a Wait's Seconds
MISSING_TRANSITION_TARGET = "MISSING_TRANSITION_TARGET"
INVALID_JSONATA_EXPRESSION = "INVALID_JSONATA_EXPRESSION"
# The API reference's other diagnostic codes (ValidateStateMachineDefinitionDiagnostic): "the
# workflow does not have a terminal state", "the same state name appears more than once".
MISSING_END_STATE = "MISSING_END_STATE"
DUPLICATE_STATE_NAME = "DUPLICATE_STATE_NAME"
UNSUPPORTED_JSONATA_EXPRESSION = "UNSUPPORTED_JSONATA_EXPRESSION"
_CATCHER = re.compile(r"\.Catch\[\d+\]$")  # where a catcher's Output and Assign sit
STATE_TYPES = ("Pass", "Task", "Choice", "Wait", "Succeed", "Fail", "Parallel", "Map")
TERMINAL_TYPES = ("Succeed", "Fail")

_COMMON = {"Type", "Comment", "QueryLanguage"}
_JSONPATH_IO = {"InputPath", "OutputPath"}
_FLOW = {"Next", "End"}
_ERRORS = {"Retry", "Catch"}
_FIELDS: dict[str, set[str]] = {
    "Pass": _FLOW | _JSONPATH_IO | {"Parameters", "Result", "ResultPath", "Assign", "Output"},
    "Task": _FLOW
    | _JSONPATH_IO
    | _ERRORS
    | {"Resource", "Parameters", "ResultSelector", "ResultPath", "Arguments", "Output"}
    | {"TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds", "HeartbeatSecondsPath"}
    | {"Assign", "Credentials"},
    "Choice": _JSONPATH_IO | {"Choices", "Default", "Assign", "Output"},
    "Wait": _FLOW
    | _JSONPATH_IO
    | {"Seconds", "SecondsPath", "Timestamp", "TimestampPath", "Assign", "Output"},
    "Succeed": _JSONPATH_IO | {"Output"},
    "Fail": {"Error", "ErrorPath", "Cause", "CausePath"},
    "Parallel": _FLOW
    | _JSONPATH_IO
    | _ERRORS
    | {"Branches", "Parameters", "ResultSelector", "ResultPath", "Arguments", "Output"}
    | {"Assign"},
    "Map": _FLOW
    | _JSONPATH_IO
    | _ERRORS
    | {"ItemProcessor", "Iterator", "ItemsPath", "Items", "ItemSelector", "Parameters"}
    | {"MaxConcurrency", "MaxConcurrencyPath", "ResultSelector", "ResultPath", "Output"}
    | {"ToleratedFailureCount", "ToleratedFailureCountPath", "ToleratedFailurePercentage"}
    | {"ToleratedFailurePercentagePath", "Assign", "Label"}
    | {"ItemReader", "ItemBatcher", "ResultWriter"},
}
_JSONPATH_ONLY = {
    "InputPath",
    "OutputPath",
    "Parameters",
    "ResultSelector",
    "ResultPath",
    "ItemsPath",
    "SecondsPath",
    "TimestampPath",
    "ErrorPath",
    "CausePath",
    "TimeoutSecondsPath",
    "HeartbeatSecondsPath",
    "MaxConcurrencyPath",
    "ToleratedFailureCountPath",
    "ToleratedFailurePercentagePath",
    "Iterator",
}
_JSONATA_ONLY = {"Arguments", "Output", "Items"}
_UNSUPPORTED = {
    "Credentials": "Credentials (a task running under another role) is not supported",
}
_RETRIER_FIELDS = {
    "ErrorEquals",
    "IntervalSeconds",
    "MaxAttempts",
    "BackoffRate",
    "MaxDelaySeconds",
    "JitterStrategy",
    "Comment",
}
_CATCHER_FIELDS = {"ErrorEquals", "Next", "ResultPath", "Output", "Assign", "Comment"}


@dataclass(frozen=True)
class Catcher:
    error_equals: tuple[str, ...]
    next: str
    result_path: str | None = "$"
    output: Any = None
    assign: Mapping[str, Any] | None = None
    has_output: bool = False


@dataclass(frozen=True)
class State:
    """One state: its typed control fields, and its raw JSON for the data fields (each is
    read where the state runs, by the query language the state uses)."""

    name: str
    type: str
    query_language: str
    raw: Mapping[str, Any]
    next: str | None = None
    end: bool = False
    retriers: tuple[Retrier, ...] = ()
    catchers: tuple[Catcher, ...] = ()
    branches: tuple[StateMachine, ...] = ()
    where: str = ""

    def has(self, name: str) -> bool:
        return name in self.raw

    def get(self, name: str, default: Any = None) -> Any:
        return self.raw.get(name, default)


@dataclass(frozen=True)
class StateMachine:
    start_at: str
    states: Mapping[str, State]
    query_language: str = JSONPATH
    timeout_seconds: float | None = None
    comment: str = ""
    assigned: frozenset[str] = field(default_factory=frozenset)


# statemachine-structure.html: "You cannot revert a top-level JSONata-based state machine to a
# mix of JSONata and JSONPath states" (a JSONPath machine's states may each be JSONata).
_NO_JSONPATH_IN_JSONATA = "a state of a JSONata state machine cannot be JSONPath"


def parse(data: Any, source: str = "<state machine>") -> StateMachine:
    """The validated state machine of an ASL document (its JSON value)."""
    if not isinstance(data, dict):
        raise DefinitionError(f"{source}: an ASL document is a JSON object")
    return _Parser(source).machine(data, "", JSONPATH, top=True, outer=frozenset())


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.names: dict[str, str] = {}  # every state's name, the whole machine's: where it is
        self.top_language = JSONPATH

    def fail(
        self, where: str, message: str, code: str | None = SCHEMA_VALIDATION_FAILED
    ) -> DefinitionError:
        """The error, with the code CreateStateMachine's InvalidDefinition gives for it (none
        for a feature Step Functions has and Shepherd does not run)."""
        tail = f" ({code})" if code else ""
        return DefinitionError(f"{self.source}: {where}{': ' if where else ''}{message}{tail}")

    def machine(
        self,
        data: Mapping[str, Any],
        where: str,
        language: str,
        *,
        top: bool,
        outer: frozenset[str],
    ) -> StateMachine:
        allowed = {"StartAt", "States", "Comment", "QueryLanguage", "TimeoutSeconds", "Version"}
        if not top:
            allowed |= {"ProcessorConfig"}
        for key in data:
            if key not in allowed:
                raise self.fail(f"{where}{key}", "unknown field")
        language = data.get("QueryLanguage", language)
        if language not in (JSONPATH, JSONATA):
            raise self.fail(f"{where}QueryLanguage", "must be JSONPath or JSONata")
        if top:
            self.top_language = language  # each state checks it (a branch's inherit theirs)
        states = data.get("States")
        if not isinstance(states, dict) or not states:
            raise self.fail(f"{where}States", "a non-empty object of states is required")
        start = data.get("StartAt")
        if not isinstance(start, str) or start not in states:
            raise self.fail(f"{where}StartAt", f"'{start}' is not a state of States")
        config = data.get("ProcessorConfig") or {}
        if config.get("Mode", "INLINE") not in ("INLINE", "DISTRIBUTED"):
            raise self.fail(f"{where}ProcessorConfig.Mode", "must be INLINE or DISTRIBUTED")
        assigned = frozenset(
            k for s in states.values() if isinstance(s, dict) for k in (s.get("Assign") or {})
        )
        for name in assigned & outer:
            raise self.fail(
                where or "States",
                f"the variable '{name}' is assigned in an outer scope: a Parallel branch or a "
                "Map iteration can read it but not assign it",
            )
        parsed = {
            name: self.state(name, body, where, language, outer | assigned)
            for name, body in states.items()
        }
        for state in parsed.values():
            self.check_targets(state, parsed)
        self.check_reachable(where, start, parsed)
        timeout = data.get("TimeoutSeconds")
        if timeout is not None and not _positive_int(timeout):
            raise self.fail(f"{where}TimeoutSeconds", "must be a positive integer")
        return StateMachine(
            start_at=start,
            states=parsed,
            query_language=language,
            timeout_seconds=timeout,
            comment=str(data.get("Comment", "")),
            assigned=assigned,
        )

    def check_targets(self, state: State, states: Mapping[str, State]) -> None:
        targets = [("Next", state.next)] if state.next else []
        targets += [(f"Catch[{i}].Next", c.next) for i, c in enumerate(state.catchers)]
        if state.type == "Choice":
            targets += [
                (f"Choices[{i}].Next", c.get("Next")) for i, c in enumerate(state.raw["Choices"])
            ]
            if state.has("Default"):
                targets.append(("Default", state.raw["Default"]))
        for where, target in targets:
            if target not in states:
                raise self.fail(
                    f"{state.where}.{where}",
                    f"'{target}' is not a state (Missing '{where.split('.')[-1]}' target: "
                    f"{target})",
                    code=MISSING_TRANSITION_TARGET,
                )

    def check_reachable(self, where: str, start: str, states: Mapping[str, State]) -> None:
        """Every state is reached from StartAt and one at least ends the workflow (AWS's
        MISSING_END_STATE otherwise): AWS refuses a state that is not with
        `MISSING_TRANSITION_TARGET: State "X" is not reachable.` (its CreateStateMachine
        answer, quoted in LocalStack's pull request 12487)."""
        seen, todo = {start}, [start]
        while todo:
            state = states[todo.pop()]
            targets = [state.next] if state.next else []
            targets += [c.next for c in state.catchers]
            if state.type == "Choice":
                targets += [c.get("Next") for c in state.raw["Choices"]]
                targets += [state.raw["Default"]] if state.has("Default") else []
            for target in targets:
                if isinstance(target, str) and target not in seen:
                    seen.add(target)
                    todo.append(target)
        for name in states:
            if name not in seen:
                raise self.fail(
                    f"{where}States.{name}",
                    f'State "{name}" is not reachable.',
                    code=MISSING_TRANSITION_TARGET,
                )
        if not any(s.end or s.type in TERMINAL_TYPES for s in states.values()):
            raise self.fail(
                where or "States",
                "The workflow does not have a terminal state",
                code=MISSING_END_STATE,
            )

    def state(
        self, name: str, body: Any, where: str, language: str, scope: frozenset[str]
    ) -> State:
        at = f"{where}States.{name}"
        if not isinstance(body, dict):
            raise self.fail(at, "a state is a JSON object")
        # The spec: a state's name is at most 80 Unicode characters, unique in the whole machine.
        if len(name) > 80:
            raise self.fail(at, "a state's name is at most 80 characters")
        if name in self.names:
            raise self.fail(
                at,
                f"the state name '{name}' is already used at {self.names[name]}: state names "
                "are unique in the whole state machine",
                code=DUPLICATE_STATE_NAME,
            )
        self.names[name] = at
        kind = body.get("Type")
        if kind not in STATE_TYPES:
            raise self.fail(f"{at}.Type", f"'{kind}' is not one of {', '.join(STATE_TYPES)}")
        language = body.get("QueryLanguage", language)
        if language not in (JSONPATH, JSONATA):
            raise self.fail(f"{at}.QueryLanguage", "must be JSONPath or JSONata")
        if language == JSONPATH and self.top_language == JSONATA:
            raise self.fail(f"{at}.QueryLanguage", _NO_JSONPATH_IN_JSONATA)
        self.check_fields(at, kind, language, body)
        self.check_variable_names(at, body)
        next_, end = self.flow(at, kind, body)
        state = State(
            name=name,
            type=kind,
            query_language=language,
            raw=body,
            next=next_,
            end=end,
            retriers=self.retriers(at, body.get("Retry", [])),
            catchers=self.catchers(at, body.get("Catch", []), language),
            branches=self.branches(at, kind, body, language, scope),
            where=at,
        )
        self.check_kind(state)
        return state

    def check_fields(self, at: str, kind: str, language: str, body: Mapping[str, Any]) -> None:
        for key in body:
            self.check_field(at, kind, language, key)
        for key in ("InputPath", "OutputPath", "ItemsPath"):
            value = body.get(key)
            if value is not None and not paths.is_path(value):
                raise self.fail(f"{at}.{key}", f"'{value}' is not a valid path")
        if "ResultPath" in body and body["ResultPath"] is not None:
            try:
                paths.check_reference_path(body["ResultPath"])
            except paths.PathSyntaxError as exc:
                raise self.fail(f"{at}.ResultPath", str(exc)) from None
        if language == JSONATA:
            self.check_expressions(at, body)
        else:
            for key in ("Parameters", "ResultSelector", "ItemSelector", "Assign"):
                if key in body:
                    self.check_template(f"{at}.{key}", body[key])

    def check_field(self, at: str, kind: str, language: str, key: str) -> None:
        if key in _COMMON:
            return
        if key not in _FIELDS[kind]:
            raise self.fail(f"{at}.{key}", f"not a field of a {kind} state")
        if key in _UNSUPPORTED:
            raise self.fail(f"{at}.{key}", _UNSUPPORTED[key], code=None)
        if language == JSONATA and key in _JSONPATH_ONLY:
            raise self.fail(f"{at}.{key}", "a JSONPath field, in a JSONata state")
        if language == JSONPATH and key in _JSONATA_ONLY:
            raise self.fail(f"{at}.{key}", "a JSONata field, in a JSONPath state")

    def check_template(self, at: str, template: Any) -> None:
        """Every `.$` value of a payload template is a path or an intrinsic function call."""
        if isinstance(template, list):
            for i, item in enumerate(template):
                self.check_template(f"{at}[{i}]", item)
            return
        if not isinstance(template, dict):
            return
        for key, value in template.items():
            if not key.endswith(".$"):
                self.check_template(f"{at}.{key}", value)
            elif intrinsics.is_intrinsic(value):
                try:
                    intrinsics.parse(value)
                except StatesError as exc:
                    raise self.fail(f"{at}.{key}", exc.cause) from None
            elif not paths.is_path(value):
                raise self.fail(f"{at}.{key}", f"{value!r} is not a path or an intrinsic function")

    def check_variable_names(self, at: str, body: Mapping[str, Any]) -> None:
        """`$states` is reserved: no Assign (a state's, a Choice rule's, a catcher's) may name a
        variable `states` (AWS refuses it, as the floci emulator's measurements record)."""
        places = [("Assign", body.get("Assign"))]
        for list_field in ("Choices", "Catch"):
            entries = body.get(list_field)
            for i, entry in enumerate(entries if isinstance(entries, list) else []):
                if isinstance(entry, dict):
                    places.append((f"{list_field}[{i}].Assign", entry.get("Assign")))
        for where, assign in places:
            for key in assign if isinstance(assign, dict) else {}:
                if str(key).removesuffix(".$") == "states":
                    raise self.fail(
                        f"{at}.{where}.{key}", "the variable name 'states' is reserved ($states)"
                    )

    def check_expressions(self, at: str, value: Any, *, error_output: bool = False) -> None:
        """Every `{% %}` expression of a JSONata state parses and reads only what AWS lets it
        (CreateStateMachine's INVALID_JSONATA_EXPRESSION and UNSUPPORTED_JSONATA_EXPRESSION,
        with AWS's words); `$states.errorOutput` only in a catcher's Output and Assign."""
        if jsonata.is_expression(value):
            try:
                jsonata.check(value)
            except StatesError as exc:
                words = exc.cause.rsplit(": ", 1)[-1]  # the parser's sentence, as AWS gives it
                raise self.fail(at, words, code=INVALID_JSONATA_EXPRESSION) from None
            for name in jsonata.references(value):
                if name == jsonata.ERROR_OUTPUT and error_output:
                    continue
                message = (
                    f"Field '{name}' does not exist."
                    if name == jsonata.ERROR_OUTPUT
                    else "Reference to '$$' is not supported."
                    if name == jsonata.ROOT
                    else f"Reference to '{name}' at the top level is not supported."
                )
                raise self.fail(at, message, code=UNSUPPORTED_JSONATA_EXPRESSION)
        elif isinstance(value, dict):
            in_catcher = bool(_CATCHER.search(at))
            for k, v in value.items():
                if k not in ("ItemProcessor", "Iterator", "Branches"):
                    self.check_expressions(
                        f"{at}.{k}",
                        v,
                        error_output=error_output or (in_catcher and k in ("Output", "Assign")),
                    )
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.check_expressions(f"{at}[{i}]", v, error_output=error_output)

    def flow(self, at: str, kind: str, body: Mapping[str, Any]) -> tuple[str | None, bool]:
        if kind in TERMINAL_TYPES or kind == "Choice":
            for key in ("Next", "End"):
                if key in body:
                    raise self.fail(f"{at}.{key}", f"a {kind} state has no {key}")
            return None, False
        has_next, end = "Next" in body, body.get("End") is True
        if has_next == end:
            raise self.fail(at, "exactly one of Next and End (true) is required")
        return body.get("Next"), end

    def retriers(self, at: str, data: Any) -> tuple[Retrier, ...]:
        if not isinstance(data, list):
            raise self.fail(f"{at}.Retry", "must be an array")
        out = []
        for i, r in enumerate(data):
            here = f"{at}.Retry[{i}]"
            self.known(here, r, _RETRIER_FIELDS)
            errors = self.error_equals(here, r, last=i == len(data) - 1)
            attempts = r.get("MaxAttempts", 3)
            if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 0:
                raise self.fail(f"{here}.MaxAttempts", "must be a non-negative integer")
            interval = r.get("IntervalSeconds", 1)
            if not _positive_int(interval):
                raise self.fail(f"{here}.IntervalSeconds", "must be a positive integer")
            rate = r.get("BackoffRate", 2.0)
            if not isinstance(rate, int | float) or isinstance(rate, bool) or rate < 1:
                raise self.fail(f"{here}.BackoffRate", "must be a number of at least 1.0")
            delay = r.get("MaxDelaySeconds")
            if delay is not None and not _positive_int(delay):
                raise self.fail(f"{here}.MaxDelaySeconds", "must be a positive integer")
            jitter = r.get("JitterStrategy", "NONE")
            if jitter not in ("FULL", "NONE"):
                raise self.fail(f"{here}.JitterStrategy", "must be FULL or NONE")
            out.append(Retrier(errors, float(interval), attempts, float(rate), delay, jitter))
        return tuple(out)

    def catchers(self, at: str, data: Any, language: str) -> tuple[Catcher, ...]:
        if not isinstance(data, list):
            raise self.fail(f"{at}.Catch", "must be an array")
        out = []
        for i, c in enumerate(data):
            here = f"{at}.Catch[{i}]"
            self.known(here, c, _CATCHER_FIELDS)
            errors = self.error_equals(here, c, last=i == len(data) - 1)
            if not isinstance(c.get("Next"), str):
                raise self.fail(f"{here}.Next", "a state name is required")
            if language == JSONPATH and "Output" in c:
                raise self.fail(f"{here}.Output", "a JSONata field, in a JSONPath state")
            if language == JSONATA and "ResultPath" in c:
                raise self.fail(f"{here}.ResultPath", "a JSONPath field, in a JSONata state")
            result_path = c.get("ResultPath", "$")
            if result_path is not None:
                try:
                    paths.check_reference_path(result_path)
                except paths.PathSyntaxError as exc:
                    raise self.fail(f"{here}.ResultPath", str(exc)) from None
            out.append(
                Catcher(
                    errors, c["Next"], result_path, c.get("Output"), c.get("Assign"), "Output" in c
                )
            )
        return tuple(out)

    def known(self, at: str, data: Any, allowed: set[str]) -> None:
        if not isinstance(data, dict):
            raise self.fail(at, "must be an object")
        for key in data:
            if key not in allowed:
                raise self.fail(f"{at}.{key}", "unknown field")

    def error_equals(self, at: str, data: Mapping[str, Any], *, last: bool) -> tuple[str, ...]:
        errors = data.get("ErrorEquals")
        if (
            not isinstance(errors, list)
            or not errors
            or not all(isinstance(e, str) for e in errors)
        ):
            raise self.fail(f"{at}.ErrorEquals", "a non-empty array of error names is required")
        if "States.ALL" in errors and (len(errors) > 1 or not last):
            raise self.fail(
                f"{at}.ErrorEquals",
                "States.ALL must appear alone, in the last retrier or catcher",
            )
        return tuple(errors)

    def branches(
        self, at: str, kind: str, body: Mapping[str, Any], language: str, scope: frozenset[str]
    ) -> tuple[StateMachine, ...]:
        if kind == "Parallel":
            branches = body.get("Branches")
            if not isinstance(branches, list) or not branches:
                raise self.fail(f"{at}.Branches", "a non-empty array of state machines is required")
            return tuple(
                self.machine(b, f"{at}.Branches[{i}].", language, top=False, outer=scope)
                if isinstance(b, dict)
                else _raise(self.fail(f"{at}.Branches[{i}]", "must be an object"))
                for i, b in enumerate(branches)
            )
        if kind == "Map":
            key = "ItemProcessor" if "ItemProcessor" in body else "Iterator"
            processor = body.get(key)
            if not isinstance(processor, dict):
                raise self.fail(f"{at}.ItemProcessor", "a state machine is required")
            # A distributed Map's child executions neither read nor assign the outer variables.
            mode = (processor.get("ProcessorConfig") or {}).get("Mode")
            inner = frozenset() if mode == "DISTRIBUTED" else scope
            return (self.machine(processor, f"{at}.{key}.", language, top=False, outer=inner),)
        return ()

    def check_kind(self, state: State) -> None:
        at, raw = state.where, state.raw
        if state.type == "Task":
            self.check_task(state)
        if state.type == "Choice":
            self.check_choices(state)
        if state.type == "Wait":
            given = [
                k for k in ("Seconds", "SecondsPath", "Timestamp", "TimestampPath") if k in raw
            ]
            if len(given) != 1:
                raise self.fail(
                    at, "exactly one of Seconds, SecondsPath, Timestamp, TimestampPath is required"
                )
        if state.type == "Fail":
            for a, b in (("Error", "ErrorPath"), ("Cause", "CausePath")):
                if a in raw and b in raw:
                    raise self.fail(at, f"{a} and {b} are exclusive")
        if state.type == "Wait":
            self.check_wait_seconds(state)
        if state.type == "Map":
            self.check_distributed(state)
            self.check_map_limits(state)
        if state.type == "Map" and "Items" in raw and "ItemsPath" in raw:
            raise self.fail(at, "Items and ItemsPath are exclusive")
        if state.type == "Pass" and state.query_language == JSONATA and "Result" in raw:
            raise self.fail(f"{at}.Result", "a JSONPath field, in a JSONata state (use Output)")

    def check_wait_seconds(self, state: State) -> None:
        seconds = state.raw.get("Seconds")
        if (
            seconds is not None
            and not jsonata.is_expression(seconds)
            and not (_integer(seconds) and 0 <= seconds <= MAX_WAIT_SECONDS)
        ):
            raise self.fail(
                f"{state.where}.Seconds", f"must be an integer from 0 to {MAX_WAIT_SECONDS}"
            )

    def check_max_items(self, at: str, config: Any, language: str) -> None:
        """MaxItems or MaxItemsPath, not both; no Path in JSONata; at most 100,000,000."""
        if not isinstance(config, dict):
            return
        if "MaxItems" in config and "MaxItemsPath" in config:
            raise self.fail(at, "MaxItems and MaxItemsPath are exclusive")
        if language == JSONATA and "MaxItemsPath" in config:
            raise self.fail(f"{at}.MaxItemsPath", "a JSONPath field, in a JSONata state")
        value: Any = config.get("MaxItems")
        if _integer(value) and not 0 <= value <= MAX_ITEMS:
            raise self.fail(f"{at}.MaxItems", f"must be from 0 to {MAX_ITEMS}")

    def check_map_limits(self, state: State) -> None:
        """A Map's literal MaxConcurrency and ToleratedFailureCount (integers >= 0) and
        ToleratedFailurePercentage (0 to 100), as the guide bounds them."""
        at, raw = state.where, state.raw
        for name in ("MaxConcurrency", "ToleratedFailureCount", "ToleratedFailurePercentage"):
            if name in raw and f"{name}Path" in raw:
                raise self.fail(f"{at}.{name}", f"{name} and {name}Path are exclusive")
        for name in ("MaxConcurrency", "ToleratedFailureCount"):
            value: Any = raw.get(name)
            literal = value is not None and not jsonata.is_expression(value)
            if literal and not (_integer(value) and value >= 0):
                raise self.fail(f"{at}.{name}", "must be an integer of 0 or more")
        share: Any = raw.get("ToleratedFailurePercentage")
        if share is not None and not jsonata.is_expression(share):
            number = isinstance(share, int | float) and not isinstance(share, bool)
            if not (number and 0 <= share <= 100):
                raise self.fail(
                    f"{at}.ToleratedFailurePercentage", "must be a number from 0 to 100"
                )

    def check_distributed(self, state: State) -> None:
        """The distributed Map's ItemReader (an S3 object: JSON, JSON Lines or CSV),
        ItemBatcher and ResultWriter (S3), as the developer guide describes them."""
        at, raw = state.where, state.raw
        arguments = "Arguments" if state.query_language == JSONATA else "Parameters"
        if "ItemReader" in raw:
            self.check_reader(state, raw["ItemReader"], arguments)
        if "ItemBatcher" in raw:
            fields = {"MaxItemsPerBatch", "MaxInputBytesPerBatch", "BatchInput"}
            fields |= {f"{f}Path" for f in ("MaxItemsPerBatch", "MaxInputBytesPerBatch")}
            self.known(f"{at}.ItemBatcher", raw["ItemBatcher"], fields)
        if "ResultWriter" in raw:
            writer = raw["ResultWriter"]
            self.known(f"{at}.ResultWriter", writer, {"Resource", arguments, "WriterConfig"})
            config = writer.get("WriterConfig") or {}
            self.known(f"{at}.ResultWriter.WriterConfig", config, {"Transformation", "OutputType"})
            if config.get("Transformation", "NONE") not in ("NONE", "COMPACT", "FLATTEN"):
                raise self.fail(
                    f"{at}.ResultWriter.WriterConfig.Transformation",
                    "must be NONE, COMPACT or FLATTEN",
                )
            if config.get("OutputType", "JSON") not in ("JSON", "JSONL"):
                raise self.fail(
                    f"{at}.ResultWriter.WriterConfig.OutputType", "must be JSON or JSONL"
                )
            if "Resource" in writer and writer["Resource"] != PUT_OBJECT:
                raise self.fail(
                    f"{at}.ResultWriter.Resource",
                    f"the result writer built is {PUT_OBJECT}",
                    code=None,
                )

    def check_reader(self, state: State, reader: Any, arguments: str) -> None:
        """An ItemReader: one of the two S3 readers, its ReaderConfig, its MaxItems."""
        at = state.where
        self.known(f"{at}.ItemReader", reader, {"Resource", "ReaderConfig", arguments})
        if reader.get("Resource") not in (GET_OBJECT, LIST_OBJECTS):
            raise self.fail(
                f"{at}.ItemReader.Resource",
                f"the item readers are {GET_OBJECT} (an S3 object's items) and "
                f"{LIST_OBJECTS}; '{reader.get('Resource')}' is not",
            )
        config = reader.get("ReaderConfig")
        if reader["Resource"] == LIST_OBJECTS:
            config = {"InputType": "JSON", **(config or {})}
        self.check_max_items(f"{at}.ItemReader.ReaderConfig", config, state.query_language)
        fields = {"InputType", "CSVHeaderLocation", "CSVHeaders", "CSVDelimiter"}
        fields |= {"MaxItems", "MaxItemsPath", "ItemsPointer"}
        self.known(f"{at}.ItemReader.ReaderConfig", config, fields)
        if config.get("InputType") in ("MANIFEST", "PARQUET"):
            raise self.fail(
                f"{at}.ItemReader.ReaderConfig.InputType",
                f"the {config['InputType']} reader is not built: {', '.join(INPUT_TYPES)} are",
                code=None,
            )
        if config.get("InputType") not in INPUT_TYPES:
            raise self.fail(
                f"{at}.ItemReader.ReaderConfig.InputType",
                f"must be one of {', '.join(INPUT_TYPES)}",
            )
        if config.get("CSVHeaderLocation", "FIRST_ROW") not in ("FIRST_ROW", "GIVEN"):
            raise self.fail(
                f"{at}.ItemReader.ReaderConfig.CSVHeaderLocation", "must be FIRST_ROW or GIVEN"
            )
        if config.get("CSVHeaderLocation") == "GIVEN" and not isinstance(
            config.get("CSVHeaders"), list
        ):
            raise self.fail(
                f"{at}.ItemReader.ReaderConfig.CSVHeaders",
                "an array of names is required with CSVHeaderLocation GIVEN",
            )

    def check_task(self, state: State) -> None:
        at, raw = state.where, state.raw
        if not isinstance(raw.get("Resource"), str):
            raise self.fail(f"{at}.Resource", "a resource ARN is required")
        if not jsonata.is_expression(raw["Resource"]):
            refused = validate_resource(raw["Resource"])
            if refused is not None:
                raise self.fail(f"{at}.Resource", refused, code=None)
        for name in ("TimeoutSeconds", "HeartbeatSeconds"):
            if name in raw and f"{name}Path" in raw:
                raise self.fail(at, f"{name} and {name}Path are exclusive")
            value = raw.get(name)
            if value is not None and not jsonata.is_expression(value) and not _positive_int(value):
                raise self.fail(f"{at}.{name}", "must be a positive integer")
        timeout: Any = raw.get("TimeoutSeconds")
        heartbeat: Any = raw.get("HeartbeatSeconds")
        if _positive_int(timeout) and _positive_int(heartbeat) and heartbeat >= timeout:
            raise self.fail(f"{at}.HeartbeatSeconds", "must be smaller than TimeoutSeconds")

    def check_choices(self, state: State) -> None:
        choices = state.raw.get("Choices")
        if not isinstance(choices, list) or not choices:
            raise self.fail(f"{state.where}.Choices", "a non-empty array of rules is required")
        for i, rule in enumerate(choices):
            here = f"{state.where}.Choices[{i}]"
            if not isinstance(rule, dict) or not isinstance(rule.get("Next"), str):
                raise self.fail(f"{here}.Next", "a top-level choice rule needs a Next")
            if state.query_language == JSONATA:
                if "Condition" not in rule:
                    raise self.fail(f"{here}.Condition", "a JSONata choice rule needs a Condition")
                continue
            self.check_rule(here, rule, top=True)

    def check_rule(self, at: str, rule: Any, *, top: bool) -> None:
        if not isinstance(rule, dict):
            raise self.fail(at, "a choice rule is an object")
        extra = {"Next", "Assign", "Comment"} if top else {"Comment"}
        keys = set(rule) - extra
        for combinator in ("And", "Or"):
            if combinator in keys:
                if not isinstance(rule[combinator], list) or not rule[combinator]:
                    raise self.fail(f"{at}.{combinator}", "a non-empty array of rules is required")
                for j, sub in enumerate(rule[combinator]):
                    self.check_rule(f"{at}.{combinator}[{j}]", sub, top=False)
                return
        if "Not" in keys:
            self.check_rule(f"{at}.Not", rule["Not"], top=False)
            return
        operators = keys & rules.COMPARISONS
        if len(operators) != 1 or keys - operators != {"Variable"}:
            raise self.fail(
                at, "a choice rule needs a Variable and exactly one comparison operator"
            )
        if not paths.is_path(rule["Variable"]):
            raise self.fail(f"{at}.Variable", f"'{rule['Variable']}' is not a valid path")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _raise(exc: Exception) -> Any:
    raise exc
