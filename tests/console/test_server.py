"""The console's server without a browser: the proxy passes the API's replies through unchanged,
signs for a deployed API (checked against botocore's own signature of what arrived), never lets
AWS credentials reach the browser, answers an unreachable API in the error shape, and refuses
cross-site writes (no token, a foreign Origin) and foreign Host headers (DNS rebinding)."""

from __future__ import annotations

import http.client
import json
import re
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from shepherd_cli.client import region_of
from shepherd_cli.console import TOKEN_HEADER, Console
from shepherd_cli.local import free_port
from support import ROOT

STATIC = ROOT / "tools" / "shepherd_cli" / "console" / "static"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeApi:
    """An HTTP server standing in for the Shepherd API: records requests, answers as told."""

    status: int = 200
    body: bytes = b'{"items": [], "next_token": null}'
    content_type: str = "application/json"
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fake.seen.append(
                    Seen(
                        self.command, self.path, dict(self.headers.items()), self.rfile.read(length)
                    )
                )
                self.send_response(fake.status)
                self.send_header("Content-Type", fake.content_type)
                self.send_header("Content-Length", str(len(fake.body)))
                self.send_header("X-Amzn-RequestId", "r-1")
                self.end_headers()
                self.wfile.write(fake.body)

            do_GET = do_POST = _answer  # noqa: N815 - http.server's names

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.1,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    api = FakeApi()
    yield api
    api.close()


@pytest.fixture
def console(fake_api: FakeApi) -> Iterator[Console]:
    with Console(fake_api.url, caller="carol") as running:
        yield running


def request(
    console: Console,
    method: str,
    path: str,
    body: bytes | None = None,
    *,
    host: str | None = None,
    origin: str | bool | None = True,
    token: str | bool | None = True,
    **headers: str,
) -> tuple[int, dict[str, str], bytes]:
    """One request to the console, as its own page would send it unless told otherwise."""
    sent = dict(headers)
    sent["Host"] = host or console.authority
    if origin is True:
        sent["Origin"] = f"http://{console.authority}"
    elif isinstance(origin, str):
        sent["Origin"] = origin
    if token is True:
        sent[TOKEN_HEADER] = console.token
    elif isinstance(token, str):
        sent[TOKEN_HEADER] = token
    if body is not None:
        sent.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPConnection("127.0.0.1", console.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def error_of(body: bytes) -> dict[str, Any]:
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "field", "request_id"}
    return dict(error)


# ----------------------------------------------------------------------------- the proxy


def test_reads_and_writes_reach_the_api_with_status_and_body_unchanged(
    console: Console, fake_api: FakeApi
) -> None:
    status, headers, body = request(console, "GET", "/api/workflows?status=RUNNING&limit=5")
    assert (status, body) == (200, fake_api.body)
    assert headers["Content-Type"] == "application/json"
    seen = fake_api.seen[-1]
    assert (seen.method, seen.path) == ("GET", "/v1/workflows?status=RUNNING&limit=5")
    assert seen.headers["X-Shepherd-Caller"] == "carol"  # the local stack: caller by header

    fake_api.status = 409
    fake_api.body = b'{"error": {"code": "InvalidTransition", "message": "no", "field": null, "request_id": "r-1"}}'
    payload = b'{"step": "ship_order", "input": {"a": 1}}'
    status, _, body = request(
        console, "POST", "/api/workflows/abc/resume", payload, **{"Idempotency-Key": "k-1"}
    )
    assert (status, body) == (409, fake_api.body)
    seen = fake_api.seen[-1]
    assert (seen.method, seen.path, seen.body) == ("POST", "/v1/workflows/abc/resume", payload)
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["Idempotency-Key"] == "k-1"
    # Nothing of the browser's own reaches the API: no console token, no Origin, no cookie.
    assert TOKEN_HEADER not in seen.headers and "Origin" not in seen.headers


def test_an_api_reply_that_is_not_json_is_served_as_inert_text(
    console: Console, fake_api: FakeApi
) -> None:
    fake_api.content_type = "text/html"
    fake_api.body = b"<script>alert(1)</script>"
    status, headers, body = request(console, "GET", "/api/workflows")
    assert status == 200 and body == fake_api.body
    assert headers["Content-Type"].startswith("text/plain")
    assert "sandbox" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_an_unreachable_api_is_a_502_in_the_error_shape() -> None:
    port = free_port()  # nothing listens there
    with Console(f"http://127.0.0.1:{port}", timeout=3) as console:
        status, headers, body = request(console, "GET", "/api/workflows")
        assert status == 502 and headers["Content-Type"] == "application/json"
        error = error_of(body)
        assert error["code"] == "ApiUnreachable" and f"127.0.0.1:{port}" in error["message"]


def test_a_deployed_api_gets_sigv4_requests_and_the_browser_never_sees_a_credential(
    fake_api: FakeApi,
) -> None:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    with Console(fake_api.url, sign=True, caller="ignored-when-signing") as console:
        payload = b'{"type": "order_fulfilment", "input": {}}'
        status, headers, body = request(console, "POST", "/api/workflows?x=1", payload)
        index = request(console, "GET", "/")
    assert status == 200 and body == fake_api.body
    seen = fake_api.seen[-1]
    authorization = seen.headers["Authorization"]
    shape = re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=testing/(\d{8})/us-east-1/execute-api/aws4_request, "
        r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})",
        authorization,
    )
    assert shape, authorization
    signed_headers = shape.group(2).split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(signed_headers)
    assert seen.headers["X-Amz-Security-Token"] == "testing"
    assert "X-Shepherd-Caller" not in seen.headers

    # The signature is botocore's own for exactly what arrived (method, path, query, the
    # signed headers and the body): the proxy altered nothing after signing.
    received = {k: v for k, v in seen.headers.items() if k.lower() in signed_headers}
    replay = AWSRequest(
        method=seen.method,
        url=f"http://{seen.headers['Host']}{seen.path}",
        data=seen.body,
        headers=received,
    )
    replay.context["timestamp"] = seen.headers["X-Amz-Date"]
    auth = SigV4Auth(Credentials("testing", "testing", "testing"), "execute-api", "us-east-1")
    expected = auth.signature(auth.string_to_sign(replay, auth.canonical_request(replay)), replay)
    assert shape.group(3) == expected

    # Neither the reply nor the page carries anything of the credentials.
    for reply_headers, reply_body in ((headers, body), (index[1], index[2])):
        text = json.dumps(reply_headers) + reply_body.decode()
        assert "AWS4-HMAC-SHA256" not in text and "X-Amz" not in text
        assert "Authorization" not in reply_headers


def test_the_region_comes_from_an_execute_api_host_name() -> None:
    assert region_of("https://abc123.execute-api.eu-west-3.amazonaws.com/v1") == "eu-west-3"
    assert region_of("https://api.example.com/prod") == "us-east-1"


def test_paths_that_leave_the_api_and_methods_it_does_not_take_are_refused(
    console: Console, fake_api: FakeApi
) -> None:
    for path in ("/api/workflows/../pools", "/api/workflows/%2e%2e/x", "/api//workflows"):
        status, _, body = request(console, "GET", path)
        assert status == 400 and error_of(body)["code"] == "ValidationError", path
    status, headers, body = request(console, "DELETE", "/api/workflows/abc")
    assert status == 405 and headers["Allow"] == "GET, POST"
    assert fake_api.seen == []


# ----------------------------------------------------------------------------- the guards


def test_a_write_without_the_token_or_with_a_wrong_one_is_refused(
    console: Console, fake_api: FakeApi
) -> None:
    for token in (None, "", "not-the-token", console.token[:-1]):
        status, _, body = request(console, "POST", "/api/workflows/abc/cancel", token=token)
        assert status == 403, token
        assert error_of(body)["code"] == "ConsoleTokenInvalid"
    assert fake_api.seen == []


def test_a_write_from_another_origin_is_refused_even_with_the_token(
    console: Console, fake_api: FakeApi
) -> None:
    for origin in (
        "http://evil.example",
        "null",
        f"https://{console.authority}",
        f"http://127.0.0.1:{console.port + 1}",
        None,  # neither Origin nor Referer
    ):
        status, _, body = request(console, "POST", "/api/workflows/abc/cancel", origin=origin)
        assert status == 403, origin
        assert error_of(body)["code"] == "OriginNotAllowed"
    status, _, _ = request(
        console, "POST", "/api/pools/x/pause", origin=None, Referer="http://evil.example/page"
    )
    assert status == 403
    assert fake_api.seen == []
    # Without an Origin, the console's own Referer will do (older browsers).
    status, _, _ = request(
        console, "POST", "/api/pools/x/pause", origin=None, Referer=f"{console.url}#/pools"
    )
    assert status == 200 and len(fake_api.seen) == 1


def test_a_foreign_host_header_is_refused_for_pages_reads_and_writes(
    console: Console, fake_api: FakeApi
) -> None:
    for host in ("evil.example", f"evil.example:{console.port}", "127.0.0.1", ""):
        for method, path in (
            ("GET", "/"),
            ("GET", "/api/workflows"),
            ("POST", "/api/pools/x/pause"),
        ):
            status, _, body = request(
                console, method, path, host=host or " ", origin=f"http://{host}"
            )
            assert status == 403, (host, method, path)
            assert error_of(body)["code"] == "HostNotAllowed"
    assert fake_api.seen == []
    status, _, _ = request(console, "GET", "/", host=f"localhost:{console.port}", origin=None)
    assert status == 200  # localhost never resolves through DNS: no rebinding there


def test_reads_need_no_token(console: Console, fake_api: FakeApi) -> None:
    status, _, _ = request(console, "GET", "/api/pools", origin=None, token=None)
    assert status == 200 and fake_api.seen[-1].path == "/v1/pools"


# ----------------------------------------------------------------------------- the page


def test_the_page_embeds_a_fresh_token_and_sends_strict_security_headers(
    fake_api: FakeApi,
) -> None:
    tokens = []
    for _ in range(2):
        with Console(fake_api.url) as console:
            status, headers, body = request(console, "GET", "/", origin=None)
            assert status == 200 and headers["Content-Type"].startswith("text/html")
            page = body.decode()
            assert f'content="{console.token}"' in page and "{{" not in page
            tokens.append(console.token)
            csp = headers["Content-Security-Policy"]
            assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Referrer-Policy"] == "no-referrer"
            assert "<script>" not in page  # module scripts by URL only: CSP allows no inline
            status, headers, _ = request(console, "GET", "/static/js/app.js", origin=None)
            assert status == 200 and headers["Content-Type"].startswith("text/javascript")
            for missing in ("/static/nope.js", "/etc/passwd", "/static/../server.py"):
                assert request(console, "GET", missing, origin=None)[0] == 404
    assert tokens[0] != tokens[1]


def test_the_console_refuses_a_wildcard_address(fake_api: FakeApi) -> None:
    for host in ("0.0.0.0", "::", ""):  # noqa: S104 - what it must refuse
        with pytest.raises(ValueError, match="wildcard"):
            Console(fake_api.url, host=host)


def test_no_script_ever_parses_html_from_a_string() -> None:
    """The XSS rule as a guard: DOM built with createElement/textContent only."""
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"DOMParser|createContextualFragment|setHTMLUnsafe"
    )
    scripts = sorted(STATIC.rglob("*.js"))
    assert scripts
    for script in scripts:
        for number, line in enumerate(script.read_text().splitlines(), 1):
            assert not sinks.search(line), f"{script.name}:{number}: {line.strip()}"


def test_every_static_file_ships_with_the_package() -> None:
    """pyproject's package-data globs cover every file of the console (an installed wheel
    carries what the editable install serves)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["shepherd_cli.console"]
    files = [p.relative_to(STATIC.parent).as_posix() for p in STATIC.rglob("*") if p.is_file()]
    assert files
    for name in files:
        assert any(fnmatch(name, g) and name.count("/") == g.count("/") for g in globs), name
    assert {Path(p).suffix for p in files} <= {".html", ".css", ".svg", ".js"}
