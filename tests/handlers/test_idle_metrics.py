"""An idle stack's supervisor publishes no custom metric: every custom metric costs $0.30 a
month at list price whether it has work to report or not (whether the supervisor runs is
alarmed on its function's own Lambda metrics, which are free)."""

from __future__ import annotations

import json

import pytest
from aws_stack import LambdaContext, Stack, sqs_event


def _metric_names(out: str) -> set[str]:
    """The metric names of every EMF record printed."""
    names: set[str] = set()
    for line in out.splitlines():
        if '"_aws"' not in line:
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            names |= {m["Name"] for m in directive["Metrics"]}
    return names


def test_an_idle_scheduled_run_reports_nothing(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert stack.sweep()["due"] == 0
    assert _metric_names(capsys.readouterr().out) == set()


def test_an_idle_tick_reports_nothing(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    from shepherd_handlers import supervisor

    capsys.readouterr()
    reply = supervisor.handler(
        sqs_event([("t-1", "{}")], "arn:aws:sqs:us-east-1:123456789012:ticks"), LambdaContext()
    )
    assert reply["due"] == 0
    assert _metric_names(capsys.readouterr().out) == set()
