"""Signallers (issue 37.7): who sends signals into `sim_signal` workflows.

Every time a `sim_signal` workflow is created (seen on the table's writes as they land), its
signaller plans 0-4 signals of `sim_ping` (and now and then one of a name no step waits for):
early (before its first WaitForSignal step rests, so it is kept), while it waits, around a
wait's deadline (racing the supervisor's timeout), or late (after both waits ended, or the
workflow did). Some carry a `signal_id`, and some of those are sent twice (a retry, or a
double click), some a moment apart, some at once; some senders stop right after keeping their
signal, before handing it over (`signal_crash`: the supervisor must hand it over, at the
step's next look or at its deadline). Every send is a fiber through the real
`Signals.send` of an engine of its own, each store call a round trip away, so store faults,
slow calls, sweeps and cancels interleave with it; a send that failed (a throttled read, a
timeout after its write) is sent again a second later with the same signal id, up to three
times. What each call was told is recorded for `invariants.check_signals`.

The workload is added by its own roll (`signal_workload`, once per seed, only when no
workflow types are pinned) and every draw comes from its own streams (`signal:{seed}`), so a
seed that rolls no signal workload runs exactly as it did before signals existed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from shepherd.changes import Change
from shepherd.engine.signals import SignalReceipt, Signals
from shepherd.errors import (
    InvalidTransition,
    SignalIdConflict,
    SignalUnknown,
    TooManySignals,
    WorkflowNotFound,
)
from shepherd.keys import WF_SK

from shepherd_sim.fibers import current
from shepherd_sim.invariants import SignalCall
from shepherd_sim.ports import FaultyStore, SimHooks

SIGNAL_TYPE = "sim_signal"
SIGNAL_NAME = "sim_ping"
UNKNOWN_NAME = "sim_nobody"  # no step waits for it: refused (SignalUnknown), nothing kept
RETRIES = 3
ROUND_TRIPS = (0.005, 0.02, 0.08, 0.3)
REFUSED = (InvalidTransition, SignalIdConflict, SignalUnknown, TooManySignals, WorkflowNotFound)


class SenderStopped(Exception):
    """The sender's Lambda stopped after keeping its signal, before handing it over."""


class Town(SimHooks, Protocol):
    """What the signallers ask of the simulation (besides what the faulty ports ask): its
    clock, event queue and fibers, the roll of a fault, and where calls are recorded. A
    protocol, so this module imports nothing of `shepherd_sim.sim` (which imports it)."""

    stats: Counter[str]
    signal_calls: list[SignalCall]

    @property
    def signallers(self) -> Signallers: ...
    @property
    def signals_api(self) -> Signals: ...
    def schedule(self, at: int, kind: str, data: Any = None) -> None: ...
    def spawn(self, body: Callable[[], None], label: str = "") -> None: ...
    def acting(self, label: str) -> AbstractContextManager[None]: ...
    def client_calls(self, delta: int) -> None: ...
    def roll(self, kind: str) -> bool: ...


class SignallerStore(FaultyStore):
    """The store as a signaller's request sees it: every call a round trip away (drawn from
    the signallers' own stream), then the faults every role meets."""

    sim: Town

    def _before(self, op: str, pk: str | None, keys: Sequence[tuple[str, str]] = ()) -> None:
        sim = self.sim
        if current() is not None:
            sent = sim.now()
            sim.sleep(sim.signallers.rng.choice(ROUND_TRIPS))
            for key in keys:
                sim.write_latency[key] = max(sim.write_latency.get(key, 0), sim.now() - sent)
        super()._before(op, pk, keys)


@dataclass(frozen=True)
class Send:
    """One signal a signaller will send."""

    workflow_id: str
    name: str
    payload: Any
    signal_id: str | None
    tries: int = 0


class _Stopping(Signals):
    """`Signals` whose sender stops after keeping its signal, before the hand-over: the
    sequence it kept is remembered for the record, then the call dies."""

    kept: int | None = None

    def _keep(self, *args: Any, **kwargs: Any) -> int:
        self.kept = super()._keep(*args, **kwargs)
        return self.kept

    def _hand_over(self, workflow_id: str, name: str) -> str | None:
        raise SenderStopped(name)


class Signallers:
    """The senders of one simulation's signals."""

    def __init__(self, sim: Town, seed: int) -> None:
        self.sim = sim
        self.rng = random.Random(f"signal:{seed}")
        self.planned: set[str] = set()

    def changed(self, change: Change) -> None:
        """A write landed: a `sim_signal` workflow just created gets its signals planned."""
        new = change.new or {}
        if change.old is not None or new.get("sk") != WF_SK:
            return
        if new.get("wf_type") != SIGNAL_TYPE:
            return
        wf_id = str(new["pk"])[3:]
        if wf_id in self.planned:
            return
        self.planned.add(wf_id)
        self.plan(wf_id, int(new["created_at"]))

    def plan(self, wf_id: str, created: int) -> None:
        """When, what and how often (drawn from the signallers' own stream). `listen` waits
        3 s once `request` (about 0-1 s) is done; `listen_again` 2 s after it."""
        rng = self.rng
        for i in range(rng.choice((0, 1, 2, 2, 3, 4))):
            r = rng.random()
            if r < 0.25:
                when = created + rng.randint(0, 600)  # early: kept until a step waits
            elif r < 0.6:
                when = created + rng.randint(600, 3500)  # while `listen` waits
            elif r < 0.85:
                when = created + rng.randint(3000, 7500)  # around the deadlines
            else:
                when = created + rng.randint(7500, 15_000)  # late
            name = UNKNOWN_NAME if rng.random() < 0.05 else SIGNAL_NAME
            signal_id = f"s{i}" if rng.random() < 0.6 else None
            send = Send(wf_id, name, {"k": i}, signal_id)
            self.later(when, send)
            if signal_id is not None and rng.random() < 0.25:
                self.sim.stats["signal_sent_twice"] += 1
                self.later(when + rng.choice((0, rng.randint(1, 50), rng.randint(500, 3000))), send)

    def later(self, at: int, send: Send) -> None:
        self.sim.client_calls(+1)
        self.sim.schedule(max(self.sim.now() + 1, at), "signal", send)

    def on_signal(self, send: Send) -> None:
        def body() -> None:
            self.sim.client_calls(-1)
            self.send(send)

        self.sim.spawn(body, "signal")

    def send(self, send: Send) -> SignalCall:
        """One signal through the signallers' `Signals.send`, recorded as it came back."""
        sim = self.sim
        stops = sim.roll("signal_crash")
        api = sim.signals_api
        stopping = None
        if stops:
            api = stopping = _Stopping(api.scheduler)
            sim.fault("signal_crash", send.workflow_id, "the sender stops after keeping it")
        started = sim.now()
        receipt: SignalReceipt | None = None
        sequence = None
        kept_at_stop = None
        try:
            with sim.acting("signal"):
                receipt = api.send(
                    send.workflow_id,
                    send.name,
                    send.payload,
                    principal="sim",
                    signal_id=send.signal_id,
                )
            outcome = "duplicate" if receipt.duplicate else "ok"
            sequence = receipt.sequence
        except SenderStopped:
            outcome = "stopped"
            assert stopping is not None
            kept_at_stop = stopping.kept
        except REFUSED as exc:
            outcome = f"refused:{type(exc).__name__}"
        except Exception as exc:
            outcome = f"error:{type(exc).__name__}"
        call = SignalCall(
            started=started,
            ended=sim.now(),
            workflow_id=send.workflow_id,
            name=send.name,
            payload=send.payload,
            signal_id=send.signal_id,
            outcome=outcome,
            sequence=sequence,
            taken_by=receipt.taken_by if receipt is not None else None,
            kept_at_stop=kept_at_stop,
        )
        sim.signal_calls.append(call)
        sim.stats[f"signals_{outcome.split(':')[0]}"] += 1
        sim.trace(
            send.workflow_id,
            f"signal  {send.name} {send.payload} id={send.signal_id} -> {outcome}"
            + (f" (#{sequence}, taken by {call.taken_by})" if sequence is not None else ""),
        )
        if outcome.startswith("error") and send.tries < RETRIES:
            retry = Send(send.workflow_id, send.name, send.payload, send.signal_id, send.tries + 1)
            self.later(sim.now() + 1000, retry)
        return call
