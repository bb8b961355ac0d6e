"""The supervisor: invoked every minute by EventBridge Scheduler, one at a time."""

from __future__ import annotations

from aws_cdk import Stack, aws_iam, aws_lambda, aws_scheduler, aws_scheduler_targets
from constructs import Construct
from shepherd.observability import ENV_SWEEP_INTERVAL, ENV_SWEEP_WINDOW, HANDLER_SUPERVISOR
from shepherd.topology import TABLE

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.nag import acknowledge
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime


class Supervisor(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, runtime: LambdaRuntime, access: Access
    ) -> None:
        super().__init__(scope, construct_id)
        self.function: aws_lambda.Function = runtime.function(
            self,
            "Supervisor",
            FunctionSpec(
                handler=HANDLER_SUPERVISOR,
                timeout=config.SUPERVISOR_TIMEOUT,
                memory_mb=config.WORKER_MEMORY_MB,
                description="supervisor (sweeps the watch index)",
                extra_env={
                    ENV_SWEEP_INTERVAL: str(config.SWEEP_INTERVAL_SECONDS),
                    ENV_SWEEP_WINDOW: str(config.SWEEP_WINDOW_SECONDS),
                },
                # One sweeper at a time: overlapping runs are safe (conditional writes) but waste.
                reserved_concurrency=1,
            ),
        )
        # The only function that may query the watch index.
        access.engine(self.function, indexes=[TABLE.watch_index])
        scheduler_role = aws_iam.Role(
            self,
            "SchedulerRole",
            assumed_by=aws_iam.ServicePrincipal("scheduler.amazonaws.com"),
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
            ),
        )
        for rule, reason in (
            (
                "Serverless-LambdaDLQ",
                "A failed scheduled run is superseded by the next run a minute later; the "
                "SupervisorRan alarm fires if runs stop",
            ),
            (
                "Serverless-LambdaAsyncFailureDestination",
                "A failed scheduled run is superseded by the next run a minute later; the "
                "SupervisorRan alarm fires if runs stop",
            ),
        ):
            acknowledge(self.function, rule, reason)


def _logical_id(fn: aws_lambda.Function) -> str:
    resource = fn.node.default_child
    assert resource is not None
    return Stack.of(fn).get_logical_id(resource)  # type: ignore[arg-type]
