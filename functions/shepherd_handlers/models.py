"""API bodies (pydantic): what callers send and get back; never table items."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from shepherd.keys import UPLOAD_ID_PATTERN
from shepherd.limits import (
    MAX_APPROVAL_COMMENT_CHARS,
    MAX_ERROR_CAUSE,
    MAX_ERROR_NAME,
    MAX_HEARTBEAT_BATCH,
    MAX_INPUT_PROBLEMS,
    MAX_MATCH_FIELDS,
    MAX_SIGNAL_ID_CHARS,
    MAX_TAG_VALUE_CHARS,
    MAX_TAGS,
    MAX_UPLOAD_BYTES,
    SIGNAL_NAME,
    TAG_KEY,
    UPLOAD_SECONDS,
)

from shepherd_handlers import either


class StartWorkflowRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            **either.schema("input", "input_upload"),
            "examples": [
                {
                    "type": "order_fulfilment",
                    "input": {
                        "order_id": "o-1001",
                        "customer": "ada",
                        "amount": 42.5,
                        "items": [{"sku": "A-1", "qty": 2}],
                    },
                    "idempotency_key": "order-1001",
                }
            ],
        },
    )

    type: Annotated[
        str, Field(min_length=1, max_length=64, description="Workflow type (a definition name)")
    ]
    input: Annotated[
        Any, Field(description="Workflow input; must satisfy the definition's InputSchema")
    ] = None
    input_upload: Annotated[
        str | None,
        Field(
            pattern=UPLOAD_ID_PATTERN,
            description="Instead of `input`: the `upload_id` of a POST /payloads upload whose "
            "object is the input (up to 100 MiB). Single-use; the caller's own; unexpired",
        ),
    ] = None
    idempotency_key: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=128,
            description="Same key + same body returns the same workflow",
        ),
    ] = None
    tags: Annotated[
        dict[
            Annotated[str, Field(pattern=TAG_KEY)],
            Annotated[str, Field(max_length=MAX_TAG_VALUE_CHARS)],
        ]
        | None,
        Field(
            max_length=MAX_TAGS,
            description="Business keys to find it by (GET /workflows?tag=key:value): at most "
            "10, a key of at most 64 characters, a value of at most 256",
        ),
    ] = None

    @model_validator(mode="after")
    def _one_input(self) -> StartWorkflowRequest:
        either.inline_or_upload(self, "input", "input_upload")
        return self


def _json_integer(value: Any) -> Any:
    """An integer as JSON Schema means it (`10` or `10.0`), not text or a boolean, which
    pydantic's lax mode would turn into one."""
    if isinstance(value, str | bool):
        raise ValueError("must be a JSON number")
    return value


class UploadRequest(BaseModel):
    """A presigned upload of a workflow input larger than a request may carry (5 MiB)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"size": 20971520, "sha256": "ab" * 32}]},
    )

    size: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_UPLOAD_BYTES,
            description=f"Exact bytes of the JSON to upload (at most {MAX_UPLOAD_BYTES})",
        ),
        BeforeValidator(_json_integer),
    ]
    sha256: Annotated[
        str | None,
        Field(
            pattern=r"^[0-9a-fA-F]{64}$",
            description="Hex sha256 of those bytes; verified when a start uses the upload",
        ),
    ] = None


class UploadView(BaseModel):
    upload_id: Annotated[str, Field(description="Name it as `input_upload` in a start")]
    url: Annotated[str, Field(description="POST a multipart form here: `fields`, then `file`")]
    fields: Annotated[dict[str, str], Field(description="Form fields, in this order")]
    key: Annotated[str, Field(description="The object key the upload writes")]
    size: int
    sha256: str | None = None
    expires_at: Annotated[
        str, Field(description=f"When the upload and its POST expire ({UPLOAD_SECONDS} s)")
    ]


class WorkflowAccepted(BaseModel):
    workflow_id: str
    type: str
    status: str
    created: Annotated[
        bool, Field(description="False when an idempotent replay returned an existing workflow")
    ]
    location: str


class AttemptView(BaseModel):
    attempt: int
    outcome: Annotated[
        str,
        Field(
            description="ok, error, timeout, heartbeat_timeout (the supervisor timed it out), "
            "input_replaced (an operator gave the step a new input at a resume), or "
            "undeliverable (its pool has no queue any more: never sent, never run)"
        ),
    ]
    error: str | None = None
    message: Annotated[
        str | None,
        Field(
            description="The start of its error's message (100 characters): the step's `error` "
            "holds its last error whole"
        ),
    ] = None
    started_at: Annotated[str | None, Field(description="When its agent claimed it")] = None
    at: Annotated[str, Field(description="When it ended (or the input was replaced)")]
    by: Annotated[str | None, Field(description="Who replaced the input")] = None


class PayloadLink(BaseModel):
    """A large payload: a presigned download valid for a few minutes, its size and sha256."""

    url: Annotated[str, Field(description="A presigned GET, valid for 5 minutes")]
    size: Annotated[int, Field(description="Bytes of its canonical JSON")]
    sha256: Annotated[str, Field(description="Hex sha256 of those bytes")]


_LARGE = "Set instead of `{}` when the payload is large (over the inline threshold)"


class HistoryEventView(BaseModel):
    type: Annotated[str, Field(description="The event's detail-type, as published")]
    at: Annotated[str | None, Field(description="When it happened (the change it announces)")]
    detail: Annotated[dict[str, Any], Field(description="The event's detail, as published")]


class HistoryView(BaseModel):
    items: list[HistoryEventView]
    next_token: str | None = None


class MapItemView(BaseModel):
    """One item of a map step: its unit as a step's (issue 24)."""

    index: int
    status: Annotated[
        str,
        Field(
            description="A step's statuses; QUEUED with no attempt yet: sent, not claimed; "
            "PENDING: not sent yet; CANCELLED with no attempt: never sent (the map stopped)"
        ),
    ]
    attempt: int = 0
    attempts_total: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    error: dict[str, Any] | None = None
    output: Any = None
    output_ref: Annotated[PayloadLink | None, Field(description=_LARGE.format("output"))] = None
    children: Annotated[
        list[str],
        Field(
            description="A map of child workflows: the ids of the children the item's attempts "
            "started, oldest first (the last is the current one)"
        ),
    ] = []


class MapItemsView(BaseModel):
    items: list[MapItemView]
    total: Annotated[int, Field(description="Items of the map")]
    next_token: str | None = None


class ErrorTextView(BaseModel):
    kind: Annotated[str, Field(description="step or compensation")]
    step: str
    attempt: int
    type: str
    message: Annotated[str, Field(description="Uncut")]
    traceback: Annotated[str | None, Field(description="As text, newlines and all")] = None
    truncated: Annotated[bool, Field(description="The traceback was cut at 1 MiB")] = False


class PreviewField(StrEnum):
    INPUT = "input"
    OUTPUT = "output"
    DETAILS = "details"
    ERROR = "error"


class PayloadPreviewView(BaseModel):
    """The first bytes of one payload, as text (never the whole of a large one)."""

    workflow_id: str
    kind: Annotated[
        Literal["workflow", "step", "compensation"], Field(description="Whose payload it is")
    ]
    step: Annotated[str | None, Field(description="The step's or compensation's name")] = None
    field: Annotated[PreviewField, Field(description="input, output, details or error")]
    size: Annotated[int, Field(description="Bytes of the whole payload's canonical JSON")]
    sha256: Annotated[str, Field(description="The whole payload's sha256 (hex)")]
    large: Annotated[
        bool,
        Field(description="Kept in the payload bucket: GET /workflows/{id} links it (`_ref`)"),
    ]
    bytes: Annotated[int, Field(description="Bytes of the payload that `text` holds")]
    text: Annotated[
        str,
        Field(description="The payload's first bytes as UTF-8, cut at a whole character"),
    ]
    truncated: Annotated[bool, Field(description="True: `text` is not the whole payload")]


class SeriesBucketView(BaseModel):
    start: Annotated[str, Field(description="The bucket's first instant (inclusive)")]
    end: Annotated[str, Field(description="The bucket's last instant (inclusive)")]
    started: Annotated[int, Field(description="Workflows created in the bucket")]
    succeeded: Annotated[int, Field(description="Of those, how many are SUCCEEDED now")]
    failed: Annotated[int, Field(description="Of those, how many are FAILED now")]
    compensated: Annotated[int, Field(description="Of those, how many are COMPENSATED now")]
    capped: Annotated[
        bool,
        Field(description="True: the counts are at least these (the read stopped at its cap)"),
    ] = False


class WorkflowSeriesView(BaseModel):
    """The caller's starts, successes and failures per time bucket (by creation time)."""

    created_after: str
    created_before: str
    bucket_seconds: Annotated[float, Field(description="Each bucket's width")]
    buckets: list[SeriesBucketView]
    capped: bool = False


class DeadlineView(BaseModel):
    at: Annotated[str | None, Field(description="None: no deadline runs (a paused pool)")] = None
    why: Annotated[
        str,
        Field(
            description="heartbeat, timeout, dispatch, backoff, or "
            "'waiting for pool <name> (paused)'"
        ),
    ]


class MapCountsView(BaseModel):
    """A map step's items by where they are (issue 24): bounded, read from the map's own
    counters, never from its items."""

    total: int
    pending: Annotated[int, Field(description="Not sent yet (none once the map stopped)")]
    running: Annotated[int, Field(description="In its window: sent, claimed or retrying")]
    succeeded: int
    failed: int
    cancelled: Annotated[
        int, Field(description="Stopped before they ran, when the map failed or was halted")
    ]
    compensated: Annotated[int, Field(description="Items whose compensation succeeded")]
    status: Annotated[
        str, Field(description="The map's verdict: RUNNING, SUCCEEDED, FAILED, CANCELLED")
    ]
    max_concurrency: Annotated[int, Field(description="Items in flight at most")]


class StepView(BaseModel):
    name: str
    status: str
    attempt: int
    started_at: Annotated[str | None, Field(description="The current attempt's claim")] = None
    heartbeat_at: str | None = None
    dispatched_at: str | None = None
    available_at: Annotated[str | None, Field(description="A queued retry's backoff end")] = None
    first_claimed_at: Annotated[
        str | None, Field(description="Its first claim: from then on it may have acted")
    ] = None
    finished_at: str | None = None
    wake_at: Annotated[
        str | None,
        Field(
            description="A resting Wait step: when it wakes; an Approval or a WaitForSignal "
            "step: when it times out"
        ),
    ] = None
    decision: Annotated[
        dict[str, Any] | None,
        Field(
            description="An Approval step's answer: verdict, by, at, comment; a WaitForSignal "
            "step's signal: signal, sequence, signal_id, sender, sent_at"
        ),
    ] = None
    dispatches: int = 0
    error: dict[str, Any] | None = None
    output: Any = None
    variables: Annotated[
        dict[str, Any] | None,
        Field(description="The variables its Assign set (its descendants read them as $name)"),
    ] = None
    details: Annotated[Any, Field(description="Progress details its attempts reported")] = None
    input: Annotated[Any, Field(description="An operator's replacement input, if any")] = None
    output_ref: Annotated[PayloadLink | None, Field(description=_LARGE.format("output"))] = None
    details_ref: Annotated[PayloadLink | None, Field(description=_LARGE.format("details"))] = None
    input_ref: Annotated[PayloadLink | None, Field(description=_LARGE.format("input"))] = None
    error_ref: Annotated[
        PayloadLink | None,
        Field(
            description="The last agent error's full text (`{type, message, traceback}`, the "
            "message uncut) when `error` had to cut it or it had a traceback"
        ),
    ] = None
    attempts: list[AttemptView] = []
    next_deadline: Annotated[
        DeadlineView | None,
        Field(
            description="A live step's next deadline: when the supervisor acts if nothing "
            "else happens, and why"
        ),
    ] = None
    attempts_total: Annotated[
        int, Field(description="Ended attempts, also those older than `attempts` keeps")
    ] = 0
    iterations: Annotated[
        int | None,
        Field(
            description="A `Repeat` step: the iterations ended (its `output` is the last "
            "one's; the attempt in flight runs the next); absent before the first ends"
        ),
    ] = None
    children: Annotated[
        list[str],
        Field(
            description="A child-workflow step: the ids of the children its attempts started, "
            "oldest first (the last is the current one)"
        ),
    ] = []
    map: Annotated[
        MapCountsView | None,
        Field(
            description="A map step once opened: its items' counts (page the items with "
            "GET /workflows/{id}/steps/{step}/items)"
        ),
    ] = None


class WorkflowView(BaseModel):
    workflow_id: str
    type: str
    status: str
    parent_id: Annotated[
        str | None, Field(description="A child workflow: the workflow whose step started it")
    ] = None
    parent_step: Annotated[str | None, Field(description="A child workflow: that step")] = None
    parent_item: Annotated[
        int | None,
        Field(description="A child workflow of a map's item: that item's index"),
    ] = None
    definition_hash: str
    created_at: str
    updated_at: str
    finished_at: str | None = None
    input: Any = None
    input_ref: Annotated[PayloadLink | None, Field(description=_LARGE.format("input"))] = None
    output: Annotated[
        Any,
        Field(
            description="Once SUCCEEDED: each step's output by name (small ones); a state "
            "machine's: the machine's output"
        ),
    ] = None
    output_ref: Annotated[
        dict[str, PayloadLink] | None,
        Field(description="Once SUCCEEDED: the large step outputs by name (absent from output)"),
    ] = None
    error: dict[str, Any] | None = None
    cause: Annotated[
        str | None,
        Field(
            description="A state machine that FAILED by design: the Fail state's or error's cause"
        ),
    ] = None
    failure: Annotated[
        str | None,
        Field(
            description="`definition`: a state machine's Fail state or uncaught error ended it "
            "(designed; the operator's alarm does not count it)"
        ),
    ] = None
    pause: Annotated[
        dict[str, Any] | None,
        Field(description="Why it is PAUSED: reason (failure or operator), step, error, by"),
    ] = None
    paused_at: str | None = None
    pause_timeout_at: Annotated[
        str | None, Field(description="A PAUSED workflow's pause timeout: it then unwinds")
    ] = None
    timeout_at: Annotated[
        str | None,
        Field(
            description=(
                "A RUNNING workflow's own TimeoutSeconds: not ended by then, it fails with "
                "States.Timeout"
            )
        ),
    ] = None
    redrives: int = 0
    tags: Annotated[
        dict[str, str] | None, Field(description="Its tags (at its start, and its agents')")
    ] = None
    steps: list[StepView]
    compensations: list[StepView]


class WorkflowSummaryView(BaseModel):
    workflow_id: str
    type: str
    status: str
    created_at: str
    finished_at: str | None = None
    updated_at: str | None = None
    idempotency_key: str | None = None
    tags: dict[str, str] | None = None
    error: Annotated[
        dict[str, Any] | None,
        Field(
            description="Why it failed or paused: type, message, step, operator_needed "
            "(the workflow's error, else its pause's cause)"
        ),
    ] = None


class ListSort(StrEnum):
    NEWEST = "newest"
    OLDEST = "oldest"


class StatusCountView(BaseModel):
    status: str
    count: int
    capped: Annotated[
        bool, Field(description="True: at least `count` (counting stops at 10,000)")
    ] = False


class WorkflowCountsView(BaseModel):
    counts: list[StatusCountView]
    total: int
    capped: bool = False


class WorkflowListView(BaseModel):
    items: list[WorkflowSummaryView]
    next_token: str | None = None


class PendingApprovalView(BaseModel):
    """An Approval step waiting for an answer the caller may give."""

    workflow_id: str
    type: Annotated[str, Field(description="The workflow's type")]
    step: str
    requested_at: Annotated[str, Field(description="When the step started waiting (ISO 8601)")]
    due_at: Annotated[
        str,
        Field(description="When it fails with ApprovalTimedOut unless answered (ISO 8601)"),
    ]


class ApprovalListView(BaseModel):
    items: list[PendingApprovalView]
    next_token: str | None = None


class WorkflowStatusView(BaseModel):
    workflow_id: str
    status: str


class DefinitionSummaryView(BaseModel):
    name: str
    hash: str
    comment: str | None = None
    steps: list[str]
    pools: list[str]


class DefinitionListView(BaseModel):
    items: list[DefinitionSummaryView]


class ScheduleView(BaseModel):
    workflow_type: str
    name: str
    expression: str
    timezone: str
    enabled: bool
    next: Annotated[
        list[str],
        Field(
            description="The next firing times (ISO 8601, UTC) of an enabled cron or at "
            "schedule; a rate's depend on when it was deployed, so none are given"
        ),
    ] = []
    paused: Annotated[
        bool,
        Field(
            description="Paused by an operator (POST /schedules/{name}/pause): its firings "
            "start nothing until a resume"
        ),
    ] = False
    at: Annotated[
        str | None, Field(description="When it was last paused or resumed (ISO 8601, UTC)")
    ] = None
    by: Annotated[
        str | None,
        Field(description="Who last paused or resumed it (an IAM ARN): shown to operators only"),
    ] = None


class ScheduleListView(BaseModel):
    items: list[ScheduleView]
    operator: Annotated[
        bool,
        Field(
            description="Whether the caller is an operator of this deployment (who alone may "
            "pause or resume a schedule): a console offers those actions only then"
        ),
    ] = False


class DefinitionView(DefinitionSummaryView):
    definition: dict[str, Any]


class HeartbeatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    details: Any = None


class BatchedHeartbeat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: Annotated[str, Field(min_length=8, max_length=1024, description="A task token")]
    details: Any = None


class HeartbeatBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    heartbeats: Annotated[
        list[BatchedHeartbeat],
        Field(
            min_length=1,
            max_length=MAX_HEARTBEAT_BATCH,
            description=f"Up to {MAX_HEARTBEAT_BATCH} heartbeats, each answered on its own",
        ),
    ]


class SuccessRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra=either.schema("output", "output_upload")
    )
    output: Annotated[Any, Field(description="The attempt's result (up to the body's 5 MiB)")] = (
        None
    )
    output_upload: Annotated[
        str | None,
        Field(
            pattern=UPLOAD_ID_PATTERN,
            description="Instead of `output`: the `upload_id` of the caller's POST /payloads "
            "upload whose object is the result (up to 100 MiB). Single-use; unexpired",
        ),
    ] = None

    @model_validator(mode="after")
    def _one_output(self) -> SuccessRequest:
        either.inline_or_upload(self, "output", "output_upload")
        return self


class FailureRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_ERROR_NAME,
            description="Error name; matched against NonRetryableErrors",
        ),
    ] = "TaskFailed"
    cause: Annotated[str | None, Field(max_length=MAX_ERROR_CAUSE)] = None


class TaskView(BaseModel):
    workflow_id: str
    step: str
    kind: str
    attempt: int
    status: str


class FieldProblem(BaseModel):
    """One problem of a refused input: where, and what is wrong there."""

    field: Annotated[str, Field(description="Its path in the body, e.g. `input.items[0].qty`")]
    message: str


class ErrorDetail(BaseModel):
    code: Annotated[str, Field(description="Stable machine-readable code")]
    message: str
    field: Annotated[str | None, Field(description="The offending field, when there is one")] = None
    problems: Annotated[
        list[FieldProblem] | None,
        Field(
            description="InvalidInput: every way the input breaks the InputSchema, in order "
            f"(at most {MAX_INPUT_PROBLEMS}; `field` is the first's)"
        ),
    ] = None
    request_id: Annotated[
        str | None,
        Field(description="The request's id (API Gateway's): quote it when reporting a problem"),
    ] = None


class HeartbeatResult(BaseModel):
    status: Annotated[int, Field(description="What POST /tasks/heartbeat would have answered")]
    task: TaskView | None = None
    error: ErrorDetail | None = None


class HeartbeatBatchReply(BaseModel):
    results: Annotated[list[HeartbeatResult], Field(description="One per heartbeat, in order")]


class ErrorBody(BaseModel):
    """The one shape of every error response."""

    error: ErrorDetail


class ApproveRequest(BaseModel):
    """An approval's answer: an optional comment and, to approve, an optional output."""

    model_config = ConfigDict(extra="forbid")

    comment: Annotated[str | None, Field(max_length=MAX_APPROVAL_COMMENT_CHARS)] = None
    output: Annotated[
        Any,
        Field(
            description="The step's output; absent: `{approved: true, by, comment}`",
        ),
    ] = None


class SignalRequest(BaseModel):
    """A signal into a running workflow: its payload (any JSON, within the inline payload
    cap) and an optional id a retry repeats, so it is kept once."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"payload": {"quantity": 3}, "signal_id": "amend-o-1001-1"}]
        },
    )

    payload: Annotated[
        Any, Field(description="The signal's payload: the output of the step that takes it")
    ] = None
    signal_id: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=MAX_SIGNAL_ID_CHARS,
            pattern=r"^[\x21-\x7e]+$",
            description="A dedupe key: the same id with the same signal is kept once (202 "
            "again); with another name or payload, 409 SignalIdConflict",
        ),
    ] = None


class SignalMatchRequest(SignalRequest):
    """A signal to every open workflow of the caller whose WaitForSignal step of this name
    names a `Match` on these values (`POST /signals`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "amend",
                    "match": {"order_id": "o-1001"},
                    "payload": {"quantity": 3},
                    "signal_id": "amend-o-1001-1",
                }
            ]
        },
    )

    name: Annotated[str, Field(pattern=SIGNAL_NAME, description="The signal's name")]
    match: Annotated[
        dict[Annotated[str, Field(pattern=TAG_KEY)], str | int | float | bool],
        Field(
            min_length=1,
            max_length=MAX_MATCH_FIELDS,
            description="The matched fields and their values, as the step's Match names them "
            '(compared as JSON: "7" is not 7)',
        ),
    ]


class SignalView(BaseModel):
    """A signal accepted (kept, or taken at once by a step waiting for it)."""

    workflow_id: str
    name: str
    sequence: Annotated[int, Field(description="Its number in its name's queue, from 0")]
    signal_id: str | None = None
    duplicate: Annotated[
        bool, Field(description="This request repeated a signal id already kept: nothing new")
    ]
    taken_by: Annotated[
        str | None, Field(description="The WaitForSignal step that took it at once, if one")
    ] = None


class PendingSignalView(BaseModel):
    """A signal kept that no step has taken yet."""

    name: str
    sequence: int
    payload: Any = None
    signal_id: str | None = None
    sender: str | None = None
    sent_at: str


class PathEntryView(BaseModel):
    """A state a state machine entered (issue 42.4), as Step Functions' history shows it."""

    number: Annotated[int, Field(description="The entry's place in the path, from 0")]
    state: str
    visit: Annotated[int, Field(description="This state's visit: 1, or more in a loop")]
    input: Annotated[Any, Field(description="The state's input (absent when large)")] = None
    input_ref: Annotated[PayloadLink | None, Field(description=_LARGE.format("input"))] = None
    output: Annotated[Any, Field(description="Its output; absent while it runs")] = None
    output_ref: Annotated[PayloadLink | None, Field(description=_LARGE.format("output"))] = None
    entered_at: str
    exited_at: Annotated[str | None, Field(description="None while the state runs")] = None


class PathView(BaseModel):
    items: Annotated[list[PathEntryView], Field(description="In the order entered")]
    next_token: str | None = None


class PendingSignalsView(BaseModel):
    """A workflow's signals: the names its steps wait for and the signals kept for them."""

    waits: Annotated[
        dict[str, list[str]],
        Field(description="Each signal name its WaitForSignal steps wait for -> those steps"),
    ]
    pending: Annotated[
        list[PendingSignalView], Field(description="Kept, not taken yet; oldest first per name")
    ]


class SignalMatchView(BaseModel):
    """A signal sent by its match: what each matched open workflow did with it."""

    name: str
    signals: Annotated[
        list[SignalView], Field(description="One per open workflow matched, newest first")
    ]


class RejectRequest(BaseModel):
    """A rejection's optional comment (recorded, and in the step's `Rejected` error)."""

    model_config = ConfigDict(extra="forbid")

    comment: Annotated[str | None, Field(max_length=MAX_APPROVAL_COMMENT_CHARS)] = None


class ResumeRequest(BaseModel):
    """Optionally, a replacement input for one step (recorded in its history)."""

    # An input names its step: the same rule in JSON Schema, for the OpenAPI document.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"required": ["input"]},
            "then": {"required": ["step"], "properties": {"step": {"type": "string"}}},
        },
    )

    step: Annotated[str | None, Field(min_length=1, max_length=64)] = None
    input: Annotated[Any, Field(description="The step's replacement input (JSON)")] = None

    @model_validator(mode="after")
    def _input_names_its_step(self) -> ResumeRequest:
        # A replacement input belongs to one step: without `step` it would be dropped silently.
        if "input" in self.model_fields_set and self.step is None:
            raise ValueError("input needs step: name the step whose input it replaces")
        return self


class BacklogView(BaseModel):
    visible: int
    in_flight: int
    delayed: int


class RateLimitView(BaseModel):
    per_second: float
    burst: int


class PoolView(BaseModel):
    name: str
    paused: bool
    paused_at: str | None = None
    resumed_at: str | None = None
    by: str | None = None
    backlog: BacklogView | None = None
    # Its event source: records per invocation and batches at once (the construct's
    # pool_settings batch_size and max_concurrency, or their defaults).
    batch_size: int | None = None
    max_concurrency: int | None = None
    # The pool's declared rate limit (docs/architecture.md, Pools that protect what they call).
    rate_limit: RateLimitView | None = None
    # Its circuit breaker's state, if it declares one.
    circuit: CircuitView | None = None


class CircuitChangeView(BaseModel):
    at: str
    from_state: Annotated[str, Field(alias="from")]
    to: str
    why: str

    model_config = ConfigDict(populate_by_name=True)


class CircuitView(BaseModel):
    """A pool's circuit breaker: its state, since when, an operator's forced mode, and its
    last transitions (docs/architecture.md, the circuit breaker)."""

    state: Literal["closed", "open", "half_open"]
    since: str | None = None
    mode: Literal["auto", "open", "closed"] = "auto"
    history: list[CircuitChangeView] = []


class CircuitRequest(BaseModel):
    """Force the pool's circuit `open` or `close`d, or give it back to its breaker (`auto`)."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["open", "close", "auto"]


class PoolListView(BaseModel):
    items: list[PoolView]
    operator: Annotated[
        bool,
        Field(
            description="Whether the caller is an operator of this deployment (who alone may "
            "pause or resume a pool or force its circuit): a console offers those actions only then"
        ),
    ] = False
