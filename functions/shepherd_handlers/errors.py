"""Domain errors -> HTTP replies, translated once for the API and the callbacks API."""

from __future__ import annotations

import json
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from shepherd.errors import (
    IdempotencyConflict,
    InputInvalid,
    InputTooLarge,
    InvalidTransition,
    TaskTokenInvalid,
    TaskTokenStale,
    UnknownWorkflowType,
    WorkflowNotFound,
)

from shepherd_handlers.models import ErrorBody, ErrorDetail

MAX_BODY_BYTES = 300 * 1024  # the input limit (256 KiB) plus room for the envelope


def error_response(
    status: HTTPStatus, code: str, message: str, field: str | None = None
) -> Response[Any]:
    body = ErrorBody(error=ErrorDetail(code=code, message=message, field=field))
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(exclude_none=True),
    )


def _field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else ("." if out else "") + part
    return out or "body"


def register(app: APIGatewayRestResolver) -> None:
    """Every error has the shape of ErrorBody; bad input is a 4xx, never a 500."""

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response[Any]:
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _field(first.get("loc", ()))
        if first.get("type") == "json_invalid":
            return error_response(
                HTTPStatus.BAD_REQUEST, "InvalidJson", "the body is not valid JSON", "body"
            )
        message = "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg')}" for e in errors)
        return error_response(HTTPStatus.BAD_REQUEST, "ValidationError", message, field)

    @app.exception_handler(UnknownWorkflowType)
    def _unknown_type(exc: UnknownWorkflowType) -> Response[Any]:
        return error_response(HTTPStatus.BAD_REQUEST, "UnknownWorkflowType", str(exc), "type")

    @app.exception_handler(InputInvalid)
    def _bad_input(exc: InputInvalid) -> Response[Any]:
        return error_response(HTTPStatus.BAD_REQUEST, "InvalidInput", str(exc), exc.field)

    @app.exception_handler(InputTooLarge)
    def _too_large(exc: InputTooLarge) -> Response[Any]:
        return error_response(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "InputTooLarge", str(exc), "input"
        )

    @app.exception_handler(IdempotencyConflict)
    def _conflict(exc: IdempotencyConflict) -> Response[Any]:
        return error_response(
            HTTPStatus.CONFLICT, "IdempotencyConflict", str(exc), "idempotency_key"
        )

    @app.exception_handler(InvalidTransition)
    def _transition(exc: InvalidTransition) -> Response[Any]:
        return error_response(HTTPStatus.CONFLICT, "InvalidTransition", str(exc))

    @app.exception_handler(WorkflowNotFound)
    def _missing(exc: WorkflowNotFound) -> Response[Any]:
        return error_response(HTTPStatus.NOT_FOUND, "WorkflowNotFound", str(exc))

    @app.exception_handler(TaskTokenInvalid)
    def _bad_token(exc: TaskTokenInvalid) -> Response[Any]:
        return error_response(HTTPStatus.NOT_FOUND, "TaskTokenInvalid", str(exc), "token")

    @app.exception_handler(TaskTokenStale)
    def _stale_token(exc: TaskTokenStale) -> Response[Any]:
        return error_response(HTTPStatus.CONFLICT, "TaskTokenStale", str(exc), "token")

    @app.not_found
    def _no_route(_: Exception) -> Response[Any]:
        return error_response(HTTPStatus.NOT_FOUND, "NotFound", "no such route")


def body_too_large(event: dict[str, Any]) -> Response[Any] | None:
    body = event.get("body") or ""
    if len(body.encode()) > MAX_BODY_BYTES:
        return error_response(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            "BodyTooLarge",
            f"the body is larger than {MAX_BODY_BYTES} bytes",
            "body",
        )
    return None


def proxy_reply(response: Response[Any]) -> dict[str, Any]:
    """A Response as the API Gateway proxy result (used before the resolver runs)."""
    return {
        "statusCode": int(response.status_code),
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": response.body if isinstance(response.body, str) else json.dumps(response.body),
        "isBase64Encoded": False,
    }


def serve(app: APIGatewayRestResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Refuse oversized bodies before parsing them, then route."""
    too_large = body_too_large(event)
    if too_large is not None:
        return proxy_reply(too_large)
    return app.resolve(event, context)
