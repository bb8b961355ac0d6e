"""The one kit of fake Lambda contexts and events: what the local stack hands the real handlers,
and what the tests and the benchmarks hand them in-process.

A context with the attributes the handlers and Powertools read; the events of the services
that invoke Shepherd's functions: an SQS batch (the pools' event source mappings), an API
Gateway REST proxy request (IAM-authorized), an EventBridge event (the supervisor's schedule,
StartWorkflow) and a DynamoDB stream batch (the relay). Standard library only, so any host can
import it. Not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LOCAL_ACCOUNT = "000000000000"
LOCAL_REGION = "us-east-1"
LOCAL_FUNCTION_ARN = f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT}:function:shepherd-local"

# What SQS reports of a message received once (an event built from bodies alone).
SQS_ATTRIBUTES = {
    "ApproximateReceiveCount": "1",
    "SentTimestamp": "1767225600000",
    "SenderId": "AIDAEXAMPLE",
    "ApproximateFirstReceiveTimestamp": "1767225600001",
}


@dataclass
class LambdaContext:
    """The bits of a Lambda context the handlers read.

    The remaining time counts down from `started` over `timeout_s`, as in a sandbox; with
    `remaining_ms` set it stays at that (a test that wants a fixed deadline)."""

    function_name: str = "shepherd-local"
    timeout_s: float = 60
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = ""  # empty: this function's ARN in `region` and `account`
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)
    remaining_ms: int | None = None
    region: str = LOCAL_REGION
    account: str = LOCAL_ACCOUNT

    def __post_init__(self) -> None:
        if not self.invoked_function_arn:
            self.invoked_function_arn = (
                f"arn:aws:lambda:{self.region}:{self.account}:function:{self.function_name}"
            )

    def get_remaining_time_in_millis(self) -> int:
        if self.remaining_ms is not None:
            return self.remaining_ms
        return max(0, int((self.started + self.timeout_s - time.monotonic()) * 1000))


def local_context(name: str, timeout_s: float) -> LambdaContext:
    """A local-stack invocation's context: the clock starts now."""
    return LambdaContext(name, timeout_s, invoked_function_arn=LOCAL_FUNCTION_ARN)


def sqs_event(
    messages: Iterable[Mapping[str, Any]], queue_arn: str, *, received: bool = False
) -> dict[str, Any]:
    """The event an SQS event source mapping hands its function, of messages as ReceiveMessage
    returns them (`MessageId`, `ReceiptHandle`, `Body`, optionally `MD5OfBody`, `Attributes`).

    `received`: the messages came from a real queue, their own attributes and MD5 (or none) go
    in; otherwise those of a message received once are made up."""
    region = queue_arn.split(":")[3] if queue_arn.count(":") >= 3 else LOCAL_REGION
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": (m.get("Attributes", {}) if received else dict(SQS_ATTRIBUTES)),
                "messageAttributes": {},
                "md5OfBody": m.get("MD5OfBody", "" if received else "0" * 32),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


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
    base_path: str = "",
    multi_query: dict[str, list[str]] | None = None,
    multi_headers: dict[str, list[str]] | None = None,
    is_base64: bool = False,
    request_id: str | None = None,
    stage: str = "local",
    account: str = LOCAL_ACCOUNT,
) -> dict[str, Any]:
    """An API Gateway REST proxy event of an IAM-authorized request by `caller_arn`.

    `base_path` is what sits in front of the resources in the caller's URL (`/v1` for the
    stage of an execute-api URL); the local stack serves its routes at the root.
    """
    multi_q = multi_query if multi_query is not None else {k: [v] for k, v in (query or {}).items()}
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": multi_headers or {k: [v] for k, v in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": multi_q or None,
        "pathParameters": path_parameters or None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"{base_path}{path}",
            "stage": stage,
            "requestId": request_id or str(uuid.uuid4()),
            "accountId": account,
            "identity": {
                "userArn": caller_arn,
                "caller": caller_arn.rsplit("/", 1)[-1],
                "accountId": account,
                "sourceIp": "127.0.0.1",
                "userAgent": headers.get("User-Agent", "shepherd-local"),
            },
        },
        "body": body,
        "isBase64Encoded": is_base64,
    }


def eventbridge_event(
    detail_type: str,
    detail: Any,
    *,
    source: str,
    account: str | None = None,
    region: str | None = None,
    at: str | None = None,
    resources: Sequence[str] | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    """An EventBridge event as a rule's target receives it. `account`, `region`, `at` (its
    `time`) and `resources` go in only when given: the local stack's schedule leaves them out."""
    event: dict[str, Any] = {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
    }
    optional = {"account": account, "time": at, "region": region}
    event.update({key: value for key, value in optional.items() if value is not None})
    if resources is not None:
        event["resources"] = list(resources)
    event["detail"] = detail
    return event


def scheduled_event() -> dict[str, Any]:
    """The supervisor's schedule firing (an EventBridge scheduled event)."""
    return eventbridge_event("Scheduled Event", {}, source="aws.events")


def stream_event(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A DynamoDB stream batch as the stream's event source mapping hands it on."""
    return {"Records": list(records)}
