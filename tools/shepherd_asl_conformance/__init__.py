"""The ASL conformance suite (issue 42): state machines with the inputs and the outputs or
errors the Step Functions developer guide and the States Language specification state, run
through `shepherd.asl.run_state_machine`. `make conformance` prints passed/failed per feature.

Each file `tests/statemachines/conformance/<feature>.json` is a list of cases: `name`, `definition`,
`input`, and `output` (compared as JSON text: key order and number form count) or `error`
(optionally `cause`), or `status` (TIMED_OUT), or `invalid` (the definition is refused when it
is loaded, with this text in the message, such as AWS's SCHEMA_VALIDATION_FAILED); optionally
the simulated `seconds` the run took (or `seconds_at_most`, for a random jitter), its
`transitions`, `s3` (buckets and their objects, put in moto's S3 before the run, for a
distributed Map's ItemReader and ResultWriter), `mock_config` and `test_case` (a Step
Functions Local mock configuration, its state machine named `M`: the Task states the test case
names answer with its recorded responses, shepherd.asl.mocks), and a `description` naming where
the expected result comes from: the guide, or an execution recorded against AWS. The Lambda functions the cases name are the fixtures below, each as the
guide's examples describe it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shepherd.asl import ExecutionResult, parse, run_state_machine
from shepherd.asl.integrations import Integrations
from shepherd.asl.mocks import Mocks, select
from shepherd.errors import DefinitionError

CASES = Path(__file__).resolve().parents[2] / "tests" / "statemachines" / "conformance"


class CustomError(Exception):
    """The guide's Catch example raises an error named CustomError."""


class Flaky(Exception):
    """FailTwice's error."""


def functions() -> dict[str, Callable[[Any], Any]]:
    """Fresh fixtures for one case (FailTwice counts its calls)."""
    calls = {"FailTwice": 0}

    def fail_twice(payload: Any) -> Any:
        calls["FailTwice"] += 1
        if calls["FailTwice"] <= 2:
            raise Flaky("not yet")
        return "third time"

    def custom_error(payload: Any) -> Any:
        raise CustomError("This is a custom error!")

    return {
        "Echo": lambda payload: payload,
        "HelloFunction": lambda payload: "Hello, AWS Step Functions!",
        "CustomErrorFunction": custom_error,
        "FailTwice": fail_twice,
        # The Step Functions workshop's data-checking function: {"flagged": false} for clean data.
        "DataCheckingFunction": lambda payload: {"flagged": False},
        # A result over Step Functions' 256 KiB payload limit (UTF-8 bytes).
        "LargeResult": lambda payload: "é" * (128 * 1024 + 1),
    }


@dataclass(frozen=True)
class Result:
    feature: str
    name: str
    problem: str | None  # None: passed


def load() -> dict[str, list[dict[str, Any]]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(CASES.glob("*.json"))}


def same_json(got: Any, expected: Any) -> bool:
    """Equal as JSON text, not only as values: the keys of each object in the same order and
    each number written the same (`1` is not `1.0`), as Step Functions' output is compared."""
    return json.dumps(got) == json.dumps(expected)


def check(case: dict[str, Any]) -> str | None:
    """Why a case fails, or None."""
    try:
        machine = parse(case["definition"], case["name"])
    except DefinitionError as exc:
        if "invalid" in case and case["invalid"] in str(exc):
            return None
        return f"refused at load: {exc}"
    if "invalid" in case:
        return f"expected the definition to be refused ({case['invalid']}), it loaded"
    return _outcome(case, _run(case, machine))


def _outcome(case: dict[str, Any], run: ExecutionResult) -> str | None:
    """Why a run is not what the case expects, or None."""
    if "status" in case:
        if run.status != case["status"]:
            return f"expected status {case['status']}, got {run.status} {run.output!r} {run.error}"
    elif "error" in case:
        if run.status != "FAILED" or run.error != case["error"]:
            return f"expected error {case['error']}, got {run.status} {run.error} {run.output!r}"
        if "cause" in case and run.cause != case["cause"]:
            return f"expected cause {case['cause']!r}, got {run.cause!r}"
    elif run.status != "SUCCEEDED" or not same_json(run.output, case["output"]):
        return f"expected output {case['output']!r}, got {run.status} {run.output!r} {run.error} {run.cause}"
    if "seconds" in case and run.seconds != case["seconds"]:
        return f"expected {case['seconds']} s, took {run.seconds}"
    if "seconds_at_most" in case and not 0 <= run.seconds <= case["seconds_at_most"]:
        return f"expected at most {case['seconds_at_most']} s, took {run.seconds}"
    if "transitions" in case and run.transitions != case["transitions"]:
        return f"expected {case['transitions']} transitions, made {run.transitions}"
    return None


@functools.cache
def _session() -> Any:
    import boto3

    return boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )


def _run(case: dict[str, Any], machine: Any) -> ExecutionResult:
    if "mock_config" in case:
        mocked = Mocks(select(case["mock_config"], "M", case["test_case"], machine, case["name"]))
        return run_state_machine(machine, case["input"], functions=functions(), mocks=mocked)
    if "s3" not in case:
        return run_state_machine(machine, case["input"], functions=functions())
    # A case that reads or writes S3 runs against moto's S3, in process.
    from moto import mock_aws
    from shepherd.adapters.services import AwsServices

    with mock_aws():
        # One session for every case: it loads each service's model once (a second).
        session = _session()
        s3 = session.client("s3", region_name="us-east-1")
        for bucket, objects in case["s3"].items():
            s3.create_bucket(Bucket=bucket)
            for key, body in objects.items():
                s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
        services = AwsServices(
            lambda name: s3 if name == "s3" else session.client(name, region_name="us-east-1")
        )
        return run_state_machine(
            machine,
            case["input"],
            functions=functions(),
            tasks=Integrations(call=services.call, region="us-east-1"),
        )


_CHECKED: dict[str, str | None] = {}


def checked(case: dict[str, Any]) -> str | None:
    """`check`, once per case per process (the test suite's per-case tests and its table test
    share the runs); a crash is a failed case, reported with the others."""
    key = json.dumps(case, sort_keys=True)
    if key not in _CHECKED:
        try:
            _CHECKED[key] = check(case)
        except Exception as exc:
            _CHECKED[key] = f"{type(exc).__name__}: {exc}"
    return _CHECKED[key]


def run_all() -> list[Result]:
    return [
        Result(feature, case["name"], checked(case))
        for feature, cases in load().items()
        for case in cases
    ]


def table(results: list[Result]) -> str:
    features = sorted({r.feature for r in results})
    lines = [f"{'feature':<12} {'passed':>6} {'failed':>6}"]
    for feature in features:
        mine = [r for r in results if r.feature == feature]
        failed = sum(1 for r in mine if r.problem)
        lines.append(f"{feature:<12} {len(mine) - failed:>6} {failed:>6}")
    failed = sum(1 for r in results if r.problem)
    lines.append(f"{'total':<12} {len(results) - failed:>6} {failed:>6}")
    lines += [f"FAILED {r.feature}: {r.name}: {r.problem}" for r in results if r.problem]
    return "\n".join(lines)
