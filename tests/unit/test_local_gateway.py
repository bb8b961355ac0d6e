"""The local stack's HTTP front (control.ApiServer + apigw.Gateway) behaves like API Gateway
in front of Lambda: bursts are accepted, a raising handler is a 5xx in the error shape (never
a dropped connection), unknown routes and methods get the gateway response, bodies over
10 MiB are 413, path parameters arrive percent-decoded, non-UTF-8 bodies arrive base64.
What http.server itself refuses (unknown methods, oversized request lines and headers, bad
request lines) is in the error shape too; a silent connection is closed after the read
timeout; handlers in sandbox processes (`shepherd_cli.sandboxes`) serve requests at once,
and one that overruns the gateway's timeout is a 504 in the error shape."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from shepherd.limits import MAX_REQUEST_BYTES
from shepherd_cli import apigw, control
from shepherd_cli.sandboxes import Sandboxes

BURST = 64


class Recorder:
    """A stand-in handler: records the event, answers 200 with what it saw."""

    def __init__(self, fail: bool = False, delay: float = 0.0) -> None:
        self.events: list[dict[str, Any]] = []
        self.fail = fail
        self.delay = delay

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("the handler crashed")
        self.events.append(event)
        seen = {"params": event["pathParameters"], "b64": event["isBase64Encoded"]}
        return {"statusCode": 200, "headers": {"X-Seen": "1"}, "body": json.dumps(seen)}


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[control.ApiServer] = []

    def start(handler: Recorder | None, gateway: apigw.Gateway | None = None) -> int:
        if gateway is None:
            assert handler is not None
            gateway = apigw.Gateway({"api": handler, "callbacks": handler}, lambda t: None)
        control.ApiHandler.gateway = gateway
        server = control.ApiServer(("127.0.0.1", 0), control.ApiHandler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}).start()
        return int(server.server_address[1])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def request(
    port: int, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return response.status, dict(response.getheaders()), json.loads(data) if data else None
    finally:
        conn.close()


def assert_error_shape(body: Any, code: str) -> None:
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert body["error"]["message"] and body["error"]["request_id"]


def test_a_burst_of_connections_is_accepted(serve: Any) -> None:
    port = serve(Recorder(delay=0.01))
    # All connections are opened before any request is sent, each within a short timeout:
    # they must fit in the listen backlog (with a backlog of 5 the kernel drops the others'
    # handshakes, which only complete after SYN retries of 1 s and more, or never).
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=0.9) for _ in range(BURST)]
    for sock in sockets:
        sock.settimeout(30)

    def one(sock: socket.socket) -> bytes:
        with sock:
            sock.sendall(b"GET /definitions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    with ThreadPoolExecutor(BURST) as pool:
        replies = list(pool.map(one, sockets))
    assert all(r.startswith(b"HTTP/1.0 200") for r in replies), [r[:40] for r in replies]


def test_a_raising_handler_is_a_502_in_the_error_shape(serve: Any) -> None:
    port = serve(Recorder(fail=True))
    status, _, body = request(port, "GET", "/definitions")
    assert status == 502
    assert_error_shape(body, "IntegrationFailure")


def test_unknown_routes_and_methods_get_the_gateway_response(serve: Any) -> None:
    handler = Recorder()
    port = serve(handler)
    for method, path in (
        ("GET", "/nowhere"),
        ("GET", "/workflows/a/b"),
        ("DELETE", "/workflows"),
        ("PATCH", "/tasks/tok/success"),
        ("GET", "/"),
    ):
        status, _, body = request(port, method, path)
        assert status == 401, (method, path)
        assert_error_shape(body, "MissingAuthenticationToken")
    assert handler.events == []


def test_a_body_over_10_mib_is_413_in_the_error_shape(serve: Any) -> None:
    handler = Recorder()
    port = serve(handler)
    status, _, body = request(port, "POST", "/workflows", b"x" * (MAX_REQUEST_BYTES + 1))
    assert status == 413
    assert_error_shape(body, "BodyTooLarge")
    assert handler.events == []
    status, _, _ = request(
        port, "POST", "/workflows", b"{}", **{"Content-Type": "application/json"}
    )
    assert status == 200


def test_path_parameters_arrive_percent_decoded(serve: Any) -> None:
    handler = Recorder()
    port = serve(handler)
    status, _, body = request(port, "GET", "/definitions/order%5Ffulfilment")
    assert status == 200 and body["params"] == {"name": "order_fulfilment"}
    status, _, body = request(port, "POST", "/schedules/a%2Fb%20c/pause")
    assert status == 200 and body["params"] == {"name": "a/b c"}
    assert handler.events[-1]["resource"] == "/schedules/{name}/pause"


def test_a_body_that_is_not_utf8_arrives_base64_encoded(serve: Any) -> None:
    handler = Recorder()
    port = serve(handler)
    raw = b'{"type": "\xff"}'
    status, _, body = request(port, "POST", "/workflows", raw)
    assert status == 200 and body["b64"] is True
    assert base64.b64decode(handler.events[-1]["body"]) == raw


def test_the_local_gateway_stands_in_for_iam_auth_when_given_credentials() -> None:
    handler = Recorder()
    gateway = apigw.Gateway({"api": handler}, lambda t: None, {"sig": "arn:aws:iam::1:user/a"})
    assert gateway.handle("GET", "/definitions", "", [], b"").status == 401
    assert gateway.handle("GET", "/definitions", "", [("Authorization", "bad")], b"").status == 403
    reply = gateway.handle("GET", "/definitions", "", [("authorization", "sig")], b"")
    assert reply.status == 200
    assert handler.events[-1]["requestContext"]["identity"]["userArn"] == "arn:aws:iam::1:user/a"


# ---------------------------------------------------------- what http.server refuses itself


def raw(port: int, data: bytes) -> tuple[int, Any]:
    """Send bytes as they are; the reply's status and JSON body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"application/json" in head, head
    return status, json.loads(body)


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"BREW /workflows HTTP/1.1\r\nHost: x\r\n\r\n", 401, "MissingAuthenticationToken"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "RequestRejected"),
        (
            b"GET /workflows HTTP/1.1\r\nX-Big: " + b"b" * 70_000 + b"\r\n\r\n",
            431,
            "RequestRejected",
        ),
        (
            b"GET /workflows HTTP/1.1\r\n"
            + b"".join(b"X-%d: v\r\n" % i for i in range(120))
            + b"\r\n",
            431,
            "RequestRejected",
        ),
        (b"GET /workflows HTTP/1.1 extra\r\n\r\n", 400, "RequestRejected"),
        (b"GARBAGE\r\n\r\n", 400, "RequestRejected"),
        (b"GET /workflows HTTP/2.0\r\n\r\n", 505, "GatewayError"),
    ],
    ids=[
        "unknown-method",
        "long-url",
        "long-header",
        "many-headers",
        "bad-line",
        "no-path",
        "http2",
    ],
)
def test_what_http_server_refuses_is_in_the_error_shape(
    serve: Any, request_bytes: bytes, status: int, code: str
) -> None:
    handler = Recorder()
    port = serve(handler)
    got, body = raw(port, request_bytes)
    assert got == status
    assert_error_shape(body, code)
    assert handler.events == []


def test_a_silent_connection_is_closed_after_the_read_timeout(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(control.ApiHandler, "timeout", 0.3)
    port = serve(Recorder())
    half_sent = socket.create_connection(("127.0.0.1", port), timeout=10)
    silent = socket.create_connection(("127.0.0.1", port), timeout=10)
    with half_sent, silent:
        half_sent.sendall(b"POST /workflows HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        # The server hangs up instead of holding a thread (a stalled body is told why); without
        # a read timeout these reads time out after 10 s instead.
        assert silent.recv(1024) == b""
        reply = b""
        while chunk := half_sent.recv(65536):  # the reply may come in pieces; then EOF
            reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 408")
        assert_error_shape(json.loads(body), "RequestRejected")
    status, _, _ = request(port, "GET", "/definitions")
    assert status == 200


# ------------------------------------------------------------------------ sandbox processes


def load_probe(target: str) -> apigw.Handler:
    """What a sandbox loads in these tests (by name, in a new process)."""
    return probe


def probe(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Sleeps, dies, or waits (bounded) until `want` invocations run at once, as asked."""
    ask = json.loads(event.get("body") or "{}")
    time.sleep(ask.get("sleep", 0))
    if ask.get("die"):
        os._exit(3)
    met = 0
    if "meet" in ask:
        room = Path(ask["meet"])
        (room / f"{os.getpid()}-{uuid.uuid4()}").touch()
        deadline = time.monotonic() + 10
        while (met := len(list(room.iterdir()))) < ask["want"] and time.monotonic() < deadline:
            time.sleep(0.02)
    return {"statusCode": 200, "body": json.dumps({"pid": os.getpid(), "met": met})}


@pytest.fixture
def sandboxed(serve: Any) -> Iterator[Any]:
    functions: list[Sandboxes] = []

    def start(timeout_s: float = 29, concurrency: int = 4) -> int:
        sandboxes = Sandboxes("api", load_probe, concurrency=concurrency, warm=0)
        functions.append(sandboxes)
        gateway = apigw.Gateway(
            {},
            lambda t: None,
            invoke=lambda target, event, timeout: sandboxes.invoke(event, timeout),
            timeout_s=timeout_s,
        )
        return int(serve(None, gateway=gateway))

    yield start
    for sandboxes in functions:
        sandboxes.close()


def test_requests_are_served_at_once_by_sandboxes(sandboxed: Any, tmp_path: Path) -> None:
    port = sandboxed(concurrency=4)
    ask = json.dumps({"meet": str(tmp_path), "want": 4}).encode()
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda _: request(port, "POST", "/workflows", ask), range(4)))
    assert [status for status, _, _ in replies] == [200] * 4
    assert all(body["met"] == 4 for _, _, body in replies)  # all four ran at the same time
    assert len({body["pid"] for _, _, body in replies}) == 4  # each in its own sandbox


def test_a_handler_that_overruns_the_timeout_is_a_504_and_the_next_one_is_served(
    sandboxed: Any,
) -> None:
    # 3 s: the timeout also runs while a fresh sandbox starts (a Python process: well under a
    # second idle, more on a loaded machine), and the second request needs a fresh one.
    port = sandboxed(timeout_s=3.0, concurrency=1)
    status, _, body = request(port, "POST", "/workflows", json.dumps({"sleep": 10}).encode())
    assert status == 504
    assert_error_shape(body, "IntegrationTimeout")
    status, _, _ = request(port, "POST", "/workflows", b"{}")
    assert status == 200  # the overrunning sandbox was ended and its slot freed


def test_a_sandbox_that_dies_is_a_502_and_replaced(sandboxed: Any) -> None:
    port = sandboxed(concurrency=1)
    status, _, body = request(port, "POST", "/workflows", json.dumps({"die": True}).encode())
    assert status == 502
    assert_error_shape(body, "IntegrationFailure")
    status, _, _ = request(port, "POST", "/workflows", b"{}")
    assert status == 200
