"""An AWS sample application moved over as it is: the stock trader of the SAM CLI's
"Multi-step workflow" app template (check a price, a Choice buys at 50 or less and sells above,
`dynamodb:putItem` records the transaction). Its state machine is in
`samples/stock_trader/stock_trader.asl.json` (SAM's DefinitionSubstitutions resolved: the
functions' ARNs and the table's name), its Lambda functions in `samples/stock_trader/functions.py`
as Lambda handlers registered as agents. It runs in process on moto, and the item it writes is
read back from DynamoDB.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws
from shepherd.adapters.services import AwsServices
from shepherd.asl import load_file, run_state_machine, workflow_type
from shepherd.asl.integrations import Integrations
from shepherd_cli.asl import as_functions
from shepherd_cli.main import main

REGION = "us-east-1"
TABLE = "TransactionTable"
SAMPLES = Path(__file__).parent / "samples"
FILE = SAMPLES / "stock_trader" / "stock_trader.asl.json"
AGENTS = "stock_trader.functions"


class Market:
    """The functions' source of prices and quantities, fixed: each `randint` gives the next
    value (an exception is raised instead)."""

    def __init__(self, *values: int | Exception) -> None:
        self.values = list(values)

    def randint(self, low: int, high: int) -> int:
        value = self.values.pop(0)
        if isinstance(value, Exception):
            raise value
        assert low <= value <= high
        return value


@pytest.fixture
def sample(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(SAMPLES))
    return importlib.import_module(AGENTS)


@pytest.fixture
def aws() -> Iterator[Integrations]:
    with mock_aws():
        yield Integrations(
            call=AwsServices(lambda name: boto3.client(name, region_name=REGION)).call,
            region=REGION,
        )


def _table() -> Any:
    """The sample's TransactionTable (a SAM SimpleTable keyed by `Id`)."""
    client = boto3.client("dynamodb", region_name=REGION)
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "Id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "Id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


def _run(sample: ModuleType, aws: Integrations | None) -> Any:
    functions = as_functions(sample.registry, workflow_type(FILE))
    return run_state_machine(load_file(FILE), {}, functions=functions, tasks=aws)


@pytest.mark.parametrize(
    ("price", "branch", "kind"),
    [(0, "Buy Stock", "buy"), (50, "Buy Stock", "buy"), (51, "Sell Stock", "sell")],
)
def test_the_price_decides_buy_or_sell_and_the_transaction_is_written(
    sample: ModuleType,
    aws: Integrations,
    monkeypatch: pytest.MonkeyPatch,
    price: int,
    branch: str,
    kind: str,
) -> None:
    client = _table()
    monkeypatch.setattr(sample, "market", Market(price, 7))
    result = _run(sample, aws)

    assert result.status == "SUCCEEDED", (result.error, result.cause)
    assert [v.state for v in result.path] == [
        "Check Stock Value",
        "Buy or Sell?",
        branch,
        "Record Transaction",
    ]
    assert result.transitions == 4
    transaction = result.path[2].output
    assert (transaction["price"], transaction["type"], transaction["qty"]) == (
        str(price),
        kind,
        "7",
    )
    # The machine's output is putItem's, as Step Functions gives an optimized integration's.
    assert result.output["SdkHttpMetadata"]["HttpStatusCode"] == 200
    item = client.get_item(TableName=TABLE, Key={"Id": {"S": transaction["id"]}})["Item"]
    assert item == {
        "Id": {"S": transaction["id"]},
        "Type": {"S": kind},
        "Price": {"N": str(price)},
        "Quantity": {"N": "7"},
        "Timestamp": {"S": transaction["timestamp"]},
    }
    assert client.scan(TableName=TABLE)["Count"] == 1


def test_a_failed_price_check_is_retried_after_the_samples_interval(
    sample: ModuleType, aws: Integrations, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _table()
    monkeypatch.setattr(sample, "market", Market(ConnectionError("quote feed down"), 80, 3))
    result = _run(sample, aws)

    assert result.status == "SUCCEEDED"
    states = [v.state for v in result.path]
    assert states == ["Check Stock Value", "Buy or Sell?", "Sell Stock", "Record Transaction"]
    # A retry stays in its state (one transition); its IntervalSeconds passes in simulated time.
    assert result.seconds == 15.0
    assert client.scan(TableName=TABLE)["Items"][0]["Type"] == {"S": "sell"}


def test_a_missing_table_fails_after_the_record_steps_five_retries(
    sample: ModuleType, aws: Integrations, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sample, "market", Market(10, 1))
    result = _run(sample, aws)

    assert (result.status, result.error) == ("FAILED", "DynamoDB.ResourceNotFoundException")
    # IntervalSeconds 20, BackoffRate 10, MaxAttempts 5: 20 + 200 + 2,000 + 20,000 + 200,000.
    assert result.seconds == 222_220.0


def test_validate_finds_an_agent_for_each_function(
    sample: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--definitions", str(FILE.parent), "--agents", AGENTS]) == 0
    out = capsys.readouterr().out
    assert "stock_trader.asl.json: ok (stock_trader, Amazon States Language, 5 states)" in out


def test_the_cli_runs_the_sample_with_its_service_call(
    sample: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`shepherd asl run` runs the Lambda functions as agents and the `dynamodb:putItem` through
    boto3's default clients (here moto's, in process): the trade is in the table."""
    monkeypatch.setattr(sample, "market", Market(90, 2))
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        _table()
        args = ["asl", "run", str(FILE), "--agents", AGENTS, "--input", "{}", "--path"]
        assert main(args) == 0
        err = capsys.readouterr().err
        assert "Sell Stock #1: " in err and "Record Transaction #1: " in err
        items = boto3.client("dynamodb", region_name=REGION).scan(TableName=TABLE)["Items"]
        assert [(i["Type"]["S"], i["Price"]["N"]) for i in items] == [("sell", "90")]


def test_the_sample_runs_on_the_engine_its_functions_as_agents_its_put_in_the_pool(
    sample: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: the same file on the engine (in memory, its service call on moto): each Task a
    supervised unit, the functions on their agents, `dynamodb:putItem` a unit of Shepherd's
    integration pool; the trade is read back from the table."""
    from shepherd.asl.workflow import INTEGRATIONS_POOL
    from shepherd.definitions import load_directory
    from shepherd.keys import WF_SK, wf_pk
    from support import memory_harness

    monkeypatch.setattr(sample, "market", Market(30, 4))
    with mock_aws():
        client = _table()
        services = AwsServices(lambda name: boto3.client(name, region_name=REGION))
        h = memory_harness(
            definitions=load_directory(FILE.parent), agents=sample.registry, services=services.call
        )
        wf = h.start("stock_trader", {})
        h.pump()
        item = h.store.get(wf_pk(wf), WF_SK)
        assert item is not None and item["status"] == "SUCCEEDED", item.get("asl_cause")
        pools = [(t.pool, t.message.step) for t in h.queue.sent]
        assert pools == [
            ("asl", "V#Check Stock Value#1"),
            ("asl", "V#Buy Stock#1"),
            (INTEGRATIONS_POOL, "V#Record Transaction#1"),
        ]
        (trade,) = client.scan(TableName=TABLE)["Items"]
        assert (trade["Type"], trade["Price"], trade["Quantity"]) == (
            {"S": "buy"},
            {"N": "30"},
            {"N": "4"},
        )
