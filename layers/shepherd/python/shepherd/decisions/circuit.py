"""A pool's circuit breaker as pure decisions: what its state becomes, and the writes.

State lives on the pool item (`pk = POOLS`, `sk = <pool>`): `circuit` (closed, open,
half_open), `circuit_since`, `circuit_mode` (auto, or an operator's forced open/closed),
`probes` (half-open claims left), `probe_ok` / `probe_failed` (half-open outcomes) and
`circuit_history` (the last 20 transitions). Outcomes over the window are counted in sharded,
slotted counter items, each shard a partition of its own (`CB#<pool>#<slot>#<shard>`, `CB`),
so no item and no partition is written by every attempt (docs/architecture.md, the circuit
breaker). Nothing here does I/O.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from shepherd.conditions import Cond, Eq, Ge, Item, Missing, Update, all_of
from shepherd.keys import POOLS_PK
from shepherd.pool_policy import CircuitBreaker

Circuit = Literal["closed", "open", "half_open"]
Mode = Literal["auto", "open", "closed"]
SLOTS_PER_WINDOW = 6  # a window is read as this many slots (the oldest may be partly outside)
# Counter partitions per slot: a pool ending 5,000 attempts a second writes each ~310 times a
# second, under a third of a partition's 1,000 WCU (at 8, 625: the scale model's peak seconds
# reached 0.87 of one); a window is SLOTS_PER_WINDOW x this keys (96), one BatchGetItem, read
# every sweep while closed (about 19 RRU a second for each guarded pool).
COUNTER_SHARDS = 16
HISTORY = 20  # transitions kept on the pool item


@dataclass(frozen=True)
class CircuitState:
    """A pool's breaker as its item records it (no item, or no `circuit`: closed since ever)."""

    circuit: Circuit = "closed"
    since: int | None = None
    mode: Mode = "auto"
    probes: int = 0
    probe_ok: int = 0
    probe_failed: int = 0
    history: tuple[dict[str, Any], ...] = ()
    operator_paused: bool = False  # its consumers stay stopped whatever the circuit does

    @classmethod
    def from_item(cls, item: Item | None) -> CircuitState:
        item = item or {}
        return cls(
            circuit=item.get("circuit", "closed"),
            since=item.get("circuit_since"),
            mode=item.get("circuit_mode", "auto"),
            probes=int(item.get("probes", 0)),
            probe_ok=int(item.get("probe_ok", 0)),
            probe_failed=int(item.get("probe_failed", 0)),
            history=tuple(item.get("circuit_history", ())),
            operator_paused=bool(item.get("paused", False)),
        )


@dataclass(frozen=True)
class Transition:
    to: Circuit
    why: str


def slot_ms(policy: CircuitBreaker) -> int:
    return max(1000, policy.window_seconds * 1000 // SLOTS_PER_WINDOW)


def window_slots(policy: CircuitBreaker, now: int, since: int | None) -> list[int]:
    """The counter slots the window ending `now` reads: the last SLOTS_PER_WINDOW, none that
    ended before the circuit last closed (`since`: its window starts again then)."""
    size = slot_ms(policy)
    last = now // size
    slots = range(last - SLOTS_PER_WINDOW + 1, last + 1)
    return [s for s in slots if since is None or (s + 1) * size > since]


def decide(
    state: CircuitState, policy: CircuitBreaker, ended: int, failed: int, now: int
) -> Transition | None:
    """What the breaker does now, given the window's counts (closed) or the probes' outcomes
    (half-open); an operator's forced mode wins."""
    if state.mode == "open":
        return None if state.circuit == "open" else Transition("open", "forced open")
    if state.mode == "closed":
        return None if state.circuit == "closed" else Transition("closed", "forced closed")
    if state.circuit == "closed":
        if ended >= policy.minimum_attempts and failed >= policy.failure_ratio * ended:
            return Transition("open", f"{failed} of {ended} attempts failed in the window")
        return None
    if state.circuit == "open":
        if now >= (state.since or 0) + policy.cooldown_seconds * 1000:
            return Transition("half_open", "cooldown over: probing")
        return None
    if state.probe_failed:
        return Transition("open", "a probe failed")
    if state.probe_ok >= policy.probe_attempts:
        return Transition("closed", f"{state.probe_ok} probes succeeded")
    cooldown_ms = policy.cooldown_seconds * 1000
    if state.probes == 0 and now >= (state.since or 0) + cooldown_ms:
        # Every probe taken, a cooldown passed, not all came back (a claim lost to a
        # duplicate, an attempt still running): probe again after another cooldown.
        return Transition("open", "probes did not all come back")
    return None


def _seen(state: CircuitState) -> Cond:
    """The write lands only on the state it was decided on (two sweeps cannot both act)."""
    if state.since is None:
        return Missing("circuit_since")
    return all_of(Eq("circuit", state.circuit), Eq("circuit_since", state.since))


def transition_write(
    pool: str, state: CircuitState, change: Transition, policy: CircuitBreaker, now: int
) -> tuple[str, str, Update, Cond]:
    """The one conditional write on the pool item that moves its breaker."""
    entry = {"at": now, "from": state.circuit, "to": change.to, "why": change.why}
    values: dict[str, Any] = {
        "circuit": change.to,
        "circuit_since": now,
        "probes": policy.probe_attempts if change.to == "half_open" else 0,
        "probe_ok": 0,
        "probe_failed": 0,
        "circuit_history": [*state.history, entry][-HISTORY:],
    }
    if change.to != "open":  # a task held while open gets a fresh dispatch grace now
        values["circuit_resumed_at"] = now
    return POOLS_PK, pool, Update(set=values), _seen(state)


def mode_write(pool: str, mode: Mode, by: str, now: int) -> tuple[str, str, Update, Cond | None]:
    """An operator forces the breaker open or closed, or gives it back (`auto`)."""
    return POOLS_PK, pool, Update(set={"circuit_mode": mode, "circuit_by": by}), None


def take_probe(pool: str, since: int) -> tuple[str, str, Update, Cond]:
    """A half-open claim takes one of the probes left (none left: the task is held)."""
    return (
        POOLS_PK,
        pool,
        Update(add={"probes": -1}),
        all_of(Eq("circuit", "half_open"), Eq("circuit_since", since), Ge("probes", 1)),
    )


def probe_outcome(pool: str, since: int, failed: bool) -> tuple[str, str, Update, Cond]:
    """A probe's outcome, counted on the pool item while it is still the same half-open."""
    return (
        POOLS_PK,
        pool,
        Update(add={"probe_failed" if failed else "probe_ok": 1}),
        all_of(Eq("circuit", "half_open"), Eq("circuit_since", since)),
    )
