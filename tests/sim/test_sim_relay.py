"""The simulated stream and event relay: every event a write announces reaches the bus at
least once, through the production path (the mapping's filters, the change read back from its
stream record, `events_of`), whatever the relay suffers; and the checks catch a relay that
loses, invents or reorders events."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import shepherd_sim.relay as relay_module
from shepherd_sim import Faults, SimResult, run_seed
from shepherd_sim.relay import Lane, Relay

SEEDS = range(40)
# Only the relay's faults (and the operator and cancels, for pauses and unwinding): every
# violation below is the relay's doing.
RELAY_ONLY = Faults.parse("none,relay_delay=0.2,relay_crash=0.3,relay_fail=0.05,cancel=0.3")


def kinds(results: list[SimResult]) -> Counter[str]:
    return Counter(v.invariant for r in results for v in r.violations)


def run_all(faults: Faults, seeds: range = SEEDS) -> list[SimResult]:
    return [run_seed(seed, faults) for seed in seeds]


def stats(results: list[SimResult]) -> Counter[str]:
    total: Counter[str] = Counter()
    for r in results:
        total.update(r.stats)
    return total


def test_every_announced_event_is_delivered_through_crashes_and_failures() -> None:
    results = run_all(RELAY_ONLY)
    assert kinds(results) == Counter()
    total = stats(results)
    assert total["events_announced"] > 200
    assert total["events_missing"] == 0
    assert total["events_delivered_again"] > 0  # crashes before a checkpoint: duplicates
    assert total["relay_records_filtered_out"] > 0  # claims and heartbeats never reach it
    faults: Counter[str] = Counter()
    for r in results:
        faults.update(r.faults)
    assert faults["relay_delay"] and faults["relay_crash"] and faults["relay_fail"], faults


def test_records_that_exhaust_their_retries_are_replayed_from_the_on_failure_queue() -> None:
    results = run_all(Faults.parse("none,relay_fail=0.8"), range(10))
    assert kinds(results) == Counter()
    total = stats(results)
    assert total["events_replayed_from_the_on_failure_queue"] > 0
    assert total["events_missing"] == 0


@pytest.fixture
def lossy_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The on-call operator never replays the on-failure queue."""

    def forget(self: Relay) -> None:
        self.replays_pending -= 1
        self.failed = []

    monkeypatch.setattr(Relay, "replay", forget)


@pytest.mark.usefixtures("lossy_replay")
def test_a_relay_that_drops_what_it_could_not_publish_is_caught() -> None:
    results = run_all(Faults.parse("none,relay_fail=0.8"), range(10))
    found = kinds(results)
    assert found["events_delivered"] > 0, found
    missing = [r for r in results if r.stats["events_missing"]]
    assert missing and all(r.violations for r in missing)


def test_a_relay_that_checkpoints_a_crashed_batch_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bug the checkpoint exists for: moving past a batch whose invocation died."""

    def skip(self: Relay, lane: Lane, batch: list[Any], size: int) -> None:
        self._done(lane, len(batch))

    monkeypatch.setattr(Relay, "_failed", skip)
    found = kinds(run_all(Faults.parse("none,relay_crash=0.5")))
    assert found["events_delivered"] > 0, found


def test_filters_on_the_relay_s_path_that_drop_an_announcing_change_are_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The relay applies the mapping's filters: a filter that drops finished compensations
    (a plausible slip: `SUCCEEDED` in the anything-but list) loses StepCompensated, and the
    ApprovalAnswered of an approval (its step's SUCCEEDED write)."""
    filters = list(relay_module.STREAM_FILTERS)
    steps = filters[1]["dynamodb"]["NewImage"]
    narrowed = {**steps, "status": {"S": [{"anything-but": ["RUNNING", "WAITING", "SUCCEEDED"]}]}}
    filters[1] = {**filters[1], "dynamodb": {"NewImage": narrowed}}
    monkeypatch.setattr(relay_module, "STREAM_FILTERS", tuple(filters))
    results = run_all(Faults.none(), range(20))
    missing = [v for r in results for v in r.violations if v.invariant == "events_delivered"]
    assert any("StepCompensated" in v.message for v in missing), missing
    lost = ("StepCompensated", "ApprovalAnswered")
    assert all(any(t in v.message for t in lost) for v in missing), missing


def test_a_relay_whose_ids_are_not_deterministic_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A duplicate must carry its original's id, or a subscriber cannot drop it."""
    real = relay_module.events_of
    calls = iter(range(1_000_000))

    def fresh_ids(change: Any) -> Any:
        events = real(change)
        for event in events:
            event.detail["event_id"] = f"{next(calls):032d}"
        return events

    monkeypatch.setattr(relay_module, "events_of", fresh_ids)
    found = kinds(run_all(Faults.parse("none,relay_crash=0.3"), range(10)))
    assert found["events_real"] > 0, found


def test_a_relay_that_publishes_out_of_order_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """One lane for all, newest record first: a workflow's events overtake each other."""
    real = Relay.poll

    def newest_first(self: Relay, lane: Lane) -> None:
        pending = lane.records[lane.checkpoint :]
        lane.records[lane.checkpoint :] = pending[::-1]
        real(self, lane)

    monkeypatch.setattr(Relay, "poll", newest_first)
    found = kinds(run_all(Faults.none(), range(10)))
    assert found["events_ordered"] > 0, found


def _pause_resume_pause() -> SimResult:
    """An operator pauses, resumes and pauses a workflow again within one millisecond."""
    from shepherd_sim.sim import Simulation

    sim = Simulation(7, Faults.none(), auto=False)
    wf = sim.start_workflow("order_fulfilment")
    assert wf is not None
    assert [sim.operator_call(a, wf) for a in ("pause", "resume", "pause")] == ["ok"] * 3
    sim.drain()
    return sim.result()


def test_pauses_in_one_millisecond_keep_their_own_event_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the state machine: the moment of a pause alone made two pauses one event_id.
    With that id put back, the same run shows the violation."""
    from shepherd import changes

    result = _pause_resume_pause()
    assert not result.violations, result.violations
    real = changes._workflow_event

    def moment_only(detail_type: str, new: Any, sequence: str, *unique: object) -> Any:
        if detail_type in ("WorkflowPaused", "WorkflowResumed"):
            unique = unique[:1]
        return real(detail_type, new, sequence, *unique)

    monkeypatch.setattr(changes, "_workflow_event", moment_only)
    broken = _pause_resume_pause()
    assert {v.invariant for v in broken.violations} == {"events_real"}, broken.violations
