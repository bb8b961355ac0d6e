"""Map steps through the API handler on moto (issue 24): a map's counts in GET /workflows/{id}
and GET /workflows/{id}/steps/{step}/items: pages by index, signed and bound to the caller,
the workflow, the step and the filter, bounded whatever the item count."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aws_stack import ALICE, BOB, Stack, stack_with_definitions

FANOUT = """\
Name: fanout_check
Comment: A test definition (handlers) - reserve each of the input's items.
Steps:
  - Name: first
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
  - Name: each
    DependsOn: [first]
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
    Map: {ItemsPath: $.input.items, MaxConcurrency: 25}
"""
ITEMS = [{"sku": f"S{i}", "qty": 1} for i in range(120)]
ORDER = {"order_id": "o-1", "customer": "ada", "amount": 42.5, "items": ITEMS}


CHILD = """\
Name: one_reservation
Comment: A test definition (handlers) - a child workflow of reservations.
Steps:
  - Name: reserve
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
"""
PARENT = """\
Name: reservations
Comment: A test definition (handlers) - one child, and a map of children.
Steps:
  - Name: whole
    Workflow: one_reservation
    TimeoutSeconds: 60
  - Name: each_order
    Workflow: one_reservation
    TimeoutSeconds: 60
    Map: {ItemsPath: $.input.orders, MaxConcurrency: 2}
"""
ORDERS = {
    "items": [{"sku": "A", "qty": 1}],
    "orders": [{"items": [{"sku": f"O{i}", "qty": 1}]} for i in range(3)],
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for the module (issue 36), with the map's definition and the child
    workflows' beside the examples: each test reads only the workflows it started (or the
    module's map, `finished_map`)."""
    files = {
        "fanout_check.yaml": FANOUT,
        "one_reservation.yaml": CHILD,
        "reservations.yaml": PARENT,
    }
    with (
        pytest.MonkeyPatch.context() as patch,
        stack_with_definitions(patch, tmp_path_factory.mktemp("map_api"), files) as running,
    ):
        yield running


@pytest.fixture(scope="module")
def finished_map(stack: Stack) -> str:
    """ALICE's map of 120 items, run to its end once for the module: the tests only read it
    (issue 36: each of the two tests below ran the same map of its own)."""
    status, _, reply = stack.api(
        "POST", "/workflows", body={"type": "fanout_check", "input": ORDER}, caller=ALICE
    )
    assert status == 202, reply
    stack.run_agents(rounds=80)
    return str(reply["workflow_id"])


def items(stack: Stack, wf: str, **query: str) -> tuple[list[dict[str, Any]], int]:
    found: list[dict[str, Any]] = []
    token = None
    for pages in range(1, 50):
        q = dict(query, **({"next_token": token} if token else {}))
        status, _, reply = stack.api(
            "GET", f"/workflows/{wf}/steps/each/items", query=q, caller=ALICE
        )
        assert status == 200, reply
        assert reply["total"] == len(ITEMS)
        found += reply["items"]
        token = reply["next_token"]
        if token is None:
            return found, pages
    raise AssertionError("too many pages")


def test_a_map_shows_its_counts_and_pages_its_items(stack: Stack, finished_map: str) -> None:
    wf = finished_map
    view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
    assert view["status"] == "SUCCEEDED", view
    each = next(s for s in view["steps"] if s["name"] == "each")
    assert each["map"] == {
        "total": 120,
        "pending": 0,
        "running": 0,
        "succeeded": 120,
        "failed": 0,
        "cancelled": 0,
        "compensated": 0,
        "status": "SUCCEEDED",
        "max_concurrency": 25,
    }
    # The item outputs in item order: over 8 KiB here, so a link to the payload bucket.
    assert each["output"] is None and each["output_ref"]["size"] > 8 * 1024

    found, pages = items(stack, wf, limit="50")
    assert pages == 3
    assert [i["index"] for i in found] == list(range(120))
    assert all(i["status"] == "SUCCEEDED" and i["attempt"] == 1 for i in found)
    assert all(i["output"]["reservation_id"] for i in found), found[0]
    # A status filter keeps only those items (none failed here).
    assert items(stack, wf, status="FAILED") == ([], 1)


def test_item_pages_are_the_callers_and_refuse_what_is_not_theirs(
    stack: Stack, finished_map: str
) -> None:
    wf = finished_map
    path = f"/workflows/{wf}/steps/each/items"
    first = stack.api("GET", path, query={"limit": "10"}, caller=ALICE)[2]
    token = first["next_token"]
    assert token
    # Another caller cannot see the workflow, with or without the token.
    assert stack.api("GET", path, caller=BOB)[0] == 404
    assert stack.api("GET", path, query={"next_token": token}, caller=BOB)[0] == 404
    # A token is bound to its filter.
    status, _, reply = stack.api(
        "GET", path, query={"next_token": token, "status": "SUCCEEDED"}, caller=ALICE
    )
    assert status == 400 and reply["error"]["field"] == "next_token"
    # A step that is not a map, an unknown status, a limit out of range.
    status, _, reply = stack.api("GET", f"/workflows/{wf}/steps/first/items", caller=ALICE)
    assert status == 404 and reply["error"]["code"] == "StepNotFound"
    for query in ({"status": "LOST"}, {"limit": "0"}, {"limit": "101"}):
        status, _, reply = stack.api("GET", path, query=query, caller=ALICE)
        assert status == 400, (query, reply)
        assert set(reply) == {"error"}


def test_children_are_named_on_their_parent_and_their_parent_on_them(stack: Stack) -> None:
    """A child-workflow step and each item of a map of children name their children (the
    console links them); a child names its parent, the step and, for an item's child, the
    item (`parent_item`)."""
    reply = stack.api(
        "POST", "/workflows", body={"type": "reservations", "input": ORDERS}, caller=ALICE
    )[2]
    wf = str(reply["workflow_id"])
    for _ in range(30):
        stack.run_agents(rounds=20)
        stack.sweep()
        view = stack.api("GET", f"/workflows/{wf}", caller=ALICE)[2]
        if view["status"] == "SUCCEEDED":
            break
    assert view["status"] == "SUCCEEDED", view
    whole = next(s for s in view["steps"] if s["name"] == "whole")
    assert len(whole["children"]) == 1
    child = stack.api("GET", f"/workflows/{whole['children'][0]}", caller=ALICE)[2]
    assert (child["parent_id"], child["parent_step"], child["parent_item"]) == (
        wf,
        "whole",
        None,
    )
    assert child["status"] == "SUCCEEDED"

    page = stack.api("GET", f"/workflows/{wf}/steps/each_order/items", caller=ALICE)[2]
    assert [i["index"] for i in page["items"]] == [0, 1, 2]
    for item in page["items"]:
        assert len(item["children"]) == 1, item
        child = stack.api("GET", f"/workflows/{item['children'][0]}", caller=ALICE)[2]
        assert (child["parent_id"], child["parent_step"], child["parent_item"]) == (
            wf,
            "each_order",
            item["index"],
        )
    # A map of agents' items start no children.
    assert view["parent_id"] is None and view["parent_item"] is None
