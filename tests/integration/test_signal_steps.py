"""Signals and WaitForSignal steps (issue 37.1, 37.2), on the real engine over in-memory
ports: a signal sent before its step waits is kept, in order, until one does; a step that
waits takes the oldest kept signal of its name (at once if one came first), its output the
payload; its timeout fails it with `States.Timeout`; a signal is taken at most once, by one
wait, and a timed-out wait never takes one; a repeated signal id is kept once; the owner or a
listed sender may send, anyone else is told the workflow does not exist."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd import AgentRegistry
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.errors import (
    DefinitionError,
    InputInvalid,
    InvalidTransition,
    PayloadTooLarge,
    SignalIdConflict,
    SignalUnknown,
    TooManySignals,
    WorkflowNotFound,
)
from shepherd.keys import signal_queue_sk, signals_pk, wf_pk
from shepherd.limits import MAX_SIGNALS_KEPT
from shepherd.model import StepStatus, WorkflowStatus, loads
from shepherd.testing import MemoryEngine

SENDER = "arn:aws:iam::123456789012:role/carrier"


def order_definition(timeout: int = 3600, **extra: Any) -> Any:
    return parse_definition(
        {
            "Name": "order",
            "SignalSenders": [SENDER],
            **extra,
            "Steps": [
                {
                    "Name": "reserve",
                    "Agent": "work",
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                    "Compensation": {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
                },
                {
                    "Name": "amend",
                    "DependsOn": ["reserve"],
                    "WaitForSignal": {"Name": "amended", "TimeoutSeconds": timeout},
                },
                {
                    "Name": "ship",
                    "DependsOn": ["amend"],
                    "Agent": "work",
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                },
            ],
        },
        "order.yaml",
    )


class Run:
    def __init__(self, definition: Any = None, *, hold: bool = False) -> None:
        self.given: dict[str, Any] = {}
        self.undone: list[str] = []
        registry = AgentRegistry()

        @registry.agent("work")
        def work(ctx: AgentContext) -> dict[str, Any]:
            self.given[ctx.step] = dict(ctx.dependencies)
            return {"step": ctx.step}

        @registry.agent("undo")
        def undo(ctx: AgentContext) -> None:
            self.undone.append(ctx.step)

        self.engine = MemoryEngine(
            {"order": definition or order_definition()}, agents=registry, owner="alice"
        )
        self.wf = self.engine.start("order", {"order_id": "o-1"})
        if not hold:
            self.engine.deliver()  # reserve runs; amend rests

    def send(self, payload: Any, principal: str = "alice", **kw: Any) -> Any:
        return self.engine.engine.signals.send(
            self.wf, kw.pop("name", "amended"), payload, principal=principal, **kw
        )

    def status(self, step: str = "amend") -> StepStatus:
        return self.engine.outcome(self.wf).steps[step].status

    def kept(self) -> int:
        counter = self.engine.store.get(signals_pk(self.wf), "#SIG")
        return 0 if counter is None else int(counter["kept"])


def test_the_step_rests_with_no_message_until_its_signal_and_its_output_is_the_payload() -> None:
    run = Run()
    assert run.status() is StepStatus.WAITING
    assert run.engine.queue.depth("p") == 0
    run.engine.advance(600)
    run.engine.sweep()
    assert run.status() is StepStatus.WAITING
    receipt = run.send({"quantity": 3})
    assert receipt.taken_by == "amend" and not receipt.duplicate
    assert run.status() is StepStatus.SUCCEEDED
    outcome = run.engine.run(run.wf, max_seconds=60)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert run.given["ship"] == {"amend": {"quantity": 3}}
    assert run.kept() == 0


def test_a_signal_sent_before_the_step_waits_is_kept_and_taken_at_once_in_order() -> None:
    run = Run(hold=True)  # reserve has not run: nothing waits yet
    first = run.send({"n": 1})
    second = run.send({"n": 2})
    assert (first.sequence, second.sequence) == (0, 1)
    assert first.taken_by is None and run.kept() == 2
    run.engine.deliver()  # reserve succeeds; amend takes the oldest kept signal as it rests
    assert run.status() is StepStatus.SUCCEEDED
    assert run.engine.outcome(run.wf).steps["amend"].output == {"n": 1}
    assert run.kept() == 1  # the second stays kept (no other step waits for it)
    assert run.engine.run(run.wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED


def test_its_timeout_fails_it_with_states_timeout_and_a_late_signal_is_never_taken() -> None:
    run = Run(order_definition(timeout=30))
    run.engine.advance(31)
    run.engine.sweep()
    outcome = run.engine.run(run.wf, max_seconds=60)
    assert outcome.status is WorkflowStatus.COMPENSATED
    amend = outcome.steps["amend"]
    assert amend.status is StepStatus.FAILED
    assert amend.error is not None and amend.error.name == "States.Timeout"
    assert run.undone == ["reserve"]
    with pytest.raises(InvalidTransition):
        run.send({"late": True})  # the workflow is over: 409
    assert run.kept() == 0


def test_a_signal_kept_before_the_deadline_but_not_handed_over_is_taken_not_timed_out() -> None:
    """A sender that stopped between keeping a signal and handing it over: the deadline's
    look takes it (it came in time) instead of timing the step out."""
    run = Run(order_definition(timeout=30))
    signals = run.engine.engine.signals
    signals._hand_over = lambda *a, **k: None  # type: ignore[method-assign]  # the sender dies
    run.send({"n": 1})
    assert run.status() is StepStatus.WAITING
    run.engine.advance(31)
    run.engine.sweep()
    assert run.status() is StepStatus.SUCCEEDED
    assert run.engine.run(run.wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED


def test_a_signal_sent_after_the_deadline_but_before_the_look_does_not_rescue_the_step() -> None:
    run = Run(order_definition(timeout=30))
    run.engine.engine.signals._hand_over = lambda *a, **k: None  # type: ignore[method-assign]
    run.engine.advance(31)
    run.send({"too": "late"})
    run.engine.sweep()
    assert run.status() is StepStatus.FAILED
    assert run.kept() == 1  # kept, never taken: the timed-out wait took nothing


def test_a_repeated_signal_id_is_kept_once_and_the_same_id_for_another_signal_is_409() -> None:
    run = Run(hold=True)
    one = run.send({"n": 1}, signal_id="carrier-42")
    again = run.send({"n": 1}, signal_id="carrier-42")
    assert again.duplicate and again.sequence == one.sequence and run.kept() == 1
    with pytest.raises(SignalIdConflict):
        run.send({"n": 2}, signal_id="carrier-42")
    assert run.kept() == 1
    run.engine.deliver()
    assert run.status() is StepStatus.SUCCEEDED
    # Taken already: the repeat still answers as accepted, and is not kept again.
    assert run.send({"n": 1}, signal_id="carrier-42").duplicate
    assert run.kept() == 0


def test_who_may_send_what_and_how_much() -> None:
    run = Run(
        parse_definition(
            {
                "Name": "order",
                "SignalSenders": [SENDER],
                "Steps": [
                    {"Name": "amend", "WaitForSignal": {"Name": "amended", "TimeoutSeconds": 60}},
                    {"Name": "other", "WaitForSignal": {"Name": "cancelled", "TimeoutSeconds": 9}},
                    {
                        "Name": "ship",
                        "DependsOn": ["amend", "other"],
                        "Agent": "work",
                        "Pool": "p",
                        "TimeoutSeconds": 10,
                    },
                ],
            },
            "order.yaml",
        ),
        hold=True,
    )
    with pytest.raises(WorkflowNotFound):
        run.send({}, principal="mallory")
    with pytest.raises(SignalUnknown):
        run.send({}, name="nobody_waits")
    with pytest.raises(InputInvalid):
        run.send(float("nan"))
    inline = run.engine.engine.ports.payloads.inline_bytes
    with pytest.raises(PayloadTooLarge):
        run.send("x" * inline)
    assert run.kept() == 0
    receipt = run.send({"by": "carrier"}, principal=SENDER, signal_id="c-1")  # a listed sender
    assert receipt.taken_by == "amend"  # the root rests already
    with pytest.raises(SignalIdConflict):  # the same id for a signal of another name
        run.send({"by": "carrier"}, principal=SENDER, signal_id="c-1", name="cancelled")
    for i in range(MAX_SIGNALS_KEPT):
        run.send({"i": i})
    assert run.kept() == MAX_SIGNALS_KEPT
    with pytest.raises(TooManySignals):
        run.send({"one": "more"}, signal_id="fresh")
    assert run.kept() == MAX_SIGNALS_KEPT
    assert run.engine.store.get(signals_pk(run.wf), "D#fresh") is None


def test_two_steps_waiting_for_one_name_each_take_one_signal() -> None:
    definition = parse_definition(
        {
            "Name": "order",
            "Steps": [
                {"Name": "a", "WaitForSignal": {"Name": "go", "TimeoutSeconds": 60}},
                {"Name": "b", "WaitForSignal": {"Name": "go", "TimeoutSeconds": 60}},
            ],
        },
        "order.yaml",
    )
    run = Run(definition, hold=True)
    assert run.send({"n": 1}, name="go").taken_by == "a"
    assert run.status("b") is StepStatus.WAITING
    assert run.send({"n": 2}, name="go").taken_by == "b"
    outcome = run.engine.outcome(run.wf)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert (outcome.steps["a"].output, outcome.steps["b"].output) == ({"n": 1}, {"n": 2})
    with pytest.raises(InvalidTransition):
        run.send({"n": 3}, name="go")


def test_a_signal_is_taken_once_when_its_wait_and_the_timeout_race() -> None:
    """The step's guarded write decides: the take that loses to the timeout writes nothing
    (the signal stays kept, its queue's head unmoved)."""
    run = Run(order_definition(timeout=30))
    signals = run.engine.engine.signals
    signals._hand_over = lambda *a, **k: None  # type: ignore[method-assign]
    run.engine.advance(31)
    loaded = run.engine.engine.scheduler.load(run.wf)
    assert loaded is not None
    state, definition = loaded
    stale = state.steps["amend"]
    run.send({"n": 1})  # after the deadline: not handed over, and not taken by the timeout
    run.engine.sweep()  # times it out
    from shepherd.engine import signals as module

    assert module.take(run.engine.engine.scheduler, state, definition, stale) is None
    assert run.status() is StepStatus.FAILED
    queue = run.engine.store.get(signals_pk(run.wf), signal_queue_sk("amended"))
    assert queue is not None and queue["head"] == 0 and run.kept() == 1


def test_the_decision_says_which_signal_the_step_took() -> None:
    run = Run()
    run.send({"n": 1}, principal=SENDER, signal_id="s-1")
    items = {i["sk"]: i for i in run.engine.store.load(wf_pk(run.wf))}
    decision = loads(items["S#amend"]["decision"])
    assert decision["signal"] == "amended" and decision["signal_id"] == "s-1"
    assert decision["sender"] == SENDER and decision["sequence"] == 0


def test_a_wait_for_signal_step_names_no_task_fields() -> None:
    with pytest.raises(DefinitionError, match="WaitForSignal step names no Agent"):
        parse_definition(
            {
                "Name": "bad",
                "Steps": [
                    {
                        "Name": "w",
                        "Agent": "x",
                        "WaitForSignal": {"Name": "go", "TimeoutSeconds": 5},
                    }
                ],
            },
            "bad.yaml",
        )


def test_a_definition_without_signals_keeps_its_version() -> None:
    plain = {
        "Name": "order",
        "Steps": [{"Name": "a", "Agent": "work", "Pool": "p", "TimeoutSeconds": 10}],
    }
    assert "SignalSenders" not in parse_definition(plain, "o.yaml").canonical_json


def test_the_graph_names_the_signal_a_step_waits_for() -> None:
    from shepherd_cli.render import graph

    assert "wait for signal amended" in graph(order_definition())


def _branching(on_timeout: str | None) -> Any:
    wait: dict[str, Any] = {"Name": "amended", "TimeoutSeconds": 60}
    if on_timeout is not None:
        wait["OnTimeout"] = on_timeout

    def branch(name: str, timed_out: bool) -> dict[str, Any]:
        rule = {"Variable": "$.steps.amend.output.timed_out", "IsPresent": timed_out}
        return {
            "Name": name,
            "DependsOn": ["amend"],
            "Condition": rule,
            "Agent": "work",
            "Pool": "p",
            "TimeoutSeconds": 10,
        }

    return parse_definition(
        {
            "Name": "order",
            "Steps": [
                {
                    "Name": "reserve",
                    "Agent": "work",
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                    "Compensation": {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
                },
                {"Name": "amend", "DependsOn": ["reserve"], "WaitForSignal": wait},
                branch("apply", False),
                branch("as_placed", True),
            ],
        },
        "order.yaml",
    )


def test_on_timeout_continue_takes_the_timers_branch_and_a_signal_the_other() -> None:
    """`OnTimeout: CONTINUE` (issue 37.2; native definitions have no Catch): the timeout
    succeeds with `{"timed_out": true}`, and a `Condition` on that output picks a branch for
    the timer and one for the signal; the workflow never unwinds."""
    timer = Run(_branching("CONTINUE"))
    outcome = timer.engine.run(timer.wf, max_seconds=300)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["amend"].output == {"timed_out": True}
    assert outcome.steps["as_placed"].status is StepStatus.SUCCEEDED
    assert outcome.steps["apply"].status is StepStatus.SKIPPED
    signalled = Run(_branching("CONTINUE"))
    assert signalled.send({"qty": 2}).taken_by == "amend"
    outcome = signalled.engine.run(signalled.wf, max_seconds=300)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.steps["apply"].status is StepStatus.SUCCEEDED
    assert outcome.steps["as_placed"].status is StepStatus.SKIPPED
    # Without it, the timeout fails the step and the workflow unwinds (as before).
    failed = Run(_branching(None))
    assert failed.engine.run(failed.wf, max_seconds=300).status is WorkflowStatus.COMPENSATED
    assert _branching(None).content_hash != _branching("CONTINUE").content_hash
    assert '"OnTimeout"' not in _branching(None).canonical_json
