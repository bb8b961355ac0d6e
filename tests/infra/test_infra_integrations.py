"""Least privilege from the ASL definitions (issue 38 point 4): the integrations role holds
exactly what the state machines' Tasks name, a Task whose grant cannot be derived fails the
synth naming the file and the state, and every `*` grant is listed by the synth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, assertions
from infra_support import (
    EXTRA_ASL_FILE,
    EXTRA_ASL_FUNCTION,
    EXTRA_ASL_QUEUE_URL,
    Synth,
    actions,
    render,
    resources,
)
from rehearsal import PSEUDO
from shepherd.asl.workflow import INTEGRATIONS_POOL
from shepherd.settings import ENV_AGENT_MODULES
from shepherd_infra.application import build_app
from shepherd_infra.integrations import ENGINE_POLICY_RESERVE, IntegrationsRole


def _grants(synth: Synth, role_id: str, policy: str = "Integrations") -> set[tuple[str, str]]:
    """The (action, resource) pairs of one inline policy of a role."""
    out = set()
    (document,) = [
        p["PolicyDocument"]
        for p in synth.props(role_id).get("Policies", [])
        if p["PolicyName"] == policy
    ]
    for statement in document["Statement"]:
        assert statement["Effect"] == "Allow"
        assert set(statement) == {"Effect", "Action", "Resource"}, statement  # no condition
        for action in actions(statement):
            for resource in resources(statement):
                out.add((action, render(resource, synth)))
    return out


def test_the_role_holds_exactly_the_function_the_send_and_the_put(extended: Synth) -> None:
    role = extended.construct.integrations.role
    assert role is not None
    role_id = extended.logical_id(role)
    region, account = PSEUDO["AWS::Region"], PSEUDO["AWS::AccountId"]
    assert _grants(extended, role_id) == {
        ("lambda:InvokeFunction", EXTRA_ASL_FUNCTION),
        ("lambda:InvokeFunction", f"{EXTRA_ASL_FUNCTION}:*"),  # its versions and aliases
        ("sqs:SendMessage", "arn:aws:sqs:eu-west-1:123456789012:orders"),
        ("dynamodb:PutItem", f"arn:aws:dynamodb:{region}:{account}:table/Orders"),
    }
    assert EXTRA_ASL_QUEUE_URL.endswith("/123456789012/orders")
    assert [p.name for p in extended.construct.integrations.plans] == [EXTRA_ASL_FILE]
    props = extended.props(role_id)
    (trust,) = props["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "lambda.amazonaws.com"}
    # Its two inline policies and nothing attached: the definitions' grants apart from the
    # engine's own access, which the integration pool's function needs as every pool's does.
    assert sorted(p["PolicyName"] for p in props["Policies"]) == ["Integrations", "Shepherd"]
    attached = extended.of_type("AWS::IAM::Policy").values()
    assert not [p for p in attached if {"Ref": role_id} in p["Properties"]["Roles"]]
    engine = json.dumps([p for p in props["Policies"] if p["PolicyName"] == "Shepherd"])
    assert "CheckStock" not in engine and "table/Orders" not in engine
    # And no other role or policy is granted the definitions' resources.
    others = {**extended.of_type("AWS::IAM::Role"), **extended.of_type("AWS::IAM::Policy")}
    for logical_id in others:
        if logical_id != role_id:
            text = json.dumps(extended.resources[logical_id])
            assert "CheckStock" not in text and "table/Orders" not in text, logical_id


def test_the_integration_pool_runs_as_the_integrations_role_with_shepherds_code_alone(
    extended: Synth,
) -> None:
    """Issue 38: the pool whose built-in agent carries out the state machines' service Tasks
    is a pool as any other (its queue, its DLQ, its event source mapping), and its function
    runs as the derived role, with no user agent code (a Lambda function mapped to it is
    invoked as deployed, never served by an agent of its own code)."""
    role = extended.construct.integrations.role
    assert role is not None
    pool = extended.construct.pools[INTEGRATIONS_POOL]
    assert pool.function is not None and pool.mapping is not None
    function_id = extended.logical_id(pool.function)
    props = extended.props(function_id)
    assert props["Role"] == {"Fn::GetAtt": [extended.logical_id(role), "Arn"]}
    assert ENV_AGENT_MODULES not in extended.function_env(function_id)
    (mapping,) = [
        m
        for m in extended.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    queue_id = extended.logical_id(pool.queue)
    assert mapping["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    redrive = extended.props(queue_id)["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [extended.logical_id(pool.dlq), "Arn"]}
    # The engine's access beside the grants fits what the synth keeps for it (its size as
    # the template writes it, references unresolved, cdk-nag's measure of the grants aside).
    (engine,) = [
        p["PolicyDocument"]
        for p in extended.props(extended.logical_id(role))["Policies"]
        if p["PolicyName"] == "Shepherd"
    ]
    size = len(json.dumps(engine, separators=(",", ":")))
    print(f"the integration pool's engine policy: {size} characters")
    assert 1_000 < size <= ENGINE_POLICY_RESERVE, size
    # Only this function runs as the role.
    runs_as = [
        fid
        for fid, fn in extended.of_type("AWS::Lambda::Function").items()
        if fn["Properties"]["Role"] == {"Fn::GetAtt": [extended.logical_id(role), "Arn"]}
    ]
    assert runs_as == [function_id]


def test_an_app_without_asl_tasks_has_no_integrations_role(shepherd: Synth) -> None:
    assert shepherd.construct.integrations.role is None
    assert shepherd.construct.integrations.plans == {}
    assert not [r for r in shepherd.of_type("AWS::IAM::Role") if "Integrations" in r]


def _asl(directory: Path, name: str, states: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    first = next(iter(states))
    path = directory / name
    path.write_text(json.dumps({"StartAt": first, "States": states}))
    return path


def test_a_task_the_construct_cannot_grant_fails_the_synth_naming_the_file_and_state(
    tmp_path: Path,
) -> None:
    definitions = tmp_path / "flows"
    path = _asl(
        definitions,
        "billing.asl.json",
        {
            "Rest": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:apigateway:getRestApis",
                "Next": "Typo",
            },
            "Typo": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:sendMesage",
                "Parameters": {"QueueUrl": EXTRA_ASL_QUEUE_URL},
                "Next": "Child",
            },
            "Child": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync:2",
                "Parameters": {"StateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:Nope"},
                "End": True,
            },
        },
    )
    with pytest.raises(ValueError, match="cannot be granted what these Tasks need") as caught:
        build_app(definitions_dir=definitions, outdir=str(tmp_path / "out"))
    message = str(caught.value)
    assert f"{path}: States.Rest: " in message and "HTTP verbs" in message
    assert f"{path}: States.Typo: " in message and "sqs has no API SendMesage" in message
    assert f"{path}: States.Child: " in message and "'Nope', which is not a definition" in message


def test_every_star_grant_is_listed_by_the_synth(tmp_path: Path) -> None:
    """One construct in a bare stack (no full app synth): a dynamic queue and an unnamed
    aws-sdk resource each get `*` and a warning naming the file and the state."""
    definitions = tmp_path / "flows"
    _asl(
        definitions,
        "fanout.asl.json",
        {
            "Send": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage",
                "Parameters": {"QueueUrl.$": "$.queue", "MessageBody": "hi"},
                "Next": "List",
            },
            "List": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:ec2:describeInstances",
                "Next": "Emit",
            },
            "Emit": {
                "Type": "Task",
                "Resource": "arn:aws:states:::events:putEvents",
                "Parameters": {"Entries.$": "$.events"},
                "End": True,
            },
        },
    )
    stack = Stack(App(), "Probe")
    construct = IntegrationsRole(
        stack, "Integrations", definitions_dir=definitions, workflow_types={"fanout"}
    )
    assert construct.role is not None
    template = assertions.Template.from_stack(stack)
    ((_, role),) = template.find_resources("AWS::IAM::Role").items()
    (policy,) = role["Properties"]["Policies"]
    statements = policy["PolicyDocument"]["Statement"]
    every_bus = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":events:*:*:event-bus/*"]]}
    assert sorted(json.dumps([s["Action"], s["Resource"]]) for s in statements) == sorted(
        json.dumps(pair)
        for pair in (
            ["ec2:DescribeInstances", "*"],
            ["events:PutEvents", every_bus],
            ["sqs:SendMessage", "*"],
        )
    )
    warnings = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("shepherd:integration-wildcard")
    )
    texts = sorted(str(w.entry.data) for w in warnings)
    assert len(texts) == 3
    bus_text = "arn:<AWS::Partition>:events:*:*:event-bus/*"
    assert f"fanout.asl.json: States.Emit: events:PutEvents on {bus_text}" in texts[0]
    assert "given at run time" in texts[0]
    assert "fanout.asl.json: States.List: ec2:DescribeInstances on *" in texts[1]
    assert "no parameter names a resource" in texts[1]
    assert "fanout.asl.json: States.Send: sqs:SendMessage on *" in texts[2]
    assert "given at run time" in texts[2]


def test_more_grants_than_a_role_policy_holds_fail_the_synth(tmp_path: Path) -> None:
    """IAM caps a role's inline policies at 10,240 characters: 160 functions (320 ARNs) are over
    it, and the synth says so rather than the deploy."""
    definitions = tmp_path / "flows"
    states = {
        f"Call{i}": {
            "Type": "Task",
            "Resource": f"arn:aws:lambda:us-east-1:123456789012:function:Fn{i}",
            "Next": f"Call{i + 1}",
        }
        for i in range(160)
    }
    states["Call159"]["End"] = True
    del states["Call159"]["Next"]
    _asl(definitions, "wide.asl.json", states)
    stack = Stack(App(), "Probe")
    with pytest.raises(ValueError, match="over IAM's 10240 for a role's inline policies with"):
        IntegrationsRole(stack, "Integrations", definitions_dir=definitions, workflow_types=set())
    # 40 functions are well within it.
    few = tmp_path / "few"
    _asl(few, "narrow.asl.json", {k: states[k] for k in list(states)[120:]})
    construct = IntegrationsRole(
        Stack(App(), "Probe2"), "Integrations", definitions_dir=few, workflow_types=set()
    )
    assert construct.role is not None
