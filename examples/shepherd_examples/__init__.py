"""Shepherd's example application: the demo agents of the three definitions in `statemachines/`
(`order_fulfilment`, `provision_environment`, `transcode_video`), with fault injection through
their `faults` input. A user's own package plays this part; nothing in the runtime imports this
one by name: this repository names it in `[tool.shepherd]` (pyproject.toml) and the example CDK
app."""

AGENT_MODULES = ("shepherd_examples.agents",)
