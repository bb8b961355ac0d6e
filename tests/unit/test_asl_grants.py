"""Least privilege from a state machine (shepherd.asl.grants): the exact statements each
integration form needs, static and dynamic, and the Tasks whose grant cannot be derived."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from shepherd.asl import load_file, parse
from shepherd.asl.grants import DYNAMIC, NAMED, UNNAMED, Child, Env, Grant, Plan, plan

ENV = Env("aws", "eu-west-1", "111122223333")
FN = "arn:aws:lambda:eu-west-1:111122223333:function"


def _task(resource: str, language: str = "JSONPath", **fields: Any) -> Plan:
    state = {"Type": "Task", "Resource": resource, "End": True, **fields}
    doc = {"StartAt": "T", "QueryLanguage": language, "States": {"T": state}}
    return plan(parse(doc), ENV)


def _pairs(found: Plan) -> set[tuple[str, str]]:
    return {(g.action, g.resource) for g in found.grants}


def _one_refusal(found: Plan) -> str:
    assert found.grants == ()
    ((where, reason),) = [(r.where, r.reason) for r in found.refusals]
    assert where == "States.T"
    return reason


# --- Lambda ----------------------------------------------------------------------------------


def test_a_function_arn_resource_grants_the_function_and_its_versions_and_aliases() -> None:
    found = _task(f"{FN}:Checker")
    assert found.statements() == [
        {
            "Effect": "Allow",
            "Action": "lambda:InvokeFunction",
            "Resource": [f"{FN}:Checker", f"{FN}:Checker:*"],
        }
    ]
    assert found.wildcards() == [] and found.refusals == ()


def test_a_qualified_function_arn_grants_that_version_or_alias_alone() -> None:
    assert _pairs(_task(f"{FN}:Checker:prod")) == {("lambda:InvokeFunction", f"{FN}:Checker:prod")}
    assert _pairs(_task(f"{FN}:Checker:7")) == {("lambda:InvokeFunction", f"{FN}:Checker:7")}


def test_a_function_in_another_account_or_region_is_granted_there() -> None:
    other = "arn:aws:lambda:us-west-2:444455556666:function:Far"
    assert _pairs(_task(other)) == {
        ("lambda:InvokeFunction", other),
        ("lambda:InvokeFunction", f"{other}:*"),
    }


@pytest.mark.parametrize(
    ("name", "qualifier", "expected"),
    [
        ("Checker", None, [f"{FN}:Checker", f"{FN}:Checker:*"]),
        ("Checker:live", None, [f"{FN}:Checker:live"]),
        ("111122223333:function:Checker", None, [f"{FN}:Checker", f"{FN}:Checker:*"]),
        (f"{FN}:Checker", "3", [f"{FN}:Checker:3"]),
        (f"{FN}:Checker:$LATEST", None, [f"{FN}:Checker", f"{FN}:Checker:*"]),
    ],
)
def test_lambda_invoke_grants_the_function_name_in_every_form(
    name: str, qualifier: str | None, expected: list[str]
) -> None:
    params: dict[str, Any] = {"FunctionName": name, "Payload.$": "$"}
    if qualifier:
        params["Qualifier"] = qualifier
    for resource in (
        "arn:aws:states:::lambda:invoke",
        "arn:aws:states:::lambda:invoke.waitForTaskToken",
    ):
        found = _task(resource, Parameters=params)
        assert found.statements() == [
            {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": sorted(expected)}
        ]


def test_lambda_invoke_with_a_dynamic_function_is_granted_on_star_and_listed() -> None:
    found = _task(
        "arn:aws:states:::lambda:invoke", Parameters={"FunctionName.$": "$.fn", "Payload": {}}
    )
    assert found.statements() == [
        {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": ["*"]}
    ]
    assert found.wildcards() == [Grant("lambda:InvokeFunction", "*", "States.T", DYNAMIC)]
    jsonata = _task(
        "arn:aws:states:::lambda:invoke",
        "JSONata",
        Arguments={"FunctionName": "{% $states.input.fn %}"},
    )
    assert _pairs(jsonata) == {("lambda:InvokeFunction", "*")}
    assert jsonata.wildcards()[0].why == DYNAMIC


def test_lambda_invoke_in_jsonata_with_a_static_name() -> None:
    found = _task(
        "arn:aws:states:::lambda:invoke",
        "JSONata",
        Arguments={"FunctionName": "Checker", "Payload": "{% $states.input %}"},
    )
    assert _pairs(found) == {
        ("lambda:InvokeFunction", f"{FN}:Checker"),
        ("lambda:InvokeFunction", f"{FN}:Checker:*"),
    }


# --- optimized integrations ------------------------------------------------------------------


def test_sqs_send_message_grants_the_queue_the_url_names() -> None:
    cases = {
        "https://sqs.eu-west-1.amazonaws.com/111122223333/orders": "eu-west-1",
        "https://sqs.us-east-2.amazonaws.com/111122223333/orders": "us-east-2",
        "https://ap-south-1.queue.amazonaws.com/111122223333/orders": "ap-south-1",
        "http://localhost:4566/111122223333/orders": "eu-west-1",  # the stack's region
    }
    for url, region in cases.items():
        for resource in (
            "arn:aws:states:::sqs:sendMessage",
            "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        ):
            found = _task(resource, Parameters={"QueueUrl": url, "MessageBody.$": "$"})
            assert found.statements() == [
                {
                    "Effect": "Allow",
                    "Action": "sqs:SendMessage",
                    "Resource": [f"arn:aws:sqs:{region}:111122223333:orders"],
                }
            ], url


def test_sqs_with_a_queue_from_the_input_is_on_star() -> None:
    found = _task("arn:aws:states:::sqs:sendMessage", Parameters={"QueueUrl.$": "$.q"})
    assert _pairs(found) == {("sqs:SendMessage", "*")}
    assert [g.why for g in found.wildcards()] == [DYNAMIC]


def test_sqs_with_no_queue_url_or_not_a_url_is_refused() -> None:
    assert "QueueUrl is required" in _one_refusal(
        _task("arn:aws:states:::sqs:sendMessage", Parameters={"MessageBody": "x"})
    )
    assert "names no resource" in _one_refusal(
        _task("arn:aws:states:::sqs:sendMessage", Parameters={"QueueUrl": "orders"})
    )


def test_sns_publish_grants_the_topic_and_star_for_a_target_or_a_phone() -> None:
    topic = "arn:aws:sns:eu-west-1:111122223333:alerts"
    found = _task("arn:aws:states:::sns:publish", Parameters={"TopicArn": topic, "Message": "m"})
    assert found.statements() == [{"Effect": "Allow", "Action": "sns:Publish", "Resource": [topic]}]
    phone = _task("arn:aws:states:::sns:publish", Parameters={"PhoneNumber": "+15555550100"})
    assert _pairs(phone) == {("sns:Publish", "*")}
    assert [g.why for g in phone.wildcards()] == [UNNAMED]
    dynamic = _task("arn:aws:states:::sns:publish", Parameters={"TopicArn.$": "$.topic"})
    assert [g.why for g in dynamic.wildcards()] == [DYNAMIC]


def test_events_put_events_grants_each_bus_named_and_every_bus_when_dynamic() -> None:
    bus = "arn:aws:events:eu-west-1:111122223333:event-bus"
    found = _task(
        "arn:aws:states:::events:putEvents",
        Parameters={
            "Entries": [
                {"Detail": {}, "DetailType": "a", "Source": "s", "EventBusName": "orders"},
                {"Detail": {}, "DetailType": "b", "Source": "s"},
                {"EventBusName": "arn:aws:events:us-east-1:444455556666:event-bus/far"},
            ]
        },
    )
    assert found.statements() == [
        {
            "Effect": "Allow",
            "Action": "events:PutEvents",
            "Resource": sorted(
                [
                    f"{bus}/orders",
                    f"{bus}/default",
                    "arn:aws:events:us-east-1:444455556666:event-bus/far",
                ]
            ),
        }
    ]
    dynamic = _task("arn:aws:states:::events:putEvents", Parameters={"Entries.$": "$.e"})
    assert _pairs(dynamic) == {("events:PutEvents", "arn:aws:events:*:*:event-bus/*")}
    assert [g.why for g in dynamic.wildcards()] == [DYNAMIC]


def test_each_dynamodb_call_grants_its_own_action_on_the_table() -> None:
    table = "arn:aws:dynamodb:eu-west-1:111122223333:table/Orders"
    for action in ("getItem", "putItem", "updateItem", "deleteItem", "query"):
        found = _task(
            f"arn:aws:states:::dynamodb:{action}", Parameters={"TableName": "Orders", "Key": {}}
        )
        pascal = action[0].upper() + action[1:]
        assert found.statements() == [
            {"Effect": "Allow", "Action": f"dynamodb:{pascal}", "Resource": [table]}
        ], action
    by_arn = _task("arn:aws:states:::dynamodb:putItem", Parameters={"TableName": table})
    assert _pairs(by_arn) == {("dynamodb:PutItem", table)}


def test_a_dynamodb_query_on_an_index_grants_the_index() -> None:
    table = "arn:aws:dynamodb:eu-west-1:111122223333:table/Orders"
    found = _task(
        "arn:aws:states:::dynamodb:query",
        Parameters={"TableName": "Orders", "IndexName": "by_customer"},
    )
    assert _pairs(found) == {("dynamodb:Query", f"{table}/index/by_customer")}
    dynamic = _task(
        "arn:aws:states:::dynamodb:query",
        Parameters={"TableName": "Orders", "IndexName.$": "$.index"},
    )
    assert _pairs(dynamic) == {("dynamodb:Query", f"{table}/index/*")}
    assert [g.why for g in dynamic.wildcards()] == [DYNAMIC]


def test_a_dynamodb_table_from_the_input_is_on_star() -> None:
    found = _task(
        "arn:aws:states:::dynamodb:putItem",
        "JSONata",
        Arguments={"TableName": "{% $states.input.table %}", "Item": {}},
    )
    assert _pairs(found) == {("dynamodb:PutItem", "*")}


def test_s3_objects_are_granted_by_bucket_and_key() -> None:
    for resource in ("arn:aws:states:::s3:getObject", "arn:aws:states:::aws-sdk:s3:getObject"):
        found = _task(resource, Parameters={"Bucket": "reports", "Key": "2024/q1.csv"})
        assert _pairs(found) == {("s3:GetObject", "arn:aws:s3:::reports/2024/q1.csv")}
    any_key = _task("arn:aws:states:::s3:putObject", Parameters={"Bucket": "raw", "Key.$": "$.k"})
    assert _pairs(any_key) == {("s3:PutObject", "arn:aws:s3:::raw/*")}
    assert [g.why for g in any_key.wildcards()] == [DYNAMIC]
    starry = _task("arn:aws:states:::s3:getObject", Parameters={"Bucket": "raw", "Key": "a*b"})
    assert _pairs(starry) == {("s3:GetObject", "arn:aws:s3:::raw/a${*}b")}  # IAM's escape


# --- aws-sdk ---------------------------------------------------------------------------------


def test_aws_sdk_grants_the_iam_action_on_the_resource_named() -> None:
    table = "arn:aws:dynamodb:eu-west-1:111122223333:table/Orders"
    assert _pairs(
        _task("arn:aws:states:::aws-sdk:dynamodb:scan", Parameters={"TableName": "Orders"})
    ) == {("dynamodb:Scan", table)}
    assert _pairs(
        _task(
            "arn:aws:states:::aws-sdk:dynamodb:batchWriteItem",
            Parameters={"RequestItems": {"Orders": [], "Lines": []}},
        )
    ) == {("dynamodb:BatchWriteItem", table), ("dynamodb:BatchWriteItem", f"{table[:-6]}Lines")}
    assert _pairs(
        _task(
            "arn:aws:states:::aws-sdk:sqs:sendMessageBatch",
            Parameters={"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/111122223333/q"},
        )
    ) == {("sqs:SendMessage", "arn:aws:sqs:eu-west-1:111122223333:q")}
    assert _pairs(
        _task("arn:aws:states:::aws-sdk:lambda:invoke", Parameters={"FunctionName": "Checker:v2"})
    ) == {("lambda:InvokeFunction", f"{FN}:Checker:v2")}
    assert _pairs(
        _task("arn:aws:states:::aws-sdk:s3:listObjectsV2", Parameters={"Bucket": "reports"})
    ) == {("s3:ListBucket", "arn:aws:s3:::reports")}
    machine = "arn:aws:states:eu-west-1:111122223333:stateMachine:Other"
    assert _pairs(
        _task(
            "arn:aws:states:::aws-sdk:sfn:startExecution", Parameters={"StateMachineArn": machine}
        )
    ) == {("states:StartExecution", machine)}
    assert _pairs(
        _task(
            "arn:aws:states:::aws-sdk:secretsmanager:getSecretValue", Parameters={"SecretId": "db"}
        )
    ) == {
        (
            "secretsmanager:GetSecretValue",
            "arn:aws:secretsmanager:eu-west-1:111122223333:secret:db-??????",
        )
    }
    assert _pairs(
        _task("arn:aws:states:::aws-sdk:ssm:getParameter", Parameters={"Name": "/app/key"})
    ) == {("ssm:GetParameter", "arn:aws:ssm:eu-west-1:111122223333:parameter/app/key")}
    assert all(g.why == NAMED for g in _task(f"{FN}:x").grants)


def test_aws_sdk_with_no_resource_named_is_on_star_and_listed() -> None:
    found = _task("arn:aws:states:::aws-sdk:ec2:describeInstances", Parameters={"MaxResults": 5})
    assert found.statements() == [
        {"Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": ["*"]}
    ]
    assert found.wildcards() == [Grant("ec2:DescribeInstances", "*", "States.T", UNNAMED)]
    dynamic = _task("arn:aws:states:::aws-sdk:dynamodb:getItem", Parameters={"TableName.$": "$.t"})
    assert [(g.action, g.resource, g.why) for g in dynamic.grants] == [
        ("dynamodb:GetItem", "*", DYNAMIC)
    ]


def test_aws_sdk_services_with_another_iam_prefix() -> None:
    assert _pairs(_task("arn:aws:states:::aws-sdk:sfn:listStateMachines")) == {
        ("states:ListStateMachines", "*")
    }
    assert _pairs(_task("arn:aws:states:::aws-sdk:cloudwatchlogs:describeLogGroups")) == {
        ("logs:DescribeLogGroups", "*")
    }


def test_aws_sdk_calls_whose_iam_actions_cannot_be_derived_are_refused() -> None:
    assert "HTTP verbs" in _one_refusal(_task("arn:aws:states:::aws-sdk:apigateway:getRestApis"))
    assert "each item's own action" in _one_refusal(
        _task("arn:aws:states:::aws-sdk:dynamodb:transactWriteItems")
    )


def test_an_sdk_api_the_sdk_does_not_know_is_refused_when_checked() -> None:
    doc = {
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:sendMesage",
                "End": True,
            }
        },
    }
    found = plan(
        parse(doc), ENV, knows=lambda s, op: None if op == "SendMessage" else "no such API"
    )
    assert [r.reason for r in found.refusals] == [
        "'arn:aws:states:::aws-sdk:sqs:sendMesage': no such API"
    ]


# --- states:startExecution -------------------------------------------------------------------


def test_start_execution_grants_nothing_and_names_the_child_workflow() -> None:
    machine = "arn:aws:states:eu-west-1:111122223333:stateMachine:Child"
    for suffix in ("", ".sync", ".sync:2", ".waitForTaskToken"):
        state = {
            "Type": "Task",
            "Resource": f"arn:aws:states:::states:startExecution{suffix}",
            "Parameters": {"StateMachineArn": machine, "Input": {}},
            "End": True,
        }
        doc = {"StartAt": "T", "States": {"T": state}}
        found = plan(parse(doc), ENV, workflow_types={"Child", "Parent"})
        assert found.grants == () and found.refusals == ()
        assert found.children == (Child("States.T", "Child"),)


def test_start_execution_of_a_machine_the_app_does_not_define_is_refused() -> None:
    state = {
        "Type": "Task",
        "Resource": "arn:aws:states:::states:startExecution.sync:2",
        "Parameters": {"StateMachineArn": "arn:aws:states:eu-west-1:1:stateMachine:Gone"},
        "End": True,
    }
    found = plan(parse({"StartAt": "T", "States": {"T": state}}), ENV, workflow_types={"Child"})
    ((refusal,),) = [found.refusals]
    assert "'Gone', which is not a definition of this app" in refusal.reason
    assert "known: Child" in refusal.reason


# --- the walk --------------------------------------------------------------------------------


def test_every_state_of_parallel_branches_and_map_processors_is_walked() -> None:
    doc = {
        "StartAt": "Fan",
        "States": {
            "Fan": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "A",
                        "States": {"A": {"Type": "Task", "Resource": f"{FN}:A", "End": True}},
                    },
                    {
                        "StartAt": "Each",
                        "States": {
                            "Each": {
                                "Type": "Map",
                                "ItemProcessor": {
                                    "StartAt": "Put",
                                    "States": {
                                        "Put": {
                                            "Type": "Task",
                                            "Resource": "arn:aws:states:::dynamodb:putItem",
                                            "Parameters": {"TableName": "Lines", "Item": {}},
                                            "End": True,
                                        }
                                    },
                                },
                                "End": True,
                            }
                        },
                    },
                ],
                "Next": "B",
            },
            "B": {"Type": "Task", "Resource": f"{FN}:A:live", "End": True},
        },
    }
    found = plan(parse(doc), ENV)
    assert {(g.action, g.resource, g.where) for g in found.grants} == {
        ("lambda:InvokeFunction", f"{FN}:A", "States.Fan.Branches[0].States.A"),
        ("lambda:InvokeFunction", f"{FN}:A:*", "States.Fan.Branches[0].States.A"),
        (
            "dynamodb:PutItem",
            "arn:aws:dynamodb:eu-west-1:111122223333:table/Lines",
            "States.Fan.Branches[1].States.Each.ItemProcessor.States.Put",
        ),
        ("lambda:InvokeFunction", f"{FN}:A:live", "States.B"),
    }
    assert found.statements() == [
        {
            "Effect": "Allow",
            "Action": "dynamodb:PutItem",
            "Resource": ["arn:aws:dynamodb:eu-west-1:111122223333:table/Lines"],
        },
        {
            "Effect": "Allow",
            "Action": "lambda:InvokeFunction",
            "Resource": [f"{FN}:A", f"{FN}:A:*", f"{FN}:A:live"],
        },
    ]


def test_one_dynamic_grant_widens_that_action_to_star_only() -> None:
    a = _task("arn:aws:states:::sqs:sendMessage", Parameters={"QueueUrl.$": "$.q"})
    b = _task(f"{FN}:Checker")
    assert (a + b).statements() == [
        {
            "Effect": "Allow",
            "Action": "lambda:InvokeFunction",
            "Resource": [f"{FN}:Checker", f"{FN}:Checker:*"],
        },
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": ["*"]},
    ]


def test_a_resource_that_is_neither_a_function_nor_an_integration_is_refused() -> None:
    assert "neither a Lambda function" in _one_refusal(
        _task("arn:aws:states:eu-west-1:111122223333:activity:Review")
    )


def test_no_tasks_no_grants() -> None:
    doc = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
    assert plan(parse(doc)).statements() == []


def test_jsonata_arguments_that_are_one_expression_make_every_resource_dynamic() -> None:
    whole = "{% {'QueueUrl': $states.input.q, 'MessageBody': 'x'} %}"
    found = _task("arn:aws:states:::sqs:sendMessage", "JSONata", Arguments=whole)
    assert [(g.action, g.resource, g.why) for g in found.grants] == [
        ("sqs:SendMessage", "*", DYNAMIC)
    ]
    table = _task("arn:aws:states:::aws-sdk:dynamodb:getItem", "JSONata", Arguments=whole)
    assert [(g.action, g.resource, g.why) for g in table.grants] == [
        ("dynamodb:GetItem", "*", DYNAMIC)
    ]


def test_an_entry_whose_bus_comes_from_the_input_widens_to_every_bus() -> None:
    found = _task(
        "arn:aws:states:::events:putEvents",
        Parameters={"Entries": [{"EventBusName": "orders"}, {"EventBusName.$": "$.bus"}]},
    )
    assert _pairs(found) == {
        ("events:PutEvents", "arn:aws:events:eu-west-1:111122223333:event-bus/orders"),
        ("events:PutEvents", "arn:aws:events:*:*:event-bus/*"),
    }
    assert found.statements() == [
        {
            "Effect": "Allow",
            "Action": "events:PutEvents",
            "Resource": [
                "arn:aws:events:*:*:event-bus/*",
                "arn:aws:events:eu-west-1:111122223333:event-bus/orders",
            ],
        }
    ]


def test_the_stock_trader_sample_is_granted_its_three_functions_and_one_put() -> None:
    """AWS's SAM sample (docs/migrating-from-step-functions.md): where its template grants
    LambdaInvokePolicy per function and DynamoDBWritePolicy, the definition alone derives the
    three functions and PutItem on its table."""
    sample = Path(__file__).parents[1] / "statemachines/samples/stock_trader/stock_trader.asl.json"
    found = plan(load_file(sample), Env("aws", "us-east-1", "123456789012"))
    fn = "arn:aws:lambda:us-east-1:123456789012:function"
    assert found.statements() == [
        {
            "Effect": "Allow",
            "Action": "dynamodb:PutItem",
            "Resource": ["arn:aws:dynamodb:us-east-1:123456789012:table/TransactionTable"],
        },
        {
            "Effect": "Allow",
            "Action": "lambda:InvokeFunction",
            "Resource": [
                f"{fn}:{name}{suffix}"
                for name in ("StockBuyerFunction", "StockCheckerFunction", "StockSellerFunction")
                for suffix in ("", ":*")
            ],
        },
    ]
    assert found.wildcards() == [] and found.refusals == ()
