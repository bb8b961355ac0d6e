"""Amazon States Language files are definitions (issue 42.1): `<name>.asl.json` or
`.asl.yaml` in a definitions folder is loaded by the one definitions loader as workflow type
`<name>`, validated on load (errors name the file, the state and the field), with no
Shepherd-specific field; its Lambda tasks give its agents and pools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shepherd.definitions import check_agents, load_directory, parse_definition
from shepherd.errors import DefinitionError

HELLO = {
    "Comment": "A Hello World example of the Amazon States Language using a Task state",
    "StartAt": "HelloWorld",
    "States": {
        "HelloWorld": {
            "Type": "Task",
            "Resource": "arn:aws:lambda:us-east-1:123456789012:function:HelloFunction:live",
            "End": True,
        }
    },
}

INVOKE = {
    "StartAt": "Call",
    "States": {
        "Call": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": "charge-card:3", "Payload.$": "$"},
            "TimeoutSeconds": 30,
            "HeartbeatSeconds": 10,
            "Next": "Done",
        },
        "Done": {"Type": "Succeed"},
    },
}


def _folder(tmp_path: Path, **files: object) -> Path:
    for name, body in files.items():
        text = body if isinstance(body, str) else json.dumps(body)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_an_asl_file_is_a_definition_of_its_workflow_type(tmp_path: Path) -> None:
    native = {
        "Name": "native",
        "Steps": [{"Name": "a", "Agent": "a", "Pool": "p", "TimeoutSeconds": 5}],
    }
    found = load_directory(
        _folder(
            tmp_path,
            **{"hello.asl.json": HELLO, "native.json": native},
        )
    )
    assert sorted(found) == ["hello", "native"]
    hello = found["hello"]
    assert hello.name == "hello" and hello.steps == ()
    assert hello.machine.start_at == "HelloWorld"
    # The function's name (no ARN, no alias) is the agent; no setting: the default pool.
    assert [(t.agent, t.pool) for t in hello.tasks] == [("HelloFunction", "asl")]
    assert found["native"].machine is None


def test_yaml_and_lambda_invoke_and_pools_from_the_settings(tmp_path: Path) -> None:
    import yaml

    folder = _folder(tmp_path, **{"pay.asl.yaml": yaml.safe_dump(INVOKE)})
    (task,) = load_directory(folder)["pay"].tasks
    assert (task.agent, task.pool, task.timeout_seconds, task.heartbeat_seconds) == (
        "charge-card",
        "asl",
        30,
        10,
    )
    assert task.retry.max_attempts == 0  # ASL's retriers decide retries
    mapped = load_directory(folder, asl_pool="lambdas", asl_pools={"charge-card": "payments"})
    assert mapped["pay"].tasks[0].pool == "payments"
    other = load_directory(folder, asl_pool="lambdas")
    assert other["pay"].tasks[0].pool == "lambdas"


def test_errors_name_the_file_the_state_and_the_field(tmp_path: Path) -> None:
    bad = {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "Nowhere"}}}
    broken = "{not json"
    folder = _folder(tmp_path, **{"bad.asl.json": bad, "broken.asl.json": broken})
    with pytest.raises(DefinitionError) as err:
        load_directory(folder)
    text = str(err.value)
    assert f"{folder / 'bad.asl.json'}: States.A.Next: 'Nowhere' is not a state" in text
    assert f"{folder / 'broken.asl.json'}: not valid JSON" in text
    assert "Traceback" not in text


def test_a_workflow_type_must_be_a_valid_name(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError) as err:
        load_directory(_folder(tmp_path, **{"Hello-World.asl.json": HELLO}))
    assert "Hello-World.asl.json: Name:" in str(err.value)


def test_the_agents_its_lambda_tasks_name_are_checked(tmp_path: Path) -> None:
    hello = load_directory(_folder(tmp_path, **{"hello.asl.json": HELLO}))["hello"]
    check_agents(hello, {"HelloFunction"}, "hello.asl.json")
    with pytest.raises(DefinitionError) as err:
        check_agents(hello, {"HelloFunctions"}, "hello.asl.json")
    assert "the Lambda function 'HelloFunction' is no registered agent" in str(err.value)
    assert "did you mean 'HelloFunctions'?" in str(err.value)


def test_its_version_holds_the_machine_and_a_native_one_keeps_its_hash(tmp_path: Path) -> None:
    hello = load_directory(_folder(tmp_path, **{"hello.asl.json": HELLO}))["hello"]
    again = parse_definition(hello.model_dump(mode="json", by_alias=True), "snapshot")
    assert again.content_hash == hello.content_hash and again.machine is not None
    changed = dict(HELLO, Comment="another")
    other = load_directory(_folder(tmp_path, **{"hello.asl.json": changed}))["hello"]
    assert other.content_hash != hello.content_hash
    native = parse_definition(
        {"Name": "n", "Steps": [{"Name": "a", "Agent": "a", "Pool": "p", "TimeoutSeconds": 5}]},
        "n.yaml",
    )
    assert "StateMachine" not in native.canonical_json
    assert "LambdaPool" not in native.canonical_json


def test_a_native_definition_still_needs_a_step() -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition({"Name": "n", "Steps": []}, "n.yaml")
    assert "n.yaml: Steps: must have at least 1 step" in str(err.value)


def test_the_project_names_the_pools_of_its_lambda_tasks(tmp_path: Path) -> None:
    from shepherd.project import Project, ProjectError
    from shepherd.testing import MemoryEngine

    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "pay.asl.json").write_text(json.dumps(INVOKE))
    (tmp_path / "flows" / "hello.asl.json").write_text(json.dumps(HELLO))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nasl-pool = "lambdas"\n'
        'asl-pools = {charge-card = "payments"}\n'
    )
    project = Project.find(tmp_path)
    assert (project.asl_pool, project.asl_pools) == ("lambdas", (("charge-card", "payments"),))
    engine = MemoryEngine.from_project(tmp_path)
    pools = {d.name: [t.pool for t in d.tasks] for d in engine.definitions.values()}
    assert pools == {"pay": ["payments"], "hello": ["lambdas"]}
    (tmp_path / "pyproject.toml").write_text('[tool.shepherd]\nasl-pool = "Not A Pool"\n')
    with pytest.raises(ProjectError, match="asl-pool: 'Not A Pool' is not a pool name"):
        Project.find(tmp_path)
