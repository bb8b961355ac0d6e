"""The local stack's HTTP front (control.ApiServer + apigw.Gateway) behaves like API Gateway
in front of Lambda: bursts are accepted, a raising handler is a 5xx in the error shape (never
a dropped connection), unknown routes and methods get the gateway response, bodies over
10 MiB are 413, path parameters arrive percent-decoded, non-UTF-8 bodies arrive base64."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from shepherd.limits import MAX_REQUEST_BYTES
from shepherd_cli import apigw, control

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

    def start(handler: Recorder) -> int:
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
    status, _, body = request(port, "POST", "/tasks/st1.a%2Fb%20c/heartbeat")
    assert status == 200 and body["params"] == {"token": "st1.a/b c"}
    assert handler.events[-1]["resource"] == "/tasks/{token}/heartbeat"


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
