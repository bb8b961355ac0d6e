"""The definitions' schedules on EventBridge Scheduler (issue 25.4): a group per Shepherd, one
schedule per definition schedule, firing the events function with the event the handler parses,
through a role that may invoke that function only, with retries and an alarmed dead-letter
queue; cdk-nag stays clean."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, assertions
from infra_support import ONE_STEP, Synth, actions, agent_package, refers_to, render, resources
from shepherd import schedules
from shepherd.settings import DEFAULT_SCHEDULE_OWNER, ENV_SCHEDULE_OWNER
from shepherd_infra import AgentCode, Shepherd
from shepherd_infra.limits import _resource_error
from shepherd_infra.nag import add_checks
from shepherd_infra.schedules import MAX_RETRY_ATTEMPTS

OWNER = "arn:aws:iam::123456789012:role/Reports"
SCHEDULED = (
    ONE_STEP
    + """\
Schedules:
  - {Name: nightly, Expression: "cron(0 2 * * ? *)", Timezone: Europe/Paris, Input: {n: 1}}
  - {Name: often, Expression: "rate(5 minutes)"}
  - {Name: dormant, Expression: "cron(0 3 * * ? *)", Enabled: false}
"""
)


# Every synthesis of `_synth` in the run by its definition and props (issue 36: the schedules'
# and the start failures' tests ask for the same ones). One that raises is not kept.
_SYNTHESIZED: dict[tuple[str, str], tuple[Shepherd, Any]] = {}


def _synth(tmp_path: Path, definition: str = SCHEDULED, **props: Any) -> tuple[Shepherd, Any]:
    """A stack holding one Shepherd over `definition`, synthesized with the cdk-nag packs (an
    unacknowledged finding fails the synth); once per distinct definition and props in a run
    (keyed by their repr), each caller getting its own copy of the template."""
    key = (definition, repr(sorted(props.items())))
    if key not in _SYNTHESIZED:
        definitions = tmp_path / "flows"
        definitions.mkdir(parents=True)
        (definitions / "trip.yaml").write_text(definition)
        src = agent_package(tmp_path / "src", "trip_agents", definitions)
        app = App(outdir=str(tmp_path / "cdk.out"))
        stack = Stack(app, "Trips")
        shepherd = Shepherd(
            stack,
            "Shepherd",
            definitions_dir=definitions,
            agents=AgentCode(path=src, modules=["trip_agents"]),
            **props,
        )
        add_checks(app)
        app.synth()
        _SYNTHESIZED[key] = (shepherd, assertions.Template.from_stack(stack).to_json())
    shepherd, template = _SYNTHESIZED[key]
    return shepherd, copy.deepcopy(template)


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Shepherd, Any]:
    return _synth(tmp_path_factory.mktemp("scheduled"), schedule_owner=OWNER)


def _of_type(tpl: Any, cfn_type: str) -> dict[str, Any]:
    return {k: v for k, v in tpl["Resources"].items() if v["Type"] == cfn_type}


def _id(shepherd: Shepherd, construct: Any) -> str:
    node = getattr(construct.node, "default_child", None) or construct
    return str(Stack.of(shepherd).get_logical_id(node))


def _schedules(tpl: Any) -> dict[str, dict[str, Any]]:
    """The definitions' schedules (in a group: the supervisor's is in the default group)."""
    return {
        s["Properties"]["Name"]: s["Properties"]
        for s in _of_type(tpl, "AWS::Scheduler::Schedule").values()
        if "GroupName" in s["Properties"]
    }


def test_each_schedule_is_deployed_in_the_stacks_group(synthesized: tuple[Shepherd, Any]) -> None:
    shepherd, tpl = synthesized
    ((group_id, group),) = _of_type(tpl, "AWS::Scheduler::ScheduleGroup").items()
    assert group["Properties"]["Name"] == "Trips-Shepherd-Schedules"
    found = _schedules(tpl)
    assert set(found) == {"nightly", "often", "dormant"}
    nightly = found["nightly"]
    assert nightly["GroupName"] == {"Ref": group_id}
    assert nightly["ScheduleExpression"] == "cron(0 2 * * ? *)"
    assert nightly["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert found["often"]["ScheduleExpressionTimezone"] == "UTC"
    assert {n: s["State"] for n, s in found.items()} == {
        "nightly": "ENABLED",
        "often": "ENABLED",
        "dormant": "DISABLED",
    }
    events_fn = _id(shepherd, shepherd.events.function)
    dlq = _id(shepherd, shepherd.schedules.dlq)  # type: ignore[union-attr]
    for schedule in found.values():
        assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
        target = schedule["Target"]
        assert target["Arn"] == {"Fn::GetAtt": [events_fn, "Arn"]}
        assert target["RetryPolicy"] == {
            "MaximumRetryAttempts": MAX_RETRY_ATTEMPTS,
            "MaximumEventAgeInSeconds": 3600,
        }
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq, "Arn"]}}


def test_a_firing_is_the_event_the_events_handler_parses(
    synthesized: tuple[Shepherd, Any],
) -> None:
    """The target's input, as Scheduler fills in its context attributes, is a StartWorkflow
    event from `shepherd.schedule` whose idempotency key names the schedule and its time."""
    from aws_lambda_powertools.utilities.parser import parse
    from shepherd_handlers.events import StartWorkflowEvent

    _, tpl = synthesized
    text = render(_schedules(tpl)["nightly"]["Target"]["Input"])
    for placeholder, value in (
        (schedules.SCHEDULED_TIME, "2026-11-26T01:00:00Z"),
        (schedules.EXECUTION_ID, "d7a5c5f2-0d6b-4b1e-9d0a-1c2b3d4e5f60"),
        (schedules.SCHEDULE_ARN, "arn:aws:scheduler:us-east-1:123456789012:schedule/g/nightly"),
    ):
        assert placeholder in text
        text = text.replace(placeholder, value)
    event = json.loads(text)
    parsed = parse(event=event, model=StartWorkflowEvent)
    assert (parsed.source, parsed.detail_type) == (schedules.SOURCE, "StartWorkflow")
    assert parsed.detail.type == "trip" and parsed.detail.input == {"n": 1}
    assert parsed.detail.idempotency_key == "schedule:nightly:2026-11-26T01:00:00Z"
    assert event["account"] != "" and event["region"] != ""


def test_schedules_role_may_invoke_the_events_function_only(
    synthesized: tuple[Shepherd, Any],
) -> None:
    shepherd, tpl = synthesized
    role_ids = {s["Target"]["RoleArn"]["Fn::GetAtt"][0] for s in _schedules(tpl).values()}
    (role_id,) = role_ids
    role = tpl["Resources"][role_id]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert not role.get("ManagedPolicyArns") and not role.get("Policies")
    statements = [
        s
        for p in _of_type(tpl, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_action = {a: resources(s) for s in statements for a in actions(s)}
    assert set(by_action) == {"lambda:InvokeFunction", "sqs:SendMessage"}
    events_fn = _id(shepherd, shepherd.events.function)
    assert by_action["lambda:InvokeFunction"] == [{"Fn::GetAtt": [events_fn, "Arn"]}]
    dlq = _id(shepherd, shepherd.schedules.dlq)  # type: ignore[union-attr]
    assert by_action["sqs:SendMessage"] == [{"Fn::GetAtt": [dlq, "Arn"]}]


def test_the_dead_letter_queue_is_encrypted_ssl_only_and_alarmed(
    synthesized: tuple[Shepherd, Any],
) -> None:
    shepherd, tpl = synthesized
    dlq = _id(shepherd, shepherd.schedules.dlq)  # type: ignore[union-attr]
    assert tpl["Resources"][dlq]["Properties"]["SqsManagedSseEnabled"] is True
    (policy,) = [
        p["Properties"]
        for p in _of_type(tpl, "AWS::SQS::QueuePolicy").values()
        if {"Ref": dlq} in p["Properties"]["Queues"]
    ]
    (deny,) = policy["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    alarms = [
        a["Properties"]
        for a in _of_type(tpl, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
        and any(refers_to(d["Value"], dlq) for d in a["Properties"]["Dimensions"])
    ]
    (alarm,) = alarms
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_no_firing_before_the_roles_policies(synthesized: tuple[Shepherd, Any]) -> None:
    """Every schedule names the group; the group waits for the policies of the schedules'
    role and of the events function's role, so a first firing never meets AccessDenied."""
    shepherd, tpl = synthesized
    ((_, group),) = _of_type(tpl, "AWS::Scheduler::ScheduleGroup").items()
    fn_role = tpl["Resources"][_id(shepherd, shepherd.events.function)]["Properties"]["Role"]
    roles = {fn_role["Fn::GetAtt"][0], _id(shepherd, shepherd.schedules.role)}  # type: ignore[union-attr]
    policies = {
        logical_id
        for logical_id, p in _of_type(tpl, "AWS::IAM::Policy").items()
        if any({"Ref": r} in p["Properties"]["Roles"] for r in roles)
    }
    assert policies and policies <= set(group.get("DependsOn", []))


def test_the_schedule_owner_reaches_the_events_function(
    synthesized: tuple[Shepherd, Any], tmp_path: Path
) -> None:
    shepherd, tpl = synthesized
    env = tpl["Resources"][_id(shepherd, shepherd.events.function)]["Properties"]["Environment"]
    assert env["Variables"][ENV_SCHEDULE_OWNER] == OWNER
    # The default is a name no caller has; it is not written (the settings' default).
    _, plain = _synth(tmp_path / "plain")
    events_fns = [
        f["Properties"]["Environment"]["Variables"]
        for f in _of_type(plain, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "shepherd_handlers.events.handler"
    ]
    assert events_fns and all(ENV_SCHEDULE_OWNER not in v for v in events_fns)
    assert DEFAULT_SCHEDULE_OWNER == "shepherd:schedules"


def test_no_schedules_no_scheduler_resources(tmp_path: Path) -> None:
    """Definitions without schedules: the supervisor's schedule only."""
    shepherd, tpl = _synth(tmp_path, ONE_STEP)
    assert not _of_type(tpl, "AWS::Scheduler::ScheduleGroup")
    assert shepherd.schedules is None
    assert not _schedules(tpl)


def test_the_example_definitions_schedules_are_deployed(shepherd: Synth) -> None:
    """The repository's app: provision_environment's two schedules, in the stack's group."""
    assert shepherd.construct.schedules is not None
    shepherd.template.resource_count_is("AWS::Scheduler::ScheduleGroup", 1)
    deployed = _schedules(shepherd.tpl)
    assert {p["ScheduleExpression"] for p in deployed.values()} == {
        "cron(0 2 * * ? *)",
        "rate(1 hour)",
    }


def test_a_bad_expression_fails_the_synth_naming_the_schedule_and_field(tmp_path: Path) -> None:
    bad = SCHEDULED.replace("cron(0 2 * * ? *)", "cron(0 24 * * ? *)")
    with pytest.raises(Exception, match=r"Schedules\[0\] \(nightly\)\.Expression") as err:
        _synth(tmp_path, bad)
    assert "hours: '24' is not in 0-23" in str(err.value)


def test_the_schedule_source_is_not_an_event_owner(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="schedule_owner"):
        _synth(tmp_path, event_owners={schedules.SOURCE: OWNER})


def test_a_schedule_owner_is_a_principal_arn_or_a_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="schedule_owner"):
        _synth(tmp_path, schedule_owner="not an owner")


def test_the_resource_cap_message_counts_schedules() -> None:
    """Schedules count against the stack's 500 resources like anything else; the message
    says how many this Shepherd has."""
    from aws_cdk import aws_sqs

    stack = Stack(App(), "Big")
    for i in range(501):
        aws_sqs.CfnQueue(stack, f"Q{i}")
    message = _resource_error(stack, pools=3, schedules=40)
    assert message is not None and "each schedule 1 (it has 40" in message
