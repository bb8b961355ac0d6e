"""The user's agent code: the modules `Settings.agent_modules` names, imported on first use.

The runtime never imports an agent package by name; a deployment says which modules hold its
agents (`SHEPHERD_AGENT_MODULES`, from the project's `[tool.shepherd] agent-modules`), and
their registries are merged into one. Several modules may share one registry (each lists its
agents on the registry another module made): it is taken once. Two *different* registries
registering the same name is an error, not a silent override.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Iterable

from shepherd.engine.agent import AgentRegistry
from shepherd.errors import ShepherdError

DEFAULT_ATTRIBUTE = "registry"


class AgentModuleError(ShepherdError):
    """An agent module cannot be imported, or holds no AgentRegistry where it was said to."""


def _where(exc: BaseException) -> str:
    """` (file:line)` of the user's code that raised, so the message alone finds it."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}:{exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "importlib" not in f.filename]
    return f" ({ours[-1].filename}:{ours[-1].lineno})" if ours else ""


def _registry(spec: str) -> AgentRegistry:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the module is missing, or raised while it was imported
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        if missing and (module_name == missing or module_name.startswith(f"{missing}.")):
            raise AgentModuleError(
                f"agent module '{module_name}' cannot be imported: {exc}"
            ) from exc
        raise AgentModuleError(
            f"agent module '{module_name}' failed while it was imported: "
            f"{type(exc).__name__}: {exc}{_where(exc)}"
        ) from exc
    registry = getattr(module, attribute or DEFAULT_ATTRIBUTE, None)
    if not isinstance(registry, AgentRegistry):
        others = sorted(k for k, v in vars(module).items() if isinstance(v, AgentRegistry))
        hint = f"; it has '{others[0]}': name it as '{module_name}:{others[0]}'" if others else ""
        raise AgentModuleError(
            f"agent module '{module_name}' has no AgentRegistry named "
            f"'{attribute or DEFAULT_ATTRIBUTE}'{hint}"
        )
    return registry


def load_agents(modules: Iterable[str]) -> AgentRegistry:
    """The agents of `modules` (`pkg.mod` or `pkg.mod:attribute`).

    One registry (one module, or several sharing it): that registry object itself, so a test
    that swaps an agent in it is heard. Several: one registry holding all their agents; a
    name two different registries register is an error.
    """
    found: list[tuple[str, AgentRegistry]] = []
    for spec in modules:
        registry = _registry(spec)
        if all(registry is not seen for _, seen in found):
            found.append((spec, registry))
    if len(found) == 1:
        return found[0][1]
    merged = AgentRegistry()
    owners: dict[str, str] = {}
    for spec, registry in found:
        for name in sorted(registry.names()):
            if name in owners:
                raise AgentModuleError(
                    f"agent '{name}' is registered by both '{owners[name]}' and '{spec}', "
                    "two different registries (modules may share one registry; a name is "
                    "registered once)"
                )
            owners[name] = spec
            function = registry.get(name)
            assert function is not None
            merged.register(name, function)
    return merged
