"""Alarms and dashboard: the metric names are the ones the handlers emit."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from infra_support import ALARM_EMAIL, Synth
from shepherd.observability import NAMESPACE, Metric
from shepherd_infra import config
from shepherd_infra.monitoring import POOLS_PER_ALARM, oldest_message_threshold_seconds


def _engine_dimensions(synth: Synth) -> list[dict[str, str]]:
    """The deployment's own `service`: what its functions publish under."""
    return [{"Name": "service", "Value": synth.construct.service}]


def _alarms(synth: Synth) -> list[dict[str, Any]]:
    return [a["Properties"] for a in synth.of_type("AWS::CloudWatch::Alarm").values()]


def _engine_alarm(synth: Synth, metric: Metric) -> dict[str, Any]:
    (alarm,) = [
        a
        for a in _alarms(synth)
        if a.get("MetricName") == metric.value and a.get("Namespace") == NAMESPACE
    ]
    assert alarm["Dimensions"] == _engine_dimensions(synth)
    return alarm


def _math_alarm(synth: Synth, metric_name: str) -> dict[str, Any]:
    (alarm,) = [
        a
        for a in _alarms(synth)
        if any(
            m.get("MetricStat", {}).get("Metric", {}).get("MetricName") == metric_name
            for m in a.get("Metrics", [])
        )
    ]
    return alarm


def _pool_alarms(synth: Synth, metric_name: str) -> dict[str, dict[str, Any]]:
    """Queue logical ID -> the alarm whose expression reads `metric_name` of that queue."""
    found: dict[str, dict[str, Any]] = {}
    for alarm in _alarms(synth):
        for query in alarm.get("Metrics", []):
            metric = query.get("MetricStat", {}).get("Metric", {})
            if metric.get("MetricName") == metric_name:
                ((dimension,),) = [metric["Dimensions"]]
                queue_id = dimension["Value"]["Fn::GetAtt"][0]
                assert queue_id not in found, f"{queue_id} is watched twice"
                found[queue_id] = alarm
    return found


def _breaches_on_any_one(alarm: dict[str, Any]) -> None:
    """The expression is the largest of its queues' values (missing data as 0): one queue
    over the threshold is enough."""
    (expression,) = [m for m in alarm["Metrics"] if "Expression" in m]
    ids = sorted(m["Id"] for m in alarm["Metrics"] if "MetricStat" in m)
    assert expression["Expression"] == f"MAX(FILL([{', '.join(ids)}], 0))", expression
    assert len(ids) <= POOLS_PER_ALARM
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            assert query["MetricStat"]["Stat"] == "Maximum"
            assert query["ReturnData"] is False


def test_dlq_alarm_per_pool(shepherd: Synth) -> None:
    watched = _pool_alarms(shepherd, "ApproximateNumberOfMessagesVisible")
    for pool in shepherd.construct.pools.values():
        alarm = watched[shepherd.logical_id(pool.dlq)]
        _breaches_on_any_one(alarm)
        assert alarm["Threshold"] == 0
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert pool.pool.name in alarm["AlarmDescription"]
    assert not {shepherd.logical_id(p.queue) for p in shepherd.construct.pools.values()} & set(
        watched
    )


def test_pool_alarms_do_not_grow_one_by_one_with_the_pools(shepherd: Synth) -> None:
    """Two alarm resources per pool would be 100 at 50 pools: a few pools share one."""
    pools = len(shepherd.construct.pools)
    dead = {id(a) for a in _pool_alarms(shepherd, "ApproximateNumberOfMessagesVisible").values()}
    backlog = {id(a) for a in _pool_alarms(shepherd, "ApproximateAgeOfOldestMessage").values()}
    assert len(dead) == -(-pools // POOLS_PER_ALARM)
    assert len(backlog) < pools


def test_a_failed_supervisor_look_raises_an_alarm(shepherd: Synth) -> None:
    alarm = _engine_alarm(shepherd, Metric.LOOK_FAILURES)
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_supervisor_silence_alarm(shepherd: Synth) -> None:
    """On the supervisor function's own Lambda metrics (free), not a custom metric ($0.30 a
    month): a minute without an invocation that ended without an error is a silent minute."""
    alarm = _math_alarm(shepherd, "Invocations")
    supervisor = shepherd.logical_id(shepherd.construct.supervisor.function)
    stats = {
        m["MetricStat"]["Metric"]["MetricName"]: m for m in alarm["Metrics"] if "MetricStat" in m
    }
    assert set(stats) == {"Invocations", "Errors"}
    for query in stats.values():
        metric = query["MetricStat"]["Metric"]
        assert metric["Namespace"] == "AWS/Lambda"
        ((dimension,),) = [metric["Dimensions"]]
        assert dimension["Name"] == "FunctionName"
        assert dimension["Value"] == {"Ref": supervisor}
        assert query["MetricStat"]["Stat"] == "Sum"
        assert query["MetricStat"]["Period"] == 60
        assert query["ReturnData"] is False
    (expression,) = [m for m in alarm["Metrics"] if "Expression" in m]
    runs, errors = (stats[name]["Id"] for name in ("Invocations", "Errors"))
    assert expression["Expression"] == f"FILL({runs}, 0) - FILL({errors}, 0)"
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "LessThanThreshold"
    assert alarm["EvaluationPeriods"] == 3
    assert alarm["DatapointsToAlarm"] == 3
    assert alarm["TreatMissingData"] == "breaching"


def test_compensation_failed_alarm(shepherd: Synth) -> None:
    alarm = _engine_alarm(shepherd, Metric.COMPENSATIONS_FAILED)
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_a_step_whose_pool_lacks_its_agent_raises_an_alarm(shepherd: Synth) -> None:
    alarm = _engine_alarm(shepherd, Metric.AGENTS_NOT_FOUND)
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert "dropped an agent module" in alarm["AlarmDescription"]


def test_a_workflow_paused_on_a_failure_raises_an_alarm(shepherd: Synth) -> None:
    alarm = _engine_alarm(shepherd, Metric.PAUSED_ON_FAILURE)
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert "resumes" in alarm["AlarmDescription"]


def test_no_alarm_pages_failed_workflows_a_second_time(shepherd: Synth) -> None:
    """Every FAILED workflow is paged by CompensationFailed or LookFailures
    (tests/unit/test_failed_is_alarmed.py): no rate alarm reads WorkflowsFailed, which cost two
    alarm metrics ($0.20 a month idle) to page the same workflows again."""
    read = json.dumps(_alarms(shepherd))
    assert Metric.WORKFLOWS_FAILED.value not in read
    assert Metric.COMPENSATIONS_FAILED.value in read and Metric.LOOK_FAILURES.value in read


def test_a_designed_failure_pages_nobody(extended: Synth) -> None:
    """A state machine's Fail state is FAILED with `failure: "definition"`, counted as
    WorkflowsFailedByDefinition (issue 42.3): the dashboard graphs it, no alarm reads it."""
    metric = Metric.WORKFLOWS_FAILED_BY_DEFINITION.value
    assert metric not in json.dumps(_alarms(extended))
    ((_, dashboard),) = extended.of_type("AWS::CloudWatch::Dashboard").items()
    assert metric in json.dumps(dashboard["Properties"]["DashboardBody"])


def test_oldest_message_alarm_per_pool(shepherd: Synth) -> None:
    watched = _pool_alarms(shepherd, "ApproximateAgeOfOldestMessage")
    for pool in shepherd.construct.pools.values():
        alarm = watched[shepherd.logical_id(pool.queue)]
        _breaches_on_any_one(alarm)
        expected = oldest_message_threshold_seconds(
            pool.pool.visibility_timeout_seconds, pool.pool.function_timeout_seconds
        )
        assert alarm["Threshold"] == expected  # pools share an alarm only with the same limit
        assert pool.pool.name in alarm["AlarmDescription"]
        # Longer than one redelivery after a crash, never shorter than the floor.
        assert expected > pool.pool.visibility_timeout_seconds
        assert expected >= config.OLDEST_MESSAGE_FLOOR_SECONDS


def test_dynamodb_throttling_alarm(shepherd: Synth) -> None:
    """One metric (the engine's own count of DynamoDB's "slow down" answers, which the
    functions publish only when something was throttled), not the table's and each index's:
    $0.10 a month idle instead of $0.80, and the same throttles (an index that cannot keep up
    throttles the base write the engine made)."""
    (alarm,) = [
        a
        for a in _alarms(shepherd)
        if a.get("MetricName") == Metric.THROTTLES.value and a.get("Namespace") == NAMESPACE
    ]
    assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
        {"Name": "Service", "Value": "dynamodb"},
        *_engine_dimensions(shepherd),
    ]
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert "Metrics" not in alarm  # a single metric: one alarm metric's price
    for other in _alarms(shepherd):
        for query in other.get("Metrics", []):
            name = query.get("MetricStat", {}).get("Metric", {}).get("MetricName")
            assert name not in {"ReadThrottleEvents", "WriteThrottleEvents"}


def test_alarms_notify_the_encrypted_topic(shepherd: Synth) -> None:
    ((topic_id, topic),) = shepherd.of_type("AWS::SNS::Topic").items()
    assert "KmsMasterKeyId" in topic["Properties"]
    ((_, key),) = shepherd.of_type("AWS::KMS::Key").items()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert "cloudwatch.amazonaws.com" in json.dumps(key["Properties"]["KeyPolicy"])
    shepherd.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": ALARM_EMAIL}
    )
    alarms = _alarms(shepherd)
    pool_alarms = {
        id(a)
        for name in ("ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage")
        for a in _pool_alarms(shepherd, name).values()
    }
    # + AgentNotFound, SupervisorBehind, StartsFailed; + SchedulesUndelivered when a
    # definition has schedules; - WorkflowFailureRate (issue 35's idle bill: FAILED workflows
    # are paged by CompensationFailed and LookFailures)
    schedules = 0 if shepherd.construct.schedules is None else 1
    assert len(alarms) == 10 + len(pool_alarms) + schedules
    for alarm in alarms:
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


def test_no_topic_without_an_email(extended: Synth) -> None:
    extended.template.resource_count_is("AWS::SNS::Topic", 0)
    for alarm in _alarms(extended):
        assert "AlarmActions" not in alarm


def test_the_dashboard_is_opt_in(shepherd: Synth) -> None:
    """$3 a month at list price, more than the rest of an idle stack (docs/benchmarks.md)."""
    shepherd.template.resource_count_is("AWS::CloudWatch::Dashboard", 0)
    assert shepherd.construct.monitoring.dashboard is None


def test_dashboard_graphs_the_engine_and_the_services(extended: Synth) -> None:
    shepherd = extended  # -c dashboard=true
    ((_, dashboard),) = shepherd.of_type("AWS::CloudWatch::Dashboard").items()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in Metric:
        # PoolCircuitOpen has a Pool dimension: one search graphs every pool's (with a breaker).
        searched = f'MetricName=\\\\\\"{metric.value}\\\\\\"'
        assert f'\\"{metric.value}\\"' in body or searched in body, metric
    assert f'\\"{NAMESPACE}\\"' in body
    assert f'\\"service\\",\\"{shepherd.construct.service}\\"' in body
    for stat in ("p50", "p99"):
        assert f'\\"stat\\":\\"{stat}\\"' in body
    for name in (
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "ReadThrottleEvents",
        "WriteThrottleEvents",
        "ConditionalCheckFailedRequests",
        "4XXError",
        "5XXError",
        "Latency",
    ):
        assert name in body, name
    for pool in shepherd.construct.pools.values():
        assert shepherd.logical_id(pool.queue) in body
        assert shepherd.logical_id(pool.dlq) in body


def _alarm_source_conditions(statement: dict[str, Any]) -> None:
    """CloudWatch acts for alarms of this account and region only (confused deputy)."""
    condition = statement["Condition"]
    assert condition["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    arn = json.dumps(condition["ArnLike"]["aws:SourceArn"])
    for part in ("AWS::Partition", ":cloudwatch:", "AWS::Region", "AWS::AccountId", ":alarm:*"):
        assert part in arn, (part, arn)


def test_every_alarm_can_publish_to_its_topic(shepherd: Synth) -> None:
    """alarm -> topic -> topic policy and key policy: CloudWatch may publish, and only for this
    account's alarms. (With enforce_ssl alone the topic policy held a single Deny.)"""
    policies = shepherd.of_type("AWS::SNS::TopicPolicy").values()
    keys = shepherd.of_type("AWS::KMS::Key")
    alarms = _alarms(shepherd)
    assert alarms
    for alarm in alarms:
        (action,) = alarm["AlarmActions"]
        topic_id = action["Ref"]
        topic = shepherd.resources[topic_id]["Properties"]
        (policy,) = [p for p in policies if {"Ref": topic_id} in p["Properties"]["Topics"]]
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        (publish,) = [
            s
            for s in statements
            if s["Effect"] == "Allow"
            and s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
        ]
        assert publish["Action"] == "sns:Publish"
        assert publish["Resource"] == {"Ref": topic_id}
        _alarm_source_conditions(publish)
        # The only Deny is the one for requests without TLS, which CloudWatch never sends.
        for deny in [s for s in statements if s["Effect"] == "Deny"]:
            assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
        key_statements = keys[key_id]["Properties"]["KeyPolicy"]["Statement"]
        (use,) = [
            s
            for s in key_statements
            if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
        ]
        assert set(use["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
        _alarm_source_conditions(use)


def test_the_alarm_key_goes_with_the_stack(shepherd: Synth) -> None:
    """Destroying the stack schedules the key's deletion (KMS waits 7 days at least) rather
    than leaving a key that is paid for every month and protects nothing."""
    ((_, key),) = shepherd.of_type("AWS::KMS::Key").items()
    assert key["DeletionPolicy"] == "Delete"
    assert key["UpdateReplacePolicy"] == "Delete"
    assert key["Properties"]["PendingWindowInDays"] == 7


def _runbook_rows(repo_root: Path) -> list[re.Pattern[str]]:
    """The README runbook's alarm names as patterns (`…` any run, `<pool>` a pool's name)."""
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    table = text.split("### Runbook: when an alarm fires", 1)[1].split("\n\n#", 1)[0]
    patterns = []
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first.split("(")[0]):
            regex = re.escape(name).replace("…", ".*").replace(re.escape("<pool>"), ".+")
            patterns.append(re.compile(regex))
    return patterns


def test_every_alarm_has_a_runbook_row(shepherd: Synth, extended: Synth, repo_root: Path) -> None:
    """Issue 35.1: the README's runbook lacked `SchedulesUndelivered` and
    `PoolCircuitOpen-<pool>`; every alarm either app makes is now there."""
    rows = _runbook_rows(repo_root)
    for name in ("SchedulesUndelivered", "PoolCircuitOpen-payments"):
        assert any(p.fullmatch(name) for p in rows), name
    for synth in (shepherd, extended):
        monitoring = synth.construct.monitoring
        for alarm in monitoring.alarms:
            name = alarm.node.id
            assert any(p.fullmatch(name) for p in rows), f"no runbook row for {name}"
