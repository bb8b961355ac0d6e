"""Who may put what on the bus is enforced by the bus, not trusted from the event (issue 28,
a hostile probe): the synthesized resource policy is evaluated here for each putter, source
and detail-type, as IAM evaluates an explicit Deny (moto enforces no bus policy: this is the
strict check the emulator cannot make).

Evaluated: `StringEquals` / `StringNotEquals` / `ArnNotEquals` on `events:source`,
`events:detail-type` and `aws:PrincipalArn`, with IAM's semantics for a list of values
(`StringEquals`: any matches; `StringNotEquals`, `ArnNotEquals`: none matches)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_stack import ALICE
from infra_support import MALLORY, VARIANT_OWNERS, Synth
from shepherd.observability import EVENT_SOURCE, START_DETAIL_TYPE


def _values(value: Any) -> list[str]:
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _holds(operator: str, actual: str, expected: Any) -> bool:
    wanted = _values(expected)
    if operator == "StringEquals":
        return actual in wanted
    if operator in ("StringNotEquals", "ArnNotEquals"):
        return actual not in wanted
    raise AssertionError(f"the evaluator does not know {operator}")


def _resolve(synth: Synth, value: Any) -> Any:
    """A role ARN the template refers to (Fn::GetAtt) as the role's own name, for comparing."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"role:{value['Fn::GetAtt'][0]}"
    if isinstance(value, list):
        return [_resolve(synth, v) for v in value]
    return value


def _denies(synth: Synth) -> list[dict[str, Any]]:
    out = []
    for resource in synth.of_type("AWS::Events::EventBusPolicy").values():
        statement = resource["Properties"]["Statement"]
        if statement["Effect"] == "Deny":
            out.append(statement)
    return out


def denied(synth: Synth, principal: str, source: str, detail_type: str) -> bool:
    context = {
        "events:source": source,
        "events:detail-type": detail_type,
        "aws:PrincipalArn": principal,
    }
    for statement in _denies(synth):
        assert statement["Action"] == "events:PutEvents"
        conditions = statement.get("Condition", {})
        if all(
            _holds(op, context[key], _resolve(synth, expected))
            for op, pairs in conditions.items()
            for key, expected in pairs.items()
        ):
            return True
    return False


def _relay(synth: Synth) -> str:
    role = synth.construct.relay.function.role
    assert role is not None
    return f"role:{synth.logical_id(role)}"


def test_only_the_relay_may_put_shepherds_own_events(shepherd: Synth) -> None:
    for forged in ("WorkflowSucceeded", "WorkflowFailed", START_DETAIL_TYPE):
        assert denied(shepherd, MALLORY, EVENT_SOURCE, forged)
        assert denied(shepherd, ALICE, EVENT_SOURCE, forged)
    assert not denied(shepherd, _relay(shepherd), EVENT_SOURCE, "WorkflowSucceeded")


def test_a_mapped_source_is_put_by_its_owner_alone(shepherd: Synth) -> None:
    """The conftest app maps `acme.platform` to ALICE: Mallory cannot start workflows as
    Alice (nor squat her idempotency keys) by naming Alice's source."""
    assert not denied(shepherd, ALICE, "acme.platform", START_DETAIL_TYPE)
    assert denied(shepherd, MALLORY, "acme.platform", START_DETAIL_TYPE)
    assert denied(shepherd, MALLORY, "acme.platform", "AnythingElse")  # the source is hers


def test_start_workflow_comes_from_mapped_sources_only(shepherd: Synth) -> None:
    assert denied(shepherd, MALLORY, "acme.unmapped", START_DETAIL_TYPE)
    assert denied(shepherd, ALICE, "acme.unmapped", START_DETAIL_TYPE)
    # Other traffic on the bus is none of Shepherd's business.
    assert not denied(shepherd, MALLORY, "acme.unmapped", "OrderPlaced")


@pytest.mark.parametrize("owners", [{}, VARIANT_OWNERS])
def test_the_policy_follows_the_mapping(
    tmp_path: Any, variant: Synth, owners: dict[str, str]
) -> None:
    """The session's `variant` app maps two sources; no `event_owners` context maps none (an
    empty map, `-c event_owners='{}'`, is read as the same: shepherd_infra.application)."""
    from infra_support import synthesize

    synth = variant if owners else synthesize(tmp_path)
    for source, owner in owners.items():
        assert not denied(synth, owner, source, START_DETAIL_TYPE)
        others = [p for p in (ALICE, MALLORY) if p != owner]
        assert all(denied(synth, p, source, START_DETAIL_TYPE) for p in others)
    if not owners:  # nothing mapped: no StartWorkflow from anyone
        assert denied(synth, ALICE, "a.one", START_DETAIL_TYPE)
