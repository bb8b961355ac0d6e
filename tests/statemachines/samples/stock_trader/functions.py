"""The stock trader sample's three Lambda functions, written anew with the sample's inputs and
outputs (the SAM CLI's "Multi-step workflow" app template): the checker gives a price, the
buyer and the seller a transaction `{id, price, type, qty, timestamp}` (strings, as the
state machine's `putItem` writes them).

Each stays a Lambda handler, `handler(event, context)`, as it was on AWS; `registry` registers
each as a Shepherd agent under its Lambda function's name, which is how a state machine's
Task finds it.
"""

from __future__ import annotations

import datetime as _dt
import random
import uuid
from collections.abc import Callable
from typing import Any

from shepherd.engine.agent import AgentContext, AgentRegistry

# Where prices and quantities come from: random, as in the sample; a test fixes them.
market = random.Random()


def stock_checker(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The stock's current price, a whole number from 0 to 100."""
    return {"stock_price": market.randint(0, 100)}


def _transaction(kind: str, event: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "price": str(event["stock_price"]),
        "type": kind,
        "qty": str(market.randint(1, 10)),
        "timestamp": _dt.datetime.now(_dt.UTC).isoformat(),
    }


def stock_buyer(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Buy a few shares at the price checked (a mock: nothing is bought)."""
    return _transaction("buy", event)


def stock_seller(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Sell a few shares at the price checked (a mock: nothing is sold)."""
    return _transaction("sell", event)


def as_agent(handler: Callable[[Any, Any], Any]) -> Callable[[AgentContext], Any]:
    """A Lambda handler as an agent: the Task's payload is `ctx.input`. The handler gets no
    Lambda context object (these never read it); one that does would get `ctx`'s fields."""

    def agent(ctx: AgentContext) -> Any:
        return handler(ctx.input, None)

    agent.__name__ = handler.__name__
    return agent


registry = AgentRegistry()
registry.register("StockCheckerFunction", as_agent(stock_checker))
registry.register("StockBuyerFunction", as_agent(stock_buyer))
registry.register("StockSellerFunction", as_agent(stock_seller))
