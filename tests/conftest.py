"""Shared fixtures. AWS calls only ever reach moto: fake credentials, a fixed region."""

from __future__ import annotations

import os

for _key, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}.items():
    os.environ[_key] = _value
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)

import shutil  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import timing_report  # noqa: E402
from shepherd_cli.local import LocalStack  # noqa: E402
from shepherd_cli.project import Project  # noqa: E402
from support import ROOT, Harness, engine_stores, memory_harness, moto_harness  # noqa: E402

SHARED_STACK = "local_stack"
# State machines the shared local stack runs beside the example definitions (issue 38's
# integrations against its moto: tests/e2e/test_local_stack.py). Kept out of `statemachines/`,
# the example app that `make demo` runs and the CDK app deploys.
E2E_MACHINES = ROOT / "tests" / "e2e" / "statemachines"


@pytest.fixture(params=engine_stores())
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The engine over the in-memory store (and over DynamoDB on moto when
    SHEPHERD_ENGINE_STORES asks: support.ENGINE_STORES)."""
    if request.param == "memory":
        yield memory_harness()
    else:
        with moto_harness() as h:
            yield h


@pytest.fixture
def moto_engine() -> Iterator[Harness]:
    with moto_harness() as h:
        yield h


CONFIG_POOL_POLICY = {
    "RateLimit": {"PerSecond": 1000, "Burst": 1000},
    "CircuitBreaker": {
        "FailureRatio": 1,
        "MinimumAttempts": 1_000_000,
        "WindowSeconds": 60,
        "CooldownSeconds": 60,
    },
}


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """One local stack (moto server, control process, agent workers) for every test that needs
    one: the end-to-end tests and the console's browser tests. It runs the example definitions
    and the state machines of E2E_MACHINES. They run last, together
    (`pytest_collection_modifyitems`), so the stack lives only while they run. Callers keep
    apart by caller identity; a test that pauses a pool resumes it (as an operator: the e2e
    and console callers are the stack's operators)."""
    from shepherd_cli.apigw import caller_arn

    state = tmp_path_factory.mktemp("shepherd-local")
    project = Project.find(ROOT)
    definitions = tmp_path_factory.mktemp("definitions")
    for source in (project.definitions_dir, E2E_MACHINES):
        for path in source.iterdir():
            if path.is_file():
                shutil.copy2(path, definitions / path.name)
    with LocalStack(
        project=replace(project, definitions_dir=definitions),
        port=0,
        workers=2,
        sweep_interval=0.5,
        state_dir=state,
        operators=[caller_arn(name) for name in ("e2e", "console")],
        # One pool with a rate limit and a breaker, for the console's pools page: generous
        # enough that no other test meets either (the breaker never opens on its own).
        pool_policies={"config": CONFIG_POOL_POLICY},
        events_tap=True,  # the e2e tests read lifecycle events from it
    ) as running:
        yield running
    for pid in running.pids():
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"process {pid} survived"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def pytest_configure(config: pytest.Config) -> None:
    timing_report.register(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on the shared local stack go last, in their order, so it starts once and stops
    when they are done instead of idling under the rest of the suite."""
    shared = [i for i in items if SHARED_STACK in getattr(i, "fixturenames", ())]
    if shared:
        others = [i for i in items if SHARED_STACK not in getattr(i, "fixturenames", ())]
        items[:] = others + shared
