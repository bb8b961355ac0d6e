"""Scheduler API: API Gateway REST (IAM auth) -> Powertools Event Handler -> the core."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.engine.queries import list_workflows
from shepherd.errors import UnknownWorkflowType
from shepherd.model import WorkflowStatus

from shepherd_handlers import errors
from shepherd_handlers.models import (
    DefinitionListView,
    DefinitionView,
    ErrorBody,
    StartWorkflowRequest,
    WorkflowAccepted,
    WorkflowListView,
    WorkflowStatusView,
    WorkflowView,
)
from shepherd_handlers.runtime import engine, logger, metrics, owner_from_arn, tracer
from shepherd_handlers.views import definition_summary, definition_view, summary_view, workflow_view

TITLE = "Shepherd API"
VERSION = "1.0.0"
WORKFLOW_ID = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
ERRORS: dict[int, OpenAPIResponse] = {
    400: {
        "description": "Bad request: the message names the field",
        "content": {"application/json": {"model": ErrorBody}},
    },
    404: {
        "description": "Not found (or not yours)",
        "content": {"application/json": {"model": ErrorBody}},
    },
    409: {
        "description": "Conflict with the current state",
        "content": {"application/json": {"model": ErrorBody}},
    },
    413: {
        "description": "Body or input too large",
        "content": {"application/json": {"model": ErrorBody}},
    },
}

app = APIGatewayRestResolver(enable_validation=True)
errors.register(app)


def caller() -> str:
    """The IAM identity API Gateway authenticated (see docs/api.md, Authorization)."""
    identity = app.current_event.request_context.identity
    arn = identity.user_arn or identity.caller
    if not arn:
        raise PermissionError("no caller identity")
    return owner_from_arn(arn)


@app.post("/workflows", responses={202: {"description": "Accepted"}, **ERRORS}, tags=["workflows"])
def start_workflow(
    body: StartWorkflowRequest,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> Response[WorkflowAccepted]:
    """Start a workflow. Replays with the same idempotency key return the same workflow."""
    key = body.idempotency_key or idempotency_key
    result = engine().scheduler.start(body.type, body.input, idempotency_key=key, owner=caller())
    wf = result.workflow
    location = f"/workflows/{wf.workflow_id}"
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


@app.get("/workflows", responses=ERRORS, tags=["workflows"])
def list_all(
    status: Annotated[WorkflowStatus | None, Query()] = None,
    type: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    next_token: Annotated[str | None, Query(max_length=2048)] = None,
) -> WorkflowListView:
    """The caller's workflows, newest first."""
    try:
        page = list_workflows(
            engine().ports.store,
            caller(),
            limit=limit,
            next_token=next_token,
            status=status.value if status else None,
            wf_type=type,
        )
    except ValueError as exc:
        raise _BadQuery(str(exc), "next_token") from None
    return WorkflowListView(items=[summary_view(s) for s in page.items], next_token=page.next_token)


@app.get("/workflows/<workflow_id>", responses=ERRORS, tags=["workflows"])
def get_workflow(workflow_id: WORKFLOW_ID) -> WorkflowView:
    """A workflow with its steps and compensations."""
    state, definition = engine().scheduler.owned(workflow_id, caller())
    return workflow_view(state, definition)


@app.post(
    "/workflows/<workflow_id>/cancel",
    responses={202: {"description": "Cancelling"}, **ERRORS},
    tags=["workflows"],
)
def cancel_workflow(workflow_id: WORKFLOW_ID) -> Response[WorkflowStatusView]:
    """Stop dispatching, compensate the succeeded steps, end CANCELLED."""
    wf = engine().scheduler.cancel(workflow_id, owner=caller())
    return _accepted(WorkflowStatusView(workflow_id=wf.workflow_id, status=wf.status.value))


@app.post(
    "/workflows/<workflow_id>/retry",
    responses={202: {"description": "Redriven"}, **ERRORS},
    tags=["workflows"],
)
def retry_workflow(workflow_id: WORKFLOW_ID) -> Response[WorkflowStatusView]:
    """Redrive a FAILED workflow from its failed compensations."""
    wf = engine().scheduler.redrive(workflow_id, owner=caller())
    return _accepted(WorkflowStatusView(workflow_id=wf.workflow_id, status=wf.status.value))


@app.get("/definitions", tags=["definitions"])
def list_definitions() -> DefinitionListView:
    """The workflow types this deployment runs."""
    catalog = engine().catalog
    return DefinitionListView(
        items=[definition_summary(catalog.current(n)) for n in catalog.names()]
    )


@app.get("/definitions/<name>", responses=ERRORS, tags=["definitions"])
def get_definition(name: Annotated[str, Path(min_length=1, max_length=64)]) -> DefinitionView:
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


@app.exception_handler(PermissionError)
def _no_identity(exc: PermissionError) -> Response[Any]:
    return errors.error_response(HTTPStatus.FORBIDDEN, "Forbidden", str(exc))


def _accepted(body: WorkflowStatusView) -> Response[WorkflowStatusView]:
    return Response(
        status_code=HTTPStatus.ACCEPTED, content_type=content_types.APPLICATION_JSON, body=body
    )


def openapi_json() -> str:
    return app.get_openapi_json_schema(title=TITLE, version=VERSION)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return errors.serve(app, event, context)
