"""At synth, every agent a definition names must be registered by the code its pool ships.

The agent runtime fails a step whose agent its pool's code does not register (`AgentNotFound`);
this check moves that failure to the synth, naming the agent, the pool and the module list.

Each pool's agent modules are imported from the folder staged for its function, in a fresh
interpreter whose path is what Lambda's is made of, in Lambda's order: that folder
(`/var/task`), the core package (`/opt/python`), then this environment's installed packages as
plain folders (their `.pth` files unread, so an editable install of the user's own package,
which the function will not have, cannot stand in for the staged copy). No bytecode is written
into the staged folder (it is the function's code asset).
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

import shepherd
from shepherd.definitions import Definition

from shepherd_infra.code import AgentCode

# Prints the agents the modules register (or why they cannot be imported) as the last line.
_PROBE = """
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
from shepherd.user_code import AgentModuleError, load_agents
try:
    result = {"names": sorted(load_agents(json.loads(sys.argv[2])).names())}
except AgentModuleError as exc:
    result = {"error": str(exc)}
print("\\n" + json.dumps(result))
"""
PROBE_TIMEOUT_SECONDS = 120


class AgentCheckError(ValueError):
    """A pool's code does not register an agent its definitions name."""


def needed_agents(definitions: Mapping[str, Definition]) -> dict[str, dict[str, str]]:
    """Per pool, each agent its steps and compensations name, with where the first is named."""
    needed: dict[str, dict[str, str]] = {}
    for name, definition in sorted(definitions.items()):
        for i, step in enumerate(definition.steps):
            where = f"{name}: Steps[{i}] ({step.name})"
            if step.runs_agent:  # a Wait, an Approval or a child-workflow step runs none
                needed.setdefault(step.pool, {}).setdefault(step.agent, f"{where}.Agent")
            comp = step.compensation
            if comp is not None:
                needed.setdefault(comp.pool, {}).setdefault(
                    comp.agent, f"{where}.Compensation.Agent"
                )
    return needed


def registered_agents(code_dir: Path, modules: Sequence[str]) -> set[str]:
    """The agents `modules` register when imported from `code_dir` as Lambda would."""
    paths = [
        str(code_dir),
        str(Path(shepherd.__file__).resolve().parent.parent),
        *dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")),
    ]
    # -S: no site processing (no .pth files); -B: no bytecode in the staged code asset.
    run = subprocess.run(  # noqa: S603 - this interpreter, our own probe
        [sys.executable, "-S", "-B", "-c", _PROBE, json.dumps(paths), json.dumps(list(modules))],
        cwd=code_dir,
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_SECONDS,
        check=False,
    )
    lines = run.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if run.returncode == 0 and lines else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise AgentCheckError(
            f"importing agent modules {list(modules)} from {code_dir} failed: "
            f"{(run.stderr or run.stdout).strip()[-2000:]}"
        )
    if "error" in result:
        raise AgentCheckError(f"{result['error']} (importing from {code_dir})")
    return set(result["names"])


def check_pool(
    pool: str,
    needed: Mapping[str, str],
    staged: Path,
    code: AgentCode,
    registered: set[str] | None = None,
) -> set[str]:
    """Fail unless `code`'s modules, imported from its `staged` folder, register every agent
    of `needed`; the names they register (pass them back in for another pool of that code)."""
    modules = list(code.modules)
    try:
        names = registered if registered is not None else registered_agents(staged, modules)
    except AgentCheckError as exc:
        raise AgentCheckError(f"pool '{pool}' ships agent modules {modules}: {exc}") from None
    missing = sorted(set(needed) - names)
    if missing:
        agents = "; ".join(f"'{a}' ({needed[a]})" for a in missing)
        raise AgentCheckError(
            f"pool '{pool}' ships agent modules {modules} (from {code.path}), which do not "
            f"register agent {agents}; they register: {', '.join(sorted(names)) or 'none'}"
        )
    return names
