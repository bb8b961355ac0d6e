"""Domain errors.

Adapters translate SDK errors into these once; handlers translate these into replies.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ShepherdError(Exception):
    """Base class of every error the core raises on purpose."""


class PermanentError(ShepherdError):
    """Raised by an agent function for an error no retry can fix: the step fails at once."""

    def __init__(self, message: str, *, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name or type(self).__name__


class AgentNotFound(PermanentError):
    """The worker running a step has no agent registered under the step's `Agent` (its pool
    ships other agent modules). No redelivery can find it there, so the step fails at once,
    never retried."""

    def __init__(self, agent: str, registered: Iterable[str]) -> None:
        known = ", ".join(sorted(registered)) or "none"
        super().__init__(f"agent '{agent}' is not registered in this worker (registered: {known})")
        self.agent = agent


class InputPathNotFound(PermanentError):
    """A step's `InputPath` selects nothing in the value it names (a key or an index that is
    not there): no retry can change a recorded input or output, so the step fails at once."""


class MapItemsInvalid(PermanentError):
    """A map step's `ItemsPath` selects no array (or nothing) in the value it names: no retry
    can change a recorded input or output, so the map fails at once, before any item runs."""


class MapTooLarge(PermanentError):
    """A map step's items pass `limits.MAX_MAP_ITEMS`: it fails at once, before any item is
    written (docs/architecture.md, Caps)."""


class DefinitionError(ShepherdError):
    """A workflow definition is invalid; the message names the file and the field."""


class UnknownWorkflowType(ShepherdError):
    """A start names a workflow type no definition has."""

    def __init__(self, name: str, known: Iterable[str] = ()) -> None:
        from shepherd.suggest import did_you_mean  # noqa: PLC0415 - errors imports nothing else

        super().__init__(f"unknown workflow type '{name}'" + did_you_mean(name, known))
        self.name = name


class InputInvalid(ShepherdError):
    """The start input does not satisfy the definition's InputSchema (or a body's value is
    refused). `problems` lists every schema error found, (path, message) each, in document
    order, at most `limits.MAX_INPUT_PROBLEMS`; `field` is the first one's path."""

    def __init__(
        self, message: str, field: str, problems: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.field = field
        self.problems = problems


class IdempotencyConflict(ShepherdError):
    """The idempotency key was already used for a different request."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(
            f"idempotency key already used with a different request (workflow {workflow_id})"
        )
        self.workflow_id = workflow_id


class UploadError(ShepherdError):
    """An upload named by a request cannot be used; `field` is the request's field that named
    it (`input_upload` of a start, `output_upload` of a callback's success), `code` the
    stable error code the API and the events handler report."""

    code = "UploadError"

    def __init__(self, message: str, upload_id: str, field: str) -> None:
        super().__init__(message)
        self.upload_id = upload_id
        self.field = field


class UploadNotFound(UploadError):
    """No upload has this id, or it belongs to another caller (POST /payloads)."""

    code = "UploadNotFound"

    def __init__(self, upload_id: str, field: str = "input_upload") -> None:
        super().__init__(f"upload '{upload_id}' not found", upload_id, field)


class UploadUsed(UploadError):
    """The upload was already used (by a workflow's start or an attempt's success): each
    upload is single-use."""

    code = "UploadUsed"

    def __init__(self, upload_id: str, used_by: str, field: str = "input_upload") -> None:
        super().__init__(f"upload '{upload_id}' was already used (by {used_by})", upload_id, field)
        self.used_by = used_by


class UploadExpired(UploadError):
    """The upload's 15 minutes have passed before a request used it."""

    code = "UploadExpired"

    def __init__(self, upload_id: str, field: str = "input_upload") -> None:
        super().__init__(f"upload '{upload_id}' has expired: request a new one", upload_id, field)


class UploadRejected(UploadError):
    """The uploaded object is missing, or not what the upload declared (size, sha256)."""

    def __init__(
        self, code: str, message: str, upload_id: str = "", field: str = "input_upload"
    ) -> None:
        super().__init__(message, upload_id, field)
        self.code = code  # UploadMissing, UploadMismatch


class WorkflowNotFound(ShepherdError):
    """No workflow has this id (or the caller may not see it)."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"workflow '{workflow_id}' not found")
        self.workflow_id = workflow_id


class PathNotFound(ShepherdError):
    """The workflow runs a native definition: it keeps no state machine's path (its steps,
    in `GET /workflows/{id}`, are what it did)."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(
            f"workflow '{workflow_id}' runs a native definition: it has no state machine path "
            "(its steps are in GET /workflows/{id})"
        )
        self.workflow_id = workflow_id


class InvalidTransition(ShepherdError):
    """A request asks for a transition the workflow's current state does not allow."""


class StepNotFound(ShepherdError):
    """The workflow has no step of this name that the request can act on (an approve or a
    reject naming a step that is not an Approval)."""

    def __init__(self, workflow_id: str, step: str, what: str = "Approval") -> None:
        super().__init__(f"workflow {workflow_id} has no {what} step '{step}'")
        self.step = step


class ApprovalNotPending(ShepherdError):
    """The Approval step is not waiting for an answer: not ready yet, or already answered,
    timed out or cancelled (an answer given twice ends it once)."""

    def __init__(self, step: str, status: str) -> None:
        super().__init__(f"step '{step}' is not waiting for an answer (it is {status})")
        self.step = step
        self.status = status


class SignalUnknown(ShepherdError):
    """No WaitForSignal step of the workflow's definition waits for a signal of this name: it
    could never be taken, so it is not kept."""

    def __init__(self, workflow_id: str, name: str) -> None:
        super().__init__(f"no step of workflow {workflow_id} waits for a signal '{name}'")
        self.name = name


class SignalIdConflict(ShepherdError):
    """A signal id already kept for another signal (another name or payload)."""

    def __init__(self, signal_id: str) -> None:
        super().__init__(
            f"signal id '{signal_id}' was already used for a different signal (name or payload)"
        )
        self.signal_id = signal_id


class TooManySignals(ShepherdError):
    """The workflow already keeps its most signals waiting for a step (limits.MAX_SIGNALS_KEPT):
    nothing was written; one is accepted again once a step takes one."""

    def __init__(self, workflow_id: str, limit: int) -> None:
        super().__init__(
            f"workflow {workflow_id} already keeps {limit} signals no step has taken yet"
        )


class TooManyMatches(ShepherdError):
    """A signal sent by its match would reach more open workflows than limits.MAX_MATCHED (or
    its index entries run past limits.MAX_MATCH_ENTRIES): nothing was sent; narrow the match."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(
            f"signal '{name}' matches more than {limit} open workflows: nothing was sent"
        )


class TagInvalid(PermanentError):
    """A tag refused before anything was written: a key or value out of its bounds, or one
    more than limits.MAX_TAGS on a workflow. Permanent: raised in an agent by `ctx.tag`, no
    retry of the attempt can make it fit."""

    def __init__(self, message: str) -> None:
        super().__init__(message, name="TagInvalid")


class ConditionFailed(ShepherdError):
    """A conditional write lost: `current` is the item as it is now (None if it does not exist)."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        super().__init__("condition failed")
        self.current = current


class TransactionConflict(ShepherdError):
    """A transactional create lost on item `index`; `current` is that item as it is now."""

    def __init__(self, index: int, current: dict[str, Any] | None) -> None:
        super().__init__(f"transaction cancelled on item {index}")
        self.index = index
        self.current = current


class StoreUnavailable(ShepherdError):
    """A store call failed for a reason that passes (throttling, a timeout, a 5xx) after the
    SDK's own retries. A write may or may not have landed; callers re-read before acting.

    `throttled`: the service said it was over capacity (counted by the `Throttles` metric)."""

    def __init__(self, message: str, *, throttled: bool = False, service: str = "dynamodb"):
        super().__init__(message)
        self.throttled = throttled
        self.service = service


class HeartbeatTooSoon(ShepherdError):
    """A callback heartbeat came sooner than `limits.MIN_CALLBACK_HEARTBEAT_MS` after the last
    one for its token: nothing was written (429, retry after `retry_after` seconds)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"one heartbeat per task token per second at most; retry in {retry_after}s"
        )
        self.retry_after = retry_after


class OperatorOnly(ShepherdError):
    """An action on something every caller shares (an agent pool) by a caller the deployment
    does not name as an operator (403)."""


class ScheduleNotFound(ShepherdError):
    """No definition of this deployment has a schedule of this name (404)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no schedule '{name}' in this deployment's definitions")
        self.name = name


class NotEnoughTime(ShepherdError):
    """A task was left unclaimed: the invocation's time left could not hold its longest
    attempt (TimeoutSeconds). It goes back to its queue at once; no attempt was spent."""


class DeliveryError(ShepherdError):
    """Sending task messages or events failed; the supervisor recovers lost dispatches."""


class PayloadTooLarge(ShepherdError):
    """A payload is over its documented cap (shepherd.limits); nothing was written."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes; the limit is {limit} bytes")
        self.what = what
        self.size = size
        self.limit = limit

    @property
    def code(self) -> str:
        """`InputTooLarge`, `OutputTooLarge`, `DetailsTooLarge`: the API's error code."""
        return "".join(w.capitalize() for w in self.what.split()) + "TooLarge"


class OutputRejected(PayloadTooLarge):
    """A callback's output was over its cap: the attempt was failed (OutputTooLarge)."""

    def __init__(self, size: int, limit: int, message: str) -> None:
        super().__init__("output", size, limit)
        self.args = (message,)


class InputTooLarge(PayloadTooLarge):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__("input", size, limit)


class ItemTooLarge(ShepherdError):
    """A write would make an item exceed DynamoDB's item limit; nothing was applied.

    The caps make this impossible for accepted requests; seeing it means a bug, which the
    supervisor contains to the one workflow it concerns.
    """


class OutputTooLarge(PermanentError):
    """An agent's or a callback's output is over its cap: the attempt fails, not retried."""

    def __init__(self, message: str) -> None:
        super().__init__(message, name="OutputTooLarge")


class OutputInvalid(PermanentError):
    """An agent's output is not a JSON value within the limits (NaN, too deep, a set...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, name="OutputInvalid")


class DetailsTooLarge(PermanentError):
    """Progress details over their cap, raised in the agent function that reported them."""

    def __init__(self, message: str) -> None:
        super().__init__(message, name="DetailsTooLarge")


class TaskTokenInvalid(ShepherdError):
    """No waiting attempt holds this token (malformed, forged, or for an unknown step)."""


class TaskTokenStale(ShepherdError):
    """The token's attempt is over: finished, timed out, or superseded by a newer attempt."""


class AttemptSuperseded(ShepherdError):
    """Raised inside an agent function whose attempt was fenced out: stop, record nothing."""
