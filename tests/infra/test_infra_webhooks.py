"""Webhooks without code: the `webhooks` context becomes, per webhook, an EventBridge
connection, an API destination and a rule on Shepherd's bus for the selected detail-types,
with a DLQ, a retry policy, an alarm and a role that may invoke that destination only; a bad
context fails the synth with a message naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from infra_support import HOOKS, SECRET, Synth, acknowledged, flatten, synthesize
from shepherd.observability import EVENT_SOURCE
from shepherd_infra import config
from shepherd_infra.webhooks import (
    MAX_EVENT_AGE,
    NAME_HEADER,
    RETRY_ATTEMPTS,
    WebhookConfig,
    parse_webhooks,
)


@pytest.fixture(scope="module")
def hooked(variant: Synth) -> Synth:
    """The app with two webhooks (context as the CLI passes it: JSON text; the session's
    `variant` synthesis, tests/infra/conftest.py); synthesizing runs cdk-nag, which fails on any
    unacknowledged finding."""
    return variant


def _one(synth: Synth, cfn_type: str, where: str) -> tuple[str, dict[str, Any]]:
    found = [(k, v) for k, v in synth.of_type(cfn_type).items() if where in k]
    assert len(found) == 1, (cfn_type, where, list(synth.of_type(cfn_type)))
    return found[0][0], dict(found[0][1]["Properties"])


def test_each_webhook_gets_a_connection_a_destination_and_a_rule_for_its_types(
    hooked: Synth,
) -> None:
    assert len(hooked.of_type("AWS::Events::Connection")) == 2
    assert len(hooked.of_type("AWS::Events::ApiDestination")) == 2
    bus = hooked.logical_id(hooked.construct.bus)
    for hook in HOOKS:
        name = str(hook["name"])
        connection, conn = _one(hooked, "AWS::Events::Connection", f"ShepherdWebhooks{name}")
        destination, dest = _one(hooked, "AWS::Events::ApiDestination", f"ShepherdWebhooks{name}")
        assert dest["InvocationEndpoint"] == hook["url"]
        assert dest["HttpMethod"] == "POST"
        assert dest["InvocationRateLimitPerSecond"] == hook.get("rate_per_second", 10)
        assert connection in flatten(dest["ConnectionArn"])
        key = conn["AuthParameters"]["ApiKeyAuthParameters"]
        assert conn["AuthorizationType"] == "API_KEY"
        if "secret_arn" in hook:
            assert key["ApiKeyName"] == hook["header"]
            # Resolved by CloudFormation at deploy time: the key never sits in the template.
            assert f"{{{{resolve:secretsmanager:{SECRET}:SecretString:::}}}}" in flatten(
                key["ApiKeyValue"]
            )
        else:
            assert key == {"ApiKeyName": NAME_HEADER, "ApiKeyValue": name}
        rule_id, rule = _one(hooked, "AWS::Events::Rule", f"ShepherdWebhooks{name}")
        assert bus in flatten(rule["EventBusName"])
        assert rule["EventPattern"] == {
            "source": [EVENT_SOURCE],
            "detail-type": hook["detail_types"],
        }
        (target,) = rule["Targets"]
        assert destination in flatten(target["Arn"])
        assert target["RetryPolicy"] == {
            "MaximumEventAgeInSeconds": MAX_EVENT_AGE.to_seconds(),
            "MaximumRetryAttempts": RETRY_ATTEMPTS,
        }
        dlq = _dlq_of(hooked, name)
        assert dlq in flatten(target["DeadLetterConfig"])
        _role_may_invoke_only(hooked, target["RoleArn"], destination)
        _dlq_accepts_only(hooked, dlq, rule_id)


def _dlq_of(synth: Synth, name: str) -> str:
    found = [
        k for k in synth.of_type("AWS::SQS::Queue") if k.startswith(f"ShepherdWebhooks{name}Dlq")
    ]
    assert len(found) == 1, found
    return found[0]


def _role_may_invoke_only(synth: Synth, role_arn: Any, destination: str) -> None:
    role = role_arn["Fn::GetAtt"][0]
    trust = synth.props(role)["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "events.amazonaws.com"}]
    statements = [
        st
        for policy in synth.of_type("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert len(statements) == 1, statements
    (st,) = statements
    assert st["Action"] == "events:InvokeApiDestination"
    assert st["Effect"] == "Allow"
    assert destination in flatten(st["Resource"]) and "*" not in flatten(st["Resource"])


def _dlq_accepts_only(synth: Synth, dlq: str, rule: str) -> None:
    """The DLQ's policy lets EventBridge send to it only on behalf of this rule."""
    policies = [
        p["Properties"]
        for p in synth.of_type("AWS::SQS::QueuePolicy").values()
        if {"Ref": dlq} in p["Properties"]["Queues"]
    ]
    (policy,) = policies
    sends = [
        s for s in policy["PolicyDocument"]["Statement"] if s.get("Action") == "sqs:SendMessage"
    ]
    (send,) = sends
    assert send["Principal"] == {"Service": "events.amazonaws.com"}
    assert rule in flatten(send["Condition"])


def test_a_webhook_s_dlq_alarms(hooked: Synth) -> None:
    alarms = hooked.of_type("AWS::CloudWatch::Alarm")
    for hook in HOOKS:
        dlq = _dlq_of(hooked, str(hook["name"]))
        (alarm,) = [
            a["Properties"] for k, a in alarms.items() if f"Webhook{hook['name']}Undelivered" in k
        ]
        assert dlq in flatten(alarm["Dimensions"])
        assert alarm["Threshold"] == 0


def test_without_webhooks_nothing_is_built(shepherd: Synth) -> None:
    assert not shepherd.of_type("AWS::Events::Connection")
    assert not shepherd.of_type("AWS::Events::ApiDestination")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"url": "http://crm.example.com/hook"}, "https:// URL"),
        ({"url": "https://user:pw@crm.example.com/"}, "must not carry credentials"),
        ({"detail_types": ["WorkflowDone"]}, "unknown detail-types \\['WorkflowDone'\\]"),
        ({"detail_types": []}, "at least 1 item"),
        ({"detail_types": ["WorkflowFailed", "WorkflowFailed"]}, "twice"),
        ({"header": "X-Api-Key"}, "header and secret_arn go together"),
        ({"header": "X-Api-Key", "secret_arn": "crm-key"}, "not a Secrets Manager secret ARN"),
        ({"header": "X Api Key", "secret_arn": SECRET}, "not an HTTP header name"),
        ({"name": "crm hooks"}, "String should match pattern"),
        ({"rate_per_second": 0}, "greater than or equal to 1"),
        ({"method": "PUT"}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_webhook_fails_with_a_message_naming_the_context(
    change: dict[str, Any], message: str
) -> None:
    hook = {**HOOKS[1], **change}
    with pytest.raises(ValueError, match=message) as caught:
        parse_webhooks(json.dumps([hook]))
    assert "context 'webhooks'" in str(caught.value)


def test_the_context_is_read_as_json_text_or_as_a_list() -> None:
    assert parse_webhooks(None) == [] and parse_webhooks("") == [] and parse_webhooks([]) == []
    from_text = parse_webhooks(json.dumps(HOOKS))
    assert from_text == parse_webhooks(HOOKS)
    assert from_text[1] == WebhookConfig(
        name="oncall", url="https://pager.example.com/in", detail_types=("WorkflowFailed",)
    )
    with pytest.raises(ValueError, match="names repeat: \\['crm'\\]"):
        parse_webhooks([HOOKS[0], {**HOOKS[1], "name": "CRM"}])
    with pytest.raises(ValueError, match="context 'webhooks' is invalid"):
        parse_webhooks("[{")


def test_a_bad_webhook_fails_the_synth(tmp_path: Path) -> None:
    bad = [{**HOOKS[1], "url": "http://pager.example.com/in"}]
    with pytest.raises(ValueError, match="https"):
        synthesize(tmp_path, context={config.CTX_WEBHOOKS: json.dumps(bad)})


def test_webhooks_pass_both_nag_packs_and_cfn_lint(hooked: Synth, tmp_path: Path) -> None:
    from cfnlint.api import lint

    report = json.loads((hooked.outdir / "validation-report.json").read_text(encoding="utf-8"))
    assert report["pluginReports"] == []
    # The only findings acknowledged on a webhook: its DLQ is the end of the line.
    rules = set(acknowledged(hooked.construct.webhooks))
    assert rules == {"AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"}
    path = tmp_path / "webhooks.template.json"
    path.write_text(json.dumps(hooked.tpl, indent=1), encoding="utf-8")
    errors = [
        m
        for m in lint(path.read_text(encoding="utf-8"), regions=["us-east-1"])
        if m.rule.id.startswith("E")
    ]
    assert errors == [], "\n".join(str(m) for m in errors)
