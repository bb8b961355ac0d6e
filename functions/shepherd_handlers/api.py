"""Scheduler API: API Gateway REST (IAM auth) -> Powertools Event Handler -> the core."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd import business_keys
from shepherd.changes import public_error
from shepherd.clock import iso
from shepherd.definitions import NAME, POOL, SIGNAL_NAME
from shepherd.definitions import SCHEDULE_NAME as SCHEDULE_NAME_PATTERN
from shepherd.engine import history, inbox
from shepherd.engine.listing import ListFilter, Position, count_by_status
from shepherd.engine.pools import pool_states
from shepherd.engine.queries import WorkflowSummary, find_by_idempotency_key, list_workflows
from shepherd.errors import (
    OperatorOnly,
    PathNotFound,
    StepNotFound,
    TagInvalid,
    UnknownWorkflowType,
)
from shepherd.keys import event_sk
from shepherd.model import StepStatus, WorkflowRecord, WorkflowStatus, loads

from shepherd_handlers import errors, pagination, series
from shepherd_handlers.models import (
    ApprovalListView,
    ApproveRequest,
    CircuitRequest,
    DefinitionListView,
    DefinitionView,
    ErrorTextView,
    HistoryEventView,
    HistoryView,
    ListSort,
    MapItemsView,
    PathEntryView,
    PathView,
    PayloadPreviewView,
    PendingSignalsView,
    PendingSignalView,
    PoolListView,
    PoolView,
    PreviewField,
    RejectRequest,
    ResumeRequest,
    ScheduleListView,
    ScheduleView,
    SeriesBucketView,
    SignalMatchRequest,
    SignalMatchView,
    SignalRequest,
    SignalView,
    StartWorkflowRequest,
    StatusCountView,
    StepView,
    UploadRequest,
    UploadView,
    WorkflowAccepted,
    WorkflowCountsView,
    WorkflowListView,
    WorkflowSeriesView,
    WorkflowStatusView,
    WorkflowView,
)
from shepherd_handlers.runtime import count_throttles, engine, logger, metrics, tracer
from shepherd_handlers.views import (
    definition_summary,
    definition_view,
    item_view,
    payload,
    pending_approval_view,
    pool_view,
    schedule_view,
    step_view,
    summary_view,
    workflow_view,
)

TITLE = "Shepherd API"
VERSION = "1.0.0"
# An instant in a query: ISO 8601 with a timezone (Z or an offset), years 1000-2999, nothing
# else (a bare number or a naive time is refused, 400, as the schema says).
INSTANT_PATTERN = (
    r"^[12][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
INSTANT = Annotated[str | None, Query(min_length=16, max_length=40, pattern=INSTANT_PATTERN)]
WORKFLOW_ID = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
DEFINITION_NAME = Annotated[str, Path(min_length=1, max_length=64, pattern=NAME)]
POOL_NAME = Annotated[str, Path(min_length=1, max_length=32, pattern=POOL)]
STEP_NAME = Annotated[str, Path(min_length=1, max_length=64, pattern=NAME)]
# A paged route's page size and its signed position (each route binds its token to what it
# pages: a token from another route, caller or filter is a 400).
PAGE_LIMIT = Annotated[int, Query(ge=1, le=100)]
NEXT_TOKEN = Annotated[str | None, Query(min_length=1, max_length=2048)]
SIGNAL = Annotated[str, Path(min_length=1, max_length=64, pattern=SIGNAL_NAME)]
SCHEDULE_NAME = Annotated[str, Path(min_length=1, max_length=64, pattern=SCHEDULE_NAME_PATTERN)]

app = errors.resolver()


def caller() -> str:
    """The IAM identity API Gateway authenticated (see docs/api.md, Authorization)."""
    return errors.caller(app)


LOCATION = {
    "Location": {
        "description": "The workflow's URL path, stage (or custom domain base path) included",
        "schema": {"type": "string"},
    }
}


def base_path() -> str:
    """The stage (or custom domain base path) in front of our routes: `requestContext.path`
    is the path as the caller sent it, `path` the path our resources see."""
    event = app.current_event
    sent = str(event.request_context.path or "")
    path = event.path
    return sent[: -len(path)] if path and sent.endswith(path) else ""


@app.post(
    "/workflows",
    responses=errors.documented(
        202, "Accepted (or replayed)", WorkflowAccepted, 400, 404, 409, 410, 415, headers=LOCATION
    ),
    tags=["workflows"],
)
def start_workflow(
    body: StartWorkflowRequest,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> Response[WorkflowAccepted]:
    """Start a workflow. Replays with the same idempotency key return the same workflow.

    `input_upload` instead of `input` names a POST /payloads upload as the input: 404 if it
    is not the caller's, 409 once used, 410 once expired, 400 if nothing (or something other
    than declared) was uploaded."""
    if (
        body.idempotency_key is not None
        and idempotency_key is not None
        and body.idempotency_key != idempotency_key
    ):
        raise _BadQuery(
            "the Idempotency-Key header and the body's idempotency_key differ: send one, or "
            "the same in both",
            "idempotency_key",
        )
    key = body.idempotency_key or idempotency_key
    scheduler = engine().scheduler
    if body.input_upload is not None:
        result = engine().uploads.start(
            body.type, body.input_upload, idempotency_key=key, owner=caller(), tags=body.tags
        )
    else:
        result = scheduler.start(
            body.type, body.input, idempotency_key=key, owner=caller(), tags=body.tags
        )
    wf = result.workflow
    location = f"{base_path()}/workflows/{wf.workflow_id}"
    logger.info(
        "workflow accepted", extra={"workflow_id": wf.workflow_id, "new_workflow": result.created}
    )
    accepted = WorkflowAccepted(
        workflow_id=wf.workflow_id,
        type=wf.wf_type,
        status=wf.status.value,
        created=result.created,
        location=location,
    )
    return Response(
        status_code=HTTPStatus.ACCEPTED,
        content_type=content_types.APPLICATION_JSON,
        body=accepted,
        headers={"Location": location},
    )


@app.post(
    "/payloads",
    responses=errors.documented(201, "A presigned upload", UploadView, 400, 415),
    tags=["payloads"],
)
def create_upload(body: UploadRequest) -> Response[UploadView]:
    """A presigned POST for a workflow input too large for a request (over 5 MiB, up to
    100 MiB): exactly `size` bytes, to a key the server made for the caller, valid 15
    minutes. Start the workflow with `input_upload` set to the `upload_id`; single-use."""
    upload = engine().uploads.create(caller(), body.size, body.sha256)
    view = UploadView(
        upload_id=upload.upload_id,
        url=upload.post.url,
        fields=upload.post.fields,
        key=upload.key,
        size=upload.size,
        sha256=upload.sha256,
        expires_at=datetime.fromtimestamp(upload.expires_at / 1000, UTC).isoformat(),
    )
    return Response(
        status_code=HTTPStatus.CREATED, content_type=content_types.APPLICATION_JSON, body=view
    )


@app.get(
    "/workflows",
    responses=errors.documented(200, "The caller's workflows", WorkflowListView, 400),
    tags=["workflows"],
)
def list_all(
    status: Annotated[WorkflowStatus | None, Query()] = None,
    type: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    created_after: INSTANT = None,
    created_before: INSTANT = None,
    sort: Annotated[ListSort, Query()] = ListSort.NEWEST,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    next_token: NEXT_TOKEN = None,
    idempotency_key: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    tag: Annotated[str | None, Query(min_length=2, max_length=321)] = None,
) -> WorkflowListView:
    """The caller's workflows, newest (or oldest) first, optionally of one status, one type
    and created in a time range (both ends inclusive, ISO 8601 with a timezone). A page is
    full unless the matches run out; an empty page means nothing matches. `next_token` is
    opaque and bound to the caller and the filters it was issued with. `idempotency_key`
    looks up the one workflow the caller started with that key (an empty list if none; the
    other filters still apply). `tag=key:value` lists those the caller tagged so (through the
    tag's own index: not with `status` or `type`)."""
    owner = caller()
    filters = _filters(status, type, created_after, created_before, sort)
    if tag is not None:
        if status is not None or type is not None:
            raise _BadQuery("tag is not combined with status or type", "tag")
        try:
            filters = replace(filters, tag=business_keys.parse_tag_filter(tag))
        except TagInvalid as exc:
            raise _BadQuery(str(exc), "tag") from None
    if idempotency_key is not None:
        if next_token is not None:
            raise _BadQuery("a lookup by idempotency_key has one page: no next_token", "next_token")
        return _lookup(owner, idempotency_key, filters)
    pages = pagination.paginator(engine().ports.store)
    signed = _signed(filters)
    after = None
    if next_token is not None:
        try:
            after = pages.verify(next_token, owner, signed)
        except pagination.TokenRejected as exc:
            raise _BadQuery(str(exc), "next_token") from None
    page = list_workflows(engine().ports.store, owner, filters, limit=limit, after=after)
    token = None
    if page.next_position is not None:
        token = pages.sign(owner, page.next_position, signed)
    return WorkflowListView(items=[summary_view(s) for s in page.items], next_token=token)


@app.get(
    "/workflows/counts",
    responses=errors.documented(200, "The caller's workflows per status", WorkflowCountsView, 400),
    tags=["workflows"],
)
def count_all(
    type: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    created_after: INSTANT = None,
    created_before: INSTANT = None,
) -> WorkflowCountsView:
    """How many of the caller's workflows are in each status (of one type, created in a time
    range). Bounded: a status stops being counted at 10,000 and says so (`capped`)."""
    filters = _filters(None, type, created_after, created_before, ListSort.NEWEST)
    counts = count_by_status(engine().ports.store, caller(), filters)
    return WorkflowCountsView(
        counts=[StatusCountView(status=c.status, count=c.count, capped=c.capped) for c in counts],
        total=sum(c.count for c in counts),
        capped=any(c.capped for c in counts),
    )


@app.get(
    "/workflows/series",
    responses=errors.documented(
        200, "The caller's starts, successes and failures per time bucket", WorkflowSeriesView, 400
    ),
    tags=["workflows"],
)
def series_all(
    created_after: Annotated[str, Query(min_length=16, max_length=40, pattern=INSTANT_PATTERN)],
    type: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    created_before: INSTANT = None,
    buckets: Annotated[int, Query(ge=1, le=series.MAX_BUCKETS)] = series.DEFAULT_BUCKETS,
) -> WorkflowSeriesView:
    """The caller's workflows created in each of `buckets` equal parts of a time range (24
    unless asked, 1-60; `created_before` defaults to now), and how many of each bucket's have
    SUCCEEDED, FAILED or been COMPENSATED since (of one type if asked). Bounded: 128 index
    queries; a series stops at 10,000 keys, newest first, and the buckets it did not read to
    the end say `capped` ("at least")."""
    if created_before is None:
        created_before = iso(engine().ports.clock.now_ms()) or ""
    filters = _filters(None, type, created_after, created_before, ListSort.NEWEST)
    got = series.bucketed(engine().ports.store, caller(), filters, buckets)
    logger.debug("series read", extra={"queries": got.queries, "keys_read": got.keys_read})
    return WorkflowSeriesView(
        created_after=iso(filters.created_after) or "",
        created_before=iso(filters.created_before) or "",
        bucket_seconds=got.width_ms / 1000,
        buckets=[
            SeriesBucketView(
                start=iso(b.start) or "",
                end=iso(b.end) or "",
                started=b.counts["started"],
                succeeded=b.counts["succeeded"],
                failed=b.counts["failed"],
                compensated=b.counts["compensated"],
                capped=b.capped,
            )
            for b in got.buckets
        ],
        capped=any(b.capped for b in got.buckets),
    )


def _filters(
    status: WorkflowStatus | None,
    wf_type: str | None,
    created_after: str | None,
    created_before: str | None,
    sort: ListSort,
) -> ListFilter:
    """The query's filters; a time that is not an instant or an empty range is refused (400)."""
    after, before = (None if t is None else _instant_ms(t) for t in (created_after, created_before))
    if after is not None and before is not None and after > before:
        raise _BadQuery("created_after is later than created_before", "created_after")
    return ListFilter(
        status=status.value if status else None,
        wf_type=wf_type,
        created_after=after,
        created_before=before,
        newest_first=sort is ListSort.NEWEST,
    )


def _instant_ms(text: str) -> int:
    """Epoch ms of an instant the pattern admitted; a day past its month's end rolls over
    (2026-02-30 is March 2nd, as JavaScript's Date reads it), so every admitted text is one."""
    date, _, rest = text.partition("T")
    year, month, day = (int(part) for part in date.split("-"))
    zone = "+00:00" if rest.endswith("Z") else rest[-6:]
    clock = rest[:-1] if rest.endswith("Z") else rest[:-6]
    parts = clock.split(":")
    seconds = float(parts[2]) if len(parts) > 2 else 0.0
    sign = -1 if zone[0] == "-" else 1
    offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])) * sign
    start = datetime(year, month, 1, tzinfo=UTC) + timedelta(
        days=day - 1, hours=int(parts[0]), minutes=int(parts[1]), seconds=seconds
    )
    return int((start - offset).timestamp() * 1000)


def _signed(filters: ListFilter) -> tuple[str | None, ...]:
    """Every filter a token is bound to."""
    return (
        filters.status,
        filters.wf_type,
        None if filters.created_after is None else str(filters.created_after),
        None if filters.created_before is None else str(filters.created_before),
        "newest" if filters.newest_first else "oldest",
        *(() if filters.tag is None else (f"tag:{filters.tag[0]}:{filters.tag[1]}",)),
    )


def _lookup(owner: str, key: str, filters: ListFilter) -> WorkflowListView:
    """The caller's workflow with this idempotency key, as a list of at most one (its id
    derives from the owner and the key, so this is one read)."""
    found = find_by_idempotency_key(engine().ports.store, owner, key)
    if found is None or not _matches(found, filters):
        return WorkflowListView(items=[])
    return WorkflowListView(items=[summary_view(found)])


def _matches(found: WorkflowSummary, filters: ListFilter) -> bool:
    after, before = filters.created_after, filters.created_before
    return (
        filters.status in (None, found.status)
        and filters.wf_type in (None, found.wf_type)
        and (after is None or found.created_at >= after)
        and (before is None or found.created_at <= before)
        and (filters.tag is None or (found.tags or {}).get(filters.tag[0]) == filters.tag[1])
    )


@app.get(
    "/workflows/<workflow_id>",
    responses=errors.documented(200, "The workflow", WorkflowView, 400, 404),
    tags=["workflows"],
)
def get_workflow(workflow_id: WORKFLOW_ID) -> WorkflowView:
    """A workflow with its steps and compensations; each live step's next deadline and why
    (one more read, of the pools, while the workflow is live)."""
    state, definition = engine().scheduler.owned(workflow_id, caller())
    ports = engine().ports
    pools = pool_states(ports.store) if not state.workflow.status.terminal else {}
    return workflow_view(state, definition, ports.payloads, now=ports.clock.now_ms(), pools=pools)


@app.get(
    "/workflows/<workflow_id>/events",
    responses=errors.documented(200, "The workflow's history, oldest first", HistoryView, 400, 404),
    tags=["workflows"],
)
def workflow_events(
    workflow_id: WORKFLOW_ID,
    limit: PAGE_LIMIT = 50,
    next_token: NEXT_TOKEN = None,
) -> HistoryView:
    """The workflow's lifecycle events as they were published (kept by the relay), oldest
    first: operator actions included, with who and when where the event says so. Paged with
    a signed `next_token` bound to the caller and the workflow."""
    owner = caller()
    engine().scheduler.owned(workflow_id, owner)  # 404 unless it is the caller's
    pages = pagination.paginator(engine().ports.store)
    bound = ("events", workflow_id)
    after = ""
    if next_token is not None:
        try:
            at = pages.verify(next_token, owner, bound)
        except pagination.TokenRejected as exc:
            raise _BadQuery(str(exc), "next_token") from None
        after = event_sk(at.created_at, at.workflow_id)
    got = history.page(engine().ports.store, workflow_id, after_sk=after, limit=limit)
    token = None
    if got.last_sk is not None:
        at_text, _, event_id = got.last_sk.partition("#")
        token = pages.sign(owner, Position(int(at_text), event_id), bound)
    return HistoryView(
        items=[
            HistoryEventView(type=t, at=iso(at) if at else None, detail=d)
            for t, at, d in got.events
        ],
        next_token=token,
    )


PATH_POSITION = re.compile(r"\A[0-9]{1,10}\Z")  # a path entry's number, as its token names it


@app.get(
    "/workflows/<workflow_id>/path",
    responses=errors.documented(200, "The states it entered, in order", PathView, 400, 404),
    tags=["workflows"],
)
def state_machine_path(
    workflow_id: WORKFLOW_ID,
    limit: PAGE_LIMIT = 50,
    next_token: NEXT_TOKEN = None,
) -> PathView:
    """A state machine's path (issue 42.4): every state entered, in order, with its visit
    (a loop's states have several), its input and its output (a large one as a presigned
    link), as Step Functions' history shows a state's entry and exit. A Parallel's branches
    and a Map's items are child workflows: each has its own path. Paged with a signed
    `next_token` bound to the caller and the workflow; one query a page, whatever the path's
    length. A native workflow has no path (404 PathNotFound)."""
    owner = caller()
    shepherd = engine()
    _, definition = shepherd.scheduler.owned(workflow_id, owner)  # 404 unless the caller's
    if definition.state_machine is None:
        raise PathNotFound(workflow_id)
    pages = pagination.paginator(shepherd.ports.store)
    bound = ("path", workflow_id)
    after = -1
    if next_token is not None:
        try:
            after = int(pages.verify_key(next_token, owner, bound, PATH_POSITION))
        except pagination.TokenRejected as exc:
            raise _BadQuery(str(exc), "next_token") from None
    entries, following = shepherd.scheduler.asl.path_page(workflow_id, after, limit)
    token = None if following is None else pages.sign_key(owner, str(following), bound)
    payloads = shepherd.ports.payloads
    items = []
    for e in entries:
        name = f"{workflow_id}-{e.number}-{e.state}"
        value, value_ref = payload(payloads, e.input, f"{name}-input")
        out, out_ref = (
            (None, None) if e.output is None else payload(payloads, e.output, f"{name}-output")
        )
        items.append(
            PathEntryView(
                number=e.number,
                state=e.state,
                visit=e.visit,
                input=value,
                input_ref=value_ref,
                output=out,
                output_ref=out_ref,
                entered_at=iso(e.entered_at) or "",
                exited_at=iso(e.exited_at),
            )
        )
    return PathView(items=items, next_token=token)


ITEM_STATUSES = tuple(s.value for s in StepStatus if s is not StepStatus.SKIPPED)


@app.get(
    "/workflows/<workflow_id>/steps/<step>/items",
    responses=errors.documented(200, "A page of a map step's items", MapItemsView, 400, 404),
    tags=["workflows"],
)
def map_items(
    workflow_id: WORKFLOW_ID,
    step: STEP_NAME,
    status: Annotated[
        str | None,
        Query(
            pattern="^(" + "|".join(ITEM_STATUSES) + ")$",
            description="Only items in this status (a page then reads at most 1,000 items "
            "and may hold fewer than `limit`: follow `next_token`)",
        ),
    ] = None,
    limit: PAGE_LIMIT = 50,
    next_token: NEXT_TOKEN = None,
) -> MapItemsView:
    """A map step's items by index (status, attempts, error, output or its reference), paged
    with a signed `next_token` bound to the caller, the workflow, the step and the filter.
    Reads the workflow and at most one page's items: bounded whatever the item count."""
    owner = caller()
    state, definition = engine().scheduler.owned(workflow_id, owner)
    spec = definition.by_name.get(step)
    if spec is None or spec.map is None:
        raise StepNotFound(workflow_id, step, "map")
    pages = pagination.paginator(engine().ports.store)
    bound = ("items", workflow_id, step, status or "")
    start = 0
    if next_token is not None:
        try:
            start = pages.verify(next_token, owner, bound).created_at
        except pagination.TokenRejected as exc:
            raise _BadQuery(str(exc), "next_token") from None
    rec = state.steps[step]
    rows, following = engine().scheduler.maps.item_page(rec, start, limit, status)
    token = None if following is None else pages.sign(owner, Position(following, step), bound)
    payloads = engine().ports.payloads
    total = rec.fanout.total if rec.fanout is not None else 0
    return MapItemsView(
        items=[item_view(row, payloads) for row in rows], total=total, next_token=token
    )


MAX_ERROR_TEXT = 1024 * 1024  # a traceback served inline is cut here (the reply stays small)


@app.get(
    "/workflows/<workflow_id>/steps/<step>/error",
    responses=errors.documented(200, "The step's last error, full text", ErrorTextView, 400, 404),
    tags=["workflows"],
)
def step_error(workflow_id: WORKFLOW_ID, step: STEP_NAME) -> ErrorTextView:
    """A step's last error in full: type, the message uncut and the traceback as text, read
    through the API (no bucket link to follow, no JSON escapes to read)."""
    return _error_text(workflow_id, "step", step)


@app.get(
    "/workflows/<workflow_id>/compensations/<step>/error",
    responses=errors.documented(
        200, "The compensation's last error, full text", ErrorTextView, 400, 404
    ),
    tags=["workflows"],
)
def compensation_error(workflow_id: WORKFLOW_ID, step: STEP_NAME) -> ErrorTextView:
    """A compensation's last error in full (as for a step)."""
    return _error_text(workflow_id, "compensation", step)


def _error_text(workflow_id: str, kind: str, name: str) -> ErrorTextView:
    state, _ = engine().scheduler.owned(workflow_id, caller())
    rec = (state.steps if kind == "step" else state.compensations).get(name)
    stored = loads(rec.error) if rec is not None else None
    if not isinstance(stored, dict):
        raise _NoError(f"no error recorded for {kind} '{name}' of workflow {workflow_id}")
    full = stored.get("full")
    text = engine().ports.payloads.value(full) if full else public_error(rec.error if rec else None)
    text = text if isinstance(text, dict) else {}
    traceback = text.get("traceback")
    cut = isinstance(traceback, str) and len(traceback) > MAX_ERROR_TEXT
    return ErrorTextView(
        kind=kind,
        step=name,
        attempt=rec.attempt if rec is not None else 0,
        type=str(text.get("type", stored.get("type", "Error"))),
        message=str(text.get("message", stored.get("message", ""))),
        traceback=traceback[:MAX_ERROR_TEXT] if isinstance(traceback, str) else None,
        truncated=cut,
    )


# A payload's preview: its first bytes (4 KiB unless asked), never more than 64 KiB.
PREVIEW_BYTES = 4 * 1024
MAX_PREVIEW_BYTES = 64 * 1024
STEP_QUERY = Annotated[str | None, Query(min_length=1, max_length=64, pattern=NAME)]


@app.get(
    "/workflows/<workflow_id>/preview",
    responses=errors.documented(
        200, "The payload's first bytes, as text", PayloadPreviewView, 400, 404
    ),
    tags=["workflows"],
)
def preview_payload(
    workflow_id: WORKFLOW_ID,
    field: Annotated[PreviewField, Query()],
    step: STEP_QUERY = None,
    compensation: STEP_QUERY = None,
    length: Annotated[int, Query(alias="bytes", ge=1, le=MAX_PREVIEW_BYTES)] = PREVIEW_BYTES,
) -> PayloadPreviewView:
    """The first `bytes` of one payload as text (4 KiB unless asked, 64 KiB at most): the
    workflow's `input`, or a step's (`step=`) or compensation's (`compensation=`) `output`,
    `details`, replacement `input` or full `error` text. A large one is read with a ranged GET
    of its object: never more than `bytes` of it leaves the bucket. The caller's workflows
    only (404 otherwise)."""
    if step is not None and compensation is not None:
        raise _BadQuery("name a step or a compensation, not both", "compensation")
    state, _ = engine().scheduler.owned(workflow_id, caller())
    name = step if step is not None else compensation
    kind = "workflow" if name is None else ("step" if step is not None else "compensation")
    stored: str | None
    if name is None:
        if field is not PreviewField.INPUT:
            raise _BadQuery(
                f"a workflow's own payload is its input: name the step (or compensation) "
                f"whose {field.value} to preview",
                "step",
            )
        stored = state.workflow.input
    else:
        rec = (state.steps if kind == "step" else state.compensations).get(name)
        if rec is None:
            raise _NotFound(
                "StepNotFound", f"workflow {workflow_id} has no {kind} '{name}' yet", kind
            )
        error = loads(rec.error) if field is PreviewField.ERROR else None
        stored = {
            PreviewField.INPUT: rec.input,
            PreviewField.OUTPUT: rec.output,
            PreviewField.DETAILS: rec.details,
            PreviewField.ERROR: error.get("full") if isinstance(error, dict) else None,
        }[field]
    if stored is None:
        whose = f"workflow {workflow_id}" if name is None else f"{kind} '{name}'"
        raise _NotFound("PayloadNotFound", f"{whose} has no {field.value} to preview", "field")
    got = engine().ports.payloads.preview(stored, length)
    text = _whole_characters(got.data)
    return PayloadPreviewView(
        workflow_id=workflow_id,
        kind=kind,
        step=name,
        field=field,
        size=got.size,
        sha256=got.sha256,
        large=got.large,
        bytes=len(text.encode("utf-8")),
        text=text,
        truncated=got.truncated,
    )


def _whole_characters(data: bytes) -> str:
    """UTF-8 bytes cut anywhere, as text: a character cut in two at the end is dropped."""
    for cut in range(len(data), max(len(data) - 4, 0) - 1, -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", "replace")


@app.post(
    "/workflows/<workflow_id>/cancel",
    responses=errors.documented(202, "Cancelling", WorkflowStatusView, 400, 404, 409),
    tags=["workflows"],
)
def cancel_workflow(workflow_id: WORKFLOW_ID) -> Response[WorkflowStatusView]:
    """Stop dispatching, compensate the succeeded steps, end CANCELLED."""
    wf = engine().operations.cancel(workflow_id, owner=caller())
    return _accepted(wf)


@app.post(
    "/workflows/<workflow_id>/retry",
    responses=errors.documented(202, "Redriven", WorkflowStatusView, 400, 404, 409),
    tags=["workflows"],
)
def retry_workflow(workflow_id: WORKFLOW_ID) -> Response[WorkflowStatusView]:
    """Redrive a FAILED workflow from its failed compensations."""
    wf = engine().operations.redrive(workflow_id, owner=caller())
    return _accepted(wf)


@app.post(
    "/workflows/<workflow_id>/pause",
    responses=errors.documented(202, "Paused", WorkflowStatusView, 400, 404, 409),
    tags=["workflows"],
)
def pause_workflow(workflow_id: WORKFLOW_ID) -> Response[WorkflowStatusView]:
    """RUNNING -> PAUSED: nothing new is dispatched; running attempts finish and are recorded."""
    wf = engine().operations.pause(workflow_id, owner=caller())
    return _accepted(wf)


@app.post(
    "/workflows/<workflow_id>/resume",
    responses=errors.documented(202, "Resumed", WorkflowStatusView, 400, 404, 409, 415),
    tags=["workflows"],
)
def resume_workflow(
    workflow_id: WORKFLOW_ID, body: ResumeRequest | None = None
) -> Response[WorkflowStatusView]:
    """PAUSED -> RUNNING: failed steps are queued again with a fresh retry budget, optionally
    with a replacement input for one step (recorded in its history with who changed it)."""
    request = body or ResumeRequest()
    wf = engine().operations.resume(
        workflow_id, owner=caller(), step=request.step, step_input=request.input
    )
    return _accepted(wf)


@app.post(
    "/workflows/<workflow_id>/compensate",
    responses=errors.documented(202, "Compensating", WorkflowStatusView, 400, 404, 409),
    tags=["workflows"],
)
def compensate_workflow(workflow_id: WORKFLOW_ID) -> Response[WorkflowStatusView]:
    """Give up on a RUNNING or PAUSED workflow: unwind as a failure would, ending COMPENSATED
    (or FAILED if a compensation fails for good)."""
    wf = engine().operations.compensate(workflow_id, owner=caller())
    return _accepted(wf)


@app.post(
    "/workflows/<workflow_id>/steps/<step>/approve",
    responses=errors.documented(200, "Approved", StepView, 400, 404, 409, 415),
    tags=["approvals"],
)
def approve_step(
    workflow_id: WORKFLOW_ID, step: STEP_NAME, body: ApproveRequest | None = None
) -> StepView:
    """Approve a waiting Approval step: it succeeds with `output` (or `{approved: true, by,
    comment}`). The workflow's owner or a principal its `Approvers` list; others get 404."""
    request = body or ApproveRequest()
    extra = {"output": request.output} if "output" in request.model_fields_set else {}
    rec = engine().approvals.decide(
        workflow_id, step, principal=caller(), approve=True, comment=request.comment, **extra
    )
    return step_view(rec, engine().ports.payloads)


@app.post(
    "/workflows/<workflow_id>/steps/<step>/reject",
    responses=errors.documented(200, "Rejected", StepView, 400, 404, 409, 415),
    tags=["approvals"],
)
def reject_step(
    workflow_id: WORKFLOW_ID, step: STEP_NAME, body: RejectRequest | None = None
) -> StepView:
    """Reject a waiting Approval step: it fails for good with `Rejected` (never retried) and
    the workflow unwinds or pauses by `OnFailure`. Same callers as approve."""
    request = body or RejectRequest()
    rec = engine().approvals.decide(
        workflow_id, step, principal=caller(), approve=False, comment=request.comment
    )
    return step_view(rec, engine().ports.payloads)


@app.post(
    "/workflows/<workflow_id>/signals/<name>",
    responses=errors.documented(202, "Accepted", SignalView, 400, 404, 409, 413, 415),
    tags=["signals"],
)
def send_signal(
    workflow_id: WORKFLOW_ID, name: SIGNAL, body: SignalRequest | None = None
) -> Response[SignalView]:
    """Send a signal into a running workflow: kept, in order, until a `WaitForSignal` step of
    this name takes it (at once if one waits), its payload that step's output. The workflow's
    owner or a principal its definition's `SignalSenders` lists; others get 404. A name no
    step waits for is 400 `SignalUnknown`; a workflow that is over or unwinding 409; more than
    100 kept 409 `TooManySignals`; a `signal_id` already kept for another signal 409."""
    request = body or SignalRequest()
    receipt = engine().signals.send(
        workflow_id,
        name,
        request.payload,
        principal=caller(),
        signal_id=request.signal_id,
    )
    view = SignalView(
        workflow_id=receipt.workflow_id,
        name=receipt.name,
        sequence=receipt.sequence,
        signal_id=receipt.signal_id,
        duplicate=receipt.duplicate,
        taken_by=receipt.taken_by,
    )
    return Response(
        status_code=HTTPStatus.ACCEPTED, content_type=content_types.APPLICATION_JSON, body=view
    )


@app.get(
    "/workflows/<workflow_id>/signals",
    responses=errors.documented(200, "Its pending signals", PendingSignalsView, 400, 404),
    tags=["signals"],
)
def pending_signals(workflow_id: WORKFLOW_ID) -> PendingSignalsView:
    """The signal names the workflow's `WaitForSignal` steps wait for, and the signals kept
    that no step has taken yet (at most 100), oldest first per name: the console's view of a
    workflow's inbox. The owner or a principal the definition's `SignalSenders` lists; others
    get 404."""
    waits, pending = engine().signals.pending(workflow_id, caller())
    return PendingSignalsView(
        waits={name: list(steps) for name, steps in waits.items()},
        pending=[
            PendingSignalView(
                name=p.name,
                sequence=p.sequence,
                payload=p.payload,
                signal_id=p.signal_id,
                sender=p.sender,
                sent_at=iso(p.sent_at) or "",
            )
            for p in pending
        ],
    )


@app.post(
    "/signals",
    responses=errors.documented(202, "Accepted", SignalMatchView, 400, 409, 413, 415),
    tags=["signals"],
)
def send_matching_signal(body: SignalMatchRequest) -> Response[SignalMatchView]:
    """Send a signal by a business key: to every open workflow of the caller whose
    `WaitForSignal` step of this `name` names a `Match` on these values (through an index,
    never a scan), kept as `POST /workflows/{id}/signals/{name}` keeps it. At most 100
    workflows: more is 409 `TooManyMatches` and nothing is sent. None matching is 202 with no
    signals. A `signal_id` makes a retry kept once in each workflow."""
    receipts = engine().signals.send_matching(
        body.name,
        dict(body.match),
        body.payload,
        principal=caller(),
        signal_id=body.signal_id,
    )
    view = SignalMatchView(
        name=body.name,
        signals=[
            SignalView(
                workflow_id=r.workflow_id,
                name=r.name,
                sequence=r.sequence,
                signal_id=r.signal_id,
                duplicate=r.duplicate,
                taken_by=r.taken_by,
            )
            for r in receipts
        ],
    )
    return Response(
        status_code=HTTPStatus.ACCEPTED, content_type=content_types.APPLICATION_JSON, body=view
    )


@app.get(
    "/approvals",
    responses=errors.documented(200, "The caller's pending approvals", ApprovalListView, 400),
    tags=["approvals"],
)
def list_approvals(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    next_token: NEXT_TOKEN = None,
) -> ApprovalListView:
    """The Approval steps waiting for an answer the caller may give (as the workflow's owner
    or a listed approver), across workflows, newest first. Read from an eventually consistent
    index: an approval answered a moment ago may still be listed, and answering it then is a
    409. `next_token` is opaque and bound to the caller."""
    principal = caller()
    pages = pagination.paginator(engine().ports.store)
    before = None
    if next_token is not None:
        try:
            before = pages.verify_key(next_token, principal, _INBOX_BOUND, inbox.SORT_KEY)
        except pagination.TokenRejected as exc:
            raise _BadQuery(str(exc), "next_token") from None
    page = inbox.pending(engine().ports.store, principal, limit=limit, before=before)
    token = None if page.last is None else pages.sign_key(principal, page.last, _INBOX_BOUND)
    return ApprovalListView(items=[pending_approval_view(p) for p in page.items], next_token=token)


_INBOX_BOUND = ("approvals",)  # what an inbox token is bound to besides its caller


def operator() -> str:
    """The caller, if the deployment names it an operator (`SHEPHERD_OPERATORS`); else 403:
    a pool is shared by every caller's workflows, so pausing one is nobody's own business."""
    who = caller()
    if who not in engine().settings.operators:
        raise OperatorOnly(
            "only an operator named in the deployment's configuration may do this "
            "(the construct's `operators`; locally `shepherd local --operator NAME`)"
        )
    return who


@app.get(
    "/pools",
    responses=errors.documented(200, "Every agent pool, its state and backlog", PoolListView),
    tags=["pools"],
)
def list_pools() -> PoolListView:
    """Every agent pool of this deployment: paused or not, and its queue's backlog. Who
    paused or resumed a pool (an IAM ARN) is shown to operators only; `operator` says
    whether the caller is one."""
    shown_to_operator = caller() in engine().settings.operators
    return PoolListView(
        items=[pool_view(p, show_by=shown_to_operator) for p in engine().pools.list()],
        operator=shown_to_operator,
    )


@app.post(
    "/pools/<pool>/pause",
    responses=errors.documented(200, "Paused", PoolView, 400, 403, 404),
    tags=["pools"],
)
def pause_pool(pool: POOL_NAME) -> PoolView:
    """Stop the pool's agents from claiming anything; nothing fails or burns retries meanwhile.
    Operators only (403 otherwise). Done when it answers: the pool is paused."""
    return pool_view(engine().pools.pause(pool, by=operator()), show_by=True)


@app.post(
    "/pools/<pool>/resume",
    responses=errors.documented(200, "Resumed", PoolView, 400, 403, 404),
    tags=["pools"],
)
def resume_pool(pool: POOL_NAME) -> PoolView:
    """Let the pool's agents claim again: its backlog drains. Operators only (403 otherwise)."""
    return pool_view(engine().pools.resume(pool, by=operator()), show_by=True)


@app.post(
    "/pools/<pool>/circuit",
    responses=errors.documented(200, "The circuit as it now is", PoolView, 400, 403, 404, 415),
    tags=["pools"],
)
def force_circuit(pool: POOL_NAME, body: CircuitRequest) -> PoolView:
    """Force the pool's circuit breaker `open` (its pool paused until `close` or `auto`) or
    `close`d, or give it back to its breaker (`auto`). Operators only (403 otherwise); a pool
    without a breaker is 400 NoCircuitBreaker."""
    return pool_view(engine().pools.circuit(pool, body.action, by=operator()), show_by=True)


@app.get(
    "/definitions",
    responses=errors.documented(200, "The definitions", DefinitionListView),
    tags=["definitions"],
)
def list_definitions() -> DefinitionListView:
    """The workflow types this deployment runs."""
    catalog = engine().catalog
    return DefinitionListView(
        items=[definition_summary(catalog.current(n)) for n in catalog.names()]
    )


@app.get(
    "/schedules",
    responses=errors.documented(200, "The schedules", ScheduleListView),
    tags=["schedules"],
)
def list_schedules() -> ScheduleListView:
    """Every schedule of the current definitions: its state and next firing times. Who
    paused or resumed one (an IAM ARN) is shown to operators only; `operator` says whether
    the caller is one."""
    shown_to_operator = caller() in engine().settings.operators
    now = datetime.now(UTC)
    return ScheduleListView(
        items=[schedule_view(s, now, show_by=shown_to_operator) for s in engine().schedules.list()],
        operator=shown_to_operator,
    )


@app.post(
    "/schedules/<name>/pause",
    responses=errors.documented(200, "Paused", ScheduleView, 400, 403, 404),
    tags=["schedules"],
)
def pause_schedule(name: SCHEDULE_NAME) -> ScheduleView:
    """The schedule's firings start nothing until a resume; the table's state is the truth,
    so no deploy resumes it. Operators only (403 otherwise). Idempotent."""
    state = engine().schedules.pause(name, by=operator())
    return schedule_view(state, datetime.now(UTC), show_by=True)


@app.post(
    "/schedules/<name>/resume",
    responses=errors.documented(200, "Resumed", ScheduleView, 400, 403, 404),
    tags=["schedules"],
)
def resume_schedule(name: SCHEDULE_NAME) -> ScheduleView:
    """Its next firings start workflows again (those missed while paused are not made up).
    Operators only (403 otherwise). Idempotent."""
    state = engine().schedules.resume(name, by=operator())
    return schedule_view(state, datetime.now(UTC), show_by=True)


@app.get(
    "/definitions/<name>",
    responses=errors.documented(200, "The definition", DefinitionView, 400, 404),
    tags=["definitions"],
)
def get_definition(name: DEFINITION_NAME) -> DefinitionView:
    """One definition, as validated."""
    try:
        definition = engine().catalog.current(name)
    except UnknownWorkflowType:
        raise _NoDefinition(name) from None
    return definition_view(definition)


class _BadQuery(Exception):
    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class _NoDefinition(Exception):
    pass


class _NoError(Exception):
    pass


class _NotFound(Exception):
    def __init__(self, code: str, message: str, field: str) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


@app.exception_handler(_BadQuery)
def _bad_query(exc: _BadQuery) -> Response[Any]:
    return errors.error_response(HTTPStatus.BAD_REQUEST, "ValidationError", str(exc), exc.field)


@app.exception_handler(_NoError)
def _no_error(exc: _NoError) -> Response[Any]:
    return errors.error_response(HTTPStatus.NOT_FOUND, "ErrorNotFound", str(exc))


@app.exception_handler(_NotFound)
def _not_found(exc: _NotFound) -> Response[Any]:
    return errors.error_response(HTTPStatus.NOT_FOUND, exc.code, str(exc), exc.field)


@app.exception_handler(_NoDefinition)
def _no_definition(exc: _NoDefinition) -> Response[Any]:
    return errors.error_response(
        HTTPStatus.NOT_FOUND, "DefinitionNotFound", f"no definition '{exc}'"
    )


def _accepted(wf: WorkflowRecord) -> Response[WorkflowStatusView]:
    """202 with the workflow's status after an operator's action."""
    body = WorkflowStatusView(workflow_id=wf.workflow_id, status=wf.status.value)
    return Response(
        status_code=HTTPStatus.ACCEPTED, content_type=content_types.APPLICATION_JSON, body=body
    )


def openapi_json() -> str:
    return app.get_openapi_json_schema(title=TITLE, version=VERSION)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
@count_throttles
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return errors.serve(app, event, context)
