"""Demo agents of `provision_environment`: a simulated cloud API."""

from __future__ import annotations

import random
import time
from typing import Any

from shepherd.engine.agent import AgentContext
from shepherd.errors import PermanentError

from shepherd_examples.agents import ledger, registry
from shepherd_examples.agents.faults import after_effect, inject


def _work(ctx: AgentContext, seconds: float) -> None:
    """Simulated provisioning time, reporting progress so a retry could resume."""
    done = (ctx.previous_details or {}).get("percent", 0)
    while done < 100:
        time.sleep(seconds / 4)
        done += 25
        ctx.report_progress({"percent": done})


def _create(ctx: AgentContext, kind: str, **extra: Any) -> dict[str, Any]:
    inject(ctx, permanent_name="QuotaExceeded")
    _work(ctx, random.uniform(0.04, 0.2))
    name = f"{ctx.input['env_name']}-{kind}"
    ledger.apply("cloud", ctx.idempotency_key, f"create_{kind}", {"name": name, **extra})
    after_effect(ctx)
    return {"id": f"{kind}-{ctx.workflow_id[:8]}", "name": name, **extra}


def _delete(ctx: AgentContext, kind: str) -> dict[str, Any]:
    """Tear down what the forward step created, looked up by its idempotency key: it may have
    created it without recording success, or never created it at all."""
    inject(ctx)
    _work(ctx, 0.04)
    assert ctx.forward is not None
    created = ledger.undo(
        "cloud", ctx.forward.idempotency_key, ctx.idempotency_key, f"delete_{kind}"
    )
    return {"deleted": None if created is None else created["name"]}


@registry.agent("create_network")
def create_network(ctx: AgentContext) -> dict[str, Any]:
    return _create(ctx, "network", cidr="10.20.0.0/16", region=ctx.input["region"])


@registry.agent("delete_network")
def delete_network(ctx: AgentContext) -> dict[str, Any]:
    return _delete(ctx, "network")


@registry.agent("create_storage")
def create_storage(ctx: AgentContext) -> dict[str, Any]:
    return _create(
        ctx,
        "storage",
        size_gb={"small": 50, "medium": 200, "large": 1000}[ctx.input.get("size", "small")],
    )


@registry.agent("delete_storage")
def delete_storage(ctx: AgentContext) -> dict[str, Any]:
    return _delete(ctx, "storage")


@registry.agent("create_compute")
def create_compute(ctx: AgentContext) -> dict[str, Any]:
    network = ctx.dependencies["create_network"]["id"]
    storage = ctx.dependencies["create_storage"]["id"]
    return _create(ctx, "compute", network=network, storage=storage)


@registry.agent("delete_compute")
def delete_compute(ctx: AgentContext) -> dict[str, Any]:
    return _delete(ctx, "compute")


@registry.agent("configure_environment")
def configure_environment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _work(ctx, 0.1)
    compute = ctx.dependencies["create_compute"]["id"]
    ledger.apply("cloud", ctx.idempotency_key, "configure", {"compute": compute})
    after_effect(ctx)
    return {"configured": compute, "settings": {"tls": True}}


@registry.agent("reset_configuration")
def reset_configuration(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    assert ctx.forward is not None
    configured = ledger.undo("cloud", ctx.forward.idempotency_key, ctx.idempotency_key, "reset")
    return {"reset": None if configured is None else configured["compute"]}


@registry.agent("verify_environment")
def verify_environment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="VerificationFailed")
    if ctx.input.get("fail_verification"):
        raise PermanentError("health check failed", name="VerificationFailed")
    return {"healthy": True, "endpoint": f"https://{ctx.input['env_name']}.example.internal"}
