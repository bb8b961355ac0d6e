"""Table records -> API bodies. Internal fields (lease owner, tokens, shard keys) never leave."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shepherd import schedules
from shepherd.changes import public_error
from shepherd.clock import iso
from shepherd.decisions import workflow_timeout
from shepherd.decisions.deadlines import Deadline, next_deadline, pause_timeout_at
from shepherd.decisions.fanout import child_id
from shepherd.decisions.planner import compensation_order
from shepherd.definitions import Definition
from shepherd.engine.inbox import PendingApproval
from shepherd.engine.maps import ItemRow
from shepherd.engine.outputs import stored_output
from shepherd.engine.pools import PoolView
from shepherd.engine.queries import WorkflowSummary
from shepherd.engine.schedules import ScheduleState
from shepherd.keys import Kind
from shepherd.model import PoolState, StepRecord, WorkflowState, loads
from shepherd.payloads import Payloads, ref_of
from shepherd.topology import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CONCURRENCY

from shepherd_handlers.models import (
    AttemptView,
    BacklogView,
    CircuitChangeView,
    CircuitView,
    DeadlineView,
    DefinitionSummaryView,
    DefinitionView,
    MapCountsView,
    MapItemView,
    PayloadLink,
    PendingApprovalView,
    RateLimitView,
    ScheduleView,
    StepView,
    WorkflowSummaryView,
    WorkflowView,
)
from shepherd_handlers.models import PoolView as PoolBody
from shepherd_handlers.runtime import logger


def payload(
    payloads: Payloads, stored: str | None, name: str | None = None
) -> tuple[Any, PayloadLink | None]:
    """A stored payload as the API shows it: small ones inline, a large one as a presigned
    download in the field's `_ref` twin (so no response carries a large payload), saved by a
    browser as `<name>.json` when named."""
    link = payloads.link(stored, filename=f"{name}.json" if name else None)
    if link is None:
        return loads(stored), None
    return None, PayloadLink(url=link.url, size=link.size, sha256=link.sha256)


def map_view(rec: StepRecord, undone: StepRecord | None = None) -> MapCountsView | None:
    """A map step's counts (its compensation's unit, `undone`, counts the items undone)."""
    m = rec.fanout
    if m is None:
        return None
    counts = m.counts()
    if undone is not None and undone.fanout is not None:
        counts["compensated"] = undone.fanout.succeeded
    return MapCountsView(**counts, status=m.status, max_concurrency=m.stride)


def item_view(row: ItemRow, payloads: Payloads) -> MapItemView:
    """One map item as `GET .../steps/{step}/items` shows it."""
    unit = row.unit
    if unit is None:
        return MapItemView(index=row.index, status=row.status)
    name = f"{unit.workflow_id}-{unit.name}-item{row.index}-output"
    output, output_ref = payload(payloads, unit.output, name)
    return MapItemView(
        index=row.index,
        status=row.status,
        attempt=unit.attempt,
        attempts_total=unit.attempts_total,
        started_at=iso(unit.claimed_at),
        finished_at=iso(unit.finished_at),
        error=public_error(unit.error),
        output=output,
        output_ref=output_ref,
        children=children_of(unit),
    )


def children_of(rec: StepRecord) -> list[str]:
    """A child-workflow step's (or a map of children's item's) children, by attempt: their
    ids derive from the workflow, the step, the item and the attempt (`child_id`), one per
    attempt that started one."""
    if rec.child_id is None or rec.kind != "step":
        return []
    ids = [child_id(rec.workflow_id, rec.name, rec.index, a) for a in range(1, rec.attempt + 1)]
    # A retry queued before its child started: the current child is still the last attempt's.
    return ids[: ids.index(rec.child_id) + 1] if rec.child_id in ids else ids


def step_view(
    rec: StepRecord,
    payloads: Payloads,
    deadline: Deadline | None = None,
    undone: StepRecord | None = None,
) -> StepView:
    error = public_error(rec.error)
    full = loads(rec.error).get("full") if error else None
    named = f"{rec.workflow_id}-{rec.kind}-{rec.name}"
    output, output_ref = payload(payloads, rec.output, f"{named}-output")
    details, details_ref = payload(payloads, rec.details, f"{named}-details")
    step_input, input_ref = payload(payloads, rec.input, f"{named}-input")
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
        wake_at=iso(rec.wake_at),
        decision=loads(rec.decision),
        dispatches=rec.dispatches,
        error=error,
        error_ref=payload(payloads, full, f"{named}-error")[1] if full else None,
        output=output,
        variables=loads(rec.variables),
        details=details,
        input=step_input,
        output_ref=output_ref,
        details_ref=details_ref,
        input_ref=input_ref,
        attempts=[
            AttemptView(
                attempt=h["a"],
                outcome=h["o"],
                error=h.get("e"),
                message=h.get("m"),
                started_at=iso(h.get("c")),
                at=iso(h["t"]) or "",
                by=h.get("by"),
            )
            for h in rec.history
        ],
        attempts_total=rec.attempts_total,
        iterations=rec.iterations or None,
        map=map_view(rec, undone) if rec.kind == "step" else map_view(rec),
        children=children_of(rec),
        next_deadline=None
        if deadline is None
        else DeadlineView(at=iso(deadline.at), why=deadline.why),
    )


def workflow_view(
    state: WorkflowState,
    definition: Definition,
    payloads: Payloads,
    *,
    now: int | None = None,
    pools: Mapping[str, PoolState] | None = None,
) -> WorkflowView:
    """The workflow as the API shows it; with `now` (and the pools), each live step's next
    deadline and the pause timeout (shepherd.decisions.deadlines)."""
    wf = state.workflow

    def due(kind: Kind, rec: StepRecord) -> Deadline | None:
        if now is None:
            return None
        return next_deadline(state, definition, kind, rec, now, pools or {})

    steps = [
        step_view(
            state.steps[name],
            payloads,
            due("step", state.steps[name]),
            state.compensations.get(name),
        )
        for name in definition.topological_order
        if name in state.steps
    ]
    wf_input, input_ref = payload(payloads, wf.input, f"{wf.workflow_id}-input")
    output: dict[str, Any] | None = None
    output_ref: dict[str, PayloadLink] | None = None
    stored = stored_output(state, definition)
    if stored is not None:
        output = {n: loads(t) for n, t in stored.items() if ref_of(t) is None}
        output_ref = {
            n: link
            for n, t in stored.items()
            # Named as the step's own output_ref (the same object, the same link).
            if (link := payload(payloads, t, f"{wf.workflow_id}-step-{n}-output")[1])
        }
    if definition.state_machine is not None and wf.asl_output is not None:
        output, link = payload(payloads, wf.asl_output, f"{wf.workflow_id}-output")
        output_ref = {"output": link} if link else None
    # In the order they are undone (the planner's), not by dispatch time: a look writes its
    # sweep's `now`, which may be earlier than an undo an agent started meanwhile.
    unwind = {name: i for i, name in enumerate(compensation_order(state, definition))}
    comps = sorted(
        state.compensations.values(),
        key=lambda c: (unwind.get(c.name, len(unwind)), c.dispatched_at or 0, c.name),
    )
    return WorkflowView(
        workflow_id=wf.workflow_id,
        type=wf.wf_type,
        status=wf.status.value,
        parent_id=wf.parent_id,
        parent_step=wf.parent_step,
        parent_item=wf.parent_item,
        definition_hash=wf.def_hash,
        created_at=iso(wf.created_at) or "",
        updated_at=iso(wf.updated_at) or "",
        finished_at=iso(wf.finished_at),
        input=wf_input,
        input_ref=input_ref,
        output=output,
        output_ref=output_ref or None,
        error=loads(wf.error),
        cause=wf.asl_cause,
        failure=wf.failure,
        pause=loads(wf.pause),
        paused_at=iso(wf.paused_at),
        pause_timeout_at=iso(pause_timeout_at(state, definition)),
        timeout_at=iso(workflow_timeout.deadline(state, definition)),
        redrives=wf.redrives,
        tags=loads(wf.tags) if wf.tags else None,
        steps=steps,
        compensations=[step_view(c, payloads, due("compensation", c)) for c in comps],
    )


def pending_approval_view(p: PendingApproval) -> PendingApprovalView:
    return PendingApprovalView(
        workflow_id=p.workflow_id,
        type=p.wf_type,
        step=p.step,
        requested_at=iso(p.requested_at) or "",
        due_at=iso(p.due_at) or "",
    )


def summary_view(s: WorkflowSummary) -> WorkflowSummaryView:
    return WorkflowSummaryView(
        workflow_id=s.workflow_id,
        type=s.wf_type,
        status=s.status,
        created_at=iso(s.created_at) or "",
        finished_at=iso(s.finished_at),
        updated_at=iso(s.updated_at),
        idempotency_key=s.idempotency_key,
        tags=s.tags,
        error=s.error,
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


def pool_view(pool: PoolView, *, show_by: bool) -> PoolBody:
    """A pool as a caller sees it; `by` (who paused or resumed it, an IAM ARN) only when the
    caller is an operator."""
    state, backlog, limit = pool.state, pool.backlog, pool.policy.rate_limit
    return PoolBody(
        name=state.name,
        paused=state.paused,
        paused_at=iso(state.paused_at),
        resumed_at=iso(state.resumed_at),
        by=state.by if show_by else None,
        backlog=None
        if backlog is None
        else BacklogView(
            visible=backlog.visible, in_flight=backlog.in_flight, delayed=backlog.delayed
        ),
        batch_size=pool.policy.batch_size or DEFAULT_BATCH_SIZE,
        max_concurrency=pool.policy.max_concurrency or DEFAULT_MAX_CONCURRENCY,
        rate_limit=None
        if limit is None
        else RateLimitView(per_second=limit.per_second, burst=limit.burst),
        circuit=None
        if pool.policy.circuit_breaker is None
        else CircuitView(
            state=state.circuit,
            since=iso(state.circuit_since),
            mode=state.circuit_mode,
            history=[
                CircuitChangeView(
                    at=iso(int(h["at"])) or "", from_state=h["from"], to=h["to"], why=h["why"]
                )
                for h in state.circuit_history
            ],
        ),
    )


def _upcoming(state: ScheduleState, now: datetime) -> list[datetime]:
    """The next three firings of a cron or at schedule (none for a rate). A schedule whose
    firings cannot be computed (validation refuses one now; a definition stored before it
    did may remain) shows none rather than failing every caller's read (issue 35.1)."""
    spec = state.spec
    try:
        expression = schedules.parse(spec.expression)
        if isinstance(expression, schedules.Rate):
            return []
        return schedules.next_firings(expression, schedules.zone(spec.timezone), now, 3)
    except (ValueError, OverflowError) as exc:
        logger.warning(
            "schedule's firings cannot be computed",
            extra={"workflow_type": state.workflow_type, "schedule": spec.name, "error": str(exc)},
        )
        return []


def schedule_view(state: ScheduleState, now: datetime, *, show_by: bool) -> ScheduleView:
    """A schedule, its state and its next three firings (none for a rate: they count from its
    deploy; none while disabled or paused). `by` (an IAM ARN) only for an operator."""
    spec = state.spec
    upcoming = [] if not spec.enabled or state.paused else _upcoming(state, now)
    return ScheduleView(
        workflow_type=state.workflow_type,
        name=spec.name,
        expression=spec.expression,
        timezone=spec.timezone,
        enabled=spec.enabled,
        next=[t.strftime(schedules.TIME_FORMAT) for t in upcoming],
        paused=state.paused,
        at=iso(state.at),
        by=state.by if show_by else None,
    )
