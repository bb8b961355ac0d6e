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
    node = results
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
