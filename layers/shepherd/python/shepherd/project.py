"""A project's `[tool.shepherd]` table: the one place that names its definitions and agents.

    [tool.shepherd]
    definitions = "statemachines"          # relative to the pyproject.toml
    agent-modules = ["my_app.agents"]      # modules holding an AgentRegistry named `registry`
    asl-pool = "lambdas"                   # the pool of state machines' Lambda tasks ("asl")
    asl-pools = {charge-card = "payments"} # a pool for some Lambda functions by name

`shepherd validate` and `shepherd local` read it, unit tests through
`MemoryEngine.from_project`, the CDK app through `AgentCode.from_project`: a module added here
reaches every one of them, so a deploy cannot ship fewer agents than the tests ran. The
nearest `pyproject.toml` with the table wins (from the given folder up); without one, the
definitions are `./statemachines` and there are no agents.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`); standard library
only, so the CDK app and the developer tools read it without the runtime's dependencies.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shepherd.suggest import did_you_mean

DEFAULT_DEFINITIONS = "statemachines"
TABLE = "[tool.shepherd]"
# A module path, optionally with the attribute holding its registry (`pkg.mod:attr`).
AGENT_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")
KEYS = ("definitions", "agent-modules", "asl-pool", "asl-pools")
POOL = re.compile(r"^[a-z][a-z0-9-]{0,31}$")  # shepherd.definitions.POOL


class ProjectError(ValueError):
    """`pyproject.toml` cannot be read, or its `[tool.shepherd]` table is malformed."""


@dataclass(frozen=True)
class Project:
    """Where a project keeps its definitions and which modules register its agents."""

    root: Path
    definitions_dir: Path
    agent_modules: tuple[str, ...] = ()
    # The pyproject.toml the table came from; None when no file has one.
    pyproject: Path | None = None
    # The pools of state machines' Lambda tasks: one for all (None: `asl`), some by function.
    asl_pool: str | None = None
    asl_pools: tuple[tuple[str, str], ...] = ()

    @classmethod
    def find(cls, start: Path | None = None) -> Project:
        """The project of the nearest `pyproject.toml` with a `[tool.shepherd]` table."""
        here = (start or Path.cwd()).resolve()
        if here.is_file():
            here = here.parent
        for folder in (here, *here.parents):
            pyproject = folder / "pyproject.toml"
            if not pyproject.is_file():
                continue
            table = _read(pyproject).get("tool", {}).get("shepherd")
            if table is not None:
                return cls.from_table(folder, table, pyproject)
        return cls(here, here / DEFAULT_DEFINITIONS)

    @classmethod
    def from_table(cls, root: Path, table: Any, pyproject: Path) -> Project:
        if not isinstance(table, dict):
            raise ProjectError(f"{pyproject}: {TABLE} must be a table")
        unknown = sorted(set(table) - set(KEYS))
        if unknown:
            raise ProjectError(
                f"{pyproject}: {TABLE} has no key '{unknown[0]}'{did_you_mean(unknown[0], KEYS)} "
                f"(its keys: {', '.join(KEYS)})"
            )
        definitions = table.get("definitions", DEFAULT_DEFINITIONS)
        modules = table.get("agent-modules", [])
        if not isinstance(definitions, str) or not definitions:
            raise ProjectError(f"{pyproject}: {TABLE} definitions must be a folder (a string)")
        if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
            raise ProjectError(
                f"{pyproject}: {TABLE} agent-modules must be a list of module names, "
                'e.g. ["my_app.agents"]'
            )
        for module in modules:
            if not AGENT_MODULE.match(module):
                raise ProjectError(
                    f"{pyproject}: {TABLE} agent-modules: '{module}' is not a module path "
                    "(pkg.module, or pkg.module:attribute)"
                )
        pool, pools = _asl_pools(table, pyproject)
        return cls(root, (root / definitions).resolve(), tuple(modules), pyproject, pool, pools)

    def overridden(
        self, *, definitions: str | None = None, agent_modules: Sequence[str] | None = None
    ) -> Project:
        """This project with the command line's choices applied."""
        project = self
        if definitions:
            project = replace(project, definitions_dir=Path(definitions).resolve())
        if agent_modules:
            project = replace(project, agent_modules=tuple(agent_modules))
        return project

    @property
    def where(self) -> str:
        """Where the agent modules were named, for error messages."""
        if self.pyproject is None:
            return f"no pyproject.toml with {TABLE} from {self.root}"
        return f"{self.pyproject} {TABLE} agent-modules"


def _asl_pools(
    table: dict[str, Any], pyproject: Path
) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """`asl-pool` and `asl-pools`: pool names, checked as a definition's `Pool` is."""
    pool = table.get("asl-pool")
    pools = table.get("asl-pools", {})
    if pool is not None and (not isinstance(pool, str) or not POOL.match(pool)):
        raise ProjectError(f"{pyproject}: {TABLE} asl-pool: '{pool}' is not a pool name")
    if not isinstance(pools, dict):
        raise ProjectError(f"{pyproject}: {TABLE} asl-pools must be a table of function = pool")
    for function, name in pools.items():
        if not isinstance(name, str) or not POOL.match(name):
            raise ProjectError(
                f"{pyproject}: {TABLE} asl-pools.{function}: '{name}' is not a pool name"
            )
    return pool, tuple(sorted(pools.items()))


def _read(pyproject: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{pyproject}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ProjectError(f"{pyproject}: cannot read: {exc.strerror}") from None
