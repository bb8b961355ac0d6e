"""The `shepherd` command line: run the local stack, start and watch workflows, validate and
draw definitions. Talks to the local API by default, to AWS with --api/SHEPHERD_API (SigV4)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shepherd_cli.client import DEFAULT_API, Api, CliError
from shepherd_cli.console.server import is_loopback
from shepherd_cli.project import Project, ProjectError
from shepherd_cli.render import graph, status_lines, watch_frame

if TYPE_CHECKING:
    from shepherd.definitions import Definition

TERMINAL = {"SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"}
CONSOLE_PORT = 8081


def _input(value: str, option: str = "--input") -> Any:
    text = value
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            text = path.read_text()
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{option} is not valid JSON: {exc}") from None


def _project(args: argparse.Namespace) -> Project:
    """The project's `[tool.shepherd]`, with --definitions and --agents applied."""
    agents = getattr(args, "agents", None)
    return Project.find().overridden(
        definitions=getattr(args, "definitions", None),
        agent_modules=[m.strip() for m in agents.split(",") if m.strip()] if agents else None,
    )


POOL_POLICIES_FILE = "pool-policies.json"  # beside pyproject.toml: `shepherd local`'s default


def default_pool_policies(project: Project) -> str | None:
    """The project's `pool-policies.json`, if it has one: `shepherd local` applies it unless
    told another file, so its pools' rate limits and circuit breakers (and the console's
    circuit view) are there on the local stack as deployed (issue 35.5)."""
    found = project.root / POOL_POLICIES_FILE
    return str(found) if found.is_file() else None


def _pool_policies(path: str | None) -> dict[str, Any]:
    """`--pool-policies FILE`: each pool's rate limit and circuit breaker (JSON), checked."""
    if not path:
        return {}
    from shepherd.pool_policy import parse_policies

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CliError(f"--pool-policies: {exc}") from exc
    try:
        return dict(parse_policies(text, source=path))
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def cmd_local(args: argparse.Namespace) -> int:
    from shepherd_cli.apigw import caller_arn
    from shepherd_cli.local import LocalStack

    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    # Ctrl-C and `kill` both stop everything cleanly (also when started in the background,
    # where a shell would have SIGINT ignored).
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print("starting the local stack (moto, control process, agent workers)...", flush=True)
    owners = {}
    for pair in args.event_owner or []:
        source, sep, caller = pair.partition("=")
        if not sep or not source or not caller:
            raise CliError(f"--event-owner takes SOURCE=CALLER, not '{pair}'")
        owners[source] = caller_arn(caller)
    project = _project(args)
    if not project.agent_modules:
        print(
            "no agent modules: [tool.shepherd] agent-modules in pyproject.toml or --agents; "
            "steps will wait for agents that never come",
            file=sys.stderr,
        )
    with LocalStack(
        project=project,
        port=args.port,
        moto_port=args.moto_port,
        workers=args.workers,
        sweep_interval=args.sweep_interval,
        event_owners=owners,
        operators=[caller_arn(name) for name in args.operator or [""]],
        schedule_owner=caller_arn(args.schedule_owner or ""),
        reload=args.reload,
        advertise=True,
        pool_policies=_pool_policies(args.pool_policies or default_pool_policies(project)),
        events_tap=args.events_tap,
    ) as stack:
        print(f"Shepherd API listening on {stack.api_url}  (moto at {stack.moto_url})")
        if stack.events_tap_url:
            print(f"every lifecycle event is copied to {stack.events_tap_url}")
        if args.reload:
            print("changed definitions and agent code are taken up as you save them")
        console = None
        if args.console:
            console = _serve_console(stack.api_url, args.caller, "127.0.0.1", args.console_port)
            print(f"Shepherd console on {console.url}")
        print(f"logs in {stack.state_dir / 'logs'}; Ctrl-C to stop", flush=True)
        try:
            while not stop.wait(1):
                pass
        finally:
            if console is not None:
                console.stop()
        print("\nstopping...", flush=True)
    print("stopped")
    return 0


def _serve_console(api_url: str, caller: str | None, host: str, port: int) -> Any:
    """Start the console; a busy default port falls back to a free one (its URL is printed)."""
    from shepherd_cli.console import Console

    if not is_loopback(host):
        print(
            f"warning: the console will be reachable on {host}: anyone who can reach it acts "
            "with your AWS credentials (the default, 127.0.0.1, is reachable from this machine only)",
            file=sys.stderr,
        )
    try:
        return Console(api_url, host=host, port=port, caller=caller).start()
    except OSError as exc:
        if port == CONSOLE_PORT and exc.errno == errno.EADDRINUSE:
            return Console(api_url, host=host, port=0, caller=caller).start()
        raise CliError(f"cannot serve the console on {host}:{port}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None


def cmd_run(args: argparse.Namespace) -> int:
    """Run one workflow to its end on the project's running `shepherd local` (once it has
    this definition as it is on disk), or else on a stack started for it and stopped after:
    exit 0 iff it SUCCEEDED."""
    from shepherd_cli.local import LocalStack

    project = _project(args)
    payload = _input(args.input) if args.input else {}
    running = None if args.fresh else _running_stack(project, args.type)
    if running is not None:
        print(f"on the running local stack at {running}", flush=True)
        return _run_on(Api(running, caller=args.caller), args.type, payload, args.timeout)
    print(f"starting the local stack for {project.definitions_dir}...", flush=True)
    with LocalStack(
        project=project,
        # Its own logs and ledger: a `shepherd local` of the project may be running.
        state_dir=project.root / ".shepherd" / "run",
        port=args.port,
        moto_port=args.moto_port,
        workers=1,
        sweep_interval=0.5,
    ) as stack:
        return _run_on(Api(stack.api_url, caller=args.caller), args.type, payload, args.timeout)


def _run_on(api: Api, wf_type: str, payload: Any, timeout: float) -> int:
    accepted = api.start(wf_type, payload)
    print(f"started {accepted['workflow_id']}", flush=True)
    return _watch(api, accepted["workflow_id"], timeout, interval=0.1)


RELOAD_WAIT_SECONDS = 15.0


def _running_stack(project: Project, wf_type: str) -> str | None:
    """The API of the project's running `shepherd local`, once it serves the definition of
    `wf_type` as it is on disk (it reloads on its own: wait for it); None if there is none."""
    from shepherd.definitions import load_directory
    from shepherd.errors import DefinitionError

    from shepherd_cli.local import STATE_FILE

    try:
        state = json.loads((project.root / ".shepherd" / STATE_FILE).read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError):
        return None
    same = Path(state.get("definitions_dir", "")) == project.definitions_dir.resolve()
    if not same or state.get("agent_modules") != list(project.agent_modules):
        return None  # a stack for other definitions or agents
    try:
        wanted = load_directory(project.definitions_dir)[wf_type].content_hash
    except DefinitionError as exc:  # the stack refuses it too: say why, not what ran before
        raise CliError(str(exc)) from None
    except KeyError:
        raise CliError(f"no definition of {wf_type} in {project.definitions_dir}") from None
    api = Api(str(state["api_url"]), timeout=5)
    deadline = time.monotonic() + RELOAD_WAIT_SECONDS
    while True:  # its process lives: its API may be between two control processes (a reload)
        try:
            api.call("GET", "/definitions")
            break
        except CliError:
            if time.monotonic() >= deadline:
                return None  # a state file left by a stack that no longer serves
            time.sleep(0.2)
    while time.monotonic() < deadline:
        try:
            if api.call("GET", f"/definitions/{wf_type}").get("hash") == wanted:
                return str(state["api_url"])
        except CliError:
            pass  # not known yet, or the control process is being replaced
        time.sleep(0.1)
    raise CliError(
        f"the running `shepherd local` ({state['api_url']}) has not taken up {wf_type} as it "
        f"is on disk after {RELOAD_WAIT_SECONDS:.0f}s: see its output, or use --fresh"
    )


def cmd_init(args: argparse.Namespace) -> int:
    from shepherd_cli.scaffold import ScaffoldError, scaffold
    from shepherd_cli.sources import Source, SourceError

    folder = Path(args.directory)
    try:
        if args.shepherd:
            source = Source.parse(args.shepherd, index_url=args.index_url)
        else:
            source = Source.installed(index_url=args.index_url)
        written = scaffold(folder, source)
    except (ScaffoldError, SourceError) as exc:
        raise CliError(str(exc)) from None
    for path in written:
        print(f"  {path}")
    print(f"\nShepherd: {source.requirement()} ({source.describe()})")
    if source.note:
        print(f"note: {source.note}", file=sys.stderr)
    print(f"next: cd {folder} && make test && make demo")
    return 0


def cmd_console(args: argparse.Namespace) -> int:
    import webbrowser

    from shepherd_cli.console.proxy import Upstream

    api_url = args.api or os.environ.get("SHEPHERD_API") or DEFAULT_API
    Upstream(api_url).check_credentials()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    console = _serve_console(api_url, args.caller, args.host, args.port)
    signing = "signing with your AWS credentials" if console.upstream.signing else "local stack"
    print(f"Shepherd console on {console.url}  (API {console.upstream.base_url}, {signing})")
    print("Ctrl-C to stop", flush=True)
    if args.open:
        webbrowser.open(console.url)
    try:
        while not stop.wait(1):
            pass
    finally:
        console.stop()
    return 0


def _tag(text: str) -> tuple[str, str]:
    """`key:value` (split at the first colon: a key has none), as `GET /workflows?tag=` takes
    it; the API checks the caps."""
    key, colon, value = text.partition(":")
    if not colon or not key:
        raise CliError(f"--tag {text!r} is key:value")
    return key, value


def _match(texts: list[str]) -> dict[str, Any]:
    """`--match` as given: one JSON object (`'{"order_id": 7}'`: values compared as JSON), or
    `key=value` pairs whose values are strings (`order_id=o-1`)."""
    if len(texts) == 1 and texts[0].lstrip().startswith("{"):
        given = _input(texts[0], "--match")
        if not isinstance(given, dict):  # pragma: no cover - a JSON text starting with {
            raise CliError("--match is a JSON object")
        return given
    match: dict[str, Any] = {}
    for text in texts:
        key, eq, value = text.partition("=")
        if not eq or not key:
            raise CliError(f"--match {text!r} is key=value (or one JSON object)")
        match[key] = value
    return match


def cmd_start(args: argparse.Namespace, api: Api) -> int:
    payload = _input(args.input) if args.input else {}
    tags = dict(_tag(t) for t in args.tag) if args.tag else None
    accepted = api.start(args.type, payload, args.idempotency_key, tags=tags)
    print(accepted["workflow_id"] if not args.wait else f"started {accepted['workflow_id']}")
    if args.wait:
        return _watch(api, accepted["workflow_id"], args.timeout)
    return 0


def cmd_status(args: argparse.Namespace, api: Api) -> int:
    view = api.call("GET", f"/workflows/{args.workflow_id}")
    if args.json:
        print(json.dumps(view, indent=2))
    else:
        print("\n".join(status_lines(view)))
    return 0


def path_lines(entries: list[dict[str, Any]]) -> list[str]:
    """A state machine's path as `shepherd path` prints it: one line a state entered, with its
    visit (a loop's state once per visit) and its output, cut to a line's width."""
    lines = []
    for e in entries:
        if "output" in e:
            shown = json.dumps(e["output"], separators=(",", ":"))
        else:
            shown = "(large: see --json)" if e.get("output_ref") else "(running)"
        if len(shown) > 60:
            shown = shown[:57] + "..."
        lines.append(f"{e['number']:>5}  {e['state']:<32} visit {e['visit']:<4} {shown}")
    return lines


def cmd_path(args: argparse.Namespace, api: Api) -> int:
    """Every page of `GET /workflows/{id}/path` (at most `--limit` entries in all)."""
    entries: list[dict[str, Any]] = []
    token = None
    while len(entries) < args.limit:
        query = {"limit": min(100, args.limit - len(entries)), "next_token": token}
        page = api.call("GET", f"/workflows/{args.workflow_id}/path", query=query)
        entries += page["items"]
        token = page.get("next_token")
        if token is None:
            break
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        print("\n".join(path_lines(entries)))
        if token is not None:
            print(f"(the first {len(entries)} states; --limit for more)")
    return 0


def _watch(api: Api, workflow_id: str, timeout: float, interval: float = 0.5) -> int:
    tty = sys.stdout.isatty()
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        view = api.call("GET", f"/workflows/{workflow_id}")
        frame = "\n".join(watch_frame(view))
        if frame != last:
            if tty and last:
                print(f"\033[{last.count(chr(10)) + 1}F\033[J", end="")
            print(frame, flush=True)
            last = frame
        if view["status"] in TERMINAL:
            return 0 if view["status"] == "SUCCEEDED" else 2
        if time.monotonic() > deadline:
            raise CliError(f"still {view['status']} after {timeout:.0f}s")
        time.sleep(interval)


def cmd_watch(args: argparse.Namespace, api: Api) -> int:
    return _watch(api, args.workflow_id, args.timeout)


def cmd_list(args: argparse.Namespace, api: Api) -> int:
    """`shepherd list [--status S] [--type T] [--tag key:value] [--limit N]`: the caller's
    workflows, newest first (by a tag: through the tag's own index, not with status or type)."""
    query: dict[str, Any] = {"status": args.status, "type": args.type, "limit": args.limit}
    if args.tag is not None:
        if args.status or args.type:
            raise CliError("--tag is not combined with --status or --type")
        query["tag"] = ":".join(_tag(args.tag))
    page = api.call("GET", "/workflows", query=query)
    for item in page["items"]:
        tags = " ".join(f"{k}:{v}" for k, v in (item.get("tags") or {}).items())
        print(
            f"{item['workflow_id']}  {item['type']:<24} {item['status']:<12} {item['created_at']}"
            + (f"  {tags}" if tags else "")
        )
    if page.get("next_token"):
        print(f"(more: --next-token {page['next_token']})")
    return 0


def cmd_cancel(args: argparse.Namespace, api: Api) -> int:
    print(api.call("POST", f"/workflows/{args.workflow_id}/cancel")["status"])
    return 0


def cmd_retry(args: argparse.Namespace, api: Api) -> int:
    print(api.call("POST", f"/workflows/{args.workflow_id}/retry")["status"])
    return 0


def cmd_pause(args: argparse.Namespace, api: Api) -> int:
    print(api.call("POST", f"/workflows/{args.workflow_id}/pause")["status"])
    return 0


def cmd_resume(args: argparse.Namespace, api: Api) -> int:
    body: dict[str, Any] | None = None
    if args.step or args.input:
        if not (args.step and args.input):
            raise CliError("--step and --input go together (a replacement input for one step)")
        body = {"step": args.step, "input": _input(args.input)}
    print(api.call("POST", f"/workflows/{args.workflow_id}/resume", body)["status"])
    return 0


def cmd_compensate(args: argparse.Namespace, api: Api) -> int:
    print(api.call("POST", f"/workflows/{args.workflow_id}/compensate")["status"])
    return 0


def cmd_answer(args: argparse.Namespace, api: Api) -> int:
    """`shepherd approve|reject ID STEP [--comment] [--output]`: answer an Approval step."""
    body: dict[str, Any] = {}
    if args.comment is not None:
        body["comment"] = args.comment
    if getattr(args, "output", None) is not None:
        body["output"] = _input(args.output, "--output")
    path = f"/workflows/{args.workflow_id}/steps/{args.step}/{args.command}"
    step = api.call("POST", path, body)
    decision = step.get("decision") or {}
    print(f"{step['name']}: {step['status']} ({decision.get('verdict')} by {decision.get('by')})")
    return 0


def _fate(got: dict[str, Any]) -> str:
    if got.get("duplicate"):
        return "already sent (kept once)"
    if got.get("taken_by"):
        return f"taken by {got['taken_by']}"
    return "kept until a step waits for it"


def cmd_signal(args: argparse.Namespace, api: Api) -> int:
    """`shepherd signal ID NAME [--payload JSON] [--signal-id X]`: send a signal into a
    running workflow (kept until a WaitForSignal step of that name takes it).
    `shepherd signal NAME --match key=value ...`: send it to every open workflow of the
    caller whose step of that name waits on those values (POST /signals)."""
    body: dict[str, Any] = {}
    if args.payload is not None:
        body["payload"] = _input(args.payload, "--payload")
    if args.signal_id is not None:
        body["signal_id"] = args.signal_id
    if args.match:
        if args.name is not None:
            raise CliError("with --match, name only the signal (no workflow id)")
        got = api.call(
            "POST", "/signals", {"name": args.workflow_id, "match": _match(args.match), **body}
        )
        sent = got.get("signals") or []
        print(f"{got['name']}: sent to {len(sent)} workflow{'s' if len(sent) != 1 else ''}")
        for one in sent:
            print(f"{one['workflow_id']}  #{one['sequence']}: {_fate(one)}")
        return 0
    if args.name is None:
        raise CliError("signal ID NAME, or signal NAME --match key=value")
    got = api.call("POST", f"/workflows/{args.workflow_id}/signals/{args.name}", body)
    print(f"{got['name']} #{got['sequence']}: {_fate(got)}")
    return 0


def cmd_approvals(args: argparse.Namespace, api: Api) -> int:
    """`shepherd approvals [--limit N]`: the approvals waiting for the caller, newest first,
    every page (each answered with `shepherd approve|reject ID STEP`)."""
    token: str | None = None
    shown = 0
    while shown < args.limit:
        query: dict[str, Any] = {"limit": min(100, args.limit - shown)}
        if token:
            query["next_token"] = token
        page = api.call("GET", "/approvals", query=query)
        for item in page["items"]:
            print(
                f"{item['workflow_id']}  {item['step']:<20} {item['type']:<24} "
                f"requested {item['requested_at']}  times out {item['due_at']}"
            )
        shown += len(page["items"])
        token = page.get("next_token")
        if not token:
            break
    if not shown:
        print("no approval is waiting for you")
    return 0


def cmd_task(args: argparse.Namespace, api: Api) -> int:
    """What an outside system does with a callback step's task token, from a shell."""
    wrong = [
        option
        for option, given, allowed in (
            ("--output", args.output, "success"),
            ("--details", args.details, "heartbeat"),
            ("--error", args.error, "failure"),
            ("--cause", args.cause, "failure"),
        )
        if given is not None and args.action != allowed
    ]
    if wrong:
        raise CliError(f"{wrong[0]} does not go with `task {args.action}`")
    if args.action == "success":
        task = api.succeed(args.token, _input(args.output, "--output") if args.output else None)
    else:
        body: dict[str, Any] = {}
        if args.details is not None:
            body["details"] = _input(args.details, "--details")
        if args.action == "failure":
            body = {"error": args.error or "TaskFailed"}
            if args.cause is not None:
                body["cause"] = args.cause
        task = api.task(args.token, args.action, body)
    print(
        f"{task['workflow_id']} {task['kind']} {task['step']} attempt {task['attempt']}: "
        f"{task['status']}"
    )
    return 0


def cmd_pools(args: argparse.Namespace, api: Api) -> int:
    if args.action in ("pause", "resume"):
        if not args.pool:
            raise CliError(f"shepherd pools {args.action} needs a pool name")
        api.call("POST", f"/pools/{args.pool}/{args.action}")
    elif args.pool:
        raise CliError("give a pool only with pause or resume")
    for pool in api.call("GET", "/pools")["items"]:
        backlog = pool.get("backlog") or {}
        state = "PAUSED" if pool["paused"] else "running"
        print(
            f"{pool['name']:<20} {state:<8} visible {backlog.get('visible', '?'):>5}  "
            f"in flight {backlog.get('in_flight', '?'):>5}  delayed {backlog.get('delayed', '?'):>5}"
        )
    return 0


def cmd_schedules(args: argparse.Namespace, api: Api) -> int:
    if args.action in ("pause", "resume"):
        if not args.name:
            raise CliError(f"shepherd schedules {args.action} needs a schedule name")
        api.call("POST", f"/schedules/{args.name}/{args.action}")
    elif args.name:
        raise CliError("give a schedule only with pause or resume")
    for item in api.call("GET", "/schedules")["items"]:
        state = "PAUSED" if item["paused"] else ("running" if item["enabled"] else "disabled")
        upcoming = item["next"][0] if item["next"] else "-"
        print(
            f"{item['name']:<20} {state:<8} {item['workflow_type']:<24} "
            f"{item['expression']} {item['timezone']}  next {upcoming}"
        )
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    """Replay what the event relay could not publish: each message of its on-failure queue
    names a range of the table's stream; those records' events go on the bus again (at least
    once: subscribers deduplicate on `event_id`). AWS credentials from the standard chain."""
    import boto3
    from shepherd.adapters.dynamodb import change_of_record
    from shepherd.adapters.eventbridge import EventBridgePublisher
    from shepherd.changes import events_of

    from shepherd_cli.streams import replay_failures

    publisher = EventBridgePublisher(boto3.client("events"), args.bus)

    def publish(record: dict[str, Any]) -> int:
        events = events_of(change_of_record(record))
        if events:
            publisher.publish(events)
        return len(events)

    messages, records = replay_failures(
        boto3.client("sqs"), boto3.client("dynamodbstreams"), args.queue, publish
    )
    print(f"replayed {records} stream records from {messages} failure messages")
    return 0


def cmd_replay_starts(args: argparse.Namespace) -> int:
    """Make the starts that could not be made: each message of the start failures' queue (and
    of the schedules' dead-letter queue) goes to the events function again; a start already
    made returns its workflow and starts nothing (tools/shepherd_cli/starts.py)."""
    import boto3

    from shepherd_cli.starts import invoker, replay_starts

    report = replay_starts(
        boto3.client("sqs"), args.queue, invoker(boto3.client("lambda"), args.function)
    )
    for line in report.lines:
        print(line)
    print(
        f"{report.messages} messages: {report.started} started, {report.already} already "
        f"started, {report.skipped} skipped (paused schedule), {report.rejected} refused, "
        f"{report.failed} failed again, {report.unreadable} not start events (kept)"
    )
    return 1 if report.failed or report.unreadable else 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """Deploy this release over the previous one, one table change per deploy, printing each
    step (tools/shepherd_cli/upgrade.py, docs/upgrading.md)."""
    import boto3

    from shepherd_cli.upgrade import UpgradeError, cdk_deploy, table_name_of, upgrade

    try:
        table = args.table or table_name_of(boto3.client("cloudformation"), args.stack)
        deploy = cdk_deploy(shlex.split(args.cdk), args.cdk_args, print)
        upgrade(
            boto3.client("dynamodb"),
            table,
            deploy,
            print,
            dry_run=args.dry_run,
            rekeying=not args.no_rekey,
        )
    except UpgradeError as exc:
        raise CliError(str(exc)) from None
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Every mistake a person can make in a definition or in `[tool.shepherd]` is one line
    naming the file, the step and the field (exit 1), never a traceback. Every name a
    definition uses resolves, with the nearest one when it does not: agents (registered by the
    agent modules), child workflows (defined in the folder or the files given), step names
    (at parse), and the pools `--pool-policies` sets (named by some definition)."""
    from shepherd import fanout
    from shepherd.asl import is_asl_file
    from shepherd.definitions import check_agents, check_repeated_children, load_file
    from shepherd.errors import DefinitionError
    from shepherd.user_code import AgentModuleError, load_agents

    project = _project(args)
    failed = False
    known: set[str] | None = None
    try:
        known = load_agents(project.agent_modules).names()
    except AgentModuleError as exc:
        failed = True
        print(f"{exc} (named in {project.where})", file=sys.stderr)
    if known is not None and not project.agent_modules:
        print(
            f"no agent modules ({project.where}): name them in [tool.shepherd] agent-modules "
            "or with --agents",
            file=sys.stderr,
        )
    names: dict[str, Path] = {}
    loaded: dict[str, Definition] = {}
    for path in [Path(f) for f in args.files] or _definition_files(project.definitions_dir):
        if is_asl_file(path):
            failed = _validate_asl(path, known, names) or failed
            continue
        try:
            definition = load_file(path)
            if known is not None:
                check_agents(definition, known, str(path))
        except DefinitionError as exc:
            failed = True
            print(str(exc), file=sys.stderr)
            continue
        if definition.name in names:
            failed = True
            print(
                f"{path}: Name: '{definition.name}' is defined twice (also {names[definition.name]})",
                file=sys.stderr,
            )
            continue
        names[definition.name] = path
        loaded[definition.name] = definition
    # A child `Workflow` resolves against every definition the engine would hold: the folder's
    # (when only some files are named, the others are still there to run).
    others = _other_definitions(project.definitions_dir, names) if args.files else {}
    sources = {name: str(path) for name, path in names.items()}
    nesting = fanout.check_nesting({**others, **loaded}, sources)
    nesting += check_repeated_children({**others, **loaded}, sources)
    pools = _unknown_pools(args, {**others, **loaded})
    bad = {line.split(": ", 1)[0] for line in nesting}
    for line in (*nesting, *pools):
        failed = True
        print(line, file=sys.stderr)
    for name, definition in loaded.items():  # an ASL file said its `ok` when it was read
        path = names[name]
        if str(path) not in bad:
            print(
                f"{path}: ok ({definition.name}, {len(definition.steps)} steps, "
                f"hash {definition.content_hash})"
            )
    return 1 if failed else 0


def _validate_asl(path: Path, known: set[str] | None, names: dict[str, Path]) -> bool:
    """One ASL file for `shepherd validate`: its errors, or `ok`; True when it failed."""
    from shepherd.adapters.sdk_models import sdk_knows
    from shepherd.asl import grants, workflow_type
    from shepherd.asl import load_file as load_asl
    from shepherd.errors import DefinitionError

    from shepherd_cli.asl import check_functions

    try:
        machine = load_asl(path)
    except DefinitionError as exc:
        print(str(exc), file=sys.stderr)
        return True
    problems = check_functions(machine, known, str(path)) if known is not None else []
    # What `cdk synth` would refuse to grant (the integrations role), said here first.
    refused = grants.plan(machine, knows=sdk_knows).refusals
    problems += [f"{path}: {r.where}: {r.reason}" for r in refused]
    name = workflow_type(path)
    if name in names:
        problems.append(f"{path}: workflow type '{name}' is defined twice (also {names[name]})")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return True
    names[name] = path
    print(f"{path}: ok ({name}, Amazon States Language, {len(machine.states)} states)")
    return False


def _other_definitions(folder: Path, named: dict[str, Path]) -> dict[str, Definition]:
    """The folder's definitions beside the files `validate` was given (theirs are reported
    on their own run; here they only resolve names)."""
    from shepherd.definitions import definition_files, load_file
    from shepherd.errors import DefinitionError

    out: dict[str, Definition] = {}
    if not folder.is_dir():
        return out
    given = {p.resolve() for p in named.values()}
    for path in definition_files(folder):
        if path.resolve() in given:
            continue
        try:
            definition = load_file(path)
        except DefinitionError:
            continue
        out.setdefault(definition.name, definition)
    return out


def _unknown_pools(args: argparse.Namespace, definitions: dict[str, Definition]) -> list[str]:
    """`--pool-policies FILE`: a policy for a pool no definition names would never apply."""
    from shepherd.suggest import did_you_mean

    policies = _pool_policies(getattr(args, "pool_policies", None))
    named = {task.pool for d in definitions.values() for task in d.tasks}
    return [
        f"{args.pool_policies}: pool '{pool}': no definition names this pool"
        + did_you_mean(pool, named)
        for pool in sorted(policies)
        if pool not in named
    ]


def _definition_files(folder: Path) -> list[Path]:
    from shepherd.asl import ASL_SUFFIXES, asl_files
    from shepherd.definitions import DEFINITION_SUFFIXES, definition_files

    if not folder.is_dir():
        raise CliError(
            f"no definitions folder {folder} ([tool.shepherd] definitions, or --definitions)"
        )
    files = sorted(definition_files(folder) + asl_files(folder))
    if not files:
        raise CliError(
            f"no definitions in {folder} (files ending "
            f"{', '.join(DEFINITION_SUFFIXES + ASL_SUFFIXES)})"
        )
    return files


def cmd_asl(args: argparse.Namespace) -> int:
    """`shepherd asl run FILE`: an ASL state machine in process (shepherd_cli.asl)."""
    from shepherd.errors import DefinitionError
    from shepherd.user_code import AgentModuleError, load_agents

    from shepherd_cli.asl import cmd_asl_run

    args.input = _input(args.input)
    project = _project(args)
    try:
        registry = load_agents(project.agent_modules)
        return cmd_asl_run(args, registry)
    except (DefinitionError, AgentModuleError) as exc:
        raise CliError(str(exc)) from None


def cmd_graph(args: argparse.Namespace) -> int:
    from shepherd.definitions import load_directory
    from shepherd.errors import DefinitionError

    try:
        definitions = load_directory(_project(args).definitions_dir)
    except DefinitionError as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    if args.type not in definitions:
        from shepherd.suggest import did_you_mean

        raise CliError(
            f"unknown workflow type '{args.type}'{did_you_mean(args.type, definitions)} "
            f"(known: {', '.join(sorted(definitions))})"
        )
    print(graph(definitions[args.type]))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shepherd", description=__doc__)
    p.add_argument("--api", help="API base URL (default: $SHEPHERD_API or http://127.0.0.1:8080)")
    p.add_argument("--caller", help="local stack only: act as this caller (X-Shepherd-Caller)")
    sub = p.add_subparsers(dest="command", required=True)

    local = sub.add_parser("local", help="run all of Shepherd locally on moto")
    local.add_argument("--port", type=int, default=8080, help="the API's port (0: any)")
    local.add_argument("--moto-port", type=int, default=0, help="moto's port (default: any)")
    local.add_argument(
        "--no-reload",
        dest="reload",
        action="store_false",
        help="do not take up changed definitions and agent code while running",
    )
    local.add_argument(
        "--definitions", help="definitions folder (default: [tool.shepherd] in pyproject.toml)"
    )
    local.add_argument(
        "--agents",
        metavar="MODULES",
        help="agent modules, comma-separated (default: [tool.shepherd] agent-modules)",
    )
    local.add_argument("--workers", type=int, default=1, help="worker processes per agent pool")
    local.add_argument(
        "--sweep-interval", type=float, default=1.0, help="seconds between supervisor sweeps"
    )
    local.add_argument(
        "--event-owner",
        action="append",
        metavar="SOURCE=CALLER",
        help="StartWorkflow events from SOURCE are owned by CALLER (repeatable)",
    )
    local.add_argument(
        "--operator",
        action="append",
        metavar="CALLER",
        help="a caller who may pause and resume pools and schedules (repeatable; default: the "
        "default caller)",
    )
    local.add_argument(
        "--schedule-owner",
        metavar="CALLER",
        help="who owns the workflows the definitions' schedules start (default: the default "
        "caller)",
    )
    local.add_argument(
        "--pool-policies",
        metavar="FILE",
        help='each pool\'s rate limit (JSON: {"payments": {"RateLimit": {"PerSecond": 5, '
        "\"Burst\": 5}}}), as the construct's pool_settings (default: the project's "
        f"{POOL_POLICIES_FILE} beside pyproject.toml, if there is one)",
    )
    local.add_argument(
        "--console-port", type=int, default=CONSOLE_PORT, help="the web console's port (0: any)"
    )
    local.add_argument(
        "--no-console", dest="console", action="store_false", help="do not serve the web console"
    )
    local.add_argument(
        "--events-tap",
        action="store_true",
        help="copy every lifecycle event to an SQS queue on moto, for a local subscriber "
        "(drain it: a queue nobody reads slows moto down as it fills)",
    )

    console = sub.add_parser(
        "console",
        help="web console for an API (local, or deployed: requests signed with your credentials)",
    )
    # Also accepted after the command (`shepherd console --api URL`); SUPPRESS keeps the
    # global option's value when it is not given here.
    console.add_argument("--api", default=argparse.SUPPRESS, help="API base URL")
    console.add_argument("--port", type=int, default=CONSOLE_PORT, help="0: any free port")
    console.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default 127.0.0.1: this machine only)",
    )
    console.add_argument("--open", action="store_true", help="open it in the default browser")

    start = sub.add_parser("start", help="start a workflow")
    start.add_argument("type")
    start.add_argument(
        "--input", help="JSON, or @file (over 5 MiB: uploaded first through POST /payloads)"
    )
    start.add_argument("--idempotency-key")
    start.add_argument(
        "--tag", action="append", metavar="KEY:VALUE", help="tag it (repeatable; at most 10)"
    )
    start.add_argument("--wait", action="store_true", help="watch it until it ends")
    start.add_argument("--timeout", type=float, default=600)

    status = sub.add_parser("status", help="a workflow and its steps")
    status.add_argument("workflow_id")
    status.add_argument("--json", action="store_true")

    path = sub.add_parser(
        "path", help="a state machine's path: the states it entered, in order, with each output"
    )
    path.add_argument("workflow_id")
    path.add_argument("--limit", type=int, default=1000, help="at most this many states")
    path.add_argument("--json", action="store_true", help="every entry, input and output")

    watch = sub.add_parser("watch", help="live view until the workflow ends")
    watch.add_argument("workflow_id")
    watch.add_argument("--timeout", type=float, default=600)

    lst = sub.add_parser("list", help="your workflows, newest first")
    lst.add_argument("--status")
    lst.add_argument("--type")
    lst.add_argument("--limit", type=int, default=20)
    lst.add_argument("--tag", metavar="KEY:VALUE", help="those with this tag (its own index)")

    for name, text in (
        ("cancel", "cancel: compensate what may have acted, end CANCELLED"),
        ("retry", "redrive a FAILED workflow"),
        ("pause", "pause a running workflow: nothing new is dispatched"),
        ("compensate", "give up on a running or paused workflow: compensate, end COMPENSATED"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("workflow_id")

    resume = sub.add_parser("resume", help="resume a paused workflow (failed steps retried)")
    resume.add_argument("workflow_id")
    resume.add_argument("--step", help="give this step a replacement input")
    resume.add_argument("--input", help="the replacement input: JSON, or @file")

    for name, text in (
        ("approve", "approve a waiting Approval step (its dependents run)"),
        ("reject", "reject a waiting Approval step (it fails: Rejected)"),
    ):
        answer = sub.add_parser(name, help=text)
        answer.add_argument("workflow_id")
        answer.add_argument("step")
        answer.add_argument("--comment", help="recorded with the decision")
        if name == "approve":
            answer.add_argument("--output", help="the step's output: JSON, or @file")

    signal = sub.add_parser(
        "signal",
        help="send a signal into a running workflow (a WaitForSignal step takes it), or with "
        "--match into every open one of yours waiting on those values",
        usage="shepherd signal ID NAME [options] | shepherd signal NAME --match KEY=VALUE ...",
    )
    signal.add_argument("workflow_id", metavar="ID", help="the workflow (with --match: NAME)")
    signal.add_argument("name", metavar="NAME", nargs="?", help="the signal's name")
    signal.add_argument(
        "--match",
        action="append",
        metavar="KEY=VALUE",
        help="the business key a Match names (repeatable; or one JSON object for non-strings)",
    )
    signal.add_argument("--payload", help="the signal's payload: JSON, or @file")
    signal.add_argument("--signal-id", help="a dedupe key: the same signal is kept once")

    approvals = sub.add_parser(
        "approvals", help="the approvals waiting for you, newest first (answer: approve/reject)"
    )
    approvals.add_argument("--limit", type=int, default=100, help="at most this many (100)")

    task = sub.add_parser(
        "task", help="answer a callback step with its task token: heartbeat, success, failure"
    )
    task.add_argument("action", choices=["heartbeat", "success", "failure"])
    task.add_argument("token")
    task.add_argument(
        "--output", help="success: JSON, or @file (over 5 MiB: uploaded first, up to 100 MiB)"
    )
    task.add_argument("--details", help="heartbeat: progress details, JSON or @file")
    task.add_argument("--error", help="failure: the error name (default TaskFailed)")
    task.add_argument("--cause", help="failure: what happened")

    pools = sub.add_parser("pools", help="agent pools and their backlogs; pause or resume one")
    pools.add_argument("action", nargs="?", choices=["list", "pause", "resume"], default="list")
    pools.add_argument("pool", nargs="?")

    scheds = sub.add_parser(
        "schedules", help="the definitions' schedules and their next firings; pause or resume one"
    )
    scheds.add_argument("action", nargs="?", choices=["list", "pause", "resume"], default="list")
    scheds.add_argument("name", nargs="?")

    events = sub.add_parser("events", help="lifecycle events: replay what the relay gave up on")
    events.add_argument("action", choices=["replay"])
    events.add_argument("--queue", required=True, help="the relay's on-failure queue URL")
    events.add_argument("--bus", required=True, help="the Shepherd event bus name")

    replay = sub.add_parser(
        "replay-starts",
        help="start the workflows whose start failed (start failures' and schedules' queues)",
    )
    replay.add_argument(
        "--queue",
        action="append",
        required=True,
        help="a queue URL: the stack's StartFailuresQueueUrl or ScheduleDeadLettersQueueUrl "
        "output (repeat for both)",
    )
    replay.add_argument(
        "--function", required=True, help="the events function (EventsFunctionName output)"
    )

    up = sub.add_parser(
        "upgrade",
        help="deploy this release over the previous one, one table change per cdk deploy",
    )
    up.add_argument("--table", help="the table's name (default: the stack's TableName output)")
    up.add_argument("--stack", default="Shepherd", help="the stack's name (default: Shepherd)")
    up.add_argument("--cdk", default="npx cdk", help="how to run the CDK CLI (default: npx cdk)")
    up.add_argument("--dry-run", action="store_true", help="print the steps, deploy nothing")
    up.add_argument(
        "--no-rekey",
        action="store_true",
        help="leave the previous release's workflow items out of the lists (no table Scan)",
    )
    up.add_argument(
        "cdk_args", nargs="*", help="more arguments for each cdk deploy (after --: -c key=value)"
    )

    run = sub.add_parser(
        "run",
        help="run one workflow on the running `shepherd local`, or a stack started for it "
        "(exit 0: SUCCEEDED)",
    )
    run.add_argument("type")
    run.add_argument("--input", help="JSON, or @file")
    run.add_argument("--timeout", type=float, default=120)
    run.add_argument("--definitions", help="default: [tool.shepherd] definitions")
    run.add_argument("--agents", metavar="MODULES", help="default: [tool.shepherd] agent-modules")
    run.add_argument(
        "--fresh",
        action="store_true",
        help="start a stack for this run even when `shepherd local` runs the project",
    )
    run.add_argument("--port", type=int, default=0, help="a started stack's API port (0: any)")
    run.add_argument("--moto-port", type=int, default=0, help="a started stack's moto port")

    init = sub.add_parser("init", help="scaffold a new project that uses Shepherd as a library")
    init.add_argument("directory")
    init.add_argument(
        "--shepherd",
        metavar="VERSION|WHEEL|GIT_URL",
        help="where the project installs Shepherd from: a version on a package index, a wheel "
        "file (copied into the project), or a git URL pinned to a commit or tag (default: the "
        "way this Shepherd was installed)",
    )
    init.add_argument("--index-url", help="the package index to install from (pip --index-url)")

    validate = sub.add_parser("validate", help="check definition files (exit 1 on errors)")
    validate.add_argument("files", nargs="*", help="default: every file of the definitions folder")
    validate.add_argument("--definitions", help="default: [tool.shepherd] definitions")
    validate.add_argument(
        "--agents", metavar="MODULES", help="default: [tool.shepherd] agent-modules"
    )
    validate.add_argument(
        "--pool-policies",
        metavar="FILE",
        help="also check a `shepherd local --pool-policies` file: every pool it sets is named",
    )

    from shepherd_cli.asl import add_parser as add_asl_parser

    add_asl_parser(sub)

    gr = sub.add_parser("graph", help="Mermaid flowchart of a definition, with compensations")
    gr.add_argument("type")
    gr.add_argument("--definitions", help="default: [tool.shepherd] definitions")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    local: dict[str, Callable[[argparse.Namespace], int]] = {
        "local": cmd_local,
        "console": cmd_console,
        "validate": cmd_validate,
        "run": cmd_run,
        "init": cmd_init,
        "graph": cmd_graph,
        "asl": cmd_asl,
        "events": cmd_events,
        "replay-starts": cmd_replay_starts,
        "upgrade": cmd_upgrade,
    }
    try:
        if args.command in local:
            return local[args.command](args)
        api = Api(args.api, caller=args.caller or os.environ.get("SHEPHERD_CALLER"))
        handler = {
            "start": cmd_start,
            "status": cmd_status,
            "path": cmd_path,
            "watch": cmd_watch,
            "list": cmd_list,
            "cancel": cmd_cancel,
            "retry": cmd_retry,
            "pause": cmd_pause,
            "resume": cmd_resume,
            "compensate": cmd_compensate,
            "pools": cmd_pools,
            "schedules": cmd_schedules,
            "task": cmd_task,
            "approvals": cmd_approvals,
            "approve": cmd_answer,
            "reject": cmd_answer,
            "signal": cmd_signal,
        }[args.command]
        return handler(args, api)
    except (CliError, ProjectError) as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
