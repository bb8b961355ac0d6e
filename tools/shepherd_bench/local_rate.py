"""A pool's rate limit on the local stack (issue 26.1): the achieved rate of a limited pool
when far more of its tasks are ready than the limit lets through. A project of its own in a
temporary folder (one step in pool `limited`); 127.0.0.1; bounded in count and time.

    python -m shepherd_bench.local_rate --workflows 120 --per-second 5

Every workflow is started at once; each step returns the moment it ran. The achieved rate is
measured over the steady stretch (after the first `Burst` runs, which a full bucket lets
through at once): runs a second, and (runs - 1) / (last - first). `--write` stores the result
under `pools.local_stack_rate` in docs/benchmarks.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from shepherd_cli.client import Api
from shepherd_cli.local import LocalStack
from shepherd_cli.project import Project

ROOT = Path(__file__).resolve().parents[2]
POOL = "limited"
DEFINITION = f"""\
Name: ping
Steps:
  - Name: call
    Agent: call
    Pool: {POOL}
    TimeoutSeconds: 30
"""
AGENT = """\
import time

from shepherd.engine.agent import AgentRegistry

registry = AgentRegistry()


@registry.agent("call")
def call(ctx):
    return {"ran_at": time.time()}
"""
LIMIT_SECONDS = 300  # the whole run, start-up included, gives up after this


def _project(folder: Path) -> None:
    (folder / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nagent-modules = ["rate_agents"]\n'
    )
    (folder / "flows").mkdir()
    (folder / "flows" / "ping.yaml").write_text(DEFINITION)
    (folder / "rate_agents.py").write_text(AGENT)


def _ran_at(api: Api, workflow_id: str) -> float | None:
    view = api.call("GET", f"/workflows/{workflow_id}")
    if view["status"] != "SUCCEEDED":
        return None
    return float(view["output"]["call"]["ran_at"])


def measure(workflows: int, per_second: float, burst: int) -> dict[str, Any]:
    """Start `workflows` at once against a pool limited to `per_second`; the rate achieved."""
    deadline = time.monotonic() + LIMIT_SECONDS
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _project(folder)
        policy = {POOL: {"RateLimit": {"PerSecond": per_second, "Burst": burst}}}
        with LocalStack(
            project=Project.find(folder),
            port=0,
            workers=2,
            sweep_interval=0.5,
            state_dir=folder / ".shepherd",
            pool_policies=policy,
        ) as stack:
            api = Api(stack.api_url)
            with ThreadPoolExecutor(8) as pool:
                ids = list(
                    pool.map(lambda _: api.start("ping", {})["workflow_id"], range(workflows))
                )
            ran: dict[str, float] = {}
            while len(ran) < workflows and time.monotonic() < deadline:
                for workflow_id in ids:
                    if workflow_id not in ran and (at := _ran_at(api, workflow_id)) is not None:
                        ran[workflow_id] = at
                time.sleep(0.5)
    if len(ran) < workflows:
        raise RuntimeError(f"{len(ran)} of {workflows} workflows finished in {LIMIT_SECONDS}s")
    times = sorted(ran.values())
    steady = times[burst:]  # a full bucket lets `burst` through at once
    span = steady[-1] - steady[0]
    first = int(steady[0])
    per_second_counts = [0] * (int(steady[-1]) - first + 1)
    for t in steady:
        per_second_counts[int(t) - first] += 1
    whole = per_second_counts[1:-1]  # the first and last seconds are partial
    achieved = (len(steady) - 1) / span
    return {
        "workflows": workflows,
        "per_second": per_second,
        "burst": burst,
        "achieved_per_second": round(achieved, 3),
        "error_vs_limit": round(abs(achieved - per_second) / per_second, 4),
        "whole_seconds": len(whole),
        "per_second_min": min(whole) if whole else None,
        "per_second_max": max(whole) if whole else None,
        "per_second_median": statistics.median(whole) if whole else None,
        "steady_seconds": round(span, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench.local_rate")
    parser.add_argument("--workflows", type=int, default=120)
    parser.add_argument("--per-second", type=float, default=5)
    parser.add_argument("--burst", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="store it in docs/benchmarks.json")
    args = parser.parse_args(argv)
    result = measure(args.workflows, args.per_second, args.burst)
    print(json.dumps(result, indent=1))
    print(
        f"limit {result['per_second']:g}/s: achieved {result['achieved_per_second']:.2f}/s over "
        f"{result['steady_seconds']} s ({100 * result['error_vs_limit']:.1f} % off; whole "
        f"seconds {result['per_second_min']}..{result['per_second_max']})"
    )
    if args.write:
        path = ROOT / "docs" / "benchmarks.json"
        results = json.loads(path.read_text())
        results.setdefault("pools", {})["local_stack_rate"] = result
        path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0 if result["error_vs_limit"] <= 0.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
