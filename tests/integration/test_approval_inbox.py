"""The approval inbox (issue 25.3, docs/architecture.md "The approval inbox"), on DynamoDB
(moto) and the in-memory store: an Approval step starting to wait writes one inbox item per
principal who may answer, in the same transaction; the answer, the timeout and a cancel take
them out of the sparse `inbox` index in theirs; a new attempt after a resume lists it again.
A principal's pending approvals read newest first across workflows, page by page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from shepherd import AgentRegistry
from shepherd.definitions import parse_definition
from shepherd.engine import inbox
from shepherd.engine.agent import AgentContext
from shepherd.keys import INBOX_SHARDS, inbox_item_sk, inbox_pk, inbox_shard, wf_pk
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.testing import MemoryStore
from support import Harness, engine_stores, moto_harness

APPROVER = "arn:aws:iam::123456789012:role/finance-approver"
BOB = "arn:aws:iam::000000000000:user/bob"  # `bob` in Approvers: the local stack's caller bob
OWNER = "arn:aws:iam::123456789012:user/alice"  # owners are IAM principals


def _definition(on_failure: str = "COMPENSATE", name: str = "refund") -> Any:
    return parse_definition(
        {
            "Name": name,
            "OnFailure": on_failure,
            "Steps": [
                {
                    "Name": "sign_off",
                    # The owner listed again: one inbox item each, not two for the owner.
                    "Approval": {"TimeoutSeconds": 3600, "Approvers": [APPROVER, OWNER, "bob"]},
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
        f"{name}.yaml",
    )


def _registry() -> AgentRegistry:
    registry = AgentRegistry()

    @registry.agent("work")
    def work(ctx: AgentContext) -> dict[str, Any]:
        return {"paid": True}

    return registry


@pytest.fixture(params=engine_stores(dynamodb="dynamodb"))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    definitions = {"refund": _definition(), "held_refund": _held()}
    if request.param == "memory":
        yield Harness(MemoryStore(), definitions=definitions, agents=_registry())
        return
    with moto_harness(definitions=definitions, agents=_registry()) as h:
        yield h


def _held() -> Any:
    return _definition("PAUSE", "held_refund")


def _start(h: Harness, wf_type: str = "refund") -> str:
    return h.start(wf_type, {"amount": 900}, owner=OWNER)


def _inbox_items(h: Harness, workflow_id: str) -> dict[str, dict[str, Any]]:
    """The workflow's inbox items (A#...) as the table holds them, listed or not."""
    return {i["sk"]: i for i in h.store.load(wf_pk(workflow_id)) if i["sk"].startswith("A#")}


def _listed(h: Harness, principal: str, limit: int = 100) -> list[tuple[str, str]]:
    page = inbox.pending(h.store, principal, limit=limit)
    return [(p.workflow_id, p.step) for p in page.items]


def test_waiting_writes_one_item_per_principal_with_the_step_and_a_stranger_sees_none(
    harness: Harness,
) -> None:
    h = harness
    wf = _start(h)
    rec = h.step(wf, "sign_off")
    assert rec.status is StepStatus.WAITING and rec.wake_at is not None
    items = _inbox_items(h, wf)
    assert set(items) == {inbox_item_sk("sign_off", p) for p in (OWNER, APPROVER, BOB)}
    item = items[inbox_item_sk("sign_off", APPROVER)]
    assert item["inbox_pk"] == inbox_pk(APPROVER, inbox_shard(wf))
    assert item["inbox_sk"] == f"{rec.claimed_at:013d}#{wf}#sign_off"
    assert item["wf_type"] == "refund" and item["step"] == "sign_off"
    assert item["requested_at"] == rec.claimed_at
    assert item["approval_due_at"] == rec.wake_at == rec.claimed_at + 3600 * 1000
    for principal in (OWNER, APPROVER, BOB):
        page = inbox.pending(h.store, principal, limit=10)
        assert [(p.workflow_id, p.step, p.wf_type) for p in page.items] == [
            (wf, "sign_off", "refund")
        ]
        assert page.items[0].requested_at == rec.claimed_at
        assert page.items[0].due_at == rec.wake_at
        assert page.last is None
    assert _listed(h, "mallory") == []
    # A whole-workflow read is not fooled by them: they are not steps.
    assert set(h.state(wf).steps) == {"sign_off", "pay"}


@pytest.mark.parametrize("approve", [True, False])
def test_an_answer_takes_the_approval_out_of_every_inbox(harness: Harness, approve: bool) -> None:
    h = harness
    wf = _start(h)
    h.engine.approvals.decide(wf, "sign_off", principal=BOB, approve=approve)
    for principal in (OWNER, APPROVER, BOB):
        assert _listed(h, principal) == []
    items = _inbox_items(h, wf)
    assert len(items) == 3
    for item in items.values():  # out of the index; the item is left to TTL
        assert "inbox_pk" not in item and "inbox_sk" not in item
        assert item["expires_at"] > h.clock.now_ms() // 1000
    final = h.run(wf)
    assert final.workflow.status is (
        WorkflowStatus.SUCCEEDED if approve else WorkflowStatus.COMPENSATED
    )


def test_the_timeout_takes_it_out_of_every_inbox(harness: Harness) -> None:
    h = harness
    wf = _start(h)
    h.clock.advance(3600)
    h.sweep()
    assert h.step(wf, "sign_off").status is StepStatus.FAILED
    assert _listed(h, OWNER) == [] and _listed(h, APPROVER) == []


def test_a_cancel_takes_it_out_of_every_inbox(harness: Harness) -> None:
    h = harness
    wf = _start(h)
    h.operations.cancel(wf, owner=OWNER)
    assert h.step(wf, "sign_off").status is StepStatus.CANCELLED
    assert h.run(wf).workflow.status is WorkflowStatus.CANCELLED
    assert _listed(h, OWNER) == [] and _listed(h, BOB) == []


def test_a_new_attempt_after_a_resume_is_listed_again(harness: Harness) -> None:
    h = harness
    wf = _start(h, "held_refund")
    first = h.step(wf, "sign_off")
    h.engine.approvals.decide(wf, "sign_off", principal=OWNER, approve=False)
    assert h.status(wf) is WorkflowStatus.PAUSED
    assert _listed(h, APPROVER) == []
    h.clock.advance(5)
    h.operations.resume(wf, owner=OWNER)
    rec = h.step(wf, "sign_off")
    assert rec.status is StepStatus.WAITING and rec.attempt == first.attempt + 1
    # Asked again: the rejection was the last attempt's answer, not this one's.
    item = h.store.get(wf_pk(wf), "S#sign_off")
    assert item is not None and "decision" not in item and "fail_reason" not in item
    page = inbox.pending(h.store, APPROVER, limit=10)
    assert [(p.workflow_id, p.requested_at) for p in page.items] == [(wf, rec.claimed_at)]
    assert all("expires_at" not in i for i in _inbox_items(h, wf).values())
    h.engine.approvals.decide(wf, "sign_off", principal=APPROVER, approve=True)
    assert h.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    assert _listed(h, APPROVER) == []


def test_newest_first_across_workflows_and_shards_page_by_page(harness: Harness) -> None:
    h = harness
    started = []
    for _ in range(9):
        started.append(_start(h))
        h.clock.advance(1)
    assert len({inbox_shard(w) for w in started}) > 1, "the workflows span several shards"
    newest_first = list(reversed(started))
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        page = inbox.pending(h.store, APPROVER, limit=4, before=before)
        pages += 1
        seen += [p.workflow_id for p in page.items]
        if page.last is None:
            break
        before = page.last
    assert seen == newest_first and pages == 3
    # Answered ones leave; the rest keep their order.
    h.engine.approvals.decide(started[4], "sign_off", principal=APPROVER, approve=True)
    assert [w for w, _ in _listed(h, APPROVER)] == [w for w in newest_first if w != started[4]]


def test_a_full_last_page_says_no_more() -> None:
    h = Harness(MemoryStore(), definitions={"refund": _definition()}, agents=_registry())
    for _ in range(4):
        _start(h)
        h.clock.advance(1)
    page = inbox.pending(h.store, OWNER, limit=4)
    assert len(page.items) == 4 and page.last is None
    assert INBOX_SHARDS == 32


def test_an_answer_that_loses_to_the_timeout_changes_no_inbox_item_and_says_why(
    harness: Harness,
) -> None:
    """The answer read the step WAITING; the timeout's transaction lands first; the answer's
    transaction then loses on the step (its inbox writes with it) and is told the status."""
    from shepherd.errors import ApprovalNotPending

    h = harness
    wf = _start(h)
    scheduler = h.engine.approvals.scheduler
    original = scheduler.pull_due

    def timeout_first(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        h.clock.advance(3600)
        h.sweep()

    scheduler.pull_due = timeout_first  # type: ignore[method-assign]
    try:
        with pytest.raises(ApprovalNotPending) as err:
            h.engine.approvals.decide(wf, "sign_off", principal=OWNER, approve=True)
    finally:
        scheduler.pull_due = original  # type: ignore[method-assign]
    assert "(it is FAILED)" in str(err.value)
    expiries = {i["expires_at"] for i in _inbox_items(h, wf).values()}
    assert len(expiries) == 1  # written once, by the timeout
    assert _listed(h, OWNER) == []


def test_eleven_principals_fit_one_transaction_on_dynamodb() -> None:
    """The owner and MAX_APPROVERS others: 12 writes with the step's (DynamoDB takes 100)."""
    from shepherd import limits

    approvers = [f"arn:aws:iam::123456789012:role/a{n}" for n in range(limits.MAX_APPROVERS)]
    definition = parse_definition(
        {
            "Name": "wide",
            "Steps": [
                {"Name": "sign_off", "Approval": {"TimeoutSeconds": 60, "Approvers": approvers}}
            ],
        },
        "wide.yaml",
    )
    with moto_harness(definitions={"wide": definition}, agents=_registry()) as h:
        wf = h.start("wide", {}, owner=OWNER)
        assert len(_inbox_items(h, wf)) == 1 + limits.MAX_APPROVERS
        for principal in (OWNER, *approvers):
            assert _listed(h, principal) == [(wf, "sign_off")]
        h.engine.approvals.decide(wf, "sign_off", principal=approvers[-1], approve=True)
        assert all(_listed(h, p) == [] for p in (OWNER, *approvers))
