"""`shepherd upgrade` (issue 35.2): from the table it finds, one `cdk deploy` per remaining
stage, each waiting for the table's indexes to be ACTIVE, each step printed; run again after a
stop, it carries on. The deploys are played on moto: each applies its stage's layout with the
one UpdateTable DynamoDB allows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from shepherd.topology import TABLE, IndexSpec
from shepherd_cli.main import main
from shepherd_cli.upgrade import UpgradeError, deploy_command, upgrade
from shepherd_infra import table_stages

NAME = "shepherd-table"


def _gsi(index: IndexSpec) -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": index.projection}
    if index.non_key_attributes:
        projection["NonKeyAttributes"] = list(index.non_key_attributes)
    return {
        "IndexName": index.name,
        "KeySchema": [
            {"AttributeName": index.partition_key, "KeyType": "HASH"},
            {"AttributeName": index.sort_key, "KeyType": "RANGE"},
        ],
        "Projection": projection,
    }


def _attributes(indexes: tuple[IndexSpec, ...]) -> list[dict[str, str]]:
    types = {"pk": "S", "sk": "S"}
    for i in indexes:
        types[i.partition_key] = "S"
        types[i.sort_key] = i.sort_key_type
    return [{"AttributeName": k, "AttributeType": v} for k, v in types.items()]


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=NAME,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=_attributes(table_stages.PREVIOUS),
            GlobalSecondaryIndexes=[_gsi(i) for i in table_stages.PREVIOUS],
        )
        yield client


class CloudFormation:
    """A `cdk deploy` of one stage, as CloudFormation applies it: one UpdateTable with the one
    index creation or deletion the stage makes (more would be refused)."""

    def __init__(self, client: Any, *, fail_at: int = 0) -> None:
        self.client = client
        self.deployed: list[int | None] = []
        self.fail_at = fail_at

    def __call__(self, stage: int | None) -> None:
        if stage == self.fail_at:
            raise UpgradeError("cdk deploy failed")
        self.deployed.append(stage)
        want = {i.name: i for i in table_stages.indexes_at(stage)}
        table = self.client.describe_table(TableName=NAME)["Table"]
        have = {i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])}
        created, deleted = sorted(want.keys() - have), sorted(have - want.keys())
        assert len(created) + len(deleted) == 1, (stage, created, deleted)
        if created:
            update = {"Create": {**_gsi(want[created[0]])}}
        else:
            update = {"Delete": {"IndexName": deleted[0]}}
        self.client.update_table(
            TableName=NAME,
            AttributeDefinitions=_attributes(tuple(want.values())),
            GlobalSecondaryIndexUpdates=[update],
        )


def test_upgrade_deploys_each_stage_in_turn_and_prints_each_step(dynamodb: Any) -> None:
    deploy, lines = CloudFormation(dynamodb), []
    assert upgrade(dynamodb, NAME, deploy, lines.append, sleep=lambda s: None) == 7
    assert deploy.deployed == [1, 2, 3, 4, 5, 6, None]  # the last: -c table_stage=final
    described = dynamodb.describe_table(TableName=NAME)["Table"]
    assert table_stages.described_layout(described) == table_stages.layout(TABLE.indexes)
    assert lines[0] == f"table {NAME}: the previous release's indexes; 7 deploys to go"
    assert "stage 1/7: create index by_status" in lines
    assert any(line.startswith("stage 5/7: delete index by_owner") for line in lines)
    assert "stage 6/7: create index by_owner (KEYS_ONLY)" in lines
    assert "stage 7/7: create index by_key" in lines
    assert sum(line.endswith(": done") for line in lines) == 7
    # Done: nothing more to deploy.
    again: list[str] = []
    assert upgrade(dynamodb, NAME, CloudFormation(dynamodb), again.append) == 0
    assert "already" in again[0]


def test_a_stopped_upgrade_carries_on_from_the_table_it_finds(dynamodb: Any) -> None:
    with pytest.raises(UpgradeError):
        upgrade(dynamodb, NAME, CloudFormation(dynamodb, fail_at=3), lambda line: None)
    deploy, lines = CloudFormation(dynamodb), []
    assert upgrade(dynamodb, NAME, deploy, lines.append) == 5
    assert deploy.deployed == [3, 4, 5, 6, None]
    assert lines[0] == f"table {NAME}: stage 2 of 7 indexes; 5 deploys to go"


def test_a_dry_run_deploys_nothing_and_a_table_changed_by_hand_is_refused(dynamodb: Any) -> None:
    lines: list[str] = []
    assert upgrade(dynamodb, NAME, CloudFormation(dynamodb), lines.append, dry_run=True) == 0
    assert len([line for line in lines if line.startswith("stage ")]) == 7
    dynamodb.update_table(
        TableName=NAME,
        AttributeDefinitions=[{"AttributeName": "x", "AttributeType": "S"}],
        GlobalSecondaryIndexUpdates=[
            {"Create": {**_gsi(IndexSpec("mine", "x", "sk", "S", "KEYS_ONLY"))}}
        ],
    )
    with pytest.raises(UpgradeError, match="match no stage"):
        upgrade(dynamodb, NAME, CloudFormation(dynamodb), lines.append)


def test_the_deploy_command_names_the_stage() -> None:
    assert deploy_command(2, ["npx", "cdk"], ["-c", "operators=a"]) == [
        "npx",
        "cdk",
        "deploy",
        "--require-approval",
        "never",
        "-c",
        "table_stage=2",
        "-c",
        "operators=a",
    ]
    assert "table_stage=final" in deploy_command(None, ["cdk"], [])


def test_the_cli_runs_the_upgrade_with_the_cdk_it_is_given(
    dynamodb: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # --dry-run: the plan from the live table, no deploy.
    assert main(["upgrade", "--table", NAME, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "7 deploys to go" in out and "stage 4/7: create index inbox" in out
    # A deploy that fails stops the upgrade with a message, not a traceback.
    assert main(["upgrade", "--table", NAME, "--cdk", "false"]) == 1
    assert "cdk deploy failed" in capsys.readouterr().err


def test_during_an_upgrade_a_read_of_an_index_not_there_yet_passes(dynamodb: Any) -> None:
    """The functions are this release's from the first stage on: a list through an index the
    table does not have yet is StoreUnavailable (the API's 503 with Retry-After), not a bug's
    500, and the indexes that are there answer."""
    from shepherd.adapters.dynamodb import DynamoStore
    from shepherd.errors import StoreUnavailable

    store = DynamoStore(dynamodb, NAME)
    for index in (TABLE.status_index, TABLE.inbox_index):
        with pytest.raises(StoreUnavailable, match="not there yet"):
            store.query_range(index, "p", "a", "z", limit=10, newest_first=True, cursor=None)
    page = store.query_range(
        TABLE.list_index, "p", "a", "z", limit=10, newest_first=True, cursor=None
    )
    assert page.items == []


@pytest.mark.parametrize(
    ("code", "message", "passes"),
    [
        ("ValidationException", "The table does not have the specified index: by_status", True),
        ("ValidationException", "Cannot read from backfilling global secondary index: inbox", True),
        ("ResourceNotFoundException", "Invalid index: inbox for table: t", True),
        ("ResourceNotFoundException", "Requested resource not found", False),
        ("ValidationException", "One or more parameter values were invalid", False),
    ],
)
def test_dynamodbs_answers_for_an_index_not_ready(code: str, message: str, passes: bool) -> None:
    from botocore.exceptions import ClientError
    from shepherd.adapters.dynamodb import translate
    from shepherd.errors import StoreUnavailable

    err = ClientError({"Error": {"Code": code, "Message": message}}, "Query")
    assert isinstance(translate("query", err), StoreUnavailable) is passes


def _old_workflow(client: Any, wid: str, owner: str, status: str, created: int) -> None:
    """A workflow item as the previous release wrote it: an unsharded list_pk, no filters' keys."""
    client.put_item(
        TableName=NAME,
        Item={
            "pk": {"S": f"WF#{wid}"},
            "sk": {"S": "#WF"},
            "owner": {"S": owner},
            "wf_type": {"S": "order_fulfilment"},
            "status": {"S": status},
            "created_at": {"N": str(created)},
            "list_pk": {"S": f"OWNER#{owner}"},
            "list_sk": {"S": f"{created:015d}#{wid}"},
        },
    )


class RacingClient:
    """The table's client, but a status change lands between the re-key's Scan and its first
    write of one item (as a workflow moving on during the upgrade would)."""

    def __init__(self, client: Any, wid: str) -> None:
        self.client, self.wid, self.raced = client, wid, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def update_item(self, **params: Any) -> Any:
        if params["Key"]["pk"]["S"] == f"WF#{self.wid}" and not self.raced:
            self.raced = True
            self.client.update_item(
                TableName=NAME,
                Key=params["Key"],
                UpdateExpression="SET #s = :s",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": "SUCCEEDED"}},
            )
        return self.client.update_item(**params)


def test_the_upgrade_re_keys_the_previous_releases_workflows_once(dynamodb: Any) -> None:
    from shepherd.keys import list_keys

    alice, bob = "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/bob"
    _old_workflow(dynamodb, "w1", alice, "RUNNING", 1_700_000_000_000)
    _old_workflow(dynamodb, "w2", bob, "FAILED", 1_700_000_000_001)
    dynamodb.put_item(TableName=NAME, Item={"pk": {"S": "WF#w1"}, "sk": {"S": "S#charge"}})
    lines: list[str] = []
    racing = RacingClient(dynamodb, "w1")
    upgrade(racing, NAME, CloudFormation(dynamodb), lines.append, sleep=lambda s: None)
    assert racing.raced
    assert "re-keyed 2 workflows of the previous release (now in this release's lists)" in lines
    for wid, owner, status, created in (
        ("w1", alice, "SUCCEEDED", 1_700_000_000_000),  # the status as it is now, not as read
        ("w2", bob, "FAILED", 1_700_000_000_001),
    ):
        item = dynamodb.get_item(TableName=NAME, Key={"pk": {"S": f"WF#{wid}"}, "sk": {"S": "#WF"}})
        got = {
            k: v["S"]
            for k, v in item["Item"].items()
            if k in ("list_pk", "list_sk") or k.endswith("_sk")
        }
        assert got == list_keys(owner, "order_fulfilment", status, created, wid)
    step = dynamodb.get_item(TableName=NAME, Key={"pk": {"S": "WF#w1"}, "sk": {"S": "S#charge"}})
    assert set(step["Item"]) == {"pk", "sk"}
    # Run again: nothing left to re-key.
    again: list[str] = []
    upgrade(dynamodb, NAME, CloudFormation(dynamodb), again.append)
    assert "re-keyed 0 workflows of the previous release (now in this release's lists)" in again
