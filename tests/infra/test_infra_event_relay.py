"""The event relay: the table's stream -> the relay function -> the bus, with failures
contained (partial batches, bisection, an on-failure queue, alarms) and filters that are the
core's own."""

from __future__ import annotations

import json

from infra_support import Synth, refers_to
from shepherd.changes import STREAM_FILTERS
from shepherd_infra import config


def _stream_mapping(shepherd: Synth) -> dict[str, object]:
    relay_id = shepherd.logical_id(shepherd.construct.relay.function)
    (mapping,) = [
        m["Properties"]
        for m in shepherd.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"]["Ref"] == relay_id
    ]
    return mapping


def test_the_table_streams_new_and_old_images_to_the_relay(shepherd: Synth) -> None:
    table_id = shepherd.logical_id(shepherd.construct.store.table)
    table = shepherd.props(table_id)
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    mapping = _stream_mapping(shepherd)
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"


def test_a_failing_record_is_contained(shepherd: Synth) -> None:
    mapping = _stream_mapping(shepherd)
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert 0 < int(mapping["MaximumRetryAttempts"]) <= 10_000
    # Records give up (to the failure queue) long before the stream's 24 h retention ends,
    # so a replay still finds them in the stream.
    assert int(mapping["MaximumRecordAgeInSeconds"]) <= 12 * 3600
    destination = mapping["DestinationConfig"]["OnFailure"]["Destination"]
    assert refers_to(destination, shepherd.logical_id(shepherd.construct.relay.failures))


def test_the_filters_are_the_cores(shepherd: Synth) -> None:
    mapping = _stream_mapping(shepherd)
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == [json.loads(json.dumps(p)) for p in STREAM_FILTERS]


def test_a_late_or_failing_relay_raises_alarms(shepherd: Synth) -> None:
    alarms = shepherd.of_type("AWS::CloudWatch::Alarm").values()
    relay_id = shepherd.logical_id(shepherd.construct.relay.function)
    (behind,) = [
        a["Properties"] for a in alarms if a["Properties"].get("MetricName") == "IteratorAge"
    ]
    assert refers_to(behind["Dimensions"], relay_id)
    assert behind["Statistic"] == "Maximum"
    assert behind["Threshold"] == config.RELAY_ITERATOR_AGE_ALARM.to_milliseconds()
    failures_id = shepherd.logical_id(shepherd.construct.relay.failures)
    (failed,) = [
        a["Properties"]
        for a in alarms
        if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
        and refers_to(a["Properties"]["Dimensions"], failures_id)
    ]
    assert failed["Threshold"] == 0 and "replay" in failed["AlarmDescription"]


def test_the_dashboard_graphs_the_relay(extended: Synth) -> None:
    ((_, dashboard),) = extended.of_type("AWS::CloudWatch::Dashboard").items()  # opt-in
    assert "IteratorAge" in json.dumps(dashboard["Properties"]["DashboardBody"])
