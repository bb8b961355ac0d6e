"""One step of every live generator fiber, in a random order: how the protocol simulators
(`mapsim`, `childsim`) interleave reads and writes of concurrent processes."""

from __future__ import annotations

import random
from collections.abc import Generator
from typing import Any

Fiber = Generator[Any, None, None]


def step_all(fibers: list[Fiber], rng: random.Random) -> list[Fiber]:
    """Step each of `fibers` once, in an order `rng` shuffles; the ones not finished."""
    order = list(fibers)
    rng.shuffle(order)
    alive = []
    for fiber in order:
        try:
            next(fiber)
            alive.append(fiber)
        except StopIteration:
            pass
    return alive
