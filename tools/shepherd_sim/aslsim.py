"""State machines under faults (issue 42.8): Amazon States Language machines with loops,
Retry, Catch, Parallel and Map run on the real engine (`shepherd.testing.MemoryEngine`: the
engine over ports that pass the DynamoDB adapter's contract tests, a manual clock), while a
seeded schedule of faults strikes their Tasks: duplicate deliveries, lost messages, transient
errors, and attempts that the supervisor times out while they still run (their late results
must be fenced).

Faults are bounded per Task visit (`AslFaults.per_visit`) below what the machines' Retry
absorbs, so each run must end exactly as the in-process runner (`shepherd.asl`) ends the same
machine on the same input with no fault at all. Invariants checked per seed:

- **once per attempt**: no Task visit's attempt runs its function twice;
- **the reference outcome**: the status, the output (or the error and cause) are the runner's;
- **exact loops**: each function ran to a result as many times as the runner called it (a
  loop's iteration count is exact, a caught error ran its fallback once);
- **a catch never unwinds**: no workflow, branch or item ever compensates;
- **it ends**: within the simulated time bound.

The run's digest (status, output, every unit's status and attempt) is deterministic per seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

FN = "arn:aws:lambda:us-east-1:123456789012:function:"
TIMEOUT_SECONDS = 30  # every Task's lease: a late attempt is one the supervisor timed out
SIM_LIMIT_SECONDS = 6 * 3600
RETRY = [
    {
        "ErrorEquals": ["Transient", "States.Timeout"],
        "IntervalSeconds": 1,
        "MaxAttempts": 6,
        "BackoffRate": 1.5,
    }
]


def _task(fn: str, **rest: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": f"{FN}{fn}",
        "TimeoutSeconds": TIMEOUT_SECONDS,
        "Retry": RETRY,
        **rest,
    }


MACHINES: dict[str, dict[str, Any]] = {
    # A loop: a Task and a Choice back to it, `times` times.
    "sim_loop": {
        "StartAt": "Init",
        "States": {
            "Init": {"Type": "Pass", "Parameters": {"n": 0, "times.$": "$.times"}, "Next": "Inc"},
            "Inc": _task("Inc", Next="More?"),
            "More?": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.n", "NumericLessThanPath": "$.times", "Next": "Inc"}],
                "Default": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
    },
    # A charge that may be declined for good: its Catch goes on to a refund, never unwinds.
    "sim_catch": {
        "StartAt": "Charge",
        "States": {
            "Charge": _task(
                "Charge",
                Catch=[
                    {"ErrorEquals": ["CardDeclined"], "ResultPath": "$.error", "Next": "Refund"}
                ],
                ResultPath="$.charge",
                Next="Ship",
            ),
            "Ship": _task("Ship", ResultPath="$.shipped", End=True),
            "Refund": _task("Refund", ResultPath="$.refund", Next="Declined"),
            "Declined": {"Type": "Fail", "Error": "Declined", "Cause": "the card was declined"},
        },
    },
    # A Parallel of two branches, then a Map over the first branch's items.
    "sim_branches": {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "Double", "States": {"Double": _task("Double", End=True)}},
                    {"StartAt": "Count", "States": {"Count": _task("Count", End=True)}},
                ],
                "Next": "Each",
            },
            "Each": {
                "Type": "Map",
                "ItemsPath": "$[0].items",
                "ItemSelector": {"x.$": "$$.Map.Item.Value", "i.$": "$$.Map.Item.Index"},
                "ItemProcessor": {
                    "StartAt": "Square",
                    "States": {"Square": _task("Square", End=True)},
                },
                "End": True,
            },
        },
    },
}


class Transient(Exception):
    """An injected failure the machines' Retry absorbs."""


class CardDeclined(Exception):
    pass


def _charge(value: Any) -> Any:
    if not value.get("ok"):
        raise CardDeclined(f"card of order {value['order']} declined")
    return {"charged": value["amount"]}


FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "Inc": lambda v: {**v, "n": v["n"] + 1},
    "Charge": _charge,
    "Ship": lambda v: f"order {v['order']} shipped",
    "Refund": lambda v: {"refunded": v["amount"], "why": v["error"]["Error"]},
    "Double": lambda v: {"items": [x * 2 for x in v["items"]]},
    "Count": lambda v: len(v["items"]),
    "Square": lambda v: {"at": v["i"], "square": v["x"] * v["x"]},
}


def workload(rng: random.Random) -> tuple[str, Any]:
    """A machine and its input, drawn from the seed."""
    name = rng.choice(sorted(MACHINES))
    if name == "sim_loop":
        return name, {"times": rng.randint(1, 6)}
    if name == "sim_catch":
        return name, {
            "order": rng.randint(1, 99),
            "amount": rng.randint(1, 500),
            "ok": rng.random() < 0.5,
        }
    return name, {"items": [rng.randint(-9, 9) for _ in range(rng.randint(0, 4))]}


@dataclass(frozen=True)
class AslFaults:
    """Each Task call (or delivery) is struck with these probabilities, at most `per_visit`
    faults per Task visit: below what Retry (6 attempts) absorbs."""

    dup: float = 0.15  # the message is delivered twice
    lose: float = 0.1  # the message is lost (the supervisor sends it again)
    error: float = 0.15  # the function fails with a retried error
    late: float = 0.1  # the attempt outlives its lease: timed out while it runs
    per_visit: int = 2

    @classmethod
    def none(cls) -> AslFaults:
        return cls(dup=0.0, lose=0.0, error=0.0, late=0.0)


@dataclass
class AslResult:
    seed: int
    machine: str
    status: str
    violations: list[str]
    digest: str
    faults: Counter[str] = field(default_factory=Counter)
    sim_seconds: float = 0.0


def reference(name: str, payload: Any) -> tuple[Any, Counter[str]]:
    """The in-process runner's end of the machine on `payload` with no fault, and how many
    times it called each function (a result or the function's own error)."""
    from shepherd.asl import parse, run_state_machine

    calls: Counter[str] = Counter()

    def counted(fn_name: str) -> Callable[[Any], Any]:
        def call(value: Any) -> Any:
            calls[fn_name] += 1
            return FUNCTIONS[fn_name](value)

        return call

    expected = run_state_machine(
        parse(MACHINES[name], name), payload, functions={f: counted(f) for f in FUNCTIONS}
    )
    return expected, calls


class _Run:
    """One seed's engine, its faulty agents and the driver that delivers their messages."""

    def __init__(self, seed: int, faults: AslFaults) -> None:
        from shepherd.definitions import parse_definition
        from shepherd.engine.agent import AgentRegistry
        from shepherd.testing import MemoryEngine

        self.faults = faults
        self.rng = random.Random(seed)
        self.name, self.payload = workload(self.rng)
        self.struck: Counter[tuple[str, str]] = Counter()  # faults per Task visit
        self.seen: Counter[str] = Counter()  # faults by kind
        self.ran: Counter[tuple[str, str, int]] = Counter()  # calls per visit attempt
        registry = AgentRegistry()
        for fn_name in FUNCTIONS:
            registry.register(fn_name, self._agent(fn_name))
        machine = {"Name": self.name, "Steps": [], "StateMachine": MACHINES[self.name]}
        self.definition = parse_definition(machine, self.name)
        self.engine = MemoryEngine({self.name: self.definition}, agents=registry, owner="sim")

    def strike(self, kind: str, visit: tuple[str, str], p: float) -> bool:
        if self.struck[visit] >= self.faults.per_visit or self.rng.random() >= p:
            return False
        self.struck[visit] += 1
        self.seen[kind] += 1
        return True

    def _agent(self, fn_name: str) -> Callable[[Any], Any]:
        def run(ctx: Any) -> Any:
            visit = (ctx.workflow_id, ctx.step)
            self.ran[(ctx.workflow_id, ctx.step, ctx.attempt)] += 1
            if self.strike("error", visit, self.faults.error):
                raise Transient(f"injected into {ctx.step} attempt {ctx.attempt}")
            if self.strike("late", visit, self.faults.late):
                self.engine.advance(TIMEOUT_SECONDS + 1)  # it runs past its lease...
                self.engine.sweep()  # ...and the supervisor times it out meanwhile
            return FUNCTIONS[fn_name](ctx.input)

        return run

    def drive(self, workflow_id: str) -> list[str]:
        """Deliver, lose and duplicate messages, move time and sweep until it ends."""
        engine = self.engine
        started = engine.clock.now_ms()
        pools = sorted({t.pool for t in self.definition.tasks} | {"asl"})
        while not engine.outcome(workflow_id).status.terminal:
            if engine.clock.now_ms() - started > SIM_LIMIT_SECONDS * 1000:
                status = engine.outcome(workflow_id).status.value
                return [f"it did not end within {SIM_LIMIT_SECONDS} s: {status}"]
            queue = engine.queue
            messages = [m for p in pools if queue.has(p) for m in queue.receive(p, 10)]
            if not messages:
                engine.advance(self.rng.uniform(1, 20))
                engine.sweep()
            for message in messages:
                visit = (message.task.workflow_id, message.task.step)
                if self.strike("lose", visit, self.faults.lose):
                    queue.delete(message.receipt)  # never handled: lost
                    continue
                engine.engine.agent_runtime.handle(message.task)
                if self.strike("dup", visit, self.faults.dup):
                    engine.engine.agent_runtime.handle(message.task)  # delivered again
                queue.delete(message.receipt)
        return []


def run_asl_seed(seed: int, faults: AslFaults | None = None) -> AslResult:
    """One seed: a machine and input from the seed, run under the seed's faults."""
    run = _Run(seed, faults or AslFaults())
    expected, calls = reference(run.name, run.payload)
    workflow_id = run.engine.start(run.name, run.payload)
    started = run.engine.clock.now_ms()
    violations = run.drive(workflow_id)
    view = _view(run.engine, workflow_id)
    violations += _check(expected, view, run.ran, calls, run.engine)
    digest = hashlib.sha256(
        json.dumps([view, _units(run.engine)], sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    return AslResult(
        seed,
        run.name,
        view["status"],
        violations,
        digest,
        run.seen,
        (run.engine.clock.now_ms() - started) / 1000,
    )


def _view(engine: Any, workflow_id: str) -> dict[str, Any]:
    """The workflow as the API's view shows a state machine's end: status, output or error."""
    from shepherd.keys import WF_SK, wf_pk

    item = engine.store.get(wf_pk(workflow_id), WF_SK)
    assert item is not None
    shown = engine.engine.scheduler.asl.view(item)
    view: dict[str, Any] = {"status": item["status"]}
    for key in ("output", "error", "cause"):
        if key in shown:
            view[key] = shown[key]
    return view


def _units(engine: Any) -> list[tuple[str, str, Any, Any]]:
    """Every unit and workflow item's key, status and attempt (the digest's body)."""
    return sorted(
        (str(i["pk"]), str(i["sk"]), i.get("status"), i.get("attempt"))
        for i in engine.store.items()
        if "status" in i
    )


def _check(
    expected: Any,
    view: dict[str, Any],
    ran: Counter[tuple[str, str, int]],
    reference_calls: Counter[str],
    engine: Any,
) -> list[str]:
    out = [f"{k[1]} attempt {k[2]} of {k[0]} ran {n} times" for k, n in ran.items() if n > 1]
    if view["status"] != expected.status:
        out.append(f"ended {view['status']}, the runner {expected.status}")
    elif expected.status == "SUCCEEDED" and view.get("output") != expected.output:
        out.append(f"output {view.get('output')!r}, the runner's {expected.output!r}")
    elif expected.status != "SUCCEEDED" and (view.get("error"), view.get("cause")) != (
        expected.error,
        expected.cause,
    ):
        out.append(f"error {view.get('error')!r}, the runner's {expected.error!r}")
    # A late attempt's function returned too (its result fenced): count each visit's last.
    finished = _finished_visits(engine)
    if finished != +reference_calls:
        out.append(f"Task visits ended {dict(finished)}, the runner called {dict(reference_calls)}")
    unwound = sorted(
        {
            str(i["pk"])
            for i in engine.store.items()
            if i.get("status") in ("COMPENSATING", "COMPENSATED")
        }
    )
    if unwound or any(t.startswith("WorkflowCompensat") for t in engine.events.types()):
        out.append(f"a caught error unwound: {unwound}")
    return out


def _finished_visits(engine: Any) -> Counter[str]:
    """Task visits that ended with their function's result or its own error, by function:
    the unit items (`V#<state>#<visit>`) that SUCCEEDED or FAILED for good."""
    out: Counter[str] = Counter()
    for item in engine.store.items():
        sk = str(item.get("sk", ""))
        if "V#" not in sk or item.get("status") not in ("SUCCEEDED", "FAILED"):
            continue
        state = sk.split("V#", 1)[1].rsplit("#", 1)[0]
        out[_function_of(state)] += 1
    return out


def _function_of(state: str) -> str:
    return state  # every Task state of these machines is named after its function


def run_asl_seeds(seeds: Iterable[int], faults: AslFaults | None = None) -> list[AslResult]:
    return [run_asl_seed(seed, faults) for seed in seeds]


def main(argv: list[str] | None = None) -> int:
    """`python -m shepherd_sim.aslsim --seeds N [--first F] [--seed S]`: run the seeds, print
    the outcomes, the faults struck and every violation; exit 1 on any."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="shepherd_sim.aslsim", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seed", type=int, help="run one seed and print its result")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    outcomes: Counter[str] = Counter()
    struck: Counter[str] = Counter()
    failed = 0
    for result in run_asl_seeds(seeds):
        outcomes[f"{result.machine} {result.status}"] += 1
        struck.update(result.faults)
        for violation in result.violations:
            print(f"seed {result.seed} ({result.machine}): {violation}")
        failed += bool(result.violations)
    print(f"state machines under faults: {len(list(seeds))} seeds, {failed} with violations")
    print("outcomes:", dict(sorted(outcomes.items())))
    print("faults struck:", dict(sorted(struck.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
