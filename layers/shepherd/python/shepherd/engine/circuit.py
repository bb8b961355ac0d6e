"""Each pool's circuit breaker: count attempts' outcomes, admit claims, move the circuit.

* `record` (an agent after an attempt ends; the supervisor after a timeout or a lost
  heartbeat): one `ADD` on a random shard of the current slot's counters; in half-open, the
  probe's outcome on the pool item too.
* `admit` (an agent before a claim): closed runs; open holds the task until the cooldown ends
  (its consumers are stopped, so only a batch received just before opening meets this);
  half-open takes a probe with one conditional write, or holds the task.
* `evaluate` (the supervisor, once per sweep): reads each breaker's window, decides
  (`decisions.circuit`), writes the transition (conditional on the state it read), and stops
  or starts the pool's consumers as a pause does.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping

from shepherd.clock import Clock
from shepherd.conditions import Update
from shepherd.decisions import circuit as cb
from shepherd.decisions import transitions as tx
from shepherd.engine.executor import Executor
from shepherd.errors import ShepherdError, StoreUnavailable
from shepherd.keys import POOLS_PK, circuit_counter_key
from shepherd.pool_policy import CircuitBreaker, PoolPolicy

logger = logging.getLogger("shepherd.circuit")

STATE_TTL_MS = 1000  # how long an agent process trusts a breaker state it read
OPEN_HOLD_S = 30  # a task met while open comes back after at most this (SQS: <= 900)
COUNTER_DAYS = 2  # counter items expire by TTL
SLOT_KEYS_KEPT = 4096  # (pool, slot) key sets a CircuitBreakers keeps before it starts again


class CircuitBreakers:
    """Every pool's breaker that its policy declares (none: nothing is counted or read)."""

    def __init__(
        self,
        executor: Executor,
        clock: Clock,
        rng: random.Random,
        policies: Mapping[str, PoolPolicy],
        control: object | None = None,
    ) -> None:
        self._executor = executor
        self._clock = clock
        self._rng = rng
        self._control = control
        self._policies: dict[str, CircuitBreaker] = {
            pool: policy.circuit_breaker
            for pool, policy in policies.items()
            if policy.circuit_breaker is not None
        }
        self._seen: dict[str, tuple[int, cb.CircuitState]] = {}
        self._lock = threading.Lock()
        # Each slot's counter keys (every shard's), made once: a window reads the same slots
        # sweep after sweep, and building 96 keys for every pool at every sweep was most of
        # the breakers' own cost (issue 36). Bounded by SLOT_KEYS_KEPT.
        self._slot_keys: dict[tuple[str, int], tuple[tuple[str, str], ...]] = {}

    def guards(self, pool: str) -> bool:
        return pool in self._policies

    def pools(self) -> list[str]:
        return sorted(self._policies)

    # --------------------------------------------------------------------- agents

    def state(self, pool: str, *, fresh: bool = False) -> cb.CircuitState:
        now = self._clock.now_ms()
        with self._lock:
            seen = self._seen.get(pool)
        if seen is not None and not fresh and now - seen[0] < STATE_TTL_MS:
            return seen[1]
        state = cb.CircuitState.from_item(self._executor.store.get(POOLS_PK, pool))
        with self._lock:
            self._seen[pool] = (now, state)
        return state

    def admit(self, pool: str) -> int:
        """0 if a task may be claimed now (half-open: it took a probe), else the seconds to
        hold it in its queue."""
        policy = self._policies.get(pool)
        if policy is None:
            return 0
        state = self.state(pool)
        if state.circuit == "closed":
            return 0
        now = self._clock.now_ms()
        if state.circuit == "open":
            left = (state.since or now) + policy.cooldown_seconds * 1000 - now
            return max(1, min(OPEN_HOLD_S, -(-left // 1000)))
        assert state.since is not None
        won, _ = self._executor.raw_or_current(tx.Write(*cb.take_probe(pool, state.since)))
        if won is None:  # every probe taken: wait for their outcome
            return min(OPEN_HOLD_S, max(1, policy.cooldown_seconds))
        return 0

    def record(self, pool: str, *, failed: bool) -> None:
        """Count one ended attempt (`failed`: with a retryable error). Best effort: a lost
        count only makes the breaker a little less sensitive, never loses work."""
        policy = self._policies.get(pool)
        if policy is None:
            return
        now = self._clock.now_ms()
        slot = now // cb.slot_ms(policy)
        with self._lock:
            shard = self._rng.randrange(cb.COUNTER_SHARDS)
        pk, sk = circuit_counter_key(pool, slot, shard)
        add = {"ended": 1, "failed": 1 if failed else 0}
        expires = now // 1000 + COUNTER_DAYS * 86_400
        try:
            self._executor.raw(tx.Write(pk, sk, Update(add=add, set={"expires_at": expires}), None))
            state = self.state(pool)  # half-open: every outcome is a probe's
            if state.circuit == "half_open" and state.since is not None:
                self._executor.raw(tx.Write(*cb.probe_outcome(pool, state.since, failed)))
        except (StoreUnavailable, ShepherdError):
            logger.warning("breaker count lost", extra={"pool": pool}, exc_info=True)

    # ----------------------------------------------------------------- supervisor

    def window(self, pool: str, state: cb.CircuitState, now: int) -> tuple[int, int]:
        """(ended, failed) over the pool's window since its circuit last closed."""
        policy = self._policies[pool]
        since = state.since if state.circuit == "closed" else None
        keys = [
            key for slot in cb.window_slots(policy, now, since) for key in self._keys(pool, slot)
        ]
        ended = failed = 0
        for start in range(0, len(keys), 100):
            for item in self._executor.store.get_many(keys[start : start + 100]):
                ended += int(item.get("ended", 0))
                failed += int(item.get("failed", 0))
        return ended, failed

    def _keys(self, pool: str, slot: int) -> tuple[tuple[str, str], ...]:
        """`circuit_counter_key` of every shard of `pool`'s `slot`, in shard order."""
        found = self._slot_keys.get((pool, slot))
        if found is None:
            if len(self._slot_keys) > SLOT_KEYS_KEPT:
                self._slot_keys.clear()
            found = tuple(circuit_counter_key(pool, slot, s) for s in range(cb.COUNTER_SHARDS))
            self._slot_keys[(pool, slot)] = found
        return found

    def evaluate(self) -> dict[str, str]:
        """Move every breaker that must move; the transitions made, by pool. A pool an
        operator paused keeps its consumers stopped whatever the circuit does."""
        moved: dict[str, str] = {}
        for pool, policy in self._policies.items():
            try:
                now = self._clock.now_ms()
                state = self.state(pool, fresh=True)
                ended, failed = (
                    self.window(pool, state, now) if state.circuit == "closed" else (0, 0)
                )
                change = cb.decide(state, policy, ended, failed, now)
                if change is None:
                    continue
                won, _ = self._executor.raw_or_current(
                    tx.Write(*cb.transition_write(pool, state, change, policy, now))
                )
                if won is None:
                    continue
                with self._lock:  # this process now knows the new state
                    self._seen[pool] = (now, cb.CircuitState.from_item(won))
                moved[pool] = change.to
                logger.warning(
                    "pool circuit moved",
                    extra={"pool": pool, "from": state.circuit, "to": change.to, "why": change.why},
                )
                self._switch(pool, change.to, state.operator_paused)
            except (StoreUnavailable, ShepherdError):
                logger.warning("breaker not evaluated", extra={"pool": pool}, exc_info=True)
        return moved

    def force(self, pool: str, mode: cb.Mode, by: str) -> None:
        """An operator's `open`, `close` (forced) or `auto`: recorded, then applied at once."""
        now = self._clock.now_ms()
        self._executor.raw(tx.Write(*cb.mode_write(pool, mode, by, now)))

    def _switch(self, pool: str, to: cb.Circuit, operator_paused: bool) -> None:
        set_enabled = getattr(self._control, "set_enabled", None)
        if set_enabled is None:
            return
        if to == "open":
            set_enabled(pool, False)
        elif not operator_paused:
            set_enabled(pool, True)
