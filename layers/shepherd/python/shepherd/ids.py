"""Workflow ids for production: random, unguessable (128 bits).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import uuid


class RandomIds:
    """The production id source (`shepherd.ports.IdSource`): a random UUID as 32 hex digits."""

    def new_id(self) -> str:
        return uuid.uuid4().hex
