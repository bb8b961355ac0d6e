"""What proves a refactoring of the engine changed no behaviour (issue 40.4): recorded before
the move, recomputed after it, compared by `tests/sim/test_equivalence.py`.

Three pieces of evidence, each deterministic (a seed, a manual clock):

- the fault simulator's per-seed digest (its trace of events, every item written, the fake
  service's effects) and outcomes, for a fixed set of seeds that between them succeed a task,
  a map, a child workflow, a wait and an approval step and skip steps by a condition;
- a WaitForSignal step (the simulator's workload has none) run on `MemoryEngine`: the digest
  of every item it leaves, for a signal taken and for a wait timed out;
- the requests the benchmarks' pinned scenarios make (every request, unit, message and event,
  by component), as `make bench` counts them on the real handlers.

`python -m shepherd_sim.equivalence --write` records the fixture; run it only when a change of
behaviour is meant, and say so in the commit.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from shepherd_sim import Faults, run_seed

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "sim" / "equivalence.json"

# Two fixed ranges; seeds 4, 17-20 are left out only because each takes seconds of CPU. Between
# them: maps (10, 19, 21, 23), children (11, 30, 34), approvals (7, 12, 13), waits (22, 26, 27,
# 30...), condition skips (7, 9, 12, 15, 16...). `test_equivalence` checks the coverage.
SEEDS: tuple[int, ...] = (*range(5, 17), *range(21, 35))
KINDS = ("task", "map", "child", "wait", "approval")


@contextlib.contextmanager
def stable_tracebacks() -> Iterator[None]:
    """An agent's error keeps its traceback (`Scheduler.keep_error`), whose file names and
    line numbers move with any edit of the engine: the evidence keeps the exception alone,
    so it proves the behaviour unchanged, not the source."""

    def exception_only(exc: BaseException, *args: Any, **kwargs: Any) -> list[str]:
        return ["Traceback (frames left out)\n", *traceback.format_exception_only(exc)]

    with mock.patch.object(traceback, "format_exception", exception_only):
        yield


def seed_evidence(seed: int) -> dict[str, Any]:
    """One seed's digest, its outcomes and the steps it ended, by kind."""
    with stable_tracebacks():
        r = run_seed(seed, Faults())
    kinds = {k: v for k, v in sorted(r.stats.items()) if k.startswith("steps_")}
    return {"digest": r.digest, "outcomes": dict(sorted(r.outcomes.items())), "steps": kinds}


def sim_evidence() -> dict[str, Any]:
    return {str(seed): seed_evidence(seed) for seed in SEEDS}


def _signal_definition(timeout: int) -> Any:
    from shepherd.definitions import parse_definition

    task = {"Agent": "work", "Pool": "p", "TimeoutSeconds": 10}
    return parse_definition(
        {
            "Name": "order",
            "Steps": [
                {
                    "Name": "reserve",
                    **task,
                    "Compensation": {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
                },
                {
                    "Name": "amend",
                    "DependsOn": ["reserve"],
                    "WaitForSignal": {"Name": "amended", "TimeoutSeconds": timeout},
                },
                {"Name": "ship", "DependsOn": ["amend"], **task},
            ],
        },
        "order.yaml",
    )


def _signal_run(timeout: int, send: bool) -> dict[str, Any]:
    from shepherd import AgentRegistry
    from shepherd.engine.agent import AgentContext

    registry = AgentRegistry()

    @registry.agent("work")
    def work(ctx: AgentContext) -> dict[str, Any]:
        return {"step": ctx.step, "given": dict(ctx.dependencies)}

    @registry.agent("undo")
    def undo(ctx: AgentContext) -> None:
        return None

    with stable_tracebacks():
        return _signal_outcome(registry, timeout, send)


def _signal_outcome(registry: Any, timeout: int, send: bool) -> dict[str, Any]:
    from shepherd.testing import MemoryEngine

    engine = MemoryEngine({"order": _signal_definition(timeout)}, agents=registry, owner="alice")
    wf = engine.start("order", {"order_id": "o-1"})
    engine.deliver()
    if send:
        engine.engine.signals.send(wf, "amended", {"quantity": 3}, principal="alice")
    else:
        engine.advance(timeout + 1)
        engine.sweep()
    outcome = engine.run(wf, max_seconds=120)
    items = sorted(engine.store.items(), key=lambda i: (i["pk"], i["sk"]))
    text = json.dumps(items, sort_keys=True, default=str)
    return {
        "status": outcome.status.value,
        "steps": {n: s.status.value for n, s in sorted(outcome.steps.items())},
        "items": len(items),
        "digest": hashlib.sha256(text.encode()).hexdigest(),
    }


def signal_evidence() -> dict[str, Any]:
    return {"taken": _signal_run(3600, send=True), "timed out": _signal_run(30, send=False)}


@contextlib.contextmanager
def seeded_ids() -> Iterator[None]:
    """The handlers' production id source, made a sequence: a workflow's id picks its watch
    shard, so with random ids whether a sweep's query finds it varies from run to run."""
    from shepherd.ids import RandomIds

    counter = itertools.count()

    def new_id(self: RandomIds) -> str:
        return hashlib.sha256(f"id-{next(counter)}".encode()).hexdigest()[:32]

    with mock.patch.object(RandomIds, "new_id", new_id):
        yield


def bench_counts(name: str) -> dict[str, Any]:
    """One pinned scenario of `make bench` (one workflow, its own stack), counted."""
    from shepherd_bench.cost import MAP_SCENARIOS, SCENARIOS, run_scenarios

    scenario = next(s for s in (*SCENARIOS, *MAP_SCENARIOS) if s.name == name)
    with seeded_ids(), stable_tracebacks():
        (run,) = run_scenarios(1, scenarios=(scenario,))
    return run.tally.as_dict()


def bench_evidence() -> dict[str, Any]:
    from shepherd_bench.cost import MAP_SCENARIOS, SCENARIOS

    return {s.name: bench_counts(s.name) for s in (*SCENARIOS, *MAP_SCENARIOS)}


def record() -> dict[str, Any]:
    return {"sim": sim_evidence(), "signal": signal_evidence(), "bench": bench_evidence()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {FIXTURE.name}")
    args = parser.parse_args()
    evidence = record()
    text = json.dumps(evidence, indent=1, sort_keys=True) + "\n"
    if args.write:
        FIXTURE.write_text(text)
        print(f"wrote {FIXTURE}")
    else:
        print(text)


if __name__ == "__main__":
    main()
