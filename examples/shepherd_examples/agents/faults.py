"""Fault injection for the demo agents, read from the workflow input.

`"faults": {"<step>": {"mode": "error" | "permanent" | "hang" | "crash" | "crash_after_effect",
"times": N}}` applies to the first N attempts of that step (`"<step>:compensation"` targets
its compensation); without `times` it applies to the first attempt, or, for `permanent`, to
every attempt (set `times` to see a resume after a "fix" succeed). `crash_after_effect`: the
effect lands, then the worker dies before it can record anything (the outcome the engine
cannot know). Only demo agents read `faults`.

In a map step, `"<step>[<index>]"` targets the one item at that index (the notation of the
item's idempotency key, `<workflow id>:<step>[<index>]`), and `"<step>[<index>]:compensation"`
its undo; a plain `"<step>"` targets every item. `times` counts the item's own attempts,
which each item has apart from the others.

`"output_bytes": {"<step>": N}` makes that step return a value of at least N bytes (its
result plus a `padding` string): a large output, kept in the payload bucket by the engine
with no change to the agent (docs/architecture.md, Large payloads).

`"callback": ["<step>", ...]` makes those steps callback steps: instead of doing the work, the
agent hands it to "an outside system" and waits (`Pending`). The demo has no outside system,
so the step leaves its task token in its progress details (`details.task_token`) for whoever
plays that part (`make demo`'s carrier, or you: `shepherd task success <token> --output ...`).
A real agent sends the token to the system doing the work, never into the workflow's details:
anyone who can read the workflow could then answer for it.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

from shepherd.engine.agent import AgentContext, Pending
from shepherd.errors import PermanentError


class TransientServiceError(Exception):
    """A retryable failure of a simulated service (timeout, 503)."""


class SimulatedHang(BaseException):
    """In-process stand-in for a hung attempt: no result and no more heartbeats.

    A BaseException so the runtime does not record it as an attempt outcome; the in-process
    worker leaves the message alone, exactly as a stuck process would.
    """


class SimulatedCrash(BaseException):
    """In-process stand-in for a worker process that died mid-step."""


def _fault(ctx: AgentContext) -> dict[str, Any] | None:
    faults = ctx.input.get("faults") if isinstance(ctx.input, dict) else None
    if not isinstance(faults, dict):
        return None
    suffix = "" if ctx.kind == "step" else ":compensation"
    # A map item's own fault first, then its step's (which applies to every item).
    keys = [f"{ctx.step}{suffix}"]
    if ctx.item_index is not None:
        keys.insert(0, f"{ctx.step}[{ctx.item_index}]{suffix}")
    fault = next((f for f in map(faults.get, keys) if f is not None), None)
    if not isinstance(fault, dict):
        return None
    default = None if fault.get("mode") == "permanent" else 1
    times = fault.get("times", default)
    return fault if times is None or ctx.attempt <= times else None


def _crash(ctx: AgentContext) -> None:
    if os.environ.get("SHEPHERD_REAL_FAULTS"):
        os._exit(17)  # the worker process dies mid-step, as a Lambda sandbox would
    raise SimulatedCrash(ctx.step)


def after_effect(ctx: AgentContext) -> None:
    """Call right after the effect: `crash_after_effect` dies here, before any result."""
    fault = _fault(ctx)
    if fault is not None and fault.get("mode") == "crash_after_effect":
        _crash(ctx)


def inject(ctx: AgentContext, *, permanent_name: str = "PermanentFailure") -> None:
    """Raise, hang or crash as the workflow input asks for this attempt (before the effect)."""
    fault = _fault(ctx)
    if fault is None:
        return
    mode = fault.get("mode")
    if mode == "error":
        raise TransientServiceError(f"injected transient error on attempt {ctx.attempt}")
    if mode == "permanent":
        raise PermanentError(f"injected permanent error in {ctx.step}", name=permanent_name)
    if mode == "hang":
        if os.environ.get("SHEPHERD_REAL_FAULTS"):
            # A real hang: no more heartbeats, no result. The worker stays stuck until well
            # past the attempt's deadline (by then the supervisor has fenced it out, so what
            # it finally reports is rejected), then frees itself for other work.
            ctx.stop_heartbeats()
            give_up = ctx.deadline_ms / 1000 + 2
            while time.time() < give_up:
                time.sleep(0.2)
            raise TransientServiceError("hung attempt gave up")
        raise SimulatedHang(ctx.step)
    if mode == "crash":
        _crash(ctx)


def output_bytes(ctx: AgentContext) -> int:
    """The size the workflow input asks this step's output to reach (0: as it is)."""
    sizes = ctx.input.get("output_bytes") if isinstance(ctx.input, dict) else None
    if not isinstance(sizes, dict) or ctx.kind != "step":
        return 0
    size = sizes.get(ctx.step)
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


def with_output_bytes(fn: Callable[[AgentContext], Any]) -> Callable[[AgentContext], Any]:
    """`fn`, returning at least `output_bytes` bytes when the input asks for it."""

    @functools.wraps(fn)
    def agent(ctx: AgentContext) -> Any:
        result = fn(ctx)
        size = output_bytes(ctx)
        if size and isinstance(result, dict):
            return {**result, "padding": "x" * size}
        return result

    return agent


def with_callback(fn: Callable[[AgentContext], Any]) -> Callable[[AgentContext], Any]:
    """`fn`, or, for a step the input names in `callback`, a hand-off that waits for one."""

    @functools.wraps(fn)
    def agent(ctx: AgentContext) -> Any:
        steps = ctx.input.get("callback") if isinstance(ctx.input, dict) else None
        if ctx.kind == "step" and isinstance(steps, list) and ctx.step in steps:
            ctx.report_progress({"waiting_for": "callback", "task_token": ctx.task_token()})
            return Pending("handed to an outside system")
        return fn(ctx)

    return agent
