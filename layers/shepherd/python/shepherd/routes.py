"""The REST API's routes and API Gateway's own error replies: one list, pure data.

The CDK app builds its resources and methods from `ROUTES`, the local gateway emulator
(`shepherd_cli.apigw`) routes with it, the handlers refuse bodies over a route's cap with it,
and tests check that the Powertools resolvers and the OpenAPI document declare exactly these.
No Powertools (nor CDK) import here: every one of those reads this module.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from shepherd.limits import (
    MAX_CALLBACK_BODY_BYTES,
    MAX_HEARTBEAT_BATCH_BODY_BYTES,
    MAX_PAYLOAD_INLINE_BYTES,
    MAX_REQUEST_BYTES,
    MAX_START_BODY_BYTES,
)

Target = Literal["api", "callbacks"]
JSON = "application/json"
# Where a callback's task token travels (docs/api.md, Callback steps).
TASK_TOKEN_HEADER = "X-Shepherd-Task-Token"  # noqa: S105 - a header name, not a secret
TASK_ACTIONS = ("heartbeat", "success", "failure")
# A synchronous Lambda invocation's request, API Gateway's event around the body included.
LAMBDA_REQUEST_MB = 6


@dataclass(frozen=True)
class Route:
    """One method on one resource of the REST API."""

    method: str
    resource: str  # API Gateway resource path: "/workflows/{workflow_id}"
    target: Target  # the Lambda handler behind it
    json_body: bool = False  # takes a JSON body (content type application/json)
    # The largest body accepted, checked before parsing: a route without a body ignores one,
    # but still refuses anything over API Gateway's own payload limit.
    body_cap: int = MAX_REQUEST_BYTES
    # The query parameters it reads; the handlers refuse any other (400), as they refuse a
    # body's unknown fields.
    query: tuple[str, ...] = ()
    # Headers it requires (API Gateway refuses a request without them, 400).
    headers: tuple[str, ...] = ()
    # Still answered, with an error saying what replaced it (docs/api.md, Deprecated routes).
    deprecated: bool = False

    @property
    def params(self) -> tuple[str, ...]:
        """Path parameter names, in order."""
        return tuple(re.findall(r"\{(\w+)\}", self.resource))


ROUTES: tuple[Route, ...] = (
    Route("POST", "/workflows", "api", json_body=True, body_cap=MAX_START_BODY_BYTES),
    Route(
        "GET",
        "/workflows",
        "api",
        query=(
            "status",
            "type",
            "created_after",
            "created_before",
            "sort",
            "limit",
            "next_token",
            "idempotency_key",
            "tag",
        ),
    ),
    # Before /workflows/{workflow_id}: a literal segment wins over a parameter.
    Route("GET", "/workflows/counts", "api", query=("type", "created_after", "created_before")),
    # Starts, successes and failures per time bucket (the console's chart): bounded reads.
    Route(
        "GET",
        "/workflows/series",
        "api",
        query=("type", "created_after", "created_before", "buckets"),
    ),
    Route("GET", "/workflows/{workflow_id}", "api"),
    Route("GET", "/workflows/{workflow_id}/events", "api", query=("limit", "next_token")),
    Route("GET", "/workflows/{workflow_id}/steps/{step}/error", "api"),
    # A map step's items, by index (issue 24): bounded pages, signed positions.
    Route(
        "GET",
        "/workflows/{workflow_id}/steps/{step}/items",
        "api",
        query=("status", "limit", "next_token"),
    ),
    Route("GET", "/workflows/{workflow_id}/compensations/{step}/error", "api"),
    # A payload's first bytes (a large one through a ranged read of its object).
    Route(
        "GET",
        "/workflows/{workflow_id}/preview",
        "api",
        query=("field", "step", "compensation", "bytes"),
    ),
    Route("POST", "/workflows/{workflow_id}/cancel", "api"),
    Route("POST", "/workflows/{workflow_id}/retry", "api"),
    Route("POST", "/workflows/{workflow_id}/pause", "api"),
    Route("POST", "/workflows/{workflow_id}/resume", "api", True, MAX_START_BODY_BYTES),
    Route("POST", "/workflows/{workflow_id}/compensate", "api"),
    # An Approval step's answer (docs/api.md, Approvals): a comment, and an approval's output.
    Route(
        "POST",
        "/workflows/{workflow_id}/steps/{step}/approve",
        "api",
        True,
        MAX_START_BODY_BYTES,
    ),
    Route("POST", "/workflows/{workflow_id}/steps/{step}/reject", "api", True, 8 * 1024),
    # A state machine's path (issue 42.4): the states entered, in order, with their data.
    Route("GET", "/workflows/{workflow_id}/path", "api", query=("limit", "next_token")),
    # A workflow's pending signals (issue 37.8: the console's view), at most 100.
    Route("GET", "/workflows/{workflow_id}/signals", "api"),
    # A signal into a running workflow (docs/api.md, Signals): kept until a step takes it.
    # Its payload is capped by the engine (the inline payload size); the body's cap leaves
    # room for the spaces and escapes a caller's JSON may carry around it.
    Route(
        "POST",
        "/workflows/{workflow_id}/signals/{name}",
        "api",
        True,
        4 * MAX_PAYLOAD_INLINE_BYTES + 8 * 1024,
    ),
    # A signal by a business key (issue 37.3): to every open workflow of the caller waiting
    # on it (the by_key index); its body as the signal route's, with its name and match.
    Route("POST", "/signals", "api", True, 4 * MAX_PAYLOAD_INLINE_BYTES + 16 * 1024),
    # The caller's pending approvals across workflows, newest first (the inbox index).
    Route("GET", "/approvals", "api", query=("limit", "next_token")),
    Route("POST", "/payloads", "api", json_body=True, body_cap=4 * 1024),
    Route("GET", "/pools", "api"),
    Route("POST", "/pools/{pool}/pause", "api"),
    Route("POST", "/pools/{pool}/resume", "api"),
    Route("POST", "/pools/{pool}/circuit", "api", json_body=True, body_cap=1024),
    Route("GET", "/definitions", "api"),
    Route("GET", "/schedules", "api"),
    *(Route("POST", f"/schedules/{{name}}/{action}", "api") for action in ("pause", "resume")),
    Route("GET", "/definitions/{name}", "api"),
    # A task token is a capability: it travels in a header, never in the URL (API Gateway's
    # traces and access logs keep the path).
    *(
        Route(
            "POST",
            f"/tasks/{action}",
            "callbacks",
            True,
            MAX_CALLBACK_BODY_BYTES,
            headers=(TASK_TOKEN_HEADER,),
        )
        for action in TASK_ACTIONS
    ),
    # Many attempts' heartbeats in one request (the tokens in the body: still never the URL).
    Route("POST", "/tasks/heartbeats", "callbacks", True, MAX_HEARTBEAT_BATCH_BODY_BYTES),
    # No route takes a token in its path: the former `/tasks/{token}/...` routes are gone
    # (issue 35.1), so API Gateway answers a request to one before any token reaches a log
    # line of ours, and no live token is ever part of a route.
)


def resources() -> tuple[str, ...]:
    """Every resource path, each once, in declaration order."""
    return tuple(dict.fromkeys(r.resource for r in ROUTES))


def methods(resource: str) -> tuple[str, ...]:
    """The methods a resource answers (for an `Allow` header)."""
    return tuple(r.method for r in ROUTES if r.resource == resource)


def find(method: str, resource: str) -> Route | None:
    return next((r for r in ROUTES if r.method == method and r.resource == resource), None)


def match(path: str) -> tuple[str, dict[str, str]] | None:
    """The resource a request path falls on, with its path parameters as sent (still
    percent-encoded), or None. A parameter is one whole segment, as in API Gateway."""
    segments = path.split("/")
    for resource in resources():
        parts = resource.split("/")
        if len(parts) != len(segments):
            continue
        params: dict[str, str] = {}
        for part, segment in zip(parts, segments, strict=True):
            if part.startswith("{"):
                if not segment:
                    break
                params[part.strip("{}")] = segment
            elif part != segment:
                break
        else:
            return resource, params
    return None


# ------------------------------------------------------------------ API Gateway's own errors


@dataclass(frozen=True)
class GatewayError:
    """A gateway response: what API Gateway answers for a request no handler sees.

    `status` None keeps the status API Gateway chose (the DEFAULT_4XX/5XX fallbacks);
    `message` None passes API Gateway's own message through ($context.error.messageString).
    """

    response_type: str  # the API Gateway response type (CDK `ResponseType.<name>`)
    status: int | None
    code: str
    message: str | None


GATEWAY_ERRORS: tuple[GatewayError, ...] = (
    GatewayError("BAD_REQUEST_BODY", 400, "ValidationError", "the request body is not valid"),
    GatewayError(
        "BAD_REQUEST_PARAMETERS", 400, "ValidationError", "a request parameter is not valid"
    ),
    # 401, not API Gateway's default 403: the request carries no credentials. API Gateway
    # answers a signed request for an unknown route or method with this response too.
    GatewayError(
        "MISSING_AUTHENTICATION_TOKEN",
        401,
        "MissingAuthenticationToken",
        "the request is not signed (SigV4), or no such route or method exists",
    ),
    GatewayError("INVALID_SIGNATURE", 403, "InvalidSignature", "the request signature is wrong"),
    GatewayError("EXPIRED_TOKEN", 403, "ExpiredToken", "the signing credentials have expired"),
    GatewayError("ACCESS_DENIED", 403, "AccessDenied", "the caller may not invoke this route"),
    GatewayError("THROTTLED", 429, "Throttled", "too many requests: slow down and retry"),
    GatewayError(
        "REQUEST_TOO_LARGE",
        413,
        "BodyTooLarge",
        f"the request is larger than {MAX_REQUEST_BYTES} bytes (API Gateway's limit); "
        f"Lambda takes {LAMBDA_REQUEST_MB} MB at most, so send a payload over 5 MiB through "
        "POST /payloads",
    ),
    GatewayError("UNSUPPORTED_MEDIA_TYPE", 415, "UnsupportedMediaType", f"the body must be {JSON}"),
    # API Gateway takes 10 MB, Lambda 6 MB: a request between the two never reaches the
    # handler and comes back as this, not as a 413, so the message says so.
    GatewayError(
        "INTEGRATION_FAILURE",
        502,
        "IntegrationFailure",
        "the handler failed, or the request was over the "
        f"{LAMBDA_REQUEST_MB} MB Lambda takes (a body over 5 MiB goes through POST /payloads)",
    ),
    GatewayError("INTEGRATION_TIMEOUT", 504, "IntegrationTimeout", "the handler timed out"),
    GatewayError("DEFAULT_4XX", None, "RequestRejected", None),
    GatewayError("DEFAULT_5XX", None, "GatewayError", None),
)


def gateway_error(response_type: str) -> GatewayError:
    return next(g for g in GATEWAY_ERRORS if g.response_type == response_type)
