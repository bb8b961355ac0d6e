"""`shepherd validate` checks the ASL files of a definitions folder, and `shepherd asl run`
runs one in process with the project's agents as its Lambda functions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from shepherd_cli.main import main

AGENTS = "shepherd_examples.agents"
MACHINE = {
    "StartAt": "Reserve",
    "States": {
        "Reserve": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": "reserve_inventory", "Payload.$": "$"},
            "ResultSelector": {"id.$": "$.Payload.reservation_id"},
            "ResultPath": "$.reserved",
            "Catch": [{"ErrorEquals": ["OutOfStock"], "ResultPath": "$.error", "Next": "Sorry"}],
            "End": True,
        },
        "Sorry": {"Type": "Fail", "Error": "OutOfStock", "Cause": "no stock"},
    },
}


def _folder(tmp_path: Path, machine: Mapping[str, Any]) -> Path:
    (tmp_path / "order.asl.json").write_text(json.dumps(machine))
    return tmp_path


def test_validate_accepts_an_asl_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, MACHINE)
    assert main(["validate", "--definitions", str(folder), "--agents", AGENTS]) == 0
    assert "order.asl.json: ok (order, Amazon States Language, 2 states)" in capsys.readouterr().out


def test_validate_names_the_state_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = json.loads(json.dumps(MACHINE))
    broken["States"]["Reserve"]["Retry"] = [{"ErrorEquals": ["X"], "MaxAttempts": -1}]
    folder = _folder(tmp_path, broken)
    assert main(["validate", "--definitions", str(folder), "--agents", AGENTS]) == 1
    err = capsys.readouterr().err
    assert "order.asl.json: States.Reserve.Retry[0].MaxAttempts: must be a non-negative" in err
    assert "Traceback" not in err


def test_validate_flags_an_unregistered_function(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = json.loads(json.dumps(MACHINE))
    other["States"]["Reserve"]["Parameters"]["FunctionName"] = "arn:aws:lambda:r:1:function:nope"
    folder = _folder(tmp_path, other)
    assert main(["validate", "--definitions", str(folder), "--agents", AGENTS]) == 1
    assert "no agent is registered for the Lambda function 'nope'" in capsys.readouterr().err


def test_validate_says_what_the_synth_could_not_grant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An aws-sdk API the SDK does not have (a typo) and one whose IAM action cannot be derived
    fail `validate` as they would fail `cdk synth` (shepherd.asl.grants), naming the state."""
    other = json.loads(json.dumps(MACHINE))
    other["States"]["Reserve"]["Next"] = "Send"
    del other["States"]["Reserve"]["End"]
    other["States"]["Send"] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:sqs:sendMesage",
        "Parameters": {"QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/q"},
        "Next": "Apis",
    }
    other["States"]["Apis"] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:apigateway:getRestApis",
        "End": True,
    }
    folder = _folder(tmp_path, other)
    assert main(["validate", "--definitions", str(folder), "--agents", AGENTS]) == 1
    err = capsys.readouterr().err
    assert "order.asl.json: States.Send: " in err and "sqs has no API SendMesage" in err
    assert "order.asl.json: States.Apis: " in err and "HTTP verbs" in err


def test_asl_run_prints_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = _folder(tmp_path, MACHINE) / "order.asl.json"
    args = ["asl", "run", str(file), "--agents", AGENTS, "--input", '{"items": [{"sku": "A"}]}']
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == ["status", "output", "error", "cause"]
    assert printed["status"] == "SUCCEEDED"
    assert printed["error"] is None and printed["cause"] is None
    assert printed["output"]["reserved"]["id"].startswith("res-")


def test_asl_run_reports_a_fail_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = _folder(tmp_path, MACHINE) / "order.asl.json"
    items = '{"items": [{"sku": "SOLD-OUT"}]}'
    assert main(["asl", "run", str(file), "--agents", AGENTS, "--input", items]) == 1
    captured = capsys.readouterr()
    assert "FAILED OutOfStock: no stock" in captured.err
    assert json.loads(captured.out) == {
        "status": "FAILED",
        "output": None,
        "error": "OutOfStock",
        "cause": "no stock",
    }
