"""mypy reads only the aws_cdk modules our code needs (pyproject's [tool.mypy] overrides): the
list must hold every module our code imports and every module those modules' signatures import,
or a name our code uses would silently be `Any`. Recomputed here from the sources."""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What `make mypy` checks.
CHECKED = ("layers/shepherd/python/shepherd", "functions", "tools", "infra", "examples")
# Packages whose generated modules mypy follows normally and which import aws_cdk modules.
FOLLOWED = ("aws_cdk", "constructs", "cdk_nag")


def _mypy_lists() -> tuple[set[str], set[str]]:
    """The aws_cdk patterns skipped and the modules read normally."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    skipped: set[str] = set()
    read: set[str] = set()
    for override in config["tool"]["mypy"]["overrides"]:
        modules = override["module"]
        modules = [modules] if isinstance(modules, str) else modules
        if override.get("follow_imports") == "skip":
            skipped.update(modules)
        elif override.get("follow_imports") == "normal":
            read.update(modules)
    return skipped, read


def _source(module: str) -> Path | None:
    """The module's file, found without importing it (importing aws_cdk starts node)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _imports(tree: ast.Module, package: str) -> Iterator[str]:
    """Every module a module's top-level statements (and their `if` blocks) import, and its
    parents; not a package's `from . import x as x` list (the load-everything block)."""

    def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
        for node in body:
            if isinstance(node, ast.If):
                yield from statements(node.body)
                yield from statements(node.orelse)
            else:
                yield node

    for node in statements(tree.body):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module is None:
                continue
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = str(node.module)
            names = [target, *(f"{target}.{a.name}" for a in node.names if a.name != "*")]
        for name in names:
            parts = name.split(".")
            yield from (".".join(parts[: i + 1]) for i in range(len(parts)))


def _header(path: Path) -> ast.Module:
    """A generated module's imports: what lies between its docstring and its first jsii class
    (the docstrings hold example code that imports other modules; parsing 60 MB is slow)."""
    text = path.read_text(encoding="utf-8")
    start = text.find("\nfrom __future__ import annotations\n")  # after the module docstring
    cut = text.find("\n@jsii.", max(start, 0))
    try:
        return ast.parse(text[max(start, 0) : cut if cut >= 0 else len(text)])
    except SyntaxError:  # not cut where expected: the whole module, slower but exact
        return ast.parse(text)


def _needed() -> set[str]:
    todo: set[str] = set()
    for folder in CHECKED:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    todo.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    todo.add(node.module)
                    todo.update(f"{node.module}.{alias.name}" for alias in node.names)
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen or module.split(".")[0] not in FOLLOWED:
            continue
        path = _source(module)
        if path is None:  # a class or function imported by name, not a module
            continue
        seen.add(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        todo.update(set(_imports(_header(path), package)) - seen)
    return {m for m in seen if m.split(".")[0] == "aws_cdk"}


def test_mypy_reads_every_aws_cdk_module_our_code_needs() -> None:
    skipped, read = _mypy_lists()
    assert skipped == {"aws_cdk.*"}
    needed = _needed()
    assert {"aws_cdk", "aws_cdk.aws_lambda", "aws_cdk.aws_iam"} <= needed  # the walk works
    assert needed - read == set(), "add these to pyproject's aws_cdk list"
    assert read - needed == set(), "no longer needed: drop them from pyproject's aws_cdk list"
