"""The local loop (issue 27): how long a changed agent takes to run on a running `shepherd
local`, and how long `shepherd run` of a one-step workflow takes on it (and, for comparison,
with a stack of its own: `--fresh`). A project of its own in a temporary folder; 127.0.0.1.

    python -m shepherd_bench.local_loop --rounds 5

A reload is timed from the moment the agent file is saved to the moment the new code starts
running (the agent returns the time it ran); a workflow is started every 0.1 s meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shepherd_cli.client import Api
from shepherd_cli.local import LocalStack
from shepherd_cli.project import Project

DEFINITION = """\
Name: hello
Steps:
  - Name: greet
    Agent: greet
    Pool: work
    TimeoutSeconds: 10
    HeartbeatSeconds: 5
"""
AGENT = """\
import time

from shepherd.engine.agent import AgentRegistry

registry = AgentRegistry()


@registry.agent("greet")
def greet(ctx):
    return {{"version": {version}, "ran_at": time.time()}}
"""


def _project(folder: Path) -> None:
    (folder / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nagent-modules = ["bench_agents"]\n'
    )
    (folder / "flows").mkdir()
    (folder / "flows" / "hello.yaml").write_text(DEFINITION)
    (folder / "bench_agents.py").write_text(AGENT.format(version=0))


def _reload_seconds(api: Api, folder: Path, version: int, limit: float = 30) -> float:
    """Save a new version of the agent; seconds until it first ran."""
    saved = time.time()
    (folder / "bench_agents.py").write_text(AGENT.format(version=version))
    started: list[str] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        started.append(api.start("hello", {})["workflow_id"])
        for workflow_id in list(started):
            view = api.call("GET", f"/workflows/{workflow_id}")
            if view["status"] in ("SUCCEEDED", "FAILED"):
                started.remove(workflow_id)
                greet = (view.get("output") or {}).get("greet") or {}
                if greet.get("version") == version:
                    return float(greet["ran_at"]) - saved
        time.sleep(0.1)
    raise RuntimeError(f"version {version} did not run within {limit}s")


def _run_seconds(folder: Path, *extra: str) -> float:
    exe = str(Path(sys.executable).with_name("shepherd"))
    t0 = time.monotonic()
    result = subprocess.run(
        [exe, "run", "hello", *extra],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    if result.returncode != 0:
        raise RuntimeError(result.stdout + result.stderr)
    return time.monotonic() - t0


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 2),
        "max_s": round(max(values), 2),
        "each_s": [round(v, 2) for v in values],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shepherd_bench.local_loop", description=__doc__
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _project(folder)
        fresh = [_run_seconds(folder, "--fresh") for _ in range(min(2, args.rounds))]
        with LocalStack(
            project=Project.find(folder),
            state_dir=folder / ".shepherd",
            port=0,
            workers=1,
            sweep_interval=1.0,
            reload=True,
            advertise=True,
        ) as stack:
            api = Api(stack.api_url)
            _run_seconds(folder)  # the first run: sandboxes and workers warm
            reloads = [_reload_seconds(api, folder, n) for n in range(1, args.rounds + 1)]
            runs = [_run_seconds(folder) for _ in range(args.rounds)]
    result = {
        "changed_agent_runs_after": _summary(reloads),
        "shepherd_run_on_running_stack": _summary(runs),
        "shepherd_run_fresh_stack": _summary(fresh),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
