"""Cold start: import time of each handler module, and the first engine build, in fresh processes.

Each run is a new interpreter (`python -c`), so nothing is imported yet; the medians of a few
runs are reported. The first engine build (settings, definitions, three boto3 clients) is what
the first invocation of a sandbox pays on top of the import; it needs no network.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

HANDLERS = ("api", "agent", "supervisor", "callbacks", "events")

PROBE = """
import json, os, time
t0 = time.perf_counter()
import shepherd_handlers.{name} as handler_module
t1 = time.perf_counter()
from shepherd_handlers import runtime
runtime.engine().ports
t2 = time.perf_counter()
print(json.dumps({{"import_ms": (t1 - t0) * 1000, "engine_ms": (t2 - t1) * 1000}}))
"""

ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "SHEPHERD_TABLE": "shepherd",
    "SHEPHERD_QUEUE_URLS": json.dumps({"cloud": "http://127.0.0.1:1/q"}),
    "SHEPHERD_EVENT_BUS": "shepherd",
    "POWERTOOLS_SERVICE_NAME": "shepherd",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
}


def _run(code: str) -> dict[str, float]:
    env = {**os.environ, **ENV}
    env.pop("AWS_PROFILE", None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run_coldstart(runs: int = 5) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in HANDLERS:
        samples = [_run(PROBE.format(name=name)) for _ in range(runs)]
        rows.append(
            {
                "handler": f"shepherd_handlers.{name}",
                "runs": runs,
                "import_ms_median": statistics.median(s["import_ms"] for s in samples),
                "import_ms_min": min(s["import_ms"] for s in samples),
                "engine_ms_median": statistics.median(s["engine_ms"] for s in samples),
            }
        )
    return rows


def heaviest_packages(name: str = "api", top: int = 8) -> list[dict[str, Any]]:
    """`python -X importtime`: self time summed by top-level package, heaviest first."""
    env = {**os.environ, **ENV}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import shepherd_handlers.{name}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    by_package: dict[str, int] = {}
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, module = (part.strip() for part in line[12:].split("|"))
        package = module.split(".")[0]
        by_package[package] = by_package.get(package, 0) + int(self_us)
    ranked = sorted(by_package.items(), key=lambda kv: -kv[1])[:top]
    return [{"package": p, "self_ms": us / 1000} for p, us in ranked]
