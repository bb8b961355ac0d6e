"""Workflow ids for production: random, unguessable (128 bits).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import hashlib
import uuid


class RandomIds:
    """The production id source (`shepherd.ports.IdSource`): a random UUID as 32 hex digits."""

    def new_id(self) -> str:
        return uuid.uuid4().hex


def derived_id(owner: str, idempotency_key: str) -> str:
    """Same owner and key, same workflow id: the start's conditional put is the dedup. (Here,
    not in the scheduler: reading a workflow by its key, as the API does, needs no engine.)"""
    return hashlib.sha256(f"{owner}\0{idempotency_key}".encode()).hexdigest()[:32]
