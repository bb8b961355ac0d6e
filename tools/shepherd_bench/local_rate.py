"""A pool's rate limit on the local stack (issue 26.1): the achieved rate of a limited pool
when far more of its tasks are ready than the limit lets through. A project of its own in a
temporary folder (one step in pool `limited`, the same step in pool `open` without a limit);
127.0.0.1; bounded in count and time.

    python -m shepherd_bench.local_rate --workflows 100 --per-second 5

Both pools are paused while every workflow is started, so that each pool has its whole
backlog ready when it is resumed and the starts (the API and the local "AWS" are one moto
process) do not share the measured stretch. First `open` drains its backlog: the rate the
stack can run this step at, with no limit (`capacity_per_second`): a limit above it cannot
be reached, whatever the limiter does. Then `limited` drains its own. Each step returns the
moment it ran. The achieved rate is measured over the steady stretch (after the first
`Burst` runs, which a full bucket lets through at once): runs a second, and
(runs - 1) / (last - first). `held` counts the tasks the limiter sent back to their queue
with a ticket (the worker logs' `held` outcomes): none means the limiter never had to hold
anything. `--write` stores the result under `pools.local_stack_rate` (or `--key`) in
docs/benchmarks.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shepherd_cli.client import Api
from shepherd_cli.local import LocalStack
from shepherd_cli.project import Project

from shepherd_bench import results as bench_results

POOL = "limited"
OPEN = "open"  # the same step without a limit: the stack's own rate
DEFINITION = """\
Name: {name}
Steps:
  - Name: call
    Agent: call
    Pool: {pool}
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
# Worker processes per pool: the pool's concurrency. A worker runs a batch's records one
# after another and sleeps for a slot under a second away, so at ~0.4 s of local "AWS" calls
# a limited task (this 2-CPU machine, under load) 2 workers ask for fewer than 5 tokens a
# second and the limiter never binds (issue 26.1: 0 held); 4 can ask faster than the limit.
WORKERS = 4


def _project(folder: Path) -> None:
    (folder / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nagent-modules = ["rate_agents"]\n'
    )
    (folder / "flows").mkdir()
    (folder / "flows" / "ping.yaml").write_text(DEFINITION.format(name="ping", pool=POOL))
    (folder / "flows" / "ping_open.yaml").write_text(DEFINITION.format(name="ping_open", pool=OPEN))
    (folder / "rate_agents.py").write_text(AGENT)


def _succeeded(api: Api, wf_type: str) -> int:
    counts = api.call("GET", "/workflows/counts", query={"type": wf_type})["counts"]
    return sum(int(c["count"]) for c in counts if c["status"] == "SUCCEEDED")


def _ran_at(api: Api, workflow_id: str) -> float | None:
    view = api.call("GET", f"/workflows/{workflow_id}")
    if view["status"] != "SUCCEEDED":
        return None
    return float(view["output"]["call"]["ran_at"])


def _drain(api: Api, pool: str, wf_type: str, ids: list[str], deadline: float) -> list[float]:
    """Resume `pool` and wait until its backlog ran (polling one count a second, so that the
    wait itself adds little load); when each of its steps ran."""
    api.call("POST", f"/pools/{pool}/resume")
    while _succeeded(api, wf_type) < len(ids) and time.monotonic() < deadline:
        time.sleep(1)
    ran = [at for i in ids if (at := _ran_at(api, i)) is not None]
    if len(ran) < len(ids):
        raise RuntimeError(f"{len(ran)} of {len(ids)} {wf_type} finished in {LIMIT_SECONDS}s")
    return sorted(ran)


def _held(logs: Path) -> int:
    """Tasks the limited pool's workers sent back with a ticket."""
    return sum(
        line.count('"outcome":"held"')
        for path in logs.glob(f"worker-{POOL}-*.log")
        for line in path.read_text().splitlines()
    )


def summarize(times: Sequence[float], per_second: float, burst: int) -> dict[str, Any]:
    """The rate `times` (when each task ran) achieved after the first `burst`, against
    `per_second`: over the steady stretch, and per whole second (the first and the last are
    partial, left out)."""
    steady = sorted(times)[burst:]  # a full bucket lets `burst` through at once
    span = steady[-1] - steady[0]
    first = int(steady[0])
    per_second_counts = [0] * (int(steady[-1]) - first + 1)
    for t in steady:
        per_second_counts[int(t) - first] += 1
    whole = per_second_counts[1:-1]
    achieved = (len(steady) - 1) / span
    return {
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


def measure(
    workflows: int, per_second: float, burst: int, workers: int = WORKERS
) -> dict[str, Any]:
    """Start `workflows` into each paused pool; drain `open` (the stack's rate), then
    `limited` (the rate its limit lets through)."""
    deadline = time.monotonic() + LIMIT_SECONDS
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _project(folder)
        policy = {POOL: {"RateLimit": {"PerSecond": per_second, "Burst": burst}}}
        with LocalStack(
            project=Project.find(folder),
            port=0,
            workers=workers,
            sweep_interval=0.5,
            state_dir=folder / ".shepherd",
            pool_policies=policy,
        ) as stack:
            api = Api(stack.api_url)
            for pool in (OPEN, POOL):
                api.call("POST", f"/pools/{pool}/pause")
            with ThreadPoolExecutor(8) as threads:
                ids = {
                    wf_type: list(
                        threads.map(
                            lambda _, t=wf_type: api.start(t, {})["workflow_id"],
                            range(workflows),
                        )
                    )
                    for wf_type in ("ping_open", "ping")
                }
            unlimited = _drain(api, OPEN, "ping_open", ids["ping_open"], deadline)
            limited = _drain(api, POOL, "ping", ids["ping"], deadline)
            held = _held(folder / ".shepherd" / "logs")
    capacity = (len(unlimited) - 1) / (unlimited[-1] - unlimited[0])
    return {
        "workflows": workflows,
        "workers": workers,
        **summarize(limited, per_second, burst),
        "capacity_per_second": round(capacity, 3),
        "held": held,
        # Every process of the stack shares this machine: its load says how comparable a run is.
        "load_average_1min": {"start": load_before, "end": os.getloadavg()[0]},
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench.local_rate")
    parser.add_argument("--workflows", type=int, default=100)
    parser.add_argument("--per-second", type=float, default=5)
    parser.add_argument("--burst", type=int, default=1)
    parser.add_argument("--workers", type=int, default=WORKERS, help="worker processes per pool")
    parser.add_argument("--write", action="store_true", help="store it in docs/benchmarks.json")
    parser.add_argument(
        "--key", default="local_stack_rate", help="where under `pools` --write stores it"
    )
    args = parser.parse_args(argv)
    result = measure(args.workflows, args.per_second, args.burst, args.workers)
    print(json.dumps(result, indent=1))
    print(
        f"limit {result['per_second']:g}/s: achieved {result['achieved_per_second']:.2f}/s over "
        f"{result['steady_seconds']} s ({100 * result['error_vs_limit']:.1f} % off; whole "
        f"seconds {result['per_second_min']}..{result['per_second_max']}; {result['held']} "
        f"held); the same step unlimited: {result['capacity_per_second']:.2f}/s"
    )
    if args.write:
        bench_results.store("pools", args.key, value=result)
    return 0 if result["error_vs_limit"] <= 0.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
