"""Pagination tokens of `GET /workflows` (and of the other lists: a workflow's events,
`GET /approvals`): opaque to callers, tamper-evident, owner-bound.

A token carries only what the last listed item already shows (its created time and workflow
id) and an HMAC-SHA256 over the owner, those two and the filters (status, type, time range,
sort), keyed by a per-deployment secret. That position is every list shard's position (the
merge orders every shard by the same key, shepherd.engine.listing), so the server resumes
each of the caller's shards from it: a token reveals no table key and no owner ARN, and a
forged, truncated or edited token, another caller's, or one used with other filters is
refused (400).

The secret is 32 random bytes stored once in the table (item `CONFIG#pagination`) by a
conditional put: the first sandbox to need it creates it, any racing one reads the winner's.
Each sandbox caches it. No new infrastructure, and stdlib crypto only (the Lambda layers
carry no crypto library).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets

from shepherd.engine.listing import Position
from shepherd.errors import ConditionFailed
from shepherd.keys import CONFIG_PREFIX
from shepherd.ports import Store

SECRET_KEY = (CONFIG_PREFIX + "pagination", CONFIG_PREFIX + "pagination")
VERSION = "p2"  # p2: sharded list indexes, every filter (time range, sort) signed
_WORKFLOW_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAC_BYTES = 32


class TokenRejected(ValueError):
    """The token is not one this deployment issued for this caller and these filters."""

    def __init__(self) -> None:
        super().__init__("next_token is not valid for this caller and these filters")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    """Decode, accepting only the canonical text: base64's last character carries unused
    bits, so two texts can decode to the same bytes; a token has exactly one spelling."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical encoding")
    return data


class Paginator:
    """Signs and checks tokens with the deployment's secret (loaded once, on first use)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._secret: bytes | None = None

    def _key(self) -> bytes:
        if self._secret is None:
            pk, sk = SECRET_KEY
            item = self._store.get(pk, sk)
            if item is None:
                try:
                    self._store.put_new({"pk": pk, "sk": sk, "secret": secrets.token_hex(32)})
                    item = self._store.get(pk, sk)
                except ConditionFailed as lost:  # another sandbox created it first
                    item = lost.current
            if item is None or not isinstance(item.get("secret"), str):
                raise RuntimeError("the pagination secret item is missing or malformed")
            self._secret = bytes.fromhex(item["secret"])
        return self._secret

    def _mac(self, owner: str, position: Position, filters: tuple[str | None, ...]) -> bytes:
        message = json.dumps([VERSION, owner, position.created_at, position.workflow_id, *filters])
        return hmac.new(self._key(), message.encode(), hashlib.sha256).digest()

    def sign(self, owner: str, position: Position, filters: tuple[str | None, ...]) -> str:
        payload = f"{position.created_at}.{position.workflow_id}".encode()
        return f"{_b64(payload)}.{_b64(self._mac(owner, position, filters))}"

    def verify(self, token: str, owner: str, filters: tuple[str | None, ...]) -> Position:
        """The position a genuine token names; TokenRejected for anything else."""
        try:
            payload_text, mac_text = token.split(".")
            created, workflow_id = _unb64(payload_text).decode().split(".")
            mac = _unb64(mac_text)
            position = Position(int(created), workflow_id)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise TokenRejected() from None
        if (
            len(mac) != _MAC_BYTES
            or not created.isdigit()
            or len(created) > 15
            or not _WORKFLOW_ID.match(workflow_id)
        ):
            raise TokenRejected()
        if not hmac.compare_digest(mac, self._mac(owner, position, filters)):
            raise TokenRejected()
        return position

    # A position that is a sort key (GET /approvals: the last row's inbox sort key), signed the
    # same way; `shape` is the only form a genuine one can take, checked after the MAC.

    def _key_mac(self, owner: str, key: str, filters: tuple[str | None, ...]) -> bytes:
        message = json.dumps([VERSION, "key", owner, key, *filters])
        return hmac.new(self._key(), message.encode(), hashlib.sha256).digest()

    def sign_key(self, owner: str, key: str, filters: tuple[str | None, ...]) -> str:
        return f"{_b64(key.encode())}.{_b64(self._key_mac(owner, key, filters))}"

    def verify_key(
        self, token: str, owner: str, filters: tuple[str | None, ...], shape: re.Pattern[str]
    ) -> str:
        """The sort key a genuine token names; TokenRejected for anything else."""
        try:
            payload_text, mac_text = token.split(".")
            key = _unb64(payload_text).decode()
            mac = _unb64(mac_text)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise TokenRejected() from None
        if len(mac) != _MAC_BYTES or not hmac.compare_digest(
            mac, self._key_mac(owner, key, filters)
        ):
            raise TokenRejected()
        if not shape.match(key):
            raise TokenRejected()
        return key


_paginators: dict[int, tuple[Store, Paginator]] = {}


def paginator(store: Store) -> Paginator:
    """One per store (so one per sandbox): the secret is read at most once."""
    held = _paginators.get(id(store))
    if held is None or held[0] is not store:
        held = (store, Paginator(store))
        _paginators[id(store)] = held
    return held[1]
