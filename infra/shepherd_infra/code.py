"""What the functions run: the core layer, the handlers and the user's agent code, staged from
the installed packages (a checkout's editable install or a wheel alike) into the build folder.

The core layer is the `shepherd` package as installed, under `python/` (Lambda puts
`/opt/python` on `sys.path`); every function's code holds `shepherd_handlers`; an agent pool's
code holds the handlers and the user's agent code (`AgentCode`): nothing else, so a deployed
function carries only the agents its pool runs.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import shepherd
import shepherd_handlers
from shepherd.project import Project

from shepherd_infra import config


@dataclass(frozen=True)
class AgentCode:
    """A user's agent code: the folder whose contents become the root of the agent functions'
    code (`/var/task`), and the modules there whose `registry` holds the agents.

    `path` holds the package(s), and any dependencies vendored beside them
    (`pip install --target <path> ...`); `modules` are what `SHEPHERD_AGENT_MODULES` names.
    """

    path: Path
    modules: Sequence[str]
    exclude: Sequence[str] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.modules:
            raise ValueError("AgentCode needs at least one agent module")
        if not Path(self.path).is_dir():
            raise ValueError(f"AgentCode path is not a folder: {self.path}")

    @classmethod
    def from_project(
        cls, project_dir: Path, *, path: Path | None = None, exclude: Sequence[str] = ()
    ) -> AgentCode:
        """The agent code of the project at `project_dir`: the modules its `pyproject.toml`'s
        `[tool.shepherd] agent-modules` names (the ones `shepherd validate`, `shepherd local`
        and `MemoryEngine.from_project` use), from `path` (default `<project_dir>/src`)."""
        project = Project.find(Path(project_dir))
        if not project.agent_modules:
            raise ValueError(f"no agent modules: {project.where} names none")
        return cls(
            path=path or project.root / "src", modules=project.agent_modules, exclude=exclude
        )


def _package_dir(module: ModuleType) -> Path:
    return Path(str(module.__file__)).resolve().parent


def _copy(source: Path, target: Path, exclude: Sequence[str] = ()) -> None:
    shutil.copytree(
        source,
        target,
        ignore=shutil.ignore_patterns(*config.ASSET_EXCLUDES, *exclude),
        dirs_exist_ok=True,
    )


def _fresh(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def stage_core_layer(build_dir: Path) -> Path:
    """`<build_dir>/core-layer/python/shepherd`: the layer mounts it at /opt/python/shepherd."""
    root = _fresh(build_dir / "core-layer")
    _copy(_package_dir(shepherd), root / "python" / "shepherd")
    return root


def stage_handlers(build_dir: Path) -> Path:
    """`<build_dir>/handlers/shepherd_handlers`: the code of the functions that run no agents."""
    root = _fresh(build_dir / "handlers")
    _copy(_package_dir(shepherd_handlers), root / "shepherd_handlers")
    return root


def stage_agent_code(build_dir: Path, name: str, code: AgentCode) -> Path:
    """`<build_dir>/agents-<name>/`: the handlers and the user's agent code, side by side."""
    root = _fresh(build_dir / f"agents-{name}")
    _copy(Path(code.path), root, code.exclude)
    if (root / "shepherd_handlers").exists():
        raise ValueError(f"{code.path}: holds a shepherd_handlers package of its own")
    _copy(_package_dir(shepherd_handlers), root / "shepherd_handlers")
    return root
