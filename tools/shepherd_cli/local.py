"""`shepherd local`: all of Shepherd on one machine, with no AWS account.

moto's server on 127.0.0.1 holds exactly the resources the CDK app declares (from
`shepherd.topology` and the definitions); a control process serves the HTTP API and runs the
supervisor, StartWorkflow events and the definitions' schedules (on its own clock, as
EventBridge Scheduler would fire them); one process per agent worker polls its pool's queue.

A running stack follows its project (`reload`): changed agent code replaces the workers
(the old ones finish the batch in hand and take no more), changed definitions replace the
control process and the workers too, with queues for any new pool, as a deploy would; the
state in moto stays. `shepherd local` writes where it listens to `.shepherd/local.json`, so
that `shepherd run` can use it instead of starting a stack of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from shepherd_cli.apigw import DEFAULT_CALLER
from shepherd_cli.client import CliError
from shepherd_cli.project import Project

REGION = "us-east-1"
TABLE = "shepherd"
BUS = "shepherd"
PAYLOAD_BUCKET = "shepherd-payloads"  # moto's S3: the payload bucket (large payloads)
EVENTS_TAP_QUEUE = "shepherd-local-events"  # every lifecycle event the local relay publishes
# The API's first answer, on an idle machine: well under 10 s. A busy one (another stack, a
# test run) took minutes, so the wait grows with the load per core (`startup_seconds`), up
# to STARTUP_MAX_SECONDS; SHEPHERD_STARTUP_SECONDS sets it outright.
STARTUP_SECONDS = 60
STARTUP_MAX_SECONDS = 300
RELOAD_POLL_SECONDS = 0.2
STATE_FILE = "local.json"  # in the state directory: a running `shepherd local`, for `shepherd run`


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StartupTimeout(CliError):
    """A process of the stack did not answer in time: said in a sentence, never a traceback."""


def startup_seconds(load: float | None = None, cores: int | None = None) -> float:
    """How long the stack's API may take to answer first: STARTUP_SECONDS on an idle machine,
    that times the load per core on a busy one (at most STARTUP_MAX_SECONDS), or
    SHEPHERD_STARTUP_SECONDS."""
    given = os.environ.get("SHEPHERD_STARTUP_SECONDS")
    if given:
        return float(given)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average here: assume idle
            load = 0.0
    busy = load / max(1, cores or os.cpu_count() or 1)
    return min(STARTUP_MAX_SECONDS, STARTUP_SECONDS * max(1.0, busy))


def _wait_http(
    url: str,
    seconds: float,
    *,
    what: str = "the server",
    log: Path | None = None,
    alive: Any = None,
) -> None:
    """Until `url` answers (any status). A server that listens but has not answered yet is
    waited for, not asked again: the API's first request cold-starts a handler sandbox, and
    on a busy machine each request given up after a second took another sandbox (up to four,
    each starting from cold at once), so none answered within the minute. A process that
    exited (`alive` says no) is not waited for; either way a StartupTimeout says what to do."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if alive is not None and not alive():
            raise StartupTimeout(f"{what} exited while starting" + _see(log))
        try:
            with urllib.request.urlopen(url, timeout=max(1.0, left)):  # noqa: S310 - ours
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.1)
    try:
        load = f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:
        load = "load unknown"
    raise StartupTimeout(
        f"{what} did not answer within {seconds:.0f} s ({load}): the machine is busy (another "
        "`make demo`, `shepherd local` or test run?). Try again when it is quieter, or wait "
        f"longer: SHEPHERD_STARTUP_SECONDS=600{_see(log)}"
    )


def _see(log: Path | None) -> str:
    return f"; its log: {log}" if log is not None else ""


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
    moto_port: int = 0  # 0: any free port
    workers: int = 1
    sweep_interval: float = 1.0
    # The definitions and agent modules to run: the project's `[tool.shepherd]` by default
    # (in this repository, the examples).
    project: Project = field(default_factory=Project.find)
    state_dir: Path = field(default_factory=lambda: Project.find().root / ".shepherd")
    real_faults: bool = True
    # StartWorkflow events from these sources are owned by these principals (Settings).
    event_owners: dict[str, str] = field(default_factory=dict)
    # Who may pause and resume pools and schedules (Settings.operators): the default caller
    # unless named.
    operators: list[str] = field(default_factory=lambda: [DEFAULT_CALLER])
    # Who owns the workflows the definitions' schedules start (Settings.schedule_owner): the
    # default caller, so that they show in its lists and the console.
    schedule_owner: str = DEFAULT_CALLER
    # When the schedules' rates start counting (default: the stack's start). `make demo` sets
    # it a period minus a few seconds back, so a `rate(1 hour)` fires while it runs.
    schedule_anchor: datetime | None = None
    reload: bool = False  # follow changes to the definitions and agent code (`shepherd local`)
    advertise: bool = False  # write STATE_FILE, for `shepherd run` to find this stack
    # Each pool's rate limit and circuit breaker, as the construct's pool_settings give them
    # (shepherd.pool_policy: `{"payments": {"RateLimit": {"PerSecond": 5, "Burst": 5}}}`).
    pool_policies: dict[str, Any] = field(default_factory=dict)
    # A queue that receives every lifecycle event the relay publishes (`events_tap_url`), for
    # tests and local subscribers. Off unless asked: nobody drains it otherwise, and moto pays
    # for every message a queue holds on each send to it (a day of events made every event,
    # and so every step, slower by the hour: about 30 % of moto's time at 250 workflows).
    events_tap: bool = False

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
        self.events_tap_url = ""  # set when `events_tap` is on
        self.env: dict[str, str] = {}
        self.reloads = 0  # times the stack took up changed definitions or agent code
        self._refused = False  # the last reload was refused (the next good one says so)
        self._moto: subprocess.Popen[bytes] | None = None
        self._replacing = threading.Lock()  # a reload and the crash monitor, one at a time
        self._retiring: list[subprocess.Popen[bytes]] = []  # replaced by a reload, finishing
        # The definitions the processes run: a copy made at start and at each reload, as a
        # deploy packages them (a file saved half-written or broken never reaches them).
        self.deployed_dir = self.definitions_dir
        self._deploys = 0
        self._standbys: dict[tuple[str, int], Worker] = {}  # (pool, index) -> a waiting worker

    def client(self, service: str) -> Any:
        """A boto3 client for this stack's moto (its fixed local credentials and region)."""
        import boto3

        return boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
        ).client(service, endpoint_url=self.moto_url)

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
        self.moto_port = self.moto_port or free_port()
        self.port = self.port or free_port()
        self.moto_url = f"http://127.0.0.1:{self.moto_port}"
        # Where the relay keeps its place in this moto's stream (a new moto: a new stream).
        relay_checkpoint = self.state_dir / f"relay-{self.moto_port}.json"
        relay_checkpoint.unlink(missing_ok=True)
        self.api_url = f"http://127.0.0.1:{self.port}"
        shutil.rmtree(self._deploy_root(), ignore_errors=True)
        # moto's server as DynamoDB behaves (see shepherd_cli.moto_local).
        moto_cmd = [sys.executable, "-m", "shepherd_cli.moto_local"]
        self._moto = self._spawn(
            [*moto_cmd, "-H", "127.0.0.1", "-p", str(self.moto_port)], logs / "moto.log"
        )
        moto = self._moto
        _wait_http(
            f"{self.moto_url}/moto-api/",
            startup_seconds() / 2,
            what="moto (the local AWS)",
            log=logs / "moto.log",
            alive=lambda: moto.poll() is None,
        )

        self.env = self._environment(ledger)
        # The schedules' rates count from here (a replaced control process keeps the count).
        self.started_at = (self.schedule_anchor or datetime.now(UTC)).replace(microsecond=0)
        pools, start_events = self._create_resources()
        control = [
            sys.executable, "-m", "shepherd_cli.control",
            "--port", str(self.port),
            "--sweep-interval", str(self.sweep_interval),
            "--start-events-queue", start_events,
            "--relay-checkpoint", str(relay_checkpoint),
            "--env-file", str(self._env_file()),
            "--schedule-anchor", self.started_at.isoformat(),
        ]  # fmt: skip
        self._control_args = control
        self._control = self._spawn(control, logs / "control.log", env=self.env)
        self._pools = pools
        for pool in pools.values():
            for index in range(self.workers):
                self._start_worker(pool, index)
        control_proc = self._control
        _wait_http(
            f"{self.api_url}/definitions",
            startup_seconds(),
            what=f"the local API ({self.api_url})",
            log=logs / "control.log",
            alive=lambda: control_proc.poll() is None,
        )
        self._monitor = threading.Thread(
            target=self._watch_processes, name="process-monitor", daemon=True
        )
        self._monitor.start()
        if self.reload:
            self._code = self._code_stamps()
            with self._replacing:
                self._start_standbys()
            threading.Thread(target=self._watch_code, name="reload", daemon=True).start()
        if self.advertise:
            self._state_file().write_text(json.dumps(self.advertised()))

    def stop(self) -> None:
        self._stopping.set()
        if self.advertise:
            self._state_file().unlink(missing_ok=True)
        if self._monitor is not None:
            self._monitor.join(timeout=3)
        # Workers and the control process first, moto (the "AWS" they talk to) last.
        standbys = [w.process for w in self._standbys.values()]
        for proc in standbys:
            if proc.stdin is not None:
                proc.stdin.close()
        first = [w.process for w in self._workers] + standbys + self._retiring + self._procs[1:]
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
        for worker in [*self._workers, *self._standbys.values()]:
            worker.log.close()

    def pids(self) -> list[int]:
        workers = [*self._workers, *self._standbys.values()]
        return [w.process.pid for w in workers] + [p.pid for p in self._procs]

    @property
    def moto_pid(self) -> int:
        assert self._moto is not None, "not started"
        return self._moto.pid

    @property
    def control_pid(self) -> int:
        assert self._control is not None, "not started"
        return self._control.pid

    def advertised(self) -> dict[str, Any]:
        """What `shepherd run` needs to use this stack, and to know it runs its project."""
        return {
            "pid": os.getpid(),
            "api_url": self.api_url,
            "moto_url": self.moto_url,
            "definitions_dir": str(self.definitions_dir.resolve()),
            "agent_modules": list(self.project.agent_modules),
        }

    def _deploy_root(self) -> Path:
        return self.state_dir / f"deployed-{self.moto_port}"

    def _deploy_definitions(self) -> Path:
        """Copy the definition files to a new folder of their own; its path."""
        self._deploys += 1
        target = self._deploy_root() / str(self._deploys)
        target.mkdir(parents=True)
        for path in self.definitions_dir.glob("*"):
            if path.suffix in (".yaml", ".yml", ".json"):
                shutil.copy2(path, target / path.name)
        return target

    def _env_file(self) -> Path:
        """The settings a redeployed control process takes up (see `control.redeploy`)."""
        return self.state_dir / f"control-env-{self.moto_port}.json"

    def _state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    # ---------------------------------------------------------------------------- reloading

    def _code_files(self) -> list[Path]:
        """The definition files and the agent modules' source files (a package: all of it)."""
        import importlib.util

        files = [
            p for p in self.definitions_dir.glob("*") if p.suffix in (".yaml", ".yml", ".json")
        ]
        if str(self.project.root) not in sys.path:  # its own modules, as its workers see them
            sys.path.insert(0, str(self.project.root))
        for module in self.project.agent_modules:
            try:  # the top-level package: found, not imported
                spec = importlib.util.find_spec(module.split(".")[0])
            except (ImportError, ValueError):
                spec = None
            if spec is None or spec.origin is None:
                continue
            origin = Path(spec.origin)
            files += list(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]
        return files

    def _code_stamps(self) -> dict[Path, tuple[float, int]]:
        stamps = {}
        for path in self._code_files():
            try:
                stat = path.stat()
            except OSError:
                continue
            stamps[path] = (stat.st_mtime, stat.st_size)
        return stamps

    def _watch_code(self) -> None:
        while not self._stopping.wait(RELOAD_POLL_SECONDS):
            stamps = self._code_stamps()
            if stamps == self._code:
                continue
            definitions = {
                p for p in set(stamps) ^ set(self._code) if p.parent == self.definitions_dir
            }
            definitions |= {
                p for p in stamps if p in self._code and stamps[p] != self._code[p]
                and p.parent == self.definitions_dir
            }  # fmt: skip
            self._code = stamps
            self._reload(definitions_changed=bool(definitions))

    def _reload(self, *, definitions_changed: bool) -> None:
        """Take up a change, saying so when it is refused and when a refused one is fixed
        (silence after `reload refused` would leave a person unsure it was taken up)."""
        try:
            self._take_up(definitions_changed=definitions_changed)
        except Exception as exc:  # a broken definition: say so, keep the stack as it was
            self._refused = True
            print(f"reload refused: {exc}", file=sys.stderr, flush=True)
            return
        if self._refused:
            self._refused = False
            print(
                "reload taken up: the refused change is fixed; the stack runs it now",
                file=sys.stderr,
                flush=True,
            )

    def _take_up(self, *, definitions_changed: bool) -> None:
        """A deploy of the changed project: for new definitions, queues for any new pool and
        the control process redeployed in place (SIGHUP: the API keeps listening); new
        workers for the new code, then the old ones stop after the batch in hand."""
        with self._replacing:
            old_workers = list(self._workers)
            if definitions_changed:
                from shepherd.definitions import load_directory

                # A broken definition is refused here, before anything changes.
                definitions = load_directory(self.definitions_dir)
                self.deployed_dir = self._deploy_definitions()
                self._pools = self._create_queues(definitions)
                self._env_file().write_text(json.dumps(self.settings_env))
                if self._control is not None:
                    self._control.send_signal(signal.SIGHUP)
                self._discard_standbys()
            self._workers = []
            for pool in self._pools.values():
                for index in range(self.workers):
                    self._start_worker(pool, index)
            for worker in old_workers:
                if worker.process.poll() is None:
                    worker.process.send_signal(signal.SIGTERM)  # it finishes its batch, then exits
            self.reloads += 1
            retired = [w.process for w in old_workers]
            self._retiring += retired
        self._wait_retired(retired, old_workers)
        with self._replacing:
            if not self._stopping.is_set():
                self._start_standbys()

    def _wait_retired(self, retired: list[subprocess.Popen[bytes]], workers: list[Worker]) -> None:
        for proc in retired:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for worker in workers:
            worker.log.close()
        with self._replacing:
            for proc in retired:
                self._retiring.remove(proc)
                if proc in self._procs:
                    self._procs.remove(proc)

    def _log(self, name: str) -> Path:
        return self.state_dir / "logs" / f"{name}.log"

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
        from shepherd.definitions import load_directory

        from shepherd_cli.control import START_EVENTS_QUEUE
        from shepherd_cli.resources import create_all

        clients = {s: self.client(s) for s in ("dynamodb", "sqs", "events", "s3")}
        definitions = load_directory(self.definitions_dir)
        self.deployed_dir = self._deploy_definitions()
        queues = create_all(clients, definitions, table=TABLE, bus=BUS, bucket=PAYLOAD_BUCKET)
        # StartWorkflow events: the CDK app's rule (any source but Shepherd's own) -> the
        # control process, through a queue because moto cannot invoke Lambda targets.
        sqs = clients["sqs"]
        start_url = sqs.create_queue(QueueName=START_EVENTS_QUEUE)["QueueUrl"]
        start_arn = sqs.get_queue_attributes(QueueUrl=start_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        from shepherd.observability import EVENT_SOURCE, INBOUND_DETAIL_TYPES

        # Signal events too (issue 37): owned as starts are, handled by the same function.
        pattern = {
            "detail-type": list(INBOUND_DETAIL_TYPES),
            "source": [{"anything-but": EVENT_SOURCE}],
        }
        clients["events"].put_rule(
            Name="start-workflow", EventBusName=BUS, EventPattern=json.dumps(pattern)
        )
        clients["events"].put_targets(
            Rule="start-workflow", EventBusName=BUS, Targets=[{"Id": "control", "Arn": start_arn}]
        )
        if self.events_tap:
            self._create_events_tap(clients)
        return self._use_pools(definitions, queues), start_url

    def _create_events_tap(self, clients: dict[str, Any]) -> None:
        """Shepherd's own lifecycle events (from the relay) -> a queue anyone local can read,
        standing in for a subscriber."""
        from shepherd.observability import EVENT_SOURCE

        sqs = clients["sqs"]
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

    def _use_pools(self, definitions: Any, queues: dict[str, Any]) -> dict[str, Any]:
        """The settings every process gets, for these definitions' pools and queues."""
        from shepherd.settings import Settings
        from shepherd.topology import pools

        settings = Settings(
            table=TABLE,
            queue_urls={p: q.url for p, q in queues.items()},
            event_bus=BUS,
            definitions_dir=self.deployed_dir,
            event_owners=self.event_owners,
            schedule_owner=self.schedule_owner,
            operators=tuple(self.operators),
            agent_modules=self.project.agent_modules,
            payload_bucket=PAYLOAD_BUCKET,
            pool_policies=self.pool_policies,
            # The local supervisor is invoked every `sweep_interval` (1 s), one background
            # handler at a time: a sweep that waited for what comes due before the next one
            # would hold the relay and the events handler up for as long.
            sweep_look_ahead=False,
        )
        self.settings_env = settings.to_env()
        self.env.update(self.settings_env)
        specs = pools(definitions)
        self.queue_urls = {p: q.url for p, q in queues.items()}
        self.dlq_urls = {p: q.dlq_url for p, q in queues.items()}
        return {p: (specs[p], queues[p]) for p in specs}

    def _create_queues(self, definitions: Any) -> dict[str, Any]:
        """A reload's deploy: queues for the pools the definitions name (existing ones stay)."""
        from shepherd.topology import pools

        from shepherd_cli.resources import create_queues

        return self._use_pools(definitions, create_queues(self.client("sqs"), pools(definitions)))

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

    def _start_worker(
        self,
        pool_and_queues: tuple[Any, Any],
        index: int,
        *,
        standby: bool = False,
        crashed: bool = False,
    ) -> None:
        """A worker of the pool (`standby`: one waiting for a line on stdin). A worker that
        replaces a crashed one (`crashed`) is the pool's standby when one is ready, as Lambda
        starts a new sandbox in about a second where a process importing boto3 and the engine
        took 5-15 s on a loaded machine (a fault that crashes every attempt waited on that at
        each retry); a new standby is then started for the pool's next crash."""
        spec, queues = pool_and_queues
        key = (spec.name, index)
        if crashed:
            key = next((k for k in self._standbys if k[0] == spec.name), key)
        waiting = None if standby else self._standbys.pop(key, None)
        if crashed and (spec.name, index) not in self._standbys:
            self._start_worker(pool_and_queues, index, standby=True)
        if waiting is not None and waiting.process.poll() is None:
            assert waiting.process.stdin is not None
            try:
                waiting.process.stdin.write(b"go\n")  # imported already: it starts at once
                waiting.process.stdin.close()
                waiting.index = index
                self._workers.append(waiting)
                return
            except OSError:
                pass  # it died meanwhile: start one as usual
        log = (self.state_dir / "logs" / f"worker-{spec.name}-{index}.log").open(
            "a"
        )  # kept across restarts
        args = [
            sys.executable, "-m", "shepherd_cli.worker",
            "--pool", spec.name,
            "--queue-url", queues.url,
            "--batch-size", str(spec.batch_size),
            "--function-timeout", str(spec.function_timeout_seconds),
            *(["--standby"] if standby else []),
        ]  # fmt: skip
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if standby else None,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**self.env, "SHEPHERD_POOL": spec.name},
            cwd=self.project.root,
        )
        worker = Worker(pool_and_queues, index, proc, log)
        if standby:
            self._standbys[key] = worker
        else:
            self._workers.append(worker)

    def _start_standbys(self) -> None:
        """One waiting worker per worker, for the next change of agent code."""
        for pool in self._pools.values():
            for index in range(self.workers):
                if (pool[0].name, index) not in self._standbys:
                    self._start_worker(pool, index, standby=True)

    def _discard_standbys(self) -> None:
        """Standbys started with settings that changed (a new deploy) end unused."""
        for worker in self._standbys.values():
            if worker.process.stdin is not None:
                worker.process.stdin.close()  # EOF: it exits
            self._retiring.append(worker.process)
            threading.Thread(target=self._wait_retired, args=([worker.process], [worker])).start()
        self._standbys.clear()

    def _watch_processes(self) -> None:
        """A dead worker or control process (a crash) is replaced, as Lambda would start a new
        sandbox. The state lives in moto's process, so nothing is lost."""
        while not self._stopping.wait(0.2):
            with self._replacing:
                self._replace_dead()

    def _replace_dead(self) -> None:
        control = self._control
        if control is not None and control.poll() is not None and not self._stopping.is_set():
            log = self._log("control")
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
                self._start_worker(worker.pool, worker.index, crashed=True)
