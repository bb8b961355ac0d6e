"""The idle stack's monitoring bill (docs/benchmarks.md, Fixed monthly cost): read from a
template, priced item by item, checked against hand-computed cases."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.observability import HANDLER_SUPERVISOR, Metric
from shepherd_bench import idle
from shepherd_bench.cost import fixed_monthly


def _template(*, traced: bool, system_logs: str, dashboard: bool, key: bool) -> dict[str, Any]:
    supervisor: dict[str, Any] = {
        "Handler": HANDLER_SUPERVISOR,
        "LoggingConfig": {"SystemLogLevel": system_logs},
    }
    if traced:
        supervisor["TracingConfig"] = {"Mode": "Active"}
    resources: dict[str, Any] = {
        "Supervisor": {"Type": "AWS::Lambda::Function", "Properties": supervisor},
        "Single": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "Errors"}},
        "Math": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "Metrics": [
                    {"Id": "d0", "MetricStat": {}},
                    {"Id": "d1", "MetricStat": {}},
                    {"Id": "d2", "MetricStat": {}},
                    {"Id": "e", "Expression": "MAX(FILL([d0, d1, d2], 0))"},
                ]
            },
        },
    }
    if dashboard:
        resources["Board"] = {"Type": "AWS::CloudWatch::Dashboard", "Properties": {}}
    if key:
        resources["Key"] = {"Type": "AWS::KMS::Key", "Properties": {}}
    return {"Resources": resources}


def test_alarm_metrics_count_every_metric_a_math_alarm_reads() -> None:
    monitoring = idle.from_template(
        _template(traced=False, system_logs="WARN", dashboard=False, key=False), emf_bytes=200
    )
    assert monitoring.alarm_metrics == 1 + 3  # the expression itself is not billed
    assert not monitoring.supervisor_traced and not monitoring.supervisor_platform_logs


def test_an_idle_month_is_priced_item_by_item() -> None:
    quiet = idle.from_template(
        _template(traced=False, system_logs="WARN", dashboard=False, key=False), emf_bytes=200
    )
    loud = idle.from_template(
        _template(traced=True, system_logs="INFO", dashboard=True, key=True), emf_bytes=200
    )
    invocations, runs = 525_600, 43_800
    q, lo = idle.monthly(quiet, invocations, runs), idle.monthly(loud, invocations, runs)
    assert q["cloudwatch_alarm_metrics"]["usd"] == pytest.approx(4 * 0.10)
    assert q["cloudwatch_custom_metrics_idle"]["usd"] == 0  # an idle supervisor publishes none
    assert q["cloudwatch_logs_supervisor_gb"]["usd"] == pytest.approx(runs * 200 / 1024**3 * 0.50)
    assert q["xray_traces_supervisor"]["usd"] == q["cloudwatch_dashboards"]["usd"] == 0
    assert q["kms_alarm_topic_keys"]["usd"] == 0
    assert lo["xray_traces_supervisor"]["usd"] == pytest.approx(invocations * 5 / 1e6)  # 2.63
    assert lo["cloudwatch_dashboards"]["usd"] == pytest.approx(3.00)
    assert lo["kms_alarm_topic_keys"]["usd"] == pytest.approx(1.00)
    assert lo["cloudwatch_logs_supervisor_gb"]["usd"] == pytest.approx(
        (runs * 200 + invocations * idle.PLATFORM_LOG_BYTES) / 1024**3 * 0.50
    )


def test_the_fixed_cost_counts_monitoring_when_given() -> None:
    quiet = idle.from_template(
        _template(traced=False, system_logs="WARN", dashboard=False, key=False), emf_bytes=200
    )
    without = fixed_monthly(6)
    with_monitoring = fixed_monthly(6, monitoring=quiet)
    extra = {k: v for k, v in with_monitoring.items() if k not in without}
    assert set(extra) == set(idle.monthly(quiet, 1, 1))
    total = sum(v["usd"] for v in with_monitoring.values())
    # four alarm metrics; no custom metric (an idle supervisor publishes none)
    assert total == pytest.approx(sum(v["usd"] for v in without.values()) + 0.40, abs=0.01)


def test_the_supervisors_idle_record_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    assert idle.emf_record_bytes("Shepherd-Shepherd") == 0  # no idle metric: no record
    monkeypatch.setattr(idle, "IDLE_CUSTOM_METRICS", (Metric.SWEEP_DUE,))
    size = idle.emf_record_bytes("Shepherd-Shepherd")
    assert 100 < size < 1000  # one EMF JSON record with one metric, as Powertools prints it


def test_a_refresh_replaces_only_its_own_parts_of_the_page() -> None:
    """`--refresh-fixed-cost` and `--refresh-capacity` keep every other part of
    benchmarks.md, hand-merged sections included, and insert a section it lacks."""
    from shepherd_bench.__main__ import splice

    old = (
        "# B\n\n| target | m | v |\n|---|---|---|\n| idle stack <= $3 a month | $9 | no |\n\n"
        "### Prices\n\nold prices\n\n### Results\n\nkept results\n\n"
        "### Fixed monthly cost\n\nold fixed\n\n### Large payloads\n\nhand-merged\n\n"
        "## Supervisor scaling\n\nkept scaling\n"
    )
    new = (
        "# B\n\n| target | m | v |\n|---|---|---|\n| idle stack <= $3 a month | $5 | no |\n"
        "| one stack holds at least 50 agent pools | 52 | yes |\n\n"
        "### Prices\n\nnew prices\n\n### Results\n\nregenerated results\n\n"
        "### Fixed monthly cost\n\nnew fixed\n\n## What one stack holds\n\n52 pools\n\n"
        "## Supervisor scaling\n\nregenerated scaling\n"
    )
    out = splice(old, new)
    assert "| idle stack <= $3 a month | $5 | no |\n| one stack holds" in out
    assert "new prices" in out and "new fixed" in out and "52 pools" in out
    assert "kept results" in out and "kept scaling" in out and "hand-merged" in out
    assert out.index("52 pools") < out.index("## Supervisor scaling")
