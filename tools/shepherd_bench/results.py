"""docs/benchmarks.json, for the benchmarks run by hand: each stores its result under a key of
its own and leaves every other result as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PATH = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.json"


def store(*keys: str, value: Any, path: Path = PATH) -> None:
    """Put `value` at `keys` (e.g. `store("pools", "local_stack_rate", value=...)`)."""
    results = json.loads(path.read_text())
    _put(results, keys, value)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


# What the benchmarks run by hand (`local_day --write`, `local_rate --write`, `demo_busy
# --write`) store: runs of minutes to hours, which `make bench` does not repeat, so it keeps
# them; and `others`, the other engines' list prices the README compares with (written by
# hand from their price pages, with the source).
HAND_RUN = (("local_day",), ("pools", "local_stack_rate"), ("demo",), ("others",))


def keep_hand_run(before: dict[str, Any], results: dict[str, Any]) -> None:
    """Copy the hand-run results of `before` into `results` (a new run that rewrites a
    section holding one, e.g. `pools`, would drop it)."""
    for keys in HAND_RUN:
        node: Any = before
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            _put(results, keys, node)


def _put(tree: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value
