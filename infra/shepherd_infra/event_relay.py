"""The table's change stream -> lifecycle events on the bus, at least once.

No writer publishes events: a process that dies between its write and a publish would lose
one. The table's stream holds every write for 24 hours; this function, fed by an event source
mapping, turns each change into the events it announces (`shepherd.changes`) and puts them on
the bus. A failure is contained:

* partial batch responses: a record whose events cannot be published is retried from that
  record on (earlier records are not published again);
* a batch that keeps failing is bisected, so one bad record cannot hold its neighbours back;
* after `RETRY_ATTEMPTS` (or `MAX_RECORD_AGE`) the record's position goes to the on-failure
  queue, which alarms; `shepherd events replay` reads it back from the stream (docs/api.md);
* the mapping's iterator age (how far behind the consumer is) is graphed and alarmed.

Event filters (`shepherd.changes.STREAM_FILTERS`) drop claims and heartbeats before an
invocation, at no charge: most writes never reach the function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsii
from aws_cdk import Duration, aws_iam, aws_lambda, aws_lambda_event_sources, aws_sqs
from constructs import Construct
from shepherd.changes import STREAM_FILTERS
from shepherd.observability import HANDLER_STREAM
from shepherd.topology import RELAY_BATCH_SIZE

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.nag import acknowledge
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime, allow
from shepherd_infra.state_store import StateStore

BATCH_WINDOW = Duration.seconds(1)  # up to 1 s more latency, far fewer invocations
RETRY_ATTEMPTS = 10
MAX_RECORD_AGE = Duration.hours(6)  # well inside the stream's 24 h retention, for a replay
# Order per workflow holds with any factor (Lambda keeps records of one partition key in
# order); more than one lets a busy shard's workflows publish in parallel.
PARALLELIZATION = 2
FAILURE_RETENTION = Duration.days(14)


class EventRelay(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        store: StateStore,
        runtime: LambdaRuntime,
        access: Access,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function: aws_lambda.Function = runtime.function(
            self,
            "Relay",
            FunctionSpec(
                handler=HANDLER_STREAM,
                timeout=config.RELAY_TIMEOUT,
                memory_mb=config.WORKER_MEMORY_MB,
                description="Table changes -> lifecycle events",
                extra_env={},
            ),
        )
        access.publish(self.function)  # the only function that puts events on the bus
        access.history(self.function)  # and keeps them per workflow (EV#<id> items only)
        self.failures = aws_sqs.Queue(
            self,
            "Failures",
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=FAILURE_RETENTION,
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(
                self.failures,
                rule,
                "This queue is itself the relay's on-failure destination (it holds the stream "
                "positions of records that could not be published, for a replay); it alarms "
                "when not empty, and a DLQ of it would only move the problem",
            )
        self.source = aws_lambda_event_sources.DynamoEventSource(
            store.table,
            starting_position=aws_lambda.StartingPosition.TRIM_HORIZON,
            batch_size=RELAY_BATCH_SIZE,
            max_batching_window=BATCH_WINDOW,
            bisect_batch_on_error=True,
            retry_attempts=RETRY_ATTEMPTS,
            max_record_age=MAX_RECORD_AGE,
            parallelization_factor=PARALLELIZATION,
            report_batch_item_failures=True,
            on_failure=SendOnlyDlq(self.failures),
            filters=[_filter(pattern) for pattern in STREAM_FILTERS],
        )
        self.function.add_event_source(self.source)
        for rule, reason in (
            (
                "Serverless-LambdaDLQ",
                "A stream-fed function's failures go to the mapping's on-failure destination "
                "(the Failures queue), not to an asynchronous DLQ",
            ),
            (
                "Serverless-LambdaAsyncFailureDestination",
                "Invoked synchronously by its event source mapping, which has an on-failure "
                "destination",
            ),
        ):
            acknowledge(self.function, rule, reason)


@jsii.implements(aws_lambda.IEventSourceDlq)
class SendOnlyDlq:
    """The mapping's on-failure queue, granted as Lambda uses it: SendMessage alone (the CDK's
    SqsDlq also grants GetQueueAttributes and GetQueueUrl, which nothing calls)."""

    def __init__(self, queue: aws_sqs.IQueue) -> None:
        self._queue = queue

    def bind(
        self, target: aws_lambda.IEventSourceMapping, target_handler: aws_lambda.IFunction
    ) -> aws_lambda.DlqDestinationConfig:
        allow(
            target_handler,
            aws_iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self._queue.queue_arn]),
        )
        return aws_lambda.DlqDestinationConfig(destination=self._queue.queue_arn)


def _filter(pattern: dict[str, Any]) -> Mapping[str, Any]:
    """A Lambda filter (`{"pattern": json}`) from one of the core's filter patterns."""
    return aws_lambda.FilterCriteria.filter(pattern)
