"""The console's own small HTTP server: static files, and `/api/...` proxied to the Shepherd API.

Why it is safe to leave running on a laptop (docs/architecture.md, Console):
* it binds 127.0.0.1 unless told otherwise, and answers only requests whose `Host` is the
  address it serves (a DNS-rebinding page names its own host, and is refused);
* every request that can change something (not GET or HEAD) needs an `Origin` (or, failing
  that, a `Referer`) of the console's own origin and a token drawn at each start, which only
  the console's own page can read (it is embedded in that page); a cross-site form or fetch
  has neither;
* every response forbids inline script, framing and MIME sniffing, and sends no referrer.
The AWS credentials stay in this process (`proxy.Upstream`), never in the browser.
"""

from __future__ import annotations

import html
import ipaddress
import logging
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

from shepherd.limits import MAX_REQUEST_BYTES

from shepherd_cli.console.proxy import FORWARDED, Reply, Upstream, error_reply

TOKEN_HEADER = "X-Shepherd-Console-Token"  # noqa: S105 - a header name
TOKEN_PLACEHOLDER = "{{console_token}}"  # noqa: S105 - replaced per page
API_PLACEHOLDER = "{{api_url}}"
MODE_PLACEHOLDER = "{{api_mode}}"
SAFE_METHODS = ("GET", "HEAD")
API_METHODS = ("GET", "POST")  # every route of the API is one or the other
API_PREFIX = "/api/"
STATIC_PREFIX = "/static/"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The page's own scripts and styles only: no inline script or style, nothing from elsewhere.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
# The API's bytes are data: even opened directly they run nothing.
DATA_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox"
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}

log = logging.getLogger("shepherd.console")


def _static_files() -> dict[str, tuple[bytes, str]]:
    """Every shipped asset by its URL path: the only files ever served (no path from a
    request ever reaches the file system)."""
    root = resources.files("shepherd_cli.console") / "static"
    files: dict[str, tuple[bytes, str]] = {}

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
                continue
            suffix = "." + child.name.rsplit(".", 1)[-1]
            if suffix in CONTENT_TYPES:
                files[prefix + child.name] = (child.read_bytes(), CONTENT_TYPES[suffix])

    walk(root, STATIC_PREFIX)
    return files


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    console: Console


class _Server6(_Server):
    address_family = socket.AF_INET6


class Console:
    """The console for one API. `with Console(api_url) as console: print(console.url)`.

    Serves from its own thread until `stop()`; each start draws a new token.
    """

    def __init__(
        self,
        api_url: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        caller: str | None = None,
        timeout: float = 30,
        sign: bool | None = None,
    ) -> None:
        if host in ("", "0.0.0.0", "::"):
            raise ValueError(
                "the console serves one address (a Host check guards it): give it, not a wildcard"
            )
        self.upstream = Upstream(api_url, caller=caller, timeout=timeout, sign=sign)
        self.host = host
        self.port = port
        self.token = secrets.token_urlsafe(32)
        self.files = _static_files()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------- lifecycle

    def start(self) -> Console:
        server_class = _Server6 if ":" in self.host else _Server
        server = server_class((self.host, self.port), _Handler)
        server.console = self
        self.port = int(server.server_address[1])
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.1,), name="shepherd-console", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Console:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------------- identity

    @property
    def authority(self) -> str:
        """host:port as a browser writes it in `Host` (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.authority}/"

    def allowed_hosts(self) -> set[str]:
        """The bound address; and `localhost` for a loopback one, which no other site can
        make a browser send (it never resolves through DNS)."""
        allowed = {self.authority.lower()}
        if is_loopback(self.host):
            allowed.add(f"localhost:{self.port}")
        return allowed

    def index(self) -> bytes:
        page, _ = self.files[STATIC_PREFIX + "index.html"]
        text = page.decode()
        text = text.replace(TOKEN_PLACEHOLDER, self.token)
        text = text.replace(API_PLACEHOLDER, html.escape(self.upstream.base_url, quote=True))
        mode = "deployed, SigV4-signed" if self.upstream.signing else "local stack"
        return text.replace(MODE_PLACEHOLDER, mode).encode()

    # ------------------------------------------------------------------------- checks

    def refusal(self, method: str, headers: Any) -> Reply | None:
        """Why this request may not go on, or None (DNS rebinding, then cross-site writes)."""
        host = (headers.get("Host") or "").strip().lower()
        if host not in self.allowed_hosts():
            return error_reply(
                403, "HostNotAllowed", f"the console answers only for {self.authority}", "Host"
            )
        if method in SAFE_METHODS:
            return None
        origin = headers.get("Origin")
        if origin is None and headers.get("Referer"):
            parts = urlsplit(headers["Referer"])
            origin = f"{parts.scheme}://{parts.netloc}"
        if (origin or "").lower() != f"http://{host}":
            return error_reply(
                403,
                "OriginNotAllowed",
                "a change must come from the console's own page (Origin or Referer)",
                "Origin",
            )
        sent = headers.get(TOKEN_HEADER) or ""
        if not secrets.compare_digest(sent.encode(), self.token.encode()):
            return error_reply(
                403,
                "ConsoleTokenInvalid",
                "the console token is missing or stale: reload the page",
                TOKEN_HEADER,
            )
        return None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "shepherd-console"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_OPTIONS(self) -> None:
        self._handle()

    def _handle(self) -> None:
        console = self.server.console
        refused = console.refusal(self.command, self.headers)
        if refused is not None:
            self._drain()
            self._send(refused, PAGE_CSP)
            return
        path = self.path.split("?", 1)[0]
        if path.startswith(API_PREFIX):
            self._send(self._proxy(console), DATA_CSP)
            return
        self._drain()
        if self.command not in SAFE_METHODS:
            self._send(error_reply(405, "MethodNotAllowed", "the console's pages are read-only"))
            return
        if path in ("/", "/index.html"):
            self._send(Reply(200, {"Content-Type": CONTENT_TYPES[".html"]}, console.index()))
            return
        found = console.files.get(path)
        if found is None or path.endswith("index.html"):
            self._send(error_reply(404, "NotFound", "no such page or file"))
            return
        body, content_type = found
        self._send(Reply(200, {"Content-Type": content_type}, body))

    def _proxy(self, console: Console) -> Reply:
        if self.command not in API_METHODS:
            self._drain()
            reply = error_reply(405, "MethodNotAllowed", "the API takes GET and POST")
            return Reply(
                reply.status, {**reply.headers, "Allow": ", ".join(API_METHODS)}, reply.body
            )
        target = self.path[len(API_PREFIX) - 1 :]
        route = unquote(target.split("?", 1)[0])
        if any(part in (".", "..") for part in route.split("/")) or "//" in route:
            self._drain()
            return error_reply(400, "ValidationError", "not a route of the API", "path")
        body, problem = self._body()
        if problem is not None:
            return problem
        headers = {name: value for name in FORWARDED if (value := self.headers.get(name))}
        return console.upstream.forward(self.command, target, body, headers)

    def _body(self) -> tuple[bytes | None, Reply | None]:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            return None, error_reply(411, "LengthRequired", "send the body with a Content-Length")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            return None, error_reply(400, "ValidationError", "bad Content-Length", "Content-Length")
        if length > MAX_REQUEST_BYTES or length < 0:
            self.close_connection = True  # the body is not read: the connection cannot go on
            return None, error_reply(
                413, "BodyTooLarge", f"the request is larger than {MAX_REQUEST_BYTES} bytes"
            )
        if self.command in SAFE_METHODS:
            self.rfile.read(length)
            return None, None
        return self.rfile.read(length), None

    def _drain(self) -> None:
        """Read (and drop) a small body so the connection can serve the next request."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= 64 * 1024 and not self.headers.get("Transfer-Encoding"):
            self.rfile.read(length)
        else:
            self.close_connection = True

    def _send(self, reply: Reply, csp: str = PAGE_CSP) -> None:
        self.send_response(reply.status)
        for name, value in {
            **reply.headers,
            **SECURITY_HEADERS,
            "Content-Security-Policy": csp,
        }.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        try:
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            # The page stopped waiting (a read it gave up on after READ_TIMEOUT_MS): nobody
            # is left to answer.
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)
