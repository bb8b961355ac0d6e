"""The supervisor: invoked every minute by EventBridge Scheduler, and by its own ticks.

The scheduled run sends the minute's later sweeps as delayed messages to the supervisor's tick
queue (SQS delays of 5, 10, ..., 55 s) and sweeps once; each tick invokes the function through
an event source mapping and sweeps once. Nothing sleeps between sweeps, so an idle stack pays
for twelve short invocations a minute instead of one that lasts the minute.

No reserved concurrency: reserving even 1 fails the deploy on new or low-quota accounts ("you
can reserve up to the unreserved account concurrency minus 100"), and two overlapping sweeps are
safe anyway (every action is a conditional write). What must not happen is runs piling up behind
a throttle or a retry loop, so a run that cannot start within a minute is dropped, twice over:
the schedule's target retries nothing and gives up after a minute, and Lambda's asynchronous
queue (Scheduler invokes asynchronously) discards events older than a minute without retrying.
The next scheduled run, a minute later, replaces whatever was dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import (
    AspectPriority,
    Aspects,
    Aws,
    CfnResource,
    Duration,
    IAspect,
    Stack,
    aws_iam,
    aws_lambda,
    aws_scheduler,
    aws_scheduler_targets,
    aws_sqs,
)
from constructs import Construct, IConstruct
from shepherd.observability import (
    ENV_SWEEP_INTERVAL,
    ENV_SWEEP_TICKS,
    ENV_SWEEP_WINDOW,
    HANDLER_SUPERVISOR,
)
from shepherd.topology import TABLE

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.agent_pool import CONSUME
from shepherd_infra.nag import acknowledge
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime, allow

# Scheduler's and Lambda's minimum maximum event age; one schedule period.
MAX_RUN_AGE = Duration.minutes(1)
DROPPED_RUN = (
    "A scheduled run that fails or cannot start within a minute is dropped on purpose (no "
    "retries, maximum event age 60 s): the next run a minute later replaces it, and the "
    "SupervisorNotRunning alarm fires if runs stop"
)
# A tick is worth nothing late: the next one comes one sweep interval later, and the next
# scheduled run sends a fresh minute of them.
TICK_RETENTION = Duration.minutes(5)
TICK_BATCH = 10  # a backlog of ticks (a throttled function) collapses into one sweep


def tick_batch(groups: int) -> int:
    """The tick mapping's batch size: with several groups, one tick (one group) per invocation.
    A batch of ten would sweep up to ten groups in one invocation: one after another, the last
    one swept several seconds late (at the design load a group's sweep takes about 2 s); and
    together, they would share one function's CPU, which at 256 MB carries the looks of about
    two groups at the design load. A sweep looks ahead until the next one, so it lasts up to an
    interval whenever something comes due: one group per invocation is what keeps the groups
    apart. One group: a backlog of its ticks still collapses into one sweep."""
    return TICK_BATCH if groups == 1 else 1


TICK_CONCURRENCY = 2  # the event source's minimum; two overlapping sweeps are safe
STALE_TICK = (
    "A supervisor tick is only a prompt to sweep now; one that fails is replaced by the next "
    "tick a sweep interval later, so it expires (5 minutes) instead of waiting in a DLQ"
)


@jsii.implements(IAspect)
class DependOnRolePolicies:
    """Makes `dependent` depend on every IAM policy attached to any of `roles`, wherever in the
    stack that policy is defined and however late it was added (an aspect runs at synthesis).

    CloudFormation only orders what the template links: a schedule refers to the function, not to
    the policies granting the function its table, queues and bus, so without this the first runs
    may fire before those policies are attached and fail on AccessDenied.
    """

    def __init__(self, dependent: CfnResource, roles: Sequence[aws_iam.IRole]) -> None:
        self._dependent = dependent
        self._roles = list(roles)

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, aws_iam.CfnPolicy | aws_iam.CfnManagedPolicy):
            return
        stack = Stack.of(node)
        attached = stack.resolve(node.roles) or []
        if any(stack.resolve(role.role_name) in attached for role in self._roles):
            self._dependent.add_resource_dependency(node)


class Supervisor(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        runtime: LambdaRuntime,
        access: Access,
        groups: int = 1,
    ) -> None:
        super().__init__(scope, construct_id)
        self._runtime = runtime
        self.ticks = aws_sqs.Queue(
            self,
            "Ticks",
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=TICK_RETENTION,
            visibility_timeout=Duration.seconds(6 * config.SUPERVISOR_TIMEOUT.to_seconds()),
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(self.ticks, rule, STALE_TICK)
        self.function: aws_lambda.Function = runtime.function(
            self,
            "Supervisor",
            FunctionSpec(
                handler=HANDLER_SUPERVISOR,
                timeout=config.SUPERVISOR_TIMEOUT,
                memory_mb=config.WORKER_MEMORY_MB,
                description="supervisor (sweeps the watch index)",
                # It runs 525,600 times a month on an idle stack: X-Ray would record each run
                # ($2.63 a month at $5 per million traces) and Lambda's START/END/REPORT lines
                # would be its only logs. Traced with `-c tracing=true`; its errors and its
                # own warnings still log.
                tracing=runtime.tracing,
                system_log_level=aws_lambda.SystemLogLevel.WARN,
                extra_env={
                    ENV_SWEEP_INTERVAL: str(config.SWEEP_INTERVAL_SECONDS),
                    ENV_SWEEP_WINDOW: str(config.SWEEP_WINDOW_SECONDS),
                    ENV_SWEEP_TICKS: self.ticks.queue_url,
                },
            ),
        )
        # The scheduled run sends the minute's ticks; the mapping delivers them (and grants
        # receive/delete on this queue only).
        allow(
            self.function,
            aws_iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.ticks.queue_arn]),
        )
        # Receive and delete only (what Lambda's pollers need): no GetQueueUrl, no
        # ChangeMessageVisibility, which the CDK's SqsEventSource grant adds.
        allow(
            self.function,
            aws_iam.PolicyStatement(actions=list(CONSUME), resources=[self.ticks.queue_arn]),
        )
        tick_mapping = aws_lambda.EventSourceMapping(
            self,
            "TickMapping",
            target=self.function,
            event_source_arn=self.ticks.queue_arn,
            batch_size=tick_batch(groups),
            # One invocation per group at a time (the groups sweep in parallel), at least the
            # event source's minimum of two.
            max_concurrency=min(1000, max(TICK_CONCURRENCY, groups)),
        )
        acknowledge(tick_mapping, "Serverless-LambdaEventSourceMappingDestination", STALE_TICK)
        # Lambda's queue for asynchronous invocations: no retry of a failed run, and a run still
        # waiting (throttled) after a minute is discarded instead of piling up.
        self.function.configure_async_invoke(max_event_age=MAX_RUN_AGE, retry_attempts=0)
        # The only function that may query the watch index.
        access.engine(self.function, indexes=[TABLE.watch_index])
        # Its scheduled run holds paused pools paused: a deploy that updates or replaces a
        # pool's event source mapping enables it (shepherd_handlers.supervisor).
        access.pool_control(self.function, backlogs=False)
        scheduler_role = aws_iam.Role(
            self,
            "SchedulerRole",
            # Only this account's schedules may assume it (the confused deputy: a schedule of
            # another account naming this role's ARN).
            assumed_by=aws_iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
            description="EventBridge Scheduler: invoke the Shepherd supervisor",
        )
        acknowledge(
            scheduler_role,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(self.function)}.Arn>:*]",
            "CDK's invoke grant covers the supervisor function's versions and aliases "
            "(<arn>:*); the role can invoke nothing else",
        )
        self.schedule = aws_scheduler.Schedule(
            self,
            "Schedule",
            description="Run the Shepherd supervisor",
            schedule=aws_scheduler.ScheduleExpression.rate(config.SUPERVISOR_SCHEDULE),
            target=aws_scheduler_targets.LambdaInvoke(
                self.function,
                role=scheduler_role,
                # A missed run is replaced by the next one a minute later; never pile them up.
                retry_attempts=0,
                max_event_age=MAX_RUN_AGE,
            ),
        )
        schedule_resource = self.schedule.node.default_child
        function_role = self.function.role
        assert isinstance(schedule_resource, CfnResource)
        assert function_role is not None
        Aspects.of(Stack.of(self)).add(
            DependOnRolePolicies(schedule_resource, [function_role, scheduler_role]),
            priority=AspectPriority.MUTATING,
        )
        for rule in ("Serverless-LambdaDLQ", "Serverless-LambdaAsyncFailureDestination"):
            acknowledge(self.function, rule, DROPPED_RUN)

    def woken_by(self, *functions: aws_lambda.Function) -> None:
        """The functions that start workflows or act on them (the API, start events and
        schedules) wake the supervisor when it sleeps on an empty watch index
        (shepherd.engine.wakeup): they know the tick queue and may send to it, nothing else."""
        for fn in functions:
            fn.add_environment(ENV_SWEEP_TICKS, self.ticks.queue_url)
            self._runtime.environments[fn.node.path] = {
                **self._runtime.environments.get(fn.node.path, {}),
                ENV_SWEEP_TICKS: self.ticks.queue_url,
            }  # the checks at synth count it in the function's environment
            allow(
                fn,
                aws_iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[self.ticks.queue_arn]
                ),
            )


def _logical_id(fn: aws_lambda.Function) -> str:
    resource = fn.node.default_child
    assert resource is not None
    return Stack.of(fn).get_logical_id(resource)  # type: ignore[arg-type]
