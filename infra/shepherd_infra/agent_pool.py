"""One agent pool: a queue, its DLQ and one Lambda consuming it. All numbers from the PoolSpec.

Six resources a pool, so one stack holds 50 pools and more (docs/benchmarks.md): the two
queues, one queue policy for both, the function, its role (its policy inline) and its event
source mapping; the pools' functions share one log group. Nothing about a pool goes into any
function's environment: the runtime derives a pool's queue URL and function name from two
prefixes (`naming.PoolNames`).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, aws_iam, aws_lambda, aws_sqs
from constructs import Construct
from shepherd.observability import ENV_POOL, HANDLER_AGENT
from shepherd.settings import ENV_AGENT_MODULES
from shepherd.topology import VISIBILITY_FACTOR, PoolSpec

from shepherd_infra.access import Access
from shepherd_infra.nag import acknowledge
from shepherd_infra.naming import PoolNames
from shepherd_infra.pool_settings import ResolvedPool
from shepherd_infra.runtime import FunctionSpec, InlineRole, LambdaRuntime, allow

DLQ_RETENTION = Duration.days(14)  # the SQS maximum: time for an operator to look
# What Lambda's pollers do with the queue for the function's role (the event source mapping):
# the function itself never calls SQS to receive.
CONSUME = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")


class AgentPool(Construct):
    """Queues are created first; the consuming function is added once the shared runtime
    exists.

    The queues have names of their own, derived from the deployment (`PoolNames`), so the
    runtime finds any pool's queue from one prefix. The names end in the stack's creation id:
    a stack destroyed and created again at once never reuses a queue name SQS still holds
    (60 s after a delete), and two stacks never share one. `retain` keeps both queues, with
    the tasks in them, when the pool leaves the template or the stack is destroyed
    (`retain_data`): a renamed or removed pool never deletes queued or dead-lettered work.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pool: PoolSpec,
        names: PoolNames,
        function: ResolvedPool,
        retain: bool = True,
        retired: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.pool = pool
        self.names = names
        self.settings = function
        self.retired = retired
        # The function's timeout (the pool's longest step, or longer by its settings); the
        # queue's visibility follows it (AWS: at least 6 x the function's timeout).
        self.function_timeout_seconds = function.timeout_seconds
        self.visibility_timeout_seconds = VISIBILITY_FACTOR * function.timeout_seconds
        removal = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
        self.dlq = aws_sqs.Queue(
            self,
            "DeadLetterQueue",
            queue_name=names.dlq(pool.name),
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            retention_period=DLQ_RETENTION,
            removal_policy=removal,
        )
        self.queue = aws_sqs.Queue(
            self,
            "Queue",
            queue_name=names.queue(pool.name),
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            visibility_timeout=Duration.seconds(self.visibility_timeout_seconds),
            dead_letter_queue=aws_sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=pool.max_receive_count
            ),
            removal_policy=removal,
        )
        # TLS only, for both queues in one policy (one resource, not one per queue).
        self.policy = aws_sqs.QueuePolicy(self, "TlsOnly", queues=[self.queue, self.dlq])
        self.policy.document.add_statements(
            aws_iam.PolicyStatement(
                effect=aws_iam.Effect.DENY,
                principals=[aws_iam.AnyPrincipal()],
                actions=["sqs:*"],
                resources=[self.queue.queue_arn, self.dlq.queue_arn],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        )
        acknowledge(
            self.dlq,
            "Serverless-SQSRedrivePolicy",
            f"This is the dead-letter queue of the {pool.name} pool; its messages wait for an "
            "operator (and raise an alarm), a DLQ of a DLQ would only move the problem",
        )
        self.function: aws_lambda.Function | None = None
        self.mapping: aws_lambda.EventSourceMapping | None = None

    def add_function(
        self,
        runtime: LambdaRuntime,
        access: Access,
        *,
        code: aws_lambda.Code | None = None,
        agent_modules: Sequence[str] = (),
        role: InlineRole | None = None,
    ) -> aws_lambda.Function:
        """The pool's consumer: `code` holds the handlers and the pool's agents, which
        `agent_modules` name (SHEPHERD_AGENT_MODULES); `role` one made for it (the
        integration pool's: the integrations role), else one of its own."""
        pool, settings = self.pool, self.settings
        env = {**settings.environment, ENV_POOL: pool.name}
        if agent_modules:
            env[ENV_AGENT_MODULES] = ",".join(agent_modules)
        fn = runtime.function(
            self,
            "Agent",
            FunctionSpec(
                handler=HANDLER_AGENT,
                timeout=Duration.seconds(self.function_timeout_seconds),
                memory_mb=settings.memory_mb,
                description=f"agent pool {pool.name}",
                extra_env=env,
                code=code,
                function_name=self.names.function(pool.name),
                architecture=settings.architecture,
                extra_layers=tuple(settings.layers),
                vpc=settings.vpc,
                vpc_subnets=settings.vpc_subnets,
                security_groups=tuple(settings.security_groups),
                reserved_concurrency=settings.reserved_concurrency,
                log_group=runtime.pool_logs,
                role=role,
            ),
        )
        # The event source mapping consumes this queue only: an agent receives nothing else.
        # It also *sends* to every pool's queue (access.engine), because finishing a step
        # dispatches its successors (implicit dispatch), which may run in another pool.
        # ChangeMessageVisibility on its own queue: a record it leaves unclaimed (throttled, or
        # no time left for the step's longest attempt) comes back at once, not after the
        # visibility timeout.
        consume = [*CONSUME, "sqs:ChangeMessageVisibility"]
        allow(fn, aws_iam.PolicyStatement(actions=consume, resources=[self.queue.queue_arn]))
        self.mapping = aws_lambda.EventSourceMapping(
            self,
            "Mapping",
            target=fn,
            event_source_arn=self.queue.queue_arn,
            batch_size=settings.policy.batch_size or pool.batch_size,
            report_batch_item_failures=True,
            # Never more concurrent batches than the function may run: the rest would be
            # throttled, and a throttled message comes back until it reaches the DLQ.
            max_concurrency=min(
                settings.policy.max_concurrency or pool.max_concurrency,
                settings.reserved_concurrency or 1000,
            ),
        )
        access.engine(fn)
        access.payloads(fn, read=True)
        acknowledge(
            fn,
            "Serverless-LambdaDLQ",
            "Invoked synchronously by the SQS event source mapping; a Lambda DLQ applies to "
            "asynchronous invocations only. Failed tasks go to the queue's own DLQ",
        )
        acknowledge(
            self.mapping,
            "Serverless-LambdaEventSourceMappingDestination",
            "SQS event source mappings take no on-failure destination; the source queue's "
            "redrive policy moves a task to its DLQ after maxReceiveCount deliveries",
        )
        self.function = fn
        return fn
