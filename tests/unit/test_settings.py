"""Every environment variable Shepherd reads goes through the settings model (issue 13)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError
from shepherd.settings import (
    ENV_LOG_STREAM,
    ENV_SERVICE,
    ENV_SWEEP_INTERVAL,
    ENV_SWEEP_TICKS,
    ENV_SWEEP_WINDOW,
    ENV_TABLE,
    ENV_TRACING,
    Settings,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = {ENV_TABLE: "shepherd"}


def test_the_supervisor_timing_tracing_and_worker_are_settings() -> None:
    settings = Settings.from_env(
        {
            **BASE,
            ENV_SWEEP_INTERVAL: "2.5",
            ENV_SWEEP_WINDOW: "55",
            ENV_SWEEP_TICKS: "https://sqs.example/ticks",
            ENV_TRACING: "TRUE",
            ENV_LOG_STREAM: "2026/11/22/[$LATEST]abc",
        }
    )
    assert settings.sweep_interval_seconds == 2.5
    assert settings.sweep_window_seconds == 55
    assert settings.sweep_ticks_url == "https://sqs.example/ticks"
    assert settings.tracing is True
    assert settings.worker_id == "2026/11/22/[$LATEST]abc"
    assert Settings.from_env(settings.to_env()).model_dump() == {
        **settings.model_dump(),
        "worker_id": "agent",  # Lambda's, never Shepherd's to set
    }


def test_the_defaults_are_those_the_handlers_had() -> None:
    settings = Settings.from_env(BASE)
    assert settings.sweep_interval_seconds == 5
    assert settings.sweep_window_seconds == 0
    assert settings.sweep_ticks_url is None
    assert settings.tracing is False
    assert Settings.tracing_from_env({}) is False
    assert settings.worker_id == "agent"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        (ENV_SWEEP_INTERVAL, "soon", "sweep_interval_seconds"),
        (ENV_SWEEP_INTERVAL, "0", "sweep_interval_seconds"),
        (ENV_SWEEP_WINDOW, "-1", "sweep_window_seconds"),
        (ENV_TRACING, "maybe", ENV_TRACING),
    ],
)
def test_a_bad_value_is_a_clear_error(name: str, value: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        Settings.from_env({**BASE, name: value})


def test_the_service_is_the_deployments_own_name() -> None:
    """The dimension of every engine metric: a stack sets its own, so two stacks' series
    differ; outside a stack (local, tests) the default."""
    assert Settings.service_from_env("shepherd", {ENV_SERVICE: "Prod-Shepherd"}) == "Prod-Shepherd"
    assert Settings.service_from_env("shepherd", {ENV_SERVICE: " "}) == "shepherd"
    assert Settings.service_from_env("shepherd", {}) == "shepherd"


def test_tracing_alone_is_read_as_the_model_reads_it() -> None:
    assert Settings.tracing_from_env({ENV_TRACING: "on"}) is True
    assert Settings.tracing_from_env({ENV_TRACING: "0"}) is False
    with pytest.raises(ValueError, match=ENV_TRACING):
        Settings.tracing_from_env({ENV_TRACING: "maybe"})


def _env_reads(path: Path) -> list[str]:
    """The `os.environ` / `os.getenv` reads in a file, as `file:line`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in {"environ", "getenv"}
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_only_the_settings_model_reads_the_environment_in_the_runtime() -> None:
    reads = [
        read
        for folder in ("functions", "layers/shepherd/python/shepherd")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for read in _env_reads(path)
    ]
    assert all(read.startswith("layers/shepherd/python/shepherd/settings.py") for read in reads), (
        reads
    )


def test_schedule_firings_are_owned_by_the_schedule_owner() -> None:
    """Source `shepherd.schedule` maps to `schedule_owner` (default: a name no caller has);
    an explicit `event_owners` entry still wins; the owner round-trips through the
    environment, and is an IAM principal ARN or a `<word>:<word>` name."""
    from shepherd.settings import DEFAULT_SCHEDULE_OWNER, ENV_SCHEDULE_OWNER, Settings

    base = {"table": "shepherd", "definitions_dir": Path("statemachines")}
    plain = Settings.model_validate(base)
    assert plain.owner_of("shepherd.schedule") == DEFAULT_SCHEDULE_OWNER == "shepherd:schedules"
    assert plain.owner_of("acme.orders") is None
    assert ENV_SCHEDULE_OWNER not in plain.to_env()
    role = "arn:aws:iam::123456789012:role/Reports"
    owned = Settings.model_validate({**base, "schedule_owner": role})
    assert owned.owner_of("shepherd.schedule") == role
    assert Settings.from_env(owned.to_env()).schedule_owner == role
    mapped = Settings.model_validate({**base, "event_owners": {"shepherd.schedule": role}})
    assert mapped.owner_of("shepherd.schedule") == role
    for bad in ("", "alice", "not an owner", "a:b:c d"):
        with pytest.raises(ValidationError):
            Settings.model_validate({**base, "schedule_owner": bad})
