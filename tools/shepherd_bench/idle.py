"""What the deployed stack's monitoring costs a month with no workflow at all, read from the
synthesized template itself (alarms, dashboards, keys, the supervisor's tracing and logs) and
from what the supervisor handler prints on an idle run (its EMF record, measured).

CloudWatch bills per alarm metric (a metric math alarm pays for every metric it reads), per
custom metric that received a data point in the month, per dashboard and per GB of logs;
X-Ray per trace recorded; KMS per customer key. An idle stack's only steady invocations are
the supervisor's (525,600 a month: the scheduled run and eleven ticks a minute).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shepherd.observability import HANDLER_SUPERVISOR, NAMESPACE, Metric

from shepherd_bench.prices import usd

# What the supervisor publishes on an idle stack: nothing, neither its scheduled runs nor a
# sweep with nothing due (tests/handlers/test_idle_metrics.py pins both); whether it runs is
# alarmed on its function's own Lambda metrics. A pool with a circuit breaker adds one series
# (`PoolCircuitOpen`, each scheduled run); the example app has none.
IDLE_CUSTOM_METRICS: tuple[Metric, ...] = ()
# Lambda's START and REPORT records in JSON log format, when the system log level lets them
# through (INFO): about 150 and 450 bytes (a typical pair, with the platform's fields).
PLATFORM_LOG_BYTES = 600
GB = 1024**3


@dataclass(frozen=True)
class IdleMonitoring:
    alarm_metrics: int
    dashboards: int
    kms_keys: int
    supervisor_traced: bool
    supervisor_platform_logs: bool
    emf_bytes_per_scheduled_run: int

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def from_template(template: Mapping[str, Any], emf_bytes: int) -> IdleMonitoring:
    resources = template["Resources"].values()
    alarm_metrics = 0
    for resource in resources:
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        props = resource["Properties"]
        queries = [m for m in props.get("Metrics", []) if "MetricStat" in m]
        alarm_metrics += len(queries) if "Metrics" in props else 1
    (supervisor,) = [
        r["Properties"]
        for r in resources
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == HANDLER_SUPERVISOR
    ]
    logging = supervisor.get("LoggingConfig", {})
    return IdleMonitoring(
        alarm_metrics=alarm_metrics,
        dashboards=sum(r["Type"] == "AWS::CloudWatch::Dashboard" for r in resources),
        kms_keys=sum(r["Type"] == "AWS::KMS::Key" for r in resources),
        supervisor_traced=supervisor.get("TracingConfig", {}).get("Mode") == "Active",
        supervisor_platform_logs=logging.get("SystemLogLevel", "INFO") in ("DEBUG", "INFO"),
        emf_bytes_per_scheduled_run=emf_bytes,
    )


def monthly(
    monitoring: IdleMonitoring, invocations: int, scheduled_runs: int
) -> dict[str, dict[str, float]]:
    """Each monitoring item a month: units and dollars at list price."""
    log_bytes = scheduled_runs * monitoring.emf_bytes_per_scheduled_run
    if monitoring.supervisor_platform_logs:
        log_bytes += invocations * PLATFORM_LOG_BYTES
    traces = invocations if monitoring.supervisor_traced else 0
    metrics = len(IDLE_CUSTOM_METRICS)
    return {
        "cloudwatch_alarm_metrics": {
            "units": monitoring.alarm_metrics,
            "usd": usd("cloudwatch_alarm_metric", monitoring.alarm_metrics),
        },
        "cloudwatch_custom_metrics_idle": {
            "units": metrics,
            "usd": usd("cloudwatch_custom_metric", metrics),
        },
        "cloudwatch_dashboards": {
            "units": monitoring.dashboards,
            "usd": usd("cloudwatch_dashboard", monitoring.dashboards),
        },
        "cloudwatch_logs_supervisor_gb": {
            "units": log_bytes / GB,
            "usd": usd("cloudwatch_logs_gb", log_bytes / GB),
        },
        "xray_traces_supervisor": {"units": traces, "usd": usd("xray_trace", traces)},
        "kms_alarm_topic_keys": {
            "units": monitoring.kms_keys,
            "usd": usd("kms_key", monitoring.kms_keys),
        },
    }


def emf_record_bytes(service: str) -> int:
    """The size of the EMF record the supervisor prints on an idle scheduled run (Powertools'
    own serialization, as the handler emits it)."""
    import contextlib
    import io

    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    if not IDLE_CUSTOM_METRICS:
        return 0  # no record at all
    metrics = Metrics(namespace=NAMESPACE, service=service)
    for metric in IDLE_CUSTOM_METRICS:
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        metrics.flush_metrics()
    return len(out.getvalue().encode())


# The smallest stack the examples make: one definition whose steps all run in one pool.
ONE_POOL_DEFINITION = "transcode_video.yaml"


def example_templates() -> dict[str, dict[str, Any]]:
    """The example app as deployed by default, with every paid option on (the dashboard, the
    supervisor's tracing, an alarm e-mail), and with one pool (`ONE_POOL_DEFINITION` alone):
    what each option adds, and what the floor is."""
    import shutil

    from shepherd_infra import config
    from shepherd_infra.application import build_app

    variants: dict[str, dict[str, str]] = {
        "default": {},
        "all options": {"dashboard": "true", "tracing": "true", "alarm_email": "ops@example.com"},
        "one pool": {},
    }
    out = {}
    for name, variant in variants.items():
        with tempfile.TemporaryDirectory() as outdir:
            context = dict(variant)
            if name == "one pool":
                definitions = Path(outdir) / "definitions"
                definitions.mkdir()
                shutil.copy(config.DEFINITIONS_DIR / ONE_POOL_DEFINITION, definitions)
                context[config.CTX_DEFINITIONS_DIR] = str(definitions)
            app, stack = build_app(context=context, outdir=str(Path(outdir) / "cdk.out"))
            assembly = app.synth()
            out[name] = json.loads(
                json.dumps(assembly.get_stack_by_name(stack.stack_name).template)
            )
    return out
