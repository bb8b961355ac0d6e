"""Demo agents of `order_fulfilment`: inventory, payments, shipping and notifications (the
shipping email and the later reminder). Its `fraud_review` is a person's (an Approval step)
and its `until_reminder` the supervisor's (a Wait step): no agent runs them.

Each compensation looks the forward step's effect up by that step's idempotency key and undoes
it only if it is there: the step may have acted without anyone hearing of it (a crash after
the effect), or never acted at all.
"""

from __future__ import annotations

import random
import time
from typing import Any

from shepherd.engine.agent import AgentContext
from shepherd.errors import PermanentError

from shepherd_examples.agents import ledger, registry
from shepherd_examples.agents.faults import after_effect, inject


def _latency() -> None:
    time.sleep(random.uniform(0.02, 0.12))


def _undo(ctx: AgentContext, service: str, action: str) -> dict[str, Any] | None:
    """Undo what the forward step applied, if anything (the compensation contract)."""
    assert ctx.forward is not None
    return ledger.undo(service, ctx.forward.idempotency_key, ctx.idempotency_key, action)


@registry.agent("reserve_inventory")
def reserve_inventory(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="OutOfStock")
    _latency()
    items = ctx.input["items"]
    if any(item.get("sku") == "SOLD-OUT" for item in items):
        raise PermanentError("sku SOLD-OUT has no stock", name="OutOfStock")
    effect = ledger.apply("inventory", ctx.idempotency_key, "reserve", {"items": items})
    after_effect(ctx)
    return {"reservation_id": f"res-{ctx.workflow_id[:8]}", "items": effect["items"]}


@registry.agent("release_inventory")
def release_inventory(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    undone = _undo(ctx, "inventory", "release")
    return {"released": undone is not None, "items": (undone or {}).get("items", [])}


@registry.agent("charge_payment")
def charge_payment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="CardDeclined")
    _latency()
    amount = ctx.input["amount"]
    effect = ledger.apply("payments", ctx.idempotency_key, "charge", {"amount": amount})
    after_effect(ctx)
    return {"charge_id": f"ch-{ctx.workflow_id[:8]}", "amount": effect["amount"]}


@registry.agent("refund_payment")
def refund_payment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    charged = _undo(ctx, "payments", "refund")
    return {"refunded": (charged or {}).get("amount", 0), "nothing_to_undo": charged is None}


@registry.agent("ship_order")
def ship_order(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="AddressInvalid")
    _latency()
    ledger.apply("shipping", ctx.idempotency_key, "ship", {"order": ctx.input["order_id"]})
    after_effect(ctx)
    return {"tracking": f"TRK{ctx.workflow_id[:10].upper()}"}


@registry.agent("cancel_shipment")
def cancel_shipment(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    shipped = _undo(ctx, "shipping", "cancel")
    return {"cancelled": shipped is not None}


@registry.agent("notify_customer")
def notify_customer(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    tracking = ctx.dependencies["ship_order"]["tracking"]
    ledger.require_up("email")  # the e-mail provider may be down (make demo's outage)
    ledger.apply("email", ctx.idempotency_key, "send", {"tracking": tracking})
    after_effect(ctx)
    return {"notified": ctx.input.get("customer", "customer"), "tracking": tracking}


@registry.agent("send_reminder")
def send_reminder(ctx: AgentContext) -> dict[str, Any]:
    """The reminder an order asked for (`remind_at`), sent once its Wait step woke."""
    inject(ctx)
    _latency()
    due = ctx.input["remind_at"]
    ledger.require_up("email")
    ledger.apply("email", ctx.idempotency_key, "remind", {"remind_at": due})
    after_effect(ctx)
    return {"reminded": ctx.input.get("customer", "customer"), "remind_at": due}


@registry.agent("apply_amendment")
def apply_amendment(ctx: AgentContext) -> dict[str, Any]:
    """The customer's amendment, sent as a signal matched on the order id (issue 37): the
    `await_amendment` step's output, applied to the reservation."""
    inject(ctx)
    _latency()
    amendment = ctx.dependencies["await_amendment"]
    ledger.apply("inventory", ctx.idempotency_key, "amend", {"amendment": amendment})
    after_effect(ctx)
    return {"amended": amendment}


@registry.agent("confirm_as_placed")
def confirm_as_placed(ctx: AgentContext) -> dict[str, Any]:
    """No amendment came within the window (`await_amendment` timed out and went on): the
    customer is told the order ships as placed."""
    inject(ctx)
    _latency()
    ledger.apply("email", ctx.idempotency_key, "send", {"as_placed": ctx.input["order_id"]})
    after_effect(ctx)
    return {"as_placed": True}
