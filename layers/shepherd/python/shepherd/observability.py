"""Names shared by the handlers that emit metrics and the CDK app that graphs and alarms on them.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from enum import StrEnum

NAMESPACE = "Shepherd"
SERVICE = "shepherd"


class Metric(StrEnum):
    WORKFLOWS_STARTED = "WorkflowsStarted"
    WORKFLOWS_SUCCEEDED = "WorkflowsSucceeded"
    WORKFLOWS_FAILED = "WorkflowsFailed"
    WORKFLOWS_COMPENSATED = "WorkflowsCompensated"
    WORKFLOWS_CANCELLED = "WorkflowsCancelled"
    WORKFLOWS_PAUSED = "WorkflowsPaused"  # by an operator or on a failure
    WORKFLOWS_RESUMED = "WorkflowsResumed"
    PAUSED_ON_FAILURE = "PausedOnFailure"  # a step with OnFailure PAUSE failed: alarmed
    STEP_ATTEMPTS = "StepAttempts"
    STEP_RETRIES = "StepRetries"
    TIMEOUTS_DETECTED = "TimeoutsDetected"
    LOST_MESSAGES_RECOVERED = "LostMessagesRecovered"
    COMPENSATIONS = "Compensations"
    COMPENSATIONS_FAILED = "CompensationsFailed"
    FENCED_WRITES = "FencedWritesRejected"
    DUPLICATES_DROPPED = "DuplicatesDropped"
    DETECTION_LAG = "DetectionLag"  # milliseconds, due -> acted
    SWEEP_DURATION = "SweepDuration"  # milliseconds
    SUPERVISOR_RAN = "SupervisorRan"  # 1 on every run: its absence raises an alarm
    LOOK_FAILURES = "LookFailures"  # supervisor looks that raised unexpectedly (alarmed)
    WORKFLOWS_PARKED = "WorkflowsParked"  # workflows parked after their looks kept failing


# Lambda handler entry points (module.function), as the CDK app and the local stack wire them.
HANDLER_API = "shepherd_handlers.api.handler"
HANDLER_EVENTS = "shepherd_handlers.events.handler"
HANDLER_AGENT = "shepherd_handlers.agent.handler"
HANDLER_SUPERVISOR = "shepherd_handlers.supervisor.handler"
HANDLER_CALLBACKS = "shepherd_handlers.callbacks.handler"
HANDLER_STREAM = "shepherd_handlers.stream.handler"

# Environment of the handlers beyond shepherd.settings.
ENV_POOL = "SHEPHERD_POOL"  # the pool an agent function serves
ENV_SWEEP_INTERVAL = "SHEPHERD_SWEEP_INTERVAL_SECONDS"  # supervisor: seconds between sweeps
ENV_SWEEP_WINDOW = "SHEPHERD_SWEEP_WINDOW_SECONDS"  # supervisor: keep sweeping for this long
# supervisor: the queue of its delayed ticks (one sweep each); unset: it sleeps between sweeps
ENV_SWEEP_TICKS = "SHEPHERD_SWEEP_TICKS_URL"
ENV_TRACING = "SHEPHERD_TRACING"  # "true": Powertools Tracer (X-Ray SDK) in every handler
EVENT_SOURCE = "shepherd"
START_DETAIL_TYPE = "StartWorkflow"
