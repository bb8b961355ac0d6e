"""Scheduler API: API Gateway REST (IAM auth) -> Powertools Event Handler -> the core."""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.definitions import NAME, POOL
from shepherd.engine.queries import find_by_idempotency_key, list_workflows
from shepherd.errors import OperatorOnly, UnknownWorkflowType
from shepherd.model import WorkflowRecord, WorkflowStatus

from shepherd_handlers import errors, pagination
from shepherd_handlers.models import (
    ApproveRequest,
    DefinitionListView,
    DefinitionView,
    PoolListView,
    PoolView,
    RejectRequest,
    ResumeRequest,
    ScheduleListView,
    StartWorkflowRequest,
    StepView,
    UploadRequest,
    UploadView,
    WorkflowAccepted,
    WorkflowListView,
    WorkflowStatusView,
    WorkflowView,
)
from shepherd_handlers.runtime import count_throttles, engine, logger, metrics, tracer
from shepherd_handlers.views import (
    definition_summary,
    definition_view,
    pool_view,
    schedule_view,
    step_view,
    summary_view,
    workflow_view,
)

TITLE = "Shepherd API"
VERSION = "1.0.0"
WORKFLOW_ID = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
DEFINITION_NAME = Annotated[str, Path(min_length=1, max_length=64, pattern=NAME)]
POOL_NAME = Annotated[str, Path(min_length=1, max_length=32, pattern=POOL)]
STEP_NAME = Annotated[str, Path(min_length=1, max_length=64, pattern=NAME)]

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
            body.type, body.input_upload, idempotency_key=key, owner=caller()
        )
    else:
        result = scheduler.start(body.type, body.input, idempotency_key=key, owner=caller())
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
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    next_token: Annotated[str | None, Query(min_length=1, max_length=2048)] = None,
    idempotency_key: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
) -> WorkflowListView:
    """The caller's workflows, newest first. `next_token` is opaque and bound to the caller
    and the filters it was issued with. `idempotency_key` looks up the one workflow the caller
    started with that key (an empty list if none; the other filters still apply)."""
    owner = caller()
    filters = (status.value if status else None, type)
    if idempotency_key is not None:
        if next_token is not None:
            raise _BadQuery("a lookup by idempotency_key has one page: no next_token", "next_token")
        return _lookup(owner, idempotency_key, filters)
    pages = pagination.paginator(engine().ports.store)
    start = None
    if next_token is not None:
        try:
            position = pages.verify(next_token, owner, filters)
        except pagination.TokenRejected as exc:
            raise _BadQuery(str(exc), "next_token") from None
        start = pagination.engine_token(owner, position)
    page = list_workflows(
        engine().ports.store, owner, limit=limit, next_token=start, status=filters[0], wf_type=type
    )
    token = None
    if page.next_token:
        token = pages.sign(owner, pagination.position_of(page.next_token), filters)
    return WorkflowListView(items=[summary_view(s) for s in page.items], next_token=token)


def _lookup(owner: str, key: str, filters: tuple[str | None, str | None]) -> WorkflowListView:
    """The caller's workflow with this idempotency key, as a list of at most one (its id
    derives from the owner and the key, so this is one read)."""
    found = find_by_idempotency_key(engine().ports.store, owner, key)
    status, wf_type = filters
    if found is None or status not in (None, found.status) or wf_type not in (None, found.wf_type):
        return WorkflowListView(items=[])
    return WorkflowListView(items=[summary_view(found)])


@app.get(
    "/workflows/<workflow_id>",
    responses=errors.documented(200, "The workflow", WorkflowView, 400, 404),
    tags=["workflows"],
)
def get_workflow(workflow_id: WORKFLOW_ID) -> WorkflowView:
    """A workflow with its steps and compensations."""
    state, definition = engine().scheduler.owned(workflow_id, caller())
    return workflow_view(state, definition, engine().ports.payloads)


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
    paused or resumed a pool (an IAM ARN) is shown to operators only."""
    shown_to_operator = caller() in engine().settings.operators
    return PoolListView(
        items=[pool_view(p, show_by=shown_to_operator) for p in engine().pools.list()]
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
    tags=["definitions"],
)
def list_schedules() -> ScheduleListView:
    """Every schedule of the current definitions, with its next firing times."""
    catalog = engine().catalog
    now = datetime.now(UTC)
    return ScheduleListView(
        items=[
            schedule_view(name, spec, now)
            for name in catalog.names()
            for spec in catalog.current(name).schedules
        ]
    )


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


@app.exception_handler(_BadQuery)
def _bad_query(exc: _BadQuery) -> Response[Any]:
    return errors.error_response(HTTPStatus.BAD_REQUEST, "ValidationError", str(exc), exc.field)


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
