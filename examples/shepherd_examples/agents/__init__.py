"""Agent functions, registered by name. Each pool's Lambda imports this package and runs the
agents its pool's steps name. The demo agents simulate external services."""

from shepherd.engine.agent import AgentRegistry

registry = AgentRegistry()

# Importing the modules registers their agents.
from shepherd_examples.agents import onboard, order, provision, transcode  # noqa: E402
from shepherd_examples.agents.faults import with_callback, with_output_bytes  # noqa: E402

# Any demo step can be asked to return a large value (input option `output_bytes`) or to wait
# for a callback (input option `callback`).
for _name in sorted(registry.names()):
    _fn = registry.get(_name)
    assert _fn is not None
    registry.register(_name, with_callback(with_output_bytes(_fn)))

__all__ = ["onboard", "order", "provision", "registry", "transcode"]
