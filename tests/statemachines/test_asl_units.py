"""Unit tests of shepherd.asl's pieces: paths, intrinsics, rules, errors, the document's
validation, the interpreter's purity, the Lambda shaping and the loaders."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pytest
from shepherd.asl import errors as asl_errors
from shepherd.asl import intrinsics, lambdas, load_directory, load_file, paths, wildcard
from shepherd.asl.document import parse
from shepherd.asl.errors import StatesError
from shepherd.asl.machine import Failed, Interpreter, RunTask, TaskSucceeded
from shepherd.asl.runner import Callbacks, run_state_machine
from shepherd.definitions import definition_files
from shepherd.errors import DefinitionError

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def test_paths_select_and_put() -> None:
    data = {"a": {"b": [1, 2, 3]}, "c d": 1}
    assert paths.select("$.a.b[1]", data) == 2
    assert paths.select("$.a.b[-1]", data) == 3
    assert paths.select("$['c d']", data) == 1
    assert paths.select("$.a.b[0:2]", data) == [1, 2]
    assert paths.select("$..b", data) == [[1, 2, 3]]
    with pytest.raises(paths.PathNotFound):
        paths.select("$.a.x", data)
    assert paths.put("$.a.b", {"a": {}}, 5) == {"a": {"b": 5}}
    original: dict[str, Any] = {"a": {}}
    paths.put("$.a.b", original, 5)
    assert original == {"a": {}}  # ResultPath never changes the state's input in place


def test_intrinsic_uuid_and_random_are_seeded() -> None:
    first = intrinsics.evaluate("States.UUID()", {}, rng=random.Random(1))
    assert first == intrinsics.evaluate("States.UUID()", {}, rng=random.Random(1))
    assert first[14] == "4" and len(first) == 36
    value = intrinsics.evaluate("States.MathRandom(1, 3)", {}, rng=random.Random(2))
    assert value in (1, 2)
    seeded = intrinsics.evaluate("States.MathRandom(1, 1000, 7)", {})
    assert seeded == intrinsics.evaluate("States.MathRandom(1, 1000, 7)", {}, rng=random.Random(9))


@pytest.mark.parametrize(
    "expression",
    [
        "States.ArrayRange(1, 2000, 1)",  # more than 1,000 elements
        "States.ArrayPartition($.a, 0)",
        "States.JsonMerge($.o, $.o, true)",  # only the shallow merge exists
        "States.Hash('x', 'SHA-999')",
        "States.Nope(1)",
        "States.StringToJson('{')",
    ],
)
def test_intrinsic_failures(expression: str) -> None:
    with pytest.raises(StatesError) as raised:
        intrinsics.evaluate(expression, {"a": [1], "o": {}})
    # Step Functions fails the execution with States.Runtime here, not States.IntrinsicFailure
    assert raised.value.error == "States.Runtime"


def test_wildcard_is_fast_on_hostile_patterns() -> None:
    assert wildcard.matches("a" * 5000 + "b", "*a*a*a*a*a*b")
    assert not wildcard.matches("a" * 5000, "*a*a*a*a*a*b")
    assert wildcard.matches("a*b", "a\\*b")
    assert not wildcard.matches("axb", "a\\*b")


def test_error_matching() -> None:
    assert asl_errors.matches(["States.ALL"], "MyError")
    assert not asl_errors.matches(["States.ALL"], "States.Runtime")
    assert asl_errors.matches(["States.TaskFailed"], "MyError")
    assert not asl_errors.matches(["States.TaskFailed"], "States.Timeout")
    retrier = asl_errors.Retrier(("X",), 2.0, 3, 3.0, 10, "NONE")
    assert [asl_errors.retry_delay(retrier, n, 0.5) for n in range(3)] == [2.0, 6.0, 10]
    full = asl_errors.Retrier(("X",), 2.0, 3, 1.0, None, "FULL")
    assert asl_errors.retry_delay(full, 0, 0.25) == 0.5


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"StartAt": "X", "States": {"A": {"Type": "Succeed"}}}, "StartAt"),
        ({"StartAt": "A", "States": {"A": {"Type": "Bogus"}}}, "States.A.Type"),
        ({"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "Z"}}}, "States.A.Next"),
        ({"StartAt": "A", "States": {"A": {"Type": "Pass"}}}, "exactly one of Next and End"),
        (
            {"StartAt": "A", "States": {"A": {"Type": "Pass", "Output": 1, "End": True}}},
            "States.A.Output",
        ),
        (
            {
                "StartAt": "A",
                "States": {
                    "A": {
                        "Type": "Map",
                        "ItemReader": {"Resource": "arn:aws:states:::s3:getObject"},
                        "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Succeed"}}},
                        "End": True,
                    }
                },
            },
            "States.A.ItemReader.ReaderConfig: must be an object",
        ),
        (
            {
                "StartAt": "A",
                "States": {
                    "A": {
                        "Type": "Task",
                        "Resource": "arn:aws:lambda:us-east-1:1:function:f",
                        "Retry": [{"ErrorEquals": ["States.ALL", "X"]}],
                        "End": True,
                    }
                },
            },
            "States.A.Retry[0].ErrorEquals",
        ),
        (
            {
                "StartAt": "A",
                "States": {
                    "A": {
                        "Type": "Choice",
                        "Choices": [{"Variable": "$.a", "NumericEqualz": 1, "Next": "A"}],
                    }
                },
            },
            "States.A.Choices[0]",
        ),
        (
            {
                "StartAt": "A",
                "States": {
                    "A": {"Type": "Pass", "Assign": {"x": 1}, "Next": "P"},
                    "P": {
                        "Type": "Parallel",
                        "Branches": [
                            {
                                "StartAt": "B",
                                "States": {"B": {"Type": "Pass", "Assign": {"x": 2}, "End": True}},
                            }
                        ],
                        "End": True,
                    },
                },
            },
            "the variable 'x' is assigned in an outer scope",
        ),
        (
            {
                "StartAt": "A",
                "States": {
                    "A": {
                        "Type": "Task",
                        "Resource": "arn:aws:lambda:us-east-1:1:function:f",
                        "TimeoutSeconds": 10,
                        "HeartbeatSeconds": 10,
                        "End": True,
                    }
                },
            },
            "States.A.HeartbeatSeconds: must be smaller than TimeoutSeconds",
        ),
        (
            {
                "StartAt": "A",
                "States": {"A": {"Type": "Pass", "Parameters": {"x": {"y.$": 5}}, "End": True}},
            },
            "States.A.Parameters.x.y.$: 5 is not a path",
        ),
        (
            {
                "StartAt": "A",
                "States": {
                    "A": {"Type": "Pass", "Parameters": {"y.$": "States.Nope(1)"}, "End": True}
                },
            },
            "States.A.Parameters.y.$: 'States.Nope' is not an intrinsic function",
        ),
    ],
)
def test_document_errors_name_the_state_and_field(document: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError) as raised:
        parse(document, "flow.asl.json")
    assert str(raised.value).startswith("flow.asl.json: ")
    assert message in str(raised.value)


def test_interpreter_is_a_pure_function_of_frame_and_event() -> None:
    machine = parse(
        {
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": "arn:aws:lambda:us-east-1:1:function:f",
                    "ResultPath": "$.r",
                    "Next": "P",
                },
                "P": {"Type": "Pass", "Parameters": {"id.$": "States.UUID()"}, "End": True},
            },
        }
    )
    interpreter = Interpreter(machine)
    frame, actions = interpreter.start({"a": 1}, NOW)
    task = next(a for a in actions if isinstance(a, RunTask))
    assert task.payload == {"a": 1} and task.visit == 1
    one = interpreter.advance(frame, TaskSucceeded("x"), NOW)
    two = interpreter.advance(frame, TaskSucceeded("x"), NOW)
    assert one == two  # same frame, same event: same result (the random UUID included)


def test_transition_cap_stops_an_endless_loop() -> None:
    # A loop whose way out is never taken (AWS refuses a machine with no terminal state at all:
    # MISSING_END_STATE).
    machine = parse(
        {
            "StartAt": "A",
            "States": {
                "A": {"Type": "Pass", "Next": "Again?"},
                "Again?": {
                    "Type": "Choice",
                    "Choices": [{"Variable": "$.stop", "IsPresent": True, "Next": "Done"}],
                    "Default": "A",
                },
                "Done": {"Type": "Succeed"},
            },
        }
    )
    frame, actions = Interpreter(machine, max_transitions=50).start({}, NOW)
    assert isinstance(actions[-1], Failed) and actions[-1].error == "States.Runtime"
    assert frame.transitions == 50


def test_lambda_invoke_result_shape_and_names() -> None:
    assert lambdas.function_name("arn:aws:lambda:us-east-1:1:function:name:alias") == "name"
    assert lambdas.function_name("name:3") == "name"
    machine = parse(
        {
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "f", "Payload.$": "$"},
                    "End": True,
                }
            },
        }
    )
    out = run_state_machine(machine, {"a": 1}, functions={"f": lambda p: {"got": p}}).output
    assert out["Payload"] == {"got": {"a": 1}}
    assert out["StatusCode"] == 200 and out["ExecutedVersion"] == "$LATEST"
    assert out["SdkHttpMetadata"]["HttpStatusCode"] == 200
    assert out["SdkResponseMetadata"]["RequestId"]


def test_wait_for_task_token_completes_through_callbacks() -> None:
    callbacks = Callbacks()

    def ask(payload: dict[str, Any]) -> None:
        callbacks.succeed(payload["token"], {"approved": True})

    machine = parse(
        {
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                    "Parameters": {"FunctionName": "ask", "Payload": {"token.$": "$$.Task.Token"}},
                    "End": True,
                }
            },
        }
    )
    run = run_state_machine(machine, {}, functions={"ask": ask}, callbacks=callbacks)
    assert run.status == "SUCCEEDED" and run.output == {"approved": True}


def test_execution_timeout_on_simulated_time() -> None:
    machine = parse(
        {
            "TimeoutSeconds": 60,
            "StartAt": "W",
            "States": {"W": {"Type": "Wait", "Seconds": 120, "End": True}},
        }
    )
    run = run_state_machine(machine, {})
    # AWS ends it TIMED_OUT, its ExecutionTimedOut event without an error or a cause
    assert (run.status, run.error, run.cause, run.output) == ("TIMED_OUT", None, None, None)


def test_path_records_each_visit() -> None:
    machine = parse(
        {
            "StartAt": "A",
            "States": {
                "A": {"Type": "Pass", "Result": 1, "Next": "B"},
                "B": {"Type": "Pass", "End": True},
            },
        }
    )
    run = run_state_machine(machine, {"x": 0})
    assert [(v.state, v.input, v.output) for v in run.path] == [("A", {"x": 0}, 1), ("B", 1, 1)]


def test_loaders_and_native_loader_skip_asl(tmp_path: Path) -> None:
    body = {"StartAt": "A", "States": {"A": {"Type": "Succeed"}}}
    (tmp_path / "hello.asl.json").write_text(json.dumps(body))
    (tmp_path / "other.asl.yaml").write_text("StartAt: A\nStates:\n  A:\n    Type: Succeed\n")
    (tmp_path / "native.yaml").write_text("Name: native\n")
    assert sorted(load_directory(tmp_path)) == ["hello", "other"]
    assert load_file(tmp_path / "hello.asl.json").start_at == "A"
    assert [p.name for p in definition_files(tmp_path)] == ["native.yaml"]
    (tmp_path / "bad.asl.json").write_text("{")
    with pytest.raises(DefinitionError, match=r"bad\.asl\.json: not valid JSON"):
        load_directory(tmp_path)


def test_statemachines_folder_still_loads() -> None:
    from shepherd.definitions import load_directory as load_native

    folder = Path(__file__).resolve().parents[2] / "statemachines"
    assert set(load_native(folder)) == {
        "onboard_tenant",
        "order_amendment",
        "order_fulfilment",
        "provision_environment",
        "transcode_video",
    }


def test_map_tolerated_failures() -> None:
    def machine(tolerated: int) -> Any:
        return parse(
            {
                "StartAt": "M",
                "States": {
                    "M": {
                        "Type": "Map",
                        "ToleratedFailureCount": tolerated,
                        "ItemProcessor": {
                            "ProcessorConfig": {"Mode": "DISTRIBUTED"},
                            "StartAt": "C",
                            "States": {
                                "C": {
                                    "Type": "Choice",
                                    "Choices": [{"Variable": "$", "NumericEquals": 2, "Next": "F"}],
                                    "Default": "S",
                                },
                                "F": {"Type": "Fail", "Error": "Two", "Cause": "two"},
                                "S": {"Type": "Succeed"},
                            },
                        },
                        "End": True,
                    }
                },
            }
        )

    # A distributed Map's tolerated failed child leaves no result (the floci emulator's
    # AWS-measured distributedMapToleratedFailureCount_absorbsFailuresUpToTheThreshold).
    ok = run_state_machine(machine(1), [1, 2, 3])
    assert ok.output == [1, 3]
    failed = run_state_machine(machine(0), [1, 2, 3])
    assert failed.error == "States.ExceedToleratedFailureThreshold"


def test_context_state_has_retry_count_only_where_states_retry() -> None:
    def state_context(state: dict[str, Any]) -> Any:
        machine = parse({"StartAt": "S", "States": {"S": state}})
        return run_state_machine(machine, {}, functions={"echo": lambda p: p}).output["s"]

    pass_state = {"Type": "Pass", "Parameters": {"s.$": "$$.State"}, "End": True}
    task = {"Type": "Task", "Resource": "echo", "Parameters": {"s.$": "$$.State"}, "End": True}
    assert set(state_context(pass_state)) == {"EnteredTime", "Name"}
    assert state_context(task) == {
        "EnteredTime": "2024-01-01T00:00:00.000Z",
        "Name": "S",
        "RetryCount": 0,
    }


def test_output_over_256_kib_is_data_limit_exceeded() -> None:
    """A task's result over the limit is a task failure States.ALL catches (recorded against
    AWS); a state's own output over it fails the execution, whatever its Catch says."""
    machine = parse(
        {
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": "big",
                    "ResultPath": "$.result",
                    "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "H"}],
                    "End": True,
                },
                "H": {"Type": "Succeed"},
            },
        }
    )
    run = run_state_machine(machine, {}, functions={"big": lambda p: "x" * 300_000})
    assert run.status == "SUCCEEDED"
    assert run.output["Error"] == "States.DataLimitExceeded"
    assert run.output["Cause"] == (
        "The state/task 'big' returned a result with a size exceeding the maximum number of "
        "bytes service limit."
    )
    # each half fits, the two together (the input and the result at $.result) do not
    over = run_state_machine(
        machine, {"pad": "y" * 150_000}, functions={"big": lambda p: "x" * 150_000}
    )
    assert (over.status, over.error) == ("FAILED", "States.DataLimitExceeded")
    small = run_state_machine(machine, {}, functions={"big": lambda p: "x" * 1000})
    assert small.status == "SUCCEEDED"


def test_importing_shepherd_asl_needs_no_jsonata() -> None:
    """The Lambda layer does not ship jsonata-python yet: a state machine without JSONata must
    run without it, so the package is imported on first use only."""
    import subprocess
    import sys

    code = (
        "import sys, shepherd.asl, shepherd.asl.machine, shepherd.asl.runner;"
        "assert 'jsonata' not in sys.modules, 'jsonata imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("parameters", "received"),
    [({}, {}), ({"Payload": '{"a": 1}'}, {"a": 1}), ({"Payload": "text"}, "text")],
)
def test_lambda_invoke_payload(parameters: dict[str, Any], received: Any) -> None:
    got: list[Any] = []
    machine = parse(
        {
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "f", **parameters},
                    "End": True,
                }
            },
        }
    )
    run_state_machine(machine, {}, functions={"f": got.append})
    assert got == [received]


def test_string_ordering_is_javas() -> None:
    from shepherd.asl.rules import compare

    # U+FFFF sorts after U+1F600 in UTF-16 code units (0xFFFF > 0xD83D), before it in code points.
    assert compare("StringGreaterThan", "\uffff", "\U0001f600")
    assert compare("StringLessThan", "abc", "abd")
    assert not compare("StringLessThan", "b", 1)


def test_lambda_error_cause_is_the_python_runtimes() -> None:
    def handler(payload: Any) -> Any:
        raise Exception("Some exception was raised.")

    machine = parse(
        {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": "f", "End": True}}}
    )
    run = run_state_machine(machine, {}, functions={"f": handler})
    cause = json.loads(run.cause or "")
    assert run.error == "Exception"
    assert list(cause) == ["errorMessage", "errorType", "requestId", "stackTrace"]
    assert cause["errorMessage"] == "Some exception was raised."
    assert len(cause["stackTrace"]) == 1  # the function's frame only, not the runner's
    assert "in handler\n    raise Exception(" in cause["stackTrace"][0]


def test_a_frame_survives_json_between_events() -> None:
    """A driver that stores the frame (the engine) gets the same next step from its copy."""
    from shepherd.asl.machine import WaitElapsed, frame_from_json, frame_to_json

    machine = parse(
        {
            "StartAt": "A",
            "States": {
                "A": {"Type": "Pass", "Assign": {"n": 1}, "Next": "W"},
                "W": {"Type": "Wait", "Seconds": 5, "Next": "B"},
                "B": {"Type": "Pass", "Parameters": {"n.$": "$n"}, "End": True},
            },
        }
    )
    interpreter = Interpreter(machine)
    frame, _ = interpreter.start({}, NOW)
    stored = json.loads(json.dumps(frame_to_json(frame)))
    restored = frame_from_json(stored)
    assert restored == frame
    later = NOW + dt.timedelta(seconds=5)
    assert interpreter.advance(restored, WaitElapsed(), later) == interpreter.advance(
        frame, WaitElapsed(), later
    )
    _, actions = interpreter.advance(restored, WaitElapsed(), later)
    assert actions[-1] == machine_succeeded({"n": 1})


def machine_succeeded(output: Any) -> Any:
    from shepherd.asl.machine import Succeeded

    return Succeeded(output)


def test_fractional_numbers_are_written_as_java_writes_them() -> None:
    """Step Functions writes JSON text (States.JsonToString, States.Format, the input a cause
    quotes) with Jackson: a double is Java's Double.toString, scientific outside [1e-3, 1e7)."""
    machine = parse(
        {
            "StartAt": "S",
            "States": {
                "S": {
                    "Type": "Pass",
                    "Parameters": {
                        "json.$": "States.JsonToString($)",
                        "text.$": "States.Format('{} {} {}', $.big, $.small, $.plain)",
                    },
                    "End": True,
                }
            },
        }
    )
    run = run_state_machine(machine, {"big": 1e21, "small": 1e-4, "plain": 2.5, "n": 7})
    assert run.output == {
        "json": '{"big":1.0E21,"small":1.0E-4,"plain":2.5,"n":7}',
        "text": "1.0E21 1.0E-4 2.5",
    }


def test_execution_timeout_inside_a_branch_is_not_caught() -> None:
    """The state machine's TimeoutSeconds ends the whole execution: a Catch on the Parallel
    whose branch was waiting does not see it."""
    machine = parse(
        {
            "TimeoutSeconds": 60,
            "StartAt": "P",
            "States": {
                "P": {
                    "Type": "Parallel",
                    "Branches": [
                        {
                            "StartAt": "W",
                            "States": {"W": {"Type": "Wait", "Seconds": 120, "End": True}},
                        }
                    ],
                    "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                    "End": True,
                },
                "Caught": {"Type": "Succeed"},
            },
        }
    )
    run = run_state_machine(machine, {})
    assert run.status == "TIMED_OUT"
    assert [v.state for v in run.path] == ["P", "W"]


def test_lambda_invoke_result_lists_headers_in_aws_order() -> None:
    """The keys of a lambda:invoke result, and of its AllHttpHeaders, in the order a result
    recorded against AWS lists them (LocalStack's context_object snapshot)."""
    machine = parse(
        {
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "echo", "Payload.$": "$"},
                    "End": True,
                }
            },
        }
    )
    run = run_state_machine(machine, {"a": 1}, functions={"echo": lambda p: p})
    assert list(run.output) == [
        "ExecutedVersion",
        "Payload",
        "SdkHttpMetadata",
        "SdkResponseMetadata",
        "StatusCode",
    ]
    assert list(run.output["SdkHttpMetadata"]["AllHttpHeaders"]) == [
        "X-Amz-Executed-Version",
        "x-amzn-Remapped-Content-Length",
        "Connection",
        "x-amzn-RequestId",
        "Content-Length",
        "Date",
        "X-Amzn-Trace-Id",
        "Content-Type",
    ]


def test_jsonata_now_reads_the_simulated_clock() -> None:
    """The interpreter reads no clock: JSONata's $now() and $millis() are the state's entered
    time on the run's (simulated) clock, so a run replays identically."""
    machine = parse(
        {
            "QueryLanguage": "JSONata",
            "StartAt": "W",
            "States": {
                "W": {"Type": "Wait", "Seconds": 90, "Next": "S"},
                "S": {
                    "Type": "Pass",
                    "Output": {"now": "{% $now() %}", "ms": "{% $millis() %}"},
                    "End": True,
                },
            },
        }
    )
    run = run_state_machine(machine, {})
    assert run.output == {"now": "2024-01-01T00:01:30.000Z", "ms": 1704067290000}


def test_a_batch_stops_at_256_kib_whatever_max_items_per_batch_says() -> None:
    """The floci emulator's AWS-measured distributedMapWithItemBatcher_capsABatchAtTheChild-
    InputCeiling: 40 items of 10 KB with MaxItemsPerBatch 100 make more than one batch, each
    under a child execution's 256 KiB input limit, and every item is in one."""
    from shepherd.asl.distributed import batches
    from shepherd.asl.values import dumps

    items = [{"pad": "x" * 10_000} for _ in range(40)]
    made = batches(items, 100, None, None, has_batch_input=False)
    assert len(made) > 1
    assert all(len(dumps(b).encode()) <= 256 * 1024 for b in made)
    assert sum(len(b["Items"]) for b in made) == 40


def test_an_item_over_256_kib_is_data_limit_exceeded() -> None:
    """...failsWhenASingleItemExceedsTheCeiling: an item alone over 256 KiB cannot be a
    child's input: States.DataLimitExceeded."""
    from shepherd.asl.distributed import batches
    from shepherd.asl.errors import StatesError

    with pytest.raises(StatesError) as raised:
        batches([{"pad": "x" * 300_000}], 10, None, None, has_batch_input=False)
    assert raised.value.error == "States.DataLimitExceeded"


def test_max_input_bytes_per_batch_counts_the_batch_json() -> None:
    """MaxInputBytesPerBatch: a batch's JSON (`{"Items":[...]}`) is at most that many bytes."""
    from shepherd.asl.distributed import batches

    made = batches([{"n": 1}, {"n": 2}, {"n": 3}], None, 27, None, has_batch_input=False)
    assert made == [{"Items": [{"n": 1}, {"n": 2}]}, {"Items": [{"n": 3}]}]


def test_a_runaway_jsonata_expression_stops_with_aws_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tail-recursive loop without a base case never overflows (the call is unwound), so
    before the step bound it ran for ever and held its worker. It now fails the state with
    States.QueryEvaluationError and AWS's cause (floci's JsonataEvaluatorTest records it), and
    a run fails at the same step every time. The bound is lowered here so the test takes no
    time; an expression within the shipped bound is untouched by it."""
    from shepherd.asl import jsonata

    monkeypatch.setattr(jsonata, "MAX_STEPS", 2_000)
    loop = "{% ($f := function($x){ $f($x+1) }; $f(1)) %}"
    machine = parse(
        {
            "QueryLanguage": "JSONata",
            "StartAt": "Spin",
            "States": {"Spin": {"Type": "Pass", "Output": {"v": loop}, "End": True}},
        }
    )
    first, second = run_state_machine(machine, {}), run_state_machine(machine, {})
    assert (first.status, first.error) == ("FAILED", "States.QueryEvaluationError")
    assert first.cause is not None
    assert first.cause.endswith(
        "threw an error during evaluation: Expression evaluation timeout: Check for infinite loop"
    )
    assert (second.error, second.cause) == (first.error, first.cause)
    monkeypatch.setattr(jsonata, "MAX_STEPS", 3_000_000)
    fine = parse(
        {
            "QueryLanguage": "JSONata",
            "StartAt": "Sum",
            "States": {
                "Sum": {
                    "Type": "Pass",
                    "Output": "{% $sum($map([1..2000], function($v){ $v * 2 })) %}",
                    "End": True,
                }
            },
        }
    )
    assert run_state_machine(fine, {}).output == 4_002_000


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "$power(-1, 0.5)",
            "D3061: The power function has resulted in a value that cannot be represented as "
            "a JSON number: base=-1, exponent=0.5",
        ),
        (
            "$toMillis('nope')",
            "D3110: The argument of the toMillis function must be an ISO 8601 formatted "
            'timestamp. Given "nope"',
        ),
    ],
)
def test_jsonata_function_errors_are_jsonata_js_codes(expression: str, message: str) -> None:
    """The package let Python's own errors out of these two ('must be real number, not
    complex', 'Invalid isoformat string'); Step Functions evaluates with jsonata-js, whose
    code and words the cause carries, as it does for every other function error."""
    machine = parse(
        {
            "QueryLanguage": "JSONata",
            "StartAt": "A",
            "States": {"A": {"Type": "Pass", "Output": f"{{% {expression} %}}", "End": True}},
        }
    )
    run = run_state_machine(machine, {})
    assert run.error == "States.QueryEvaluationError"
    assert run.cause is not None
    assert run.cause.endswith(f"threw an error during evaluation. {message}")
