"""Callbacks of callback steps: POST /tasks/heartbeat|success|failure, the task token in the
`X-Shepherd-Task-Token` header; POST /tasks/heartbeats keeps many attempts alive at once.

The token is the capability: it names one attempt and is fenced like an agent's write. It never
travels in the URL: API Gateway's X-Ray traces and access logs keep the path. The former routes,
`POST /tasks/{token}/...`, are gone (no route takes a token in its path). A
forged or unknown token gets 404 whatever state its attempt is in; only the genuine token of
an attempt that is over gets 409, and neither changes anything. Payloads obey the agents'
caps: details over MAX_DETAILS_BYTES are 413 DetailsTooLarge (nothing written); an output over
MAX_OUTPUT_BYTES is 413 OutputTooLarge, and the engine has then failed the attempt for good.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Header
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from shepherd.model import StepRecord
from shepherd.routes import TASK_TOKEN_HEADER

from shepherd_handlers import errors
from shepherd_handlers.models import (
    ErrorDetail,
    FailureRequest,
    HeartbeatBatchReply,
    HeartbeatBatchRequest,
    HeartbeatRequest,
    HeartbeatResult,
    SuccessRequest,
    TaskView,
)
from shepherd_handlers.runtime import count_throttles, engine, logger, metrics, tracer

TOKEN = Annotated[str, Header(alias=TASK_TOKEN_HEADER.lower(), min_length=8, max_length=1024)]

app = errors.resolver()


def _view(rec: StepRecord) -> TaskView:
    return TaskView(
        workflow_id=rec.workflow_id,
        step=rec.name,
        kind=rec.kind,
        attempt=rec.attempt,
        status=rec.status.value,
    )


def _responses(description: str, *extra: int) -> dict[int, Any]:
    return errors.documented(200, description, TaskView, 400, 404, 409, 415, *extra)


@app.post("/tasks/heartbeat", responses=_responses("Still waiting"), tags=["tasks"])
def heartbeat(token: TOKEN, body: HeartbeatRequest) -> TaskView:
    """Keep a waiting attempt alive (and leave progress details for a later attempt)."""
    return _view(engine().callbacks.callback(token, "heartbeat", details=body.details))


@app.post(
    "/tasks/heartbeats",
    responses=errors.documented(200, "Each heartbeat answered", HeartbeatBatchReply, 400, 415),
    tags=["tasks"],
)
def heartbeats(body: HeartbeatBatchRequest) -> HeartbeatBatchReply:
    """Heartbeats of many waiting attempts (an external worker's), each answered on its own
    with what POST /tasks/heartbeat would have answered: one entry's 404, 409 or 429 changes
    nothing for the others. The tokens travel in the body, never in the URL."""
    results: list[HeartbeatResult] = []
    for beat in body.heartbeats:
        try:
            rec = engine().callbacks.callback(beat.token, "heartbeat", details=beat.details)
        except errors.TRANSLATED as exc:
            reply = errors.translate(exc)
            detail = ErrorDetail.model_validate(json.loads(str(reply.body))["error"])
            results.append(HeartbeatResult(status=reply.status_code, error=detail))
        else:
            results.append(HeartbeatResult(status=HTTPStatus.OK, task=_view(rec)))
    return HeartbeatBatchReply(results=results)


@app.post("/tasks/success", responses=_responses("Recorded", 410), tags=["tasks"])
def success(token: TOKEN, body: SuccessRequest) -> TaskView:
    """Record the attempt's result and move the workflow on.

    `output_upload` instead of `output` names the caller's POST /payloads upload as the result
    (up to 100 MiB): 404 if it is not the caller's, 409 if another success or a start used
    it, 410 if it expired, 400 if its object is missing, not as declared or not strict JSON.
    The attempt stays waiting after any of these."""
    if body.output_upload is not None:
        rec = engine().callbacks.callback(
            token, "success", output_upload=body.output_upload, owner=errors.caller(app)
        )
    else:
        rec = engine().callbacks.callback(token, "success", output=body.output)
    logger.info(
        "callback success",
        extra={"workflow_id": rec.workflow_id, "step": rec.name, "attempt": rec.attempt},
    )
    return _view(rec)


@app.post("/tasks/failure", responses=_responses("Recorded"), tags=["tasks"])
def failure(token: TOKEN, body: FailureRequest) -> TaskView:
    """Fail the attempt: retried under the step's policy unless `error` is non-retryable."""
    return _view(engine().callbacks.callback(token, "failure", error=body.error, cause=body.cause))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
@count_throttles
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return errors.serve(app, event, context)
