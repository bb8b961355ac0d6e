"""The definitions' schedules on EventBridge Scheduler (docs/architecture.md, schedules).

One schedule group per Shepherd, one `AWS::Scheduler::Schedule` per schedule of every
definition (L1: the L2 takes no context attributes in a JSON input). Each firing invokes the
events function with a `StartWorkflow` event from `shepherd.schedule`, built by
`shepherd.schedules.firing_event` (the local stack's clock builds the same), so a schedule
starts its workflow through the one event path, with the idempotency key
`schedule:<name>:<scheduled time>`: Scheduler delivers at least once, a duplicate starts
nothing. Pausing is the table's business (the schedule item every firing reads), never an
`UpdateSchedule`: a deploy cannot resume a paused schedule.

Nothing is created for definitions without schedules.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import (
    AspectPriority,
    Aspects,
    Aws,
    Duration,
    Stack,
    aws_iam,
    aws_lambda,
    aws_scheduler,
    aws_sqs,
)
from constructs import Construct
from shepherd import schedules
from shepherd.definitions import Definition

from shepherd_infra.nag import acknowledge
from shepherd_infra.naming import stack_scoped_name
from shepherd_infra.supervisor import DependOnRolePolicies

# Scheduler's most: a firing it could not deliver (throttled, the function unavailable) is
# retried for an hour, then goes to the dead-letter queue.
MAX_RETRY_ATTEMPTS = 185
MAX_EVENT_AGE = Duration.hours(1)
DLQ_RETENTION = Duration.days(14)  # SQS's longest: time to look and start them by hand
GROUP_NAME_MAX = 64  # Scheduler: a group's name, [0-9a-zA-Z-_.]{1,64}
NOT_A_REDRIVE_SOURCE = (
    "This queue is the schedules' dead-letter queue (Scheduler's DeadLetterConfig): it has no "
    "DLQ of its own, and it is alarmed (Monitoring, SchedulesUndelivered)"
)


def schedule_count(definitions: Mapping[str, Definition]) -> int:
    return sum(len(d.schedules) for d in definitions.values())


class Schedules(Construct):
    """The group, the schedules, their role and their dead-letter queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        definitions: Mapping[str, Definition],
        target: aws_lambda.Function,
    ) -> None:
        super().__init__(scope, construct_id)
        self.group = aws_scheduler.CfnScheduleGroup(
            self, "Group", name=stack_scoped_name(self, max_length=GROUP_NAME_MAX)
        )
        self.dlq = aws_sqs.Queue(
            self,
            "DeadLetters",
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(self.dlq, rule, NOT_A_REDRIVE_SOURCE)
        # Scheduler may act for this account's schedules only (the confused deputy).
        self.role = aws_iam.Role(
            self,
            "Role",
            assumed_by=aws_iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
            description="EventBridge Scheduler: start Shepherd workflows on their schedules",
        )
        # The events function itself (an unqualified ARN: what the target names), nothing else.
        self.role.add_to_policy(
            aws_iam.PolicyStatement(
                actions=["lambda:InvokeFunction"], resources=[target.function_arn]
            )
        )
        self.role.add_to_policy(
            aws_iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.dlq.queue_arn])
        )
        stack = Stack.of(self)
        self.schedules: dict[str, aws_scheduler.CfnSchedule] = {}
        for wf_type, definition in sorted(definitions.items()):
            for spec in definition.schedules:
                event = schedules.firing_event(
                    wf_type, spec.name, spec.input, account=Aws.ACCOUNT_ID, region=Aws.REGION
                )
                self.schedules[spec.name] = aws_scheduler.CfnSchedule(
                    self,
                    f"Schedule-{spec.name}",
                    name=spec.name,
                    group_name=self.group.ref,
                    description=f"Start a {wf_type} workflow (Shepherd schedule {spec.name})",
                    schedule_expression=spec.expression,
                    schedule_expression_timezone=spec.timezone,
                    flexible_time_window=aws_scheduler.CfnSchedule.FlexibleTimeWindowProperty(
                        mode="OFF"
                    ),
                    state="ENABLED" if spec.enabled else "DISABLED",
                    target=aws_scheduler.CfnSchedule.TargetProperty(
                        arn=target.function_arn,
                        role_arn=self.role.role_arn,
                        input=stack.to_json_string(event),
                        retry_policy=aws_scheduler.CfnSchedule.RetryPolicyProperty(
                            maximum_retry_attempts=MAX_RETRY_ATTEMPTS,
                            maximum_event_age_in_seconds=int(MAX_EVENT_AGE.to_seconds()),
                        ),
                        dead_letter_config=aws_scheduler.CfnSchedule.DeadLetterConfigProperty(
                            arn=self.dlq.queue_arn
                        ),
                    ),
                )
        # Every schedule names the group: the group waiting for the policies of the events
        # function's role and of the schedules' role keeps a first firing from AccessDenied.
        function_role = target.role
        assert function_role is not None
        Aspects.of(stack).add(
            DependOnRolePolicies(self.group, [function_role, self.role]),
            priority=AspectPriority.MUTATING,
        )


__all__ = ["Schedules", "schedule_count"]
