"""Agent pools: pause and resume them, and read their state and backlog.

The table holds each pool's state (`pk = POOLS`, `sk = <pool>`): the truth the supervisor
reads once per sweep, so a task waiting for a paused pool is neither a lost message nor a
timeout. The `PoolControl` port is what stops the pool's agents from claiming: on AWS the
pool's SQS event source mapping is disabled (it costs nothing while paused and the messages
stay queued); the local stack's workers and the in-memory queue poll only enabled pools.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from shepherd.decisions import transitions as tx
from shepherd.engine.circuit import CircuitBreakers
from shepherd.engine.executor import Executor
from shepherd.errors import ShepherdError
from shepherd.keys import POOLS_PK
from shepherd.model import PoolState
from shepherd.pool_policy import PoolPolicy
from shepherd.ports import Backlog, Store, TaskQueue


class PoolNotFound(ShepherdError):
    def __init__(self, pool: str) -> None:
        super().__init__(f"no pool '{pool}' in this deployment")
        self.pool = pool


class NoCircuitBreaker(ShepherdError):
    def __init__(self, pool: str) -> None:
        super().__init__(f"pool '{pool}' has no circuit breaker (pool settings)")
        self.pool = pool


class PoolControl(Protocol):
    """Starts and stops a pool's consumers (the Lambda event source mapping on AWS)."""

    def set_enabled(self, pool: str, enabled: bool) -> None: ...


class NoPoolControl:
    """For a deployment without consumers to switch (tests of the table state alone)."""

    def set_enabled(self, pool: str, enabled: bool) -> None:
        return None


@dataclass(frozen=True)
class PoolView:
    state: PoolState
    backlog: Backlog | None
    policy: PoolPolicy = field(default_factory=PoolPolicy)


def pool_states(store: Store) -> dict[str, PoolState]:
    """Every pool the table records (a pool never paused has no item: it is enabled)."""
    return {item["sk"]: PoolState.from_item(item) for item in store.load(POOLS_PK)}


class Pools:
    def __init__(
        self,
        executor: Executor,
        queue: TaskQueue,
        control: PoolControl,
        clock: object,
        names: Sequence[str],
        *,
        policies: Mapping[str, PoolPolicy] | None = None,
        breakers: CircuitBreakers | None = None,
    ) -> None:
        self._executor = executor
        self._store = executor.store
        self._queue = queue
        self._control = control
        self._clock = clock
        self._names = list(names)
        self._policies = dict(policies or {})
        self._breakers = breakers

    def _known(self, pool: str) -> None:
        if pool not in self._names:
            raise PoolNotFound(pool)

    def list(self) -> list[PoolView]:
        states: Mapping[str, PoolState] = pool_states(self._store)
        return [
            PoolView(
                states.get(name, PoolState(name)),
                self._queue.backlog(name),
                self._policies.get(name, PoolPolicy()),
            )
            for name in self._names
        ]

    def get(self, pool: str) -> PoolView:
        self._known(pool)
        state = pool_states(self._store).get(pool, PoolState(pool))
        return PoolView(state, self._queue.backlog(pool), self._policies.get(pool, PoolPolicy()))

    def pause(self, pool: str, *, by: str) -> PoolView:
        """Record the pause (the supervisor's truth), then stop the consumers. Idempotent."""
        self._known(pool)
        now = self._clock.now_ms()  # type: ignore[attr-defined]
        self._executor.raw(tx.pool_paused(pool, now, by))
        self._control.set_enabled(pool, False)
        return self.get(pool)

    def resume(self, pool: str, *, by: str) -> PoolView:
        """Start the consumers, then record the resume: the backlog drains, and a queued task's
        dispatch grace starts again now (its wait was not a lost message). Idempotent."""
        self._known(pool)
        if self.get(pool).state.circuit != "open":  # an open circuit keeps its pool held
            self._control.set_enabled(pool, True)
        now = self._clock.now_ms()  # type: ignore[attr-defined]
        self._executor.raw(tx.pool_resumed(pool, now, by))
        return self.get(pool)

    def circuit(self, pool: str, action: str, *, by: str) -> PoolView:
        """An operator forces the pool's breaker `open` or `close`d, or gives it back
        (`auto`); applied at once (the breaker's next evaluation, run here)."""
        self._known(pool)
        if self._breakers is None or not self._breakers.guards(pool):
            raise NoCircuitBreaker(pool)
        modes = {"open": "open", "close": "closed", "auto": "auto"}
        if action not in modes:
            raise ValueError(f"circuit action must be open, close or auto, not '{action}'")
        self._breakers.force(pool, modes[action], by)  # type: ignore[arg-type]
        self._breakers.evaluate()
        return self.get(pool)


__all__ = ["POOLS_PK", "PoolControl", "PoolNotFound", "Pools", "pool_states"]
