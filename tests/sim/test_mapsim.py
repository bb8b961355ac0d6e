"""The map protocol's fault simulator (issue 24): zero violations over a few hundred seeds,
reads bounded by MaxConcurrency whatever the item count, and it does catch a broken protocol
(each mutation below makes it report the invariant it breaks)."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.conditions import Update
from shepherd.decisions import fanout as fo
from shepherd.decisions.transitions import Write
from shepherd_sim import mapsim


def test_a_few_hundred_seeds_hold_every_invariant() -> None:
    statuses: dict[str, int] = {}
    for seed in range(200):
        run = mapsim.run_seed(seed)
        assert run.violations == [], f"seed {seed}: {run.violations}"
        status = run.map_state().status
        statuses[status] = statuses.get(status, 0) + 1
    # Both verdicts are exercised, with items lost, duplicated, late and crashed.
    assert statuses.get("SUCCEEDED", 0) > 30 and statuses.get("FAILED", 0) > 30


@pytest.mark.parametrize("concurrency", [10, 100])
def test_reads_are_bounded_by_the_window_not_by_the_items(concurrency: int) -> None:
    small = mapsim.run_seed(1, 200, concurrency, whole=True)
    large = mapsim.run_seed(1, 2_000, concurrency, whole=True)
    for run in (small, large):
        assert run.violations == []
        assert run.map_state().status == "SUCCEEDED"
        assert run.map_state().accounted == run.items
    assert small.max_look_keys == large.max_look_keys == concurrency + 1
    assert small.max_claim_keys == large.max_claim_keys == 2
    assert large.max_account_keys <= 1


def _violations(seeds: range) -> list[str]:
    found: list[str] = []
    for seed in seeds:
        found += mapsim.run_seed(seed).violations
    return found


def test_it_catches_an_accounting_that_is_not_fenced_on_the_window_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = fo.account

    def unfenced(*args: Any, **kwargs: Any) -> fo.Accounting:
        got = real(*args, **kwargs)
        return fo.Accounting(Write(got.write.pk, got.write.sk, got.write.update, None), got.entered)

    monkeypatch.setattr(fo, "account", unfenced)
    assert any(v.startswith(("M1", "M2")) for v in _violations(range(40)))


def test_it_catches_a_refill_that_breaks_the_stripes(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fo.account

    def greedy(key: tuple[str, str], state: fo.MapState, index: int, *rest: Any) -> fo.Accounting:
        got = real(key, state, index, *rest)
        extra = index + 2 * state.stride
        if not got.entered or extra >= state.total:
            return got
        update = got.write.update
        more = Update({**update.set, fo.WINDOW + str(extra): 0}, update.remove, add=update.add)
        write = Write(got.write.pk, got.write.sk, more, got.write.condition)
        return fo.Accounting(write, (*got.entered, extra))

    monkeypatch.setattr(fo, "account", greedy)
    assert any(v.startswith("M2") for v in _violations(range(40)))


def test_it_catches_compensation_that_skips_ambiguous_items(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = fo.to_compensate
    monkeypatch.setattr(fo, "to_compensate", lambda items, when: real(items, "SUCCEEDED"))
    assert any(v.startswith("M5") for v in _violations(range(60)))


def test_it_catches_a_look_that_forgets_lost_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fo.look

    def blind(*args: Any) -> fo.WindowLook:
        got = real(*args)
        return fo.WindowLook(got.to_account, (), got.next_due)

    monkeypatch.setattr(fo, "look", blind)
    assert any(v.startswith("M7") for v in _violations(range(40)))
