"""Shepherd's CDK construct library: put `Shepherd` in your own CDK app.

    from shepherd_infra import AgentCode, Shepherd

    shepherd = Shepherd(
        stack,
        "Shepherd",
        definitions_dir=Path("statemachines"),
        agents=AgentCode(path=Path("src"), modules=["my_app.agents"]),
    )
    shepherd.table.grant_read_data(reporting_role)

Public: `Shepherd`, `AgentCode`, `ApiThrottling` (the API stage's throttling),
`PoolSettings` (a pool's function: timeout, memory, environment, layers, VPC, reserved
concurrency, architecture, a `RateLimit`, a `CircuitBreaker`) and `add_checks` (cdk-nag on an
app, with the construct's acknowledgements). The sub-constructs
(`shepherd_infra.state_store`, ...) are internal. `shepherd_infra.application` is this
repository's example app.
"""

from shepherd.pool_policy import CircuitBreaker, RateLimit

from shepherd_infra.api_logging import ApiThrottling
from shepherd_infra.code import AgentCode
from shepherd_infra.nag import add_checks
from shepherd_infra.pool_settings import PoolSettings
from shepherd_infra.stack import Shepherd

__all__ = [
    "AgentCode",
    "ApiThrottling",
    "CircuitBreaker",
    "PoolSettings",
    "RateLimit",
    "Shepherd",
    "add_checks",
]
