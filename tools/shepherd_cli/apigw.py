"""A local API Gateway: HTTP requests -> REST proxy events for the real handlers, and API
Gateway's own replies (gateway responses) for what never reaches a handler.

Routes come from `shepherd.routes` (the CDK app declares the same list). As API Gateway does,
this answers an unknown route or method with the MISSING_AUTHENTICATION_TOKEN gateway response
(401), a request over 10 MiB with REQUEST_TOO_LARGE (413), a handler that raises with an
integration failure (502) and one that has not answered in 29 s with an integration timeout
(504), all in the error shape; path parameters reach the handler percent-decoded; a body that
is not UTF-8 text reaches it base64-encoded. `Gateway` is used by the control process's HTTP
server (handlers in sandbox processes: `shepherd_cli.sandboxes`) and, in-process, by the
contract tests (`wsgi`).
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from shepherd import routes
from shepherd.limits import MAX_REQUEST_BYTES

# The events and contexts come from the one kit (shepherd_cli.lambda_kit); these two names stay
# importable from here.
from shepherd_cli.lambda_kit import LOCAL_ACCOUNT as LOCAL_ACCOUNT  # noqa: PLC0414
from shepherd_cli.lambda_kit import local_context
from shepherd_cli.lambda_kit import rest_event as rest_event  # noqa: PLC0414
from shepherd_cli.sandboxes import InvocationTimeout

DEFAULT_CALLER = f"arn:aws:iam::{LOCAL_ACCOUNT}:user/local"
CALLER_HEADER = "X-Shepherd-Caller"
INTEGRATION_TIMEOUT_SECONDS = 29.0  # API Gateway's: the caller gets 504 when it passes

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# (target, event, timeout in seconds) -> the handler's reply; raises InvocationTimeout when
# the timeout passes first, anything else for an invocation error.
Invoke = Callable[[str, dict[str, Any], float], dict[str, Any]]


def caller_arn(header: str | None) -> str:
    """Local mode only: `X-Shepherd-Caller: alice` acts as IAM user alice."""
    if not header:
        return DEFAULT_CALLER
    if header.startswith("arn:"):
        return header
    return f"arn:aws:iam::{LOCAL_ACCOUNT}:user/{header}"


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def gateway_reply(
    response_type: str, request_id: str, message: str | None = None, status: int | None = None
) -> Reply:
    """What API Gateway answers with our gateway response of that type (see the CDK app).
    `message` and `status` stand in for API Gateway's own where the response keeps them."""
    spec = routes.gateway_error(response_type)
    error = {"code": spec.code, "message": spec.message or message or "", "request_id": request_id}
    body = json.dumps({"error": error}, separators=(",", ":")).encode()
    return Reply(spec.status or status or 500, {"Content-Type": routes.JSON}, body)


class Gateway:
    """Routes requests to the handlers like API Gateway's REST API with Lambda proxy.

    Identity: the local stack trusts `X-Shepherd-Caller` (no AWS credentials exist here). With
    `credentials` (Authorization header value -> caller ARN), the gateway instead stands in for
    IAM authorization as API Gateway enforces it: no Authorization header is 403
    MissingAuthenticationToken, an unknown one 403 InvalidSignature. It does not verify SigV4
    itself; the contract tests use it so that "every operation requires auth" is checked.
    """

    def __init__(
        self,
        targets: Mapping[str, Handler],
        context: Callable[[str], Any],
        credentials: Mapping[str, str] | None = None,
        *,
        invoke: Invoke | None = None,
        timeout_s: float = INTEGRATION_TIMEOUT_SECONDS,
    ) -> None:
        self.targets = dict(targets)
        self._context = context
        self._credentials = dict(credentials) if credentials is not None else None
        self.timeout_s = timeout_s
        # In process, the Powertools resolvers' per-request state allows one request at a time
        # (one Lambda sandbox); `invoke` (the local stack's sandboxes) serves them concurrently.
        self.lock = threading.Lock()
        self._invoke = invoke or self._in_process

    def _in_process(self, target: str, event: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self.lock:
            return self.targets[target](event, self._context(target))

    def handle(
        self,
        method: str,
        raw_path: str,
        query_string: str,
        headers: Iterable[tuple[str, str]],
        body: bytes,
    ) -> Reply:
        request_id = str(uuid.uuid4())
        if len(body) > MAX_REQUEST_BYTES:
            return gateway_reply("REQUEST_TOO_LARGE", request_id)
        found = routes.match(raw_path)
        route = routes.find(method, found[0]) if found else None
        if found is None or route is None:
            return gateway_reply("MISSING_AUTHENTICATION_TOKEN", request_id)
        single: dict[str, str] = {}
        multi: dict[str, list[str]] = {}
        for key, value in headers:
            single[key] = value
            multi.setdefault(key, []).append(value)
        if self._credentials is None:
            caller = caller_arn(_header(single, CALLER_HEADER))
        else:
            authorization = _header(single, "Authorization")
            if not authorization:
                return gateway_reply("MISSING_AUTHENTICATION_TOKEN", request_id)
            if authorization not in self._credentials:
                return gateway_reply("INVALID_SIGNATURE", request_id)
            caller = self._credentials[authorization]
        query: dict[str, str] = {}
        multi_query: dict[str, list[str]] = {}
        for key, value in parse_qsl(query_string, keep_blank_values=True):
            query[key] = value
            multi_query.setdefault(key, []).append(value)
        try:
            text: str | None = body.decode("utf-8") if body else None
            is_base64 = False
        except UnicodeDecodeError:  # as API Gateway passes binary: base64, flagged
            text, is_base64 = base64.b64encode(body).decode(), True
        event = rest_event(
            method,
            unquote(raw_path),
            resource=route.resource,
            path_parameters={k: unquote(v) for k, v in found[1].items()},
            query=query,
            multi_query=multi_query,
            headers=single,
            multi_headers=multi,
            body=text,
            is_base64=is_base64,
            caller_arn=caller,
            request_id=request_id,
        )
        try:
            reply = self._invoke(route.target, event, self.timeout_s)
        except InvocationTimeout:
            return gateway_reply("INTEGRATION_TIMEOUT", request_id)
        except Exception:  # an invocation error: API Gateway answers for the handler
            traceback.print_exc(file=sys.stderr)
            return gateway_reply("INTEGRATION_FAILURE", request_id)
        out = {k: str(v) for k, v in (reply.get("headers") or {}).items()}
        for key, values in (reply.get("multiValueHeaders") or {}).items():
            out[key] = str(values[-1])
        payload = reply.get("body") or ""
        data = base64.b64decode(payload) if reply.get("isBase64Encoded") else payload.encode()
        return Reply(int(reply["statusCode"]), out, data)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


def lambda_context(name: str, timeout_s: int = 29) -> Any:
    return local_context(name, timeout_s)


def handlers() -> dict[str, Handler]:
    from shepherd_handlers import api, callbacks

    return {"api": api.handler, "callbacks": callbacks.handler}


def load_handler(target: str) -> Handler:
    """A route target's handler (`api`, `callbacks`: its module), as a sandbox loads it."""
    import importlib

    handler: Handler = importlib.import_module(f"shepherd_handlers.{target}").handler
    return handler


def wsgi(gateway: Gateway) -> Callable[..., Iterable[bytes]]:
    """The gateway as a WSGI application (in-process clients: the contract tests)."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = [
            (key[5:].replace("_", "-").title(), str(value))
            for key, value in environ.items()
            if key.startswith("HTTP_")
        ]
        if environ.get("CONTENT_TYPE"):
            headers.append(("Content-Type", environ["CONTENT_TYPE"]))
        # The path as sent (still %-encoded), as API Gateway routes it; PATH_INFO is decoded.
        raw_path = environ.get("RAW_URI") or environ.get("REQUEST_URI")
        if raw_path:
            path = raw_path.split("?", 1)[0]
        else:  # PEP 3333: PATH_INFO is latin-1 text of the decoded bytes; encode it again
            decoded = environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "replace")
            path = quote(decoded, safe="/")
        reply = gateway.handle(
            environ["REQUEST_METHOD"], path, environ.get("QUERY_STRING", ""), headers, body
        )
        start_response(f"{reply.status} {_reason(reply.status)}", list(reply.headers.items()))
        return [reply.body]

    return app


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
