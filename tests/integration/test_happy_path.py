"""The happy path never waits on the supervisor (issue 40.5): with no fault injected, the end
of every kind (a task, a map's last item, a child workflow, a wait, an approval, a condition's
skip) dispatches what it made ready in its own write or the next, never through a look. The
supervisor still runs every second here, as deployed: what it does is counted
(`SweepReport.took_over`), and must be nothing, and the workflow must end in seconds, not after
a dispatch grace (60 s) or a look's interval."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import AgentRegistry
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.keys import item_sk, wf_pk
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryEngine

GRACE = 60  # DispatchTimeoutSeconds: what a step waited for when a look recovered it


def _task(name: str, *deps: str, agent: str = "work", **extra: Any) -> dict[str, Any]:
    return {
        "Name": name,
        "Agent": agent,
        "Pool": "p",
        "TimeoutSeconds": 300,
        "DependsOn": list(deps),
        **extra,
    }


CHILD = {"Name": "child", "Steps": [_task("inner")]}


def _engine(*steps: dict[str, Any]) -> tuple[MemoryEngine, list[tuple[str, int]]]:
    ran: list[tuple[str, int]] = []
    registry = AgentRegistry()

    @registry.agent("work")
    def work(ctx: AgentContext) -> Any:
        ran.append((ctx.step, engine.clock.now_ms()))
        return {"step": ctx.step}

    @registry.agent("split")
    def split(ctx: AgentContext) -> Any:
        ran.append((ctx.step, engine.clock.now_ms()))
        return {"items": list(range(int(ctx.input.get("n", 5))))}

    definitions = {
        "main": parse_definition(
            {"Name": "main", "DispatchTimeoutSeconds": GRACE, "Steps": list(steps)}, "main"
        ),
        "child": parse_definition(CHILD, "child"),
    }
    engine = MemoryEngine(definitions, agents=registry)
    return engine, ran


def _drive(engine: MemoryEngine, wf: str, *, answer: bool = False, seconds: int = 120) -> int:
    """Deliver, sweep every second (as deployed) and move time until `wf` ends; what the
    supervisor's looks took over from the happy path (dispatches and closes)."""
    took_over = 0
    for _ in range(seconds):
        engine.deliver()
        if answer:
            _approve(engine, wf)
        if engine.outcome(wf).status.terminal:
            return took_over
        engine.advance(1)
        took_over += engine.sweep().took_over
    raise AssertionError(f"{wf} still {engine.outcome(wf).status} after {seconds}s")


def _approve(engine: MemoryEngine, wf: str) -> None:
    item = engine.store.get(wf_pk(wf), item_sk("step", "approve"))
    if item is None or item.get("status") != StepStatus.WAITING.value:
        return
    engine.engine.approvals.decide(wf, "approve", principal="test", approve=True)


def _run(engine: MemoryEngine, *, answer: bool = False, items: int = 5) -> tuple[int, float]:
    """Run `main` to its end: what the looks took over, and how long it took (seconds)."""
    start = engine.clock.now_ms()
    wf = engine.start("main", {"x": 1, "n": items})
    took_over = _drive(engine, wf, answer=answer)
    outcome = engine.outcome(wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED, outcome
    return took_over, (engine.clock.now_ms() - start) / 1000


def test_a_step_after_a_child_workflow_starts_as_the_child_ends() -> None:
    engine, ran = _engine(
        _task("before"),
        {"Name": "sub", "Workflow": "child", "TimeoutSeconds": 300, "DependsOn": ["before"]},
        _task("after", "sub"),
    )
    took_over, took = _run(engine)
    assert took_over == 0
    assert took < 5, f"it took {took}s: a look recovered what the child's end made ready"
    inner = next(t for s, t in ran if s == "inner")
    after = next(t for s, t in ran if s == "after")
    assert after - inner <= 1000


def test_a_map_fed_by_the_previous_output_closes_with_its_last_item() -> None:
    engine, ran = _engine(
        _task("split", agent="split"),
        _task(
            "each", "split", Map={"ItemsPath": "$.steps.split.output.items", "MaxConcurrency": 2}
        ),
        _task("after", "each"),
    )
    took_over, took = _run(engine)
    assert took_over == 0
    assert took < 5, f"the workflow took {took}s: a look closed the map"
    last_item = max(t for s, t in ran if s == "each")
    after = next(t for s, t in ran if s == "after")
    assert after - last_item <= 1000


def test_a_step_after_a_wait_starts_as_it_wakes() -> None:
    engine, _ = _engine(
        _task("before"),
        {"Name": "pause", "Wait": {"Seconds": 5}, "DependsOn": ["before"]},
        _task("after", "pause"),
    )
    took_over, took = _run(engine)
    assert took_over == 0
    assert took < 10


def test_a_step_after_an_approval_starts_as_it_is_answered() -> None:
    engine, _ = _engine(
        _task("before"),
        {"Name": "approve", "Approval": {"TimeoutSeconds": 3600}, "DependsOn": ["before"]},
        _task("after", "approve"),
    )
    took_over, took = _run(engine, answer=True)
    assert took_over == 0
    assert took < 5


@pytest.mark.parametrize("last", [False, True])
def test_a_condition_s_skip_moves_on_at_once(last: bool) -> None:
    never = {"Variable": "$.input.x", "NumericEquals": 2}
    steps = [_task("before"), _task("maybe", "before", Condition=never)]
    if not last:
        steps.append(_task("after", "maybe"))
    engine, ran = _engine(*steps)
    took_over, took = _run(engine)
    assert took_over == 0
    assert took < 5
    assert "maybe" not in {s for s, _ in ran}


@pytest.mark.parametrize("items", [0, 3])
def test_a_map_of_child_workflows_closes_with_its_last_child(items: int) -> None:
    engine, ran = _engine(
        _task("split", agent="split"),
        {
            "Name": "kids",
            "Workflow": "child",
            "TimeoutSeconds": 300,
            "DependsOn": ["split"],
            "Map": {"ItemsPath": "$.steps.split.output.items", "MaxConcurrency": 2},
        },
        _task("after", "kids"),
    )
    took_over, took = _run(engine, items=items)
    assert took_over == 0
    assert took < 5, f"the workflow took {took}s: a look closed the map"
    assert sum(1 for s, _ in ran if s == "inner") == items
