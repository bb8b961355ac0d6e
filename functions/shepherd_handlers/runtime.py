"""What every handler shares: the engine (built lazily, once per sandbox), Powertools
Logger/Tracer/Metrics, metrics derived from domain events, and the caller's identity.

Tracing is switched on by configuration (`SHEPHERD_TRACING=true`): the X-Ray SDK alone takes
about as long to import as boto3, so a handler that does not trace never imports it. Lambda's
active tracing (the invocation's own segment) needs no SDK and stays on in the stack.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from shepherd.model import DomainEvent
from shepherd.observability import NAMESPACE, SERVICE, Metric
from shepherd.settings import Settings

if TYPE_CHECKING:
    from shepherd.wiring import Shepherd

# Reads (GET routes, duplicate deliveries) legitimately publish no metric.
warnings.filterwarnings("ignore", message="No application metrics to publish")

F = TypeVar("F", bound=Callable[..., Any])


def tracing_enabled() -> bool:
    """`SHEPHERD_TRACING=true` turns on the Powertools Tracer (X-Ray SDK subsegments): read
    through the settings model, alone, at import (the rest of the settings comes later)."""
    return Settings.tracing_from_env()


class Tracing:
    """The Powertools Tracer's two decorators, or pass-throughs when tracing is off.

    Off (the default), decorating returns the function itself: no X-Ray SDK import, no wrapper
    on the hot path. On, the Powertools Tracer is built at import, as before.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._tracer: Any = None
        if enabled:
            from aws_lambda_powertools import Tracer  # noqa: PLC0415 - imports the X-Ray SDK

            self._tracer = Tracer(service=Settings.service_from_env(SERVICE))

    def capture_lambda_handler(self, fn: F) -> F:
        if self._tracer is None:
            return fn
        wrapped: F = self._tracer.capture_lambda_handler(fn)
        return wrapped

    def capture_method(self, fn: F) -> F:
        if self._tracer is None:
            return fn
        wrapped: F = self._tracer.capture_method(fn)
        return wrapped


# The deployment's own service name (the stack sets it): the `service` dimension of every
# engine metric, so the alarms of one stack never read another's.
service = Settings.service_from_env(SERVICE)
logger = Logger(service=service)
tracer = Tracing(tracing_enabled())
metrics = Metrics(namespace=NAMESPACE, service=service)

# Domain events double as the source of the workflow and step metrics.
EVENT_METRICS = {
    "WorkflowStarted": Metric.WORKFLOWS_STARTED,
    "WorkflowSucceeded": Metric.WORKFLOWS_SUCCEEDED,
    "WorkflowFailed": Metric.WORKFLOWS_FAILED,
    "WorkflowCompensated": Metric.WORKFLOWS_COMPENSATED,
    "WorkflowCancelled": Metric.WORKFLOWS_CANCELLED,
    "WorkflowPaused": Metric.WORKFLOWS_PAUSED,
    "WorkflowResumed": Metric.WORKFLOWS_RESUMED,
    "StepRetried": Metric.STEP_RETRIES,
    "StepTimedOut": Metric.TIMEOUTS_DETECTED,
    "StepCompensated": Metric.COMPENSATIONS,
}


def event_metric(event: DomainEvent) -> Metric | None:
    """The count an event is. A state machine's Fail state or uncaught error is its designed
    end (`failure: definition`): counted apart, so the operator's WorkflowsFailed alarm never
    fires for it."""
    metric = EVENT_METRICS.get(event.detail_type)
    if metric is Metric.WORKFLOWS_FAILED and event.detail.get("failure") == "definition":
        return Metric.WORKFLOWS_FAILED_BY_DEFINITION
    return metric


def derived_metrics(event: DomainEvent) -> list[Metric]:
    """The metrics an event implies beyond its own count (what the alarms watch)."""
    if event.detail_type == "StepFailed" and event.detail.get("kind") == "compensation":
        return [Metric.COMPENSATIONS_FAILED]
    pause = event.detail.get("pause") or {}
    if event.detail_type == "WorkflowPaused" and pause.get("reason") == "failure":
        return [Metric.PAUSED_ON_FAILURE]
    return []


def count_events(events: Sequence[DomainEvent]) -> None:
    """Workflow and step metrics, from the events themselves: they cannot disagree."""
    for event in events:
        metric = event_metric(event)
        if metric is not None:
            metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
        for extra in derived_metrics(event):
            metrics.add_metric(name=extra, unit=MetricUnit.Count, value=1)


def count_throttles(fn: F) -> F:
    """After the handler: this invocation's throttled AWS calls, as `Throttles` with a
    `Service` dimension (one series per service the engine calls: a fixed, small number)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            from shepherd import wiring  # noqa: PLC0415 - loaded by the engine's first build

            for aws_service, count in wiring.THROTTLES.take().items():
                with single_metric(
                    name=Metric.THROTTLES,
                    unit=MetricUnit.Count,
                    value=count,
                    namespace=NAMESPACE,
                    default_dimensions={"service": service},  # the deployment's own
                ) as metric:
                    metric.add_dimension(name="Service", value=aws_service)

    return wrapped  # type: ignore[return-value]


@cache
def engine() -> Shepherd:
    """The engine for this sandbox: settings read once, clients built on first use, the agents
    of the modules the settings name (`SHEPHERD_AGENT_MODULES`) imported here, and only here."""
    # Imported here, not when the handler's module is: what a handler uses of the engine is
    # built on its first invocation, and a handler's cold import stays its own (issue 40.6).
    from shepherd.user_code import load_agents  # noqa: PLC0415
    from shepherd.wiring import Shepherd  # noqa: PLC0415

    settings = Settings.from_env()
    agents = load_agents(settings.agent_modules)
    return Shepherd(settings, agents=agents, worker_id=settings.worker_id)


_ASSUMED_ROLE = re.compile(r"^arn:(aws[\w-]*):sts::(\d{12}):assumed-role/([^/]+)/.+$")


def owner_from_arn(arn: str) -> str:
    """The owner of what a caller creates: its IAM principal.

    Sessions of one role share ownership: `arn:aws:sts::123:assumed-role/Role/session` maps to
    `arn:aws:iam::123:role/Role`. Users and other principals map to their own ARN.
    """
    match = _ASSUMED_ROLE.match(arn)
    if match:
        partition, account, role = match.groups()
        return f"arn:{partition}:iam::{account}:role/{role}"
    return arn
