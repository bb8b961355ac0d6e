"""`StartWorkflow` events on the Shepherd bus start workflows, with the API's validation and
idempotency; `Signal` events send signals into running workflows, as
`POST /workflows/{id}/signals/{name}` does (issue 37).

Who owns the workflow is never taken from the event's content: anyone allowed to put events on
the bus could otherwise start workflows as any principal and take over that principal's
idempotency keys. Nor from its `source` alone, which whoever puts the event chooses. The owner
is the principal the deployment maps the event's `source` to (`Settings.event_owners`, env
SHEPHERD_EVENT_OWNERS), and the bus enforces the mapping: its resource policy denies
`PutEvents` of a mapped source to every principal but the one it maps to, and `StartWorkflow`
from any source not mapped (docs/api.md, Events). An event from a source the deployment does
not map is rejected here too (`SourceNotMapped`: the local stack has no bus policy), and so is
an event that carries `detail.owner`. A `Signal` event is sent as the same principal: it
reaches a workflow that principal owns, or whose definition lists it in `SignalSenders`.

A definition's schedule fires as a `StartWorkflow` event from `shepherd.schedule` (EventBridge
Scheduler invokes this function directly; the bus refuses that source), owned by the
deployment's `schedule_owner`, its idempotency key `schedule:<name>:<scheduled time>`. A
firing of a paused schedule (the table's schedule item) starts nothing (`ScheduleSkipped`).

A start event without an `idempotency_key` takes `event:<the event's id>`: EventBridge's
retries, Lambda's and a replay (`shepherd replay-starts`, the bus archive) hand the function the
same event, and the same id never starts a second workflow.

`input_upload` instead of `input` names a POST /payloads upload (an input over the event's
256 KB, up to 100 MiB) that the owner made: the owner must be an IAM principal that
`event_owners` maps the source to.

A bad event (malformed envelope, a detail that is not strict JSON within the limits, an
unknown type, an invalid or oversized input, a reused key, an upload that is not the
owner's, used, expired or not as declared) is logged and counted
(`StartEventsRejected`) and the invocation succeeds: a retry would fail the same way. Only
an infrastructure error (DynamoDB, SQS) raises, for Lambda's bounded asynchronous retries.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import ValidationError, parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, model_validator
from shepherd import jsonsafe, schedules
from shepherd.errors import (
    IdempotencyConflict,
    InputInvalid,
    InvalidTransition,
    PayloadTooLarge,
    ScheduleNotFound,
    SignalIdConflict,
    SignalUnknown,
    TagInvalid,
    TooManyMatches,
    TooManySignals,
    UnknownWorkflowType,
    UploadError,
    WorkflowNotFound,
)
from shepherd.jsonsafe import JsonRejected
from shepherd.keys import UPLOAD_ID_PATTERN
from shepherd.limits import MAX_MATCH_FIELDS, MAX_SIGNAL_ID_CHARS, SIGNAL_NAME, TAG_KEY
from shepherd.observability import SIGNAL_DETAIL_TYPE

from shepherd_handlers import either
from shepherd_handlers.runtime import count_throttles, engine, logger, metrics, tracer

REJECTED_METRIC = "StartEventsRejected"
SKIPPED_METRIC = "ScheduleSkipped"  # a paused schedule's firing, acknowledged
# How far ahead of this function's clock a firing's time may be (Scheduler's clock and
# Lambda's differ a little; a rejected firing is never retried). Harmless to a forger: the
# type and input must be the definition's, so the genuine firing finds the same workflow.
FIRING_SKEW = timedelta(minutes=1)


class StartWorkflowDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Annotated[str, Field(min_length=1, max_length=64)]
    input: Any = None
    # An input over the event's 256 KB: the upload_id of a POST /payloads upload made by the
    # principal the event's source maps to (`event_owners`), as for an API start.
    input_upload: Annotated[str | None, Field(pattern=UPLOAD_ID_PATTERN)] = None
    idempotency_key: Annotated[str | None, Field(min_length=1, max_length=128)] = None
    # Business keys to find it by, as an API start's (checked by the engine, so a bad one is
    # the API's `TagInvalid` with its reason; a firing carries none).
    tags: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_input(self) -> StartWorkflowDetail:
        either.inline_or_upload(self, "input", "input_upload")
        return self


class StartWorkflowEvent(EventBridgeModel):
    detail: StartWorkflowDetail


EVENT_KEY_PREFIX = "event:"


def start_key(given: str | None, event_id: str) -> str:
    """A start's idempotency key: the one the event gives (a schedule firing's is
    `schedule:<name>:<time>`), else one from the event's id, so that a redelivery or a replay
    of the same event returns the workflow it started."""
    return given if given is not None else EVENT_KEY_PREFIX + event_id


class SignalDetail(BaseModel):
    """A `Signal` event's detail: the body of `POST /workflows/{id}/signals/{name}` with the
    workflow and the name; or, instead of the workflow, a `match` (`POST /signals`): every
    open workflow of the sender waiting on those values (issue 37.3)."""

    model_config = ConfigDict(extra="forbid")

    workflow_id: Annotated[
        str | None, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    ] = None
    match: Annotated[
        dict[Annotated[str, Field(pattern=TAG_KEY)], str | int | float | bool] | None,
        Field(min_length=1, max_length=MAX_MATCH_FIELDS),
    ] = None
    name: Annotated[str, Field(pattern=SIGNAL_NAME)]
    payload: Any = None
    signal_id: Annotated[
        str | None, Field(min_length=1, max_length=MAX_SIGNAL_ID_CHARS, pattern=r"^[\x21-\x7e]+$")
    ] = None


class SignalEvent(EventBridgeModel):
    detail: SignalDetail


def owner_of(source: str) -> str | None:
    """The owner of a workflow an event from `source` starts (None: the source is not mapped,
    and the event starts nothing); a schedule's firing is owned by `schedule_owner`."""
    return engine().settings.owner_of(source)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@count_throttles
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    detail = event.get("detail") if isinstance(event, dict) else None
    if isinstance(detail, dict) and "owner" in detail:
        return _rejected(
            "OwnerNotAccepted",
            "detail.owner is not accepted: the owner follows from the event's account and "
            "source (see docs/api.md, Events)",
        )
    if isinstance(event, dict) and event.get("detail-type") == SIGNAL_DETAIL_TYPE:
        return _signal(event)
    return _start(event)


def _start(event: dict[str, Any]) -> dict[str, Any]:
    """A `StartWorkflow` event (or a schedule's firing): a workflow started as its source's
    owner, with the API's validation and idempotency."""
    try:
        jsonsafe.check(event.get("detail") if isinstance(event, dict) else None, what="detail")
        parsed = parse(event=event, model=StartWorkflowEvent)
    except JsonRejected as exc:
        return _rejected(exc.code, exc.message)
    except ValidationError as exc:
        return _rejected("InvalidEvent", str(exc))
    detail = parsed.detail
    owner = owner_of(parsed.source)
    if owner is None:
        return _rejected(
            "SourceNotMapped",
            f"StartWorkflow events from source '{parsed.source}' start nothing: the deployment "
            "maps no owner to it (event_owners; see docs/api.md, Events)",
        )
    if parsed.source == schedules.SOURCE:
        answered = _firing(detail)
        if answered is not None:
            return answered
    scheduler = engine().scheduler
    key = start_key(detail.idempotency_key, parsed.id)
    try:
        if detail.input_upload is not None:
            result = engine().uploads.start(
                detail.type, detail.input_upload, idempotency_key=key, owner=owner, tags=detail.tags
            )
        else:
            result = scheduler.start(
                detail.type, detail.input, idempotency_key=key, owner=owner, tags=detail.tags
            )
    except PayloadTooLarge as exc:
        return _rejected(exc.code, str(exc))
    except UploadError as exc:  # not the owner's, used, expired, missing, mismatched
        return _rejected(exc.code, str(exc))
    except (
        UnknownWorkflowType,
        InputInvalid,
        IdempotencyConflict,
        JsonRejected,
        TagInvalid,
    ) as exc:
        return _rejected(type(exc).__name__, str(exc))
    logger.info(
        "workflow started from an event",
        extra={"workflow_id": result.workflow_id, "new_workflow": result.created},
    )
    return {"status": "accepted", "workflow_id": result.workflow_id, "created": result.created}


def _firing(detail: StartWorkflowDetail) -> dict[str, Any] | None:
    """A schedule's firing: rejected unless it is one of the definition's own schedule, and
    skipped while that schedule is paused (None: start it)."""
    schedule = schedules.name_of(detail.idempotency_key)
    if schedule is None:
        return _rejected(
            "InvalidEvent",
            f"a {schedules.SOURCE} event's idempotency_key is schedule:<name>:<time>",
        )
    forged = _not_a_firing(detail, schedule)
    if forged is not None:
        return _rejected("NotAFiring", forged)
    if engine().schedules.paused(detail.type, schedule):
        return _skipped(detail.type, schedule, detail.idempotency_key)
    return None


def _not_a_firing(detail: StartWorkflowDetail, name: str) -> str | None:
    """Why a `shepherd.schedule` start is no firing of the definition's own schedule `name`
    (None: it is one). Its workflow type and input must be the definition's, and its time one
    the expression produces and not in the future, so nobody who can reach this function (the
    local stack's bus takes any put) starts a schedule-owned workflow with an input of their
    choosing, or takes the key of a real future firing (issue 35.1). A rate's firings count
    from when its schedule was created, which this function cannot know: its time is only
    checked to be whole seconds and past."""
    try:
        state = engine().schedules.get(name)
    except ScheduleNotFound:
        return f"no current definition has a schedule '{name}'"
    spec = state.spec
    if detail.type != state.workflow_type:
        return f"schedule '{name}' starts '{state.workflow_type}', not '{detail.type}'"
    if detail.input_upload is not None or detail.input != spec.input:
        return f"a firing of schedule '{name}' carries the definition's Input, not its own"
    if detail.tags:
        return f"a firing of schedule '{name}' carries no tags"
    text = schedules.time_of(detail.idempotency_key) or ""
    try:
        when = datetime.strptime(text, schedules.TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return f"a firing's time is written {schedules.TIME_FORMAT} (got '{text:.40}')"
    now = datetime.fromtimestamp(engine().ports.clock.now_ms() / 1000, UTC)
    if when > now + FIRING_SKEW:
        return f"schedule '{name}' has not fired at {text} yet"
    expression = schedules.parse(spec.expression)
    if isinstance(expression, schedules.Rate):
        return None
    produced = schedules.next_firings(
        expression, schedules.zone(spec.timezone), when - timedelta(seconds=1), 1
    )
    if produced != [when]:
        return f"schedule '{name}' ({spec.expression}) does not fire at {text}"
    return None


def _signal(event: dict[str, Any]) -> dict[str, Any]:
    """A `Signal` event: sent as the principal its source maps to (never anyone the event
    names), rejected as a bad start event is (logged, counted, not retried)."""
    try:
        jsonsafe.check(event.get("detail"), what="detail")
        parsed = parse(event=event, model=SignalEvent)
    except JsonRejected as exc:
        return _rejected(exc.code, exc.message)
    except ValidationError as exc:
        return _rejected("InvalidEvent", str(exc))
    sender = owner_of(parsed.source)
    if sender is None or parsed.source == schedules.SOURCE:
        return _rejected(
            "SourceNotMapped",
            f"Signal events from source '{parsed.source}' send nothing: the deployment maps "
            "no owner to it (event_owners; see docs/api.md, Events)",
        )
    detail = parsed.detail
    if (detail.workflow_id is None) == (detail.match is None):
        return _rejected("InvalidEvent", "a Signal event names a workflow_id or a match: one")
    if detail.match is not None:
        return _signal_matching(detail, sender)
    assert detail.workflow_id is not None
    try:
        receipt = engine().signals.send(
            detail.workflow_id,
            detail.name,
            detail.payload,
            principal=sender,
            signal_id=detail.signal_id,
        )
    except PayloadTooLarge as exc:
        return _rejected(exc.code, str(exc))
    except (
        WorkflowNotFound,
        SignalUnknown,
        InvalidTransition,
        InputInvalid,
        SignalIdConflict,
        TooManySignals,
    ) as exc:
        return _rejected(type(exc).__name__, str(exc))
    logger.info(
        "signal sent from an event",
        extra={
            "workflow_id": receipt.workflow_id,
            "signal": receipt.name,
            "sequence": receipt.sequence,
            "duplicate": receipt.duplicate,
        },
    )
    return {
        "status": "accepted",
        "workflow_id": receipt.workflow_id,
        "name": receipt.name,
        "sequence": receipt.sequence,
        "duplicate": receipt.duplicate,
    }


def _signal_matching(detail: SignalDetail, sender: str) -> dict[str, Any]:
    """A `Signal` event naming a match: sent to every open workflow of its sender waiting on
    those values, as `POST /signals` (rejected past its bounds, nothing sent)."""
    assert detail.match is not None
    try:
        receipts = engine().signals.send_matching(
            detail.name,
            dict(detail.match),
            detail.payload,
            principal=sender,
            signal_id=detail.signal_id,
        )
    except PayloadTooLarge as exc:
        return _rejected(exc.code, str(exc))
    except (InputInvalid, SignalIdConflict, TooManySignals, TooManyMatches) as exc:
        return _rejected(type(exc).__name__, str(exc))
    logger.info(
        "signal sent by its match from an event",
        extra={"signal": detail.name, "workflows": len(receipts)},
    )
    return {
        "status": "accepted",
        "name": detail.name,
        "workflow_ids": [r.workflow_id for r in receipts],
    }


def _skipped(workflow_type: str, schedule: str, key: str | None) -> dict[str, Any]:
    """A paused schedule's firing: acknowledged (Scheduler must not retry it), starts nothing."""
    logger.info(
        "schedule paused: its firing starts nothing",
        extra={"workflow_type": workflow_type, "schedule": schedule, "idempotency_key": key},
    )
    metrics.add_metric(name=SKIPPED_METRIC, unit=MetricUnit.Count, value=1)
    return {"status": "skipped", "schedule": schedule}


def _rejected(code: str, message: str) -> dict[str, Any]:
    logger.warning("StartWorkflow event rejected", extra={"code": code, "reason": message})
    metrics.add_metric(name=REJECTED_METRIC, unit=MetricUnit.Count, value=1)
    return {"status": "rejected", "code": code, "message": message}
