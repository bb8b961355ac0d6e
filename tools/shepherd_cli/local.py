"""`shepherd local`: all of Shepherd on one machine, with no AWS account.

moto's server on 127.0.0.1 holds exactly the resources the CDK app declares (from
`shepherd.topology` and the definitions); a control process serves the HTTP API and runs the
supervisor and StartWorkflow events; one process per agent worker polls its pool's queue.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from shepherd_cli.apigw import DEFAULT_CALLER
from shepherd_cli.project import Project

REGION = "us-east-1"
TABLE = "shepherd"
BUS = "shepherd"
PAYLOAD_BUCKET = "shepherd-payloads"  # moto's S3: the payload bucket (large payloads)
EVENTS_TAP_QUEUE = "shepherd-local-events"  # every lifecycle event the local relay publishes
STARTUP_SECONDS = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - a local URL we built
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within {seconds:.0f}s")


@dataclass
class Worker:
    pool: tuple[Any, Any]  # (PoolSpec, PoolQueues): what a replacement needs to start
    index: int
    process: subprocess.Popen[bytes]
    log: TextIO


@dataclass
class LocalStack:
    """Start with `with LocalStack(...) as stack:`; everything stops on exit, no stray processes."""

    port: int = 8080
    workers: int = 1
    sweep_interval: float = 1.0
    # The definitions and agent modules to run: the project's `[tool.shepherd]` by default
    # (in this repository, the examples).
    project: Project = field(default_factory=Project.find)
    state_dir: Path = field(default_factory=lambda: Project.find().root / ".shepherd")
    real_faults: bool = True
    # StartWorkflow events from these sources are owned by these principals (Settings).
    event_owners: dict[str, str] = field(default_factory=dict)
    # Who may pause and resume pools (Settings.operators): the default caller unless named.
    operators: list[str] = field(default_factory=lambda: [DEFAULT_CALLER])
    # Each pool's rate limit and circuit breaker, as the construct's pool_settings give them
    # (shepherd.pool_policy: `{"payments": {"RateLimit": {"PerSecond": 5, "Burst": 5}}}`).
    pool_policies: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.definitions_dir = self.project.definitions_dir
        self._procs: list[subprocess.Popen[bytes]] = []
        self._workers: list[Worker] = []
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self.restarts = 0  # worker processes replaced
        self.control_restarts = 0
        self._control: subprocess.Popen[bytes] | None = None
        self._control_args: list[str] = []
        self.api_url = ""
        self.moto_url = ""
        self.env: dict[str, str] = {}

    # ---------------------------------------------------------------------------- running

    def __enter__(self) -> LocalStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.stop()

    def start(self) -> None:
        logs = self.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for old in logs.glob("*.log"):
            old.unlink()
        ledger = self.state_dir / "ledger.sqlite"
        ledger.unlink(missing_ok=True)
        moto_port = free_port()
        self.port = self.port or free_port()
        self.moto_url = f"http://127.0.0.1:{moto_port}"
        self.api_url = f"http://127.0.0.1:{self.port}"
        # moto's server with each DynamoDB request applied whole (see shepherd_cli.moto_local).
        moto_cmd = [sys.executable, "-m", "shepherd_cli.moto_local"]
        self._spawn([*moto_cmd, "-H", "127.0.0.1", "-p", str(moto_port)], logs / "moto.log")
        _wait_http(f"{self.moto_url}/moto-api/", 30)

        self.env = self._environment(ledger)
        pools, start_events = self._create_resources()
        control = [
            sys.executable, "-m", "shepherd_cli.control",
            "--port", str(self.port),
            "--sweep-interval", str(self.sweep_interval),
            "--start-events-queue", start_events,
        ]  # fmt: skip
        self._control_args = control
        self._control = self._spawn(control, logs / "control.log", env=self.env)
        for pool in pools.values():
            for index in range(self.workers):
                self._start_worker(pool, index)
        _wait_http(f"{self.api_url}/definitions", STARTUP_SECONDS)
        self._monitor = threading.Thread(
            target=self._watch_processes, name="process-monitor", daemon=True
        )
        self._monitor.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(timeout=3)
        # Workers and the control process first, moto (the "AWS" they talk to) last.
        first = [w.process for w in self._workers] + self._procs[1:]
        for group in (first, self._procs[:1]):
            for proc in group:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 5
            for proc in group:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        for worker in self._workers:
            worker.log.close()

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers] + [p.pid for p in self._procs]

    # ---------------------------------------------------------------------------- helpers

    def _environment(self, ledger: Path) -> dict[str, str]:
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.moto_url,
            "POWERTOOLS_SERVICE_NAME": "shepherd",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "SHEPHERD_LEDGER": str(ledger),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("AWS_PROFILE", None)
        env.pop("AWS_SESSION_TOKEN", None)
        if self.real_faults:
            env["SHEPHERD_REAL_FAULTS"] = "1"
        return env

    def _create_resources(self) -> tuple[dict[str, Any], str]:
        import boto3
        from shepherd.definitions import load_directory
        from shepherd.settings import Settings
        from shepherd.topology import pools

        from shepherd_cli.control import START_EVENTS_QUEUE
        from shepherd_cli.resources import create_all

        session = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
        )
        clients = {
            s: session.client(s, endpoint_url=self.moto_url)
            for s in ("dynamodb", "sqs", "events", "s3")
        }
        definitions = load_directory(self.definitions_dir)
        queues = create_all(clients, definitions, table=TABLE, bus=BUS, bucket=PAYLOAD_BUCKET)
        # StartWorkflow events: the CDK app's rule (any source but Shepherd's own) -> the
        # control process, through a queue because moto cannot invoke Lambda targets.
        sqs = clients["sqs"]
        start_url = sqs.create_queue(QueueName=START_EVENTS_QUEUE)["QueueUrl"]
        start_arn = sqs.get_queue_attributes(QueueUrl=start_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        from shepherd.observability import EVENT_SOURCE, START_DETAIL_TYPE

        pattern = {"detail-type": [START_DETAIL_TYPE], "source": [{"anything-but": EVENT_SOURCE}]}
        clients["events"].put_rule(
            Name="start-workflow", EventBusName=BUS, EventPattern=json.dumps(pattern)
        )
        clients["events"].put_targets(
            Rule="start-workflow", EventBusName=BUS, Targets=[{"Id": "control", "Arn": start_arn}]
        )
        # Shepherd's own lifecycle events (from the relay) -> a queue anyone local can read,
        # standing in for a subscriber (`events_tap_url`).
        self.events_tap_url = sqs.create_queue(QueueName=EVENTS_TAP_QUEUE)["QueueUrl"]
        tap_arn = sqs.get_queue_attributes(
            QueueUrl=self.events_tap_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        clients["events"].put_rule(
            Name="events-tap", EventBusName=BUS, EventPattern=json.dumps({"source": [EVENT_SOURCE]})
        )
        clients["events"].put_targets(
            Rule="events-tap", EventBusName=BUS, Targets=[{"Id": "tap", "Arn": tap_arn}]
        )
        settings = Settings(
            table=TABLE,
            queue_urls={p: q.url for p, q in queues.items()},
            event_bus=BUS,
            definitions_dir=self.definitions_dir,
            event_owners=self.event_owners,
            operators=tuple(self.operators),
            agent_modules=self.project.agent_modules,
            payload_bucket=PAYLOAD_BUCKET,
            pool_policies=self.pool_policies,
        )
        self.env.update(settings.to_env())
        specs = pools(definitions)
        self.queue_urls = {p: q.url for p, q in queues.items()}
        self.dlq_urls = {p: q.dlq_url for p, q in queues.items()}
        return {p: (specs[p], queues[p]) for p in specs}, start_url

    def _spawn(
        self, args: list[str], log_path: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = log_path.open("ab")  # kept across restarts
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.project.root
        )
        log.close()
        self._procs.append(proc)
        return proc

    def _start_worker(self, pool_and_queues: tuple[Any, Any], index: int) -> None:
        spec, queues = pool_and_queues
        log = (self.state_dir / "logs" / f"worker-{spec.name}-{index}.log").open(
            "a"
        )  # kept across restarts
        args = [
            sys.executable, "-m", "shepherd_cli.worker",
            "--pool", spec.name,
            "--queue-url", queues.url,
            "--batch-size", str(spec.batch_size),
            "--function-timeout", str(spec.function_timeout_seconds),
        ]  # fmt: skip
        proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**self.env, "SHEPHERD_POOL": spec.name},
            cwd=self.project.root,
        )
        self._workers.append(Worker(pool_and_queues, index, proc, log))

    def _watch_processes(self) -> None:
        """A dead worker or control process (a crash) is replaced, as Lambda would start a new
        sandbox. The state lives in moto's process, so nothing is lost."""
        while not self._stopping.wait(0.2):
            control = self._control
            if control is not None and control.poll() is not None and not self._stopping.is_set():
                log = self.state_dir / "logs" / "control.log"
                with log.open("a") as out:
                    out.write(f"\n--- control exited with {control.returncode}; replacing it ---\n")
                self._procs.remove(control)
                self.control_restarts += 1
                self._control = self._spawn(self._control_args, log, env=self.env)
            for worker in list(self._workers):
                if worker.process.poll() is not None and not self._stopping.is_set():
                    self._workers.remove(worker)
                    worker.log.write(
                        f"\n--- worker exited with {worker.process.returncode}; replacing it ---\n"
                    )
                    worker.log.close()
                    self.restarts += 1
                    self._start_worker(worker.pool, worker.index)
