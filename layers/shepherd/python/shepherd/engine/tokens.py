"""Task tokens of callback steps: unguessable, and tied to one attempt of one step.

A token names its attempt and carries a random nonce; the step item stores only the nonce's
hash, so reading the table never yields a usable token.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
from dataclasses import dataclass

from shepherd.keys import Kind

PREFIX = "st1."


@dataclass(frozen=True)
class TaskToken:
    workflow_id: str
    kind: Kind
    step: str
    attempt: int
    nonce: str

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.nonce.encode()).hexdigest()

    def encode(self) -> str:
        body = {
            "w": self.workflow_id,
            "k": self.kind[0],
            "s": self.step,
            "a": self.attempt,
            "n": self.nonce,
        }
        raw = json.dumps(body, separators=(",", ":")).encode()
        return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def new(cls, workflow_id: str, kind: Kind, step: str, attempt: int) -> TaskToken:
        return cls(workflow_id, kind, step, attempt, secrets.token_urlsafe(24))

    @classmethod
    def decode(cls, token: str) -> TaskToken:
        """Raises ValueError for anything that is not a well-formed token."""
        if not token.startswith(PREFIX) or len(token) > 1024:
            raise ValueError("not a task token")
        payload = token[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            body = json.loads(raw)
            kind: Kind = "compensation" if body["k"] == "c" else "step"
            decoded = cls(str(body["w"]), kind, str(body["s"]), int(body["a"]), str(body["n"]))
        except (binascii.Error, ValueError, KeyError, TypeError) as exc:
            raise ValueError("not a task token") from exc
        if decoded.attempt < 1 or len(decoded.nonce) < 16 or decoded.encode() != token:
            # One spelling per token: base64's spare bits and JSON's spacing would otherwise
            # let many texts name the same attempt (and slip past anything keyed on the text).
            raise ValueError("not a task token")
        return decoded


def matches(expected_hash: str | None, token: TaskToken) -> bool:
    return expected_hash is not None and secrets.compare_digest(expected_hash, token.hash)
