"""A small HTTP client of the Shepherd API: unsigned for the local stack, SigV4 for AWS."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from shepherd.jsonsafe import canonical
from shepherd.limits import MAX_INPUT_BYTES
from shepherd.routes import TASK_TOKEN_HEADER

DEFAULT_API = "http://127.0.0.1:8080"


class CliError(Exception):
    """Shown to the user as one line, never as a traceback."""


@dataclass
class ApiError(CliError):
    status: int
    code: str
    message: str
    field: str | None = None
    # Every problem of a refused input (`error.problems`): one line each, its path first.
    problems: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        if len(self.problems) > 1:
            lines = [f"  {field}: {message}" for field, message in self.problems]
            head = f"{self.status} {self.code}: {len(self.problems)} problems"
            return "\n".join([head, *lines])
        return f"{self.status} {self.code}{where}: {self.message}"


def is_local(url: str) -> bool:
    """The local stack's API: unsigned, the caller named by a header."""
    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


class Api:
    def __init__(
        self, base_url: str | None = None, *, caller: str | None = None, timeout: float = 30
    ) -> None:
        self.base_url = (base_url or os.environ.get("SHEPHERD_API") or DEFAULT_API).rstrip("/")
        self.caller = caller
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        query = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.base_url + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        all_headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            **(headers or {}),
        }
        if is_local(url):
            if self.caller:
                all_headers["X-Shepherd-Caller"] = self.caller
        else:
            all_headers = signed(method, url, data, all_headers)
        request = urllib.request.Request(url, data=data, method=method, headers=all_headers)  # noqa: S310 - http(s) URL from the user
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                text = response.read().decode()
        except urllib.error.HTTPError as err:
            raise _api_error(err) from None
        except urllib.error.URLError as err:
            raise CliError(
                f"cannot reach {self.base_url}: {err.reason} (is `shepherd local` running?)"
            ) from None
        except TimeoutError:
            raise CliError(f"{self.base_url} did not answer within {self.timeout:.0f}s") from None
        return json.loads(text) if text else None

    def start(
        self,
        wf_type: str,
        payload: Any,
        idempotency_key: str | None = None,
        *,
        tags: dict[str, str] | None = None,
    ) -> Any:
        """POST /workflows (with its `tags`, if any); an input over a request's cap (5 MiB)
        is uploaded first."""
        data = canonical(payload).encode()
        body: dict[str, Any] = (
            {"type": wf_type, "input_upload": self.upload(data)}
            if len(data) > MAX_INPUT_BYTES
            else {"type": wf_type, "input": payload}
        )
        if idempotency_key:
            body["idempotency_key"] = idempotency_key
        if tags:
            body["tags"] = tags
        return self.call("POST", "/workflows", body)

    def task(self, token: str, action: str, body: Any) -> Any:
        """POST /tasks/<action> (heartbeat, success, failure): the token in its header, never
        in the URL, which API Gateway's traces and access logs keep."""
        return self.call("POST", f"/tasks/{action}", body, headers={TASK_TOKEN_HEADER: token})

    def succeed(self, token: str, output: Any) -> Any:
        """POST /tasks/success; an output over a request's cap (5 MiB) is uploaded first (up
        to 100 MiB)."""
        data = canonical(output).encode()
        body = (
            {"output_upload": self.upload(data)}
            if len(data) > MAX_INPUT_BYTES
            else {"output": output}
        )
        return self.task(token, "success", body)

    def upload(self, data: bytes) -> str:
        """A large payload through POST /payloads and its presigned POST; the upload id to
        name (`input_upload`, `output_upload`)."""
        upload = self.call(
            "POST", "/payloads", {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        )
        post_form(str(upload["url"]), dict(upload["fields"]), data, timeout=max(self.timeout, 300))
        return str(upload["upload_id"])


def post_form(url: str, fields: dict[str, str], data: bytes, *, timeout: float) -> None:
    """A presigned POST: a multipart form of `fields`, then the file (S3 wants it last)."""
    boundary = secrets.token_hex(16)
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="input.json"'
        "\r\nContent-Type: application/json\r\n\r\n"
    ).encode()
    body = b"".join([*parts, head, data, f"\r\n--{boundary}--\r\n".encode()])
    request = urllib.request.Request(  # noqa: S310 - the presigned URL the API returned
        url,
        data=body,
        method="POST",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            response.read()
    except urllib.error.HTTPError as err:
        raise CliError(f"the upload was refused: {err.code} {err.read()[:300]!r}") from None
    except urllib.error.URLError as err:
        raise CliError(f"cannot reach the upload URL: {err.reason}") from None


def _api_error(err: urllib.error.HTTPError) -> ApiError:
    try:
        detail = json.loads(err.read().decode())["error"]
        return ApiError(
            err.code,
            detail.get("code", "Error"),
            detail.get("message", ""),
            detail.get("field"),
            tuple((p["field"], p["message"]) for p in detail.get("problems") or ()),
        )
    except (ValueError, KeyError, TypeError):
        return ApiError(err.code, "HttpError", err.reason or "request failed")


def signed(
    method: str,
    url: str,
    data: bytes | None,
    headers: dict[str, str],
    session: Any = None,
) -> dict[str, str]:
    """SigV4 with the standard AWS credential chain (env, profile, SSO, instance role...).

    Pass a long-lived boto3 `session` to reuse its credential provider (refreshable
    credentials are refreshed by it, not looked up again per request)."""
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session = session or boto3.session.Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise CliError(
            "no AWS credentials found to sign the request (set AWS_PROFILE or run `aws sso login`)"
        )
    request = AWSRequest(method=method, url=url, data=data, headers=headers)
    SigV4Auth(credentials, "execute-api", region_of(url, session)).add_auth(request)
    return dict(request.headers.items())


def region_of(url: str, session: Any = None) -> str:
    """The region in an execute-api host name, else the standard chain's (else us-east-1)."""
    host = urlsplit(url).hostname or ""
    found = re.search(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com", host)
    if found:
        return found.group(1)
    return str(getattr(session, "region_name", None) or "us-east-1")
