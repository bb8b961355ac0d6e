"""The map protocol's fault simulator (issue 24): item units, the window and the accounting
of `shepherd.decisions.fanout`, run against the strict in-memory store under lost, duplicated
and late item messages, agents crashing before and after their effect and between an item's
end and its accounting, attempts timing out, and two supervisors looking at once.

It checks the map invariants (docs/simulation.md, "Maps"):

* **M1** every item ends exactly once in its map's accounting, and the counters add up;
* **M2** at most `MaxConcurrency` items are in flight;
* **M3** no item is lost from supervision: every item sent and not accounted is in the window;
* **M4** the verdict agrees with the tolerance (SUCCEEDED: every item accounted within it;
  FAILED: past it);
* **M5** every item that may have acted (its effect landed) is chosen for compensation when
  the map fails (`When: ATTEMPTED`), in reverse order of completion;
* **M6** bounded reads: a look reads at most `MaxConcurrency` + 1 keys, a claim 2 (the
  workflow item and the item's unit), an accounting at most 1, whatever the item count (the
  maximum seen is reported);
* **M7** liveness: the map is decided and its window empty within a bounded time.

What it does not run is the engine's wiring of these decisions (the agent runtime, the
planner, the supervisor's sweep): on this branch a map is validated but not started.
`python -m shepherd_sim.mapsim --seeds 300` / `--items 10000`.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
from collections import Counter
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from shepherd.conditions import Cond, Eq, Missing, Update, all_of, any_of
from shepherd.decisions import fanout as fo
from shepherd.errors import ConditionFailed
from shepherd.fanout import MapSpec
from shepherd.keys import map_item_key, map_item_of
from shepherd.ports import Store
from shepherd.testing import MemoryStore

from shepherd_sim.interleave import step_all

MAP_KEY = ("WF#w", "S#m")
WORKFLOW_KEY = ("WF#w", "#WF")
WORKFLOW = "w"
STEP = "m"
TICK_MS = 100
GRACE_MS = 2_000  # DispatchTimeoutSeconds
TIMEOUT_MS = 3_000  # the item task's TimeoutSeconds
LOOK_EVERY_MS = 500
MAX_ACCOUNT_TRIES = 200

Fiber = Generator[None, None, None]


@dataclass(frozen=True)
class Faults:
    lose: float = 0.1  # an item message is lost
    dup: float = 0.1  # ... delivered twice
    late: float = 0.1  # ... delayed past its grace
    crash_before_effect: float = 0.03
    crash_after_effect: float = 0.05  # the effect landed, nobody heard of it
    crash_before_account: float = 0.05  # the item ended, its map never heard of it
    fail: float = 0.15  # an attempt raises
    retries: int = 2


@dataclass
class Run:
    """One seed's world."""

    seed: int
    items: int
    spec: MapSpec
    faults: Faults
    rng: random.Random = field(init=False)
    store: Store = field(default_factory=MemoryStore)
    looks: bool = True  # False: the happy path alone (the bench prices an item's requests)
    now: int = 0
    messages: list[tuple[int, int, int]] = field(default_factory=list)  # at, index, attempt
    fibers: list[Fiber] = field(default_factory=list)
    accounted: Counter[int] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    acted: set[int] = field(default_factory=set)
    sent: set[int] = field(default_factory=set)
    unaccounted: set[int] = field(default_factory=set)  # sent, not yet accounted
    sends: int = 0  # task messages sent (SQS's duplicates not counted)
    # Around the simulator's own reads (its checks), so a metered store bills the protocol only.
    unmetered: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext
    violations: list[str] = field(default_factory=list)
    max_look_keys: int = 0
    max_claim_keys: int = 0
    max_account_keys: int = 0
    seen: fo.MapState = field(init=False)  # the map as its openers saw it: stride and total
    _checked: tuple[int | None, fo.MapState] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    # ------------------------------------------------------------------------- the world

    def send(self, index: int, attempt: int) -> None:
        self.sent.add(index)
        self.sends += 1
        if index not in self.accounted:
            self.unaccounted.add(index)
        f = self.faults
        if self.rng.random() < f.lose:
            return
        copies = 2 if self.rng.random() < f.dup else 1
        for _ in range(copies):
            delay = self.rng.randrange(0, 300)
            if self.rng.random() < f.late:
                delay += self.rng.randrange(GRACE_MS, 3 * GRACE_MS)
            self.messages.append((self.now + delay, index, attempt))

    def map_state(self) -> fo.MapState:
        item = self.store.get(*MAP_KEY) or {}
        state = fo.MapState.from_item(item)
        assert state is not None, "the map was opened first"
        return state

    # ----------------------------------------------------------------------------- agents

    def agent(self, index: int, attempt: int) -> Fiber:
        key = map_item_key(WORKFLOW, STEP, index)
        yield
        # A claim reads the workflow item and its unit in one batch, as a step's does.
        read = {i["sk"]: i for i in self.store.get_many([WORKFLOW_KEY, key])}
        self.max_claim_keys = max(self.max_claim_keys, 2)
        if WORKFLOW_KEY[1] not in read:
            return
        current = read.get(key[1])
        fresh = current is None and attempt == 1
        queued = current is not None and current["status"] == "QUEUED"
        if not (fresh or (queued and current is not None and current["attempt"] == attempt)):
            return  # a duplicate or stale message: dropped without a write
        claim = Update(
            set={"status": "RUNNING", "attempt": attempt, "claimed_at": self.now},
            set_if_missing={"first_claimed_at": self.now},
        )
        condition = any_of(Missing("pk"), all_of(Eq("status", "QUEUED"), Eq("attempt", attempt)))
        try:
            self.store.update(*key, claim, condition)
        except ConditionFailed:
            return
        yield
        if self.rng.random() < self.faults.crash_before_effect:
            return  # the supervisor times the attempt out
        self.acted.add(index)
        yield
        if self.rng.random() < self.faults.crash_after_effect:
            return
        failed = self.rng.random() < self.faults.fail
        ended = self.end_attempt(key, attempt, failed)
        if ended is None:
            return  # fenced out: timed out meanwhile
        yield
        if ended in {"succeeded", "failed"}:
            if self.rng.random() < self.faults.crash_before_account:
                return  # a look accounts it
            yield from self.account(index, "succeeded" if ended == "succeeded" else "failed")

    def end_attempt(self, key: tuple[str, str], attempt: int, failed: bool) -> str | None:
        """The item attempt's fenced end: success, retry (QUEUED a+1, sent) or failure."""
        fenced = all_of(Eq("status", "RUNNING"), Eq("attempt", attempt))
        if not failed:
            update = Update(set={"status": "SUCCEEDED", "finished_at": self.now})
            outcome = "succeeded"
        elif attempt <= self.faults.retries:
            update = Update(
                set={"status": "QUEUED", "attempt": attempt + 1, "dispatched_at": self.now}
            )
            outcome = "retrying"
        else:
            update = Update(set={"status": "FAILED", "finished_at": self.now})
            outcome = "failed"
        try:
            self.store.update(*key, update, fenced)
        except ConditionFailed:
            return None
        if outcome == "retrying":
            self.send(map_item_of(*key)[2], attempt + 1)
        return outcome

    def account(self, index: int, outcome: fo.Outcome) -> Fiber:
        """Count the item's end with no read first (the write returns the counters); a refill
        that meets a map that stopped running is decided again on a fresh read (bounded)."""
        state = self.seen
        for _ in range(MAX_ACCOUNT_TRIES):
            decided = fo.account(MAP_KEY, state, index, outcome, self.now)
            yield  # another process may write the map meanwhile
            try:
                after = self.store.update(*MAP_KEY, decided.write.update, decided.write.condition)
            except ConditionFailed:
                self.max_account_keys = max(self.max_account_keys, 1)
                state = self.map_state()  # gone from the window, or the map stopped
                if index not in state.window:
                    return  # accounted already
                continue
            self.accounted[index] += 1
            self.unaccounted.discard(index)
            self.outcomes[outcome] += 1
            for entered in decided.entered:
                self.send(entered, 1)
            self.check()
            yield from self.decide(fo.MapState.from_item(after))
            return
        self.violations.append(f"M7: item {index} could not be accounted in {MAX_ACCOUNT_TRIES}")

    def open_rest(self, state: fo.MapState) -> Fiber:
        """Enter the first window's remaining chunks; a crash leaves them to a look."""
        while (more := fo.open_more(MAP_KEY, state, self.now)) is not None:
            yield
            if self.rng.random() < self.faults.crash_before_account:
                return
            try:
                after = self.store.update(*MAP_KEY, more.write.update, more.write.condition)
            except ConditionFailed:
                return  # another opener (a look) entered it
            for index in more.entered:
                self.send(index, 1)
            fresh = fo.MapState.from_item(after)
            assert fresh is not None
            state = fresh

    def decide(self, state: fo.MapState | None) -> Fiber:
        assert state is not None
        verdict = fo.decide(MAP_KEY, state, self.spec)
        if verdict is None:
            return
        if self.rng.random() < self.faults.crash_before_account:
            return  # the next look decides it
        yield
        write, _ = verdict
        with contextlib.suppress(ConditionFailed):
            self.store.update(*MAP_KEY, write.update, write.condition)

    # ------------------------------------------------------------------------- supervisor

    def look(self) -> Fiber:
        state = self.map_state()
        keys = fo.window_keys(WORKFLOW, STEP, state)
        self.max_look_keys = max(self.max_look_keys, 1 + len(keys))
        found: dict[int, Any] = {}
        for start in range(0, len(keys), 100):
            found |= fo.items_of(self.store.get_many(keys[start : start + 100]))
        views = {i: fo.ItemView.from_item(i, found.get(i)) for i in state.window}
        decided = fo.look(state, views, self.now, GRACE_MS)
        yield
        yield from self.decide(state)  # a verdict whose writer died
        yield from self.open_rest(state)  # chunks of the first window whose opener died
        for index, outcome in decided.to_account:
            yield from self.account(index, outcome)
        for index in decided.to_resend:
            view = views[index]
            if state.status == "FAILED":
                yield from self.cancel(index, view)
            else:
                self.send(index, max(view.attempt, 1))
        for index, view in views.items():
            if view.status == "RUNNING" and found[index]["claimed_at"] + TIMEOUT_MS <= self.now:
                key = map_item_key(WORKFLOW, STEP, index)
                ended = self.end_attempt(key, view.attempt, failed=True)
                if ended in ("failed",):
                    yield from self.account(index, "failed")
        if state.status == "FAILED":
            for index, view in views.items():
                if view.status in (None, "QUEUED") and index not in decided.to_resend:
                    yield from self.cancel(index, view)

    def cancel(self, index: int, view: fo.ItemView) -> Fiber:
        """A map that failed cancels items never claimed (a claim racing it wins or loses)."""
        key = map_item_key(WORKFLOW, STEP, index)
        condition: Cond
        if view.status is None:
            condition = Missing("pk")
        else:
            condition = all_of(Eq("status", "QUEUED"), Eq("attempt", view.attempt))
        try:
            self.store.update(
                *key, Update(set={"status": "CANCELLED", "attempt": view.attempt}), condition
            )
        except ConditionFailed:
            return
        yield from self.account(index, "cancelled")

    # ------------------------------------------------------------------------- invariants

    def check(self) -> None:
        with self.unmetered():
            state = self.map_state()
        twice = [i for i, n in self.accounted.items() if n > 1]
        if twice:
            self.violations.append(f"M1: items accounted twice: {twice[:5]}")
        if state.running > self.spec.max_concurrency:
            self.violations.append(f"M2: {state.running} in flight > {self.spec.max_concurrency}")
        counted = state.succeeded + state.failed + state.cancelled
        if counted != sum(self.accounted.values()):
            self.violations.append(f"M1: counters {counted} != accounted {len(self.accounted)}")
        lost = self.unaccounted - set(state.window)
        if lost:
            self.violations.append(f"M3: items out of supervision: {sorted(lost)[:5]}")
        stripes = Counter(i % state.stride for i in state.window)
        if stripes and max(stripes.values()) > 1:
            self.violations.append("M2: two items of one stripe in flight")

    def final_checks(self) -> None:
        with self.unmetered():
            self._final_checks()

    def _final_checks(self) -> None:
        state = self.map_state()
        if state.status == "RUNNING" or state.window:
            self.violations.append(
                f"M7: map {state.status} with {state.running} in flight at {self.now} ms"
            )
            return
        failed_past = fo.exceeded(state.failed, state.total, self.spec)
        if state.status == "SUCCEEDED":
            if set(self.accounted) != set(range(state.total)) or failed_past:
                self.violations.append("M4: SUCCEEDED without every item accounted in tolerance")
        elif not failed_past:
            self.violations.append("M4: FAILED within the tolerance")
        elif set(self.accounted) != self.sent:
            self.violations.append("M1: a failed map's sent items not all accounted")
        if state.accounted != len(self.accounted):
            self.violations.append("M1: the counters do not add up to the items accounted")
        early = [
            i for i in self.sent if i >= state.stride and i - state.stride not in self.accounted
        ]
        if early:
            self.violations.append(f"M2: items sent before their stripe's last ended: {early[:5]}")
        if state.status == "FAILED":
            self.check_compensation(state)

    def check_compensation(self, state: fo.MapState) -> None:
        views = []
        for index in sorted(self.sent):
            item = self.store.get(*map_item_key(WORKFLOW, STEP, index))
            views.append(fo.ItemView.from_item(index, item))
        chosen = fo.to_compensate(views, "ATTEMPTED")
        missed = self.acted - set(chosen)
        if missed:
            self.violations.append(f"M5: items that acted not compensated: {sorted(missed)[:5]}")
        by_index = {v.index: v for v in views}

        def done(i: int) -> int:
            v = by_index[i]
            if v.status == "SUCCEEDED" and v.finished_at is not None:
                return v.finished_at
            return v.first_claimed_at or 0

        times = [done(i) for i in chosen]
        if times != sorted(times, reverse=True):
            self.violations.append("M5: compensation not in reverse order of completion")

    # ------------------------------------------------------------------------------- loop

    def run(self, max_ms: int) -> None:
        # The map step's unit as the engine would hold it when it opens the map (claimed,
        # its items' pages referenced): the window and counters join these attributes.
        self.store.update(
            *MAP_KEY,
            Update(
                set={
                    "status": "RUNNING",
                    "attempt": 1,
                    "wf_type": "transcode_video",
                    "claimed_at": self.now,
                    "first_claimed_at": self.now,
                    "items": "@ref "
                    + '{"h":"'
                    + "0" * 64
                    + '","k":"wf/'
                    + "0" * 32
                    + '/map/m/items","n":12345}',
                }
            ),
            None,
        )
        self.store.update(
            *WORKFLOW_KEY,
            Update(
                set={"status": "RUNNING", "wf_type": "transcode_video", "input": '{"video":"v"}'}
            ),
            None,
        )
        opened = fo.open_map(MAP_KEY, self.items, self.spec, self.now)
        after = self.store.update(*MAP_KEY, opened.write.update, opened.write.condition)
        seen = fo.MapState.from_item(after)
        assert seen is not None
        self.seen = seen
        for index in opened.entered:
            self.send(index, 1)
        self.fibers.append(self.open_rest(seen))
        next_look = self.now + LOOK_EVERY_MS
        deadline = self.now + max_ms  # max_ms: how long the run may take
        while self.now <= deadline:
            due = [m for m in self.messages if m[0] <= self.now]
            self.messages = [m for m in self.messages if m[0] > self.now]
            for _, index, attempt in due:
                self.fibers.append(self.agent(index, attempt))
            if self.looks and self.now >= next_look:
                # Two supervisors at once now and then: their looks interleave.
                self.fibers.append(self.look())
                if self.rng.random() < 0.3:
                    self.fibers.append(self.look())
                next_look += LOOK_EVERY_MS
            self.step_fibers()
            state = self._state_after_tick()
            if state.status != "RUNNING" and not state.window and not self.fibers:
                break
            self.now += TICK_MS
        while self.fibers:
            self.step_fibers()
        self.final_checks()

    def _state_after_tick(self) -> fo.MapState:
        """The map as the table holds it, for the loop's end check: read again only once the
        table took a write since the last check (a store that keeps its stream, `changes`,
        tells; any other store is read every tick). A stalled run ticks until its deadline,
        and reading the same map every 100 ms was most of its time."""
        changes = getattr(self.store, "changes", None)
        writes = len(changes) if isinstance(changes, list) else None
        if writes is None or self._checked is None or self._checked[0] != writes:
            with self.unmetered():
                self._checked = (writes, self.map_state())
        return self._checked[1]

    def step_fibers(self) -> None:
        """Run every live fiber one step, in a random order, so reads and writes interleave."""
        alive = step_all(self.fibers, self.rng)
        self.fibers = [f for f in self.fibers if f in alive]


def spec_for(rng: random.Random, items: int) -> MapSpec:
    tolerance = rng.choice(["none", "count", "percentage", "both"])
    values: dict[str, Any] = {"ItemsPath": "$.input.items", "MaxConcurrency": rng.randint(1, 8)}
    if tolerance in ("count", "both"):
        values["ToleratedFailureCount"] = rng.randint(0, max(1, items // 3))
    if tolerance in ("percentage", "both"):
        values["ToleratedFailurePercentage"] = rng.choice([0, 5, 25, 50, 100])
    return MapSpec.model_validate(values)


def run_seed(
    seed: int, items: int | None = None, concurrency: int | None = None, *, whole: bool = False
) -> Run:
    """One seed; `whole`: a map that tolerates every failure, so every item runs (the bounded
    reads figure is measured over all of them)."""
    rng = random.Random(seed * 7919)
    wide = items is None and rng.random() < 0.1  # a window opened in several chunks
    count = items if items is not None else rng.randint(150, 400) if wide else rng.randint(0, 40)
    spec = spec_for(rng, count)
    if wide:
        spec = spec.model_copy(update={"max_concurrency": rng.randint(fo.OPEN_CHUNK + 1, 300)})
    if concurrency is not None:
        spec = spec.model_copy(update={"max_concurrency": concurrency})
    if whole:
        spec = spec.model_copy(
            update={"tolerated_failure_percentage": 100.0, "tolerated_failure_count": None}
        )
    faults = Faults(fail=rng.choice([0.05, 0.2, 0.5]), retries=rng.randint(0, 2))
    run = Run(seed, count, spec, faults)
    # Liveness bound (M7): every round of a window may lose a message (a grace), time an
    # attempt out and retry it; generous, and independent of anything but the rounds.
    rounds = -(-count // spec.max_concurrency)
    run.run(max_ms=120_000 + rounds * 8 * (GRACE_MS + TIMEOUT_MS))
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--items", type=int, default=None, help="one large map instead")
    parser.add_argument("--concurrency", type=int, default=100)
    args = parser.parse_args(argv)
    if args.items is not None:
        run = run_seed(args.first, args.items, args.concurrency, whole=True)
        print(
            f"map of {args.items} items, MaxConcurrency {args.concurrency}: "
            f"{run.map_state().status}, outcomes {dict(run.outcomes)}; most keys read by a "
            f"look {run.max_look_keys}, by a claim {run.max_claim_keys}, by an accounting "
            f"{run.max_account_keys}; violations {len(run.violations)}"
        )
        for violation in run.violations[:10]:
            print("  " + violation)
        return 1 if run.violations else 0
    bad = 0
    statuses: Counter[str] = Counter()
    for seed in range(args.first, args.first + args.seeds):
        run = run_seed(seed)
        statuses[run.map_state().status] += 1
        if run.violations:
            bad += 1
            print(f"seed {seed}: {run.violations[:3]}")
    print(f"{args.seeds} seeds, maps {dict(statuses)}, {bad} with violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
