"""The local stack's control process: the HTTP API (turned into API Gateway events for the real
API and callbacks handlers), the supervisor on a short interval, StartWorkflow events, the
definitions' schedules on their own clock, and the event relay fed from the table's stream
(as its event source mapping would).

Moto never runs Lambda code nor fires schedules; this process does what AWS would."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import traceback
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from shepherd.limits import MAX_REQUEST_BYTES

from shepherd_cli import apigw
from shepherd_cli.lambda_kit import LOCAL_REGION, local_context, scheduled_event
from shepherd_cli.local_schedules import ScheduleClock
from shepherd_cli.sandboxes import DEFAULT_CONCURRENCY, Sandboxes

START_EVENTS_QUEUE = "shepherd-local-start-events"
# Accept bursts: the kernel queues this many connections the accept loop has not taken yet
# (socketserver's default of 5 reset most of a 50-connection burst).
LISTEN_BACKLOG = 128
# A connection that sends nothing for this long is closed: a half-open or idle client must
# not hold a thread for ever (1,000 of them held 1,000 threads).
READ_TIMEOUT_SECONDS = 10.0
_DRAIN_CHUNK = 64 * 1024
# The supervisor, the relay and the events handler run in this process, one at a time.
BACKGROUND_LOCK = threading.Lock()


class ApiServer(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True


class ApiHandler(BaseHTTPRequestHandler):
    """HTTP -> the local API Gateway (`apigw.Gateway`) -> the real handlers.

    What http.server refuses before a request reaches the gateway (an unknown method, a
    request line or header over its limits, a malformed request line) is answered in the
    API's error shape too (`send_error`), never as an HTML page."""

    server_version = "shepherd-local"
    timeout = READ_TIMEOUT_SECONDS  # socketserver sets it on the connection: every read waits at most this
    gateway: apigw.Gateway

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals, as API Gateway's gateway responses in the error shape:
        an unknown method as an unknown route (401), the others keeping their status."""
        if self.request_version == "HTTP/0.9":  # the request line was not understood
            self.request_version = self.protocol_version  # still answer with a status line
        self.close_connection = True
        request_id = str(uuid.uuid4())
        if code == HTTPStatus.NOT_IMPLEMENTED:
            reply = apigw.gateway_reply("MISSING_AUTHENTICATION_TOKEN", request_id)
        else:
            fallback = "DEFAULT_5XX" if code >= 500 else "DEFAULT_4XX"
            text = message or HTTPStatus(code).phrase
            reply = apigw.gateway_reply(fallback, request_id, text, status=code)
        self._send(reply)

    def _serve(self) -> None:
        try:
            reply = self._handle()
        except Exception:  # a bug here must still answer, never drop the connection
            traceback.print_exc()
            reply = apigw.gateway_reply("DEFAULT_5XX", str(uuid.uuid4()), "local gateway error")
        self._send(reply)

    def _handle(self) -> apigw.Reply:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            return apigw.gateway_reply(
                "DEFAULT_4XX", str(uuid.uuid4()), "bad Content-Length", status=400
            )
        if length > MAX_REQUEST_BYTES:
            self._drain(length)
            return apigw.gateway_reply("REQUEST_TOO_LARGE", str(uuid.uuid4()))
        try:
            body = self.rfile.read(length) if length else b""
        except TimeoutError:  # the body stalled: answer (and hang up) instead of waiting on
            self.close_connection = True
            return apigw.gateway_reply(
                "DEFAULT_4XX", str(uuid.uuid4()), "the request body did not arrive", status=408
            )
        parts = urlsplit(self.path)
        return self.gateway.handle(
            self.command, parts.path, parts.query, list(self.headers.items()), body
        )

    def _drain(self, length: int) -> None:
        """Read (and drop) a refused body, so the client gets to read our reply."""
        self.close_connection = True
        left = length
        while left > 0:
            chunk = self.rfile.read(min(_DRAIN_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)

    def _send(self, reply: apigw.Reply) -> None:
        self.send_response(reply.status)
        headers = {"Content-Type": "application/json", **reply.headers}
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (TimeoutError, ConnectionError):  # a client that stalled mid-body, or left
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:
        print(json.dumps({"access": format % args}), flush=True)


def invoke(handler: Any, event: dict[str, Any], name: str, timeout_s: int) -> None:
    """Call a handler the way Lambda would; a failure is logged and the next run goes on."""
    context = local_context(f"shepherd-local-{name}", timeout_s)
    try:
        with BACKGROUND_LOCK:
            handler(event, context)
    except Exception as exc:  # a failed invocation, as on AWS: logged, retried by the next run
        print(json.dumps({f"{name}_error": repr(exc)}), flush=True)


def supervise(interval: float, stop: threading.Event) -> None:
    from shepherd_handlers import supervisor

    while not stop.wait(interval):
        invoke(supervisor.handler, scheduled_event(), "supervisor", 70)


def relay_start_events(queue_url: str, stop: threading.Event) -> None:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError
    from shepherd_handlers import events

    sqs = boto3.client("sqs")
    while not stop.is_set():
        try:
            got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        except (BotoCoreError, ClientError):
            stop.wait(0.5)  # moto restarting or stopping: try again unless we are stopping
            continue
        for message in got.get("Messages", []):
            event = json.loads(message["Body"])
            # moto's EventBridge leaves `account` out of the envelope; AWS always sets it.
            event.setdefault("account", apigw.LOCAL_ACCOUNT)
            invoke(events.handler, event, "events", 30)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


SCHEDULE_TICK_SECONDS = 1.0  # Scheduler fires on the minute at best: a second is plenty


def fire_schedules(
    anchor: datetime,
    stop: threading.Event,
    *,
    interval: float = SCHEDULE_TICK_SECONDS,
    now: Callable[[], datetime] | None = None,
) -> ScheduleClock:
    """The definitions' enabled schedules, fired into the events handler as EventBridge
    Scheduler would invoke it (`shepherd_cli.local_schedules`); a `rate` counts from `anchor`,
    the local stack's start. Runs until `stop`; the clock, for a test to look at."""
    from shepherd_handlers import events, runtime

    def definitions() -> dict[str, Any]:
        return runtime.engine().catalog.all()  # a redeploy's, from its next tick

    clock = ScheduleClock(
        definitions,
        lambda event: invoke(events.handler, event, "events", 30),
        anchor=anchor,
        account=apigw.LOCAL_ACCOUNT,
        region=LOCAL_REGION,
        **({"now": now} if now is not None else {}),
    )
    clock.run(stop, interval)
    return clock


RELAY_POLL_SECONDS = 0.2


def relay_changes(stop: threading.Event, checkpoint: Path | None = None) -> None:
    """The table's stream -> the event relay, with the deployed mapping's filters and retry
    rules (`shepherd_cli.streams`). Goes on from `checkpoint` (the last record delivered, as
    the mapping keeps it), else from the stream's start, so a replaced control process
    announces again what it may not have announced, and no more (at least once: subscribers
    deduplicate on `event_id`)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError
    from shepherd.settings import Settings
    from shepherd_handlers import stream

    from shepherd_cli.streams import StreamMapping, StreamReader, stream_arn

    def consume(event: dict[str, Any]) -> Any:
        context = local_context("shepherd-local-relay", 60)
        try:
            with BACKGROUND_LOCK:
                return stream.handler(event, context)
        except Exception as exc:  # the whole batch failed: the mapping retries it
            print(json.dumps({"relay_error": repr(exc)}), flush=True)
            seqs = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
            return {"batchItemFailures": [{"itemIdentifier": s} for s in seqs]}

    def on_failure(record: dict[str, Any]) -> None:
        seq = record["dynamodb"]["SequenceNumber"]
        print(json.dumps({"relay_gave_up": seq}), flush=True)

    mapping: StreamMapping | None = None
    kept: dict[str, str] = {}
    while not stop.wait(RELAY_POLL_SECONDS):
        try:
            if mapping is None:
                reader = StreamReader(
                    boto3.client("dynamodbstreams"),
                    stream_arn(boto3.client("dynamodb"), Settings.from_env().table),
                    after=_read_checkpoint(checkpoint),
                )
                mapping = StreamMapping(reader, consume, on_failure=on_failure)
            mapping.poll()
            # Everything read has been delivered (or given up on): the next process starts after.
            if checkpoint is not None and not mapping.pending and mapping.reader.positions != kept:
                kept = dict(mapping.reader.positions)
                checkpoint.write_text(json.dumps(kept))
        except (BotoCoreError, ClientError):
            continue  # moto restarting or stopping: try again unless we are stopping


def redeploy(functions: dict[str, Sandboxes], env_file: Path) -> None:
    """Changed definitions (`shepherd local` sends SIGHUP): the settings `env_file` holds
    (queues for new pools) from now on, a new engine for the supervisor, the relay and the
    events handler, and new API sandboxes (the busy ones after their request), as a deploy
    would start new Lambda sandboxes. The HTTP server never stops listening."""
    import os

    from shepherd_handlers import runtime

    os.environ.update(json.loads(env_file.read_text()))
    with BACKGROUND_LOCK:
        runtime.engine.cache_clear()
    for sandboxes in functions.values():
        sandboxes.recycle()
    print(json.dumps({"redeployed": sorted(functions)}), flush=True)


def _read_checkpoint(path: Path | None) -> dict[str, str]:
    try:
        return dict(json.loads(path.read_text())) if path is not None else {}
    except (OSError, ValueError):
        return {}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sweep-interval", type=float, default=1.0)
    parser.add_argument("--start-events-queue", required=True)
    parser.add_argument("--relay-checkpoint", type=Path, help="where the relay keeps its place")
    parser.add_argument("--env-file", type=Path, help="the settings to take up on SIGHUP")
    parser.add_argument(
        "--schedule-anchor",
        type=datetime.fromisoformat,
        default=None,
        help="when the local stack started (ISO 8601): its schedules' rates count from it",
    )
    parser.add_argument(
        "--api-concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="sandboxes per API function (Lambda's concurrency)",
    )
    args = parser.parse_args()

    functions = {
        target: Sandboxes(target, apigw.load_handler, concurrency=args.api_concurrency)
        for target in ("api", "callbacks")
    }
    ApiHandler.gateway = apigw.Gateway(
        {},
        lambda target: apigw.lambda_context(f"shepherd-local-{target}"),
        invoke=lambda target, event, timeout: functions[target].invoke(event, timeout),
    )
    server = ApiServer(("127.0.0.1", args.port), ApiHandler)
    stop = threading.Event()

    def shutdown(*_: Any) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    def on_hangup(*_: Any) -> None:
        if args.env_file is not None:
            threading.Thread(target=redeploy, args=(functions, args.env_file)).start()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    signal.signal(signal.SIGHUP, on_hangup)
    threads = [
        threading.Thread(target=supervise, args=(args.sweep_interval, stop), daemon=True),
        threading.Thread(
            target=relay_start_events, args=(args.start_events_queue, stop), daemon=True
        ),
        threading.Thread(target=relay_changes, args=(stop, args.relay_checkpoint), daemon=True),
        threading.Thread(
            target=fire_schedules,
            args=(args.schedule_anchor or datetime.now(UTC), stop),
            name="schedules",
            daemon=True,
        ),
    ]
    for thread in threads:
        thread.start()
    print(json.dumps({"listening": f"http://127.0.0.1:{args.port}"}), flush=True)
    server.serve_forever(poll_interval=0.2)
    stop.set()
    for thread in threads:
        thread.join(timeout=3)
    for sandboxes in functions.values():
        sandboxes.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
