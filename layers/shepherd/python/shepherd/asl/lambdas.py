"""Lambda tasks as Step Functions runs them: which function a Task names, what it is given,
and how its result or its exception comes back (pure; the runner calls the function).

* `arn:aws:states:::lambda:invoke` (optionally `.waitForTaskToken`): the function is
  Parameters/Arguments `FunctionName`, it gets `Payload`, and the result is the Invoke API's
  response: `{"ExecutedVersion", "Payload", "SdkHttpMetadata", "SdkResponseMetadata",
  "StatusCode"}`.
* a Lambda function ARN `arn:aws:lambda:region:account:function:NAME[:alias]` or a bare name:
  the function gets the effective input and its result is the payload itself.

A function is found by its NAME: the last part of the ARN, without version or alias.
An exception becomes a Lambda error: the class name as the error and the runtime's error JSON
(`errorMessage`, `errorType`, `requestId`, `stackTrace`) as the cause.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any

from shepherd.errors import PermanentError

from .errors import RUNTIME, StatesError
from .values import dumps

INVOKE = "arn:aws:states:::lambda:invoke"
WAIT_FOR_TOKEN = ".waitForTaskToken"  # noqa: S105 - a resource suffix, not a secret


@dataclass(frozen=True)
class Invocation:
    function: str  # the registered name
    payload: Any
    shaped: bool  # lambda:invoke: wrap the result in the Invoke response
    callback: bool  # .waitForTaskToken: the task ends when its token is completed
    # The function as the state names it (ARN, name, `NAME:alias`) and lambda:invoke's
    # `Qualifier`: what a deployed function is invoked as (`deployed_request`).
    target: str = ""
    qualifier: str | None = None


def function_name(reference: str) -> str:
    """NAME from `arn:aws:lambda:r:a:function:NAME[:alias]`, `NAME[:alias]` or `a:function:NAME`."""
    parts = reference.split(":")
    if "function" in parts:
        return parts[parts.index("function") + 1]
    return parts[0]


def invocation(resource: str, payload: Any) -> Invocation:
    callback = resource.endswith(WAIT_FOR_TOKEN)
    base = resource.removesuffix(WAIT_FOR_TOKEN)
    if base == INVOKE:
        if not isinstance(payload, dict) or not isinstance(payload.get("FunctionName"), str):
            raise StatesError(RUNTIME, "lambda:invoke needs Parameters.FunctionName")
        qualifier = payload.get("Qualifier")
        return Invocation(
            function_name(payload["FunctionName"]),
            _event(payload.get("Payload")),
            True,
            callback,
            payload["FunctionName"],
            qualifier if isinstance(qualifier, str) else None,
        )
    if base.startswith("arn:aws:states:::"):
        raise StatesError(
            RUNTIME, f"The resource '{resource}' is not a Lambda task this runner can run"
        )
    if base.startswith("arn:") and ":lambda:" not in base:
        raise StatesError(RUNTIME, f"The resource '{resource}' is not a Lambda function")
    return Invocation(function_name(base), payload, False, callback, base)


def _event(payload: Any) -> Any:
    """What the function receives from `Payload`: `{}` when there is none, and a string that
    is JSON text as the value it spells (Lambda is sent the bytes as they are)."""
    if payload is None:
        return {}
    if isinstance(payload, str):
        try:
            return json.loads(payload)
        except ValueError:
            return payload
    return payload


# AllHttpHeaders in the order a recorded lambda:invoke result lists them (LocalStack's
# context_object snapshot, recorded against AWS); HttpHeaders is in the order above.
_ALL_HEADERS_ORDER = (
    "X-Amz-Executed-Version",
    "x-amzn-Remapped-Content-Length",
    "Connection",
    "x-amzn-RequestId",
    "Content-Length",
    "Date",
    "X-Amzn-Trace-Id",
    "Content-Type",
)


def shape(invoked: Invocation, result: Any, request_id: str, date: str) -> Any:
    """The task's result as Step Functions gives it."""
    if not invoked.shaped or invoked.callback:
        return result
    length = str(len(dumps(result).encode()))
    headers = {
        "Connection": "keep-alive",
        "Content-Length": length,
        "Content-Type": "application/json",
        "Date": date,
        "X-Amz-Executed-Version": "$LATEST",
        "x-amzn-Remapped-Content-Length": "0",
        "x-amzn-RequestId": request_id,
        "X-Amzn-Trace-Id": f"Root={request_id}",
    }
    return {
        "ExecutedVersion": "$LATEST",
        "Payload": result,
        "SdkHttpMetadata": {
            "AllHttpHeaders": {k: [headers[k]] for k in _ALL_HEADERS_ORDER},
            "HttpHeaders": headers,
            "HttpStatusCode": 200,
        },
        "SdkResponseMetadata": {"RequestId": request_id},
        "StatusCode": 200,
    }


def error_of(exc: BaseException, request_id: str) -> StatesError:
    """A function's exception as the Lambda error Step Functions reports."""
    # A Shepherd agent names its error with PermanentError(name=...): that name, as a Python
    # Lambda's errorType is its exception's class name otherwise.
    name = exc.name if isinstance(exc, PermanentError) else type(exc).__name__
    cause = {
        "errorMessage": str(exc),
        "errorType": name,
        "requestId": request_id,
        # The function's own frames, as the Python runtime lists them (the caller's first frame
        # is the runner's, not the function's).
        "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)[1:]),
    }
    return StatesError(name, dumps(cause))


# --- a deployed function (the integration pool's run of a Lambda task) --------------------

SDK_INVOKE = "arn:aws:states:::aws-sdk:lambda:invoke"  # the Invoke API, through the SDK call


def deployed_request(invoked: Invocation) -> dict[str, Any]:
    """The Invoke API request that runs the function as deployed (synchronously)."""
    request: dict[str, Any] = {
        "FunctionName": invoked.target or invoked.function,
        "InvocationType": "RequestResponse",
        "Payload": dumps(invoked.payload),
    }
    if invoked.qualifier is not None:
        request["Qualifier"] = invoked.qualifier
    return request


def deployed_result(response: Any) -> Any:
    """The function's result from the Invoke API's response (`Payload` as text, as the SDK
    call shapes it); a function error (`FunctionError`) as Step Functions reports it: the
    payload's `errorType` as the error (`Lambda.Unknown` when it names none) and the payload
    itself as the cause."""
    body = response.get("Payload") if isinstance(response, dict) else None
    text = body if isinstance(body, str) else dumps(body)
    try:
        value = json.loads(text) if text else None
    except ValueError:
        value = text
    if isinstance(response, dict) and response.get("FunctionError"):
        name = value.get("errorType") if isinstance(value, dict) else None
        raise StatesError(name if isinstance(name, str) and name else "Lambda.Unknown", text)
    return value
