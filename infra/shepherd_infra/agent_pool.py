"""One agent pool: a queue, its DLQ and one Lambda consuming it. All numbers from the PoolSpec."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, aws_lambda, aws_lambda_event_sources, aws_sqs
from constructs import Construct
from shepherd.observability import ENV_POOL, HANDLER_AGENT
from shepherd.settings import ENV_AGENT_MODULES
from shepherd.topology import PoolSpec

from shepherd_infra import config
from shepherd_infra.access import Access
from shepherd_infra.nag import acknowledge
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime

DLQ_RETENTION = Duration.days(14)  # the SQS maximum: time for an operator to look


class AgentPool(Construct):
    """Queues are created first (every function's environment lists every queue URL); the
    consuming function is added once the shared runtime exists.

    The queues have no fixed names (CloudFormation names them from the stack): SQS refuses a
    name for 60 s after its queue is deleted, and two stacks in one region would collide. The
    local stack (tools/shepherd_cli) keeps the names of `shepherd.topology`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, pool: PoolSpec) -> None:
        super().__init__(scope, construct_id)
        self.pool = pool
        self.dlq = aws_sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
        self.queue = aws_sqs.Queue(
            self,
            "Queue",
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(pool.visibility_timeout_seconds),
            dead_letter_queue=aws_sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=pool.max_receive_count
            ),
        )
        acknowledge(
            self.dlq,
            "Serverless-SQSRedrivePolicy",
            f"This is the dead-letter queue of the {pool.name} pool; its messages wait for an "
            "operator (and raise an alarm), a DLQ of a DLQ would only move the problem",
        )
        self.function: aws_lambda.Function | None = None
        self.event_source: aws_lambda_event_sources.SqsEventSource | None = None

    def add_function(
        self,
        runtime: LambdaRuntime,
        access: Access,
        *,
        code: aws_lambda.Code | None = None,
        agent_modules: Sequence[str] = (),
        memory_mb: int = config.WORKER_MEMORY_MB,
    ) -> aws_lambda.Function:
        """The pool's consumer: `code` holds the handlers and the pool's agents, which
        `agent_modules` name (SHEPHERD_AGENT_MODULES)."""
        pool = self.pool
        env = {ENV_POOL: pool.name}
        if agent_modules:
            env[ENV_AGENT_MODULES] = ",".join(agent_modules)
        fn = runtime.function(
            self,
            "Agent",
            FunctionSpec(
                handler=HANDLER_AGENT,
                timeout=Duration.seconds(pool.function_timeout_seconds),
                memory_mb=memory_mb,
                description=f"agent pool {pool.name}",
                extra_env=env,
                code=code,
            ),
        )
        # The event source mapping grants receive/delete/change-visibility on this queue only:
        # an agent consumes nothing else. The "touch only its own queue" is read as
        # "consume": an agent also *sends* to every pool's queue, because finishing a step
        # dispatches its successors (implicit dispatch), which may run in another pool.
        self.event_source = aws_lambda_event_sources.SqsEventSource(
            self.queue,
            batch_size=pool.batch_size,
            report_batch_item_failures=True,
            max_concurrency=pool.max_concurrency,
        )
        fn.add_event_source(self.event_source)
        access.engine(fn)
        access.payloads(fn, read=True)
        acknowledge(
            fn,
            "Serverless-LambdaDLQ",
            "Invoked synchronously by the SQS event source mapping; a Lambda DLQ applies to "
            "asynchronous invocations only. Failed tasks go to the queue's own DLQ",
        )
        acknowledge(
            fn,
            "Serverless-LambdaEventSourceMappingDestination",
            "SQS event source mappings take no on-failure destination; the source queue's "
            "redrive policy moves a task to its DLQ after maxReceiveCount deliveries",
        )
        self.function = fn
        return fn
