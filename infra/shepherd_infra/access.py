"""Least-privilege grants, scoped to exact ARNs. The matrix (see docs/architecture.md):

| function   | table items   | index Query | queues                      | bus       | S3 wf/* |
|------------|---------------|-------------|-----------------------------|-----------|---------|
| api        | read/write    | by_*, inbox | send to all pools           | —         | get/put¹|
| callbacks  | read/write    | —           | send to all pools           | —         | put²    |
| events     | read/write    | —           | send to all pools           | —         | put³    |
| agent (p)  | read/write    | —           | consume own; send to all    | —         | get/put |
| supervisor | read/write    | watch       | send to all pools           | —         | —       |
| relay      | its stream; put `EV#*` | — | its on-failure queue      | PutEvents | —       |

¹ and get/put/delete on `uploads/*` (POST /payloads: it signs the presigned POST, a start
reads the upload and deletes it once used).
² and get/delete on `uploads/*` (a success naming an `output_upload` reads it and deletes it
once used). ³ and get/delete on `uploads/*` (a `StartWorkflow` event naming an
`input_upload`). No other function touches `uploads/*`.

Payload grants (the payload bucket, large payloads) are object-level on `wf/*` only: no
delete, no list, no other prefix (but the API's, callbacks' and events' on `uploads/*`). The
API reads to sign its presigned links; the supervisor and the relay never touch a payload (the
planner sees sizes, events carry errors).

Only the relay publishes: events come from the table's stream, never from a writer.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack, aws_events, aws_iam, aws_lambda
from shepherd.keys import EVENTS_PREFIX
from shepherd.topology import IndexSpec

from shepherd_infra.nag import acknowledge
from shepherd_infra.naming import PoolNames, nag_text
from shepherd_infra.payload_store import PayloadStore
from shepherd_infra.runtime import STAR_REASON, allow, holder_of
from shepherd_infra.state_store import StateStore

# What the DynamoDB adapter calls. TransactWriteItems has no IAM action of its own: each item in
# the transaction is authorised by its own action (PutItem, UpdateItem; the engine writes no
# ConditionCheck item, so ConditionCheckItem is not granted: the IAM test would fail on it).
TABLE_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")
TABLE_WRITE_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")


class Access:
    """Grants against the shared resources; every function starts with no permissions."""

    def __init__(
        self,
        store: StateStore,
        names: PoolNames,
        bus: aws_events.IEventBus,
        payloads: PayloadStore,
    ) -> None:
        self._store = store
        self._names = names
        self._bus = bus
        self._payloads = payloads

    def payloads(self, fn: aws_lambda.Function, *, read: bool) -> None:
        """Write workflow payloads; read them too if `read` (agents, the API's links)."""
        self._payloads.grant_write(fn)
        if read:
            self._payloads.grant_read(fn)

    def uploads(self, fn: aws_lambda.Function, *, sign: bool) -> None:
        """Use uploads (a start's input, a callback's output): `uploads/*` only; `sign` also
        presigns them (POST /payloads)."""
        self._payloads.grant_uploads(fn, sign=sign)

    def table(self, fn: aws_lambda.Function, *, indexes: Sequence[IndexSpec] = ()) -> None:
        """Item read/write on the base table; Query on the named indexes only."""
        allow(
            fn,
            aws_iam.PolicyStatement(
                actions=[*TABLE_READ_ACTIONS, *TABLE_WRITE_ACTIONS],
                resources=[self._store.table.table_arn],
            ),
        )
        if indexes:
            allow(
                fn,
                aws_iam.PolicyStatement(
                    actions=["dynamodb:Query"],
                    resources=[self._store.index_arn(index) for index in indexes],
                ),
            )

    def dispatch(self, fn: aws_lambda.Function) -> None:
        """Send (never receive) task messages to every pool's queue: one pattern, whatever the
        number of pools (the DLQs do not match it)."""
        allow(
            fn,
            aws_iam.PolicyStatement(
                actions=["sqs:SendMessage"], resources=[self._names.queue_pattern]
            ),
        )
        self._acknowledge_pattern(
            fn,
            self._names.queue_pattern,
            "SendMessage on this deployment's pool queues (`<prefix>-<stack id>-Q-<pool>`), "
            "one pattern rather than an ARN per pool: the role's policy stays the same size "
            "with 6 or 60 pools; the DLQs (`-D-`) and every other queue are outside it",
        )

    def publish(self, fn: aws_lambda.Function) -> None:
        self._bus.grant_put_events_to(fn)

    def history(self, fn: aws_lambda.Function) -> None:
        """PutItem on the table, only on items whose partition is a workflow's history
        (`EV#<id>`): the relay keeps each event it published (shepherd.engine.history) and
        can write nothing else."""
        allow(
            fn,
            aws_iam.PolicyStatement(
                actions=["dynamodb:PutItem"],
                resources=[self._store.table.table_arn],
                conditions={
                    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{EVENTS_PREFIX}*"]}
                },
            ),
        )

    def pool_control(self, fn: aws_lambda.Function, *, backlogs: bool = True) -> None:
        """Pause and resume pools (their event source mappings, found by their function's name)
        and, if `backlogs`, read their queues' backlogs (GET /pools)."""
        allow(
            fn,
            aws_iam.PolicyStatement(actions=["lambda:ListEventSourceMappings"], resources=["*"]),
        )
        for rule in ("AwsSolutions-IAM5[Resource::*]", "Serverless-LambdaStarPermissions"):
            acknowledge(holder_of(fn), rule, STAR_REASON)
        stack = Stack.of(fn)
        mappings = (
            f"arn:{stack.partition}:lambda:{stack.region}:{stack.account}:event-source-mapping:*"
        )
        allow(
            fn,
            aws_iam.PolicyStatement(
                actions=["lambda:UpdateEventSourceMapping"],
                resources=[mappings],
                conditions={"ArnLike": {"lambda:FunctionArn": self._names.function_pattern}},
            ),
        )
        self._acknowledge_pattern(
            fn,
            mappings,
            "Event source mappings have random ids; the condition on lambda:FunctionArn limits "
            "UpdateEventSourceMapping to the mappings of this deployment's pool functions",
        )
        if backlogs:
            allow(
                fn,
                aws_iam.PolicyStatement(
                    actions=["sqs:GetQueueAttributes"], resources=[self._names.queue_pattern]
                ),
            )

    def engine(self, fn: aws_lambda.Function, *, indexes: Sequence[IndexSpec] = ()) -> None:
        """What any part of the engine needs: the table and dispatching (no bus: events come
        from the table's stream, through the relay)."""
        self.table(fn, indexes=indexes)
        self.dispatch(fn)

    @staticmethod
    def _acknowledge_pattern(fn: aws_lambda.Function, pattern: str, reason: str) -> None:
        """cdk-nag's IAM5 for one resource pattern, worded as cdk-nag words its finding."""
        stack = Stack.of(fn)
        acknowledge(
            holder_of(fn), f"AwsSolutions-IAM5[Resource::{nag_text(stack, pattern)}]", reason
        )
