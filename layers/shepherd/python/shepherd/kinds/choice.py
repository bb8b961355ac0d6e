"""The Choice kind (`Choice`, issue 42.5): no Lambda, no message. Decided in the write that
makes it ready, as a Condition is: its rules read the same document (the input and its
dependencies' outputs) and the first that holds picks its `Next`; none: its `Default`, or
with no Default it fails for good with `States.NoChoiceMatched` (which its own `Catch` may
take). It SUCCEEDS with the step it picked (`chosen`, shown in the view) and a null output;
every other step it names is out of scope (`decisions.scope`)."""

from __future__ import annotations

from typing import Any

from shepherd.decisions import choice as rules
from shepherd.decisions import transitions as tx
from shepherd.decisions.actions import Action, Choose
from shepherd.definitions import StepSpec
from shepherd.flow import NO_CHOICE_MATCHED
from shepherd.kinds.base import DecidedWhenReady, Planning
from shepherd.model import StepRecord, StepStatus, dumps


class Choice(DecidedWhenReady):
    name = "choice"

    def matches(self, spec: StepSpec) -> bool:
        return spec.choice is not None

    def plan_ready(
        self, p: Planning, rec: StepRecord, spec: StepSpec, ready_at: int
    ) -> list[Action]:
        """Decided by whoever sees it ready first, on its document (assembled by the
        caller, `planner.conditions_due`; planned again once it is)."""
        document = p.document(spec.name)
        if document is None:
            return []
        return [Choose(rec, pick(spec, document))]

    def plan_resend(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action]:
        return self.plan_ready(p, rec, spec, p.now)  # a resume decides it again

    def plan_at_start(
        self, rec: StepRecord, spec: StepSpec, created_at: int, document: Any
    ) -> Action:
        return Choose(rec, pick(spec, document))

    def needs_document(self, spec: StepSpec, rec: StepRecord) -> bool:
        return rec.status in (StepStatus.PENDING, StepStatus.QUEUED)

    def supervise(self, p: Planning, rec: StepRecord, spec: StepSpec) -> list[Action] | None:
        if rec.status is StepStatus.QUEUED:  # a resume's, whose decision was lost
            return self.plan_resend(p, rec, spec)
        return []


def pick(spec: StepSpec, document: Any) -> str | None:
    """The step a Choice picks on `document`: the first rule that holds, else its Default
    (None: neither)."""
    assert spec.choice is not None
    for rule in spec.choice.choices:
        if rules.evaluate(rule.condition, document):
            return rule.next
    return spec.choice.default


def write(seen: StepRecord, now: int, expires_at: int, chosen: str | None) -> tx.Write:
    """A Choice's decision as one conditional write (`Choose`)."""
    error = None
    if chosen is None:
        error = dumps(
            {
                "type": NO_CHOICE_MATCHED,
                "message": f"no rule of Choice step '{seen.name}' matched and it has no Default",
            }
        )
    return tx.choose(seen, now, expires_at, chosen, error)
