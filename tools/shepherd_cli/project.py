"""Which definitions and agents the developer tools run: the project's `[tool.shepherd]`.

`shepherd local`, `shepherd validate` and `shepherd graph` look for the nearest
`pyproject.toml` (from the working directory up) with a `[tool.shepherd]` table:

    [tool.shepherd]
    definitions = "statemachines"          # relative to the pyproject.toml
    agent-modules = ["my_app.agents"]      # modules holding an AgentRegistry named `registry`

Command-line flags override it. Without one, the definitions are `./statemachines` and there
are no agents.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

DEFAULT_DEFINITIONS = "statemachines"


class ProjectError(ValueError):
    """`[tool.shepherd]` is malformed."""


@dataclass(frozen=True)
class Project:
    root: Path
    definitions_dir: Path
    agent_modules: tuple[str, ...] = ()

    @classmethod
    def find(cls, start: Path | None = None) -> Project:
        here = (start or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            pyproject = folder / "pyproject.toml"
            if not pyproject.is_file():
                continue
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            table = data.get("tool", {}).get("shepherd")
            if table is not None:
                return cls.from_table(folder, table, str(pyproject))
        return cls(here, here / DEFAULT_DEFINITIONS)

    @classmethod
    def from_table(cls, root: Path, table: dict[str, Any], source: str) -> Project:
        definitions = table.get("definitions", DEFAULT_DEFINITIONS)
        modules = table.get("agent-modules", [])
        if not isinstance(definitions, str):
            raise ProjectError(f"{source}: [tool.shepherd] definitions must be a path")
        if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
            raise ProjectError(f"{source}: [tool.shepherd] agent-modules must be a list of names")
        return cls(root, (root / definitions).resolve(), tuple(modules))

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
