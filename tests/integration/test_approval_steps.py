"""Approval steps (issue 25.3), on the real engine over in-memory ports: the step rests
WAITING for a person (no message, no agent); the owner or a listed approver approves (the step
succeeds with the given output or a default one) or rejects (`Rejected`, never retried: the
workflow unwinds); nobody answering within TimeoutSeconds fails it (`ApprovalTimedOut`); an
answer given twice, or as it times out, ends it once; anyone else is told it does not exist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from shepherd import AgentRegistry
from shepherd.clock import iso
from shepherd.definitions import parse_definition
from shepherd.engine.agent import AgentContext
from shepherd.errors import (
    ApprovalNotPending,
    DefinitionError,
    InputInvalid,
    StepNotFound,
    WorkflowNotFound,
)
from shepherd.keys import wf_pk
from shepherd.model import StepStatus, WorkflowStatus, loads
from shepherd.testing import MemoryEngine

APPROVER = "arn:aws:iam::123456789012:role/finance-approver"
DEFINITION = parse_definition(
    {
        "Name": "refund",
        "Steps": [
            {
                "Name": "prepare",
                "Agent": "work",
                "Pool": "p",
                "TimeoutSeconds": 10,
                "Compensation": {"Agent": "undo", "Pool": "p", "TimeoutSeconds": 10},
            },
            {
                "Name": "sign_off",
                "DependsOn": ["prepare"],
                "Approval": {"TimeoutSeconds": 3600, "Approvers": [APPROVER]},
            },
            {
                "Name": "pay",
                "DependsOn": ["sign_off"],
                "Agent": "work",
                "Pool": "p",
                "TimeoutSeconds": 10,
            },
        ],
    },
    "refund.yaml",
)


class Run:
    def __init__(self, definition: Any = DEFINITION) -> None:
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

        self.engine = MemoryEngine({"refund": definition}, agents=registry, owner="alice")
        self.wf = self.engine.start("refund", {"amount": 900})
        self.engine.deliver()  # prepare runs; sign_off rests

    def decide(self, principal: str, *, approve: bool, **kw: Any) -> Any:
        return self.engine.engine.approvals.decide(
            self.wf, "sign_off", principal=principal, approve=approve, **kw
        )

    def item(self) -> dict[str, Any]:
        items = {i["sk"]: i for i in self.engine.store.load(wf_pk(self.wf))}
        return items["S#sign_off"]


def test_the_step_rests_for_a_person_with_no_message_and_no_agent() -> None:
    run = Run()
    rec = run.engine.outcome(run.wf).steps["sign_off"]
    assert rec.status is StepStatus.WAITING
    assert run.engine.queue.depth("p") == 0
    item = run.item()
    assert item["wake_at"] == item["claimed_at"] + 3600 * 1000  # its timeout
    (requested,) = [e for e in run.engine.events.published if e.detail_type == "ApprovalRequested"]
    assert requested.detail["step"] == "sign_off" and requested.detail["approvers"] == [APPROVER]
    assert requested.detail["timeout_at"].endswith("Z")
    run.engine.advance(3000)
    run.engine.sweep()
    assert run.engine.outcome(run.wf).steps["sign_off"].status is StepStatus.WAITING


def test_the_owner_approves_with_a_comment_and_the_default_output_reaches_the_next_step() -> None:
    run = Run()
    rec = run.decide("alice", approve=True, comment="looks right")
    assert rec.status is StepStatus.SUCCEEDED
    outcome = run.engine.run(run.wf, max_seconds=60)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    expected = {"approved": True, "by": "alice", "comment": "looks right"}
    assert run.given["pay"] == {"sign_off": expected}
    decision = loads(run.item()["decision"])
    assert decision["verdict"] == "approved" and decision["by"] == "alice"
    assert decision["comment"] == "looks right" and isinstance(decision["at"], int)


def test_a_listed_approver_may_answer_with_an_output_and_others_are_told_nothing() -> None:
    run = Run()
    with pytest.raises(WorkflowNotFound):
        run.decide("mallory", approve=True)
    with pytest.raises(WorkflowNotFound):  # not even which steps it has
        run.engine.engine.approvals.decide(run.wf, "pay", principal="mallory", approve=True)
    with pytest.raises(StepNotFound):
        run.engine.engine.approvals.decide(run.wf, "pay", principal="alice", approve=True)
    assert run.engine.outcome(run.wf).steps["sign_off"].status is StepStatus.WAITING
    run.decide(APPROVER, approve=True, output={"limit": 1000})
    assert run.engine.run(run.wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED
    assert run.given["pay"] == {"sign_off": {"limit": 1000}}


def test_an_approver_named_without_an_arn_is_that_caller_of_the_local_stack_only() -> None:
    """`Approvers: [bob]` (issue 25.3: "locally, caller names"): the local stack's caller bob
    acts as moto's IAM user bob, who may answer and sees it in GET /approvals; a deployed
    principal named bob, in any real account, may not."""
    from shepherd.engine import inbox

    local_bob = "arn:aws:iam::000000000000:user/bob"
    data = json.loads(DEFINITION.canonical_json)
    data["Steps"][1]["Approval"]["Approvers"] = ["bob"]
    run = Run(parse_definition(data, "refund.yaml"))
    listed = inbox.pending(run.engine.store, local_bob, limit=10)
    assert [(p.workflow_id, p.step) for p in listed.items] == [(run.wf, "sign_off")]
    with pytest.raises(WorkflowNotFound):
        run.decide("arn:aws:iam::123456789012:user/bob", approve=True)
    rec = run.decide(local_bob, approve=True)
    assert rec.status is StepStatus.SUCCEEDED


def test_a_slow_answer_leaves_no_successor_due_before_the_watch_entry() -> None:
    """Found by the fault simulator (seeds 4888 and 6944): the answer read its time, then
    stored its output (a slow payload put), then pulled the watch entry to `now + g`. The
    successor it dispatched was due `DispatchTimeoutSeconds` after the answer's older time,
    before the entry, by the put's latency (invariant 3). The time is read after the pull."""
    data = json.loads(DEFINITION.canonical_json)
    data["DispatchTimeoutSeconds"] = 2  # the soonest deadline the answer creates
    definition = parse_definition(data, "refund.yaml")
    run = Run(definition)
    run.engine.advance(5)
    run.engine.sweep()  # a look moves the entry to the approval's timeout, an hour on
    scheduler = run.engine.engine.scheduler
    real_keep = scheduler.keep_for

    def slow_keep(*args: Any, **kwargs: Any) -> Any:
        run.engine.advance(0.3)  # the payload store answers 300 ms later
        return real_keep(*args, **kwargs)

    scheduler.keep_for = slow_keep  # type: ignore[method-assign]
    # The moment the answer lands (before anything after it moves the entry): a look then
    # must find the successor's dispatch by the entry.
    landed: list[dict[str, Any]] = []
    real_write = scheduler.executor.step_with

    def write(*args: Any, **kwargs: Any) -> Any:
        updated = real_write(*args, **kwargs)
        landed.append({i["sk"]: i for i in run.engine.store.load(wf_pk(run.wf))})
        return updated

    scheduler.executor.step_with = write  # type: ignore[method-assign]
    run.decide(APPROVER, approve=True, output={"limit": 1000})
    (items,) = landed
    answered = int(items["S#sign_off"]["finished_at"])
    pay_due = answered + definition.dispatch_timeout_seconds * 1000  # if its message is lost
    assert int(items["#WF"]["due_at"]) <= pay_due


def test_a_rejection_fails_the_step_for_good_and_the_workflow_unwinds() -> None:
    run = Run()
    rec = run.decide(APPROVER, approve=False, comment="too large")
    assert rec.status is StepStatus.FAILED
    outcome = run.engine.run(run.wf, max_seconds=120)
    assert outcome.status is WorkflowStatus.COMPENSATED
    sign_off = outcome.steps["sign_off"]
    assert sign_off.error is not None and sign_off.error.name == "Rejected"
    assert sign_off.error.message == f"rejected by {APPROVER}: too large"
    assert sign_off.attempts[-1].outcome.value == "FAILED"
    assert run.undone == ["prepare"] and "pay" not in run.given
    assert loads(run.item()["decision"])["verdict"] == "rejected"


def test_an_answer_given_twice_ends_the_step_once() -> None:
    run = Run()
    run.decide("alice", approve=True)
    with pytest.raises(ApprovalNotPending) as err:
        run.decide(APPROVER, approve=False)
    assert "is not waiting for an answer (it is SUCCEEDED)" in str(err.value)
    assert run.engine.run(run.wf, max_seconds=60).status is WorkflowStatus.SUCCEEDED
    assert len(run.item()["history"]) == 1


def test_nobody_answering_times_it_out_and_a_late_answer_is_refused() -> None:
    run = Run()
    run.engine.advance(3600)
    run.engine.sweep()
    rec = run.engine.outcome(run.wf).steps["sign_off"]
    assert rec.status is StepStatus.FAILED
    assert rec.error is not None and rec.error.name == "ApprovalTimedOut"
    with pytest.raises(ApprovalNotPending):
        run.decide("alice", approve=True)
    outcome = run.engine.run(run.wf, max_seconds=120)
    assert outcome.status is WorkflowStatus.COMPENSATED
    assert "StepTimedOut" in outcome.events


def test_an_answer_planned_before_the_timeout_landed_loses_its_write() -> None:
    """The answer read the step WAITING; the supervisor's timeout lands first; the answer's
    conditional write then fails: one end, and the person is told."""
    run = Run()
    approvals = run.engine.engine.approvals
    scheduler = approvals.scheduler
    original = scheduler.pull_due

    def timeout_first(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        run.engine.advance(3600)
        run.engine.sweep()

    scheduler.pull_due = timeout_first  # type: ignore[method-assign]
    with pytest.raises(ApprovalNotPending) as err:
        run.decide("alice", approve=True)
    scheduler.pull_due = original  # type: ignore[method-assign]
    assert "(it is FAILED)" in str(err.value)
    assert [h["o"] for h in run.item()["history"]] == ["timeout"]


def test_cancel_while_waiting_for_an_answer_cancels_the_approval() -> None:
    run = Run()
    run.engine.cancel(run.wf)
    outcome = run.engine.run(run.wf, max_seconds=60)
    assert outcome.status is WorkflowStatus.CANCELLED
    assert outcome.steps["sign_off"].status is StepStatus.CANCELLED
    with pytest.raises(ApprovalNotPending):
        run.decide("alice", approve=True)
    assert run.undone == ["prepare"]


def test_a_comment_or_output_over_its_cap_is_refused_before_anything_is_written() -> None:
    run = Run()
    with pytest.raises(InputInvalid) as err:
        run.decide("alice", approve=True, comment="x" * 1001)
    assert err.value.field == "comment"
    with pytest.raises(InputInvalid) as err:
        run.decide("alice", approve=True, output={"bad": float("nan")})
    assert err.value.field == "output"
    assert run.item()["status"] == "WAITING"


@pytest.mark.parametrize(
    ("approval", "expected"),
    [
        ({}, "refund.yaml: Steps[0] (s).Approval.TimeoutSeconds: is required"),
        (
            {"TimeoutSeconds": 60, "Approvers": ["a"] * 11},
            "Steps[0] (s).Approval.Approvers: must have at most 10 items",
        ),
        (
            {"TimeoutSeconds": 60, "Approvers": [""]},
            "Steps[0] (s).Approval.Approvers[0]: must be at least 1 character long",
        ),
    ],
)
def test_a_bad_approval_names_the_file_the_step_and_the_field(
    approval: dict[str, Any], expected: str
) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(
            {"Name": "refund", "Steps": [{"Name": "s", "Approval": approval}]}, "refund.yaml"
        )
    assert expected in str(err.value)


def test_an_approval_step_names_no_agent_and_counts_its_timeout_in_reach_gaps() -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(
            {
                "Name": "refund",
                "Steps": [{"Name": "s", "Approval": {"TimeoutSeconds": 60}, "Pool": "p"}],
            },
            "refund.yaml",
        )
    assert "Steps[0] (s): an Approval step names no Pool" in str(err.value)
    assert json.loads(DEFINITION.canonical_json)["Steps"][1]["Approval"]["TimeoutSeconds"] == 3600
    alone = parse_definition(
        {"Name": "ask", "Steps": [{"Name": "s", "Approval": {"TimeoutSeconds": 30}}]}, "ask.yaml"
    )
    assert alone.reach_gap_ms["s"] == 30_000  # its timeout, under the 60 s dispatch grace
    assert alone.tasks == () and alone.agents() == set()


def test_a_definition_without_compensations_or_tasks_unwinds_after_a_rejection() -> None:
    """Found by the contract fuzz: the unwind's deadline took the smallest of no
    compensations (a TypeError) for a definition that has none."""
    definition = parse_definition(
        {"Name": "ask", "Steps": [{"Name": "s", "Approval": {"TimeoutSeconds": 30}}]}, "ask.yaml"
    )
    assert definition.compensation_gap_ms == 60_000 and definition.watch_gap_ms == 60_000
    engine = MemoryEngine({"ask": definition}, owner="alice")
    wf = engine.start("ask", {})
    engine.engine.approvals.decide(wf, "s", principal="alice", approve=False)
    assert engine.run(wf, max_seconds=30).status is WorkflowStatus.COMPENSATED


def test_each_answer_is_announced_with_who_answered_and_when_and_a_timeout_with_nobody() -> None:
    """An answer is an operator action (issue 29.4): ApprovalAnswered says who and when, the
    verdict and the comment; an approval's success announces nothing else, so without it the
    history would not say who let the workflow through."""
    approved = Run()
    approved.engine.advance(5)
    approved.decide(APPROVER, approve=True, comment="fine")
    (answer,) = [e for e in approved.engine.events.published if e.detail_type == "ApprovalAnswered"]
    decision = loads(approved.item()["decision"])
    assert answer.detail["step"] == "sign_off" and answer.detail["attempt"] == 1
    assert answer.detail["verdict"] == "approved" and answer.detail["by"] == APPROVER
    assert answer.detail["comment"] == "fine"
    assert answer.detail["at"] == iso(decision["at"])

    rejected = Run()
    rejected.decide("alice", approve=False)
    answers = [e for e in rejected.engine.events.published if e.detail_type == "ApprovalAnswered"]
    assert [(e.detail["verdict"], e.detail["by"]) for e in answers] == [("rejected", "alice")]
    assert "comment" not in answers[0].detail
    types = [e.detail_type for e in rejected.engine.events.published]
    assert types.index("ApprovalAnswered") < types.index("StepFailed")  # why it failed, first
    schema = Path(__file__).resolve().parents[2] / "docs/events/ApprovalAnswered.schema.json"
    check = fastjsonschema.compile(json.loads(schema.read_text()))
    for event in (answer, *answers):  # as documented
        check(event.detail)

    nobody = Run()
    nobody.engine.advance(3600)
    nobody.engine.sweep()
    assert "ApprovalAnswered" not in [e.detail_type for e in nobody.engine.events.published]
