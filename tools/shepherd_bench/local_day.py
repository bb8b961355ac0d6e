"""A day of the local stack in an hour (issue 28): N workflows with M MB of payloads through
`shepherd local`, from C concurrent clients, on 127.0.0.1 only. Prints moto's peak memory and
the latency of every API call (p50, p99, max), and the endings reached.

    python -m shepherd_bench.local_day --workflows 10000 --payload-mb 100 --clients 8 --write

Bounded: it starts at most N workflows, stops starting at --time-limit, and waits at most
--drain seconds for the ones still running. The mix: every 10th workflow's payment fails once
(a retry), every 50th ship fails for good (compensation), every 100th is cancelled once running
(a transaction that may lose: the operator's cancel races the workers), and the payload
bytes are spread over inputs of 1 MiB (kept in the payload bucket).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shepherd_cli.client import Api, ApiError
from shepherd_cli.local import LocalStack
from shepherd_cli.project import Project

from shepherd_bench import results as bench_results

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"}
MIB = 1024 * 1024
ORDER = {
    "order_id": "bench",
    "customer": "ada@example.com",
    "amount": 12.5,
    "items": [{"sku": "BOOK-42", "qty": 1}],
}


def rss_mib(pid: int) -> float:
    """A process's resident memory, from /proc (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Calls:
    """Every API call's latency, by kind."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()

    def timed(self, kind: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        except ApiError as exc:
            with self._lock:
                self.errors[f"{kind} {exc.status}"] += 1
            raise
        finally:
            with self._lock:
                self.seconds.setdefault(kind, []).append(time.perf_counter() - t0)

    def summary(self) -> dict[str, Any]:
        every = [s for values in self.seconds.values() for s in values]
        out: dict[str, Any] = {"all": _quantiles(every)}
        out.update({kind: _quantiles(values) for kind, values in self.seconds.items()})
        return out


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    cut = statistics.quantiles(ordered, n=100) if len(ordered) > 1 else [ordered[0]] * 99
    return {
        "n": len(ordered),
        "p50_ms": round(cut[49] * 1000, 1),
        "p99_ms": round(cut[98] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def payload(i: int, big_every: int) -> dict[str, Any]:
    body: dict[str, Any] = {**ORDER, "order_id": f"bench-{i}"}
    faults: dict[str, Any] = {}
    if i % 10 == 1:
        faults["charge_payment"] = {"mode": "error", "times": 1}
    if i % 50 == 7:
        faults["ship_order"] = {"mode": "permanent"}
    if faults:
        body["faults"] = faults
    if big_every and i % big_every == 0:
        body["attachment"] = "a" * MIB
    return body


def one_workflow(api: Api, calls: Calls, i: int, big_every: int, drain: float) -> str:
    """Start workflow `i`, follow it (every 100th is cancelled once running): its ending."""
    try:
        body = {"type": "order_fulfilment", "input": payload(i, big_every)}
        wf = calls.timed("start", api.call, "POST", "/workflows", body)["workflow_id"]
    except ApiError:
        return "start refused"
    cancelled = False
    until = time.monotonic() + drain
    while time.monotonic() < until:
        time.sleep(1.0)
        try:
            view = calls.timed("status", api.call, "GET", f"/workflows/{wf}")
        except ApiError:
            continue
        if i % 100 == 50 and not cancelled and view["status"] == "RUNNING":
            cancelled = True
            with contextlib.suppress(ApiError):  # 409: it finished first
                calls.timed("cancel", api.call, "POST", f"/workflows/{wf}/cancel")
        if view["status"] in TERMINAL:
            return str(view["status"])
    return "still running"


def burst(api_url: str, starts: int, connections: int) -> dict[str, Any]:
    """`starts` workflow starts at once over `connections` connections (the audit's 500 over
    50 waited 20 s at p50 behind the old gateway's one lock)."""
    from concurrent.futures import ThreadPoolExecutor

    calls = Calls()

    def one(i: int) -> None:
        api = Api(api_url, caller=f"burst-{i % connections}", timeout=120)
        body = {"type": "order_fulfilment", "input": {**ORDER, "order_id": f"burst-{i}"}}
        with contextlib.suppress(ApiError):
            calls.timed("start", api.call, "POST", "/workflows", body)

    t0 = time.monotonic()
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(one, range(starts)))
    return {
        "starts": starts,
        "connections": connections,
        "seconds": round(time.monotonic() - t0, 1),
        **calls.summary()["start"],
        "errors": dict(calls.errors),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    calls = Calls()
    endings: Counter[str] = Counter()
    peak = {"moto": 0.0, "control": 0.0}
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    big = args.payload_mb  # inputs of 1 MiB
    big_every = max(1, args.workflows // big) if big else 0
    started = {"n": 0}
    lock = threading.Lock()
    t0 = time.monotonic()
    with LocalStack(
        project=Project.find(ROOT),
        port=args.port,
        moto_port=args.moto_port,
        workers=args.workers,
        sweep_interval=1.0,
        real_faults=False,
    ) as stack:
        up = time.monotonic() - t0
        moto_pid, control_pid = stack.moto_pid, stack.control_pid
        bursts = [burst(stack.api_url, *args.burst)] if args.burst else []

        def sample() -> None:
            while not stop.wait(2):
                m = rss_mib(moto_pid)
                peak["moto"] = max(peak["moto"], m)
                peak["control"] = max(peak["control"], rss_mib(stack.control_pid))
                samples.append((round(time.monotonic() - t0), round(m)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        deadline = time.monotonic() + args.time_limit

        def client(n: int) -> None:
            api = Api(stack.api_url, caller=f"bench-{n % 4}", timeout=60)
            while time.monotonic() < deadline:
                with lock:
                    i = started["n"]
                    if i >= args.workflows:
                        return
                    started["n"] += 1
                ending = one_workflow(api, calls, i, big_every, args.drain)
                with lock:
                    endings[ending] += 1

        threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
        for thread in threads:
            thread.start()
        last = 0
        while any(t.is_alive() for t in threads):
            time.sleep(5)
            done = sum(endings.values())
            if done - last >= 250 or not any(t.is_alive() for t in threads):
                last = done
                print(
                    f"[local_day] {time.monotonic() - t0:6.0f}s: {started['n']} started, "
                    f"{done} ended, moto {rss_mib(moto_pid):.0f} MiB",
                    flush=True,
                )
        for thread in threads:
            thread.join()
        stop.set()
        sampler.join(timeout=5)
        final = rss_mib(moto_pid)
        _ = control_pid
    return {
        "workflows": started["n"],
        "payload_mb": args.payload_mb,
        "clients": args.clients,
        "startup_s": round(up, 1),
        "burst": bursts,
        "seconds": round(time.monotonic() - t0),
        "endings": dict(endings),
        "moto_peak_mib": round(peak["moto"]),
        "moto_final_mib": round(final),
        "control_peak_mib": round(peak["control"]),
        "calls": calls.summary(),
        "errors": dict(calls.errors),
        "moto_mib_over_time": samples[:: max(1, len(samples) // 40)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench.local_day", description=__doc__)
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--payload-mb", type=int, default=100)
    parser.add_argument("--clients", type=int, default=24)
    parser.add_argument("--workers", type=int, default=1, help="worker processes per pool")
    parser.add_argument("--time-limit", type=float, default=5400, help="stop starting after")
    parser.add_argument("--drain", type=float, default=300, help="longest wait for one workflow")
    parser.add_argument("--port", type=int, default=0, help="the API's port (0: any free one)")
    parser.add_argument("--moto-port", type=int, default=0, help="moto's port (0: any free one)")
    parser.add_argument(
        "--burst",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        metavar="STARTS,CONNECTIONS",
        help="first, this many starts at once over this many connections (e.g. 500,50)",
    )
    parser.add_argument("--out", type=Path, help="write the result as JSON here too")
    parser.add_argument(
        "--write", action="store_true", help="store it under `local_day` in docs/benchmarks.json"
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    result = run(args)
    result["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    result["load_average_1min"] = {"start": load_before, "end": os.getloadavg()[0]}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.write:
        bench_results.store("local_day", value=result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
