"""Agent functions, registered by name. Each pool's Lambda imports this package and runs the
agents its pool's steps name. The demo agents simulate external services."""

from shepherd.engine.agent import AgentRegistry

registry = AgentRegistry()

# Importing the modules registers their agents.
from shepherd_examples.agents import order, provision  # noqa: E402

__all__ = ["order", "provision", "registry"]
