"""The scale model's mechanics around the store: simulated time for engine code, queues and
event source mappings, the subset, and a small run of the whole model."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from shepherd.engine.scheduler import derived_id
from shepherd.keys import rate_pk, watch_shard
from shepherd.model import WorkflowRecord
from shepherd.topology import TABLE
from shepherd_bench.scale import figures, report
from shepherd_bench.scale.kernel import Invocation, Kernel, SimClock, TaskLock
from shepherd_bench.scale.lambdas import Account, EventSource, Function, SimQueue
from shepherd_bench.scale.load import OWNER, group_of
from shepherd_bench.scale.model import DEFAULT_DEPLOYMENT, DESIGN_DEPLOYMENT, Run, RunConfig
from shepherd_bench.scale.whatif import engine_shards_list, sharded_list_index
from shepherd_infra.deployments import DEFAULT, DESIGN_LOAD

START = 1_767_225_600_000
# 1 of 256 groups, a tenth of its open workflows, half a simulated minute: a few seconds.
SMALL = RunConfig("test", minutes=0.5, groups=256, open_fraction=0.1, tick_concurrency=256)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_a_sleep_moves_simulated_time_for_the_sleeping_task_only() -> None:
    kernel = Kernel(START, seed=1)
    clock = SimClock(kernel)
    seen: list[tuple[str, int]] = []

    def sleeper(name: str, seconds: float) -> None:
        clock.sleep(seconds)
        seen.append((name, clock.now_ms() - START))

    kernel.spawn(lambda: sleeper("long", 2.0), Invocation("a", kernel.now))
    kernel.spawn(lambda: sleeper("short", 0.5), Invocation("b", kernel.now))
    kernel.run(START + 10_000)
    assert seen == [("short", 500), ("long", 2000)]


def test_a_task_lock_held_across_a_request_parks_the_others_instead_of_the_loop() -> None:
    # The supervisor reads a queue's backlog under its lock (a request: simulated time); a
    # threading.Lock there blocked the one OS thread every task runs on (a stalled pool's
    # run hung). Tasks wait for a TaskLock by parking, and get it in turn.
    kernel = Kernel(START, seed=1)
    lock = TaskLock(kernel)
    seen: list[tuple[str, int]] = []

    def reader(name: str) -> None:
        with lock:
            kernel.sleep(0.5)
            seen.append((name, int(kernel.now) - START))

    for name in ("a", "b", "c"):
        kernel.spawn(lambda name=name: reader(name), Invocation(name, kernel.now))  # type: ignore[misc]
    kernel.run(START + 10_000)
    assert seen == [("a", 500), ("b", 1000), ("c", 1500)]
    assert not lock.held


def test_the_models_supervisor_waits_on_a_task_lock() -> None:
    run = Run(replace(SMALL, minutes=0.1, open_fraction=0.01))
    assert isinstance(run._supervisor()._backlog_lock, TaskLock)


def test_an_invocation_ends_at_its_timeout_and_gives_its_concurrency_back() -> None:
    kernel = Kernel(START, seed=1)
    account = Account(limit=1)

    def hang(inv: Invocation, event: object) -> None:
        kernel.sleep(3600)

    fn = Function(kernel, account, "f", memory_mb=256, timeout_s=30, handler=hang)
    assert fn.invoke_now(None)
    assert not fn.invoke_now(None)  # the account's one unit is taken
    kernel.run(START + 60_000)
    assert fn.stats.timeouts == 1
    assert fn.stats.duration_ms == [30_000]
    assert account.in_use == 0


def test_an_event_source_batches_what_is_visible_and_redelivers_after_the_visibility_timeout() -> (
    None
):
    kernel = Kernel(START, seed=1)
    queue = SimQueue(kernel, "q", visibility_s=10, max_receives=2)
    batches: list[int] = []

    def handler(inv: Invocation, batch: list[object]) -> None:
        batches.append(len(batch))  # deletes nothing: every message comes back

    fn = Function(kernel, Account(limit=10), "f", memory_mb=256, timeout_s=5, handler=handler)
    EventSource(kernel, queue, fn, batch_size=10, max_concurrency=1)
    for n in range(12):
        queue.put(n)
    queue.put("late", delay_s=3)
    kernel.run(START + 60_000)
    assert batches[:2] == [10, 2]  # one slot: what is visible, ten at a time
    assert queue.stats.dead_lettered == 13  # received twice each, then to the DLQ
    assert sum(batches) == 26


def test_a_stopped_mapping_starts_again_from_five_and_scales_up() -> None:
    kernel = Kernel(START, seed=1)
    queue = SimQueue(kernel, "q", visibility_s=60, max_receives=5)

    def slow(inv: Invocation, batch: list[object]) -> None:
        kernel.sleep(10)

    fn = Function(kernel, Account(limit=1000), "f", memory_mb=256, timeout_s=60, handler=slow)
    mapping = EventSource(kernel, queue, fn, batch_size=1, max_concurrency=1000)
    mapping.stop()
    for n in range(2000):
        queue.put(n)
    mapping.start()
    kernel.run(START + 1)
    assert mapping.active == 5
    kernel.run(START + 60_000)
    assert 250 < mapping.limit < 320  # +300 a minute


def test_the_subset_keeps_whole_groups() -> None:
    ids = [derived_id(OWNER, f"k-{n}") for n in range(2000)]
    for workflow_id in ids:
        shard = int(watch_shard(workflow_id, 256)[2:])
        assert group_of(workflow_id, 256, 32) == shard % 32
    kept = sum(group_of(i, 256, 32) == 0 for i in ids)
    assert 30 < kept < 100  # about 1 in 32


def test_list_partitions_measure_how_many_groups_feed_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spread by a hash of their own, every group feeds every list partition: 1 / f, no
    override. Sharded by the watch shard's hash, each is fed by one group: factor 1."""
    config = replace(SMALL, groups=32)
    with sharded_list_index() as applied:
        independent = Run(config)
        independent.list_scales(probes=20_000)
    if engine_shards_list():
        # A no-op: the engine shards it itself, by the same stable hash as the watch shard
        # (hash % 32 against hash % 256), so at 32 groups one group feeds each partition.
        assert not applied
        # Every list index has the same partitions (the filter indexes' too).
        assert independent.capacity.overrides == {
            (index.name, f"OWNER#{OWNER}#0"): 1.0 for index in TABLE.list_indexes
        }
    else:
        assert applied
        assert independent.capacity.overrides == {}
    original = WorkflowRecord.to_item

    def by_watch_shard(self: WorkflowRecord) -> dict[str, object]:
        item = original(self)
        shard = int(watch_shard(self.workflow_id, 256)[2:]) % 32
        item["list_pk"] = f"OWNER#{self.owner}#{shard}"
        return item

    monkeypatch.setattr(WorkflowRecord, "to_item", by_watch_shard)
    correlated = Run(config)
    correlated.list_scales(probes=20_000)
    assert correlated.capacity.overrides == {
        (index.name, f"OWNER#{OWNER}#0"): 1.0 for index in TABLE.list_indexes
    }


def test_a_small_run_completes_with_no_workflow_lost() -> None:
    run = Run(replace(SMALL, shard_list=True))
    run.run()
    summary = figures.summary(run, 0.0)
    assert run.seeded > 0
    assert summary["workflows"]["lost_workflows"] == 0
    assert summary["workflows"]["finished"].get("SUCCEEDED", 0) > 0
    assert summary["workflows"]["steps_succeeded_per_second"] > 0
    assert len(run.supervision.log.reports) > 0
    assert run.kernel.failures == []


def test_a_run_is_deterministic_from_its_seed() -> None:
    config = replace(SMALL, minutes=0.2, open_fraction=0.02)
    first, second = Run(config), Run(config)
    first.run()
    second.run()
    assert first.kernel.events == second.kernel.events
    assert first.store.stats.requests == second.store.stats.requests
    assert first.steps_succeeded == second.steps_succeeded


def test_a_rate_limited_pool_claims_its_share_of_the_limit_through_the_whole_systems_items() -> (
    None
):
    """The checks pool limited to half what the design load sends it: the subset's claims a
    second are the limit x f (within 10 % over the run, every 10 s too), spread over the whole
    system's bucket items, and every task took one limiter write and waited with a ticket."""
    run = Run(replace(SMALL, shard_list=True, rate_limit=("checks", 2500.0, 100)))
    buckets = run.subset_buckets()
    assert buckets.shards == 10  # 2,500 / 250, as at full size
    assert buckets.shards * 1_000_000 / buckets.interval_us == pytest.approx(2500 / 256, 0.01)
    run.run()
    rate = figures.rate_limit(run)
    assert rate is not None and rate["whole_seconds"] >= 20
    assert rate["error_vs_limit"] <= 0.10
    assert 2250 <= rate["per_10s_min"] <= rate["per_10s_max"] <= 2750
    assert rate["held"] > 0 and rate["limiter_writes_per_task"] < 1.1
    assert all(run.store.peek(rate_pk("checks", shard)[0]) for shard in range(10))


def _breaker_verdict(run: Run) -> tuple[bool, list[str], dict[str, Any]]:
    summary = figures.summary(run, 0.0)
    h = report.headline(summary, None)
    passed, missed = report.verdict(
        [t for t in report.targets(h, None, 0.0, None) if t["target"] == "hottest partition"]
    )
    return passed, [t["target"] for t in missed], summary["hot_keys"][0]


def test_the_breakers_single_partition_put_back_fails_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 41.2: the checks pool's breaker (5,000 ended attempts a second at full size)
    counts on a partition per shard; put back under one partition key (its shards as sort
    keys), the model finds that partition over its limit and the hottest-partition target
    fails; with the engine's layout it holds."""
    from shepherd.engine import circuit

    config = replace(SMALL, minutes=0.4, open_fraction=0.02, breakers=("checks",))
    spread = Run(config)
    spread.run()
    passed, _, hottest = _breaker_verdict(spread)
    assert passed, hottest
    monkeypatch.setattr(
        circuit,
        "circuit_counter_key",
        lambda pool, slot, shard: (f"CB#{pool}#{slot}", str(shard)),
    )
    single = Run(config)
    single.run()
    passed, missed, hottest = _breaker_verdict(single)
    assert not passed and missed == ["hottest partition"]
    assert hottest["pattern"] == "CB#checks#<n>" and hottest["peak_offered"] > 1.0


def _table_verdicts(run: Run) -> dict[str, bool | None]:
    summary = figures.summary(run, 0.0)
    h = report.headline(summary, None)
    return {t["target"]: t["holds"] for t in report.limit_targets(h) if "table" in t["target"]}


def test_the_design_load_fails_on_the_default_deployments_table_quota_and_holds_on_its_size() -> (
    None
):
    """Issue 41.5: the runs are judged against the CDK app's named sizes. The design load (its
    full open population, starts and steps, half a simulated minute) asks the table for more
    than the default deployment's 40,000 units a second, and stays within the design-load
    size's on-demand maximum: the same counts, judged against each."""
    assert DESIGN_DEPLOYMENT.table_wru == DESIGN_LOAD.table_max_write_units
    assert DEFAULT_DEPLOYMENT.table_rru == DEFAULT_DEPLOYMENT.table_wru == 40_000
    run = Run(replace(SMALL, open_fraction=1.0, deployment=DESIGN_DEPLOYMENT))
    run.run()
    verdicts = _table_verdicts(run)
    assert verdicts and all(verdicts.values()), verdicts
    run.config = replace(run.config, deployment=DEFAULT_DEPLOYMENT)
    verdicts = _table_verdicts(run)
    assert False in verdicts.values(), verdicts
    assert "table" in figures.limits(run)["first_bottleneck"]


def test_the_models_deployments_are_the_cdk_apps_sizes() -> None:
    """The model reads infra/shepherd_infra/deployments.py: the values it judges against are
    the ones the stack deploys for each size."""
    for model, size in ((DEFAULT_DEPLOYMENT, DEFAULT), (DESIGN_DEPLOYMENT, DESIGN_LOAD)):
        assert model.name == size.name
        assert model.watch_shards == size.watch_shards
        assert model.sweep_groups == size.sweep_groups
        assert model.api_rate_limit == size.api_rate_limit
        assert model.table_rru == size.table_read_units
        assert model.account_concurrency == size.quotas.lambda_concurrency
    assert RunConfig("x").groups == DESIGN_LOAD.sweep_groups
    assert RunConfig("x").shards == DESIGN_LOAD.watch_shards
    assert RunConfig("x").pool_concurrency == DESIGN_LOAD.pool_max_concurrency
