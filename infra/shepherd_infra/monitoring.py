"""Dashboard and alarms. Engine metrics come from Powertools (EMF) in NAMESPACE with the
`service` dimension, which is the deployment's own name (a second stack's metrics are other
series); names from `shepherd.observability.Metric`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Stack,
    aws_apigateway,
    aws_cloudwatch,
    aws_cloudwatch_actions,
    aws_dynamodb,
    aws_iam,
    aws_kms,
    aws_lambda,
    aws_sns,
    aws_sns_subscriptions,
    aws_sqs,
)
from constructs import Construct
from shepherd.observability import NAMESPACE, Metric

from shepherd_infra import config
from shepherd_infra.agent_pool import AgentPool
from shepherd_infra.event_relay import EventRelay
from shepherd_infra.nag import acknowledge
from shepherd_infra.naming import stack_scoped_name
from shepherd_infra.webhooks import Webhook

ONE_MINUTE = Duration.minutes(1)
DASHBOARD_NAME_MAX = 255
REGION_MAX = 25  # "-" and the longest region name, with room to spare
NAME_MAX = DASHBOARD_NAME_MAX - REGION_MAX
SUPERVISOR_MISSED_PERIODS = 3
ALARM_KEY_PENDING_WINDOW = Duration.days(7)  # the shortest KMS allows
# Queues one alarm watches (metric math over one metric per queue): CloudWatch takes up to 10
# metrics in an alarm's expression.
POOLS_PER_ALARM = 9


# The services the engine calls (shepherd.wiring.ENGINE_SERVICES), each a Throttles series.
THROTTLED_SERVICES = ("dynamodb", "sqs", "s3", "events", "lambda")


def engine_metric(
    metric: Metric, service: str, *, statistic: str = "Sum", period: Duration = ONE_MINUTE
) -> aws_cloudwatch.Metric:
    """One of the engine's series, as the functions of the deployment `service` publish it."""
    return aws_cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=metric.value,
        dimensions_map={"service": service},
        statistic=statistic,
        period=period,
    )


def throttles_metric(
    service: str, aws_service: str, *, period: Duration = ONE_MINUTE
) -> aws_cloudwatch.Metric:
    """The engine's throttled attempts on one AWS service (`Throttles`, dimension `Service`)."""
    return aws_cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=Metric.THROTTLES.value,
        dimensions_map={"service": service, "Service": aws_service},
        statistic="Sum",
        period=period,
    )


def oldest_message_threshold_seconds(visibility_timeout: int, function_timeout: int) -> int:
    """A message redelivered once after a crash is `visibility_timeout` old; give it one more
    run. Older than that (and never less than the floor) means the pool is stuck or behind."""
    return max(config.OLDEST_MESSAGE_FLOOR_SECONDS, visibility_timeout + function_timeout)


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service: str,
        table: aws_dynamodb.Table,
        pools: Sequence[AgentPool],
        rest_api: aws_apigateway.RestApi,
        relay: EventRelay,
        supervisor: aws_lambda.IFunction,
        alarm_email: str | None,
        webhooks: Sequence[Webhook] = (),
        dashboard: bool = False,
        schedule_dlq: aws_sqs.IQueue | None = None,
        start_failures: aws_sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[aws_cloudwatch.Alarm] = []
        self.topic: aws_sns.Topic | None = None
        if alarm_email:
            self.topic = self._topic(alarm_email)

        # ------------------------------------------------------------------------------ alarms
        self._pool_alarms(pools)
        self._circuit_alarms(pools, service)
        # Lambda's own metrics of the supervisor function (free), not a custom metric ($0.30 a
        # month): a minute with no invocation that ended without an error, scheduled or tick,
        # is a minute the supervisor did not run. A supervisor that crashes on every run (a
        # broken deploy) is not running either.
        runs = supervisor.metric_invocations(period=ONE_MINUTE, statistic="Sum")
        errors = supervisor.metric_errors(period=ONE_MINUTE, statistic="Sum")
        self._alarm(
            "SupervisorNotRunning",
            aws_cloudwatch.MathExpression(
                expression="FILL(runs, 0) - FILL(errors, 0)",
                using_metrics={"runs": runs, "errors": errors},
                label="invocations without an error",
                period=ONE_MINUTE,
            ),
            threshold=1,
            comparison=aws_cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=SUPERVISOR_MISSED_PERIODS,
            missing=aws_cloudwatch.TreatMissingData.BREACHING,
            description=f"The supervisor has not run for {SUPERVISOR_MISSED_PERIODS} minutes: "
            "timeouts and lost messages are not being detected",
        )
        self._alarm(
            "LookFailures",
            engine_metric(Metric.LOOK_FAILURES, service),
            threshold=0,
            description="The supervisor could not look at a workflow (an unexpected error, "
            "logged with its workflow id); after 8 failed looks in a row it is parked FAILED",
        )
        self._alarm(
            "CompensationFailed",
            engine_metric(Metric.COMPENSATIONS_FAILED, service),
            threshold=0,
            description="A compensation failed for good: a workflow is FAILED, needs an operator",
        )
        self._alarm(
            "AgentNotFound",
            engine_metric(Metric.AGENTS_NOT_FOUND, service),
            threshold=0,
            description="A pool's code registers no agent under a step's Agent (the deploy "
            "dropped an agent module): the step failed for good; the worker's log names it",
        )
        self._alarm(
            "SupervisorBehind",
            engine_metric(Metric.OLDEST_DUE_AGE, service, statistic="Maximum"),
            threshold=config.SUPERVISOR_BEHIND.to_milliseconds(),
            evaluation_periods=3,
            description="The supervisor is behind: a sweep found work that had been due for "
            f"more than {config.SUPERVISOR_BEHIND.to_seconds()} s, three minutes in a row "
            "(past its capacity every shard falls behind evenly): raise "
            "sweep_groups, sweep_looks or watch_shards (the construct's); "
            "README, runbook",
        )
        self._alarm(
            "PausedOnFailure",
            engine_metric(Metric.PAUSED_ON_FAILURE, service),
            threshold=0,
            description="A step with OnFailure PAUSE failed for good: its workflow is PAUSED "
            "until an operator fixes the cause and resumes, compensates or cancels it",
        )
        iterator_age = relay.function.metric("IteratorAge", statistic="Maximum", period=ONE_MINUTE)
        self._alarm(
            "EventRelayBehind",
            iterator_age,
            threshold=config.RELAY_ITERATOR_AGE_ALARM.to_milliseconds(),
            evaluation_periods=3,
            description="Lifecycle events are late: the event relay's oldest unread stream "
            "record is older than "
            f"{config.RELAY_ITERATOR_AGE_ALARM.to_minutes()} minutes (it is failing or "
            "throttled); nothing is lost while records are younger than the stream's 24 hours",
        )
        relay_failures = relay.failures.metric_approximate_number_of_messages_visible(
            statistic="Maximum", period=ONE_MINUTE
        )
        self._alarm(
            "EventRelayFailures",
            relay_failures,
            threshold=0,
            description="Stream records whose events could not be published after every "
            "retry: replay them with `shepherd events replay` (docs/api.md) within 24 hours",
        )
        for hook in webhooks:
            self._holds_any(
                f"Webhook{hook.hook.name}Undelivered",
                hook.dlq,
                f"Events the webhook {hook.hook.name} ({hook.hook.url}) did not "
                "accept within a day of retries are in its DLQ: fix the endpoint, then send "
                "them again (docs/architecture.md, Deployment)",
            )
        if schedule_dlq is not None:
            self._holds_any(
                "SchedulesUndelivered",
                schedule_dlq,
                "A schedule's firing could not be delivered to the events function "
                "within an hour of retries: its workflow did not start. Each message in the "
                "schedules' dead-letter queue is a firing's event (its schedule and time in "
                "detail.idempotency_key); `shepherd replay-starts` hands each to the events "
                "function again, which starts its workflow once, if it still matters",
            )
        if start_failures is not None:
            self._holds_any(
                "StartsFailed",
                start_failures,
                "A start could not be made: a StartWorkflow event or a schedule's "
                "firing that EventBridge could not deliver, or whose invocation of the events "
                "function failed after Lambda's retries, is in the start failures' queue. Fix "
                "the cause, then `shepherd replay-starts` (a start already made is not made "
                "again); the queue keeps them 14 days",
            )
        # No alarm on the rate of FAILED workflows (until issue 35's idle bill: failed / started
        # over 5 minutes, two alarm metrics, $0.20 a month): a workflow ends FAILED by exactly
        # two routes, a compensation that failed for good (`CompensationFailed` pages first)
        # and looks that kept failing until it was parked (`LookFailures` pages at the first),
        # so every FAILED workflow is paged once already, whatever the rate; the rate alarm
        # could only page a second time for the same workflows.
        # tests/unit/test_failed_is_alarmed.py fails if a third route to FAILED appears.
        # One metric, not the table's and each index's throttle events (eight metrics, $0.80 a
        # month idle): every call to the table goes through a client made by
        # `shepherd.wiring`, whose hook counts each attempt DynamoDB answered "slow down"
        # (an index that cannot keep up throttles the base write, so it is counted too). The
        # series has data only when something was throttled: idle, it costs nothing.
        self._alarm(
            "DynamoDbThrottling",
            throttles_metric(service, "dynamodb", period=config.ALARM_PERIOD),
            threshold=0,
            description="DynamoDB throttled the engine's requests on the Shepherd table "
            "(each throttled attempt, retried or not)",
        )

        # ---------------------------------------------------------------------------- dashboard
        # Optional (`dashboard=True`, `-c dashboard=true`): $3 a month at list price, more than
        # the rest of an idle stack; the first three dashboards of an account are free.
        self.dashboard: aws_cloudwatch.Dashboard | None = None
        if dashboard:
            # Dashboard names are unique per account across all regions: the stack's name (unique
            # per region) and the region make this one unique.
            region = Stack.of(self).region
            board = aws_cloudwatch.Dashboard(
                self,
                "Dashboard",
                dashboard_name=f"{stack_scoped_name(self, max_length=NAME_MAX)}-{region}",
                default_interval=Duration.hours(3),
            )

            def graph(
                title: str, metrics: Sequence[aws_cloudwatch.IMetric], width: int = 8
            ) -> aws_cloudwatch.GraphWidget:
                return aws_cloudwatch.GraphWidget(title=title, left=list(metrics), width=width)

            lifecycle = [
                Metric.WORKFLOWS_STARTED,
                Metric.WORKFLOWS_SUCCEEDED,
                Metric.WORKFLOWS_FAILED,
                Metric.WORKFLOWS_FAILED_BY_DEFINITION,
                Metric.WORKFLOWS_COMPENSATED,
                Metric.WORKFLOWS_CANCELLED,
                Metric.WORKFLOWS_PAUSED,
                Metric.WORKFLOWS_RESUMED,
                Metric.PAUSED_ON_FAILURE,
            ]
            steps = [
                Metric.STEP_ATTEMPTS,
                Metric.STEP_RETRIES,
                Metric.TIMEOUTS_DETECTED,
                Metric.LOST_MESSAGES_RECOVERED,
                Metric.COMPENSATIONS,
                Metric.COMPENSATIONS_FAILED,
                Metric.FENCED_WRITES,
                Metric.DUPLICATES_DROPPED,
                Metric.AGENTS_NOT_FOUND,
                Metric.RECORDS_DEFERRED,
                Metric.TASKS_HELD,
            ]
            board.add_widgets(
                graph("Workflows", [engine_metric(m, service) for m in lifecycle]),
                graph(
                    "Steps: retries, timeouts, compensations",
                    [engine_metric(m, service) for m in steps],
                ),
                graph(
                    "Pool circuits (1: open or half-open)",
                    [
                        aws_cloudwatch.MathExpression(
                            expression=(
                                f"SEARCH('{{{NAMESPACE},Pool,service}} MetricName="
                                f'"{Metric.POOL_CIRCUIT_OPEN.value}" service="{service}"'
                                "', 'Maximum', 60)"
                            ),
                            using_metrics={},
                            label="",
                            period=ONE_MINUTE,
                        )
                    ],
                ),
                graph(
                    "Detection lag (ms)",
                    [
                        engine_metric(Metric.DETECTION_LAG, service, statistic="p50"),
                        engine_metric(Metric.DETECTION_LAG, service, statistic="p99"),
                    ],
                ),
            )
            board.add_widgets(
                graph(
                    "Queue depth",
                    [p.queue.metric_approximate_number_of_messages_visible() for p in pools],
                ),
                graph(
                    "Oldest message age (s)",
                    [
                        p.queue.metric_approximate_age_of_oldest_message(statistic="Maximum")
                        for p in pools
                    ],
                ),
                graph(
                    "DLQ depth",
                    [
                        p.dlq.metric_approximate_number_of_messages_visible(statistic="Maximum")
                        for p in pools
                    ],
                ),
            )
            board.add_widgets(
                graph(
                    "Supervisor invocations, errors and sweep duration (ms)",
                    [
                        runs,
                        errors,
                        engine_metric(Metric.SWEEP_DURATION, service, statistic="p50"),
                        engine_metric(Metric.SWEEP_DURATION, service, statistic="p99"),
                    ],
                ),
                graph(
                    "Failed looks and parked workflows",
                    [
                        engine_metric(Metric.LOOK_FAILURES, service),
                        engine_metric(Metric.WORKFLOWS_PARKED, service),
                    ],
                ),
                graph(
                    "DynamoDB throttles and conditional-check failures",
                    [
                        _table_metric(table, "ReadThrottleEvents"),
                        _table_metric(table, "WriteThrottleEvents"),
                        _table_metric(table, "ConditionalCheckFailedRequests"),
                    ],
                ),
                graph(
                    "API errors and latency",
                    [
                        rest_api.metric_client_error(period=ONE_MINUTE),
                        rest_api.metric_server_error(period=ONE_MINUTE),
                        rest_api.metric_latency(period=ONE_MINUTE, statistic="p99"),
                    ],
                ),
            )
            board.add_widgets(
                graph("Event relay: iterator age (ms)", [iterator_age]),
                graph(
                    "Event relay: invocations, errors, records sent to its failure queue",
                    [
                        relay.function.metric_invocations(period=ONE_MINUTE),
                        relay.function.metric_errors(period=ONE_MINUTE),
                        relay_failures,
                    ],
                ),
                graph(
                    "Paused pools and workflows",
                    [
                        engine_metric(Metric.WORKFLOWS_PAUSED, service),
                        engine_metric(Metric.PAUSED_ON_FAILURE, service),
                    ],
                ),
            )
            board.add_widgets(
                graph(
                    "Supervisor at load: due, truncated sweeps, unavailable looks",
                    [
                        engine_metric(Metric.SWEEP_DUE, service),
                        engine_metric(Metric.SWEEP_TRUNCATED, service),
                        engine_metric(Metric.SWEEP_UNAVAILABLE, service),
                    ],
                ),
                graph(
                    "Supervisor behind: oldest due entry's age (ms)",
                    [engine_metric(Metric.OLDEST_DUE_AGE, service, statistic="Maximum")],
                ),
                graph(
                    "Throttled AWS calls, by service",
                    [throttles_metric(service, name) for name in THROTTLED_SERVICES],
                ),
            )
            board.add_widgets(
                aws_cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24)
            )
            self.dashboard = board

    def _circuit_alarms(self, pools: Sequence[AgentPool], service: str) -> None:
        """One alarm per pool with a circuit breaker: its circuit is open or half-open (the
        supervisor's `PoolCircuitOpen`, once a minute; missing data is not an alarm)."""
        for pool in pools:
            breaker = pool.settings.policy.circuit_breaker
            if breaker is None:
                continue
            name = pool.pool.name
            self._alarm(
                f"PoolCircuitOpen-{name}",
                aws_cloudwatch.Metric(
                    namespace=NAMESPACE,
                    metric_name=Metric.POOL_CIRCUIT_OPEN.value,
                    dimensions_map={"service": service, "Pool": name},
                    statistic="Maximum",
                    period=ONE_MINUTE,
                ),
                threshold=0,
                description=f"The circuit breaker of pool {name} is open: its downstream failed "
                f"{breaker.failure_ratio:.0%} of at least {breaker.minimum_attempts} attempts "
                "in its window (or an operator forced it); its tasks wait, GET /pools shows why",
            )

    def _pool_alarms(self, pools: Sequence[AgentPool]) -> None:
        """Dead letters and backlog of every pool, a few pools to an alarm (metric math over
        at most POOLS_PER_ALARM queues): two alarms per pool would be 100 resources at 50
        pools. The description names the pools; the alarm's metrics show which one it was."""
        for n, group in enumerate(_chunks(pools, POOLS_PER_ALARM), start=1):
            dlqs = {
                f"d{i}": p.dlq.metric_approximate_number_of_messages_visible(
                    statistic="Maximum", period=ONE_MINUTE
                )
                for i, p in enumerate(group)
            }
            names = ", ".join(p.pool.name for p in group)
            self._alarm(
                f"PoolDeadLetters{n}",
                aws_cloudwatch.MathExpression(
                    expression=f"MAX(FILL([{', '.join(dlqs)}], 0))",
                    using_metrics=dlqs,
                    label="messages in the DLQ (the most of these pools)",
                    period=ONE_MINUTE,
                ),
                threshold=0,
                description=f"Messages in the DLQ of a pool ({names}): tasks failed "
                f"{group[0].pool.max_receive_count} deliveries; the alarm's metrics show which",
            )
        by_threshold: dict[int, list[AgentPool]] = {}
        for pool in pools:
            age = oldest_message_threshold_seconds(
                pool.visibility_timeout_seconds, pool.function_timeout_seconds
            )
            by_threshold.setdefault(age, []).append(pool)
        for age, same in sorted(by_threshold.items()):
            for n, group in enumerate(_chunks(same, POOLS_PER_ALARM), start=1):
                ages = {
                    f"a{i}": p.queue.metric_approximate_age_of_oldest_message(
                        statistic="Maximum", period=ONE_MINUTE
                    )
                    for i, p in enumerate(group)
                }
                names = ", ".join(p.pool.name for p in group)
                self._alarm(
                    f"PoolBacklog{age}s{n}",
                    aws_cloudwatch.MathExpression(
                        expression=f"MAX(FILL([{', '.join(ages)}], 0))",
                        using_metrics=ages,
                        label="age of the oldest task (s, the oldest of these pools)",
                        period=ONE_MINUTE,
                    ),
                    threshold=age,
                    evaluation_periods=3,
                    description=f"The oldest task of a pool ({names}) is older than {age} s: "
                    "the pool is stuck or cannot keep up; the alarm's metrics show which",
                )

    def _topic(self, email: str) -> aws_sns.Topic:
        # CloudWatch can publish to an encrypted topic only with a customer key whose policy
        # lets cloudwatch.amazonaws.com use it (the AWS managed aws/sns key cannot). The key is
        # the topic's alone: it goes with the stack (KMS deletes it after its 7-day waiting
        # period) instead of outliving a destroy at $1 a month.
        key = aws_kms.Key(
            self,
            "AlarmTopicKey",
            enable_key_rotation=True,
            description="Shepherd alarm topic",
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=ALARM_KEY_PENDING_WINDOW,
        )
        cloudwatch = aws_iam.ServicePrincipal("cloudwatch.amazonaws.com")
        key.add_to_resource_policy(
            aws_iam.PolicyStatement(
                principals=[cloudwatch],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=_alarms_of_this_account(self),
            )
        )
        topic = aws_sns.Topic(
            self, "AlarmTopic", display_name="Shepherd alarms", master_key=key, enforce_ssl=True
        )
        # enforce_ssl makes the topic's policy the TLS Deny alone, which replaces SNS's
        # default policy: without this Allow no alarm could ever publish.
        topic.add_to_resource_policy(
            aws_iam.PolicyStatement(
                principals=[cloudwatch],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions=_alarms_of_this_account(self),
            )
        )
        topic.add_subscription(aws_sns_subscriptions.EmailSubscription(email))
        acknowledge(
            topic,
            "Serverless-SNSRedrivePolicy",
            "An email subscription: an undeliverable alarm email in a DLQ would be read by no "
            "one; the alarm state itself stays on the dashboard and in CloudWatch",
        )
        return topic

    def _holds_any(self, name: str, queue: aws_sqs.IQueue, description: str) -> None:
        """An alarm on a queue that should stay empty (a dead-letter or failures queue): any
        visible message in a minute."""
        self._alarm(
            name,
            queue.metric_approximate_number_of_messages_visible(
                statistic="Maximum", period=ONE_MINUTE
            ),
            threshold=0,
            description=description,
        )

    def _alarm(
        self,
        name: str,
        metric: aws_cloudwatch.Metric | aws_cloudwatch.MathExpression,
        *,
        threshold: float,
        description: str,
        comparison: aws_cloudwatch.ComparisonOperator = (
            aws_cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        ),
        evaluation_periods: int = 1,
        missing: aws_cloudwatch.TreatMissingData = aws_cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> aws_cloudwatch.Alarm:
        alarm = metric.create_alarm(
            self,
            name,
            alarm_description=description,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=evaluation_periods,
            treat_missing_data=missing,
        )
        if self.topic is not None:
            alarm.add_alarm_action(aws_cloudwatch_actions.SnsAction(self.topic))
        self.alarms.append(alarm)
        return alarm


def _chunks(items: Sequence[AgentPool], size: int) -> list[Sequence[AgentPool]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _alarms_of_this_account(scope: Construct) -> dict[str, Any]:
    """CloudWatch acts only for alarms of this account and region (confused deputy)."""
    stack = Stack.of(scope)
    alarms = f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"
    return {
        "StringEquals": {"aws:SourceAccount": stack.account},
        "ArnLike": {"aws:SourceArn": alarms},
    }


def _table_metric(table: aws_dynamodb.Table, name: str) -> aws_cloudwatch.Metric:
    return aws_cloudwatch.Metric(
        namespace="AWS/DynamoDB",
        metric_name=name,
        dimensions_map={"TableName": table.table_name},
        statistic="Sum",
        period=config.ALARM_PERIOD,
    )
