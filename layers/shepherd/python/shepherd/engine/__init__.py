"""The engine: scheduler, agent runtime, supervisor and the factory that wires them.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""
