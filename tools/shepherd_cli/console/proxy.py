"""The console's way to the Shepherd API: `/api/<route>` goes to `<api base URL>/<route>`.

The local stack's API is called unsigned (its caller named by a header, as the CLI does); a
deployed one is signed with SigV4 from the operator's standard AWS credentials, here in the
console's process, so the browser never holds a credential and the API needs nothing new.
The API's status and body come back unchanged; only a failure to reach it at all is the
console's own reply (502, or 504 for a timeout), in the API's error shape.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from shepherd_cli.apigw import CALLER_HEADER
from shepherd_cli.client import CliError, is_local, signed

# Request headers the browser may pass on to the API; everything else (cookies, the console
# token, the browser's Origin and Host) stays at the console.
FORWARDED = ("Content-Type", "Idempotency-Key")


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def error_reply(status: int, code: str, message: str, field: str | None = None) -> Reply:
    """A reply in the API's one error shape (docs/api.md, Errors)."""
    error = {"code": code, "message": message, "field": field, "request_id": None}
    body = json.dumps({"error": error}, separators=(",", ":")).encode()
    return Reply(status, {"Content-Type": "application/json"}, body)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is the API's answer to pass on, never something to follow with a signature."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class Upstream:
    """One Shepherd API and how to authenticate to it."""

    base_url: str
    caller: str | None = None  # the local stack only: act as this caller
    timeout: float = 30
    # Sign with SigV4? By default, whenever the API is not the local stack (127.0.0.1).
    sign: bool | None = None
    _session: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CliError(f"--api must be an http(s) URL, not '{self.base_url}'")
        if self.sign is None:
            self.sign = not is_local(self.base_url)
        self._opener = urllib.request.build_opener(_NoRedirects)

    @property
    def signing(self) -> bool:
        return bool(self.sign)

    def session(self) -> Any:
        """One boto3 session for the console's life: its credential provider refreshes
        expiring credentials (SSO, assumed roles) by itself."""
        if self._session is None:
            import boto3

            self._session = boto3.session.Session()
        return self._session

    def check_credentials(self) -> None:
        """Fail at start, not at the first click, when a deployed API cannot be signed for."""
        if self.signing and self.session().get_credentials() is None:
            raise CliError(
                "no AWS credentials found to sign requests to "
                f"{self.base_url} (set AWS_PROFILE or run `aws sso login`)"
            )

    def forward(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> Reply:
        """Send `method target` (a path with its query, as the API's routes see it)."""
        url = self.base_url + target
        sent = {"Accept": "application/json"}
        sent.update({k: v for k, v in headers.items() if k in FORWARDED})
        if not self.signing:
            if self.caller:
                sent[CALLER_HEADER] = self.caller
        else:
            try:
                sent = signed(method, url, body, sent, self.session())
            except CliError as exc:
                return error_reply(502, "NoCredentials", str(exc))
        request = urllib.request.Request(url, data=body, method=method, headers=sent)  # noqa: S310 - the operator's API URL, checked http(s)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return Reply(response.status, _kept(response.headers), response.read())
        except urllib.error.HTTPError as err:  # a 4xx or 5xx is the API's answer: pass it on
            with err:
                return Reply(err.code, _kept(err.headers), err.read())
        except TimeoutError:
            return error_reply(
                504, "ApiTimeout", f"{self.base_url} did not answer within {self.timeout:.0f}s"
            )
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            if isinstance(reason, TimeoutError):
                return error_reply(
                    504, "ApiTimeout", f"{self.base_url} did not answer within {self.timeout:.0f}s"
                )
            return error_reply(502, "ApiUnreachable", f"cannot reach {self.base_url}: {reason}")


def _kept(headers: Any) -> dict[str, str]:
    """The response headers the browser needs: the body's type (JSON, or else plain text: the
    console's origin never serves the API's bytes as anything a browser would run), and the
    methods a refusal allows."""
    content_type = headers.get("Content-Type") or ""
    json_body = content_type.split(";")[0].strip().lower() == "application/json"
    kept = {"Content-Type": content_type if json_body else "text/plain; charset=utf-8"}
    if headers.get("Allow"):
        kept["Allow"] = headers["Allow"]
    return kept
