"""A state machine's path on the console's workflow page (issue 42.4), in a real browser: the
states entered, in order, each visit with its input and output, read page by page from
`GET /workflows/{id}/path`; a native workflow's page has no path and never asks for one.

The shared local stack runs the repository's example definitions (native ones): the page's
view is a real workflow's, and Playwright (`page.route`) answers its definition as a state
machine's and its path from the API's documented shape (the route itself is proven on the
handlers, tests/handlers/test_asl_path_api.py)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import shot
from playwright.sync_api import expect
from shepherd_cli.client import Api
from support import ORDER

pytestmark = pytest.mark.e2e

MACHINE = {"StartAt": "Inc", "States": {"Inc": {"Type": "Pass", "End": True}}}


def entry(number: int, state: str, visit: int, n: int, *, running: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "number": number,
        "state": state,
        "visit": visit,
        "input": {"n": n},
        "entered_at": f"2026-12-07T10:00:0{number}.000Z",
    }
    if not running:
        out.update(output={"n": n + 1}, exited_at=f"2026-12-07T10:00:0{number}.500Z")
    return out


PAGES = {
    None: {"items": [entry(0, "Init", 1, 0), entry(1, "Inc", 1, 1)], "next_token": "page-2"},
    "page-2": {
        "items": [entry(2, "More?", 1, 2), entry(3, "Inc", 2, 2, running=True)],
        "next_token": None,
    },
}


def test_a_state_machines_page_shows_its_path_in_order_with_each_visit(page: Any, api: Api) -> None:
    wf = str(
        api.call("POST", "/workflows", {"type": "order_fulfilment", "input": ORDER})["workflow_id"]
    )
    asked: list[str | None] = []

    def as_machine(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        body["definition"]["StateMachine"] = MACHINE
        route.fulfill(response=response, body=json.dumps(body))

    def path(route: Any) -> None:
        token = parse_qs(urlparse(route.request.url).query).get("next_token", [None])[0]
        asked.append(token)
        route.fulfill(status=200, json=PAGES[token])

    page.route("**/api/definitions/order_fulfilment", as_machine)
    page.route(re.compile(rf"/api/workflows/{wf}/path\?"), path)
    page.goto(f"/#/workflows/{wf}")
    rows = page.locator("#path tbody tr")
    expect(rows).to_have_count(4)
    assert asked[:2] == [None, "page-2"]  # the second page read with the first's token
    states = [
        (rows.nth(i).get_attribute("data-state"), rows.nth(i).get_attribute("data-visit"))
        for i in range(4)
    ]
    assert states == [("Init", "1"), ("Inc", "1"), ("More?", "1"), ("Inc", "2")]
    second_inc = rows.nth(3)
    expect(second_inc).to_contain_text("running")  # no exit yet
    expect(second_inc).to_contain_text("none yet")  # no output yet
    expect(rows.nth(1)).to_contain_text('"n": 2')  # Inc's first visit: its output
    shot(page, "state-machine-path")


def test_a_native_workflows_page_has_no_path_and_never_asks_for_one(page: Any, api: Api) -> None:
    wf = str(
        api.call("POST", "/workflows", {"type": "order_fulfilment", "input": ORDER})["workflow_id"]
    )
    asked: list[str] = []
    page.route(
        re.compile(rf"/api/workflows/{wf}/path"),
        lambda route: (asked.append(route.request.url), route.abort()),
    )
    page.goto(f"/#/workflows/{wf}")
    expect(page.locator("#h-graph")).to_be_visible()
    expect(page.locator("#events")).to_be_visible()
    expect(page.locator("#h-path")).to_have_count(0)
    assert asked == []
