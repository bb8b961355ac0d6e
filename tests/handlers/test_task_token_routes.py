"""Task tokens travel in a header, never in a URL path (API Gateway's X-Ray traces and access
logs keep the path). The former `/tasks/{token}/...` routes are gone (issue 35.1): no route
takes a token in its path, and a request to one changes nothing."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aws_stack import LambdaContext, Stack, rest_event
from shepherd.routes import TASK_TOKEN_HEADER
from shepherd_cli.client import Api
from support import ORDER


def _waiting(stack: Stack, tokens: list[str]) -> tuple[str, str]:
    _, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    stack.run_agents()
    (token,) = tokens
    return str(accepted["workflow_id"]), token


def _ship(stack: Stack, workflow_id: str) -> dict[str, Any]:
    view = stack.api("GET", f"/workflows/{workflow_id}")[2]
    return dict(next(s for s in view["steps"] if s["name"] == "ship_order"))


def _in_path(token: str, action: str, body: Any) -> tuple[int, Any]:
    from shepherd_handlers import callbacks

    event = rest_event(
        "POST",
        f"/tasks/{token}/{action}",
        resource=f"/tasks/{{token}}/{action}",
        path_parameters={"token": token},
        body=body,
    )
    reply = callbacks.handler(event, LambdaContext())
    return int(reply["statusCode"]), json.loads(reply["body"])


def test_no_route_takes_a_token_in_its_path() -> None:
    from shepherd import routes

    assert [r for r in routes.ROUTES if "{token}" in r.resource] == []
    assert [r for r in routes.ROUTES if r.deprecated] == []
    for action in routes.TASK_ACTIONS:
        (route,) = [r for r in routes.ROUTES if r.resource == f"/tasks/{action}"]
        assert route.headers == (TASK_TOKEN_HEADER,)


@pytest.mark.parametrize(
    ("action", "body"),
    [("heartbeat", {"details": {"at": "depot"}}), ("success", {"output": {"t": 1}}),
     ("failure", {"error": "Lost"})],
)  # fmt: skip
def test_a_token_in_the_path_reaches_no_route_and_changes_nothing(
    stack: Stack, callback_ship: list[str], action: str, body: Any
) -> None:
    """API Gateway has no such resource any more; were a request to reach the function, its
    router knows no such route either."""
    workflow_id, token = _waiting(stack, callback_ship)
    status, reply = _in_path(token, action, body)
    assert status == 404, reply
    assert token not in json.dumps(reply)
    step = _ship(stack, workflow_id)
    assert step["status"] == "WAITING" and step["details"] is None  # nothing recorded
    # The same token works where it belongs.
    status, view = stack.callback(token, action, body)
    assert status == 200, view


def test_a_callback_without_the_token_header_is_refused_naming_it(
    stack: Stack, callback_ship: list[str]
) -> None:
    from shepherd_handlers import callbacks

    workflow_id, _ = _waiting(stack, callback_ship)
    event = rest_event("POST", "/tasks/success", resource="/tasks/success", body={"output": 1})
    reply = callbacks.handler(event, LambdaContext())
    assert reply["statusCode"] == 400
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "ValidationError"
    assert TASK_TOKEN_HEADER.lower() in error["field"].lower()
    assert _ship(stack, workflow_id)["status"] == "WAITING"
    status, _ = stack.callback("short", "success", {"output": 1})
    assert status == 400


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, dict[str, str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Recorder.seen.append((self.path, dict(self.headers)))
        reply = json.dumps(
            {"workflow_id": "w", "kind": "step", "step": "s", "attempt": 1, "status": "WAITING"}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_cli_never_puts_a_token_in_a_url(recorder: str) -> None:
    token = "st1.c2VjcmV0LXRva2Vu"
    api = Api(recorder)
    api.task(token, "heartbeat", {"details": {"x": 1}})
    api.succeed(token, {"tracking": "T-1"})
    api.task(token, "failure", {"error": "Lost"})
    paths = [path for path, _ in _Recorder.seen]
    assert paths == ["/tasks/heartbeat", "/tasks/success", "/tasks/failure"]
    for path, headers in _Recorder.seen:
        assert token not in path
        assert {k.lower(): v for k, v in headers.items()}[TASK_TOKEN_HEADER.lower()] == token
