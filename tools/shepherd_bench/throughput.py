"""Throughput: workflows/s and steps/s through a running stack on 127.0.0.1, with latency.

`local` mode starts the local stack (`shepherd_cli.local.LocalStack`: moto's server, the real
handlers in worker processes, the HTTP API) and drives it over HTTP: N client threads each
POST /workflows and poll GET /workflows/{id} until the workflow is terminal, then start the
next. `inprocess` mode (the fallback when the local stack is unavailable) runs moto's server
as a process on 127.0.0.1 and the engine in this process: client threads call
`Scheduler.start` and read state, one polling thread per pool runs the agent runtime, a
thread sweeps. Loops are bounded in count and time; only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from shepherd_bench.cost import ORDER

LEVELS = (1, 4, 16)
SECONDS_PER_LEVEL = 15.0
MAX_WORKFLOWS_PER_LEVEL = 400
WORKFLOW_TIMEOUT_S = 60.0
POLL_S = 0.1
TERMINAL = {"SUCCEEDED", "COMPENSATED", "FAILED", "CANCELLED"}
STEPS = 4  # order_fulfilment's tasks (a small order naming no remind_at skips the other 3)


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p * len(ordered) + 0.5) - 1))]


def _drive(
    concurrency: int, run_one: Callable[[int], float | None], seconds: float
) -> dict[str, Any]:
    """`concurrency` threads run workflows back to back for `seconds` (bounded count)."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    counter = iter(range(MAX_WORKFLOWS_PER_LEVEL))

    def client() -> None:
        nonlocal errors
        while time.monotonic() < deadline:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            took = run_one(n)
            with lock:
                if took is None:
                    errors += 1
                else:
                    latencies.append(took)

    started = time.monotonic()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + WORKFLOW_TIMEOUT_S + 10)
    elapsed = time.monotonic() - started
    done = len(latencies)
    return {
        "concurrency": concurrency,
        "workflows": done,
        "seconds": elapsed,
        "workflows_per_s": done / elapsed,
        "steps_per_s": done * STEPS / elapsed,
        "latency_ms": {
            "p50": 1000 * statistics.median(latencies) if latencies else 0.0,
            "p99": 1000 * _percentile(latencies, 0.99) if latencies else 0.0,
            "max": 1000 * max(latencies) if latencies else 0.0,
        },
        "errors": errors,
    }


# ----------------------------------------------------------------------------- local stack


def _http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - a 127.0.0.1 URL we built
        url,
        data=data,
        method=method,
        headers={
            "Content-Type": "application/json",
            "X-Shepherd-Caller": "arn:aws:iam::000000000000:user/bench",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310
        return json.loads(reply.read() or b"null")


def _local(levels: tuple[int, ...], seconds: float) -> dict[str, Any]:
    from shepherd_cli.local import LocalStack
    from shepherd_cli.project import Project

    workers = 2
    rows = []
    with (
        tempfile.TemporaryDirectory() as state,
        LocalStack(
            project=Project.find(Path(__file__).resolve().parents[2]),
            port=0,
            workers=workers,
            sweep_interval=1.0,
            state_dir=Path(state),
        ) as stack,
    ):
        base = stack.api_url

        def run_one(n: int) -> float | None:
            started = time.monotonic()
            try:
                accepted = _http(
                    "POST",
                    f"{base}/workflows",
                    {"type": "order_fulfilment", "input": {**ORDER, "order_id": f"tp-{n}"}},
                )
                location = f"{base}/workflows/{accepted['workflow_id']}"
                while time.monotonic() - started < WORKFLOW_TIMEOUT_S:
                    if _http("GET", location)["status"] in TERMINAL:
                        return time.monotonic() - started
                    time.sleep(POLL_S)
            except OSError:
                return None
            return None

        run_one(-1)  # warm up (definition snapshot, first clients)
        for level in levels:
            rows.append(_drive(level, run_one, seconds))
    return {
        "mode": "local",
        "method": "The local stack (`shepherd_cli.local.LocalStack`): moto's server, the "
        f"HTTP API and supervisor (sweeping every 1 s) in a control process, {workers} agent "
        "worker processes per pool running the real agent handler, all on 127.0.0.1. "
        "Clients POST /workflows (`order_fulfilment`, 4 steps, no faults) and poll "
        f"GET /workflows/{{id}} every {POLL_S * 1000:.0f} ms until terminal, then start the "
        f"next; each level runs for {seconds:.0f} s. Latency is start request to observed "
        "terminal state.",
        "note": "This measures the local stack on a 2-CPU machine, not AWS: moto's single "
        "server process, the control process (which serves API requests one at a time) and "
        "the demo agents' real 20-120 ms sleeps bound it. On AWS each part scales "
        "independently (DynamoDB on-demand, SQS, one Lambda per message batch up to the "
        "pool's MaximumConcurrency of 10).",
        "rows": rows,
    }


# ------------------------------------------------------------------------------ in process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _moto_server() -> Iterator[str]:
    """moto's server as a process on 127.0.0.1; AWS_ENDPOINT_URL points at it meanwhile."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    saved = os.environ.get("AWS_ENDPOINT_URL")
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1)  # noqa: S310
                break
            except OSError:
                time.sleep(0.1)
        os.environ["AWS_ENDPOINT_URL"] = url
        yield url
    finally:
        if saved is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = saved
        moto.terminate()
        moto.wait(timeout=10)


def _inprocess(levels: tuple[int, ...], seconds: float) -> dict[str, Any]:
    import boto3
    from shepherd.definitions import load_directory
    from shepherd.model import TaskMessage
    from shepherd.settings import Settings
    from shepherd.wiring import Shepherd
    from shepherd_cli.resources import create_all
    from shepherd_examples.agents import registry

    root = Path(__file__).resolve().parents[2]
    stop = threading.Event()
    rows = []
    with _moto_server():
        session = boto3.session.Session(region_name="us-east-1")
        clients = {s: session.client(s) for s in ("dynamodb", "sqs", "events")}
        definitions = load_directory(root / "statemachines")
        queues = create_all(clients, definitions, table="shepherd", bus="shepherd")
        settings = Settings(
            table="shepherd",
            queue_urls={p: q.url for p, q in queues.items()},
            event_bus="shepherd",
            definitions_dir=root / "statemachines",
        )
        engine = Shepherd(settings, agents=registry, worker_id="bench")
        sqs = session.client("sqs")

        def worker(pool: str) -> None:
            while not stop.is_set():
                got = sqs.receive_message(
                    QueueUrl=queues[pool].url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
                for m in got:
                    engine.agent_runtime.handle(TaskMessage.from_body(m["Body"]))
                    sqs.delete_message(QueueUrl=queues[pool].url, ReceiptHandle=m["ReceiptHandle"])

        def supervisor() -> None:
            while not stop.wait(1.0):
                engine.supervisor.sweep()

        threads = [threading.Thread(target=worker, args=(p,), daemon=True) for p in queues]
        threads.append(threading.Thread(target=supervisor, daemon=True))
        for t in threads:
            t.start()

        def run_one(n: int) -> float | None:
            started = time.monotonic()
            wf = engine.scheduler.start("order_fulfilment", {**ORDER, "order_id": f"tp-{n}"})
            while time.monotonic() - started < WORKFLOW_TIMEOUT_S:
                loaded = engine.scheduler.load(wf.workflow_id)
                if loaded and loaded[0].workflow.status.terminal:
                    return time.monotonic() - started
                time.sleep(POLL_S)
            return None

        try:
            run_one(-1)
            for level in levels:
                rows.append(_drive(level, run_one, seconds))
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=5)
    return {
        "mode": "inprocess",
        "method": "In-process fallback (the local stack was not usable): moto's server as a "
        "process on 127.0.0.1, the engine in this process (real adapters), one polling thread "
        "per pool running the agent runtime, a thread sweeping every 1 s. Clients call "
        "`Scheduler.start` (`order_fulfilment`, 4 steps) and poll its state every "
        f"{POLL_S * 1000:.0f} ms; each level runs for {seconds:.0f} s.",
        "note": "This measures moto and one Python process on a 2-CPU machine, not AWS.",
        "rows": rows,
    }


def run_throughput(
    mode: str = "auto", levels: tuple[int, ...] = LEVELS, seconds: float = SECONDS_PER_LEVEL
) -> dict[str, Any]:
    if mode in {"auto", "local"}:
        try:
            return _local(levels, seconds)
        except Exception as exc:
            if mode == "local":
                raise
            print(f"[bench] local stack unusable ({exc!r}); measuring in-process", flush=True)
    return _inprocess(levels, seconds)
