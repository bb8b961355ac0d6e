"""Demo agents of `order_fulfilment`: inventory, payments, shipping and notifications."""

from __future__ import annotations

import random
import time
from typing import Any

from shepherd.engine.agent import AgentContext
from shepherd.errors import PermanentError

from shepherd_agents import ledger, registry
from shepherd_agents.faults import inject


def _latency() -> None:
    time.sleep(random.uniform(0.02, 0.12))


@registry.agent("reserve_inventory")
def reserve_inventory(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="OutOfStock")
    _latency()
    items = ctx.input["items"]
    if any(item.get("sku") == "SOLD-OUT" for item in items):
        raise PermanentError("sku SOLD-OUT has no stock", name="OutOfStock")
    effect = ledger.apply("inventory", ctx.idempotency_key, "reserve", {"items": items})
    return {"reservation_id": f"res-{ctx.workflow_id[:8]}", "items": effect["items"]}


@registry.agent("release_inventory")
def release_inventory(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    ledger.apply("inventory", ctx.idempotency_key, "release", {"of": ctx.step_output})
    return {"released": ctx.step_output["reservation_id"]}


@registry.agent("charge_payment")
def charge_payment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="CardDeclined")
    _latency()
    amount = ctx.input["amount"]
    effect = ledger.apply("payments", ctx.idempotency_key, "charge", {"amount": amount})
    return {"charge_id": f"ch-{ctx.workflow_id[:8]}", "amount": effect["amount"]}


@registry.agent("refund_payment")
def refund_payment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    charge = ctx.step_output
    ledger.apply("payments", ctx.idempotency_key, "refund", {"charge": charge})
    return {"refunded": charge["charge_id"], "amount": charge["amount"]}


@registry.agent("ship_order")
def ship_order(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="AddressInvalid")
    _latency()
    ledger.apply("shipping", ctx.idempotency_key, "ship", {"order": ctx.input["order_id"]})
    return {"tracking": f"TRK{ctx.workflow_id[:10].upper()}"}


@registry.agent("cancel_shipment")
def cancel_shipment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    ledger.apply("shipping", ctx.idempotency_key, "cancel", {"of": ctx.step_output})
    return {"cancelled": ctx.step_output["tracking"]}


@registry.agent("notify_customer")
def notify_customer(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    tracking = ctx.dependencies["ship_order"]["tracking"]
    ledger.apply("email", ctx.idempotency_key, "send", {"tracking": tracking})
    return {"notified": ctx.input.get("customer", "customer"), "tracking": tracking}
