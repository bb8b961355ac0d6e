"""No lost starts (issue 35.3): a StartWorkflow event or a schedule's firing that could not
start its workflow lands in the start failures' queue (encrypted, kept 14 days), from the
events function's on-failure destination and the start rule's DLQ alike; an alarm says so; the
events function may only send to it; scheduled workflows belong to someone who sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra_support import Synth, actions, function_roles, refers_to, resources
from shepherd.settings import ENV_SCHEDULE_OWNER
from shepherd_infra.events import ASYNC_RETRY_ATTEMPTS
from test_infra_schedules import OWNER, _synth

OPS = "arn:aws:iam::123456789012:role/Ops"


def _start_failures(shepherd: Synth) -> str:
    (queue,) = [k for k in shepherd.of_type("AWS::SQS::Queue") if "EventsStartFailures" in k]
    return queue


def test_the_start_failures_queue_is_encrypted_and_keeps_messages_14_days(
    shepherd: Synth,
) -> None:
    queue = _start_failures(shepherd)
    props = shepherd.resources[queue]["Properties"]
    assert props["SqsManagedSseEnabled"] is True
    assert props["MessageRetentionPeriod"] == 14 * 24 * 3600
    (policy,) = [
        p
        for p in shepherd.of_type("AWS::SQS::QueuePolicy").values()
        if refers_to(p["Properties"]["Queues"], queue)
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    # EventBridge may send to it for the start rule only (the confused deputy).
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert actions(allow) == ["sqs:SendMessage"]
    assert "StartWorkflowRule" in json.dumps(allow["Condition"]["ArnEquals"]["aws:SourceArn"])


def test_failed_invocations_and_undeliverable_events_go_to_it(shepherd: Synth) -> None:
    queue = _start_failures(shepherd)
    events_fn = function_roles(shepherd.tpl)["events"]
    (config,) = [
        c["Properties"]
        for c in shepherd.of_type("AWS::Lambda::EventInvokeConfig").values()
        if refers_to(c["Properties"]["FunctionName"], events_fn)
    ]
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert config["MaximumRetryAttempts"] == ASYNC_RETRY_ATTEMPTS
    (rule,) = [r for k, r in shepherd.of_type("AWS::Events::Rule").items() if "StartWorkflow" in k]
    (target,) = rule["Properties"]["Targets"]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue, "Arn"]}}
    # The schedules' targets keep their own DLQ (alarmed as SchedulesUndelivered); the
    # supervisor's tick has none on purpose (the next tick does the same).
    starting = [
        s["Properties"]["Target"]
        for s in shepherd.of_type("AWS::Scheduler::Schedule").values()
        if refers_to(s["Properties"]["Target"]["Arn"], events_fn)
    ]
    assert starting and all("DeadLetterConfig" in t for t in starting)


def test_an_alarm_fires_on_any_start_that_could_not_be_made(shepherd: Synth) -> None:
    queue = _start_failures(shepherd)
    (alarm,) = [
        a["Properties"]
        for k, a in shepherd.of_type("AWS::CloudWatch::Alarm").items()
        if "StartsFailed" in k
    ]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
    ]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["AlarmActions"]  # the alarm email's topic
    assert "shepherd replay-starts" in alarm["AlarmDescription"]


def test_only_the_events_function_sends_to_it_and_only_sends(shepherd: Synth) -> None:
    queue = _start_failures(shepherd)
    fn = function_roles(shepherd.tpl)["events"]
    events_role = shepherd.resources[fn]["Properties"]["Role"]["Fn::GetAtt"][0]
    grants: list[tuple[str, list[str]]] = []  # (role, actions) of every grant on the queue
    for logical_id, role in shepherd.of_type("AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for s in policy["PolicyDocument"]["Statement"]:
                if any(refers_to(r, queue) for r in resources(s)):
                    grants.append((logical_id, actions(s)))
    for policy in shepherd.of_type("AWS::IAM::Policy").values():
        for s in policy["Properties"]["PolicyDocument"]["Statement"]:
            if any(refers_to(r, queue) for r in resources(s)):
                for role in policy["Properties"]["Roles"]:
                    grants.append((role["Ref"], actions(s)))
    assert grants == [(events_role, ["sqs:SendMessage"])]


def test_the_stack_outputs_what_replay_starts_needs(shepherd: Synth) -> None:
    outputs = shepherd.tpl["Outputs"]
    assert any("StartFailuresQueueUrl" in k for k in outputs)
    assert any("EventsFunctionName" in k for k in outputs)


def _schedule_owner(template: Any) -> str | None:
    for fn in template["Resources"].values():
        if fn["Type"] == "AWS::Lambda::Function":
            env = fn["Properties"].get("Environment", {}).get("Variables", {})
            if ENV_SCHEDULE_OWNER in env:
                return str(env[ENV_SCHEDULE_OWNER])
    return None


def test_scheduled_workflows_belong_to_the_first_operator_by_default(tmp_path: Path) -> None:
    """Before, they belonged to `shepherd:schedules`, whom no caller can be: nobody listed
    them. Named, `schedule_owner` still wins."""
    _, template = _synth(tmp_path / "ops", operators=[OPS, "arn:aws:iam::123456789012:role/B"])
    assert _schedule_owner(template) == OPS


def test_a_synth_says_when_nobody_can_see_the_scheduled_workflows(tmp_path: Path) -> None:
    from aws_cdk import Stack
    from aws_cdk.assertions import Annotations, Match

    def warned(shepherd: Any) -> bool:
        found = Annotations.from_stack(Stack.of(shepherd)).find_warning(
            "*", Match.string_like_regexp(".*nobody lists or reads them.*")
        )
        return bool(found)

    nobody, template = _synth(tmp_path / "nobody")
    assert _schedule_owner(template) is None  # the default, `shepherd:schedules`
    assert warned(nobody)
    # (the schedules' tests' app: test_infra_schedules.py's `synthesized`, one synthesis)
    named, template = _synth(tmp_path / "named", schedule_owner=OWNER)
    assert _schedule_owner(template) == OWNER
    assert not warned(named)
