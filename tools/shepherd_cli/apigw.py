"""HTTP requests -> API Gateway REST proxy events, as API Gateway builds them for our routes."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

LOCAL_ACCOUNT = "000000000000"
DEFAULT_CALLER = f"arn:aws:iam::{LOCAL_ACCOUNT}:user/local"


@dataclass(frozen=True)
class Route:
    resource: str
    target: str  # "api" or "callbacks"

    @property
    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.resource)
        return re.compile(f"^{regex}$")


# The routes of the REST API (infra/shepherd_infra/api.py declares the same resources).
ROUTES = (
    Route("/workflows", "api"),
    Route("/workflows/{workflow_id}", "api"),
    Route("/workflows/{workflow_id}/cancel", "api"),
    Route("/workflows/{workflow_id}/retry", "api"),
    Route("/definitions", "api"),
    Route("/definitions/{name}", "api"),
    Route("/tasks/{token}/heartbeat", "callbacks"),
    Route("/tasks/{token}/success", "callbacks"),
    Route("/tasks/{token}/failure", "callbacks"),
)


def match(path: str) -> tuple[Route, dict[str, str]] | None:
    for route in ROUTES:
        found = route.pattern.match(path)
        if found:
            return route, found.groupdict()
    return None


def rest_event(
    method: str,
    path: str,
    *,
    resource: str,
    path_parameters: dict[str, str] | None,
    query: dict[str, str] | None,
    headers: dict[str, str],
    body: str | None,
    caller_arn: str,
) -> dict[str, Any]:
    """An API Gateway REST proxy event of an IAM-authorized request by `caller_arn`."""
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": path_parameters or None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/local{path}",
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "accountId": LOCAL_ACCOUNT,
            "identity": {
                "userArn": caller_arn,
                "caller": caller_arn.rsplit("/", 1)[-1],
                "accountId": LOCAL_ACCOUNT,
                "sourceIp": "127.0.0.1",
                "userAgent": headers.get("User-Agent", "shepherd-local"),
            },
        },
        "body": body,
        "isBase64Encoded": False,
    }


def caller_arn(header: str | None) -> str:
    """Local mode only: `X-Shepherd-Caller: alice` acts as IAM user alice."""
    if not header:
        return DEFAULT_CALLER
    if header.startswith("arn:"):
        return header
    return f"arn:aws:iam::{LOCAL_ACCOUNT}:user/{header}"
