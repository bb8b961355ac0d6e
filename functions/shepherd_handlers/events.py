"""`StartWorkflow` events on the Shepherd bus start workflows, with the API's validation and
idempotency. A bad event is logged and counted, never retried (it would fail the same way)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import ValidationError, parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field
from shepherd.errors import IdempotencyConflict, InputInvalid, InputTooLarge, UnknownWorkflowType

from shepherd_handlers.runtime import engine, logger, metrics, tracer


class StartWorkflowDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Annotated[str, Field(min_length=1, max_length=64)]
    input: Any = None
    idempotency_key: Annotated[str | None, Field(min_length=1, max_length=128)] = None
    owner: Annotated[str | None, Field(min_length=1, max_length=256)] = None


class StartWorkflowEvent(EventBridgeModel):
    detail: StartWorkflowDetail


def owner_of(event: StartWorkflowEvent) -> str:
    """Who owns an event-started workflow: the detail's `owner` (an IAM principal ARN that may
    then see it through the API), else `events:<source>`."""
    return event.detail.owner or f"events:{event.source}"


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        parsed = parse(event=event, model=StartWorkflowEvent)
    except ValidationError as exc:
        return _rejected("InvalidEvent", str(exc))
    detail = parsed.detail
    try:
        result = engine().scheduler.start(
            detail.type,
            detail.input,
            idempotency_key=detail.idempotency_key,
            owner=owner_of(parsed),
        )
    except (UnknownWorkflowType, InputInvalid, InputTooLarge, IdempotencyConflict) as exc:
        return _rejected(type(exc).__name__, str(exc))
    logger.info(
        "workflow started from an event",
        extra={"workflow_id": result.workflow_id, "new_workflow": result.created},
    )
    return {"status": "accepted", "workflow_id": result.workflow_id, "created": result.created}


def _rejected(code: str, message: str) -> dict[str, Any]:
    logger.warning("StartWorkflow event rejected", extra={"code": code, "reason": message})
    metrics.add_metric(name="StartEventsRejected", unit=MetricUnit.Count, value=1)
    return {"status": "rejected", "code": code, "message": message}
