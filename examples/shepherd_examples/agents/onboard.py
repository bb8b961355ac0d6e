"""Demo agents of `onboard_tenant`: its environments are child workflows (provision_environment,
agents in provision.py); these are the steps around them."""

from __future__ import annotations

import re
from typing import Any

from shepherd.engine.agent import AgentContext
from shepherd.errors import PermanentError

from shepherd_examples.agents import ledger, registry
from shepherd_examples.agents.faults import after_effect, inject


def _environments(tenant: dict[str, Any]) -> list[dict[str, Any]]:
    return [tenant["primary"], *tenant.get("replicas", [])]


@registry.agent("validate_tenant")
def validate_tenant(ctx: AgentContext) -> dict[str, Any]:
    """Every environment names a region, no region twice, each name starting with the tenant's."""
    inject(ctx, permanent_name="InvalidTenant")
    tenant = ctx.input
    envs = _environments(tenant)
    regions = [e.get("region") for e in envs]
    if None in regions or len(set(regions)) != len(regions):
        raise PermanentError(
            f"each environment needs its own region: {regions}", name="InvalidTenant"
        )
    prefix = re.escape(tenant["tenant_id"])
    strays = [
        e.get("env_name") for e in envs if not re.match(rf"{prefix}-", str(e.get("env_name")))
    ]
    if strays:
        raise PermanentError(
            f"environments not named after the tenant: {strays}", name="InvalidTenant"
        )
    return {"tenant_id": tenant["tenant_id"], "regions": regions}


@registry.agent("notify_tenant")
def notify_tenant(ctx: AgentContext) -> dict[str, Any]:
    """E-mails the tenant the endpoints its children's `verify` steps returned: a child's
    output is its own output, each of its steps' outputs by name."""
    inject(ctx)
    children = [ctx.dependencies["provision_primary"], *ctx.dependencies["provision_replicas"]]
    endpoints = [child["verify"]["endpoint"] for child in children]
    ledger.require_up("email")
    ledger.apply(
        "email", ctx.idempotency_key, "send", {"to": ctx.input["contact"], "endpoints": endpoints}
    )
    after_effect(ctx)
    return {"notified": ctx.input["contact"], "endpoints": endpoints}
