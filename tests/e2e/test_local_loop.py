"""The local loop (issue 27): a running `shepherd local` takes up changed agent code and
definitions without a restart (moto, and so every workflow, stays), and `shepherd run` runs on
it instead of starting a stack of its own. A project of its own, in a temporary folder: a
one-step definition and an agent module that says which version of it ran. Bounded waits."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shepherd_cli.client import Api
from shepherd_cli.local import LocalStack
from shepherd_cli.project import Project

pytestmark = pytest.mark.e2e

DEFINITION = """\
Name: hello
Steps:
  - Name: greet
    Agent: greet
    Pool: work
    TimeoutSeconds: 10
    HeartbeatSeconds: 5
"""
SECOND_STEP = """\
  - Name: wave
    DependsOn: [greet]
    Agent: wave
    Pool: waving
    TimeoutSeconds: 10
    HeartbeatSeconds: 5
"""


def agents(version: int) -> str:
    return textwrap.dedent(
        f"""\
        from shepherd.engine.agent import AgentRegistry

        registry = AgentRegistry()


        @registry.agent("greet")
        def greet(ctx):
            return {{"version": {version}}}


        @registry.agent("wave")
        def wave(ctx):
            return {{"waved": {version}}}
        """
    )


def _project(root: Path) -> Path:
    (root / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nagent-modules = ["loop_agents"]\n'
    )
    (root / "flows").mkdir()
    (root / "flows" / "hello.yaml").write_text(DEFINITION)
    (root / "loop_agents.py").write_text(agents(1))
    return root


@contextlib.contextmanager
def _stack(project: Path) -> Iterator[LocalStack]:
    with LocalStack(
        project=Project.find(project),
        state_dir=project / ".shepherd",
        port=0,
        workers=1,
        sweep_interval=0.5,
        reload=True,
        advertise=True,
    ) as running:
        yield running


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _project(tmp_path)


@pytest.fixture(scope="module")
def changed_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("changed"))


@pytest.fixture(scope="module")
def changed_stack(changed_project: Path) -> Iterator[LocalStack]:
    """One stack for the two tests that change their project for good, in the module's order
    (issue 36: a stack start each): the changed definition's test first, which leaves the
    agents as they were; the changed agents' test then runs on that definition and counts
    the reloads it causes itself. Either test alone (`-k`) starts the stack as it was."""
    with _stack(changed_project) as running:
        yield running


@pytest.fixture(scope="module")
def kept_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("kept"))


@pytest.fixture(scope="module")
def kept_stack(kept_project: Path) -> Iterator[LocalStack]:
    """One stack for the tests that leave their project as they found it (issue 36: a stack
    start each was most of their time)."""
    with _stack(kept_project) as running:
        yield running


def finish(api: Api, wf_type: str = "hello", seconds: float = 60) -> dict[str, Any]:
    workflow_id = api.start(wf_type, {})["workflow_id"]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view = dict(api.call("GET", f"/workflows/{workflow_id}"))
        if view["status"] in ("SUCCEEDED", "COMPENSATED", "FAILED", "CANCELLED"):
            return view
        time.sleep(0.2)
    raise AssertionError(f"{workflow_id} did not finish: {view}")


def shepherd_run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).with_name("shepherd"))
    return subprocess.run(
        [exe, "run", "hello", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_shepherd_run_uses_the_running_stack_and_waits_for_a_changed_definition(
    changed_stack: LocalStack, changed_project: Path
) -> None:
    stack, project = changed_stack, changed_project
    result = shepherd_run(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"on the running local stack at {stack.api_url}" in result.stdout
    # A new step on a new pool: the stack makes its queue and worker, `run` waits for it.
    (project / "flows" / "hello.yaml").write_text(DEFINITION + SECOND_STEP)
    result = shepherd_run(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "on the running local stack" in result.stdout and "wave" in result.stdout
    view = finish(Api(stack.api_url))
    assert view["output"]["wave"] == {"waved": 1}


def test_changed_agent_code_runs_on_the_running_stack(
    changed_stack: LocalStack, changed_project: Path
) -> None:
    stack, project = changed_stack, changed_project
    api = Api(stack.api_url)
    first = finish(api)
    assert first["status"] == "SUCCEEDED" and first["output"]["greet"] == {"version": 1}
    moto, reloads = stack.moto_pid, stack.reloads
    (project / "loop_agents.py").write_text(agents(2))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the new code runs once the new workers are up
        view = finish(api)
        if view["output"]["greet"] == {"version": 2}:
            break
    assert view["output"]["greet"] == {"version": 2}
    assert stack.moto_pid == moto and stack.reloads > reloads  # no restart: the state stayed
    assert api.call("GET", f"/workflows/{first['workflow_id']}")["status"] == "SUCCEEDED"


def test_shepherd_run_without_a_running_stack_starts_one_on_the_ports_given(
    project: Path,
) -> None:
    from shepherd_cli.local import free_port

    port, moto_port = free_port(), free_port()
    result = shepherd_run(project, "--port", str(port), "--moto-port", str(moto_port))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "starting the local stack" in result.stdout
    logs = project / ".shepherd" / "run" / "logs"
    assert f"127.0.0.1:{port}" in (logs / "control.log").read_text()
    assert f"-p {moto_port}" in (logs / "moto.log").read_text()


def test_a_broken_definition_leaves_the_stack_as_it_was(
    kept_stack: LocalStack, kept_project: Path
) -> None:
    stack, project = kept_stack, kept_project
    reloads = stack.reloads
    definition = project / "flows" / "hello.yaml"
    definition.write_text("Name: hello\nSteps: nonsense\n")
    try:
        time.sleep(1.5)  # a few reload polls
        assert finish(Api(stack.api_url))["status"] == "SUCCEEDED"
        assert stack.reloads == reloads
        result = shepherd_run(project)  # `run` says why instead of running the old definition
        assert result.returncode == 1 and "hello.yaml: Steps" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        definition.write_text(DEFINITION)  # as found: the stack takes it up again


def test_a_default_stack_leaves_no_message_that_nobody_reads(kept_stack: LocalStack) -> None:
    """moto walks every message a queue holds on each send to it: a queue that fills for a
    day (the old events tap did) makes every later step slower. Once a workflow has ended,
    every queue of a stack started without `events_tap` is empty."""
    stack = kept_stack
    assert finish(Api(stack.api_url))["status"] == "SUCCEEDED"
    sqs = stack.client("sqs")
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    urls = sqs.list_queues()["QueueUrls"]
    assert urls and stack.events_tap_url == ""
    held: dict[str, int] = {}
    deadline = time.monotonic() + 20  # the last delete may still be on its way
    while time.monotonic() < deadline:
        held = {
            url.rsplit("/", 1)[1]: sum(
                int(value)
                for value in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)[
                    "Attributes"
                ].values()
            )
            for url in urls
        }
        if not any(held.values()):
            break
        time.sleep(0.5)
    assert not any(held.values()), held
