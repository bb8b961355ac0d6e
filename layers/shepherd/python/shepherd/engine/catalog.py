"""Definitions by name (the current file) and by content hash (what a workflow started with).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping

from shepherd.definitions import Definition, parse_definition
from shepherd.errors import ConditionFailed, UnknownWorkflowType
from shepherd.keys import definition_pk
from shepherd.ports import Store


class Catalog:
    """Current definitions plus every version a live workflow may still run on.

    A version is snapshotted in the table the first time this process starts a workflow on
    it, so a workflow finishes on its own version even after the file changes or goes away.
    """

    def __init__(self, definitions: Mapping[str, Definition], store: Store) -> None:
        self._current = dict(definitions)
        self._store = store
        self._by_hash = {(d.name, d.content_hash): d for d in definitions.values()}
        self._snapshotted: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted(self._current)

    def current(self, name: str) -> Definition:
        try:
            return self._current[name]
        except KeyError:
            raise UnknownWorkflowType(name, self._current) from None

    def all(self) -> dict[str, Definition]:
        return dict(self._current)

    def version(self, name: str, content_hash: str) -> Definition:
        key = (name, content_hash)
        found = self._by_hash.get(key)
        if found is not None:
            return found
        item = self._store.get(definition_pk(name), content_hash)
        if item is None:
            raise UnknownWorkflowType(f"{name}@{content_hash}")
        definition = parse_definition(json.loads(item["body"]), f"snapshot {name}@{content_hash}")
        with self._lock:
            self._by_hash[key] = definition
        return definition

    def ensure_snapshot(self, definition: Definition) -> None:
        key = (definition.name, definition.content_hash)
        if key in self._snapshotted:
            return
        # Another process may have stored the same version first: same content, nothing to do.
        with contextlib.suppress(ConditionFailed):
            self._store.put_new(
                {
                    "pk": definition_pk(definition.name),
                    "sk": definition.content_hash,
                    "body": definition.canonical_json,
                }
            )
        with self._lock:
            self._snapshotted.add(key)
