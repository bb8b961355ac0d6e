"""A fake external service with apply-once semantics per idempotency key, like a real
idempotent API. It records every call and every effect, so the checkers can prove that each
step's effect was applied at most once and that compensations undid exactly what was done.

It keeps the compensation contract (docs/architecture.md): an undo names the forward key it
undoes, and the service remembers it, so a late forward call with that key (a zombie attempt
fenced out long ago) applies nothing after the undo."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One call by an agent attempt (whether or not it applied anything)."""

    seq: int
    at: int
    workflow_id: str
    kind: str
    step: str
    attempt: int
    key: str
    # What the attempt was given: attempts of the dependency outputs (steps) or of the
    # undone step's output (compensations); the checkers prove these were accepted results.
    # A map item's output is named `<step>[<index>]` (`invariants.unit_name`).
    inputs: tuple[tuple[str, int], ...] = ()
    item: int | None = None  # a map item's index (of the item, or of the item it undoes)


@dataclass(frozen=True)
class Effect:
    """The first (and only) application of a key."""

    seq: int
    at: int
    workflow_id: str
    kind: str
    step: str
    attempt: int
    key: str
    item: int | None = None  # a map item's index


@dataclass
class FakeService:
    calls: list[Call] = field(default_factory=list)
    effects: dict[str, Effect] = field(default_factory=dict)
    undone: dict[str, int] = field(default_factory=dict)  # forward key -> seq of its undo
    refused: list[Call] = field(default_factory=list)  # forward calls after their undo
    _seq: int = 0

    def apply(
        self,
        *,
        at: int,
        workflow_id: str,
        kind: str,
        step: str,
        attempt: int,
        key: str,
        inputs: tuple[tuple[str, int], ...] = (),
        undoes: str | tuple[str, ...] | None = None,
        item: int | None = None,
    ) -> Effect | None:
        """Record the call; apply the effect only the first time this key is seen.

        `undoes` (a compensation): the forward key(s) it undoes, remembered from now on. A
        forward call whose key was undone applies nothing and returns None.
        """
        self._seq += 1
        call = Call(self._seq, at, workflow_id, kind, step, attempt, key, inputs, item)
        self.calls.append(call)
        if undoes is None and key in self.undone:
            self.refused.append(call)
            return None
        found = self.effects.get(key)
        if found is None:
            found = Effect(self._seq, at, workflow_id, kind, step, attempt, key, item)
            self.effects[key] = found
        # A Repeat step's undo names every iteration's key (`Forward.idempotency_keys`).
        for undone in (undoes,) if isinstance(undoes, str) else undoes or ():
            self.undone.setdefault(undone, found.seq)
        return found

    def effect_list(self) -> list[Effect]:
        return sorted(self.effects.values(), key=lambda e: e.seq)

    def snapshot(self) -> dict[str, Any]:
        return {
            "calls": [c.__dict__ for c in self.calls],
            "effects": [e.__dict__ for e in self.effect_list()],
            "undone": dict(sorted(self.undone.items())),
        }
