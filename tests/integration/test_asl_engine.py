"""Amazon States Language state machines on the engine (issue 42.2, 42.3), over in-memory
ports under a manual clock: the frame is the workflow's cursor, each Task visit is a unit
with a step's guarantees (a fenced attempt, a lease, supervision), control states send no
message and run no agent, a Catch never also unwinds, a Wait rests until the supervisor
wakes it, and a Fail state ends the workflow FAILED by design (`failure: "definition"`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from shepherd.asl.engine import path_pk
from shepherd.definitions import Definition, load_directory, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry, Outcome
from shepherd.keys import WF_SK, item_sk, visits_pk, wf_pk
from shepherd.model import StepRecord, StepStatus, WorkflowStatus
from support import Harness, memory_harness

FN = "arn:aws:lambda:us-east-1:123456789012:function:"


def _definition(name: str, machine: dict[str, Any]) -> Definition:
    return parse_definition({"Name": name, "Steps": [], "StateMachine": machine}, name)


class World:
    """One machine on the engine, its agents counting their calls."""

    def __init__(self, machine: dict[str, Any], **agents: Any) -> None:
        self.calls: list[tuple[str, int, Any]] = []
        registry = AgentRegistry()
        for fn_name, fn in agents.items():
            registry.register(fn_name, self._counted(fn_name, fn))
        self.h: Harness = memory_harness(
            definitions={"m": _definition("m", machine)}, agents=registry
        )

    def _counted(self, name: str, fn: Any) -> Any:
        def run(ctx: AgentContext) -> Any:
            self.calls.append((ctx.step, ctx.attempt, ctx.input))
            return fn(ctx)

        return run

    def start(self, payload: Any) -> str:
        return self.h.start("m", payload)

    def item(self, wf: str) -> dict[str, Any]:
        item = self.h.store.get(wf_pk(wf), WF_SK)
        assert item is not None
        return item

    def unit(self, wf: str, name: str) -> StepRecord:
        item = self.h.store.get(visits_pk(wf), item_sk("step", name))
        assert item is not None, name
        return StepRecord.from_item(item)

    def sent(self, wf: str) -> list[tuple[str, int]]:
        return [
            (t.message.step, t.message.attempt)
            for t in self.h.queue.sent
            if t.message.workflow_id == wf
        ]

    def path(self, wf: str) -> list[tuple[str, int]]:
        entries, _ = self.h.scheduler.asl.path(wf, limit=1000)
        return [(e["state"], e["visit"]) for e in entries]

    def view(self, wf: str) -> dict[str, Any]:
        return self.h.scheduler.asl.view(self.item(wf))


LOOP = {
    "StartAt": "Init",
    "States": {
        "Init": {"Type": "Pass", "Result": {"n": 0}, "Next": "Work"},
        "Work": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": f"{FN}Inc:live", "Payload.$": "$"},
            "ResultSelector": {"n.$": "$.Payload.n"},
            "Next": "More?",
        },
        "More?": {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.n",
                    "NumericLessThanPath": "$$.Execution.Input.times",
                    "Next": "Work",
                }
            ],
            "Default": "Done",
        },
        "Done": {"Type": "Succeed"},
    },
}


def _inc(ctx: AgentContext) -> dict[str, int]:
    return {"n": ctx.input["n"] + 1}


def test_a_loop_runs_each_visit_as_its_own_unit_and_control_states_cost_nothing() -> None:
    w = World(LOOP, Inc=_inc)
    wf = w.start({"times": 5})
    w.h.pump()
    item = w.item(wf)
    assert item["status"] == WorkflowStatus.SUCCEEDED.value
    assert w.view(wf)["output"] == {"n": 5}
    # Exactly five iterations: five units, each visit its own, each sent once at attempt 1;
    # Pass, Choice and Succeed sent nothing and ran no agent.
    assert w.sent(wf) == [(f"V#Work#{i}", 1) for i in range(1, 6)]
    assert [c[0] for c in w.calls] == [f"V#Work#{i}" for i in range(1, 6)]
    for i in range(1, 6):
        unit = w.unit(wf, f"V#Work#{i}")
        assert (unit.status, unit.attempt) == (StepStatus.SUCCEEDED, 1)
    # lambda:invoke's result as Step Functions shapes it: the agent's return is the Payload.
    shaped = json.loads(w.unit(wf, "V#Work#1").output or "")
    assert shaped["Payload"] == {"n": 1} and shaped["StatusCode"] == 200
    # The path taken, in order, each visit with its input and output.
    assert w.path(wf) == [
        ("Init", 1),
        *[p for i in range(1, 6) for p in (("Work", i), ("More?", i))],
        ("Done", 1),
    ]
    entries, _ = w.h.scheduler.asl.path(wf, limit=3)
    assert entries[1] == {
        "state": "Work",
        "visit": 1,
        "input": {"n": 0},
        "output": {"n": 1},
        "entered_at": entries[1]["entered_at"],
    }
    # The cursor moved once per transition that ends a unit (and once at the start).
    assert int(item["fv"]) == 6
    assert "due_at" not in item and "watch_shard" not in item


def test_the_path_is_paged() -> None:
    w = World(LOOP, Inc=_inc)
    wf = w.start({"times": 3})
    w.h.pump()
    seen: list[str] = []
    after = -1
    while True:
        page, after_next = w.h.scheduler.asl.path(wf, after, limit=2)
        seen += [e["state"] for e in page]
        if after_next is None:
            break
        after = after_next
    assert seen == ["Init", "Work", "More?", "Work", "More?", "Work", "More?", "Done"]


CATCH = {
    "StartAt": "Charge",
    "States": {
        "Charge": {
            "Type": "Task",
            "Resource": f"{FN}Charge",
            "Catch": [{"ErrorEquals": ["CardDeclined"], "ResultPath": "$.error", "Next": "Refuse"}],
            "Next": "Ship",
        },
        "Ship": {"Type": "Task", "Resource": f"{FN}Ship", "End": True},
        "Refuse": {"Type": "Pass", "Parameters": {"refused.$": "$.error.Error"}, "End": True},
    },
}


class CardDeclined(Exception):
    pass


def _declined(ctx: AgentContext) -> Any:
    raise CardDeclined("insufficient funds")


def test_a_caught_error_moves_to_the_catch_and_never_also_unwinds() -> None:
    w = World(CATCH, Charge=_declined, Ship=lambda ctx: "shipped")
    wf = w.start({"order": 1})
    statuses = []
    for _ in range(5):
        w.h.pump()
        statuses.append(w.item(wf)["status"])
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert not {"COMPENSATING", "FAILED"} & set(statuses)
    assert w.view(wf)["output"] == {"refused": "CardDeclined"}
    assert w.sent(wf) == [("V#Charge#1", 1)]  # Ship never ran; Refuse is a Pass
    assert [c[0] for c in w.calls] == ["V#Charge#1"]
    charge = w.unit(wf, "V#Charge#1")
    assert charge.status is StepStatus.FAILED and charge.attempt == 1
    assert w.path(wf) == [("Charge", 1), ("Refuse", 1)]


def test_an_agent_exception_is_reported_as_a_lambda_error() -> None:
    machine = {
        "StartAt": "Charge",
        "States": {
            "Charge": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": "Charge", "Payload.$": "$"},
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }
    w = World(machine, Charge=_declined)
    wf = w.start({})
    w.h.pump()
    output = w.view(wf)["output"]
    assert output["Error"] == "CardDeclined"
    cause = json.loads(output["Cause"])
    assert cause["errorType"] == "CardDeclined"
    assert cause["errorMessage"] == "insufficient funds"
    assert {"requestId", "stackTrace"} <= set(cause)


RETRY = {
    "StartAt": "Flaky",
    "States": {
        "Flaky": {
            "Type": "Task",
            "Resource": f"{FN}Flaky",
            "TimeoutSeconds": 10,
            "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 2, "MaxAttempts": 2}],
            "End": True,
        }
    },
}


def test_a_retry_is_a_new_fenced_attempt_of_the_same_unit() -> None:
    outcomes = iter([RuntimeError("boom"), "ok"])

    def flaky(ctx: AgentContext) -> Any:
        out = next(outcomes)
        if isinstance(out, Exception):
            raise out
        return out

    w = World(RETRY, Flaky=flaky)
    wf = w.start({})
    w.h.pump()
    unit = w.unit(wf, "V#Flaky#1")
    assert (unit.status, unit.attempt) == (StepStatus.QUEUED, 2)  # the retrier's wait
    assert w.h.receive() == []  # sent with the retrier's delay: not visible yet
    w.h.clock.advance(2)
    w.h.pump()
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert w.view(wf)["output"] == "ok"
    assert w.sent(wf) == [("V#Flaky#1", 1), ("V#Flaky#1", 2)]
    assert [h["o"] for h in w.unit(wf, "V#Flaky#1").history] == ["error", "ok"]


def test_a_stale_attempts_result_is_rejected() -> None:
    holder: dict[str, Any] = {}

    def slow(ctx: AgentContext) -> Any:
        if ctx.attempt == 1:
            # This attempt overruns its TimeoutSeconds; the supervisor times it out and the
            # retrier starts attempt 2 while it still runs.
            holder["h"].clock.advance(11)
            holder["h"].sweep()
            return "late"
        return "fresh"

    w = World(RETRY, Flaky=slow)
    holder["h"] = w.h
    wf = w.start({})
    handled = w.h.pump()
    first = [r for m, r in handled if m.attempt == 1]
    assert [r.outcome for r in first] == [Outcome.FENCED]
    w.h.clock.advance(2)
    w.h.pump()
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert w.view(wf)["output"] == "fresh"  # never the stale attempt's "late"
    assert [h["o"] for h in w.unit(wf, "V#Flaky#1").history] == ["timeout", "ok"]


def test_a_lost_message_is_sent_again_by_the_supervisor() -> None:
    w = World(LOOP, Inc=_inc)
    wf = w.start({"times": 1})
    w.h.pump(on_message=lambda m: "drop")
    assert w.item(wf)["status"] == WorkflowStatus.RUNNING.value
    state = w.h.run(wf, step_seconds=5)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert w.sent(wf) == [("V#Work#1", 1), ("V#Work#1", 1)]


WAIT = {
    "StartAt": "Wait an hour",
    "States": {
        "Wait an hour": {"Type": "Wait", "Seconds": 3600, "Next": "Work"},
        "Work": {"Type": "Task", "Resource": f"{FN}Work", "End": True},
    },
}


def test_a_wait_rests_with_no_message_until_the_supervisor_wakes_it() -> None:
    w = World(WAIT, Work=lambda ctx: "done")
    wf = w.start({})
    start = w.h.clock.now_ms()
    item = w.item(wf)
    assert int(item["due_at"]) == start + 3_600_000  # the watch entry is due at its wake time
    assert w.sent(wf) == []
    w.h.clock.advance(3599)
    w.h.sweep()
    w.h.pump()
    assert w.sent(wf) == [] and w.calls == []
    w.h.clock.advance(1)
    report = w.h.sweep()
    assert report.actions["Wake"] == 1
    w.h.pump()
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    assert w.sent(wf) == [("V#Work#1", 1)]


FAIL = {
    "StartAt": "Check",
    "States": {
        "Check": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.ok", "BooleanEquals": True, "Next": "Fine"}],
            "Default": "Refused",
        },
        "Fine": {"Type": "Succeed"},
        "Refused": {"Type": "Fail", "Error": "NotOk", "Cause": "the input was not ok"},
    },
}


def test_a_fail_state_ends_it_failed_by_design() -> None:
    w = World(FAIL)
    wf = w.start({"ok": False})
    item = w.item(wf)
    assert item["status"] == WorkflowStatus.FAILED.value
    view = w.view(wf)
    assert (view["error"], view["cause"], view["failure"]) == (
        "NotOk",
        "the input was not ok",
        "definition",
    )
    assert "output" not in view
    assert w.h.queue.sent == []
    assert w.h.events is not None
    events = [e for e in w.h.events.published if e.detail_type == "WorkflowFailed"]
    assert len(events) == 1
    detail = events[0].detail
    assert detail["failure"] == "definition"
    assert detail["error"]["type"] == "NotOk"
    assert detail["cause"] == "the input was not ok"
    ok = w.start({"ok": True})
    assert w.item(ok)["status"] == WorkflowStatus.SUCCEEDED.value


def test_an_uncaught_agent_error_fails_it_with_error_and_cause() -> None:
    machine = {"StartAt": "Ship", "States": {"Ship": CATCH["States"]["Ship"]}}
    w = World(machine, Ship=_declined)
    wf = w.start({})
    w.h.pump()
    view = w.view(wf)
    assert w.item(wf)["status"] == WorkflowStatus.FAILED.value
    assert view["error"] == "CardDeclined" and view["failure"] == "definition"
    assert json.loads(view["cause"])["errorMessage"] == "insufficient funds"


def test_a_start_whose_starter_died_is_begun_by_the_supervisor() -> None:
    w = World(LOOP, Inc=_inc)
    w.h.scheduler.asl.begin = lambda workflow_id: False  # type: ignore[method-assign]
    wf = w.start({"times": 1})
    assert "fv" not in w.item(wf)
    del w.h.scheduler.asl.begin
    state = w.h.run(wf, step_seconds=10)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED


def test_units_and_path_live_outside_the_workflow_partition() -> None:
    """A look or a view reads the workflow's partition: it holds the workflow item alone,
    however many visits a loop made."""
    w = World(LOOP, Inc=_inc)
    wf = w.start({"times": 4})
    w.h.pump()
    assert [i["sk"] for i in w.h.store.load(wf_pk(wf))] == [WF_SK]
    assert len(w.h.store.load(visits_pk(wf))) == 4
    assert len(w.h.store.load(path_pk(wf))) == 10


@pytest.mark.parametrize("n", [3, 30])
def test_a_transition_reads_and_writes_the_same_at_any_iteration(n: int) -> None:
    """Reads and writes per iteration stay flat: nothing grows with the iterations done."""
    w = World(LOOP, Inc=_inc)
    counts: list[dict[str, int]] = []
    store = w.h.store
    wf = w.start({"times": n})

    calls = {"n": 0}
    originals = {
        name: getattr(store, name)
        for name in ("get", "get_many", "load", "update", "transact", "query_after")
    }

    def counted(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return originals[name](*args, **kwargs)

        return call

    for name in originals:
        setattr(store, name, counted(name))
    for _ in range(n):
        before = dict(calls)
        (message,) = w.h.receive()
        w.h.runtime.handle(message.task)
        w.h.queue.delete(message.receipt)
        counts.append({k: calls.get(k, 0) - before.get(k, 0) for k in originals})
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    first, last = counts[0], counts[-2]
    assert first == last, (first, last)
    assert calls.get("load", 0) == 0  # no whole read of the workflow, ever


# The Step Functions developer guide's Task state (docs.aws.amazon.com/step-functions/latest/
# dg/state-task.html, "Invoke a function with JSONPath Parameters") as a machine's only state.
DEVELOPER_GUIDE = Path(__file__).parent / "asl" / "lambda_invoke.asl.json"


def test_a_machine_from_the_developer_guide_runs_on_the_engine(tmp_path: Path) -> None:
    (tmp_path / "hello_world.asl.json").write_text(DEVELOPER_GUIDE.read_text())
    definitions = load_directory(tmp_path)
    registry = AgentRegistry()

    @registry.agent("HelloFunction")
    def hello(ctx: AgentContext) -> str:
        return f"Hello, {ctx.input['who']}!"

    h = memory_harness(definitions=definitions, agents=registry)
    wf = h.start("hello_world", {"who": "AWS Step Functions"})
    state = h.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    item = h.store.get(wf_pk(wf), WF_SK)
    assert item is not None
    output = h.scheduler.asl.view(item)["output"]
    assert output["Payload"] == "Hello, AWS Step Functions!"  # lambda:invoke's response
    assert (output["StatusCode"], output["ExecutedVersion"]) == (200, "$LATEST")
    assert [t.pool for t in h.queue.sent] == ["asl"]


def test_a_retry_longer_than_a_queue_delay_is_never_claimed_early() -> None:
    machine = {
        "StartAt": "Flaky",
        "States": {
            "Flaky": {
                "Type": "Task",
                "Resource": f"{FN}Flaky",
                "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 2000}],
                "End": True,
            }
        },
    }
    outcomes = iter([RuntimeError("boom"), "ok"])

    def flaky(ctx: AgentContext) -> Any:
        out = next(outcomes)
        if isinstance(out, Exception):
            raise out
        return out

    w = World(machine, Flaky=flaky)
    wf = w.start({})
    failed_at = w.h.clock.now_ms()
    w.h.pump()
    for _ in range(3):  # the message comes back every 15 minutes, early each time but the last
        w.h.clock.advance(900)
        w.h.pump()
    assert w.item(wf)["status"] == WorkflowStatus.SUCCEEDED.value
    claims = [c for c in w.calls if c[1] == 2]
    assert len(claims) == 1
    second = w.unit(wf, "V#Flaky#1").history[-1]
    assert second["c"] >= failed_at + 2_000_000  # claimed only once the retrier's delay ended


def test_an_output_that_is_not_json_fails_the_task_as_lambda_would() -> None:
    machine = {
        "StartAt": "Odd",
        "States": {
            "Odd": {
                "Type": "Task",
                "Resource": f"{FN}Odd",
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }
    w = World(machine, Odd=lambda ctx: {"nan": float("nan")})
    wf = w.start({})
    w.h.pump()
    assert w.view(wf)["output"]["Error"] == "Lambda.Unknown"


def test_a_cancel_ends_it_and_fences_the_attempt_in_flight() -> None:
    holder: dict[str, Any] = {}

    def cancelled_meanwhile(ctx: AgentContext) -> Any:
        if ctx.step == "V#Work#2":
            holder["w"].h.operations.cancel(holder["wf"])
        return _inc(ctx)

    w = World(LOOP, Inc=cancelled_meanwhile)
    holder["w"] = w
    wf = holder["wf"] = w.start({"times": 5})
    handled = w.h.pump()
    assert w.item(wf)["status"] == WorkflowStatus.CANCELLED.value
    assert [(m.step, r.outcome) for m, r in handled] == [
        ("V#Work#1", Outcome.SUCCEEDED),
        ("V#Work#2", Outcome.FENCED),  # its result landed after the cancel: not recorded
    ]
    assert w.unit(wf, "V#Work#2").status is StepStatus.RUNNING
    assert w.sent(wf) == [("V#Work#1", 1), ("V#Work#2", 1)]
    assert w.path(wf)[-1] == ("Work", 2)  # the path stops where the cancel found it


def test_operator_actions_not_built_for_a_machine_are_refused() -> None:
    from shepherd.errors import InvalidTransition

    w = World(WAIT, Work=lambda ctx: "done")
    wf = w.start({})
    for action in (w.h.operations.pause, w.h.operations.compensate):
        with pytest.raises(InvalidTransition, match="not built for state machines yet"):
            action(wf)
    assert w.item(wf)["status"] == WorkflowStatus.RUNNING.value


@pytest.mark.parametrize("where", ["wait", "task"])
def test_the_machines_timeout_seconds_ends_it_whatever_it_waits_for(where: str) -> None:
    machine = {
        "TimeoutSeconds": 30,
        "StartAt": "Wait an hour",
        "States": {
            "Wait an hour": {"Type": "Wait", "Seconds": 3600, "Next": "Work"},
            "Work": {"Type": "Task", "Resource": f"{FN}Work", "End": True},
        },
    }
    if where == "task":
        machine["StartAt"] = "Work"
        del machine["States"]["Wait an hour"]  # type: ignore[attr-defined]
    w = World(machine, Work=lambda ctx: "done")
    wf = w.start({})
    assert int(w.item(wf)["due_at"]) <= w.h.clock.now_ms() + 30_000  # never later than it
    w.h.pump(on_message=lambda m: "hold")  # a task's agent that never answers
    w.h.clock.advance(29)
    w.h.sweep()
    assert w.item(wf)["status"] == WorkflowStatus.RUNNING.value
    w.h.clock.advance(1)
    report = w.h.sweep()
    assert report.actions["TimeOutMachine"] == 1
    view = w.view(wf)
    assert w.item(wf)["status"] == WorkflowStatus.FAILED.value
    assert (view["error"], view["failure"]) == ("States.Timeout", "definition")
    assert w.calls == []
