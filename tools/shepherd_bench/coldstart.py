"""Cold start: import time of each handler module, and the first engine build, in fresh processes.

Each run is a new interpreter (`python -c`), so nothing is imported yet; the medians of a few
runs are reported, beside the median of a bare `import boto3` measured in the same rounds
(rounds interleave the baseline and every handler, so a busy moment of the machine weighs on
all of them alike). The first engine build (settings, the definitions as the stack ships them:
canonical JSON, the boto3 clients) is what the first invocation of a sandbox pays on top of
the import; it needs no network. Tracing is off, as deployed by default (`SHEPHERD_TRACING`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HANDLERS = ("api", "agent", "supervisor", "callbacks", "events", "stream")

PROBE = """
import json, os, time
t0 = time.perf_counter()
import shepherd_handlers.{name} as handler_module
t1 = time.perf_counter()
import boto3  # what a handler that defers it pays first (0 if its import already loaded it)
tb = time.perf_counter()
from shepherd_handlers import runtime
built = runtime.engine()
built.ports
t2 = time.perf_counter()
built.engine
t3 = time.perf_counter()
print(json.dumps({{
    "import_ms": (t1 - t0) * 1000,
    "engine_ms": (t3 - t1) * 1000,
    "clients_ms": (t2 - t1) * 1000,
    "boto3_ms": (tb - t1) * 1000,
    "modules": sorted(m.split(".")[0] for m in __import__("sys").modules),
}}))
"""

BASELINE = """
import json, time
t0 = time.perf_counter()
import boto3
print(json.dumps({"import_ms": (time.perf_counter() - t0) * 1000}))
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
    # Nothing compiled ahead is read, as on Lambda (whose code directory is read-only):
    # `make`'s bytecode cache (PYTHONPYCACHEPREFIX) is left out, and nothing is written.
    "PYTHONDONTWRITEBYTECODE": "1",
}


def _run(code: str, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    env = {**os.environ, **ENV, **(extra_env or {})}
    for name in ("AWS_PROFILE", "SHEPHERD_TRACING", "PYTHONPYCACHEPREFIX"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _deployed_definitions(target: Path) -> Path:
    """The definitions as the stack ships them (canonical JSON, /opt/statemachines/)."""
    from shepherd.definitions import load_directory

    root = Path(__file__).resolve().parents[2] / "statemachines"
    for name, definition in load_directory(root).items():
        (target / f"{name}.json").write_text(definition.canonical_json, encoding="utf-8")
    return target


def run_coldstart(runs: int = 5) -> dict[str, Any]:
    """Per handler: import and first engine build (medians), and the import's ratio to a bare
    `import boto3` measured in the same rounds."""
    from shepherd.settings import ENV_DEFINITIONS_DIR

    baseline: list[float] = []
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in HANDLERS}
    with tempfile.TemporaryDirectory(prefix="shepherd-coldstart-") as tmp:
        env = {ENV_DEFINITIONS_DIR: str(_deployed_definitions(Path(tmp)))}
        for _round in range(runs):
            baseline.append(float(_run(BASELINE)["import_ms"]))
            for name in HANDLERS:
                samples[name].append(_run(PROBE.format(name=name), env))
    boto3_ms = statistics.median(baseline)
    rows: list[dict[str, Any]] = []
    for name in HANDLERS:
        runs_of = samples[name]
        import_ms = statistics.median(s["import_ms"] for s in runs_of)
        rows.append(
            {
                "handler": f"shepherd_handlers.{name}",
                "runs": runs,
                "import_ms_median": import_ms,
                "import_ms_min": min(s["import_ms"] for s in runs_of),
                "import_vs_boto3": import_ms / boto3_ms,
                "engine_ms_median": statistics.median(s["engine_ms"] for s in runs_of),
                "clients_ms_median": statistics.median(s["clients_ms"] for s in runs_of),
                "boto3_in_build_ms_median": statistics.median(s["boto3_ms"] for s in runs_of),
                "engine_after_boto3_ms_median": statistics.median(
                    s["engine_ms"] - s["boto3_ms"] for s in runs_of
                ),
                "imports_xray": any("aws_xray_sdk" in s["modules"] for s in runs_of),
            }
        )
    return {
        "boto3_import_ms_median": boto3_ms,
        "boto3_import_ms_min": min(baseline),
        "runs": runs,
        "targets": {"import_vs_boto3_max": 1.5, "engine_ms_max": 50.0},
        "handlers": rows,
    }


def heaviest_packages(name: str = "api", top: int = 8) -> list[dict[str, Any]]:
    """`python -X importtime`: self time summed by top-level package, heaviest first."""
    env = {**os.environ, **ENV}
    env.pop("PYTHONPYCACHEPREFIX", None)
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
