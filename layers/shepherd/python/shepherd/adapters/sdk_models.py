"""What the installed AWS SDK knows (botocore's service models): an `aws-sdk:<service>:<action>`
Task naming a service or an API it does not have is refused when the state machine is checked
(`shepherd validate`, `cdk synth`), not when it runs."""

from __future__ import annotations

import functools
from typing import Any

import botocore.session


@functools.cache
def _session() -> Any:
    return botocore.session.get_session()


@functools.cache
def sdk_knows(service: str, operation: str) -> str | None:
    """None if the SDK has `service`'s `operation` (boto3 names: `sqs`, `SendMessage`), else
    why not (`shepherd.asl.grants.Knows`)."""
    session = _session()
    if service not in session.get_available_services():
        return f"the AWS SDK has no service '{service}'"
    if operation not in session.get_service_model(service).operation_names:
        return f"the AWS SDK's {service} has no API {operation}"
    return None
