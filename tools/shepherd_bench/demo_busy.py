"""`make demo` on a busy machine (issue 28): the demo runs while CPU hogs (busy loops, twice
as many as the machine has cores) compete with every process of the local stack. The demo's
expectations must not race the clock: it must exit 0 every time.

    python -m shepherd_bench.demo_busy --runs 2 --hogs 4
    python -m shepherd_bench.demo_busy --runs 1 --hogs 0 --write   # as the machine is, stored

`--write` stores the runs under `demo` in docs/benchmarks.json (with the date and the load
average), where the README's demo time comes from (tests/handlers/test_docs_agree.py).

Bounded: each run has the demo's own time limit plus --grace seconds, after which it is
stopped and counted as failed; the hogs end with each run (and on any exit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def one_run(hogs: int, limit: float) -> dict[str, float | int]:
    """The demo under `hogs` busy loops (each ends by itself after `limit` seconds)."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=limit)]) for _ in range(hogs)
    ]
    t0 = time.monotonic()
    try:
        demo = subprocess.run(
            [sys.executable, "-m", "shepherd_cli.demo"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=limit,
            check=False,
            env={**os.environ, "NO_COLOR": "1"},
        )
        code = demo.returncode
        if code != 0:
            print(demo.stdout[-4000:], demo.stderr[-2000:], sep="\n", file=sys.stderr)
    except subprocess.TimeoutExpired:
        code = -1
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    return {"exit": code, "seconds": round(time.monotonic() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench.demo_busy", description=__doc__)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("--grace", type=float, default=120, help="beyond the demo's own limit")
    parser.add_argument(
        "--write", action="store_true", help="store under `demo` in benchmarks.json"
    )
    args = parser.parse_args(argv)
    from shepherd_cli.demo import TIME_LIMIT_SECONDS

    limit = TIME_LIMIT_SECONDS + args.grace
    runs = []
    load_start = os.getloadavg()[0]
    for n in range(args.runs):
        runs.append(one_run(args.hogs, limit))
        print(f"[demo_busy] run {n + 1}: {runs[-1]}", flush=True)
    result = {
        "hogs": args.hogs,
        "cores": os.cpu_count(),
        "runs": runs,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average_1min": {"start": round(load_start, 1), "end": round(os.getloadavg()[0], 1)},
    }
    print(json.dumps(result))
    if args.write:
        from shepherd_bench.results import store

        store("demo", value=result)
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
