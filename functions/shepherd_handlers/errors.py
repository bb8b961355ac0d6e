"""The HTTP boundary of the API and callbacks handlers: what reaches a resolver, and every
error reply, in one shape (ErrorBody), translated once, by type.

`serve` is the whole boundary. Before a Powertools resolver sees a request it refuses, in the
error shape, what a resolver would crash on or parse loosely: an unknown method (405), a body
over its route's cap (413, measured before parsing), a body that is not `application/json`
(415), a base64 body that is not base64, and any JSON `shepherd.jsonsafe` rejects (400: bad
syntax, too deep, NaN/Infinity, out-of-range numbers, lone surrogates, invalid UTF-8). After
the resolver, an exception nothing translated becomes `500 InternalError`, logged with the
request id the reply carries. Every error reply carries that request id.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from shepherd import jsonsafe, routes
from shepherd.engine.pools import NoCircuitBreaker, PoolNotFound
from shepherd.errors import (
    ApprovalNotPending,
    HeartbeatTooSoon,
    IdempotencyConflict,
    InputInvalid,
    InvalidTransition,
    OperatorOnly,
    PathNotFound,
    PayloadTooLarge,
    ScheduleNotFound,
    SignalIdConflict,
    SignalUnknown,
    StepNotFound,
    StoreUnavailable,
    TagInvalid,
    TaskTokenInvalid,
    TaskTokenStale,
    TooManyMatches,
    TooManySignals,
    UnknownWorkflowType,
    UploadError,
    UploadExpired,
    UploadNotFound,
    UploadUsed,
    WorkflowNotFound,
)
from shepherd.jsonsafe import JsonRejected
from shepherd.limits import MAX_JSON_DEPTH, MAX_REQUEST_BYTES
from shepherd.payloads import PayloadMissing

from shepherd_handlers.models import ErrorBody, ErrorDetail, FieldProblem
from shepherd_handlers.runtime import logger, owner_from_arn

# A body is one object around its payload (input, output, details): one level more than the
# payload's own limit, so a callback output may nest exactly as deep as an agent's output.
BODY_DEPTH = MAX_JSON_DEPTH + 1


def strict_json(text: str) -> Any:
    """RFC 8259 within the limits, or JsonRejected (also the resolvers' JSON deserializer)."""
    try:
        return jsonsafe.parse(text, what="body", max_depth=BODY_DEPTH)
    except JsonRejected as exc:
        if exc.code == "JsonTooDeep":
            raise JsonRejected(
                exc.code,
                f"a value in the body is nested more than {MAX_JSON_DEPTH} levels deep (the limit)",
            ) from None
        raise


def jsonsafe_bytes(raw: bytes) -> Any:
    """A body that came base64-encoded: UTF-8 first, then as `strict_json`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise JsonRejected("InvalidJson", "the body is not valid UTF-8") from None
    return strict_json(text)


def resolver() -> APIGatewayRestResolver:
    """A resolver that validates with pydantic and never parses JSON loosely."""
    app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=strict_json)
    register(app)
    return app


def error_response(
    status: HTTPStatus,
    code: str,
    message: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
    problems: Sequence[tuple[str, str]] = (),
) -> Response[Any]:
    listed = [FieldProblem(field=f, message=m) for f, m in problems] or None
    body = ErrorBody(error=ErrorDetail(code=code, message=message, field=field, problems=listed))
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        # json.dumps escapes to ASCII: a message quoting a lone surrogate still serializes.
        body=json.dumps(body.model_dump(exclude_none=True), separators=(",", ":")),
        headers=dict(headers or {}),
    )


def _field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else ("." if out else "") + part
    return out or "body"


# Domain errors whose reply is fixed by their type: status, code, offending field.
_BY_TYPE: dict[type[Exception], tuple[HTTPStatus, str, str | None]] = {
    UnknownWorkflowType: (HTTPStatus.BAD_REQUEST, "UnknownWorkflowType", "type"),
    IdempotencyConflict: (HTTPStatus.CONFLICT, "IdempotencyConflict", "idempotency_key"),
    InvalidTransition: (HTTPStatus.CONFLICT, "InvalidTransition", None),
    WorkflowNotFound: (HTTPStatus.NOT_FOUND, "WorkflowNotFound", None),
    StepNotFound: (HTTPStatus.NOT_FOUND, "StepNotFound", "step"),
    PathNotFound: (HTTPStatus.NOT_FOUND, "PathNotFound", None),
    ApprovalNotPending: (HTTPStatus.CONFLICT, "ApprovalNotPending", "step"),
    SignalUnknown: (HTTPStatus.BAD_REQUEST, "SignalUnknown", "name"),
    SignalIdConflict: (HTTPStatus.CONFLICT, "SignalIdConflict", "signal_id"),
    TooManySignals: (HTTPStatus.CONFLICT, "TooManySignals", None),
    TooManyMatches: (HTTPStatus.CONFLICT, "TooManyMatches", "match"),
    TagInvalid: (HTTPStatus.BAD_REQUEST, "TagInvalid", "tags"),
    TaskTokenInvalid: (HTTPStatus.NOT_FOUND, "TaskTokenInvalid", "token"),
    TaskTokenStale: (HTTPStatus.CONFLICT, "TaskTokenStale", "token"),
    PermissionError: (HTTPStatus.FORBIDDEN, "Forbidden", None),  # no caller identity
    OperatorOnly: (HTTPStatus.FORBIDDEN, "OperatorOnly", None),
    PoolNotFound: (HTTPStatus.NOT_FOUND, "PoolNotFound", "pool"),
    ScheduleNotFound: (HTTPStatus.NOT_FOUND, "ScheduleNotFound", "name"),
    NoCircuitBreaker: (HTTPStatus.BAD_REQUEST, "NoCircuitBreaker", "pool"),
    PayloadMissing: (HTTPStatus.INTERNAL_SERVER_ERROR, "PayloadMissing", None),
}
# Upload errors carry their code and name the request's field that named the upload
# (input_upload, output_upload); the rest (UploadRejected: missing, mismatch) are 400.
_UPLOADS: dict[type[UploadError], HTTPStatus] = {
    UploadNotFound: HTTPStatus.NOT_FOUND,
    UploadUsed: HTTPStatus.CONFLICT,
    UploadExpired: HTTPStatus.GONE,
}


# A store that is throttled or unavailable (after the SDK's own retries): nothing the caller
# did is wrong and nothing was lost; the same request later succeeds (an idempotent start with
# its key returns the same workflow).
STORE_RETRY_AFTER_SECONDS = 1


def translate(exc: Exception) -> Response[Any]:
    """The reply to a domain error, by its type (the first of its classes we know)."""
    if isinstance(exc, StoreUnavailable):
        logger.warning("store unavailable", extra={"error": str(exc), "throttled": exc.throttled})
        return error_response(
            HTTPStatus.SERVICE_UNAVAILABLE,
            "StoreUnavailable",
            "the state store is busy or unavailable (throttled); nothing was lost: retry after "
            "Retry-After seconds, with backoff",
            headers={"Retry-After": str(STORE_RETRY_AFTER_SECONDS)},
        )
    if isinstance(exc, HeartbeatTooSoon):
        return error_response(
            HTTPStatus.TOO_MANY_REQUESTS,
            "HeartbeatTooSoon",
            str(exc),
            headers={"Retry-After": str(exc.retry_after)},
        )
    if isinstance(exc, JsonRejected):
        return error_response(HTTPStatus.BAD_REQUEST, exc.code, exc.message, "body")
    if isinstance(exc, InputInvalid):
        return error_response(
            HTTPStatus.BAD_REQUEST, "InvalidInput", str(exc), exc.field, problems=exc.problems
        )
    if isinstance(exc, UploadError):
        status = _UPLOADS.get(type(exc), HTTPStatus.BAD_REQUEST)
        return error_response(status, exc.code, str(exc), exc.field)
    if isinstance(exc, PayloadTooLarge):
        # InputTooLarge, OutputTooLarge (also OutputRejected: the engine failed the attempt),
        # DetailsTooLarge: the code names what was over its cap.
        return error_response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, exc.code, str(exc), exc.what)
    status, code, field = next(v for t, v in _BY_TYPE.items() if isinstance(exc, t))
    return error_response(status, code, str(exc), field)


# Every domain error `translate` answers (a route answering many requests in one, as
# POST /tasks/heartbeats, answers each of them with it).
TRANSLATED: tuple[type[Exception], ...] = (
    StoreUnavailable,
    HeartbeatTooSoon,
    JsonRejected,
    InputInvalid,
    UploadError,
    PayloadTooLarge,
    *_BY_TYPE,
)


def register(app: APIGatewayRestResolver) -> None:
    """Every error has the shape of ErrorBody; bad input is a 4xx, never a 500."""

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response[Any]:
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _field(first.get("loc", ()))
        message = "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg')}" for e in errors)
        return error_response(HTTPStatus.BAD_REQUEST, "ValidationError", message, field)

    for exc_type in TRANSLATED:
        app.exception_handler(exc_type)(translate)

    @app.not_found
    def _no_route(_: Exception) -> Response[Any]:
        return error_response(HTTPStatus.NOT_FOUND, "NotFound", "no such route")


# -------------------------------------------------------------------------- the boundary


def caller(app: APIGatewayRestResolver) -> str:
    """The IAM identity API Gateway authenticated (see docs/api.md, Authorization): the owner
    of what the request creates or reads."""
    identity = app.current_event.request_context.identity
    arn = identity.user_arn or identity.caller
    if not arn:
        raise PermissionError("no caller identity")
    return owner_from_arn(arn)


def request_id(event: Mapping[str, Any], context: Any) -> str:
    """API Gateway's request id (what its access log and gateway responses show), else
    the Lambda request id."""
    ctx = event.get("requestContext")
    rid = ctx.get("requestId") if isinstance(ctx, Mapping) else None
    return str(rid or getattr(context, "aws_request_id", "") or "unknown")


def _header(event: Mapping[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name:
            return str(value)
    for key, values in (event.get("multiValueHeaders") or {}).items():
        if key.lower() == name and values:
            return str(values[-1])
    return None


def _is_json(content_type: str | None) -> bool:
    """`application/json` in any letter case, with or without parameters (charset=utf-8)."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == routes.JSON


def _too_large(cap: int) -> Response[Any]:
    return error_response(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        "BodyTooLarge",
        f"the body is larger than {cap} bytes (this route's limit)",
        "body",
    )


def _raw_body(event: Mapping[str, Any], cap: int) -> bytes | str | Response[Any]:
    """The body as sent (bytes if it came base64-encoded), or the reply refusing it."""
    body = event.get("body")
    if not body:
        return b""
    if not isinstance(body, str):
        return error_response(HTTPStatus.BAD_REQUEST, "InvalidBody", "the body is not text")
    if event.get("isBase64Encoded"):
        if len(body) > (cap // 3 + 1) * 4:
            return _too_large(cap)
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return error_response(
                HTTPStatus.BAD_REQUEST, "InvalidBody", "the body is not valid base64", "body"
            )
    return body


def admit(event: Mapping[str, Any]) -> tuple[Mapping[str, Any], Response[Any] | None]:
    """The event a resolver may see (body strictly parsed and re-encoded as plain JSON), or
    the reply that refuses it. Never raises on anything a caller can send."""
    resource = event.get("resource")
    route = routes.find(str(event.get("httpMethod", "")).upper(), str(resource))
    if route is None:
        allowed = routes.methods(str(resource))
        if allowed:
            return event, error_response(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                f"{event.get('httpMethod')} is not allowed here; use {', '.join(allowed)}",
                headers={"Allow": ", ".join(allowed)},
            )
        cap = MAX_REQUEST_BYTES  # the resolver answers 404 for an unknown resource
    else:
        cap = route.body_cap
        unknown = _unknown_query(event, route.query)
        if unknown is not None:
            shown = f"'{unknown}'" if unknown else "with no name"
            return event, error_response(
                HTTPStatus.BAD_REQUEST,
                "ValidationError",
                f"unknown query parameter {shown}"
                + (f"; this route reads {', '.join(route.query)}" if route.query else ""),
                unknown or "query",
            )
    raw = _raw_body(event, cap)
    if isinstance(raw, Response):
        return event, raw
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > cap:
        return event, _too_large(cap)
    if route is None or not route.json_body or not size:
        return {**event, "body": None, "isBase64Encoded": False}, None
    if not _is_json(_header(event, "content-type")):
        return event, error_response(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            f"the body must be {routes.JSON} (Content-Type: {routes.JSON})",
            "Content-Type",
        )
    try:
        value = strict_json(raw) if isinstance(raw, str) else jsonsafe_bytes(raw)
    except JsonRejected as exc:
        return event, error_response(HTTPStatus.BAD_REQUEST, exc.code, exc.message, "body")
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {
        k: v
        for k, v in (event.get("multiValueHeaders") or {}).items()
        if k.lower() != "content-type"
    }
    return {
        **event,
        "headers": {**headers, "Content-Type": routes.JSON},
        "multiValueHeaders": {**multi, "Content-Type": [routes.JSON]},
        "body": json.dumps(value),  # ASCII, checked: the resolver parses it again, strictly
        "isBase64Encoded": False,
    }, None


def proxy_reply(response: Response[Any]) -> dict[str, Any]:
    """A Response as the API Gateway proxy result (for replies made outside the resolver)."""
    headers = {"Content-Type": content_types.APPLICATION_JSON}
    headers.update({k: str(v) for k, v in response.headers.items() if isinstance(v, str)})
    return {
        "statusCode": int(response.status_code),
        "headers": headers,
        "body": response.body if isinstance(response.body, str) else json.dumps(response.body),
        "isBase64Encoded": False,
    }


def _with_request_id(reply: dict[str, Any], rid: str) -> dict[str, Any]:
    """Stamp the request id on an error reply, so a caller can quote it and we can find it."""
    if int(reply.get("statusCode", 200)) < 400 or not isinstance(reply.get("body"), str):
        return reply
    try:
        body = json.loads(reply["body"])
    except ValueError:
        return reply
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body["error"]["request_id"] = rid
        return {**reply, "body": json.dumps(body, separators=(",", ":"))}
    return reply


def serve(app: APIGatewayRestResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Admit the request, route it, and never let an exception out: an unexpected one is a
    `500 InternalError` carrying the request id it is logged with."""
    rid = request_id(event, context)
    try:
        admitted, refused = admit(event)
        reply = proxy_reply(refused) if refused is not None else app.resolve(admitted, context)
    except Exception:
        logger.exception("unhandled exception", extra={"request_id": rid})
        reply = proxy_reply(
            error_response(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                "InternalError",
                "an unexpected error occurred; quote the request id when reporting it",
            )
        )
    return _with_request_id(reply, rid)


# ------------------------------------------------------------------ the documented contract

_ERROR_DESCRIPTIONS = {
    400: "Bad request: malformed or too deep JSON, non-finite or out-of-range numbers, lone "
    "surrogates, invalid base64 or UTF-8, a field that fails validation (`field` names it), a "
    "forged or foreign pagination token",
    401: "Not signed: the request carries no SigV4 signature (API Gateway answers a request "
    "for an unknown route or method alike)",
    403: "Forbidden: the signature or the signing credentials are bad or expired, the caller "
    "may not invoke this route, the request has no caller identity, or an action on a shared "
    "pool by a caller who is not an operator",
    404: "Not found, or not the caller's",
    409: "Conflict with the current state",
    413: "Too large: the body over its route's cap, or a payload over its documented cap",
    410: "Gone: the upload named by `input_upload` (or `output_upload`) has expired",
    415: "The body is not application/json",
    429: "Throttled by API Gateway, or a callback heartbeat sooner than a second after the "
    "last one for its token: retry after `Retry-After` seconds, with backoff",
    500: "Internal error: quote the request id",
    502: "API Gateway could not get a reply from the handler",
    503: "The state store is throttled or unavailable: nothing was lost; retry after "
    "`Retry-After` seconds, with backoff",
    504: "The handler did not answer in time",
}
# Every operation can get these: API Gateway's own replies and the last-resort boundary.
COMMON_ERRORS = (400, 401, 403, 413, 429, 500, 502, 503, 504)


def _unknown_query(event: Mapping[str, Any], known: tuple[str, ...]) -> str | None:
    """The first query parameter name the route does not read, or None."""
    names = [
        *(event.get("queryStringParameters") or {}),
        *(event.get("multiValueQueryStringParameters") or {}),
    ]
    return next((str(n) for n in names if n not in known), None)


def documented(
    success: int,
    description: str,
    model: type[Any] | None,
    *errors: int,
    headers: Mapping[str, Any] | None = None,
) -> dict[int, Any]:
    """An operation's OpenAPI responses: its success and every error it can return, all
    errors in the one shape (ErrorBody)."""
    ok: dict[str, Any] = {"description": description}
    if model is not None:
        ok["content"] = {content_types.APPLICATION_JSON: {"model": model}}
    if headers:
        ok["headers"] = dict(headers)
    out: dict[int, Any] = {success: ok}
    for status in sorted({*errors, *COMMON_ERRORS}):
        out[status] = {
            "description": _ERROR_DESCRIPTIONS[status],
            "content": {content_types.APPLICATION_JSON: {"model": ErrorBody}},
        }
    return out
