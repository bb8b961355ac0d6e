"""Step Functions Local's mock configuration (shepherd.asl.mocks, `shepherd asl run --mock-config
FILE --test-case NAME`): the developer guide's own example (tests/statemachines/mocks/) runs as
the guide says, a Throw is retried and caught as a task's error, and each invocation of a
mocked state (retries, loop visits, Map iterations) takes the next numbered response."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from shepherd.asl import load_file, mocks, parse, run_state_machine
from shepherd.errors import DefinitionError
from shepherd_cli.main import main

HERE = Path(__file__).parent / "mocks"
MACHINE_FILE = HERE / "LambdaSQSIntegration.asl.json"
CONFIG_FILE = HERE / "MockConfigFile.json"
SQS_RESULT = {
    "MD5OfMessageBody": "3bcb6e8e-7h85-4375-b0bc-1a59812c6e51",
    "MessageId": "3bcb6e8e-8b51-4375-b0bc-1a59812c6e51",
}
INVOKE_F = "arn:aws:lambda:us-east-1:1:function:F"
LAMBDA_RESULT = {"StatusCode": 200, "Payload": {"StatusCode": 200, "body": "Hello from Lambda!"}}


def _guide(case: str, **changes: Any) -> Any:
    """Run the guide's LambdaSQSIntegration under one of its test cases (`changes` replaces
    fields of its LambdaState)."""
    raw = json.loads(MACHINE_FILE.read_text())
    raw["States"]["LambdaState"].update(changes)
    machine = parse(raw, "LambdaSQSIntegration")
    mocked = mocks.load(CONFIG_FILE, "LambdaSQSIntegration", case, machine)
    return run_state_machine(machine, {"hello": "world"}, mocks=mocked), mocked


def _config(responses: dict[str, Any], case: dict[str, str]) -> dict[str, Any]:
    return {
        "StateMachines": {"M": {"TestCases": {"T": case}}},
        "MockedResponses": responses,
    }


def _run(definition: dict[str, Any], config: dict[str, Any], input: Any = None) -> Any:
    machine = parse(definition, "M")
    case = mocks.select(config, "M", "T", machine, "mock.json")
    return run_state_machine(machine, {} if input is None else input, mocks=mocks.Mocks(case))


def test_happy_path_returns_each_mocked_result() -> None:
    """HappyPath: LambdaState takes MockedLambdaSuccess, SQSState MockedSQSSuccess; the
    machine's output is the SQS state's result, nothing is called."""
    result, mocked = _guide("HappyPath")
    assert result.status == "SUCCEEDED"
    assert result.output == SQS_RESULT
    assert [v.output for v in result.path] == [LAMBDA_RESULT, SQS_RESULT]
    assert dict(mocked.calls) == {"LambdaState": 1, "SQSState": 1}


def test_retry_path_consumes_0_then_1_2_then_3() -> None:
    """RetryPath: the first attempt takes "0" (ResourceNotReady), the two retries "1-2"
    (Timeout), the third retry "3" (success), after 2 + 4 + 8 simulated seconds of backoff."""
    result, mocked = _guide("RetryPath")
    assert result.status == "SUCCEEDED"
    assert result.output == SQS_RESULT
    assert mocked.calls["LambdaState"] == 4
    assert result.seconds == 2 + 4 + 8
    assert [v.state for v in result.path] == ["LambdaState", "SQSState"]


def test_retries_that_run_out_fail_with_the_last_thrown_error() -> None:
    """With MaxAttempts 2 the third invocation ("1-2"'s second) is the last: its Throw fails
    the execution with its Error and Cause, and "3" is never used."""
    result, mocked = _guide(
        "RetryPath",
        Retry=[{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 2, "MaxAttempts": 2}],
    )
    assert (result.status, result.error, result.cause) == (
        "FAILED",
        "Lambda.TimeoutException",
        "Lambda timed out.",
    )
    assert mocked.calls["LambdaState"] == 3


def test_a_throw_is_caught_by_a_catch_on_its_error_name() -> None:
    """A Throw is a task failure: a Catch on its Error name takes it, with the Error and Cause
    as the error output placed at its ResultPath."""
    result, _ = _guide(
        "RetryPath",
        Retry=[{"ErrorEquals": ["Lambda.TimeoutException"], "MaxAttempts": 0}],
        Catch=[
            {
                "ErrorEquals": ["Lambda.ResourceNotReadyException"],
                "ResultPath": "$.error",
                "Next": "SQSState",
            }
        ],
    )
    assert result.status == "SUCCEEDED"
    assert result.path[1].input == {
        "hello": "world",
        "error": {
            "Error": "Lambda.ResourceNotReadyException",
            "Cause": "Lambda resource is not ready.",
        },
    }


def test_hybrid_path_runs_an_unmocked_task_as_without_mocks() -> None:
    """HybridPath mocks only LambdaState; SQSState makes its real call, which here (no AWS
    client given to the run) fails as any service Task does without one."""
    result, mocked = _guide("HybridPath")
    assert dict(mocked.calls) == {"LambdaState": 1}
    assert result.status == "FAILED" and result.error == "States.Permissions"
    assert result.path[0].output == LAMBDA_RESULT


def test_an_unmocked_lambda_runs_its_function() -> None:
    definition = {
        "StartAt": "A",
        "States": {
            "A": {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:1:function:F", "Next": "B"},
            "B": {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:1:function:G", "End": True},
        },
    }
    machine = parse(definition, "M")
    case = mocks.select(
        _config({"R": {"0": {"Return": {"from": "mock"}}}}, {"A": "R"}), "M", "T", machine, "m"
    )
    result = run_state_machine(
        machine, {}, functions={"G": lambda p: {"got": p}}, mocks=mocks.Mocks(case)
    )
    assert result.output == {"got": {"from": "mock"}}


LOOP = {
    "StartAt": "Init",
    "States": {
        "Init": {"Type": "Pass", "Result": 0, "ResultPath": "$.n", "Next": "Poll"},
        "Poll": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": "Poll"},
            "ResultSelector": {"done.$": "$.Payload.done"},
            "ResultPath": "$.status",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
            "Next": "Done?",
        },
        "Done?": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.status.done", "BooleanEquals": True, "Next": "Yes"}],
            "Default": "Poll",
        },
        "Yes": {"Type": "Succeed"},
        "Caught": {"Type": "Fail", "Error": "Caught"},
    },
}


def test_each_loop_visit_takes_the_next_invocation() -> None:
    responses = {
        "Polls": {
            "0-1": {"Return": {"Payload": {"done": False}}},
            "2": {"Return": {"Payload": {"done": True}}},
        }
    }
    result = _run(LOOP, _config(responses, {"Poll": "Polls"}))
    assert result.status == "SUCCEEDED"
    assert [v.state for v in result.path].count("Poll") == 3
    assert result.output == {"n": 0, "status": {"done": True}}


def test_used_up_responses_fail_the_execution_past_any_catch() -> None:
    """AWS: a mocked Task needs a response for every invocation, or the execution fails. The
    fourth visit has none: States.Runtime, which the Catch on States.ALL does not take."""
    responses = {"Polls": {"0-2": {"Return": {"Payload": {"done": False}}}}}
    result = _run(LOOP, _config(responses, {"Poll": "Polls"}))
    assert (result.status, result.error) == ("FAILED", "States.Runtime")
    assert "'Polls' of the state 'Poll'" in (result.cause or "")
    assert "invocation 3" in (result.cause or "")


def test_map_iterations_take_consecutive_invocations_in_item_order() -> None:
    """One Task inside a Map: each iteration is the next invocation (the guide's note: with
    MaxConcurrency 1 the order is the items')."""
    price: dict[str, Any] = {
        "Type": "Task",
        "Resource": "arn:aws:lambda:us-east-1:1:function:Price",
        "End": True,
    }
    definition = {
        "StartAt": "Each",
        "States": {
            "Each": {
                "Type": "Map",
                "MaxConcurrency": 1,
                "ItemProcessor": {"StartAt": "Price", "States": {"Price": price}},
                "End": True,
            }
        },
    }
    responses = {
        "Prices": {
            "0": {"Return": 10},
            "1": {"Throw": {"Error": "Oops", "Cause": "second"}},
            "2": {"Return": 30},
        }
    }
    result = _run(definition, _config(responses, {"Price": "Prices"}), ["a", "b", "c"])
    assert (result.status, result.error, result.cause) == ("FAILED", "Oops", "second")
    price["Retry"] = [{"ErrorEquals": ["Oops"], "MaxAttempts": 1}]
    responses["Prices"]["3"] = {"Return": 40}
    result = _run(definition, _config(responses, {"Price": "Prices"}), ["a", "b", "c"])
    assert result.output == [10, 30, 40]


def test_a_mocked_callback_task_ends_with_its_return() -> None:
    """AWS: mocking a `.waitForTaskToken` Task gives it a token and ends it with the Return."""
    definition = {
        "StartAt": "Ask",
        "States": {
            "Ask": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}},
                "End": True,
            }
        },
    }
    result = _run(definition, _config({"R": {"0": {"Return": {"ok": 1}}}}, {"Ask": "R"}))
    assert result.output == {"ok": 1}


@pytest.mark.parametrize(
    ("responses", "case", "message"),
    [
        (
            {"R": {"0": {"Return": 1}, "2": {"Return": 2}}},
            {"A": "R"},
            "mock.json: MockedResponses.R: invocations are numbered from 0 without gaps or "
            "overlaps; expected 1, found 2",
        ),
        (
            {"R": {"1": {"Return": 1}}},
            {"A": "R"},
            "expected 0, found 1",
        ),
        (
            {"R": {"0-1": {"Return": 1}, "1": {"Return": 2}}},
            {"A": "R"},
            "expected 2, found 1",
        ),
        (
            {"R": {"0": {"Return": 1, "Throw": {"Error": "E", "Cause": "C"}}}},
            {"A": "R"},
            "MockedResponses.R.0: must have exactly one field, Return or Throw",
        ),
        (
            {"R": {"0": {"Throw": {"Error": "E"}}}},
            {"A": "R"},
            "MockedResponses.R.0.Throw: must be an object with string Error and Cause",
        ),
        ({"R": {"x": {"Return": 1}}}, {"A": "R"}, "MockedResponses.R.x: an invocation is"),
        ({"R": {"2-1": {"Return": 1}}}, {"A": "R"}, "the range ends before it starts"),
        ({}, {"A": "R"}, 'StateMachines.M.TestCases.T.A: no mocked response "R"'),
        (
            {"R": {"0": {"Return": 1}}},
            {"Nope": "R"},
            "StateMachines.M.TestCases.T.Nope: the state machine has no Task state 'Nope'",
        ),
    ],
)
def test_a_malformed_configuration_is_refused_naming_the_field(
    responses: dict[str, Any], case: dict[str, str], message: str
) -> None:
    machine = parse(
        {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": INVOKE_F, "End": True}}}, "M"
    )
    with pytest.raises(DefinitionError) as exc:
        mocks.select(_config(responses, case), "M", "T", machine, "mock.json")
    assert message in str(exc.value)


def test_an_unknown_machine_or_test_case_names_what_the_file_has() -> None:
    machine = load_file(MACHINE_FILE)
    config = json.loads(CONFIG_FILE.read_text())
    with pytest.raises(DefinitionError, match=r"no test case 'Sad' .*HappyPath, HybridPath"):
        mocks.select(config, "LambdaSQSIntegration", "Sad", machine, "f")
    with pytest.raises(DefinitionError, match=r"no state machine 'Other' .*LambdaSQSIntegration"):
        mocks.select(config, "Other", "HappyPath", machine, "f")


def test_asl_run_with_a_mock_config(capsys: pytest.CaptureFixture[str]) -> None:
    """`shepherd asl run FILE --mock-config F --test-case T`: the state machine's name is the
    file's; no agent needs to exist for a mocked Lambda."""
    args = ["asl", "run", str(MACHINE_FILE), "--agents", "shepherd_examples.agents"]
    mock_args = ["--mock-config", str(CONFIG_FILE), "--test-case", "RetryPath"]
    assert main([*args, *mock_args, "--input", '{"a": 1}']) == 0
    assert json.loads(capsys.readouterr().out) == {
        "status": "SUCCEEDED",
        "output": SQS_RESULT,
        "error": None,
        "cause": None,
    }


def test_asl_run_names_the_state_machine_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "renamed.asl.json"
    copy.write_text(MACHINE_FILE.read_text())
    args = ["asl", "run", str(copy), "--agents", "shepherd_examples.agents"]
    mock_args = ["--mock-config", str(CONFIG_FILE), "--test-case", "HappyPath"]
    assert main([*args, *mock_args]) == 1
    assert "no state machine 'renamed'" in capsys.readouterr().err
    assert main([*args, *mock_args, "--state-machine", "LambdaSQSIntegration"]) == 0
    capsys.readouterr()
    assert main([*args, "--test-case", "HappyPath"]) == 1
    assert "--test-case needs --mock-config (or SFN_MOCK_CONFIG)" in capsys.readouterr().err
    assert main([*args, "--mock-config", str(CONFIG_FILE)]) == 1
    assert "--mock-config needs --test-case" in capsys.readouterr().err


def test_asl_run_reads_sfn_mock_config_as_step_functions_local_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SFN_MOCK_CONFIG", str(CONFIG_FILE))
    args = ["asl", "run", str(MACHINE_FILE), "--agents", "shepherd_examples.agents"]
    assert main([*args, "--test-case", "HappyPath"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == SQS_RESULT
