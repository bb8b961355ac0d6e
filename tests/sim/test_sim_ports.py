"""The simulator's own machinery: the fault knobs, the lagging watch index, the fibers."""

from __future__ import annotations

import pytest
from shepherd.clock import ManualClock
from shepherd.conditions import Update
from shepherd_sim import FAULT_KINDS, Faults
from shepherd_sim.fibers import Fiber, FiberKilled
from shepherd_sim.sim import ObservedStore


def test_faults_parse_on_top_of_the_defaults_or_from_none() -> None:
    assert Faults.parse("") == Faults()
    assert Faults.parse("dup=0.5").dup == 0.5
    assert Faults.parse("dup=0.5").lose == Faults().lose
    only = Faults.parse("none,lose=0.2")
    assert only.lose == 0.2 and only.dup == 0 and only.cancel == 0
    assert Faults.parse(Faults().describe()) == Faults()
    assert set(Faults().describe().replace("=", ",").split(",")[::2]) == set(FAULT_KINDS)
    for bad in ("dup", "nope=0.1", "dup=x", "dup=2"):
        with pytest.raises(ValueError, match=r"dup|nope|probability"):
            Faults.parse(bad)


def test_the_lagging_index_shows_the_due_at_of_that_moment() -> None:
    clock = ManualClock(1_000_000)
    store = ObservedStore(clock)
    store.create([{"pk": "WF#a", "sk": "#WF", "watch_shard": "W#0", "due_at": 1_005_000}])
    clock.advance(2)
    store.update("WF#a", "#WF", Update(set={"due_at": 1_009_000}), None)
    clock.advance(2)
    store.update("WF#a", "#WF", Update(remove=("watch_shard", "due_at")), None)
    now = clock.now_ms()
    assert store.query_due("W#0", 2_000_000, 10, None).entries == []
    ago = [e.due_at for e in store.lagged_due("W#0", 2_000_000, 10, None, now - 1000).entries]
    assert ago == [1_009_000]
    first = store.lagged_due("W#0", 2_000_000, 10, None, now - 3000).entries
    assert [e.due_at for e in first] == [1_005_000]
    assert store.lagged_due("W#0", 1_004_999, 10, None, now - 3000).entries == []
    assert store.lagged_due("W#1", 2_000_000, 10, None, now - 3000).entries == []


def test_fibers_run_one_at_a_time_and_can_be_killed() -> None:
    log: list[str] = []
    holder: dict[str, Fiber] = {}

    def body() -> None:
        log.append("start")
        holder["f"].yield_out()
        log.append("resumed")
        holder["f"].yield_out()
        log.append("never")

    fiber = Fiber("t", body)
    holder["f"] = fiber
    fiber.switch_in()
    assert log == ["start"] and not fiber.finished
    fiber.switch_in()
    assert log == ["start", "resumed"]
    fiber.kill()
    assert fiber.finished and isinstance(fiber.error, FiberKilled)
    assert log == ["start", "resumed"]


def test_the_payload_bucket_is_simulated_with_its_faults_and_every_reference_checked() -> None:
    from shepherd.payloads import ref_of
    from shepherd_sim import Simulation
    from shepherd_sim.invariants import check_payloads_resolve

    faults = Faults.parse("payload_put=0.2,payload_get=0.2,payload_slow=0.2")
    sim = Simulation(7, faults)
    result = sim.run()
    assert result.violations == []
    counts = result.faults
    assert counts["payload_put"] > 0 and counts["payload_get"] > 0
    record = sim.record()
    referenced = [
        ref_of(item.get(name))
        for item in record.items
        for name in ("input", "output", "details")
        if isinstance(item.get(name), str) and ref_of(item.get(name)) is not None
    ]
    assert referenced, "the simulator keeps payloads in its bucket"
    assert check_payloads_resolve(record) == []
    # A reference whose object is gone is a violation, never a silent null.
    gone = referenced[0]
    assert gone is not None
    del record.payloads[gone.key]
    (violation,) = check_payloads_resolve(record)
    assert violation.invariant == "payload" and gone.key in violation.message
