"""Conditions (issue 25.1): ASL Choice rules, evaluated purely; validated at load with errors
naming the file, the step and the field; planned as a skip by whoever sees the step ready."""

from __future__ import annotations

import random
from typing import Any

import pytest
from shepherd.decisions import choice
from shepherd.decisions.planner import (
    Finish,
    SendImplicit,
    Skip,
    conditions_due,
    next_due,
    plan,
    start_actions,
)
from shepherd.definitions import parse_definition
from shepherd.errors import DefinitionError
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, WorkflowStatus

T0 = 1_000_000


def cond(**rule: Any) -> choice.Condition:
    return choice.Condition.model_validate(rule)


DOC = choice.document(
    {"amount": 1500, "plan": "pro", "flags": {"vip": True, "note": None}, "items": [3, 4]},
    {"check": {"score": 0.25, "limit": 0.5, "tier": "gold"}, "gone": choice.MISSING},
)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"Variable": "$.input.amount", "NumericGreaterThan": 1000}, True),
        ({"Variable": "$.input.amount", "NumericGreaterThan": 1500}, False),
        ({"Variable": "$.input.amount", "NumericGreaterThanEquals": 1500}, True),
        ({"Variable": "$.input.amount", "NumericLessThan": 1500}, False),
        ({"Variable": "$.input.amount", "NumericLessThanEquals": 1500}, True),
        ({"Variable": "$.input.amount", "NumericEquals": 1500.0}, True),
        ({"Variable": "$.input.plan", "StringEquals": "pro"}, True),
        ({"Variable": "$.input.plan", "StringEquals": "free"}, False),
        ({"Variable": "$.input.plan", "StringMatches": "p*"}, True),
        ({"Variable": "$.input.plan", "StringMatches": "*x*"}, False),
        ({"Variable": "$.input.flags.vip", "BooleanEquals": True}, True),
        ({"Variable": "$.input.flags.vip", "BooleanEquals": False}, False),
        ({"Variable": "$.input.flags.note", "IsNull": True}, True),
        ({"Variable": "$.input.plan", "IsNull": True}, False),
        ({"Variable": "$.input.flags.note", "IsPresent": True}, True),
        ({"Variable": "$.input.nothing", "IsPresent": False}, True),
        ({"Variable": "$.input.items[1]", "NumericEquals": 4}, True),
        ({"Variable": "$.input.items[7]", "IsPresent": True}, False),
        ({"Variable": "$.steps.check.output.tier", "StringEquals": "gold"}, True),
        (
            {
                "Variable": "$.steps.check.output.score",
                "NumericLessThanPath": "$.steps.check.output.limit",
            },
            True,
        ),
        (
            {
                "Variable": "$.steps.check.output.limit",
                "NumericLessThanEqualsPath": "$.steps.check.output.score",
            },
            False,
        ),
        ({"Variable": "$.input.plan", "StringEqualsPath": "$.input.plan"}, True),
        ({"Variable": "$.input.amount", "NumericEqualsPath": "$.input.missing"}, False),
        ({"Variable": "$.steps.gone.output", "IsPresent": False}, True),  # a skipped dependency
        # Absent or of the wrong type: a comparison is false, never an error.
        ({"Variable": "$.input.missing", "NumericGreaterThan": 0}, False),
        ({"Variable": "$.input.plan", "NumericGreaterThan": 0}, False),
        ({"Variable": "$.input.flags.vip", "NumericEquals": 1}, False),  # a bool is no number
        ({"Variable": "$.input.amount", "StringEquals": "1500"}, False),
        (
            {
                "And": [
                    {"Variable": "$.input.amount", "NumericGreaterThan": 1000},
                    {"Variable": "$.input.plan", "StringEquals": "pro"},
                ]
            },
            True,
        ),
        (
            {
                "Or": [
                    {"Variable": "$.input.amount", "NumericLessThan": 10},
                    {"Not": {"Variable": "$.input.plan", "StringEquals": "pro"}},
                ]
            },
            False,
        ),
        ({"Not": {"Variable": "$.input.amount", "NumericLessThan": 10}}, True),
    ],
)
def test_choice_rules_evaluate_as_asl_says(rule: dict[str, Any], expected: bool) -> None:
    assert choice.evaluate(cond(**rule), DOC) is expected


def test_string_matches_escapes_a_star_and_a_backslash() -> None:
    doc = choice.document({"s": "a*b\\c", "t": "axb\\c"}, {})
    rule = {"Variable": "$.input.s", "StringMatches": "a\\*b\\\\c"}
    assert choice.evaluate(cond(**rule), doc)
    assert not choice.evaluate(cond(**{**rule, "Variable": "$.input.t"}), doc)


def _definition(condition: Any, *, depends: tuple[str, ...] = ("a",)) -> dict[str, Any]:
    return {
        "Name": "wf",
        "Steps": [
            {"Name": "a", "Agent": "do_a", "Pool": "p", "TimeoutSeconds": 10},
            {
                "Name": "b",
                "Agent": "do_b",
                "Pool": "p",
                "TimeoutSeconds": 10,
                "DependsOn": list(depends),
                "Condition": condition,
            },
        ],
    }


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (
            {"Variable": "$.input.x"},
            "wf.yaml: Steps[1] (b).Condition: a condition has exactly one comparison",
        ),
        (
            {"Variable": "$.input.x", "NumericEquals": 1, "StringEquals": "a"},
            "Steps[1] (b).Condition: a condition has exactly one comparison (StringEquals, "
            "NumericLessThan, ...) or one of And, Or, Not (got StringEquals, NumericEquals)",
        ),
        (
            {"NumericEquals": 1},
            "Steps[1] (b).Condition: Variable: is required with NumericEquals",
        ),
        (
            {"Variable": "input.x", "NumericEquals": 1},
            "Steps[1] (b).Condition.Variable: 'input.x' is not a valid path: $.input.<path> or "
            "$.steps.<dependency>.output.<path>",
        ),
        (
            {"Variable": "$.input.x", "NumericEqualz": 1},
            "Steps[1] (b).Condition.NumericEqualz: unknown field; did you mean 'NumericEquals'?",
        ),
        (
            {"Variable": "$.input.x", "NumericEquals": "one"},
            "Steps[1] (b).Condition.NumericEquals: must be a number (got 'one')",
        ),
        (
            {"Variable": "$.input.x", "NumericLessThan": True},
            "Steps[1] (b).Condition.NumericLessThan: must be a number (got True)",
        ),
        (
            {"Variable": "$.input.x", "BooleanEquals": "yes"},
            "Steps[1] (b).Condition.BooleanEquals: must be true or false",
        ),
        (
            {"And": [{"Variable": "$.input.x", "NumericEquals": 1}, {"Variable": "$.input.y"}]},
            "Steps[1] (b).Condition.And[1]: a condition has exactly one comparison",
        ),
        (
            {"Variable": "$.steps.z.output.ok", "BooleanEquals": True},
            "Steps[1] (b).Condition: '$.steps.z.output.ok' reads step 'z', which is not in "
            "its DependsOn",
        ),
        (
            {"Variable": "$.input.s", "StringMatches": "a\\b"},
            "Steps[1] (b).Condition: StringMatches: a backslash escapes only * or \\",
        ),
        (
            {"Variable": "$.input.x", "IsPresent": True, "Comment": "no"},
            "Steps[1] (b).Condition.Comment: unknown field",
        ),
    ],
)
def test_a_bad_condition_names_the_file_the_step_and_the_field(
    condition: Any, expected: str
) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(_definition(condition), "wf.yaml")
    assert expected in str(err.value)
    assert str(err.value).startswith("wf.yaml: ")


def test_a_condition_may_read_its_dependencies_and_is_part_of_the_version() -> None:
    ok = {"Variable": "$.steps.a.output.ok", "BooleanEquals": True}
    first = parse_definition(_definition(ok), "wf.yaml")
    spec = first.by_name["b"]
    assert spec.condition is not None and spec.condition.variables() == ["$.steps.a.output.ok"]
    other = parse_definition(_definition({**ok, "BooleanEquals": False}), "wf.yaml")
    assert other.content_hash != first.content_hash
    # Its canonical JSON uses ASL's names, so the snapshot reloads as the same version.
    reloaded = parse_definition(__import__("json").loads(first.canonical_json), "snapshot")
    assert reloaded.content_hash == first.content_hash


# ------------------------------------------------------------------------------ planning

BRANCH = parse_definition(
    {
        "Name": "branch",
        "Steps": [
            {"Name": "check", "Agent": "check", "Pool": "p", "TimeoutSeconds": 10},
            {
                "Name": "big",
                "Agent": "big",
                "Pool": "p",
                "TimeoutSeconds": 10,
                "DependsOn": ["check"],
                "Condition": {"Variable": "$.steps.check.output.amount", "NumericGreaterThan": 100},
            },
            {
                "Name": "small",
                "Agent": "small",
                "Pool": "p",
                "TimeoutSeconds": 10,
                "DependsOn": ["check"],
                "Condition": {
                    "Not": {"Variable": "$.steps.check.output.amount", "NumericGreaterThan": 100}
                },
            },
            {
                "Name": "after",
                "Agent": "after",
                "Pool": "p",
                "TimeoutSeconds": 10,
                "DependsOn": ["big", "small"],
            },
        ],
    },
    "branch.yaml",
)


def _state(*records: StepRecord, status: WorkflowStatus = WorkflowStatus.RUNNING) -> WorkflowState:
    wf = WorkflowRecord(
        workflow_id="w",
        wf_type="branch",
        def_hash=BRANCH.content_hash,
        status=status,
        input="{}",
        owner="o",
        request_hash="h",
        created_at=T0,
        updated_at=T0,
    )
    s = WorkflowState(wf)
    for name in BRANCH.topological_order:
        s.put(StepRecord("w", "step", name, StepStatus.PENDING))
    for r in records:
        s.put(r)
    return s


def _docs(s: WorkflowState, amount: int) -> dict[str, Any]:
    return {
        n: choice.document({}, {"check": {"amount": amount}}) for n in conditions_due(s, BRANCH)
    }


def _plan(s: WorkflowState, amount: int, **kw: Any) -> list[Any]:
    return plan(s, BRANCH, T0 + 5000, rng=random.Random(0), documents=_docs(s, amount), **kw)


def test_only_ready_conditional_steps_need_a_document() -> None:
    assert conditions_due(_state(), BRANCH) == []
    checked = StepRecord("w", "step", "check", StepStatus.SUCCEEDED, attempt=1, finished_at=T0)
    assert conditions_due(_state(checked), BRANCH) == ["big", "small"]


@pytest.mark.parametrize("supervisor", [False, True])
def test_the_false_branch_is_skipped_by_whoever_sees_it_ready(supervisor: bool) -> None:
    checked = StepRecord("w", "step", "check", StepStatus.SUCCEEDED, attempt=1, finished_at=T0)
    s = _state(checked)
    completed = None if supervisor else "check"
    actions = _plan(s, 500, supervisor=supervisor, completed=completed)
    skipped = [a.seen.name for a in actions if isinstance(a, Skip)]
    assert skipped == ["small"]
    if not supervisor:  # the completer sends the true branch, as any single-dependency successor
        assert SendImplicit("big") in actions
    actions = _plan(s, 5, supervisor=supervisor, completed=completed)
    assert [a.seen.name for a in actions if isinstance(a, Skip)] == ["big"]


def test_without_its_document_a_conditional_step_is_neither_sent_nor_skipped() -> None:
    checked = StepRecord("w", "step", "check", StepStatus.SUCCEEDED, attempt=1, finished_at=T0)
    actions = plan(_state(checked), BRANCH, T0, supervisor=True, rng=random.Random(0))
    assert actions == []


def test_a_skipped_dependency_is_done_so_the_join_and_the_finish_follow() -> None:
    checked = StepRecord("w", "step", "check", StepStatus.SUCCEEDED, attempt=1, finished_at=T0)
    big = StepRecord("w", "step", "big", StepStatus.SUCCEEDED, attempt=1, finished_at=T0 + 9)
    small = StepRecord("w", "step", "small", StepStatus.SKIPPED, finished_at=T0 + 3)
    s = _state(checked, big, small)
    actions = _plan(s, 500, supervisor=False, completed="big")
    assert [type(a).__name__ for a in actions] == ["Dispatch"]  # the join, by its write
    after = StepRecord("w", "step", "after", StepStatus.SUCCEEDED, attempt=1, finished_at=T0 + 20)
    s.put(after)
    assert _plan(s, 500, supervisor=True) == [Finish(WorkflowStatus.SUCCEEDED)]
    # Both branches skipped (nothing ran) is done too.
    s2 = _state(checked, replace_status(big, StepStatus.SKIPPED), small, after)
    assert _plan(s2, 500, supervisor=True) == [Finish(WorkflowStatus.SUCCEEDED)]


def replace_status(rec: StepRecord, status: StepStatus) -> StepRecord:
    from dataclasses import replace

    return replace(rec, status=status, attempt=0)


def test_a_skipped_step_is_never_cancelled_dispatched_or_compensated_while_unwinding() -> None:
    checked = StepRecord("w", "step", "check", StepStatus.SUCCEEDED, attempt=1, finished_at=T0)
    small = StepRecord("w", "step", "small", StepStatus.SKIPPED, finished_at=T0 + 3)
    s = _state(checked, small, status=WorkflowStatus.COMPENSATING)
    actions = _plan(s, 500, supervisor=True)
    assert {a.seen.name for a in actions} == {"big", "after"}  # cancels of the unclaimed
    assert all(type(a).__name__ == "Cancel" for a in actions)


def test_a_ready_false_step_keeps_the_workflow_watched_until_it_is_skipped() -> None:
    checked = StepRecord("w", "step", "check", StepStatus.SUCCEEDED, attempt=1, finished_at=T0)
    due = next_due(_state(checked), BRANCH, T0 + 1)
    assert due is not None and due <= T0 + 1 + BRANCH.reach_gap_ms["small"]


def test_the_start_sends_true_roots_and_skips_false_ones() -> None:
    definition = parse_definition(
        {
            "Name": "roots",
            "Steps": [
                {
                    "Name": name,
                    "Agent": name,
                    "Pool": "p",
                    "TimeoutSeconds": 10,
                    "Condition": {"Variable": "$.input.plan", "StringEquals": name},
                }
                for name in ("free", "pro")
            ],
        },
        "roots.yaml",
    )
    wf = WorkflowRecord(
        "w", "roots", definition.content_hash, WorkflowStatus.RUNNING, "{}", "o", "h", T0, T0
    )
    s = WorkflowState(wf).complete(definition.roots)
    actions = start_actions(definition, s, {"plan": "pro"})
    assert actions == [Skip(s.steps["free"]), SendImplicit("pro")]
