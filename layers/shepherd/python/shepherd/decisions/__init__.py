"""Pure decisions: retry delays, planning and the named transitions of a step.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""
