"""Child workflows in the engine (issue 24): a step that runs a whole workflow, on the
in-memory store and on DynamoDB (moto). One child per attempt, ever; the parent waits with no
Lambda running; cancel and compensation reach down; a parent is never terminal while a child
is not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from shepherd.decisions.fanout import child_id
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.errors import InputInvalid, InvalidTransition, PermanentError
from shepherd.keys import map_item_key
from shepherd.model import StepStatus, WorkflowStatus
from support import DEFINITIONS, Harness, engine_stores, memory_harness, moto_harness

CHILD = {
    "Name": "region",
    "Steps": [
        {
            "Name": "build",
            "Agent": "build",
            "Pool": "work",
            "TimeoutSeconds": 30,
            "Compensation": {"Agent": "unbuild", "Pool": "work", "TimeoutSeconds": 30},
        },
        {
            "Name": "check",
            "Agent": "check",
            "Pool": "work",
            "TimeoutSeconds": 30,
            "DependsOn": ["build"],
        },
    ],
}
PARENT = {
    "Name": "rollout",
    "Steps": [
        {
            "Name": "plan",
            "Agent": "plan",
            "Pool": "work",
            "TimeoutSeconds": 30,
            "Compensation": {"Agent": "unplan", "Pool": "work", "TimeoutSeconds": 30},
        },
        {
            "Name": "eu",
            "Workflow": "region",
            "TimeoutSeconds": 600,
            "DependsOn": ["plan"],
            "InputPath": "$.steps.plan.output.eu",
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 1},
        },
        {
            "Name": "announce",
            "Agent": "announce",
            "Pool": "work",
            "TimeoutSeconds": 30,
            "DependsOn": ["eu"],
        },
    ],
}


class Calls:
    def __init__(self) -> None:
        self.built: list[str] = []
        self.unbuilt: list[str] = []
        self.unplanned = 0
        self.fail_check: int = 0  # child checks that fail for good, from the first
        self.fail_announce = False
        self.fail_unbuild = 0  # child undos of build that fail for good, from the first
        self.hang_build = False
        self.announced: Any = None

    def registry(self) -> AgentRegistry:
        registry = AgentRegistry()

        @registry.agent("plan")
        def plan(ctx: AgentContext) -> Any:
            return {"eu": {"region": "eu-west-1"}}

        @registry.agent("unplan")
        def unplan(ctx: AgentContext) -> Any:
            self.unplanned += 1
            return {}

        @registry.agent("build")
        def build(ctx: AgentContext) -> Any:
            if self.hang_build:
                from shepherd_examples.agents.faults import SimulatedHang

                raise SimulatedHang
            self.built.append(ctx.workflow_id)
            return {"built": ctx.input["region"]}

        @registry.agent("unbuild")
        def unbuild(ctx: AgentContext) -> Any:
            if self.fail_unbuild > 0:
                self.fail_unbuild -= 1
                raise PermanentError("cannot tear down", name="Stuck")
            self.unbuilt.append(ctx.workflow_id)
            return {}

        @registry.agent("check")
        def check(ctx: AgentContext) -> Any:
            if self.fail_check > 0:
                self.fail_check -= 1
                raise PermanentError("region unhealthy", name="Unhealthy")
            return {"healthy": True}

        @registry.agent("announce")
        def announce(ctx: AgentContext) -> Any:
            if self.fail_announce:
                raise PermanentError("no audience", name="NoAudience")
            self.announced = ctx.dependencies[next(iter(ctx.dependencies))]
            return {"ok": True}

        return registry


def definitions() -> dict[str, Any]:
    return {
        **DEFINITIONS,
        "region": parse_definition(CHILD, "region"),
        "rollout": parse_definition(PARENT, "rollout"),
    }


@pytest.fixture(params=engine_stores())
def world(request: pytest.FixtureRequest) -> Iterator[tuple[Harness, Calls]]:
    calls = Calls()
    if request.param == "memory":
        yield memory_harness(definitions=definitions(), agents=calls.registry()), calls
    else:
        with moto_harness(definitions=definitions(), agents=calls.registry()) as h:
            yield h, calls


def test_a_child_runs_and_its_output_is_the_steps(world: tuple[Harness, Calls]) -> None:
    h, calls = world
    wf = h.start("rollout", {"release": 7}, owner="ada")
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    eu = state.steps["eu"]
    first = child_id(wf, "eu", None, 1)
    assert eu.status is StepStatus.SUCCEEDED and eu.child_id == first
    child = h.state(first).workflow
    assert child.status is WorkflowStatus.SUCCEEDED
    assert (child.parent_id, child.parent_step, child.owner) == (wf, "eu", "ada")
    assert h.output(first)["build"] == {"built": "eu-west-1"}  # InputPath selected its input
    assert calls.announced == h.output(first)  # the child's output is the step's


def test_a_failed_child_fails_the_attempt_and_retry_starts_a_fresh_child(
    world: tuple[Harness, Calls],
) -> None:
    h, calls = world
    calls.fail_check = 1
    wf = h.start("rollout", {})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    first, second = child_id(wf, "eu", None, 1), child_id(wf, "eu", None, 2)
    assert h.status(first) is WorkflowStatus.COMPENSATED  # it undid its build
    assert h.status(second) is WorkflowStatus.SUCCEEDED
    assert state.steps["eu"].attempt == 2 and state.steps["eu"].child_id == second
    assert calls.unbuilt == [first]
    errors = [e.get("e") for e in state.steps["eu"].history]
    assert errors == ["Unhealthy", None]  # the child's own error name, then its success


def test_a_failing_parent_compensates_its_succeeded_child(world: tuple[Harness, Calls]) -> None:
    h, calls = world
    calls.fail_announce = True
    wf = h.start("rollout", {})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    first = child_id(wf, "eu", None, 1)
    assert h.status(first) is WorkflowStatus.COMPENSATED  # the child undid its steps
    assert calls.unbuilt == [first] and calls.unplanned == 1
    comp = state.compensations["eu"]
    assert comp.status is StepStatus.SUCCEEDED and comp.child_id == first


def test_cancelling_the_parent_cancels_its_running_child_and_waits_for_it(
    world: tuple[Harness, Calls],
) -> None:
    h, calls = world
    calls.hang_build = True
    wf = h.start("rollout", {})
    from shepherd_examples.agents.faults import SimulatedHang

    for _ in range(5):
        try:
            h.pump()
        except SimulatedHang:
            break
    first = child_id(wf, "eu", None, 1)
    assert h.status(first) is WorkflowStatus.RUNNING
    h.operations.cancel(wf)
    calls.hang_build = False
    # The parent cannot end before its child does, whatever the supervisor does meanwhile.
    for _ in range(400):
        h.pump()
        parent, child = h.status(wf), h.status(first)
        assert not (parent.terminal and not child.terminal)
        if parent.terminal:
            break
        h.clock.advance(1)
        h.sweep()
    assert h.status(wf) is WorkflowStatus.CANCELLED
    assert h.status(first) is WorkflowStatus.CANCELLED
    assert h.state(wf).steps["eu"].status is StepStatus.FAILED


def test_a_timed_out_child_is_cancelled_and_its_attempt_retried() -> None:
    calls = Calls()
    steps = [dict(s) for s in PARENT["Steps"]]  # type: ignore[union-attr]
    steps[1]["TimeoutSeconds"] = 20  # less than the child's build may hang (30 s)
    defs = {**definitions(), "rollout": parse_definition({**PARENT, "Steps": steps}, "rollout")}
    h = memory_harness(definitions=defs, agents=calls.registry())
    calls.hang_build = True
    wf = h.start("rollout", {})
    from shepherd_examples.agents.faults import SimulatedHang

    for _ in range(5):
        try:
            h.pump()
        except SimulatedHang:
            break
    first = child_id(wf, "eu", None, 1)
    calls.hang_build = False
    state = h.run(wf, step_seconds=5)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert h.status(first) is WorkflowStatus.CANCELLED
    assert calls.unbuilt == [first]  # its hung build may have acted: undone
    history = state.steps["eu"].history
    assert [(e["a"], e["o"], e.get("e")) for e in history] == [
        (1, "timeout", "States.Timeout"),
        (2, "ok", None),
    ]


def test_racing_starters_start_one_child_per_attempt() -> None:
    calls = Calls()
    h = memory_harness(definitions=definitions(), agents=calls.registry())
    wf = h.start("rollout", {})
    h.pump(rounds=1)  # plan runs; its agent starts the child
    state = h.state(wf)
    eu = state.steps["eu"]
    assert eu.status is StepStatus.WAITING
    # A stale starter (planned on the step as it was before) loses and starts nothing.
    from dataclasses import replace

    stale = replace(eu, status=StepStatus.PENDING, attempt=0, child_id=None, stored=False)
    assert not h.scheduler.start_child(state, h.catalog.current("rollout"), stale, 0)
    children = [i for i in h.store.items() if i.get("parent_id") == wf and i["sk"] == "#WF"]
    assert len(children) == 1


FLEET = {
    "Name": "fleet",
    "Steps": [
        {
            "Name": "regions",
            "Map": {"ItemsPath": "$.input.regions", "MaxConcurrency": 2},
            "Workflow": "region",
            "TimeoutSeconds": 600,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 1},
        },
        {
            "Name": "announce",
            "Agent": "announce",
            "Pool": "work",
            "TimeoutSeconds": 30,
            "DependsOn": ["regions"],
        },
    ],
}


def fleet_harness(calls: Calls) -> Harness:
    defs = {**definitions(), "fleet": parse_definition(FLEET, "fleet")}
    return memory_harness(definitions=defs, agents=calls.registry())


REGIONS = [{"region": f"r{i}"} for i in range(5)]


def test_a_map_of_child_workflows_runs_one_child_per_item() -> None:
    calls = Calls()
    h = fleet_harness(calls)
    wf = h.start("fleet", {"regions": REGIONS})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    children = [child_id(wf, "regions", i, 1) for i in range(5)]
    assert [h.state(c).workflow.parent_item for c in children] == list(range(5))
    assert all(h.status(c) is WorkflowStatus.SUCCEEDED for c in children)
    assert [o["build"] for o in calls.announced] == [{"built": f"r{i}"} for i in range(5)]
    assert sorted(calls.built) == sorted(children)


def test_a_map_of_children_keeps_at_most_max_concurrency_children_running() -> None:
    calls = Calls()
    h = fleet_harness(calls)
    wf = h.start("fleet", {"regions": REGIONS})
    most = 0
    for _ in range(400):
        h.pump(rounds=1)
        running = [
            i
            for i in h.store.items()
            if i.get("parent_id") == wf and i["sk"] == "#WF" and i["status"] == "RUNNING"
        ]
        most = max(most, len(running))
        if h.status(wf).terminal:
            break
        h.clock.advance(1)
        h.sweep()
    assert h.status(wf) is WorkflowStatus.SUCCEEDED
    assert most == 2


def test_a_parent_unwinding_past_a_map_of_children_undoes_each_succeeded_child() -> None:
    calls = Calls()
    calls.fail_announce = True
    h = fleet_harness(calls)
    wf = h.start("fleet", {"regions": REGIONS})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    children = [child_id(wf, "regions", i, 1) for i in range(5)]
    assert all(h.status(c) is WorkflowStatus.COMPENSATED for c in children)
    assert sorted(calls.unbuilt) == sorted(children)


@pytest.fixture(params=engine_stores())
def fleet_world(request: pytest.FixtureRequest) -> Iterator[tuple[Harness, Calls]]:
    calls = Calls()
    defs = {**definitions(), "fleet": parse_definition(FLEET, "fleet")}
    if request.param == "memory":
        yield memory_harness(definitions=defs, agents=calls.registry()), calls
    else:
        with moto_harness(definitions=defs, agents=calls.registry()) as h:
            yield h, calls


def _schema_world(kind: str) -> Iterator[tuple[Harness, Calls]]:
    """The rollout with a child whose InputSchema wants a string region, and an eu step that
    pauses its workflow when it fails for good (its first attempt)."""
    child = {
        **CHILD,
        "InputSchema": {
            "type": "object",
            "required": ["region"],
            "properties": {"region": {"type": "string"}},
        },
    }
    parent = {**PARENT, "Steps": [dict(s) for s in PARENT["Steps"]]}
    parent["Steps"][1] = {**parent["Steps"][1], "OnFailure": "PAUSE", "Retry": {"MaxAttempts": 0}}
    defs = {
        **DEFINITIONS,
        "region": parse_definition(child, "region"),
        "rollout": parse_definition(parent, "rollout"),
    }
    calls = Calls()
    if kind == "memory":
        yield memory_harness(definitions=defs, agents=calls.registry()), calls
    else:
        with moto_harness(definitions=defs, agents=calls.registry()) as h:
            yield h, calls


def test_a_paused_parent_starts_no_retry_child_of_a_map_item_until_it_is_resumed(
    fleet_world: tuple[Harness, Calls],
) -> None:
    """A map item's retry starts its next child when a look finds its backoff over, but not
    while the workflow is paused: a pause starts nothing, the first look after the resume
    does (as an agent item's retry is not sent). Found by the fault simulator (seeds 123 and
    133 of `--types sim_parent,sim_fleet`: a look started a queued item's child under a
    pause, on a read that saw the pause)."""
    h, calls = fleet_world
    calls.fail_check = 1  # the first child to run its check fails: its item is retried
    wf = h.start("fleet", {"regions": REGIONS})
    queued: int | None = None
    for _ in range(40):
        h.pump()
        for i in range(len(REGIONS)):
            unit = h.store.get(*map_item_key(wf, "regions", i))
            if unit is not None and unit.get("status") == StepStatus.QUEUED.value:
                queued = i
        if queued is not None:
            break
        h.clock.advance(1)
        h.sweep()
    assert queued is not None
    retry = child_id(wf, "regions", queued, 2)
    h.operations.pause(wf)
    for _ in range(5):
        h.clock.advance(1)  # the backoff (1 s) is long over
        h.sweep()
        h.pump()
    assert h.store.get(f"WF#{retry}", "#WF") is None  # no child started under the pause
    unit = h.store.get(*map_item_key(wf, "regions", queued))
    assert unit is not None and unit["status"] == StepStatus.QUEUED.value
    h.operations.resume(wf)
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert h.status(retry) is WorkflowStatus.SUCCEEDED


def test_a_cancel_over_a_child_that_just_succeeded_undoes_it(
    world: tuple[Harness, Calls], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent is cancelled after its child SUCCEEDED, before anything recorded it (the
    child's finisher died before it advanced the parent, and no look came yet): the cancel's
    advance records the step's success, asks the child to undo itself and waits for it. Found
    by the fault simulator (seed 5 of `--types sim_parent,sim_fleet`): the unit created to
    wait was planned on the child as read before the ask, SUCCEEDED, and failed at once as a
    failed undo, so the parent ended FAILED over a child still undoing itself."""
    h, calls = world
    died = monkeypatch.setattr  # the child's finisher dies after its finishing write
    died(h.engine.scheduler, "_advance_parent", lambda parent_id: None)
    wf = h.start("rollout", {})
    first = child_id(wf, "eu", None, 1)
    for _ in range(20):
        h.pump()
        if h.store.get(f"WF#{first}", "#WF") is not None and h.status(first).terminal:
            break
    assert h.status(first) is WorkflowStatus.SUCCEEDED
    assert h.step(wf, "eu").status is StepStatus.WAITING  # no look recorded it yet
    h.operations.cancel(wf)
    assert h.status(wf) is not WorkflowStatus.FAILED
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.CANCELLED
    assert h.status(first) is WorkflowStatus.COMPENSATED
    assert state.compensations["eu"].status is StepStatus.SUCCEEDED
    assert calls.unbuilt == [first]


@pytest.mark.parametrize("kind", engine_stores())
def test_a_replacement_input_is_what_the_child_starts_with_and_must_fit_its_schema(
    kind: str,
) -> None:
    """Issue 29.7: a resume's replacement input for a child-workflow step replaces the
    selected input (as a task step's does; before, the child got InputPath's selection and
    the replacement was lost), and the child's InputSchema, this step's own schema, checks it
    before anything is written (not a ChildInputInvalid after the resume was accepted)."""
    for h, calls in _schema_world(kind):
        calls.fail_check = 1
        wf = h.start("rollout", {})
        for _ in range(40):  # its child unwinds, then the step fails and pauses the rollout
            h.pump()
            if h.status(wf) is WorkflowStatus.PAUSED:
                break
            h.clock.advance(0.5)
            h.sweep()
        assert h.status(wf) is WorkflowStatus.PAUSED
        before = h.state(wf)
        with pytest.raises(InputInvalid, match=r"input\.region") as refused:
            h.operations.resume(wf, step="eu", step_input={"region": 5})
        assert refused.value.field == "input.region"
        assert h.state(wf) == before  # nothing written
        h.operations.resume(wf, step="eu", step_input={"region": "us-east-1"})
        state = h.run(wf)
        assert state.workflow.status is WorkflowStatus.SUCCEEDED
        assert h.output(str(state.steps["eu"].child_id))["build"] == {"built": "us-east-1"}


def _failed_over_a_failed_child_undo(h: Harness, calls: Calls) -> tuple[str, str]:
    """A parent unwinds past its SUCCEEDED child, whose own undo fails for good: the child
    ends FAILED, the parent's child-undo unit fails, the parent ends FAILED."""
    calls.fail_announce = True
    calls.fail_unbuild = 1
    wf = h.start("rollout", {})
    state = h.run(wf)
    first = child_id(wf, "eu", None, 1)
    assert state.workflow.status is WorkflowStatus.FAILED
    assert h.status(first) is WorkflowStatus.FAILED
    comp = state.compensations["eu"]
    assert comp.status is StepStatus.FAILED and comp.child_id == first
    return wf, first


def test_redriving_a_parent_over_a_failed_child_undo_redrives_the_child(
    world: tuple[Harness, Calls],
) -> None:
    """The redrive reaches down: the failed child-undo unit waits for its child again and the
    child is redriven with it (one transaction), so both end COMPENSATED. Found by the fault
    simulator (seed 244 of `--types sim_parent,sim_fleet`): the redrive re-queued the unit as
    a task, a message to no pool, and the parent stayed COMPENSATING for ever."""
    h, calls = world
    wf, first = _failed_over_a_failed_child_undo(h, calls)
    back = h.operations.redrive(wf)
    assert back.status is WorkflowStatus.COMPENSATING
    assert h.status(first) is WorkflowStatus.COMPENSATING  # brought back by its parent
    unit = h.state(wf).compensations["eu"]
    assert (unit.status, unit.attempt, unit.child_id) == (StepStatus.WAITING, 2, first)
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert h.status(first) is WorkflowStatus.COMPENSATED
    assert state.compensations["eu"].status is StepStatus.SUCCEEDED
    assert calls.unbuilt == [first] and calls.unplanned == 1
    assert state.workflow.redrives == 1 and h.state(first).workflow.redrives == 1


def test_a_redriven_child_undo_that_fails_again_fails_the_parent_again(
    world: tuple[Harness, Calls],
) -> None:
    h, calls = world
    wf, first = _failed_over_a_failed_child_undo(h, calls)
    calls.fail_unbuild = 1
    h.operations.redrive(wf)
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.FAILED  # not stuck COMPENSATING
    assert h.status(first) is WorkflowStatus.FAILED
    assert state.compensations["eu"].status is StepStatus.FAILED
    h.operations.redrive(wf)  # and again, now that the undo works
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert h.status(first) is WorkflowStatus.COMPENSATED


def test_a_child_is_not_redriven_on_its_own(world: tuple[Harness, Calls]) -> None:
    """Redriving the child directly would bring it back to life under its FAILED parent (a
    parent is never terminal while a child is not): refused, naming the parent."""
    h, calls = world
    wf, first = _failed_over_a_failed_child_undo(h, calls)
    with pytest.raises(InvalidTransition, match=f"child of workflow {wf}"):
        h.operations.redrive(first)
    assert h.status(first) is WorkflowStatus.FAILED
    assert h.status(wf) is WorkflowStatus.FAILED


def test_a_stale_read_of_a_child_asked_to_undo_itself_fails_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The parent's compensation of a child step waits for the child's undo; a planner whose
    read of the child predates the ask (the child still SUCCEEDED: an operator's slow cancel,
    `make sim` seeds 5632 and 9560) must not fail that undo, or the parent ends FAILED while
    its child is still undoing itself. A read of the child as it is decides."""
    import dataclasses
    import random

    from shepherd.decisions import planner

    calls = Calls()
    h = memory_harness(definitions=definitions(), agents=calls.registry())
    # The child's finisher dies after its finishing write: the parent has not recorded it.
    monkeypatch.setattr(h.engine.scheduler, "_advance_parent", lambda parent_id: None)
    wf = h.start("rollout", {})
    first = child_id(wf, "eu", None, 1)
    for _ in range(20):
        h.pump()
        if h.store.get(f"WF#{first}", "#WF") is not None and h.status(first).terminal:
            break
    assert h.status(first) is WorkflowStatus.SUCCEEDED
    h.operations.cancel(wf)  # asks the child to undo itself, then waits for it
    state = h.state(wf)
    waiting = state.compensations["eu"]
    assert waiting.status is StepStatus.WAITING and waiting.child_id == first
    child = state.children[first]
    assert child.status is not WorkflowStatus.SUCCEEDED  # the ask landed
    stale = dataclasses.replace(
        state, children={first: dataclasses.replace(child, status=WorkflowStatus.SUCCEEDED)}
    )
    now = h.clock.now_ms()
    actions = planner.plan(
        stale, h.definitions["rollout"], now, supervisor=True, rng=random.Random(0)
    )
    assert not [a for a in actions if getattr(a, "seen", None) is waiting], actions
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.CANCELLED
    assert h.status(first) is WorkflowStatus.COMPENSATED


# ------------------------------------------- children that do not block (issue 37.6)


HELD = {  # a child that rests until it is signalled `go` (it outlives its parent)
    "Name": "held_region",
    "Steps": [
        {**CHILD["Steps"][0]},  # type: ignore[index]
        {
            "Name": "hold",
            "DependsOn": ["build"],
            "WaitForSignal": {"Name": "go", "TimeoutSeconds": 3600},
        },
    ],
}


def _detached_harness(calls: Calls) -> Harness:
    steps = [dict(s) for s in PARENT["Steps"]]  # type: ignore[union-attr]
    steps[1] = {**steps[1], "Workflow": "held_region", "Detached": True}
    defs = {
        **definitions(),
        "held_region": parse_definition(HELD, "held_region"),
        "rollout": parse_definition({**PARENT, "Steps": steps}, "rollout"),
    }
    return memory_harness(definitions=defs, agents=calls.registry())


def _go(h: Harness, child: str) -> None:
    h.engine.signals.send(child, "go", {"ok": True}, principal=h.state(child).workflow.owner)


def test_a_detached_child_lets_its_parent_go_on_and_end_first() -> None:
    """The step starts its child and succeeds at once with the child's id; the parent's next
    step runs and the parent SUCCEEDS while its child still waits; the child stays listed
    with its parent and ends on its own."""
    calls = Calls()
    h = _detached_harness(calls)
    wf = h.start("rollout", {})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    first = child_id(wf, "eu", None, 1)
    eu = state.steps["eu"]
    assert eu.status is StepStatus.SUCCEEDED and eu.child_id == first
    assert h.output(wf)["eu"] == {"workflow_id": first}
    assert calls.announced == {"workflow_id": first}
    child = h.state(first)
    assert child.workflow.status is WorkflowStatus.RUNNING
    assert child.steps["hold"].status is StepStatus.WAITING
    assert (child.workflow.parent_id, child.workflow.parent_step) == (wf, "eu")
    _go(h, first)
    assert h.run(first).workflow.status is WorkflowStatus.SUCCEEDED
    assert h.status(wf) is WorkflowStatus.SUCCEEDED


def test_a_detached_child_is_neither_cancelled_nor_compensated_with_its_parent() -> None:
    calls = Calls()
    calls.fail_announce = True
    h = _detached_harness(calls)
    wf = h.start("rollout", {})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED  # announce failed: unwound
    assert calls.unplanned == 1
    assert "eu" not in state.compensations  # its child is not undone with it
    first = child_id(wf, "eu", None, 1)
    assert h.status(first) is WorkflowStatus.RUNNING
    _go(h, first)
    assert h.run(first).workflow.status is WorkflowStatus.SUCCEEDED and calls.unbuilt == []
    # Cancelled after its detached child started: the parent ends, the child goes on.
    calls.fail_announce = False
    wf = h.start("rollout", {})
    h.pump(on_message=lambda task: "hold" if task.step == "announce" else "handle")
    assert h.state(wf).steps["eu"].status is StepStatus.SUCCEEDED
    second = child_id(wf, "eu", None, 1)
    h.operations.cancel(wf)
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.CANCELLED
    assert h.status(second) is WorkflowStatus.RUNNING
    _go(h, second)
    assert h.run(second).workflow.status is WorkflowStatus.SUCCEEDED


def test_detached_is_for_a_child_workflow_step_only() -> None:
    from shepherd.errors import DefinitionError

    steps = [dict(s) for s in PARENT["Steps"]]  # type: ignore[union-attr]
    steps[0] = {**steps[0], "Detached": True}
    with pytest.raises(DefinitionError, match="Detached"):
        parse_definition({**PARENT, "Steps": steps}, "rollout")
    # A definition that names no Detached keeps its version (its content hash).
    plain = parse_definition(PARENT, "rollout")
    assert '"Detached"' not in plain.canonical_json
