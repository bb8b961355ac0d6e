"""Table records -> API bodies. Internal fields (lease owner, tokens, shard keys) never leave."""

from __future__ import annotations

from shepherd.clock import iso
from shepherd.definitions import Definition
from shepherd.engine.pools import PoolView
from shepherd.engine.queries import WorkflowSummary, workflow_output
from shepherd.model import StepRecord, WorkflowState, loads

from shepherd_handlers.models import (
    AttemptView,
    BacklogView,
    DefinitionSummaryView,
    DefinitionView,
    StepView,
    WorkflowSummaryView,
    WorkflowView,
)
from shepherd_handlers.models import PoolView as PoolBody


def step_view(rec: StepRecord) -> StepView:
    return StepView(
        name=rec.name,
        status=rec.status.value,
        attempt=rec.attempt,
        started_at=iso(rec.claimed_at),
        heartbeat_at=iso(rec.heartbeat_at),
        dispatched_at=iso(rec.dispatched_at),
        available_at=iso(rec.available_at),
        first_claimed_at=iso(rec.first_claimed_at),
        finished_at=iso(rec.finished_at),
        dispatches=rec.dispatches,
        error=loads(rec.error),
        output=loads(rec.output),
        details=loads(rec.details),
        input=loads(rec.input),
        attempts=[
            AttemptView(
                attempt=h["a"],
                outcome=h["o"],
                error=h.get("e"),
                started_at=iso(h.get("c")),
                at=iso(h["t"]) or "",
                by=h.get("by"),
            )
            for h in rec.history
        ],
        attempts_total=rec.attempts_total,
    )


def workflow_view(state: WorkflowState, definition: Definition) -> WorkflowView:
    wf = state.workflow
    steps = [
        step_view(state.steps[name]) for name in definition.topological_order if name in state.steps
    ]
    comps = sorted(state.compensations.values(), key=lambda c: (c.dispatched_at or 0, c.name))
    return WorkflowView(
        workflow_id=wf.workflow_id,
        type=wf.wf_type,
        status=wf.status.value,
        definition_hash=wf.def_hash,
        created_at=iso(wf.created_at) or "",
        updated_at=iso(wf.updated_at) or "",
        finished_at=iso(wf.finished_at),
        input=loads(wf.input),
        output=workflow_output(state, definition),
        error=loads(wf.error),
        pause=loads(wf.pause),
        paused_at=iso(wf.paused_at),
        redrives=wf.redrives,
        steps=steps,
        compensations=[step_view(c) for c in comps],
    )


def summary_view(s: WorkflowSummary) -> WorkflowSummaryView:
    return WorkflowSummaryView(
        workflow_id=s.workflow_id,
        type=s.wf_type,
        status=s.status,
        created_at=iso(s.created_at) or "",
        finished_at=iso(s.finished_at),
    )


def definition_summary(d: Definition) -> DefinitionSummaryView:
    return DefinitionSummaryView(
        name=d.name,
        hash=d.content_hash,
        comment=d.comment,
        steps=list(d.topological_order),
        pools=sorted({t.pool for t in d.tasks}),
    )


def definition_view(d: Definition) -> DefinitionView:
    return DefinitionView(
        **definition_summary(d).model_dump(),
        definition=d.model_dump(mode="json", by_alias=True, exclude_none=True),
    )


def pool_view(pool: PoolView) -> PoolBody:
    state, backlog = pool.state, pool.backlog
    return PoolBody(
        name=state.name,
        paused=state.paused,
        paused_at=iso(state.paused_at),
        resumed_at=iso(state.resumed_at),
        by=state.by,
        backlog=None
        if backlog is None
        else BacklogView(
            visible=backlog.visible, in_flight=backlog.in_flight, delayed=backlog.delayed
        ),
    )
