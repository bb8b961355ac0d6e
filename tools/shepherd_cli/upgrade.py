"""`shepherd upgrade`: deploy this release over the previous one, one table change at a time.

The deployed table says where an upgrade stands (`shepherd_infra.table_stages.stage_of` on
its DescribeTable): each remaining stage is one `cdk deploy -c table_stage=<n>` (the last one
`-c table_stage=final`, this release's layout), and before each deploy, and after the last,
the table and every index must be ACTIVE (CloudFormation does not wait for an index's
backfill, and DynamoDB refuses an index change while another is being built). Then it
re-keys the previous release's workflow items (`rekey`), so they show in this release's
lists. Stopped half-way (a failed deploy, Ctrl-C), it is run again and carries on from where
the table is.
docs/upgrading.md says what each stage does to work in flight.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError
from shepherd.keys import WF_PREFIX, WF_SK, list_keys
from shepherd_infra import table_stages

WAIT_POLL_SECONDS = 15.0
WAIT_LIMIT_SECONDS = 6 * 3600.0  # a large table's backfill takes hours

Deploy = Callable[[int | None], None]


class UpgradeError(Exception):
    """An upgrade that cannot go on (the message says why and what to do)."""


def deploy_command(stage: int | None, cdk: Sequence[str], extra: Sequence[str]) -> list[str]:
    """The `cdk deploy` of one stage (None: the final layout)."""
    value = "final" if stage is None else str(stage)
    return [
        *cdk,
        "deploy",
        "--require-approval",
        "never",
        "-c",
        f"{table_stages.CTX_TABLE_STAGE}={value}",
        *extra,
    ]


def cdk_deploy(cdk: Sequence[str], extra: Sequence[str], out: Callable[[str], None]) -> Deploy:
    def deploy(stage: int | None) -> None:
        command = deploy_command(stage, cdk, extra)
        out(f"  $ {shlex.join(command)}")
        if subprocess.run(command, check=False).returncode != 0:
            raise UpgradeError(
                "cdk deploy failed (CloudFormation rolled the stage back): fix the cause and "
                "run shepherd upgrade again; it carries on from the table's stage"
            )

    return deploy


def table_name_of(cloudformation: Any, stack: str) -> str:
    """The stack's `TableName` output (the example app's; pass --table otherwise)."""
    outputs = cloudformation.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    for output in outputs:
        if output["OutputKey"] == "TableName":
            return str(output["OutputValue"])
    raise UpgradeError(f"stack {stack} has no TableName output: name the table with --table")


def wait_active(
    dynamodb: Any,
    table: str,
    out: Callable[[str], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
    poll: float = WAIT_POLL_SECONDS,
    limit: float = WAIT_LIMIT_SECONDS,
) -> dict[str, Any]:
    """The table's description once it and every index are ACTIVE (an index being built or
    backfilled is waited for, its progress printed)."""
    waited = 0.0
    while True:
        described = dynamodb.describe_table(TableName=table)["Table"]
        busy = [
            f"{i['IndexName']} {i.get('IndexStatus')}"
            + (" (backfilling)" if i.get("Backfilling") else "")
            for i in described.get("GlobalSecondaryIndexes", [])
            if i.get("IndexStatus") != "ACTIVE"
        ]
        if described.get("TableStatus") == "ACTIVE" and not busy:
            return dict(described)
        if waited >= limit:
            raise UpgradeError(f"table {table} still busy after {limit:.0f} s: {busy}")
        out(f"  waiting for the table: {described.get('TableStatus')}; {', '.join(busy)}")
        sleep(poll)
        waited += poll


REKEY_TRIES = 5


def rekey(dynamodb: Any, table: str, out: Callable[[str], None] = print) -> int:
    """Give every workflow item written by the previous release this release's list keys
    (docs/architecture.md, Migrating a table from the unsharded layout): one Scan of the table
    for `sk = #WF` items without `type_sk`, one UpdateItem each, conditional on the item still
    lacking them and still having the status read (a status change in between is re-read, so
    a stale status never overwrites a newer one). Idempotent: run again, it finds what is left.
    How many items were re-keyed."""
    done = 0
    params: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "sk = :wf AND attribute_not_exists(type_sk)",
        "ExpressionAttributeValues": {":wf": {"S": WF_SK}},
    }
    while True:
        page = dynamodb.scan(**params)
        for item in page.get("Items", []):
            done += _rekey_one(dynamodb, table, item)
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    out(f"re-keyed {done} workflows of the previous release (now in this release's lists)")
    return done


def _rekey_one(dynamodb: Any, table: str, item: dict[str, Any]) -> int:
    key = {"pk": item["pk"], "sk": item["sk"]}
    for _ in range(REKEY_TRIES):
        if item is None or "type_sk" in item:
            return 0
        status = item["status"]["S"]
        keys = list_keys(
            item["owner"]["S"],
            item["wf_type"]["S"],
            status,
            int(item["created_at"]["N"]),
            item["pk"]["S"].removeprefix(WF_PREFIX),
        )
        names = {f"#k{i}": name for i, name in enumerate(keys)}
        values = {f":k{i}": {"S": value} for i, value in enumerate(keys.values())}
        try:
            dynamodb.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET " + ", ".join(f"#k{i} = :k{i}" for i in range(len(keys))),
                ConditionExpression="attribute_not_exists(type_sk) AND #status = :status",
                ExpressionAttributeNames={**names, "#status": "status"},
                ExpressionAttributeValues={**values, ":status": {"S": status}},
            )
            return 1
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        item = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    raise UpgradeError(f"item {key['pk']['S']} kept changing: run shepherd upgrade again")


def upgrade(
    dynamodb: Any,
    table: str,
    deploy: Deploy,
    out: Callable[[str], None] = print,
    *,
    dry_run: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    rekeying: bool = True,
) -> int:
    """Deploy every remaining stage in turn, printing each step, then re-key the previous
    release's workflow items (`rekeying`); how many stages were deployed."""
    described = wait_active(dynamodb, table, out, sleep=sleep)
    current = table_stages.stage_of(table_stages.described_layout(described))
    try:
        todo = table_stages.remaining(table_stages.described_layout(described))
    except ValueError as exc:
        raise UpgradeError(str(exc)) from None
    total = len(table_stages.STAGES)
    if not todo:
        out(f"table {table}: this release's indexes already; deploy as usual (cdk deploy)")
        if rekeying and not dry_run:
            rekey(dynamodb, table, out)
        return 0
    where = "the previous release's" if current == 0 else f"stage {current} of {total}"
    out(f"table {table}: {where} indexes; {len(todo)} deploys to go")
    for stage in todo:
        final = stage.number == table_stages.FINAL
        out(f"stage {stage.number}/{total}: {stage.change}")
        if dry_run:
            continue
        deploy(None if final else stage.number)
        described = wait_active(dynamodb, table, out, sleep=sleep)
        reached = table_stages.stage_of(table_stages.described_layout(described))
        if reached != stage.number:
            raise UpgradeError(
                f"after stage {stage.number} the table is at stage {reached}: was it changed "
                "by hand? Run shepherd upgrade again to carry on from where it is"
            )
        out(f"stage {stage.number}/{total}: done")
    if dry_run:
        out("then: re-key the previous release's workflow items (one Scan of the table)")
    else:
        if rekeying:
            rekey(dynamodb, table, out)
        out("upgraded: later deploys need no table_stage (a plain cdk deploy)")
    return 0 if dry_run else len(todo)


__all__ = ["UpgradeError", "cdk_deploy", "deploy_command", "rekey", "table_name_of", "upgrade"]
