"""`shepherd console`: prints its URL, serves the page and the API through it, stops on a signal;
a deployed API without credentials is refused before anything is served."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from shepherd_cli.local import LocalStack

SHEPHERD = str(Path(sys.executable).with_name("shepherd"))


def first_line(proc: subprocess.Popen[str], seconds: float) -> str:
    """The process's first line of output, waiting at most `seconds`."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=seconds):
            raise AssertionError(f"no output within {seconds}s")
    return proc.stdout.readline()


@pytest.mark.e2e
def test_shepherd_console_prints_its_url_and_serves_the_api(local_stack: LocalStack) -> None:
    proc = subprocess.Popen(
        [SHEPHERD, "console", "--api", local_stack.api_url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = first_line(proc, 20)
        found = re.search(r"Shepherd console on (http://127\.0\.0\.1:\d+/)", line)
        assert found, line
        url = found.group(1)
        with urllib.request.urlopen(url, timeout=10) as page:  # noqa: S310 - our own URL
            assert b'name="shepherd-console-token"' in page.read()
        with urllib.request.urlopen(url + "api/definitions", timeout=10) as reply:  # noqa: S310
            assert b"order_fulfilment" in reply.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_a_deployed_api_without_credentials_is_refused_at_start(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("AWS_") or k == "AWS_DEFAULT_REGION"
    }
    env.update(
        {
            "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        }
    )
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    done = subprocess.run(
        [SHEPHERD, "console", "--api", "https://abc.execute-api.eu-west-1.amazonaws.com/v1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 1
    assert "no AWS credentials" in done.stderr and "Shepherd console on" not in done.stdout


def test_shepherd_local_applies_the_projects_pool_policies_unless_told_another(
    tmp_path: Path,
) -> None:
    """Issue 35.5: `shepherd local` with no --pool-policies takes the project's
    pool-policies.json, so a pool's circuit breaker (and the console's circuit view) is there
    on the local stack; this repository's gives the payments pool one."""
    from dataclasses import replace

    from shepherd_cli.main import _pool_policies, default_pool_policies
    from shepherd_cli.project import Project
    from support import ROOT

    project = Project.find(ROOT)
    found = default_pool_policies(project)
    assert found == str(ROOT / "pool-policies.json")
    policies = _pool_policies(found)
    assert policies["payments"].circuit_breaker is not None
    named = {
        line.split(":", 1)[1].strip()
        for path in (ROOT / "statemachines").glob("*.yaml")
        for line in path.read_text().splitlines()
        if line.strip().startswith("Pool:")
    }
    assert "payments" in named  # a pool the definitions name, so the policy applies
    assert default_pool_policies(replace(project, root=tmp_path)) is None
