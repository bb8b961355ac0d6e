"""The child-workflow protocol's fault simulator (issue 24): zero violations over a few
hundred seeds with duplicated starts, racing supervisors, failing children and parents
cancelled mid-flight; and each broken variant below is caught by the invariant it breaks."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from shepherd.decisions import fanout as fo
from shepherd_sim import childsim


def test_a_few_hundred_seeds_hold_every_invariant() -> None:
    statuses: dict[str, int] = {}
    for seed in range(300):
        run = childsim.run_seed(seed)
        assert run.violations == [], f"seed {seed}: {run.violations}"
        status = str((run.store.get(*childsim.PARENT_KEY) or {}).get("status"))
        statuses[status] = statuses.get(status, 0) + 1
    # Parents succeed, fail (children failing past their retries) and are cancelled.
    assert min(statuses.get(s, 0) for s in ("SUCCEEDED", "FAILED", "CANCELLED")) > 20


def _violations(prefix: str, seeds: range = range(80), **patch: Any) -> list[str]:
    found = []
    for seed in seeds:
        run = childsim.run_seed(seed) if not patch else _patched(seed, **patch)
        found += [v for v in run.violations if v.startswith(prefix)]
    return found


def _patched(seed: int, **patch: Any) -> childsim.Run:
    real = childsim.Run.__post_init__

    def init(self: childsim.Run) -> None:
        real(self)
        for name, value in patch.items():
            setattr(self, name, value)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(childsim.Run, "__post_init__", init)
        return childsim.run_seed(seed)


def test_it_catches_children_started_under_random_ids() -> None:
    counter = itertools.count()
    random_ids = {"make_id": lambda parent, step, attempt: f"x{next(counter)}"}
    # The first design (child put, then the step) with random ids: duplicates start two.
    assert _violations("C1", **random_ids, fenced_start=False)
    # The fenced start alone keeps one child per attempt even then (the step moves once).
    assert not _violations("C1", **random_ids)


def test_seed_1999_the_first_design_left_a_child_running_under_a_cancelled_parent() -> None:
    # The child was put after a read of a QUEUED retry, while a cancel and a look cancelled
    # the step: the parent ended CANCELLED over a running child. The fenced start (one
    # transaction with the step's move and the parent's check) closes it.
    assert _violations("C2", range(1999, 2000), fenced_start=False)
    assert childsim.run_seed(1999).violations == []


def test_it_catches_a_parent_that_ends_before_its_children(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        childsim.Run, "step_done", lambda self, unit: unit.get("status") != "QUEUED"
    )
    assert _violations("C2")


def test_it_catches_a_step_that_succeeds_from_a_failed_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = fo.child_end

    def lenient(child: str, status: str, error: Any) -> fo.ChildEnd | None:
        end = real(child, status, error)
        return fo.ChildEnd(True) if end is not None and status == "FAILED" else end

    monkeypatch.setattr(fo, "child_end", lenient)
    assert _violations("C3")


def test_it_catches_a_finish_that_rewrites_a_terminal_parent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shepherd.conditions import Eq, Update
    from shepherd.errors import ConditionFailed

    def careless(self: childsim.Run) -> None:  # no "already terminal" guard
        parent = self.store.get(*childsim.PARENT_KEY) or {}
        units = [self.store.get(*childsim.step_key(f"s{n}")) or {} for n in range(self.steps)]
        if not all(self.step_done(u) for u in units):
            return
        final = "CANCELLED" if parent.get("status") == "CANCELLING" else "FAILED"
        if all(u.get("status") == "SUCCEEDED" for u in units):
            final = "SUCCEEDED"
        try:
            self.store.update(
                *childsim.PARENT_KEY, Update(set={"status": final}), Eq("status", parent["status"])
            )
        except ConditionFailed:
            return
        self.check()

    monkeypatch.setattr(childsim.Run, "maybe_finish", careless)
    assert _violations("C2")
