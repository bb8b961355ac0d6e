"""Deploy rehearsal: each function of the synthesized cloud assembly, run from the filesystem
Lambda would give it, in a fresh interpreter, against AWS served by moto.

What Lambda assembles, rebuilt here from the assembly (`cdk.out`):
- `/var/task`: the function's code asset (the directory CDK staged for it);
- `/opt`: its layers extracted in the template's order (later files win, directories merge):
  the core and definitions layer assets, and the public Powertools layer, which is rebuilt the
  way Powertools builds it (`pip install --target python 'aws-lambda-powertools[all]==<v>'`,
  then the packages the Lambda runtime already provides are deleted), cached under
  `.shepherd/cache/` (git-ignored) so only the first run pays for pip;
- the runtime's own libraries: boto3 and its dependencies, nothing else.

`python -I -S -B` starts with the standard library only (no site-packages, no PYTHON* variables,
no bytecode written into the assembly); the sandbox bootstrap (lambda_sandbox.py) puts the
rebuilt paths on sys.path in the runtime's order: /var/task, /opt/python/lib/pythonX.Y/
site-packages, /opt/python, then the runtime's libraries. A module that no layer ships fails the
handler's import exactly as `Runtime.ImportModuleError` would on AWS.

Known differences from AWS: the interpreter and the compiled wheels are this machine's (the
functions run python3.14 on arm64), and the Powertools layer is rebuilt from PyPI rather than
downloaded, so it holds the newest dependencies its pins allow, as the published layer held on
its release day.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import boto3
from moto.server import ThreadedMotoServer
from shepherd.definitions import load_directory
from shepherd.observability import ENV_SWEEP_TICKS
from shepherd.topology import pools
from shepherd_cli.resources import PoolQueues, create_bucket, create_queues, create_table
from shepherd_infra import config
from shepherd_infra.naming import DLQ_INFIX, QUEUE_INFIX

CACHE_DIR = config.REPO_ROOT / ".shepherd" / "cache" / "lambda-rehearsal"
SANDBOX = Path(__file__).with_name("lambda_sandbox.py")
REGION = "us-east-1"
ACCOUNT = "123456789012"
PAYLOAD_BUCKET = "rehearsal-payloads"
PIP_TIMEOUT_SECONDS = 600
REPLY_TIMEOUT_SECONDS = 180  # a hang guard only: a loaded machine can take a while
# What the Powertools layer build deletes from its `pip install --target` (layer_v3 Dockerfile):
# boto3, botocore and their dependencies, which the Lambda Python runtime already provides.
LAYER_BUILD_DELETES = ("boto*", "s3transfer*", "*dateutil*", "urllib3*", "six*", "jmespath*")
SITE_PACKAGES = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


class RehearsalError(AssertionError):
    """The rehearsal found what a deploy would have found: a function that cannot start or
    fails an invocation. The message carries the function's traceback and log tail."""


# --------------------------------------------------------------------------- cached installs


def cached_install(
    name: str, requirements: list[str], *, subdir: str = "", delete: tuple[str, ...] = ()
) -> Path:
    """`pip install --target` into the cache once per interpreter and platform; later calls
    return the cached tree. Built beside and renamed into place, so an interrupted or
    concurrent build never leaves a half tree behind."""
    key = f"{name}-cp{sys.version_info.major}{sys.version_info.minor}-{sysconfig.get_platform()}"
    root = CACHE_DIR / key
    if (root / ".complete").exists():
        return root
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    building = CACHE_DIR / f".{key}.{os.getpid()}.building"
    shutil.rmtree(building, ignore_errors=True)
    target = building / subdir if subdir else building
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--no-compile",
        "--target",
        str(target),
        *requirements,
    ]
    done = subprocess.run(  # noqa: PLW1510 - the return code is checked below, with pip's words
        command, capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS
    )
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    for pattern in delete:
        for path in target.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for path in list(target.rglob("*")):  # the layer build also drops packages' tests
        if path.is_file() and "tests" in path.relative_to(target).parts[:-1]:
            path.unlink()
    (building / ".complete").write_text(json.dumps({"requirements": requirements}) + "\n")
    try:
        building.rename(root)
    except OSError:  # another run finished first: use its tree
        shutil.rmtree(building, ignore_errors=True)
    return root


def powertools_layer(version: str) -> Path:
    """The Powertools layer's contents (a `python/` directory), rebuilt like the public one."""
    return cached_install(
        f"powertools-layer-{version}",
        [f"aws-lambda-powertools[all]=={version}"],
        subdir="python",
        delete=LAYER_BUILD_DELETES,
    )


def runtime_libraries() -> Path:
    """What the Lambda Python runtime ships besides the standard library: boto3 and its
    dependencies (at the version the project pins)."""
    version = metadata.version("boto3")
    return cached_install(f"lambda-runtime-boto3-{version}", [f"boto3=={version}"])


# --------------------------------------------------------------------------- the assembly


@dataclass(frozen=True)
class FunctionImage:
    """One function as the template deploys it."""

    logical_id: str
    handler: str
    runtime: str
    architecture: str
    memory_mb: int
    environment: dict[str, Any]
    code: Path
    layers: list[Path]


class CloudAssembly:
    """The stack's template and staged assets, read from a synthesized `cdk.out` directory."""

    def __init__(self, outdir: Path, stack: str) -> None:
        manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
        artifacts = manifest["artifacts"]
        template_file = artifacts[stack]["properties"]["templateFile"]
        self.template: dict[str, Any] = json.loads(
            (outdir / template_file).read_text(encoding="utf-8")
        )
        assets_file = next(
            a["properties"]["file"]
            for name, a in artifacts.items()
            if a["type"] == "cdk:asset-manifest" and name == f"{stack}.assets"
        )
        assets = json.loads((outdir / assets_file).read_text(encoding="utf-8"))
        self.objects: dict[str, Path] = {}
        for asset in assets["files"].values():
            source = outdir / asset["source"]["path"]
            for destination in asset["destinations"].values():
                self.objects[destination["objectKey"]] = source

    @property
    def resources(self) -> dict[str, Any]:
        return dict(self.template["Resources"])

    def only(self, cfn_type: str) -> str:
        (logical_id,) = [k for k, v in self.resources.items() if v["Type"] == cfn_type]
        return logical_id

    def _asset(self, location: Mapping[str, Any]) -> Path:
        path = self.objects[location["S3Key"]]
        assert path.is_dir(), f"{path}: a directory asset (zipped at publish)"
        return path

    def _layer(self, reference: Any, runtime: str, architecture: str) -> Path:
        ref = reference.get("Ref") if isinstance(reference, dict) else None
        if ref in self.resources and self.resources[ref]["Type"] == "AWS::Lambda::LayerVersion":
            return self._asset(self.resources[ref]["Properties"]["Content"])
        parameter = self.template.get("Parameters", {}).get(ref or "", {})
        prefix = f"{config.POWERTOOLS_PARAMETER_ROOT}/{architecture}/{runtime}/"
        if str(parameter.get("Default", "")).startswith(prefix):
            return powertools_layer(parameter["Default"].removeprefix(prefix))
        raise RehearsalError(f"a layer the rehearsal cannot rebuild: {reference!r}")

    def functions(self) -> dict[str, FunctionImage]:
        out = {}
        for logical_id, resource in self.resources.items():
            if resource["Type"] != "AWS::Lambda::Function":
                continue
            props = resource["Properties"]
            (architecture,) = props.get("Architectures", ["x86_64"])
            out[logical_id] = FunctionImage(
                logical_id=logical_id,
                handler=props["Handler"],
                runtime=props["Runtime"],
                architecture=architecture,
                memory_mb=int(props.get("MemorySize", 128)),
                environment=dict(props.get("Environment", {}).get("Variables", {})),
                code=self._asset(props["Code"]),
                layers=[self._layer(r, props["Runtime"], architecture) for r in props["Layers"]],
            )
        return out


def resolve(value: Any, refs: Mapping[str, str]) -> str:
    """A template value with its Refs (resources and pseudo parameters) replaced."""
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Ref":
            if arg not in refs:
                raise RehearsalError(f"the rehearsal has no value for Ref {arg}")
            return refs[arg]
        if fn == "Fn::Join":
            separator, parts = arg
            return str(separator).join(resolve(part, refs) for part in parts)
        if fn == "Fn::Split":
            separator, text = arg
            return json.dumps(resolve(text, refs).split(separator))
        if fn == "Fn::Select":
            index, listed = arg
            return str(json.loads(resolve(listed, refs))[int(index)])
    raise RehearsalError(f"cannot resolve {value!r}")


# The stack as CloudFormation would create it: the pool resources' names end in its id.
STACK_ID = (
    f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/Shepherd/5d8a0c1e-1111-2222-3333-444455556666"
)
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackId": STACK_ID,
}


@dataclass(frozen=True)
class PoolQueueIds:
    """A pool's queue and DLQ in the template: logical IDs and the names they get."""

    queue: str
    dlq: str
    queue_name: str
    dlq_name: str


def pool_queues(template: Mapping[str, Any]) -> dict[str, PoolQueueIds]:
    """Pool name -> its queues, from the names the template gives them (`<base>-Q-<pool>` and
    `<base>-D-<pool>`, resolved for STACK_ID)."""
    named: dict[str, tuple[str, str]] = {}
    for logical_id, resource in template["Resources"].items():
        name = resource.get("Properties", {}).get("QueueName")
        if resource["Type"] == "AWS::SQS::Queue" and name is not None:
            named[logical_id] = (resolve(name, PSEUDO), logical_id)
    queues = {n.split(QUEUE_INFIX, 1)[1]: (n, i) for n, i in named.values() if QUEUE_INFIX in n}
    dlqs = {n.split(DLQ_INFIX, 1)[1]: (n, i) for n, i in named.values() if DLQ_INFIX in n}
    assert set(queues) == set(dlqs), (queues, dlqs)
    return {
        pool: PoolQueueIds(queue=i, dlq=dlqs[pool][1], queue_name=n, dlq_name=dlqs[pool][0])
        for pool, (n, i) in queues.items()
    }


class _Marker(dict[str, str]):
    """Resolves every Ref to `@@<logical id>@@`, to find which Ref went where."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return f"@@{key}@@"


# --------------------------------------------------------------------------- moto


@dataclass
class MotoWorld:
    """A moto server on 127.0.0.1 holding the stack's table, queues and bus, created by the
    same code as the local stack, and the Refs of the template mapped to them."""

    assembly: CloudAssembly
    table: str = "rehearsal-table"
    bus: str = "rehearsal-bus"
    endpoint: str = ""
    queues: dict[str, PoolQueues] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    ticks_url: str = ""

    def __post_init__(self) -> None:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)

    def __enter__(self) -> MotoWorld:
        # The server logs every request at INFO; only trouble is worth reading in a report.
        self._werkzeug_level = logging.getLogger("werkzeug").level
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        definitions = load_directory(self.definitions_dir())
        create_table(self.client("dynamodb"), self.table)
        create_bucket(self.client("s3"), PAYLOAD_BUCKET)
        self.client("events").create_event_bus(Name=self.bus)
        # The pool queues by the names the template gives them: the functions find them from
        # SHEPHERD_QUEUE_URL_PREFIX, as they would on AWS.
        specs = pools(definitions)
        named = pool_queues(self.assembly.template)
        assert set(named) == set(specs)
        self.queues = create_queues(
            self.client("sqs"),
            specs,
            names={pool: (ids.queue_name, ids.dlq_name) for pool, ids in named.items()},
        )
        self.refs = {
            **PSEUDO,
            self.assembly.only("AWS::DynamoDB::Table"): self.table,
            self.assembly.only("AWS::Events::EventBus"): self.bus,
            self.assembly.only("AWS::S3::Bucket"): PAYLOAD_BUCKET,
        }
        for pool, ids in named.items():
            self.refs[ids.queue] = self.queues[pool].url
            self.refs[ids.dlq] = self.queues[pool].dlq_url
        # The supervisor's tick queue (moto runs no mapping: a test delivers the ticks).
        for image in self.assembly.functions().values():
            ticks = image.environment.get(ENV_SWEEP_TICKS)
            if ticks is not None:
                queue_id = resolve(ticks, _Marker()).strip("@")
                url = self.client("sqs").create_queue(QueueName="rehearsal-ticks")["QueueUrl"]
                self.refs[queue_id] = self.ticks_url = url
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
        logging.getLogger("werkzeug").setLevel(self._werkzeug_level)

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=self.endpoint)

    def definitions_dir(self) -> Path:
        """The workflow definitions as the definitions layer ships them."""
        for image in self.assembly.functions().values():
            for layer in image.layers:
                if (layer / config.DEFINITIONS_LAYER_SUBDIR).is_dir():
                    return layer / config.DEFINITIONS_LAYER_SUBDIR
        raise RehearsalError("no layer ships the workflow definitions")


# --------------------------------------------------------------------------- sandboxes


def overlay(source: Path, target: Path) -> None:
    """Extract `source` over `target` as Lambda extracts layers into /opt: directories merge,
    a later file replaces an earlier one. Symlinks instead of copies (thousands of files)."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name == ".complete":
            continue
        here = target / entry.name
        if here.is_symlink() and here.is_dir() and entry.is_dir():
            earlier = here.resolve()
            here.unlink()
            overlay(earlier, here)
            overlay(entry, here)
        elif here.is_dir() and not here.is_symlink() and entry.is_dir():
            overlay(entry, here)
        else:
            if here.is_dir() and not here.is_symlink():
                shutil.rmtree(here)
            elif here.is_symlink() or here.exists():
                here.unlink()
            here.symlink_to(entry.resolve(), target_is_directory=entry.is_dir())


@dataclass(frozen=True)
class Filesystem:
    task: Path
    opt: Path
    runtime: Path

    @property
    def sys_path(self) -> list[str]:
        """The Lambda Python runtime's search order."""
        return [
            str(self.task),
            str(self.opt / "python" / SITE_PACKAGES),
            str(self.opt / "python"),
            str(self.runtime),
        ]


def build_filesystem(
    image: FunctionImage, workdir: Path, *, code: Path | None = None
) -> Filesystem:
    opt = workdir / "opt"
    for layer in image.layers:
        overlay(layer, opt)
    return Filesystem(task=code or image.code, opt=opt, runtime=runtime_libraries())


def lambda_environment(image: FunctionImage, fs: Filesystem, world: MotoWorld) -> dict[str, str]:
    """The template's variables (table, queues and bus replaced by moto's), what the Lambda
    runtime sets, and what points the SDK at moto: nothing inherited from this process."""
    env = {}
    for key, value in image.environment.items():
        resolved = resolve(value, world.refs)
        if resolved.startswith(config.LAYER_MOUNT + "/"):
            resolved = str(fs.opt) + resolved.removeprefix(config.LAYER_MOUNT)
        env[key] = resolved
    name = f"rehearsal-{image.logical_id}"
    env.update(
        {
            "_HANDLER": image.handler,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{image.runtime}",
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(image.memory_mb),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "2026/11/21/[$LATEST]rehearsal",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "LAMBDA_TASK_ROOT": str(fs.task),
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            "_X_AMZN_TRACE_ID": "Root=1-6740f000-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;"
            "Sampled=1",
            "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
            "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:9",  # UDP discard port: segments go nowhere
            # Test-only: moto, dummy credentials, no shared config of this machine, no proxy.
            "AWS_ENDPOINT_URL": world.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_CONFIG_FILE": str(fs.opt.parent / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(fs.opt.parent / "no-aws-credentials"),
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    return env


class Sandbox:
    """One warm Lambda sandbox: a fresh interpreter that imported the handler once and serves
    invocations until closed."""

    def __init__(self, image: FunctionImage, fs: Filesystem, env: Mapping[str, str], log: Path):
        self.image = image
        self.fs = fs
        self.log = log
        self.origins: dict[str, str] = {}  # module -> the file it was loaded from, so far
        self._log_file: IO[str] = log.open("w", encoding="utf-8")
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(SANDBOX), json.dumps(fs.sys_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=dict(env),
            cwd=fs.task,
            text=True,
        )

    def _reply(self) -> dict[str, Any]:
        stdout = self._process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], REPLY_TIMEOUT_SECONDS)
        line = stdout.readline() if ready else ""
        if not line:
            raise RehearsalError(f"{self.image.logical_id}: no reply\n{self.log_tail()}")
        message: dict[str, Any] = json.loads(line)
        if not message["ok"]:
            raise RehearsalError(
                f"{self.image.logical_id} ({self.image.handler}) failed at {message['phase']}:\n"
                f"{message['error']}\n{self.log_tail()}"
            )
        return message

    def init(self) -> dict[str, Any]:
        """Wait for the handler's import (Lambda's init phase)."""
        message = self._reply()
        self.origins.update({k: v for k, v in message["origins"].items() if v})
        return message

    def invoke(self, event: Any, *, remaining_ms: int = 60_000) -> Any:
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write(json.dumps({"event": event, "remaining_ms": remaining_ms}) + "\n")
        stdin.flush()
        message = self._reply()
        self.origins.update({k: v for k, v in message["origins"].items() if v})
        return message["result"]

    def log_tail(self, lines: int = 40) -> str:
        self._log_file.flush()
        text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "--- function log (tail) ---\n" + "\n".join(text[-lines:])

    def close(self) -> None:
        if self._process.stdin:
            with contextlib.suppress(BrokenPipeError):
                self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout:
            self._process.stdout.close()
        self._log_file.close()


@contextlib.contextmanager
def sandboxes(
    images: Mapping[str, FunctionImage],
    world: MotoWorld,
    workdir: Path,
    *,
    code: Mapping[str, Path] | None = None,
) -> Iterator[dict[str, Sandbox]]:
    """Start one sandbox per function (in parallel: each imports its handler meanwhile)."""
    started: dict[str, Sandbox] = {}
    try:
        for logical_id, image in images.items():
            root = workdir / logical_id
            fs = build_filesystem(image, root, code=(code or {}).get(logical_id))
            env = lambda_environment(image, fs, world)
            started[logical_id] = Sandbox(image, fs, env, root / "function.log")
        yield started
    finally:
        for sandbox in started.values():
            sandbox.close()
