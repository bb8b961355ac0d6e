"""Amazon States Language errors: the `States.*` names, an error raised while a state runs, and
how Retry and Catch match an error name (the developer guide's "Error handling").

Pure: no clock, no I/O. The retry delay takes its random number from the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ALL = "States.ALL"
TASK_FAILED = "States.TaskFailed"
TIMEOUT = "States.Timeout"
HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
RUNTIME = "States.Runtime"
DATA_LIMIT_EXCEEDED = "States.DataLimitExceeded"
INTRINSIC_FAILURE = "States.IntrinsicFailure"
RESULT_PATH_MATCH_FAILURE = "States.ResultPathMatchFailure"
PARAMETER_PATH_FAILURE = "States.ParameterPathFailure"
BRANCH_FAILED = "States.BranchFailed"
NO_CHOICE_MATCHED = "States.NoChoiceMatched"
PERMISSIONS = "States.Permissions"
EXCEED_TOLERATED_FAILURE_THRESHOLD = "States.ExceedToleratedFailureThreshold"
ITEM_READER_FAILED = "States.ItemReaderFailed"
RESULT_WRITER_FAILED = "States.ResultWriterFailed"
QUERY_EVALUATION_ERROR = "States.QueryEvaluationError"
# Not in the guide's list, but what AWS raises for a Map's ItemsPath that selects nothing.
REFERENCE_PATH_CONFLICT = "States.ReferencePathConflict"

KNOWN = frozenset(
    {
        ALL,
        TASK_FAILED,
        TIMEOUT,
        HEARTBEAT_TIMEOUT,
        RUNTIME,
        DATA_LIMIT_EXCEEDED,
        INTRINSIC_FAILURE,
        RESULT_PATH_MATCH_FAILURE,
        PARAMETER_PATH_FAILURE,
        BRANCH_FAILED,
        NO_CHOICE_MATCHED,
        PERMISSIONS,
        EXCEED_TOLERATED_FAILURE_THRESHOLD,
        ITEM_READER_FAILED,
        RESULT_WRITER_FAILED,
        QUERY_EVALUATION_ERROR,
        REFERENCE_PATH_CONFLICT,
    }
)

# The guide: "States.Runtime ... errors are not retriable, and will always cause the execution
# to fail. A retry or catch on States.ALL won't catch States.Runtime errors". A task's result
# over the payload limit (States.DataLimitExceeded) is a task failure that States.ALL catches
# (recorded against AWS); a state's own output over it fails the execution (machine.py).
TERMINAL = frozenset({RUNTIME})


class StatesError(Exception):
    """An error a state raised: `error` is the name Retry and Catch match, `cause` the text.

    `passed_on`: the error came from elsewhere (a task's failure, a branch's or an iteration's
    error) and keeps its cause as it is; the interpreter's own errors are located first."""

    def __init__(self, error: str, cause: str = "", *, passed_on: bool = False) -> None:
        super().__init__(f"{error}: {cause}" if cause else error)
        self.error = error
        self.cause = cause
        self.passed_on = passed_on


# The errors whose cause Step Functions opens with the state and the id of its entered event
# (recorded executions: a JSONPath or an intrinsic that finds nothing, a Choice's invalid path,
# a Wait's bad timestamp, a JSONata expression's failure, a Map's item reader).
LOCATED = frozenset({RUNTIME, QUERY_EVALUATION_ERROR, ITEM_READER_FAILED})


def located(exc: StatesError, state: str, entered_event: int) -> StatesError:
    """`exc` as the execution reports it: an error the interpreter raised itself while running
    `state` gets Step Functions' prefix "An error occurred while executing the state 'X'
    (entered at the event id #N). "; a passed-on error keeps its cause."""
    if exc.passed_on or exc.error not in LOCATED:
        return exc
    return StatesError(
        exc.error,
        f"An error occurred while executing the state '{state}' (entered at the event id "
        f"#{entered_event}). {exc.cause}",
        passed_on=True,
    )


def matches(error_equals: Sequence[str], error: str) -> bool:
    """Whether a retrier's or catcher's ErrorEquals matches `error`.

    States.ALL matches every error but the terminal ones; States.TaskFailed matches every
    error but States.Timeout (and the terminal ones); States.HeartbeatTimeout matches
    States.Timeout; any other name matches itself."""
    if error in error_equals:
        return True
    if error in TERMINAL:
        return False
    if error == TIMEOUT and HEARTBEAT_TIMEOUT in error_equals:
        # A missed heartbeat is reported as States.Timeout; States.HeartbeatTimeout matches it
        # in Retry and Catch (measured against us-east-1, as the floci emulator records).
        return True
    if ALL in error_equals:
        return True
    return TASK_FAILED in error_equals and error != TIMEOUT


@dataclass(frozen=True)
class Retrier:
    error_equals: tuple[str, ...]
    interval_seconds: float = 1.0
    max_attempts: int = 3
    backoff_rate: float = 2.0
    max_delay_seconds: float | None = None
    jitter: str = "NONE"  # "FULL" or "NONE"


def retry_delay(retrier: Retrier, retries_done: int, random: float) -> float:
    """The delay before retry number `retries_done + 1` of `retrier`: IntervalSeconds times
    BackoffRate to the power of the retries it already made, capped by MaxDelaySeconds; FULL
    jitter takes a uniformly random share of it (`random` in [0, 1))."""
    delay = retrier.interval_seconds * retrier.backoff_rate**retries_done
    if retrier.max_delay_seconds is not None:
        delay = min(delay, retrier.max_delay_seconds)
    if retrier.jitter == "FULL":
        delay *= random
    return delay


def pick_retrier(retriers: Sequence[Retrier], error: str) -> int | None:
    """The first retrier (in order) whose ErrorEquals matches: only that one is consulted, as
    the spec says, even when it has no attempts left."""
    for i, retrier in enumerate(retriers):
        if matches(retrier.error_equals, error):
            return i
    return None


def error_output(error: str, cause: str) -> dict[str, str]:
    """The error output a Catch passes on: `{"Error", "Cause"}`."""
    return {"Error": error, "Cause": cause}
