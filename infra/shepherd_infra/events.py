"""The event bus, and the rule that turns external StartWorkflow events into workflow starts
(and Signal events into signals, issue 37)."""

from __future__ import annotations

from collections.abc import Mapping

import jsii
from aws_cdk import (
    Duration,
    aws_events,
    aws_events_targets,
    aws_iam,
    aws_lambda,
    aws_sqs,
)
from constructs import Construct
from shepherd.observability import (
    EVENT_SOURCE,
    HANDLER_EVENTS,
    INBOUND_DETAIL_TYPES,
)
from shepherd.topology import TABLE

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.nag import acknowledge
from shepherd_infra.naming import stack_scoped_name
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime

ARCHIVE_RETENTION = Duration.days(7)
TARGET_MAX_EVENT_AGE = Duration.hours(2)
TARGET_RETRY_ATTEMPTS = 20
# Lambda's own queue of asynchronous invocations (schedule firings, start events): two retries
# (its default, said here), then the start failures' queue.
ASYNC_RETRY_ATTEMPTS = 2
START_FAILURES_RETENTION = Duration.days(14)  # SQS's longest: time to replay them
NOT_A_REDRIVE_SOURCE = (
    "This queue is where starts that could not be made land (the events function's on-failure "
    "destination, the start rule target's DLQ): it has no DLQ of its own, it is alarmed "
    "(Monitoring, StartsFailed) and drained by `shepherd replay-starts`"
)


class EventBus(Construct):
    """Created before the functions: every function's environment names the bus.

    A bus needs a name, unique in the account and region: by default the stack's name and this
    construct's path (`Shepherd-Shepherd-Events`), so a second stack gets its own bus;
    `bus_name` (the `event_bus_name` context) overrides it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bus_name: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.bus = aws_events.EventBus(
            self, "Bus", event_bus_name=bus_name or stack_scoped_name(self, max_length=256)
        )
        self.start_pattern = aws_events.EventPattern(
            detail_type=list(INBOUND_DETAIL_TYPES),  # starts and signals, owned alike
            # Shepherd's own events never start workflows (no loops); anyone else's may.
            source=aws_events.Match.anything_but(EVENT_SOURCE),
        )
        # Every start event, kept a week: a second way back to a start (the start failures'
        # queue is the first); a replay starts nothing twice (keys follow from event ids).
        self.archive = self.bus.archive(
            "StartArchive",
            description="StartWorkflow events, for replay",
            event_pattern=self.start_pattern,
            retention=ARCHIVE_RETENTION,
        )
        # The CDK writes `KmsKeyIdentifier: ""` for an archive without a key of its own (an
        # open CDK bug reported to fail deploys in some regions): leave the property out, as
        # CloudFormation's default (an AWS owned key) means.
        archive = self.archive.node.default_child
        assert isinstance(archive, aws_events.CfnArchive)
        archive.add_property_deletion_override("KmsKeyIdentifier")

    def enforce_ownership(self, owners: Mapping[str, str], relay: aws_iam.IRole) -> None:
        """Who may put what on the bus, in its resource policy (explicit denies, which win
        over any identity policy that allows `PutEvents`):

        * `source: shepherd` (Shepherd's own lifecycle events) only by the event relay's
          role: nobody else can make subscribers and webhooks believe a workflow succeeded;
        * a source `event_owners` maps to a principal only by that principal (a role's
          sessions count as the role: `aws:PrincipalArn`): nobody else starts workflows as
          its owner or takes its idempotency keys;
        * `StartWorkflow` and `Signal` from no other source (the events handler rejects them
          too).

        Other events from other sources are the bus's business and pass."""
        bus = self.bus

        def deny(sid: str, conditions: dict[str, dict[str, object]]) -> None:
            bus.add_to_resource_policy(
                aws_iam.PolicyStatement(
                    sid=sid,
                    effect=aws_iam.Effect.DENY,
                    principals=[aws_iam.AnyPrincipal()],
                    actions=["events:PutEvents"],
                    resources=[bus.event_bus_arn],
                    conditions=conditions,
                )
            )

        deny(
            "OnlyTheRelayPutsShepherdEvents",
            {
                "StringEquals": {"events:source": EVENT_SOURCE},
                "ArnNotEquals": {"aws:PrincipalArn": relay.role_arn},
            },
        )
        for i, (source, owner) in enumerate(sorted(owners.items())):
            deny(
                f"OnlyItsOwnerPutsSource{i}",
                {
                    "StringEquals": {"events:source": source},
                    "ArnNotEquals": {"aws:PrincipalArn": owner},
                },
            )
        start: dict[str, dict[str, object]] = {
            "StringEquals": {"events:detail-type": list(INBOUND_DETAIL_TYPES)}
        }
        if owners:
            start["StringNotEquals"] = {"events:source": sorted(owners)}
        deny("StartWorkflowOnlyFromMappedSources", start)

    def add_start_rule(self, runtime: LambdaRuntime, access: Access) -> None:
        self.function = runtime.function(
            self,
            "StartHandler",
            FunctionSpec(
                handler=HANDLER_EVENTS,
                timeout=config.EVENTS_TIMEOUT,
                memory_mb=config.WORKER_MEMORY_MB,
                description="StartWorkflow events",
                extra_env={},
            ),
        )
        # Starts workflows like the API, but never lists them: of the indexes only by_key,
        # where a Signal event naming a match finds its workflows (issue 37.3).
        access.engine(self.function, indexes=[TABLE.key_index])
        access.payloads(self.function, read=False)
        access.uploads(self.function, sign=False)  # a start event naming an input_upload
        # A start that could not be made is never dropped (docs/api.md, Events): an event
        # EventBridge could not deliver (the target's DLQ) and an invocation that failed after
        # Lambda's retries (the on-failure destination) both land here, alarmed and replayed
        # by `shepherd replay-starts` (each start's idempotency key follows from its event's
        # id or its schedule firing, so a replay never starts a workflow twice).
        self.start_failures = aws_sqs.Queue(
            self,
            "StartFailures",
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=START_FAILURES_RETENTION,
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(self.start_failures, rule, NOT_A_REDRIVE_SOURCE)
        self.function.configure_async_invoke(
            on_failure=_SendOnly(self.start_failures), retry_attempts=ASYNC_RETRY_ATTEMPTS
        )
        self.rule = aws_events.Rule(
            self,
            "StartWorkflowRule",
            event_bus=self.bus,
            description=f"{', '.join(INBOUND_DETAIL_TYPES)} from any source but {EVENT_SOURCE}",
            event_pattern=self.start_pattern,
            targets=[
                aws_events_targets.LambdaFunction(
                    self.function,
                    max_event_age=TARGET_MAX_EVENT_AGE,
                    retry_attempts=TARGET_RETRY_ATTEMPTS,
                    dead_letter_queue=self.start_failures,
                )
            ],
        )
        acknowledge(
            self.function,
            "Serverless-LambdaDLQ",
            "Its on-failure destination (the start failures' queue) keeps every asynchronous "
            "invocation that failed, with its error: a DLQ would keep less of the same",
        )


@jsii.implements(aws_lambda.IDestination)
class _SendOnly:
    """An SQS on-failure destination granting `sqs:SendMessage` alone (the CDK's
    `SqsDestination` grants `GetQueueAttributes` and `GetQueueUrl` too, which Lambda's
    destination delivery never calls)."""

    def __init__(self, queue: aws_sqs.IQueue) -> None:
        self.queue = queue

    def bind(
        self,
        scope: Construct,
        fn: aws_lambda.IFunction,
        *,
        type: aws_lambda.DestinationType | None = None,  # the interface names it so
    ) -> aws_lambda.DestinationConfig:
        fn.add_to_role_policy(
            aws_iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
        )
        return aws_lambda.DestinationConfig(destination=self.queue.queue_arn)
