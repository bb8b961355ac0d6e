"""The one DynamoDB table: keys, indexes and TTL all from `shepherd.topology.TABLE`."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy, aws_dynamodb
from constructs import Construct
from shepherd.topology import TABLE, IndexSpec

from shepherd_infra.deployments import DEFAULT, Size

_KEY_TYPES = {"S": aws_dynamodb.AttributeType.STRING, "N": aws_dynamodb.AttributeType.NUMBER}
_PROJECTIONS = {
    "KEYS_ONLY": aws_dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": aws_dynamodb.ProjectionType.INCLUDE,
    "ALL": aws_dynamodb.ProjectionType.ALL,
}


class StateStore(Construct):
    """On-demand, point-in-time recovery, TTL, the watch GSI and the list GSI.

    Encryption: the AWS-owned key. DynamoDB encrypts every table at rest; a customer key would
    add a KMS request per (cached) data key, a key policy to manage and kms:Decrypt on every
    role, for no gain in who can read the data here (IAM already decides that). Switch to
    `TableEncryption.CUSTOMER_MANAGED` if an audit needs CloudTrail records of key use.

    `retain=True` (the default) keeps the table on `cdk destroy` and on replacement; deploy once
    with `-c retain_data=false` before destroying to drop it with the stack. The removal policy
    is RETAIN_ON_UPDATE_OR_DELETE (CloudFormation's `RetainExceptOnCreate`), not RETAIN: a table
    created by a stack operation that rolls back (a failed first deploy) holds no data yet and is
    deleted with the rollback, instead of being left behind to block the next attempt.

    Deletion protection is off unless asked for (`deletion_protection`, context
    `table_deletion_protection=true`): DynamoDB refuses DeleteTable while it is on and
    CloudFormation does not turn it off first, so a protected table created by a failed first
    deploy would be left behind all the same (ROLLBACK_FAILED). Turn it on with a later deploy,
    once the table exists, to guard it against deletion outside CloudFormation.

    Throughput (`size`, shepherd_infra.deployments): the table and each index alike get the
    size's on-demand maximum (none by default: bounded by the account's table-level quota,
    40,000 units a second unless raised) and its warm throughput (none by default: a new
    table serves 4,000 write and 12,000 read units a second at once and grows with use).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retain: bool,
        deletion_protection: bool = False,
        indexes: tuple[IndexSpec, ...] = TABLE.indexes,
        size: Size = DEFAULT,
    ) -> None:
        super().__init__(scope, construct_id)
        self.throughput = _throughput(size)
        self.table = aws_dynamodb.Table(
            self,
            "Table",
            partition_key=aws_dynamodb.Attribute(
                name=TABLE.partition_key, type=aws_dynamodb.AttributeType.STRING
            ),
            sort_key=aws_dynamodb.Attribute(
                name=TABLE.sort_key, type=aws_dynamodb.AttributeType.STRING
            ),
            billing_mode=aws_dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=aws_dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=aws_dynamodb.TableEncryption.DEFAULT,
            time_to_live_attribute=TABLE.ttl_attribute,
            # Lifecycle events are derived from the changes (shepherd.changes, EventRelay).
            stream=aws_dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            deletion_protection=deletion_protection,
            removal_policy=(
                RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if retain else RemovalPolicy.DESTROY
            ),
            max_read_request_units=self.throughput.max_read,
            max_write_request_units=self.throughput.max_write,
            warm_throughput=self.throughput.warm,
        )
        # `indexes`: this release's (`TABLE.indexes`) but during an upgrade in place, one stage
        # of `shepherd_infra.table_stages` per deployment (one index created or deleted).
        for index in indexes:
            self._add_index(index)

    def _add_index(self, index: IndexSpec) -> None:
        self.table.add_global_secondary_index(
            index_name=index.name,
            partition_key=aws_dynamodb.Attribute(
                name=index.partition_key, type=aws_dynamodb.AttributeType.STRING
            ),
            sort_key=aws_dynamodb.Attribute(
                name=index.sort_key, type=_KEY_TYPES[index.sort_key_type]
            ),
            projection_type=_PROJECTIONS[index.projection],
            non_key_attributes=list(index.non_key_attributes) or None,
            max_read_request_units=self.throughput.max_read,
            max_write_request_units=self.throughput.max_write,
            warm_throughput=self.throughput.warm,
        )

    def index_arn(self, index: IndexSpec) -> str:
        """The exact ARN of one index (never `index/*`)."""
        return f"{self.table.table_arn}/index/{index.name}"


@dataclass(frozen=True)
class Throughput:
    """The table's (and every index's) on-demand maximum and warm throughput: None where the
    size sets none."""

    max_read: int | None
    max_write: int | None
    warm: aws_dynamodb.WarmThroughput | None


def _throughput(size: Size) -> Throughput:
    warm = None
    if size.table_warm_read_units is not None or size.table_warm_write_units is not None:
        warm = aws_dynamodb.WarmThroughput(
            read_units_per_second=size.table_warm_read_units,
            write_units_per_second=size.table_warm_write_units,
        )
    return Throughput(size.table_max_read_units, size.table_max_write_units, warm)
