"""The scale model's store: DynamoDB's units, partition budgets, throttling as the SDK sees
it, index propagation, and the subset's scaling of shared partitions."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from shepherd.conditions import Eq, Update
from shepherd.errors import ConditionFailed, StoreUnavailable
from shepherd_bench.scale.capacity import MIN_SPAN_S, WRITE_LIMIT, Capacity
from shepherd_bench.scale.kernel import Invocation, Kernel
from shepherd_bench.scale.store import PartitionedStore

START = 1_767_225_600_000


def _store(shared_scale: float = 1.0) -> tuple[Kernel, PartitionedStore]:
    kernel = Kernel(START, seed=7)
    return kernel, PartitionedStore(kernel, Capacity(shared_scale=shared_scale))


def _in_task(kernel: Kernel, body: Callable[[], Any]) -> dict[str, Any]:
    """Run `body` as a task (its requests take simulated time); what it returned or raised."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = body()
        except Exception as exc:
            box["error"] = exc
        box["ended"] = kernel.now

    kernel.spawn(run, Invocation("test", kernel.now))
    kernel.run(kernel.now + 600_000)
    return box


def _partition(store: PartitionedStore, index: str, key: str) -> Any:
    return store.capacity.partitions[(index, key)]


def test_a_partition_takes_its_limit_in_a_second_and_throttles_the_next_request() -> None:
    capacity = Capacity()
    part = capacity.partition("table", "WF#a")
    assert capacity.admit(START, [(part, WRITE_LIMIT - 1)], [])
    assert capacity.admit(START + 999, [(part, 1.0)], [])  # exactly at the limit
    assert not capacity.admit(START + 999, [(part, 1.0)], [])  # over it: rejected whole
    assert part.wru == WRITE_LIMIT  # the rejected request consumed nothing
    assert part.throttled == 1
    assert capacity.admit(START + 1000, [(part, 1.0)], [])  # the next second has room
    assert capacity.hottest == 1.0


def test_a_throttled_index_partition_throttles_the_base_write() -> None:
    capacity = Capacity()
    base, index = capacity.partition("table", "WF#a"), capacity.partition("watch", "W#0")
    assert capacity.admit(START, [(index, WRITE_LIMIT)], [])
    assert not capacity.admit(START, [(base, 1.0), (index, 1.0)], [])
    assert base.wru == 0


def test_the_sdk_retries_a_throttled_write_five_times_in_simulated_time_then_gives_up() -> None:
    kernel, store = _store(shared_scale=32)  # POOLS is shared: its window is 32 s long
    part = store.capacity.partition("table", "POOLS")
    part.first = START // 1000 - 31  # written since a whole window before: its span is 32 s
    assert store.capacity.admit(kernel.now, [(part, WRITE_LIMIT)], [])
    box = _in_task(kernel, lambda: store.update("POOLS", "p", Update(set={"x": 1}), None))
    assert isinstance(box["error"], StoreUnavailable)
    assert box["error"].throttled
    assert store.stats.throttled_attempts["UpdateItem"] == 5
    assert store.stats.unavailable["UpdateItem"] == 1
    # four backoffs of rand(0, 1) * 2^i s (at most 15 s) and five requests' latencies
    assert 0 < box["ended"] - START < 16_000
    assert store.peek("POOLS") == []  # nothing was written


def test_a_write_throttled_once_lands_on_the_retry_in_the_next_second() -> None:
    kernel, store = _store()
    part = store.capacity.partition("table", "WF#a")
    store.capacity.admit(kernel.now, [(part, WRITE_LIMIT)], [])
    box = _in_task(kernel, lambda: store.update("WF#a", "#WF", Update(set={"x": 1}), None))
    assert box["value"]["x"] == 1
    assert 1 <= store.stats.throttled_attempts["UpdateItem"] <= 4
    assert box["ended"] >= START + 1000


def _workflow(due: int, shard: str = "W#3") -> dict[str, Any]:
    return {"pk": "WF#a", "sk": "#WF", "status": "RUNNING", "watch_shard": shard, "due_at": due}


def test_index_writes_cost_one_to_add_or_remove_an_entry_and_two_to_change_its_key() -> None:
    kernel, store = _store()
    watch = ("watch", "W#3")
    _in_task(kernel, lambda: store.put_new(_workflow(START + 5000)))
    assert _partition(store, *watch).total_wru == 1  # an entry added
    assert _partition(store, "table", "WF#a").total_wru == 1
    _in_task(
        kernel, lambda: store.update("WF#a", "#WF", Update(set={"due_at": START + 9000}), None)
    )
    assert _partition(store, *watch).total_wru == 1 + 2  # its key changed: delete + put
    _in_task(kernel, lambda: store.update("WF#a", "#WF", Update(set={"status": "DONE"}), None))
    assert _partition(store, *watch).total_wru == 3  # keys only: a non-key change costs none
    _in_task(
        kernel, lambda: store.update("WF#a", "#WF", Update(remove=("watch_shard", "due_at")), None)
    )
    assert _partition(store, *watch).total_wru == 3 + 1  # removed
    assert store.stats.wru_index == 4
    assert store.stats.wru_table == 4


def test_a_key_moving_to_another_index_partition_costs_one_in_each() -> None:
    kernel, store = _store()
    _in_task(kernel, lambda: store.put_new(_workflow(START, "W#1")))
    _in_task(kernel, lambda: store.update("WF#a", "#WF", Update(set={"watch_shard": "W#2"}), None))
    assert _partition(store, "watch", "W#1").total_wru == 1 + 1
    assert _partition(store, "watch", "W#2").total_wru == 1


def test_a_lost_condition_costs_the_existing_items_size_and_writes_nothing() -> None:
    kernel, store = _store()
    _in_task(kernel, lambda: store.put_new({"pk": "WF#a", "sk": "S#x", "blob": "y" * 3000}))
    box = _in_task(
        kernel, lambda: store.update("WF#a", "S#x", Update(set={"z": 1}), Eq("blob", "n"))
    )
    error = box["error"]
    assert isinstance(error, ConditionFailed)
    assert error.current is not None
    assert error.current["blob"] == "y" * 3000
    assert _partition(store, "table", "WF#a").total_wru == 3 + 3  # the put, then 3 KB again
    assert "z" not in store.peek("WF#a")[0]


def test_reads_round_up_to_four_kb_and_a_batch_read_per_item() -> None:
    kernel, store = _store()
    for sk in ("#WF", "S#a", "S#b"):
        item = {"pk": "WF#a", "sk": sk, "v": "x" * 1500}
        _in_task(kernel, partial(store.put_new, item))
    _in_task(kernel, lambda: store.load("WF#a"))
    assert store.stats.rru == 2  # ~4.5 KB in one query: two units
    box = _in_task(
        kernel, lambda: store.get_many([("WF#a", "#WF"), ("WF#a", "S#a"), ("WF#a", "S#z")])
    )
    assert [i["sk"] for i in box["value"]] == ["#WF", "S#a"]
    assert store.stats.rru == 2 + 3  # each key its own 4 KB, a missing one too


def test_the_watch_index_sees_a_write_after_its_propagation_delay() -> None:
    kernel, store = _store()
    _in_task(kernel, lambda: store.put_new(_workflow(START)))
    before = _in_task(kernel, lambda: store.query_due("W#3", START + 10_000, 100, None))["value"]
    kernel.run(kernel.now + 10_000)
    after = _in_task(kernel, lambda: store.query_due("W#3", START + 10_000, 100, None))["value"]
    assert [e.workflow_id for e in after.entries] == ["a"]
    # A query in the same instant as the write does not see it yet (median delay 100 ms).
    assert before.entries == [] or before.entries[0].workflow_id == "a"


def test_a_shared_partition_keeps_its_budget_over_one_over_f_seconds() -> None:
    capacity = Capacity(shared_scale=32)
    shared, own = capacity.partition("table", "POOLS"), capacity.partition("table", "WF#a")
    assert (shared.scale, own.scale) == (32, 1)
    assert capacity.partition("by_owner", "OWNER#c").scale == 32
    assert capacity.partition("watch", "W#0").scale == 1
    # 1,000 units of the subset's requests over 32 s are the whole system's in one second.
    for second in range(32):
        assert capacity.admit(START + second * 1000, [(shared, WRITE_LIMIT / 32)], [])
    assert not capacity.admit(START + 31_999, [(shared, 1.0)], [])
    assert capacity.admit(START + 32_000, [(shared, 1.0)], [])
    assert shared.peak == pytest.approx(1.0)


def test_a_shared_partitions_rate_counts_from_its_first_request_after_min_span_seconds() -> None:
    # Its window reaches back to its first request, not before: its units since then, over
    # that span, at full size; a span under MIN_SPAN_S says no rate (no peak), and counts
    # its units over MIN_SPAN_S.
    capacity = Capacity(shared_scale=32)
    shared, own = capacity.partition("table", "POOLS"), capacity.partition("table", "WF#a")
    assert capacity.admit(START, [(shared, 100.0), (own, 100.0)], [])
    assert shared.peak == 0.0  # 1 s of its requests: no rate yet
    assert capacity.hottest == pytest.approx(0.1)
    for second in range(1, MIN_SPAN_S):
        assert capacity.admit(START + second * 1000, [(shared, 10.0)], [])
    # 190 units over 10 s are the whole system's 190 x 32 / 10 = 608 a second.
    assert shared.peak == pytest.approx(0.608)
    assert capacity.hottest_key == ("table", "POOLS")


def test_a_short_lived_shared_key_reads_its_rate_over_its_life() -> None:
    """Issue 41.1: a breaker's counter slot lives 10 s; at 1 group of 128 the subset writes it
    f of the whole system's rate. Over a 128 s window its peak read 10 / 128 of its rate (a
    breaker 5x over a partition printed 0.0); over its life it reads its rate."""
    capacity = Capacity(shared_scale=128)
    slot = capacity.partition("table", "CB#checks#176722560")
    for second in range(10):  # the whole system's 40 x 128 = 5,120 WCU a second
        for _ in range(10):
            capacity.admit(START + second * 1000, [(slot, 4.0)], [])
    assert slot.peak_offered == pytest.approx(5.12)
    assert slot.throttled > 0
    assert capacity.hot_keys(1)[0]["pattern"] == "CB#checks#<n>"


def test_a_measured_factor_replaces_one_over_f() -> None:
    capacity = Capacity(shared_scale=32, overrides={("by_owner", "OWNER#c#0"): 1.0})
    assert capacity.partition("by_owner", "OWNER#c#0").scale == 1.0
    assert capacity.partition("by_owner", "OWNER#c#1").scale == 32
