"""Shepherd: Scheduler-Agent-Supervisor workflows on AWS serverless.

The core package, shipped to Lambda as a layer. Pure decisions live in `shepherd.decisions`,
the engine in `shepherd.engine`, ports in `shepherd.ports`, AWS adapters in
`shepherd.adapters`, in-memory fakes in `shepherd.testing`.
"""

from shepherd.engine.agent import AgentContext, AgentRegistry, Pending
from shepherd.errors import PermanentError

__all__ = ["AgentContext", "AgentRegistry", "Pending", "PermanentError"]
__version__ = "0.1.0"
