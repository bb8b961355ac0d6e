"""Child workflows in the fault simulator (issue 24, point 4).

`sim_parent` runs `sim_kid` as its `kid` step (a `Workflow:` step with TimeoutSeconds and
Retry: a failed or timed-out child's attempt is retried with a fresh child), `sim_fleet` a map
of `sim_kid` children, under every fault, plus `parent_cancel`: an operator cancelling a parent
while one of its children runs. The seeds below show children started, failed and retried,
timed out, cancelled from above and undone by their parents with every invariant holding; then
each new invariant (`check_children`) is shown to catch a broken engine: the bug is put back
(a context manager that restores the real code) and the violation must appear on a seed that
is clean without it, as in `test_sim_maps.py`.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from shepherd_sim import Faults, SimConfig, run_seed
from shepherd_sim.sim import FLEET_TYPE, PARENT_TYPE

CHILDREN = SimConfig(workflow_types=(PARENT_TYPE, FLEET_TYPE))


def test_children_run_in_every_way_across_seeds() -> None:
    """Across seeds: children succeed, fail and are retried with a fresh child, time out and
    are cancelled by their parent's step, are cancelled with their parent (an operator's
    cancel mid-child), and are undone by a parent that unwinds."""
    stats: Counter[str] = Counter()
    for seed in range(12):
        result = run_seed(seed, Faults(), CHILDREN)
        assert result.violations == [], [str(v) for v in result.violations]
        stats.update(result.stats)
    for name in (
        "children_started",
        "children_succeeded",
        "children_cancelled",
        "children_compensated",
        "children_of_a_retry",
        "children_cancelled_by_a_timeout",
        "parents_cancelled_mid_child_attempted",
    ):
        assert stats[name] > 0, (name, stats)


# ------------------------------------------------------------------ bugs put back


@contextlib.contextmanager
def _child_started_outside_the_transaction() -> Iterator[None]:
    """The first design: the child's item is put, then the step moved to WAITING. A starter
    whose move loses (a racing starter, a cancel, a pause's hold) leaves its child behind."""
    from shepherd.engine.executor import Executor
    from shepherd.errors import ConditionFailed
    from shepherd.model import StepRecord

    real = Executor.start_child

    def start_child(self: Executor, state: Any, seen: Any, child: Any, write: Any) -> bool:
        with contextlib.suppress(ConditionFailed):
            self.store.put_new(child)
        try:
            item = self.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed:
            return False
        state.put(StepRecord.from_item(item))
        return True

    Executor.start_child = start_child  # type: ignore[method-assign]
    try:
        yield
    finally:
        Executor.start_child = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _cancel_does_not_reach_down() -> Iterator[None]:
    """A parent's unwinding ends a step waiting on its child without asking the child to
    cancel or waiting for its end: the parent may end while the child runs on."""
    from shepherd.decisions import planner

    real = planner._Planner._supervise_child

    def supervise_child(self: Any, rec: Any, spec: Any, *, unwinding: bool) -> list[Any]:
        child = self.state.children.get(rec.child_id or "")
        if unwinding and rec.kind == "step" and child is not None and not child.status.terminal:
            return [planner.Cancel(rec)]
        return real(self, rec, spec, unwinding=unwinding)

    planner._Planner._supervise_child = supervise_child  # type: ignore[method-assign]
    try:
        yield
    finally:
        planner._Planner._supervise_child = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _step_output_not_the_childs() -> Iterator[None]:
    """A child step's output is its child's first step's output, not the child's output."""
    from shepherd import jsonsafe
    from shepherd.engine.scheduler import Scheduler

    real = Scheduler._child_output

    def child_output(self: Scheduler, child: Any) -> str:
        value = self.value(real(self, child))
        if isinstance(value, dict) and value:
            first = sorted(value)[0]
            value = {first: value[first]}
        return self.keep(jsonsafe.dumps(value), child.workflow_id, "bug", "output")

    Scheduler._child_output = child_output  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scheduler._child_output = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _succeeded_child_not_undone() -> Iterator[None]:
    """Unwinding past a step whose child SUCCEEDED records its compensation done without
    asking the child to undo itself: the child's effects stay."""
    from shepherd.decisions import transitions as tx
    from shepherd.engine.scheduler import Scheduler

    real = Scheduler._compensate_child

    def compensate_child(self: Scheduler, state: Any, name: str, now: int) -> bool:
        wf = state.workflow
        rec = state.steps[name]
        comp = tx.child_compensation(wf.workflow_id, wf.wf_type, name, now, rec.child_id)
        done = {**comp, "status": "SUCCEEDED", "finished_at": now, "output": "{}"}
        return self.executor.create_step(state, done)

    Scheduler._compensate_child = compensate_child  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scheduler._compensate_child = real  # type: ignore[method-assign]


@dataclass(frozen=True)
class Broken:
    seed: int
    invariant: str
    bug: Callable[[], contextlib.AbstractContextManager[None]]
    note: str


BROKEN = [
    Broken(
        58,
        "child_once",
        _child_started_outside_the_transaction,
        "a starter put its child, its step's move lost to a cancel: a child nobody waits for",
    ),
    Broken(
        58,
        "child_terminal",
        _child_started_outside_the_transaction,
        "that orphan child ran on under its CANCELLED parent",
    ),
    Broken(
        0,
        "child_terminal",
        _cancel_does_not_reach_down,
        "the parent ended CANCELLED while the children of its map still ran",
    ),
    Broken(
        6,
        "child_output",
        _step_output_not_the_childs,
        "a SUCCEEDED parent's child items' outputs were not their children's",
    ),
    Broken(
        7,  # seed 5 until a child's end advanced its parent at once (issue 40.5)
        "child_output",
        _succeeded_child_not_undone,
        "a CANCELLED parent left its SUCCEEDED child's effects in place (never asked to undo)",
    ),
]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.bug.__name__.strip("_"))
def test_the_seed_is_clean_on_the_engine_as_it_is(case: Broken) -> None:
    result = run_seed(case.seed, Faults(), CHILDREN)
    assert result.violations == [], [str(v) for v in result.violations]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.bug.__name__.strip("_"))
def test_the_invariant_catches_the_bug_put_back(case: Broken) -> None:
    with case.bug():
        result = run_seed(case.seed, Faults(), CHILDREN)
    assert case.invariant in {v.invariant for v in result.violations}, case.note
