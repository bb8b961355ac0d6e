"""The child-workflow protocol's fault simulator (issue 24): child-workflow steps start their
children with `decisions.fanout.child_id` (one conditional put per attempt) and end from
`decisions.fanout.child_end`, against the strict in-memory store, under duplicated start
messages, two supervisors looking at once, children failing (and their steps retrying), and
parents cancelled mid-flight (the cancel reaches down; each child ends itself).

Invariants (docs/simulation.md, "Child workflows"):

* **C1** no attempt starts two children (at most one child item per step and attempt);
* **C2** a terminal parent has only terminal children (checked after every write), and
  stays as it ended;
* **C3** a step ends as its child did (SUCCEEDED only from a SUCCEEDED child);
* **C4** liveness: the parent and every child are terminal within a bound.

A protocol model, not the engine: the engine does not run child-workflow steps on this
branch (a start of such a definition is refused). `python -m shepherd_sim.childsim --seeds N`.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from shepherd.conditions import Eq, In, Missing, Update, all_of
from shepherd.decisions import fanout as fo
from shepherd.errors import ConditionFailed, TransactionConflict
from shepherd.testing import MemoryStore

from shepherd_sim.interleave import step_all

PARENT = "p"
PARENT_KEY = ("WF#p", "#WF")
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "COMPENSATED"}
Fiber = Generator[None, None, None]


def step_key(step: str) -> tuple[str, str]:
    return ("WF#p", f"S#{step}")


def child_key(child: str) -> tuple[str, str]:
    return (f"WF#{child}", "#WF")


@dataclass
class Run:
    seed: int
    steps: int
    retries: int
    child_fail: float
    cancel_at: int | None  # tick the operator cancels the parent, if any
    dup: float = 0.3  # a start message delivered twice
    rng: random.Random = field(init=False)
    store: MemoryStore = field(default_factory=MemoryStore)
    fibers: list[Fiber] = field(default_factory=list)
    children: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    ended_as: str | None = None  # the parent's first terminal status: it never changes
    fenced_start: bool = True  # False: the first design, which the simulator broke (seed 1999)
    tick: int = 0
    # How a child's id is made (a test swaps it to show C1 catches random ids).
    make_id: Callable[[str, str, int], str] = field(
        default=lambda parent, step, attempt: fo.child_id(parent, step, None, attempt)
    )

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    # ----------------------------------------------------------------------- the parent

    def start(self) -> None:
        self.store.update(*PARENT_KEY, Update(set={"status": "RUNNING"}), None)
        for n in range(self.steps):
            self.store.update(
                *step_key(f"s{n}"), Update(set={"status": "QUEUED", "attempt": 1}), None
            )
            self.send(f"s{n}", 1)

    def send(self, step: str, attempt: int) -> None:
        copies = 2 if self.rng.random() < self.dup else 1
        for _ in range(copies):
            self.fibers.append(self.starter(step, attempt))

    def starter(self, step: str, attempt: int) -> Fiber:
        """A start message: start the attempt's child and move the step to WAITING in one
        transaction, fenced on the step (QUEUED at this attempt) and on the parent (RUNNING),
        so a step cancelled meanwhile never gets a child. A duplicate loses the transaction."""
        yield
        parent = self.store.get(*PARENT_KEY) or {}
        unit = self.store.get(*step_key(step)) or {}
        if parent.get("status") != "RUNNING" or unit.get("attempt") != attempt:
            return
        if unit.get("status") not in ("QUEUED", "WAITING"):
            return
        child = self.make_id(PARENT, step, attempt)
        item = {
            "status": "RUNNING",
            "parent_id": PARENT,
            "parent_step": step,
            "parent_attempt": attempt,
        }
        yield
        waiting = Update(set={"status": "WAITING", "child_id": child})
        if self.fenced_start:
            try:
                self.store.transact(
                    [
                        (*child_key(child), Update(set=item), Missing("pk")),
                        (
                            *step_key(step),
                            waiting,
                            all_of(Eq("status", "QUEUED"), Eq("attempt", attempt)),
                        ),
                        (*PARENT_KEY, Update(), Eq("status", "RUNNING")),  # a condition check
                    ]
                )
            except TransactionConflict:
                return  # a duplicate, a racing starter, or the step or parent moved on
            self.children.add(child)
            self.fibers.append(self.child(child))
            self.check()
            return
        # The first design (kept to show what C1 and C2 catch): the child first, then the step.
        try:
            self.store.put_new({"pk": child_key(child)[0], "sk": "#WF", **item})
            self.children.add(child)
            self.fibers.append(self.child(child))
        except ConditionFailed:
            pass
        yield
        with contextlib.suppress(ConditionFailed):
            self.store.update(
                *step_key(step),
                waiting,
                all_of(In("status", ("QUEUED", "WAITING")), Eq("attempt", attempt)),
            )
        self.check()

    # ------------------------------------------------------------------------ children

    def child(self, child: str) -> Fiber:
        """A child runs a while, then ends; asked to cancel, it compensates itself."""
        for _ in range(self.rng.randint(2, 25)):
            yield
            item = self.store.get(*child_key(child)) or {}
            if item.get("status") == "CANCELLING":
                yield
                self.end_child(child, "CANCELLING", "CANCELLED", None)
                return
        failed = self.rng.random() < self.child_fail
        error = {"type": "ChunkBroken", "message": "bad chunk"} if failed else None
        self.end_child(child, "RUNNING", "FAILED" if failed else "SUCCEEDED", error)
        # A cancel that landed first: it ends cancelled instead.
        item = self.store.get(*child_key(child)) or {}
        if item.get("status") == "CANCELLING":
            self.end_child(child, "CANCELLING", "CANCELLED", None)

    def end_child(self, child: str, seen: str, status: str, error: Any) -> None:
        values: dict[str, Any] = {"status": status}
        if error:
            values["error"] = error
        try:
            self.store.update(*child_key(child), Update(set=values), Eq("status", seen))
        except ConditionFailed:
            return
        # Its end pulls the parent's due_at forward (the deadline rule): a look follows.
        self.fibers.append(self.look())

    # ---------------------------------------------------------------------- supervisor

    def look(self) -> Fiber:
        yield
        parent = self.store.get(*PARENT_KEY) or {}
        status = parent.get("status")
        if status in TERMINAL:
            return
        units = {n: self.store.get(*step_key(f"s{n}")) or {} for n in range(self.steps)}
        for n, unit in units.items():
            step = f"s{n}"
            if unit.get("status") == "WAITING":
                child = self.store.get(*child_key(unit["child_id"])) or {}
                end = fo.child_end(unit["child_id"], str(child.get("status")), child.get("error"))
                if end is None:
                    if status == "CANCELLING" and child.get("status") == "RUNNING":
                        yield
                        self.request_cancel(unit["child_id"])
                    continue
                yield
                self.end_step(step, unit, end, cancelling=status == "CANCELLING")
            elif unit.get("status") == "QUEUED" and status == "CANCELLING":
                yield
                self.write_step(step, unit, {"status": "CANCELLED"})
        yield
        self.maybe_finish()

    def request_cancel(self, child: str) -> None:
        with contextlib.suppress(ConditionFailed):
            self.store.update(
                *child_key(child), Update(set={"status": "CANCELLING"}), Eq("status", "RUNNING")
            )

    def end_step(self, step: str, unit: dict[str, Any], end: fo.ChildEnd, cancelling: bool) -> None:
        attempt = int(unit["attempt"])
        if end.succeeded:
            values: dict[str, Any] = {"status": "SUCCEEDED"}
        elif attempt <= self.retries and not cancelling:
            values = {"status": "QUEUED", "attempt": attempt + 1}
        else:
            values = {"status": "FAILED", "error": end.error_type}
        if self.write_step(step, unit, values) and values["status"] == "QUEUED":
            self.send(step, attempt + 1)

    def write_step(self, step: str, unit: dict[str, Any], values: dict[str, Any]) -> bool:
        try:
            self.store.update(
                *step_key(step),
                Update(set=values),
                all_of(Eq("status", unit["status"]), Eq("attempt", unit["attempt"])),
            )
        except ConditionFailed:
            return False
        self.check()
        return True

    def maybe_finish(self) -> None:
        parent = self.store.get(*PARENT_KEY) or {}
        if parent.get("status") in TERMINAL:
            return  # another look finished it
        units = [self.store.get(*step_key(f"s{n}")) or {} for n in range(self.steps)]
        if not all(self.step_done(u) for u in units):
            return
        if parent.get("status") == "CANCELLING":
            final = "CANCELLED"
        elif all(u.get("status") == "SUCCEEDED" for u in units):
            final = "SUCCEEDED"
        else:
            final = "FAILED"
        try:
            self.store.update(
                *PARENT_KEY, Update(set={"status": final}), Eq("status", parent.get("status"))
            )
        except ConditionFailed:
            return
        self.check()

    def step_done(self, unit: dict[str, Any]) -> bool:
        """A step is done only when it is terminal: a waiting one waits for its child."""
        return unit.get("status") in TERMINAL

    # ------------------------------------------------------------------------ invariants

    def check(self) -> None:
        per_attempt: Counter[tuple[str, int]] = Counter()
        statuses = []
        for child in self.children:
            item = self.store.get(*child_key(child)) or {}
            per_attempt[(item["parent_step"], item["parent_attempt"])] += 1
            statuses.append(item.get("status"))
        twice = [k for k, n in per_attempt.items() if n > 1]
        if twice:
            self.violations.append(f"C1: attempts with two children: {twice[:3]}")
        parent = (self.store.get(*PARENT_KEY) or {}).get("status")
        if parent in TERMINAL:
            if self.ended_as is not None and parent != self.ended_as:
                self.violations.append(f"C2: terminal parent {self.ended_as} became {parent}")
            self.ended_as = self.ended_as or parent
        if parent in TERMINAL and any(s not in TERMINAL for s in statuses):
            self.violations.append(f"C2: parent {parent} with a child still {statuses}")
        for n in range(self.steps):
            unit = self.store.get(*step_key(f"s{n}")) or {}
            if unit.get("status") == "SUCCEEDED":
                ended = self.store.get(*child_key(unit["child_id"])) or {}
                if ended.get("status") != "SUCCEEDED":
                    self.violations.append(f"C3: s{n} SUCCEEDED from a {ended.get('status')} child")

    # ------------------------------------------------------------------------------ loop

    def run(self, max_ticks: int = 2_000) -> None:
        self.start()
        while self.tick < max_ticks:
            if self.tick == self.cancel_at:
                with contextlib.suppress(ConditionFailed):
                    self.store.update(
                        *PARENT_KEY, Update(set={"status": "CANCELLING"}), Eq("status", "RUNNING")
                    )
            if self.tick % 5 == 0:  # the supervisor's sweeps, two at once now and then
                self.fibers.append(self.look())
                if self.rng.random() < 0.3:
                    self.fibers.append(self.look())
            order = list(self.fibers)
            alive = step_all(order, self.rng)
            # Fibers started meanwhile (a child, a look after a child's end) live on too.
            self.fibers = [f for f in self.fibers if f in alive or f not in order]
            self.tick += 1
            parent = (self.store.get(*PARENT_KEY) or {}).get("status")
            if parent in TERMINAL and not self.fibers:
                break
        self.check()
        parent = (self.store.get(*PARENT_KEY) or {}).get("status")
        open_children = [
            c
            for c in self.children
            if (self.store.get(*child_key(c)) or {}).get("status") not in TERMINAL
        ]
        if parent not in TERMINAL or open_children:
            self.violations.append(f"C4: parent {parent}, children open {len(open_children)}")


def run_seed(seed: int) -> Run:
    rng = random.Random(seed * 104729)
    run = Run(
        seed,
        steps=rng.randint(1, 4),
        retries=rng.randint(0, 2),
        child_fail=rng.choice([0.0, 0.3, 0.7]),
        cancel_at=rng.choice([None, rng.randint(2, 12)]),
    )
    run.run()
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--first", type=int, default=0)
    args = parser.parse_args(argv)
    bad = 0
    statuses: Counter[str] = Counter()
    children = 0
    for seed in range(args.first, args.first + args.seeds):
        run = run_seed(seed)
        statuses[str((run.store.get(*PARENT_KEY) or {}).get("status"))] += 1
        children += len(run.children)
        if run.violations:
            bad += 1
            print(f"seed {seed}: {run.violations[:3]}")
    print(
        f"{args.seeds} seeds, parents {dict(statuses)}, {children} children, {bad} with violations"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
