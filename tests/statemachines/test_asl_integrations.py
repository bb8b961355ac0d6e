"""Service integrations and other state machines in ASL Tasks (issue 38), run in process
against moto: the effects a state machine makes are read back from the services."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from shepherd.adapters.services import AwsServices
from shepherd.asl import parse, run_state_machine
from shepherd.asl.integrations import Integrations, validate_resource
from shepherd.asl.services import error_name, pascal_client
from shepherd.asl.services import parse as parse_resource

REGION = "us-east-1"


@pytest.fixture
def aws() -> Iterator[Integrations]:
    with mock_aws():
        services = AwsServices(lambda name: boto3.client(name, region_name=REGION))
        yield Integrations(call=services.call, region=REGION)


def _table() -> None:
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName="orders",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _machine(states: dict[str, Any], start: str) -> Any:
    return parse({"StartAt": start, "States": states}, "test")


def test_a_machine_writes_an_item_sends_a_message_and_reads_the_item_back(
    aws: Integrations,
) -> None:
    _table()
    queue = boto3.client("sqs", region_name=REGION).create_queue(QueueName="shipments")["QueueUrl"]
    machine = _machine(
        {
            "Put": {
                "Type": "Task",
                "Resource": "arn:aws:states:::dynamodb:putItem",
                "Parameters": {
                    "TableName": "orders",
                    "Item": {"pk": {"S.$": "$.order_id"}, "amount": {"N.$": "$.amount"}},
                },
                "ResultPath": "$.put",
                "Next": "Send",
            },
            "Send": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage",
                "Parameters": {"QueueUrl": queue, "MessageBody.$": "$"},
                "ResultPath": "$.sent",
                "Next": "Get",
            },
            "Get": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:dynamodb:getItem",
                "Parameters": {"TableName": "orders", "Key": {"pk": {"S.$": "$.order_id"}}},
                "ResultSelector": {"amount.$": "$.Item.amount.N"},
                "End": True,
            },
        },
        "Put",
    )
    result = run_state_machine(machine, {"order_id": "o-1", "amount": "42"}, tasks=aws)
    assert (result.status, result.output) == ("SUCCEEDED", {"amount": "42"})
    item = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName="orders", Key={"pk": {"S": "o-1"}}
    )["Item"]
    assert item["amount"] == {"N": "42"}
    messages = boto3.client("sqs", region_name=REGION).receive_message(QueueUrl=queue)["Messages"]
    body = json.loads(messages[0]["Body"])
    # The body is the state's input as JSON text (Step Functions serializes an object body),
    # with the optimized integration's SDK metadata on the put's result.
    assert body["order_id"] == "o-1" and "SdkResponseMetadata" in body["put"]


def test_a_failed_condition_is_caught_by_its_step_functions_name(aws: Integrations) -> None:
    _table()
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName="orders", Item={"pk": {"S": "o-1"}}
    )
    machine = _machine(
        {
            "Put": {
                "Type": "Task",
                "Resource": "arn:aws:states:::dynamodb:putItem",
                "Parameters": {
                    "TableName": "orders",
                    "Item": {"pk": {"S": "o-1"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                },
                "Catch": [
                    {
                        "ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"],
                        "ResultPath": "$.error",
                        "Next": "Exists",
                    }
                ],
                "End": True,
            },
            "Exists": {"Type": "Pass", "OutputPath": "$.error.Error", "End": True},
        },
        "Put",
    )
    result = run_state_machine(machine, {}, tasks=aws)
    assert result.output == "DynamoDB.ConditionalCheckFailedException"


def test_a_missing_queue_fails_with_the_sqs_name(aws: Integrations) -> None:
    url = f"https://sqs.{REGION}.amazonaws.com/123456789012/nope"
    machine = _machine(
        {
            "Send": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage",
                "Parameters": {"QueueUrl": url, "MessageBody": "x"},
                "End": True,
            }
        },
        "Send",
    )
    result = run_state_machine(machine, {}, tasks=aws)
    assert (result.status, result.error) == ("FAILED", "SQS.QueueDoesNotExistException")


def test_publish_put_events_and_s3_objects(aws: Integrations) -> None:
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="orders")["TopicArn"]
    sink = boto3.client("sqs", region_name=REGION).create_queue(QueueName="sink")["QueueUrl"]
    sink_arn = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=sink, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=sink_arn)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="docs")
    machine = _machine(
        {
            "Publish": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sns:publish",
                "Parameters": {"TopicArn": topic, "Message": {"hello.$": "$.name"}},
                "ResultPath": None,
                "Next": "Event",
            },
            "Event": {
                "Type": "Task",
                "Resource": "arn:aws:states:::events:putEvents",
                "Parameters": {
                    "Entries": [
                        {"Source": "orders", "DetailType": "Done", "Detail": {"n.$": "$.name"}}
                    ]
                },
                "ResultSelector": {"failed.$": "$.FailedEntryCount"},
                "ResultPath": "$.events",
                "Next": "Store",
            },
            "Store": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:s3:putObject",
                "Parameters": {"Bucket": "docs", "Key": "a.txt", "Body.$": "$.name"},
                "ResultPath": None,
                "Next": "Read",
            },
            "Read": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                "Parameters": {"Bucket": "docs", "Key": "a.txt"},
                "ResultSelector": {"body.$": "$.Body"},
                "ResultPath": "$.read",
                "End": True,
            },
        },
        "Publish",
    )
    result = run_state_machine(machine, {"name": "ada"}, tasks=aws)
    assert result.status == "SUCCEEDED", result.cause
    assert result.output == {"name": "ada", "events": {"failed": 0}, "read": {"body": "ada"}}
    note = json.loads(
        boto3.client("sqs", region_name=REGION).receive_message(QueueUrl=sink)["Messages"][0][
            "Body"
        ]
    )
    assert json.loads(note["Message"]) == {"hello": "ada"}


def test_an_sdk_error_is_named_after_the_sdk_client(aws: Integrations) -> None:
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="docs")
    machine = _machine(
        {
            "Read": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                "Parameters": {"Bucket": "docs", "Key": "missing"},
                "End": True,
            }
        },
        "Read",
    )
    result = run_state_machine(machine, {}, tasks=aws)
    assert result.error == "S3.NoSuchKeyException"


def test_start_execution_in_each_form() -> None:
    child = _machine(
        {
            "Double": {
                "Type": "Pass",
                "Parameters": {"v.$": "States.MathAdd($.v, $.v)"},
                "End": True,
            }
        },
        "Double",
    )
    for pattern, expect in (
        (".sync:2", {"v": 42}),
        (".sync", json.dumps({"v": 42}, separators=(",", ":"))),
    ):
        parent = _machine(
            {
                "Start": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::states:startExecution" + pattern,
                    "Parameters": {
                        "StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:double",
                        "Input": {"v.$": "$.v"},
                    },
                    "End": True,
                }
            },
            "Start",
        )
        result = run_state_machine(parent, {"v": 21}, machines={"double": child})
        assert result.status == "SUCCEEDED"
        assert result.output["Output"] == expect
        assert result.output["Status"] == "SUCCEEDED"
    fire_and_forget = _machine(
        {
            "Start": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution",
                "Parameters": {"StateMachineArn": "missing"},
                "End": True,
            }
        },
        "Start",
    )
    result = run_state_machine(fire_and_forget, {}, machines={"double": child})
    assert result.error == "StepFunctions.StateMachineDoesNotExistException"


def test_names_and_refusals() -> None:
    assert pascal_client("DynamoDB") == "DynamoDb"
    assert pascal_client("ACM PCA") == "AcmPca"
    assert pascal_client("SQS") == "Sqs"
    assert pascal_client("EventBridge") == "EventBridge"
    assert error_name("S3", "BucketAlreadyExists") == "S3.BucketAlreadyExistsException"
    assert parse_resource("arn:aws:states:::aws-sdk:sfn:startExecution").service == "stepfunctions"
    assert "ecs" in (validate_resource("arn:aws:states:::ecs:runTask.sync") or "")
    assert "not built" in (validate_resource("arn:aws:states:::glue:startJobRun.sync") or "")
    assert validate_resource("arn:aws:states:::sqs:sendMessage") is None
    assert validate_resource("arn:aws:states:::states:startExecution.sync:2") is None
    assert "use arn:aws:states:::aws-sdk:sqs:receiveMessage" in (
        validate_resource("arn:aws:states:::sqs:receiveMessage") or ""
    )


def test_a_machine_naming_an_unbuilt_job_is_refused_naming_the_state() -> None:
    from shepherd.errors import DefinitionError

    with pytest.raises(DefinitionError) as caught:
        _machine(
            {
                "Build": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::codebuild:startBuild.sync",
                    "Parameters": {"ProjectName": "p"},
                    "End": True,
                }
            },
            "Build",
        )
    assert "Build" in str(caught.value) and "Resource" in str(caught.value)
    assert "codebuild" in str(caught.value)


def test_a_result_writer_writes_the_manifest_and_each_status_file(aws: Integrations) -> None:
    """A distributed Map's ResultWriter (the guide's 'ResultWriter (Map)', and the floci
    emulator's AslExecutorResultWriterTest): SUCCEEDED_0.json and FAILED_0.json hold each
    child's execution record (Input and Output as JSON text), manifest.json lists them, all
    under `<Prefix><map run id>/`, and a tolerated failed child is in FAILED_0.json only."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="exports")
    machine = _machine(
        {
            "Fan": {
                "Type": "Map",
                "Label": "orders",
                "ItemsPath": "$.items",
                "ToleratedFailureCount": 1,
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                    "StartAt": "Check",
                    "States": {
                        "Check": {
                            "Type": "Choice",
                            "Choices": [{"Variable": "$.n", "NumericLessThan": 0, "Next": "Boom"}],
                            "Default": "Keep",
                        },
                        "Boom": {"Type": "Fail", "Error": "ItemFailed", "Cause": "negative"},
                        "Keep": {"Type": "Pass", "End": True},
                    },
                },
                "ResultWriter": {
                    "Resource": "arn:aws:states:::s3:putObject",
                    "Parameters": {"Bucket": "exports", "Prefix": "/csvJobs//"},
                },
                "End": True,
            }
        },
        "Fan",
    )
    run = run_state_machine(machine, {"items": [{"n": 1}, {"n": -1}, {"n": 3}]}, tasks=aws)
    assert run.status == "SUCCEEDED", run.cause
    details = run.output["ResultWriterDetails"]
    run_id = run.output["MapRunArn"].rsplit(":", 1)[1]
    assert run.output["MapRunArn"].startswith(
        "arn:aws:states:us-east-1:123456789012:mapRun:machine/orders:"
    )
    assert details == {"Bucket": "exports", "Key": f"/csvJobs//{run_id}/manifest.json"}

    def read(key: str) -> Any:
        return json.loads(s3.get_object(Bucket="exports", Key=key)["Body"].read())

    manifest = read(details["Key"])
    assert manifest["DestinationBucket"] == "exports"
    assert manifest["MapRunArn"] == run.output["MapRunArn"]
    assert [f["Key"] for f in manifest["ResultFiles"]["SUCCEEDED"]] == [
        f"/csvJobs//{run_id}/SUCCEEDED_0.json"
    ]
    assert manifest["ResultFiles"]["PENDING"] == []
    succeeded = read(manifest["ResultFiles"]["SUCCEEDED"][0]["Key"])
    assert [r["Output"] for r in succeeded] == ['{"n":1}', '{"n":3}']
    assert {r["Status"] for r in succeeded} == {"SUCCEEDED"}
    assert succeeded[0]["RedriveStatus"] == "NOT_REDRIVABLE"
    assert succeeded[0]["StateMachineArn"] == (
        "arn:aws:states:us-east-1:123456789012:stateMachine:machine/orders"
    )
    assert ":execution:machine/orders:" in succeeded[0]["ExecutionArn"]
    failed = read(manifest["ResultFiles"]["FAILED"][0]["Key"])
    assert [(r["Status"], r["Error"], r["Cause"]) for r in failed] == [
        ("FAILED", "ItemFailed", "negative")
    ]
