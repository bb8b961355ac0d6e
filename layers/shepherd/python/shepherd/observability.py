"""Names shared by the handlers that emit metrics and the CDK app that graphs and alarms on them.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from enum import StrEnum

from shepherd.settings import ENV_SWEEP_INTERVAL as ENV_SWEEP_INTERVAL  # noqa: PLC0414
from shepherd.settings import ENV_SWEEP_TICKS as ENV_SWEEP_TICKS  # noqa: PLC0414
from shepherd.settings import ENV_SWEEP_WINDOW as ENV_SWEEP_WINDOW  # noqa: PLC0414
from shepherd.settings import ENV_TRACING as ENV_TRACING  # noqa: PLC0414

NAMESPACE = "Shepherd"
SERVICE = "shepherd"


class Metric(StrEnum):
    WORKFLOWS_STARTED = "WorkflowsStarted"
    WORKFLOWS_SUCCEEDED = "WorkflowsSucceeded"
    WORKFLOWS_FAILED = "WorkflowsFailed"  # that need an operator (alarmed)
    # A state machine ended by a Fail state or an uncaught error: designed, not alarmed.
    WORKFLOWS_FAILED_BY_DEFINITION = "WorkflowsFailedByDefinition"
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
    LOOK_FAILURES = "LookFailures"  # supervisor looks that raised unexpectedly (alarmed)
    WORKFLOWS_PARKED = "WorkflowsParked"  # workflows parked after their looks kept failing
    # Emitted by every group's sweep (no group dimension: a fixed number of custom metrics;
    # the group is in the sweep's log line).
    SWEEP_DUE = "Due"  # due entries a sweep took up
    SWEEP_TRUNCATED = "Truncated"  # 1 when a sweep's budget ran out before its due entries
    OLDEST_DUE_AGE = "OldestDueAgeMs"  # how long the oldest due entry had waited (alarmed)
    SWEEP_UNAVAILABLE = "Unavailable"  # looks that met a throttled or unavailable store
    THROTTLES = "Throttles"  # AWS calls answered "slow down", dimension Service
    RECORDS_DEFERRED = "RecordsDeferred"  # left unclaimed: no time for their longest attempt
    TASKS_HELD = "TasksHeld"  # sent back with a delay: no rate-limit token, or its circuit
    # 1 while a pool's circuit breaker is open or half-open, 0 closed (dimension Pool), once a
    # minute for each pool with a breaker: one alarm per such pool watches it.
    POOL_CIRCUIT_OPEN = "PoolCircuitOpen"
    # a step whose pool's code registers no such agent (failed at once, never redelivered)
    AGENTS_NOT_FOUND = "AgentNotFound"


# Lambda handler entry points (module.function), as the CDK app and the local stack wire them.
HANDLER_API = "shepherd_handlers.api.handler"
HANDLER_EVENTS = "shepherd_handlers.events.handler"
HANDLER_AGENT = "shepherd_handlers.agent.handler"
HANDLER_SUPERVISOR = "shepherd_handlers.supervisor.handler"
HANDLER_CALLBACKS = "shepherd_handlers.callbacks.handler"
HANDLER_STREAM = "shepherd_handlers.stream.handler"

# Environment of the handlers beyond shepherd.settings.
ENV_POOL = "SHEPHERD_POOL"  # the pool an agent function serves
# The supervisor's timing and tracing are settings (read and validated by shepherd.settings);
# their names stay importable from here for the CDK app and the tests.
EVENT_SOURCE = "shepherd"
START_DETAIL_TYPE = "StartWorkflow"
SIGNAL_DETAIL_TYPE = "Signal"  # a signal into a running workflow (issue 37), owned as a start
INBOUND_DETAIL_TYPES = (START_DETAIL_TYPE, SIGNAL_DETAIL_TYPE)  # what the events handler takes
