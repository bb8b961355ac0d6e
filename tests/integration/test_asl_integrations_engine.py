"""A state machine's service Tasks, deployed Lambda functions, `.waitForTaskToken` Tasks and
`states:startExecution` on the engine (issue 38; issue 42's remainder), over in-memory ports
under a manual clock (and moto where the call itself is the point): each is a unit claimed by
Shepherd's integration pool (its built-in agent, a fenced attempt, ASL's Retry and Catch), its
result shaped by the runner's own code (`shepherd.asl.services`, `lambdas`, `integrations`); a
Task that waits rests until `POST /tasks/...` (the engine's callbacks) or its child's end."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from shepherd.adapters.services import AwsServices
from shepherd.asl.errors import StatesError
from shepherd.asl.workflow import INTEGRATIONS_AGENT, INTEGRATIONS_POOL
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry, Outcome
from shepherd.errors import HeartbeatTooSoon, TaskTokenInvalid, TaskTokenStale
from shepherd.keys import WF_SK, item_sk, visits_pk, wf_pk
from shepherd.model import StepRecord, StepStatus, WorkflowStatus
from support import Harness, memory_harness

SQS_SEND = "arn:aws:states:::sqs:sendMessage"
DDB_PUT = "arn:aws:states:::dynamodb:putItem"


def _definition(name: str, machine: dict[str, Any], **extra: Any) -> Definition:
    return parse_definition({"Name": name, "Steps": [], "StateMachine": machine, **extra}, name)


class Calls:
    """A fake of the service port: records each call, answers from `answers` in order (a
    StatesError is raised), else `{"ok": True}`."""

    def __init__(self, *answers: Any) -> None:
        self.seen: list[tuple[str, Any, str | None]] = []
        self.answers = list(answers)

    def __call__(self, resource: str, parameters: Any, key: str | None) -> Any:
        self.seen.append((resource, parameters, key))
        answer = self.answers.pop(0) if self.answers else {"ok": True}
        if isinstance(answer, StatesError):
            raise answer
        return answer


def _world(
    machines: dict[str, dict[str, Any]],
    services: Any = None,
    agents: dict[str, Any] | None = None,
    **extra: Any,
) -> Harness:
    registry = AgentRegistry()
    for name, fn in (agents or {}).items():
        registry.register(name, fn)
    return memory_harness(
        definitions={n: _definition(n, m, **extra) for n, m in machines.items()},
        agents=registry,
        services=services,
    )


def _item(h: Harness, wf: str) -> dict[str, Any]:
    item = h.store.get(wf_pk(wf), WF_SK)
    assert item is not None
    return item


def _unit(h: Harness, wf: str, name: str) -> StepRecord:
    item = h.store.get(visits_pk(wf), item_sk("step", name))
    assert item is not None, name
    return StepRecord.from_item(item)


def _sent(h: Harness, wf: str) -> list[tuple[str, str, int]]:
    return [
        (t.pool, t.message.step, t.message.attempt)
        for t in h.queue.sent
        if t.message.workflow_id == wf
    ]


def _view(h: Harness, wf: str) -> dict[str, Any]:
    return h.scheduler.asl.view(_item(h, wf))


SEND = {
    "StartAt": "Send",
    "States": {
        "Send": {
            "Type": "Task",
            "Resource": SQS_SEND,
            "Parameters": {"QueueUrl": "https://sqs/q", "MessageBody": {"order.$": "$.order"}},
            "ResultSelector": {"id.$": "$.MessageId"},
            "End": True,
        }
    },
}


def test_a_service_task_is_a_unit_of_the_integration_pool() -> None:
    calls = Calls({"MessageId": "m-1"})
    h = _world({"m": SEND}, calls)
    wf = h.start("m", {"order": 7})
    h.pump()
    assert _item(h, wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert _view(h, wf)["output"] == {"id": "m-1"}
    # Its unit was sent to Shepherd's own pool (no user agent), claimed once, at attempt 1,
    # and the call was made with the state's parameters and the visit's idempotency key.
    assert _sent(h, wf) == [(INTEGRATIONS_POOL, "V#Send#1", 1)]
    assert calls.seen == [
        (SQS_SEND, {"QueueUrl": "https://sqs/q", "MessageBody": {"order": 7}}, f"{wf}/V#Send#1")
    ]
    unit = _unit(h, wf, "V#Send#1")
    assert (unit.status, unit.attempt) == (StepStatus.SUCCEEDED, 1)
    # The integration pool is one of the app's pools, with its one built-in agent.
    assert [(t.pool, t.agent) for t in h.definitions["m"].tasks] == [
        (INTEGRATIONS_POOL, INTEGRATIONS_AGENT)
    ]


RETRIED = {
    "StartAt": "Put",
    "States": {
        "Put": {
            "Type": "Task",
            "Resource": DDB_PUT,
            "Parameters": {"TableName": "t", "Item": {"pk": {"S": "a"}}},
            "Retry": [
                {
                    "ErrorEquals": ["DynamoDB.ProvisionedThroughputExceededException"],
                    "IntervalSeconds": 2,
                    "MaxAttempts": 1,
                }
            ],
            "Catch": [
                {
                    "ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"],
                    "ResultPath": "$.error",
                    "Next": "Exists",
                }
            ],
            "End": True,
        },
        "Exists": {"Type": "Pass", "End": True},
    },
}


def test_a_service_error_goes_to_retry_then_catch_with_the_same_idempotency_key() -> None:
    calls = Calls(
        StatesError("DynamoDB.ProvisionedThroughputExceededException", "slow down"),
        StatesError("DynamoDB.ConditionalCheckFailedException", "The conditional request failed"),
    )
    h = _world({"m": RETRIED}, calls)
    wf = h.start("m", {"n": 1})
    h.pump()
    assert _unit(h, wf, "V#Put#1").status is StepStatus.QUEUED  # its retry's 2 s delay
    h.clock.advance(2)
    h.pump()
    assert _item(h, wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert _view(h, wf)["output"] == {
        "n": 1,
        "error": {
            "Error": "DynamoDB.ConditionalCheckFailedException",
            "Cause": "The conditional request failed",
        },
    }
    assert _sent(h, wf) == [(INTEGRATIONS_POOL, "V#Put#1", 1), (INTEGRATIONS_POOL, "V#Put#1", 2)]
    assert {key for _, _, key in calls.seen} == {f"{wf}/V#Put#1"}  # one key for every attempt


def test_with_no_service_client_a_service_task_fails_with_states_permissions() -> None:
    h = _world({"m": SEND})
    wf = h.start("m", {"order": 1})
    h.pump()
    item = _item(h, wf)
    assert item["status"] == WorkflowStatus.FAILED.value
    assert item["asl_error"] == "States.Permissions"


FUNCTION = {
    "StartAt": "Check",
    "States": {
        "Check": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {
                "FunctionName": "arn:aws:lambda:us-east-1:123456789012:function:Checker:prod",
                "Payload.$": "$",
            },
            "ResultSelector": {"price.$": "$.Payload.price", "status.$": "$.StatusCode"},
            "Catch": [{"ErrorEquals": ["PriceError"], "ResultPath": "$.error", "Next": "Caught"}],
            "End": True,
        },
        "Caught": {"Type": "Pass", "End": True},
    },
}


def test_a_function_mapped_to_the_integration_pool_is_invoked_as_deployed() -> None:
    calls = Calls({"Payload": '{"price": 42}', "StatusCode": 200})
    h = _world({"m": FUNCTION}, calls, LambdaPools={"Checker": INTEGRATIONS_POOL})
    wf = h.start("m", {"sku": "a"})
    h.pump()
    assert _view(h, wf)["output"] == {"price": 42, "status": 200}
    assert _sent(h, wf) == [(INTEGRATIONS_POOL, "V#Check#1", 1)]
    # The Invoke API, with the function as the state names it and the payload as JSON text.
    assert calls.seen == [
        (
            "arn:aws:states:::aws-sdk:lambda:invoke",
            {
                "FunctionName": "arn:aws:lambda:us-east-1:123456789012:function:Checker:prod",
                "InvocationType": "RequestResponse",
                "Payload": '{"sku":"a"}',
            },
            None,
        )
    ]


def test_a_deployed_functions_error_is_its_error_type_and_the_services_own_are_lambda_names() -> (
    None
):
    error = {"errorMessage": "no price", "errorType": "PriceError", "stackTrace": []}
    calls = Calls({"Payload": json.dumps(error), "FunctionError": "Unhandled", "StatusCode": 200})
    h = _world({"m": FUNCTION}, calls, LambdaPools={"Checker": INTEGRATIONS_POOL})
    wf = h.start("m", {"sku": "a"})
    h.pump()
    out = _view(h, wf)["output"]
    assert out["error"]["Error"] == "PriceError"
    assert json.loads(out["error"]["Cause"]) == error
    throttled = Calls(StatesError("Lambda.TooManyRequestsException", "Rate exceeded"))
    h = _world({"m": FUNCTION}, throttled, LambdaPools={"Checker": INTEGRATIONS_POOL})
    wf = h.start("m", {"sku": "a"})
    h.pump()
    assert _item(h, wf)["asl_error"] == "Lambda.TooManyRequestsException"


def test_locally_an_agent_registered_under_the_functions_name_serves_it() -> None:
    calls = Calls()
    h = _world(
        {"m": FUNCTION},
        calls,
        agents={"Checker": lambda ctx: {"price": ctx.input["sku"] * 2}},
        LambdaPools={"Checker": INTEGRATIONS_POOL},
    )
    wf = h.start("m", {"sku": "ab"})
    h.pump()
    assert _view(h, wf)["output"] == {"price": "abab", "status": 200}
    assert calls.seen == []  # the same file runs here on its agent, deployed on the function


def test_service_calls_reach_moto_and_their_effects_can_be_read() -> None:
    machine = {
        "StartAt": "Put",
        "States": {
            "Put": {
                "Type": "Task",
                "Resource": DDB_PUT,
                "Parameters": {
                    "TableName": "orders",
                    "Item": {"pk": {"S.$": "$.id"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                },
                "ResultPath": None,
                "Catch": [
                    {
                        "ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"],
                        "ResultPath": "$.error",
                        "Next": "Duplicate",
                    }
                ],
                "Next": "Send",
            },
            "Send": {
                "Type": "Task",
                "Resource": SQS_SEND,
                "Parameters": {"QueueUrl.$": "$.queue", "MessageBody": {"id.$": "$.id"}},
                "ResultSelector": {"sent.$": "$.MessageId"},
                "ResultPath": "$.send",
                "Next": "Audit",
            },
            "Audit": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync:2",
                "Parameters": {"StateMachineArn": "audit", "Input": {"id.$": "$.id"}},
                "ResultSelector": {"audited.$": "$.Output", "sent.$": "$$.Execution.Input.id"},
                "End": True,
            },
            "Duplicate": {"Type": "Pass", "Result": "duplicate", "End": True},
        },
    }
    audit = {
        "StartAt": "Record",
        "States": {
            "Record": {
                "Type": "Task",
                "Resource": DDB_PUT,
                "Parameters": {
                    "TableName": "orders",
                    "Item": {"pk": {"S.$": "States.Format('audit-{}', $.id)"}},
                },
                "ResultSelector": {"status.$": "$.SdkHttpMetadata.HttpStatusCode"},
                "End": True,
            }
        },
    }
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="orders",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="out")["QueueUrl"]
        services = AwsServices(lambda name: boto3.client(name, region_name="us-east-1"))
        h = _world({"m": machine, "audit": audit}, services.call)
        first = h.start("m", {"id": "o-1", "queue": queue})
        h.pump()
        # The put, the send and the child's own put (startExecution.sync:2), read from moto.
        assert _view(h, first)["output"] == {"audited": {"status": 200}, "sent": "o-1"}
        got = dynamodb.get_item(TableName="orders", Key={"pk": {"S": "o-1"}})
        assert got["Item"] == {"pk": {"S": "o-1"}}
        audited = dynamodb.get_item(TableName="orders", Key={"pk": {"S": "audit-o-1"}})
        assert audited["Item"] == {"pk": {"S": "audit-o-1"}}
        body = sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"]
        assert json.loads(body) == {"id": "o-1"}
        again = h.start("m", {"id": "o-1", "queue": queue}, idempotency_key="second")
        h.pump()
        assert _view(h, again)["output"] == "duplicate"  # moto's error, Step Functions' name


# --------------------------------------------------------------- .waitForTaskToken

CALLBACK = {
    "StartAt": "Ask",
    "States": {
        "Ask": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {
                "FunctionName": "Asker",
                "Payload": {"token.$": "$$.Task.Token", "q.$": "$.q"},
            },
            "HeartbeatSeconds": 60,
            "TimeoutSeconds": 3600,
            "Catch": [
                {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "TimedOut"},
                {"ErrorEquals": ["Refused"], "ResultPath": "$.error", "Next": "Refused"},
            ],
            "End": True,
        },
        "TimedOut": {"Type": "Pass", "Result": "timed out", "End": True},
        "Refused": {"Type": "Pass", "End": True},
    },
}


class Asker:
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def __call__(self, ctx: AgentContext) -> Any:
        self.tokens.append(ctx.input["token"])
        assert ctx.task_token() == ctx.input["token"]  # the same token, from either side
        return "asked"


def test_wait_for_task_token_rests_until_the_callback_and_its_output_is_the_result() -> None:
    asker = Asker()
    h = _world({"m": CALLBACK}, agents={"Asker": asker})
    wf = h.start("m", {"q": "ok?"})
    handled = h.pump()
    assert [r.outcome for _, r in handled] == [Outcome.WAITING]
    unit = _unit(h, wf, "V#Ask#1")
    assert unit.status is StepStatus.WAITING
    assert _item(h, wf)["status"] == WorkflowStatus.RUNNING.value
    (token,) = asker.tokens
    assert token.startswith("st1.")  # a Shepherd task token: unguessable, one attempt's
    with pytest.raises(TaskTokenInvalid):
        h.callbacks.callback(token[:-2] + "xx", "success", output={})
    h.clock.advance(30)
    h.callbacks.callback(token, "heartbeat")
    with pytest.raises(HeartbeatTooSoon):  # at most one a second per token, as native ones
        h.callbacks.callback(token, "heartbeat")
    h.clock.advance(40)  # 70 s after the claim, 40 s after the heartbeat: still alive
    h.sweep()
    assert _unit(h, wf, "V#Ask#1").status is StepStatus.WAITING
    h.callbacks.callback(token, "success", output={"answer": "yes"})
    assert _item(h, wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert _view(h, wf)["output"] == {"answer": "yes"}  # the callback's output as it is
    with pytest.raises(TaskTokenStale):
        h.callbacks.callback(token, "success", output={"answer": "again"})


def test_a_callback_that_comes_before_the_function_returns_ends_the_task() -> None:
    h: Harness

    def answers_at_once(ctx: AgentContext) -> Any:
        h.callbacks.callback(ctx.input["token"], "success", output={"fast": True})
        return "asked"

    h = _world({"m": CALLBACK}, agents={"Asker": answers_at_once})
    wf = h.start("m", {"q": "ok?"})
    handled = h.pump()
    assert [r.outcome for _, r in handled] == [Outcome.SUCCEEDED]
    assert _view(h, wf)["output"] == {"fast": True}
    assert _unit(h, wf, "V#Ask#1").status is StepStatus.SUCCEEDED


def test_a_service_call_that_raises_fails_the_task_rather_than_the_message() -> None:
    def broken(resource: str, parameters: Any, key: str | None) -> Any:
        raise ConnectionError("endpoint unreachable")

    h = _world({"m": SEND}, broken)
    wf = h.start("m", {"order": 1})
    h.pump()
    item = _item(h, wf)
    assert (item["asl_error"], item["asl_cause"]) == (
        "States.TaskFailed",
        "ConnectionError: endpoint unreachable",
    )


def test_a_failure_callback_is_the_tasks_error_for_its_catch() -> None:
    asker = Asker()
    h = _world({"m": CALLBACK}, agents={"Asker": asker})
    wf = h.start("m", {"q": "ok?"})
    h.pump()
    h.callbacks.callback(asker.tokens[0], "failure", error="Refused", cause="no")
    assert _view(h, wf)["output"] == {"q": "ok?", "error": {"Error": "Refused", "Cause": "no"}}


def test_a_missed_heartbeat_times_the_wait_out() -> None:
    asker = Asker()
    h = _world({"m": CALLBACK}, agents={"Asker": asker})
    wf = h.start("m", {"q": "ok?"})
    h.pump()
    for _ in range(8):
        h.clock.advance(10)
        h.sweep()
    assert _item(h, wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert _view(h, wf)["output"] == "timed out"
    with pytest.raises(TaskTokenStale):
        h.callbacks.callback(asker.tokens[0], "success", output={})


def test_a_service_task_waits_for_its_token_too() -> None:
    machine = {
        "StartAt": "Send",
        "States": {
            "Send": {
                "Type": "Task",
                "Resource": SQS_SEND + ".waitForTaskToken",
                "Parameters": {
                    "QueueUrl": "https://sqs/q",
                    "MessageBody": {"token.$": "$$.Task.Token"},
                },
                "End": True,
            }
        },
    }
    calls = Calls()
    h = _world({"m": machine}, calls)
    wf = h.start("m", {})
    h.pump()
    assert _unit(h, wf, "V#Send#1").status is StepStatus.WAITING
    token = calls.seen[0][1]["MessageBody"]["token"]
    h.callbacks.callback(token, "success", output={"done": 1})
    assert _view(h, wf)["output"] == {"done": 1}


# --------------------------------------------------------------- states:startExecution

CHILD = {
    "StartAt": "Double",
    "States": {
        "Double": {"Type": "Task", "Resource": "Doubler", "End": True},
    },
}


def _parent(form: str, **extra: Any) -> dict[str, Any]:
    return {
        "StartAt": "Start",
        "States": {
            "Start": {
                "Type": "Task",
                "Resource": f"arn:aws:states:::states:startExecution{form}",
                "Parameters": {
                    "StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:child",
                    "Input": {"n.$": "$.n"},
                },
                **extra,
                "End": True,
            }
        },
    }


def _doubler(ctx: AgentContext) -> Any:
    if ctx.input["n"] < 0:
        raise ValueError("negative")
    return {"n": ctx.input["n"] * 2}


@pytest.mark.parametrize("form", [".sync:2", ".sync"])
def test_start_execution_sync_waits_for_the_child_and_gives_its_output(form: str) -> None:
    h = _world({"parent": _parent(form), "child": CHILD}, agents={"Doubler": _doubler})
    wf = h.start("parent", {"n": 4})
    h.pump()
    assert _item(h, wf)["status"] == WorkflowStatus.SUCCEEDED.value
    out = _view(h, wf)["output"]
    child_id = out["ExecutionArn"].rsplit(":", 1)[1]
    assert _item(h, child_id)["status"] == WorkflowStatus.SUCCEEDED.value
    assert out["Status"] == "SUCCEEDED" and out["Name"] == child_id
    if form == ".sync:2":
        assert (out["Input"], out["Output"]) == ({"n": 4}, {"n": 8})
    else:  # .sync gives them as JSON text
        assert (out["Input"], out["Output"]) == ('{"n":4}', '{"n":8}')
    # No look was needed (no sweep ran): the child's end ended the parent's unit in its write.


def test_a_failed_childs_error_fails_the_start_execution_task() -> None:
    parent = _parent(".sync:2", Catch=[{"ErrorEquals": ["ValueError"], "Next": "Failed"}])
    parent["States"]["Failed"] = {"Type": "Pass", "End": True}
    h = _world({"parent": parent, "child": CHILD}, agents={"Doubler": _doubler})
    wf = h.start("parent", {"n": -1})
    h.pump()
    out = _view(h, wf)["output"]
    assert out["Error"] == "ValueError"
    cause = json.loads(out["Cause"])
    assert cause["Status"] == "FAILED" and cause["Error"] == "ValueError"


def test_start_execution_plain_answers_at_once_and_the_child_runs_on() -> None:
    h = _world({"parent": _parent(""), "child": CHILD}, agents={"Doubler": _doubler})
    wf = h.start("parent", {"n": 1})
    h.pump()
    out = _view(h, wf)["output"]
    assert set(out) == {"ExecutionArn", "StartDate"}
    child_id = out["ExecutionArn"].rsplit(":", 1)[1]
    assert _view(h, child_id)["output"] == {"n": 2}


def test_start_execution_of_an_unknown_machine_fails_with_step_functions_name() -> None:
    h = _world({"parent": _parent(".sync:2")})
    wf = h.start("parent", {"n": 1})
    h.pump()
    assert _item(h, wf)["asl_error"] == "StepFunctions.StateMachineDoesNotExistException"


def test_start_execution_wait_for_task_token_hands_the_child_its_token() -> None:
    parent = _parent(".waitForTaskToken")
    parent["States"]["Start"]["Parameters"]["Input"] = {"token.$": "$$.Task.Token", "n": 1}
    child = {
        "StartAt": "Hold",
        "States": {"Hold": {"Type": "Task", "Resource": "Holder", "End": True}},
    }
    held: list[str] = []
    h = _world(
        {"parent": parent, "child": child},
        agents={"Holder": lambda ctx: held.append(ctx.input["token"]) or "held"},
    )
    wf = h.start("parent", {})
    h.pump()
    assert _item(h, wf)["status"] == WorkflowStatus.RUNNING.value
    h.callbacks.callback(held[0], "success", output={"from": "child"})
    assert _view(h, wf)["output"] == {"from": "child"}


def test_the_lambda_wiring_gives_the_engine_boto3_for_service_tasks(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deployed (and in the local stack, whose AWS_ENDPOINT_URL is its moto), the engine's
    service Tasks go through boto3's default clients, as the pool function's role."""
    from shepherd import wiring
    from shepherd.settings import Settings

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="orders",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        shepherd = wiring.Shepherd(Settings(table="shepherd", definitions_dir=tmp_path))
        tasks = shepherd.engine.scheduler.asl.integrations
        tasks.service(DDB_PUT, {"TableName": "orders", "Item": {"pk": {"S": "w"}}}, "k")
        got = dynamodb.get_item(TableName="orders", Key={"pk": {"S": "w"}})
        assert got["Item"] == {"pk": {"S": "w"}}


def test_start_execution_sync_of_a_native_definition_is_found_by_a_look() -> None:
    """A native child's end does not reach into its parent's unit (no ASL write ends it): the
    parent's look, due every 60 s while it waits, finds it ended and gives its output."""
    native = parse_definition(
        {
            "Name": "child",
            "Steps": [{"Name": "double", "Agent": "doubler", "Pool": "work", "TimeoutSeconds": 30}],
        },
        "child",
    )
    registry = AgentRegistry()
    registry.register("doubler", _doubler)
    h = memory_harness(
        definitions={"parent": _definition("parent", _parent(".sync:2")), "child": native},
        agents=registry,
    )
    wf = h.start("parent", {"n": 5})
    h.pump()
    assert _unit(h, wf, "V#Start#1").status is StepStatus.WAITING
    h.clock.advance(61)
    h.sweep()
    assert _item(h, wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert _view(h, wf)["output"]["Output"] == {"double": {"n": 10}}


# ------------------------------------------- .sync children stopped with their parent

HOLD = {  # a child that runs for an hour (a Wait: it rests, no agent)
    "StartAt": "Hold",
    "States": {"Hold": {"Type": "Wait", "Seconds": 3600, "End": True}},
}


def _waiting_child(h: Harness, wf: str) -> str:
    """The child the parent's `.sync` Task waits for, RUNNING."""
    h.pump()
    unit = h.store.get(visits_pk(wf), item_sk("step", "V#Start#1"))
    assert unit is not None and unit["status"] == StepStatus.WAITING.value
    child = str(unit["asl_child"])
    assert _item(h, child)["status"] == WorkflowStatus.RUNNING.value
    return child


@pytest.mark.parametrize("form", [".sync:2", ".sync"])
def test_a_cancelled_parent_stops_its_sync_child(form: str) -> None:
    """Step Functions stops a `.sync` child execution when its parent is stopped."""
    h = _world({"parent": _parent(form), "child": HOLD})
    wf = h.start("parent", {"n": 1})
    child = _waiting_child(h, wf)
    h.operations.cancel(wf)
    assert _item(h, wf)["status"] == WorkflowStatus.CANCELLED.value
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value
    h.clock.advance(3601)  # the child's Wait would have ended now: nothing moves it on
    h.sweep()
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value


def test_a_parent_past_its_timeout_seconds_stops_its_sync_child() -> None:
    parent = {**_parent(".sync:2"), "TimeoutSeconds": 60}
    h = _world({"parent": parent, "child": HOLD})
    wf = h.start("parent", {"n": 1})
    child = _waiting_child(h, wf)
    h.clock.advance(61)
    h.sweep()
    assert _item(h, wf)["asl_error"] == "States.Timeout"
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value


def test_a_sync_task_past_its_timeout_stops_the_child_it_waited_for() -> None:
    parent = _parent(
        ".sync:2", TimeoutSeconds=60, Catch=[{"ErrorEquals": ["States.ALL"], "Next": "Gave up"}]
    )
    parent["States"]["Gave up"] = {"Type": "Pass", "Result": "gave up", "End": True}
    h = _world({"parent": parent, "child": HOLD})
    wf = h.start("parent", {"n": 1})
    child = _waiting_child(h, wf)
    h.clock.advance(61)
    h.sweep()
    h.pump()
    assert _view(h, wf)["output"] == "gave up"
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value


def test_a_failed_parallel_stops_the_sync_child_of_its_other_branch() -> None:
    """A branch that fails ends its Parallel: the other branch is cancelled, and the child its
    `.sync` Task waits for is stopped with it."""
    start = _parent(".sync:2")["States"]["Start"]
    parent = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "Start", "States": {"Start": start}},
                    {
                        "StartAt": "Later",
                        "States": {
                            "Later": {"Type": "Wait", "Seconds": 10, "Next": "Broken"},
                            "Broken": {"Type": "Fail", "Error": "Broken"},
                        },
                    },
                ],
                "End": True,
            }
        },
    }
    h = _world({"parent": parent, "child": HOLD})
    wf = h.start("parent", {"n": 1})
    h.pump()
    cursor = h.scheduler.asl._cursor(_item(h, wf))
    assert cursor is not None and cursor.branches is not None
    branch = cursor.branches["children"][0]
    child = _waiting_child(h, branch)
    h.clock.advance(11)
    h.sweep()
    h.pump()
    assert _item(h, wf)["asl_error"] == "Broken"
    assert _item(h, branch)["status"] == WorkflowStatus.CANCELLED.value
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value


def test_a_cancelled_parent_stops_its_native_sync_child_which_unwinds() -> None:
    """A native child is stopped as an operator's cancel stops it: what it did is undone."""
    native = parse_definition(
        {
            "Name": "child",
            "Steps": [
                {
                    "Name": "reserve",
                    "Agent": "reserver",
                    "Pool": "work",
                    "TimeoutSeconds": 30,
                    "Compensation": {"Agent": "releaser", "Pool": "work", "TimeoutSeconds": 30},
                },
                {"Name": "hold", "DependsOn": ["reserve"], "Wait": {"Seconds": 3600}},
            ],
        },
        "child",
    )
    released: list[str] = []
    registry = AgentRegistry()
    registry.register("reserver", lambda ctx: "reserved")
    registry.register("releaser", lambda ctx: released.append("released"))
    h = memory_harness(
        definitions={"parent": _definition("parent", _parent(".sync:2")), "child": native},
        agents=registry,
    )
    wf = h.start("parent", {"n": 1})
    child = _waiting_child(h, wf)
    h.operations.cancel(wf)
    h.pump()
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value
    assert released == ["released"]


def test_a_parent_cancelled_while_its_sync_task_started_the_child_stops_it() -> None:
    """The cancel comes after the child started and before the unit names it (WAITING): the
    write that names it finds its parent ended and stops the child."""
    h = _world({"parent": _parent(".sync:2"), "child": HOLD})
    wf = h.start("parent", {"n": 1})
    asl = h.scheduler.asl
    record = asl.record

    def cancelled_first(claimed: Any, event: Any) -> str:
        h.operations.cancel(wf)
        return record(claimed, event)

    asl.record = cancelled_first  # type: ignore[method-assign]
    h.pump()
    child = str(_unit_item(h, wf)["asl_child"])
    assert _item(h, wf)["status"] == WorkflowStatus.CANCELLED.value
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value


def _unit_item(h: Harness, wf: str) -> dict[str, Any]:
    unit = h.store.get(visits_pk(wf), item_sk("step", "V#Start#1"))
    assert unit is not None
    return unit


def test_a_cancel_whose_follow_up_died_is_finished_by_the_supervisor_child_included() -> None:
    """The cancel's write took effect and its process died before it advanced anything: the
    supervisor's look ends the state machine CANCELLED and stops its `.sync` child."""
    h = _world({"parent": _parent(".sync:2"), "child": HOLD})
    wf = h.start("parent", {"n": 1})
    child = _waiting_child(h, wf)
    h.operations._follow_up = lambda action, advance: None  # type: ignore[method-assign]
    h.operations.cancel(wf)
    assert _item(h, wf)["status"] == WorkflowStatus.CANCELLING.value
    h.clock.advance(1)
    h.sweep()
    assert _item(h, wf)["status"] == WorkflowStatus.CANCELLED.value
    assert _item(h, child)["status"] == WorkflowStatus.CANCELLED.value
