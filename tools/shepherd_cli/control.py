"""The local stack's control process: the HTTP API (turned into API Gateway events for the real
API and callbacks handlers), the supervisor on a short interval, and StartWorkflow events.

Moto never runs Lambda code nor fires schedules; this process does what AWS would."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from shepherd_cli import apigw
from shepherd_cli.worker import Context

START_EVENTS_QUEUE = "shepherd-local-start-events"
_lock = threading.Lock()  # the Powertools resolvers keep per-request state: one at a time


def _handlers() -> dict[str, Any]:
    from shepherd_handlers import api, callbacks

    return {"api": api.handler, "callbacks": callbacks.handler}


class ApiHandler(BaseHTTPRequestHandler):
    server_version = "shepherd-local"
    targets: dict[str, Any] = {}

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        found = apigw.match(parts.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else None
        if found is None:
            self._reply(404, {"error": {"code": "NotFound", "message": "no such route"}})
            return
        route, params = found
        headers = {k: v for k, v in self.headers.items()}
        event = apigw.rest_event(
            self.command,
            parts.path,
            resource=route.resource,
            path_parameters=params,
            query=dict(parse_qsl(parts.query)),
            headers=headers,
            body=body,
            caller_arn=apigw.caller_arn(self.headers.get("X-Shepherd-Caller")),
        )
        context = Context(
            "shepherd-local-api", 29, aws_request_id=str(uuid.uuid4()), started=time.monotonic()
        )
        with _lock:
            reply = self.targets[route.target](event, context)
        status = int(reply["statusCode"])
        out_headers = dict(reply.get("headers") or {})
        for key, values in (reply.get("multiValueHeaders") or {}).items():
            out_headers[key] = values[-1]
        self._reply(status, reply.get("body") or "", out_headers)

    def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        for key, value in (headers or {"Content-Type": "application/json"}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:
        print(json.dumps({"access": format % args}), flush=True)


def invoke(handler: Any, event: dict[str, Any], name: str, timeout_s: int) -> None:
    """Call a handler the way Lambda would; a failure is logged and the next run goes on."""
    context = Context(
        f"shepherd-local-{name}",
        timeout_s,
        aws_request_id=str(uuid.uuid4()),
        started=time.monotonic(),
    )
    try:
        with _lock:
            handler(event, context)
    except Exception as exc:  # a failed invocation, as on AWS: logged, retried by the next run
        print(json.dumps({f"{name}_error": repr(exc)}), flush=True)


def supervise(interval: float, stop: threading.Event) -> None:
    from shepherd_handlers import supervisor

    while not stop.wait(interval):
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "detail": {},
        }
        invoke(supervisor.handler, event, "supervisor", 70)


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sweep-interval", type=float, default=1.0)
    parser.add_argument("--start-events-queue", required=True)
    args = parser.parse_args()

    ApiHandler.targets = _handlers()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), ApiHandler)
    stop = threading.Event()

    def shutdown(*_: Any) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    threads = [
        threading.Thread(target=supervise, args=(args.sweep_interval, stop), daemon=True),
        threading.Thread(
            target=relay_start_events, args=(args.start_events_queue, stop), daemon=True
        ),
    ]
    for thread in threads:
        thread.start()
    print(json.dumps({"listening": f"http://127.0.0.1:{args.port}"}), flush=True)
    server.serve_forever(poll_interval=0.2)
    stop.set()
    for thread in threads:
        thread.join(timeout=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
