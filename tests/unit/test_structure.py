"""The core's structure: no import cycle, test support kept out of production code, no port
with an in-memory default.

Imports are read from the source (every `import` and `from ... import`, deferred ones inside
functions included), so a cycle hidden behind a function-level import is still a cycle.
"""

from __future__ import annotations

import ast
import dataclasses
import random
from pathlib import Path

import pytest
from shepherd.clock import ManualClock
from shepherd.engine.scheduler import Ports
from shepherd.testing import MemoryQueue, MemoryStore, SequentialIds

CORE = Path(__file__).resolve().parents[2] / "layers" / "shepherd" / "python" / "shepherd"


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The core modules `path` imports, at module level or inside a function (not the ones
    only named for type checking, which never run)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # `from pkg import mod` imports the module `pkg.mod`; `from mod import name`, `mod`
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [n for n in subs if n in modules] or [node.module]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in CORE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, modules) - {name} for name, path in paths.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_core_has_no_import_cycle() -> None:
    graph = _graph()
    assert "shepherd.engine.scheduler" in graph  # the reader found the core
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The guard above can fail: a graph with a loop through a deferred import is caught."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_facade_delegates_downward_only() -> None:
    """The scheduler is below the operator actions, callbacks and uploads: it imports none of
    them (they and the engine facade import it)."""
    graph = _graph()
    above = {"shepherd.engine.operations", "shepherd.engine.callbacks", "shepherd.engine.uploads"}
    assert not graph["shepherd.engine.scheduler"] & above
    assert above <= graph["shepherd.engine.build"]


def test_production_code_never_imports_the_test_support() -> None:
    graph = _graph()
    importers = sorted(m for m, deps in graph.items() if "shepherd.testing" in deps)
    assert importers == [], importers


def test_a_port_left_out_is_an_error_when_the_engine_is_built() -> None:
    """No production port has an in-memory default: a host that forgets the payload store
    fails at once instead of keeping large payloads in memory."""
    defaults = {
        f.name
        for f in dataclasses.fields(Ports)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    assert defaults == set()
    clock = ManualClock()
    with pytest.raises(TypeError, match="payloads"):
        Ports(MemoryStore(), MemoryQueue(clock), clock, SequentialIds(), random.Random())  # type: ignore[call-arg]
