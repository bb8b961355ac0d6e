"""Signals in the fault simulator (issue 37.7).

Signallers send `sim_ping` into `sim_signal` workflows through the real `Signals.send`
(`shepherd_sim.signallers`): before a step waits, while it waits, around its deadline and
late, some twice with one signal id, some by a sender that stops before handing its signal
over, some to a workflow being cancelled, all under the store's faults. `check_signals` holds
on every seed: no accepted signal lost, each taken at most once and by the step whose output
it is, in order, a timed-out wait took none and was not beaten by a signal kept in time, the
counts agree. Each invariant is then shown to catch its bug put back, on a seed that is clean
without it (as in `test_sim_regressions.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus
from shepherd_sim import Faults, SimConfig, run_seed
from shepherd_sim.invariants import SignalCall, signal_problems
from shepherd_sim.sim import definitions

SIGNALS = SimConfig(workflow_types=("sim_signal",))


def test_signallers_send_in_every_way_and_every_signal_is_accounted_for() -> None:
    """Across seeds: signals taken at once and kept until a step waits, repeated ids, senders
    that stopped before handing over, refusals (a finished workflow, an unknown name), waits
    that timed out; no violation."""
    stats: dict[str, int] = {}
    for seed in range(25):
        result = run_seed(seed, Faults(), SIGNALS)
        assert result.violations == [], [str(v) for v in result.violations]
        for name, n in result.stats.items():
            stats[name] = stats.get(name, 0) + n
    for name in (
        "signals_ok",
        "signals_duplicate",
        "signals_stopped",
        "signals_refused",
        "signal_sent_twice",
    ):
        assert stats.get(name, 0) > 0, (name, stats)


def test_the_default_workload_rolls_signal_workflows_in_some_seeds() -> None:
    """`make sim` without pinned types: seeds that roll `signal_workload` run sim_signal too
    (and `check_signals` with them); a seed that rolls none runs as before."""
    rolled = []
    for seed in range(8):
        result = run_seed(seed, Faults(), SimConfig())
        assert result.violations == [], [str(v) for v in result.violations]
        if any(k.startswith("signals_") for k, n in result.stats.items() if n):
            rolled.append(seed)
    assert rolled, "no seed rolled a signal workload"


# ------------------------------------------------------------------ bugs put back


@contextlib.contextmanager
def _take_leaves_the_head() -> Iterator[None]:
    """A take that ends the step but never moves its queue's head (nor marks the signal):
    the next wait of the name takes the same signal again."""
    from shepherd.decisions import transitions as tx

    real = tx.take_signal
    tx.take_signal = lambda *args, **kwargs: []  # type: ignore[assignment]
    try:
        yield
    finally:
        tx.take_signal = real  # type: ignore[assignment]


@contextlib.contextmanager
def _timeout_never_takes() -> Iterator[None]:
    """A wait's deadline times it out without taking a signal kept before it (one whose
    sender stopped before handing it over, never looked at since): the timeout guarded by
    the queue as read, but no take first."""
    from shepherd.decisions import transitions as tx
    from shepherd.engine import signals
    from shepherd.keys import signal_queue_sk, signals_pk

    real = signals.time_out

    def time_out(scheduler: Any, state: Any, definition: Any, rec: Any) -> Any:
        spec = definition.by_name[rec.name].wait_for_signal
        queue = scheduler.ports.store.get(signals_pk(rec.workflow_id), signal_queue_sk(spec.name))
        seen = None if queue is None or "next" not in queue else int(queue["next"])
        now = scheduler.ports.clock.now_ms()
        error = tx.error_json(signals.TIMEOUT_ERROR, "no signal came in time")
        expires_at = scheduler.expires(now)
        write = tx.decide(
            rec, now, approved=False, decision=None, output=None, error=error, expires_at=expires_at
        )
        guard = tx.queue_as_read(rec.workflow_id, spec.name, seen, now, expires_at)
        return scheduler.executor.step_contended(state, rec, write, [guard])[0]

    signals.time_out = time_out  # type: ignore[assignment]
    try:
        yield
    finally:
        signals.time_out = real  # type: ignore[assignment]


@contextlib.contextmanager
def _timeout_consumes_the_head() -> Iterator[None]:
    """A timeout that also marks its queue's head taken (as if a take and a timeout were one
    write): the timed-out wait consumes a signal nobody gets."""
    from shepherd.decisions import transitions as tx
    from shepherd.engine import signals
    from shepherd.keys import signal_queue_sk, signals_pk

    real = signals.time_out

    def time_out(scheduler: Any, state: Any, definition: Any, rec: Any) -> Any:
        ended = real(scheduler, state, definition, rec)
        if ended is not None and ended.status is StepStatus.FAILED:
            spec = definition.by_name[rec.name].wait_for_signal
            queue = scheduler.ports.store.get(
                signals_pk(rec.workflow_id), signal_queue_sk(spec.name)
            )
            if queue is not None and int(queue.get("head", 0)) < int(queue.get("next", 0)):
                now = scheduler.ports.clock.now_ms()
                head = int(queue.get("head", 0))
                writes = tx.take_signal(rec.workflow_id, spec.name, head, rec, now, now)
                scheduler.executor.contended(writes)
        return ended

    signals.time_out = time_out  # type: ignore[assignment]
    try:
        yield
    finally:
        signals.time_out = real  # type: ignore[assignment]


@contextlib.contextmanager
def _timeout_unguarded_by_the_queue() -> Iterator[None]:
    """The timeout as it was before the simulator found the race (issue 37.7): it read the
    queue, found nothing kept, and wrote the step's end guarded by the step alone, so a signal
    kept between that read and that write (sent well before the deadline) was never taken."""
    from shepherd.decisions import transitions as tx
    from shepherd.engine import signals

    real = signals.time_out

    def time_out(scheduler: Any, state: Any, definition: Any, rec: Any) -> Any:
        taken = signals.take(scheduler, state, definition, rec, sent_by=rec.wake_at)
        if taken is not None:
            return taken
        now = scheduler.ports.clock.now_ms()
        error = tx.error_json(signals.TIMEOUT_ERROR, "no signal came in time")
        write = tx.decide(
            rec,
            now,
            approved=False,
            decision=None,
            output=None,
            error=error,
            expires_at=scheduler.expires(now),
        )
        return scheduler.executor.step(state, write)

    signals.time_out = time_out  # type: ignore[assignment]
    try:
        yield
    finally:
        signals.time_out = real  # type: ignore[assignment]


@dataclass(frozen=True)
class Broken:
    seed: int
    bug: Callable[[], contextlib.AbstractContextManager[None]]
    note: str


# Seeds found by running seeds 0-59 with each bug put back (the first that break, each clean
# on the engine as it is).
BROKEN = [
    Broken(0, _take_leaves_the_head, "listen_again took the signal listen took"),
    Broken(3, _timeout_never_takes, "a wait timed out over a signal kept for it in time"),
    Broken(44, _timeout_consumes_the_head, "a timed-out wait consumed a signal"),
    # Found by `--types sim_signal`, seeds 200-1699: 392, 566, 1469, 1659 (a signal kept
    # between the timeout's read and its write, sent 0.5 s before the deadline).
    Broken(392, _timeout_unguarded_by_the_queue, "a timeout landed over a signal kept in time"),
]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.bug.__name__.strip("_"))
def test_the_seed_is_clean_on_the_engine_as_it_is(case: Broken) -> None:
    result = run_seed(case.seed, Faults(), SIGNALS)
    assert result.violations == [], [str(v) for v in result.violations]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.bug.__name__.strip("_"))
def test_the_invariant_catches_the_bug_put_back(case: Broken) -> None:
    with case.bug():
        result = run_seed(case.seed, Faults(), SIGNALS)
    assert "signals" in {v.invariant for v in result.violations}, case.note


# ------------------------------------------------------------------ the checker by hand

WF = "wf1"


def _state(*steps: StepRecord) -> WorkflowState:
    wf = WorkflowRecord(WF, "sim_signal", "h", WorkflowStatus.RUNNING, "{}", "sim", "r", 1, 1)
    return WorkflowState(wf, {s.name: s for s in steps}, {})


def _step(name: str, status: StepStatus, **kw: Any) -> StepRecord:
    return StepRecord(workflow_id=WF, kind="step", name=name, status=status, attempt=1, **kw)


def _signal(n: int, sent_at: int, taken_by: str | None = None) -> tuple[str, dict[str, Any]]:
    item: dict[str, Any] = {
        "sk": f"Q#sim_ping#{n:010d}",
        "payload": f'{{"k":{n}}}',
        "sent_at": sent_at,
    }
    if taken_by:
        item["taken_by"] = taken_by
    return item["sk"], item


def _took(n: int) -> str:
    return f'{{"signal":"sim_ping","sequence":{n}}}'


def test_by_hand_a_lost_signal_a_double_take_and_a_timeout_over_a_kept_signal() -> None:
    definition = definitions()["sim_signal"]
    listen = _step("listen", StepStatus.SUCCEEDED, decision=_took(0), wake_at=100)
    again = _step("listen_again", StepStatus.SUCCEEDED, decision=_took(0), wake_at=200)
    kept = dict([_signal(0, 10, "listen")])
    problems = signal_problems(_state(listen, again), definition, kept, [])
    assert any("more than once" in p for p in problems), problems
    assert any("out of order" in p for p in problems), problems
    timed = _step("listen_again", StepStatus.FAILED, error='{"type":"States.Timeout"}', wake_at=200)
    kept = dict([_signal(0, 10, "listen"), _signal(1, 150)])
    problems = signal_problems(_state(listen, timed), definition, kept, [])
    assert any("timed out" in p for p in problems), problems
    # Kept after the timeout landed (or sent after the deadline): not a violation.
    landed = {"S#listen_again": 5, kept[f"Q#sim_ping#{1:010d}"]["sk"]: 9}
    assert signal_problems(_state(listen, timed), definition, kept, [], landed) == []
    call = SignalCall(1, 2, WF, "sim_ping", {"k": 7}, "s7", "ok", sequence=2)
    problems = signal_problems(_state(listen, timed), definition, kept, [call], landed)
    assert any("lost" in p for p in problems), problems


# --------------------------------------------- a cancel never waits on a callback (37.4)

CANCELS = SimConfig(workflow_types=("sim_flash", "order_fulfilment"), callback_share=0.6)


@contextlib.contextmanager
def _cancel_waits_for_callbacks() -> Iterator[None]:
    """The cancel's plan no longer fences an attempt waiting for its callback: the unwinding
    waits for the callback's answer or its timeout (as before issue 37.4)."""
    from shepherd.decisions import planner

    owner = next(
        c for c in vars(planner).values() if isinstance(c, type) and "_cancel_reaches" in vars(c)
    )
    real = owner._cancel_reaches

    def reaches(self: Any, rec: Any, spec: Any) -> Any:
        return [a for a in real(self, rec, spec) if type(a).__name__ != "EndAttempt"]

    owner._cancel_reaches = reaches
    try:
        yield
    finally:
        owner._cancel_reaches = real


def test_a_cancel_never_waits_for_a_callback_and_the_check_catches_it_put_back() -> None:
    """`check_cancel_never_waits`: seed 0 (cancels at 60 %, callbacks at 60 %) is clean, and
    with the fence taken out an attempt waits for its callback's timeout after the cancel."""
    from dataclasses import replace

    faults = replace(Faults(), cancel=0.6)
    clean = run_seed(0, faults, CANCELS)
    assert clean.violations == [], [str(v) for v in clean.violations]
    with _cancel_waits_for_callbacks():
        broken = run_seed(0, faults, CANCELS)
    assert "cancel_waits" in {v.invariant for v in broken.violations}
