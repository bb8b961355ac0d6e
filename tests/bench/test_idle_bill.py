"""The idle bill is computed from the template as deployed (issue 35 point 4): what it reads
(the supervisor's schedule and shards, whether it can sleep, the polled queues, the enabled
schedules and their workflows, the monitoring) and how it prices them, checked by hand."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.definitions import load_directory
from shepherd.observability import HANDLER_SUPERVISOR
from shepherd.settings import ENV_SWEEP_TICKS, ENV_WATCH_SHARDS
from shepherd_bench import idle_bill
from shepherd_infra import config

DEFINITIONS = load_directory(config.DEFINITIONS_DIR)
PROVISION_STEPS = len(DEFINITIONS["provision_environment"].steps)


def _template(*, sleeps: bool, smoke: str = "ENABLED") -> dict[str, Any]:
    api_env = {ENV_SWEEP_TICKS: {"Ref": "Ticks"}} if sleeps else {}
    resources: dict[str, Any] = {
        "Sup": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": HANDLER_SUPERVISOR,
                "Environment": {
                    "Variables": {
                        ENV_WATCH_SHARDS: "4",
                        "SHEPHERD_SWEEP_INTERVAL_SECONDS": "5",
                        "SHEPHERD_SWEEP_WINDOW_SECONDS": "55",
                        ENV_SWEEP_TICKS: {"Ref": "Ticks"},
                    }
                },
                "LoggingConfig": {"SystemLogLevel": "WARN"},
            },
        },
        "Api": {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Handler": "api.handler", "Environment": {"Variables": api_env}},
        },
        "Ticks": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Q": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "TickMap": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Ticks", "Arn"]}},
        },
        "PoolMap": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Q", "Arn"]}},
        },
        "StreamMap": {  # a table's stream: polled for free, not counted
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]}},
        },
        "Run": {
            "Type": "AWS::Scheduler::Schedule",
            "Properties": {
                "ScheduleExpression": "rate(1 minute)",
                "Target": {"Arn": {"Fn::GetAtt": ["Sup", "Arn"]}},
            },
        },
        "Smoke": {
            "Type": "AWS::Scheduler::Schedule",
            "Properties": {
                "GroupName": {"Ref": "Group"},
                "State": smoke,
                "Description": "Start a provision_environment workflow (Shepherd schedule smoke)",
                "ScheduleExpression": "rate(1 hour)",
                "Target": {"Arn": {"Fn::GetAtt": ["Events", "Arn"]}},
            },
        },
        "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "Errors"}},
    }
    return {"Resources": resources}


def test_what_is_read_from_the_template() -> None:
    d = idle_bill.from_template(_template(sleeps=True), DEFINITIONS)
    assert (d.supervisor_runs, d.watch_shards, d.sweep_groups) == (43_800, 4, 1)
    assert d.sleeps and d.polled_queues == 2 and d.ticks_per_minute == 11
    (smoke,) = d.firings
    assert (smoke.workflow_type, smoke.per_month, smoke.steps) == (
        "provision_environment",
        730,
        PROVISION_STEPS,
    )
    assert d.monitoring is not None and d.monitoring.alarm_metrics == 1
    assert (
        idle_bill.from_template(_template(sleeps=True, smoke="DISABLED"), DEFINITIONS).firings == []
    )
    assert not idle_bill.from_template(_template(sleeps=False), DEFINITIONS).sleeps


def test_an_asleep_month_is_priced_item_by_item() -> None:
    """No schedule: every minute is asleep, each scheduled run a state read, four shard
    probes and a pool-state read; no tick, no sweep."""
    bill = idle_bill.monthly(
        idle_bill.from_template(_template(sleeps=True, smoke="DISABLED"), DEFINITIONS)
    )
    runs = 43_800
    assert idle_bill.invocations(bill) == runs
    assert bill["supervisor_tick_requests"]["units"] == 0
    assert bill["supervisor_awake_minutes_index_rru"]["units"] == 0
    assert bill["supervisor_state_and_pool_reads_rru"]["units"] == runs * (1 + 4 * 0.5 + 1)
    assert bill["supervisor_run_duration_gb_s"]["units"] == pytest.approx(
        runs * (6 * 8 + 20) / 1000 * 0.25
    )
    assert bill["supervisor_awake_duration_gb_s"]["units"] == 0
    assert bill["idle_event_source_polls"]["usd"] == pytest.approx(2 * 5 * 3 * runs * 0.40e-6)
    assert bill["cloudwatch_alarm_metrics"]["usd"] == pytest.approx(0.10)
    assert idle_bill.total(bill) == pytest.approx(
        runs * 1e-6  # Scheduler
        + runs * 0.2e-6  # invocations
        + runs * 0.068 * 0.25 * 0.0000133334  # duration
        + runs * 4 * 0.125e-6  # reads: 4 RRU a run
        + 2 * 5 * 3 * runs * 0.40e-6  # polling
        + 0.10  # one alarm metric
    )


def test_a_schedule_wakes_it_and_its_workflows_are_counted() -> None:
    asleep = idle_bill.monthly(
        idle_bill.from_template(_template(sleeps=True, smoke="DISABLED"), DEFINITIONS)
    )
    hourly = idle_bill.monthly(idle_bill.from_template(_template(sleeps=True), DEFINITIONS))
    awake = 730 * idle_bill.AWAKE_MINUTES_PER_FIRING
    assert idle_bill.invocations(hourly) == 43_800 + awake * 11
    assert hourly["supervisor_awake_minutes_index_rru"]["units"] == awake * 12 * 4 * 0.5
    assert hourly["supervisor_tick_requests"]["units"] == awake * (2 + 2 * 11)
    assert hourly["scheduled_firings"]["units"] == 730
    assert hourly["scheduled_workflows_steps"]["usd"] == pytest.approx(
        730 * PROVISION_STEPS * idle_bill.WORKFLOW_USD_PER_STEP_BOUND
    )
    assert idle_bill.total(hourly) > idle_bill.total(asleep)


def test_a_supervisor_that_cannot_sleep_ticks_all_month() -> None:
    bill = idle_bill.monthly(
        idle_bill.from_template(_template(sleeps=False, smoke="DISABLED"), DEFINITIONS)
    )
    assert idle_bill.invocations(bill) == 43_800 * 12  # 525,600, as before
    assert bill["supervisor_awake_minutes_index_rru"]["units"] == 43_800 * 12 * 4 * 0.5


def test_the_per_step_bound_holds_for_every_measured_scenario() -> None:
    """The bound the bill prices a scheduled workflow with is above every scenario the
    benchmark measured (docs/benchmarks.json); `make bench` re-checks it on every run."""
    import json

    results = json.loads((config.REPO_ROOT / "docs" / "benchmarks.json").read_text())
    assert idle_bill.check_bound(results["cost"]["scenarios"]) == []
    worst = {"scenario": "x", "worst": {"usd_per_million_steps": {"all_in": 12.5}}}
    assert idle_bill.check_bound([worst]) == ["x"]


def test_the_firings_of_a_month() -> None:
    assert idle_bill.firings_per_month("rate(10 minutes)", "UTC") == 4_380
    assert idle_bill.firings_per_month("rate(1 hour)", "UTC") == 730
    assert idle_bill.firings_per_month("cron(0 2 * * ? *)", "Europe/Paris") in (30, 31)
