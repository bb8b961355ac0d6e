"""Create on an AWS endpoint (moto, in-process or server) the resources the CDK app declares,
from the same source: `shepherd.topology`. Used by the local stack, the demo and the tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shepherd.definitions import Definition
from shepherd.topology import TABLE, PoolSpec, pools


def create_table(dynamodb: Any, name: str) -> None:
    """The table with its keys, both indexes and TTL, on-demand."""
    attrs = {TABLE.partition_key: "S", TABLE.sort_key: "S"}
    indexes = []
    for idx in TABLE.indexes:
        attrs[idx.partition_key] = "S"
        attrs[idx.sort_key] = idx.sort_key_type
        projection: dict[str, Any] = {"ProjectionType": idx.projection}
        if idx.non_key_attributes:
            projection["NonKeyAttributes"] = list(idx.non_key_attributes)
        indexes.append(
            {
                "IndexName": idx.name,
                "KeySchema": [
                    {"AttributeName": idx.partition_key, "KeyType": "HASH"},
                    {"AttributeName": idx.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": projection,
            }
        )
    dynamodb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": t} for k, t in attrs.items()],
        KeySchema=[
            {"AttributeName": TABLE.partition_key, "KeyType": "HASH"},
            {"AttributeName": TABLE.sort_key, "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=indexes,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    dynamodb.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TABLE.ttl_attribute},
    )


def create_bucket(s3: Any, name: str) -> None:
    """The payload bucket (large payloads), as the CDK app declares it: private, no versions."""
    s3.create_bucket(Bucket=name)
    s3.put_public_access_block(
        Bucket=name,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )


@dataclass(frozen=True)
class PoolQueues:
    url: str
    dlq_url: str


def create_queues(
    sqs: Any,
    pool_specs: Mapping[str, PoolSpec],
    *,
    visibility_override: int | None = None,
    names: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, PoolQueues]:
    """One queue and one DLQ per pool, with the CDK app's visibility and redrive settings;
    `names` gives a pool's (queue, DLQ) names, as a deployed template names them."""
    out: dict[str, PoolQueues] = {}
    for name, pool in pool_specs.items():
        queue_name, dlq_name = (names or {}).get(name, (pool.queue_name, pool.dlq_name))
        dlq_url = sqs.create_queue(QueueName=dlq_name)["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        visibility = visibility_override or pool.visibility_timeout_seconds
        url = sqs.create_queue(
            QueueName=queue_name,
            Attributes={
                "VisibilityTimeout": str(visibility),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(pool.max_receive_count)}
                ),
            },
        )["QueueUrl"]
        out[name] = PoolQueues(url, dlq_url)
    return out


def create_all(
    clients: Mapping[str, Any],
    definitions: Mapping[str, Definition],
    *,
    table: str,
    bus: str | None,
    bucket: str | None = None,
    visibility_override: int | None = None,
) -> dict[str, PoolQueues]:
    create_table(clients["dynamodb"], table)
    if bucket:
        create_bucket(clients["s3"], bucket)
    if bus:
        clients["events"].create_event_bus(Name=bus)
    return create_queues(
        clients["sqs"], pools(definitions), visibility_override=visibility_override
    )
