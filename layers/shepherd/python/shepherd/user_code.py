"""The user's agent code: the modules `Settings.agent_modules` names, imported on first use.

The runtime never imports an agent package by name; a deployment says which modules hold its
agents (`SHEPHERD_AGENT_MODULES`), and each module's registry is merged into one. Two modules
registering the same agent name is an error, not a silent override.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from shepherd.engine.agent import AgentRegistry
from shepherd.errors import ShepherdError

DEFAULT_ATTRIBUTE = "registry"


class AgentModuleError(ShepherdError):
    """An agent module cannot be imported, or holds no AgentRegistry where it was said to."""


def _registry(spec: str) -> AgentRegistry:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentModuleError(f"agent module '{module_name}' cannot be imported: {exc}") from exc
    registry = getattr(module, attribute or DEFAULT_ATTRIBUTE, None)
    if not isinstance(registry, AgentRegistry):
        raise AgentModuleError(
            f"agent module '{module_name}' has no AgentRegistry named "
            f"'{attribute or DEFAULT_ATTRIBUTE}'"
        )
    return registry


def load_agents(modules: Iterable[str]) -> AgentRegistry:
    """The agents of `modules` (`pkg.mod` or `pkg.mod:attribute`).

    One module: its own registry object (a test that swaps an agent in it is heard). Several:
    one registry holding all their agents; a name registered twice is an error.
    """
    specs = list(modules)
    if len(specs) == 1:
        return _registry(specs[0])
    merged = AgentRegistry()
    owners: dict[str, str] = {}
    for spec in specs:
        registry = _registry(spec)
        for name in sorted(registry.names()):
            if name in owners and owners[name] != spec:
                raise AgentModuleError(
                    f"agent '{name}' is registered by both '{owners[name]}' and '{spec}'"
                )
            owners[name] = spec
            function = registry.get(name)
            assert function is not None
            merged.register(name, function)
    return merged
