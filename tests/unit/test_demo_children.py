"""`make demo`'s checks of a child-workflow scenario (shepherd_cli.demo): each child its
Workflow steps name was started once, ended as the scenario says and names its parent, step
and item. The demo runs them on the local stack (tests/e2e/test_demo.py); here each check is
shown to catch what it is for."""

from __future__ import annotations

from typing import Any

from shepherd_cli import demo
from shepherd_cli.scenarios import ONBOARD_SCENARIOS

SCENARIO = {s.label: s for s in ONBOARD_SCENARIOS}


def _child(status: str, step: str, index: int | None, parent: str = "wf") -> dict[str, Any]:
    return {
        "workflow_id": f"child-{step}-{index}",
        "status": status,
        "parent_id": parent,
        "parent_step": step,
        "parent_item": index,
        "compensations": [],
    }


def _tracked(label: str, **changed: Any) -> Any:
    scenario = SCENARIO[label]
    children = {(c.step, c.index): [_child(c.status, c.step, c.index)] for c in scenario.children}
    children.update(changed.get("children", {}))
    return demo.Tracked(scenario, "wf", 0.0, children=children)


def test_the_children_as_promised_have_no_problem() -> None:
    for label in SCENARIO:
        assert demo._child_problems(_tracked(label)) == []


def test_a_child_that_ended_otherwise_is_unexpected() -> None:
    t = _tracked(
        "tenant-replica-fails",
        children={("provision_primary", None): [_child("SUCCEEDED", "provision_primary", None)]},
    )
    assert demo._child_problems(t) == [
        "provision_primary's child ended SUCCEEDED, expected COMPENSATED"
    ]


def test_a_child_naming_another_parent_or_item_is_unexpected() -> None:
    key = ("provision_replicas", 1)
    t = _tracked("tenant-onboarded", children={key: [_child("SUCCEEDED", key[0], 0)]})
    assert demo._child_problems(t) == [
        "provision_replicas[1]'s child names its parent as ('wf', 'provision_replicas', 0)"
    ]
    t = _tracked("tenant-onboarded", children={key: [_child("SUCCEEDED", *key, parent="x")]})
    assert demo._child_problems(t) == [
        "provision_replicas[1]'s child names its parent as ('x', 'provision_replicas', 1)"
    ]


def test_a_missing_a_duplicated_or_an_unexpected_child_is_unexpected() -> None:
    t = _tracked("tenant-onboarded")
    del t.children[("provision_replicas", 0)]
    t.children[("provision_replicas", 2)] = [_child("SUCCEEDED", "provision_replicas", 2)]
    t.children[("provision_primary", None)] *= 2
    assert sorted(demo._child_problems(t)) == [
        "provision_primary started 2 children, expected one",
        "provision_replicas[0] started no child",
        "provision_replicas[2] started 1 children, expected none",
    ]
