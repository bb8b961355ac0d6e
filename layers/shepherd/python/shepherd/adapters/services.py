"""AWS service integrations of Amazon States Language Tasks, called through boto3.

`shepherd.asl.services` decides what a resource means (pure); this adapter makes the call:
it matches Step Functions' PascalCase parameter names to the API's own member names through
the SDK's service model, fills the API's idempotency token (a `ClientToken` member, a FIFO
queue's `MessageDeduplicationId`) from the step's idempotency key when the state gives none,
and turns a service error into Step Functions' error name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from botocore import xform_name
from botocore.exceptions import (
    ClientError,
    ParamValidationError,
    UnknownServiceError,
)
from botocore.model import (
    ListShape,
    MapShape,
    OperationModel,
    OperationNotFoundError,
    Shape,
    StructureShape,
)

from shepherd.asl import services
from shepherd.asl.errors import StatesError

ClientFactory = Callable[[str], Any]


class AwsServices:
    """Runs a Task's service call with clients from `client_factory(service_name)`."""

    def __init__(self, client_factory: ClientFactory) -> None:
        self._factory = client_factory
        self._clients: dict[str, Any] = {}

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            try:
                self._clients[service] = self._factory(service)
            except UnknownServiceError:
                raise StatesError(
                    services.PERMISSIONS, f"the SDK knows no service '{service}'"
                ) from None
        return self._clients[service]

    def call(self, resource: str, parameters: Any, idempotency_key: str | None = None) -> Any:
        """The state's result, or a StatesError named as Step Functions names it."""
        call = services.parse(resource)
        client = self._client(call.service)
        model = client.meta.service_model
        prefix = call.error_prefix or services.pascal_client(model.service_id)
        try:
            operation = model.operation_model(call.operation)
        except OperationNotFoundError:
            raise StatesError(
                services.PERMISSIONS, f"{call.service} has no action '{call.action}'"
            ) from None
        request = services.prepare(call, parameters)
        request = _named(operation.input_shape, request)
        if idempotency_key is not None:
            _fill_tokens(operation, request, idempotency_key)
        method = getattr(client, _snake(operation))
        try:
            response = method(**request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise StatesError(
                services.error_name(prefix, str(error.get("Code", "Unknown"))),
                str(error.get("Message") or exc),
            ) from None
        except ParamValidationError as exc:
            raise StatesError(f"{prefix}.ValidationException", str(exc)) from None
        return services.shape_result(response, optimized=not call.sdk)


def _snake(operation: OperationModel) -> str:
    return str(xform_name(operation.name))


def _named(shape: Shape | None, value: Any) -> Any:
    """`value` with each structure member named as the API names it (Step Functions writes
    every name in PascalCase, a few APIs use camelCase); map keys are data and stay."""
    if shape is None:
        return value
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        members = {name.lower(): name for name in shape.members}
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = members.get(key.lower(), key) if isinstance(key, str) else key
            out[name] = _named(shape.members.get(name), item)
        return out
    if isinstance(shape, ListShape) and isinstance(value, list):
        return [_named(shape.member, v) for v in value]
    if isinstance(shape, MapShape) and isinstance(value, dict):
        return {k: _named(shape.value, v) for k, v in value.items()}
    return value


def _token(key: str, limit: int = 64) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:limit]


def _fill_tokens(operation: OperationModel, request: dict[str, Any], key: str) -> None:
    """The step's idempotency key where the API takes one and the state gave none, so a retried
    attempt of the same step makes the call once (invariant 4)."""
    shape = operation.input_shape
    if not isinstance(shape, StructureShape):
        return
    for name, member in shape.members.items():
        if member.metadata.get("idempotencyToken") and name not in request:
            request[name] = _token(key)
    if (
        operation.service_model.service_name == "sqs"
        and operation.name == "SendMessage"
        and str(request.get("QueueUrl", "")).endswith(".fifo")
        and "MessageDeduplicationId" not in request
    ):
        request["MessageDeduplicationId"] = _token(key)
