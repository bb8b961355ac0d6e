"""The console sends a signal by a business key (issue 37.3, 37.8): a definition whose
WaitForSignal step names a `Match` shows a form that posts `POST /signals` and lists every
workflow it reached; a match no open workflow waits on, or one that is not JSON, says so.
No workflow needs to run: a signal sent before its step waits is kept (so the test is quick)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from browser_support import shot
from playwright.sync_api import expect
from shepherd_cli.client import Api
from support import ORDER

# ms: one request through the console to the local stack, on a busy machine (the expect
# default of 5 s is for what the page does alone).
REPLY_MS = 20_000


def start(api: Api, order_id: str) -> str:
    body = {"type": "order_amendment", "input": {**ORDER, "order_id": order_id}}
    return str(api.call("POST", "/workflows", body)["workflow_id"])


def test_a_signal_by_match_reaches_every_workflow_waiting_on_the_value(page: Any, api: Api) -> None:
    order_id = f"console-match-{uuid.uuid4().hex[:8]}"
    first = start(api, order_id)
    second = start(api, order_id)
    other = start(api, f"{order_id}-other")
    page.goto("/#/definitions/order_amendment")
    section = page.locator("#signal-by-match")
    expect(section).to_contain_text("Waited for by await_amendment, on order_id")
    form = section.locator("form.match-signal-form")
    values = form.locator('textarea[name="match-values"]')
    expect(values).to_have_value('{"order_id":""}')  # the Match's fields, to fill in
    values.fill(json.dumps({"order_id": order_id}))
    form.locator('textarea[name="match-payload"]').fill('{"quantity": 3}')
    form.locator('input[name="match-signal-id"]').fill(f"{order_id}-1")
    form.get_by_role("button", name="Send to every match").click()
    outcome = page.locator("#match-signal-outcome")
    expect(outcome).to_contain_text("Signal amend sent to 2 workflows", timeout=REPLY_MS)
    sent = outcome.locator("li[data-workflow-id]")
    expect(sent).to_have_count(2)
    reached = {sent.nth(i).get_attribute("data-workflow-id") for i in range(2)}
    assert reached == {first, second} and other not in reached
    shot(page, "signal-by-match")
    # What each workflow now holds: the one signal, kept or taken by its wait.
    for wf in (first, second):
        pending = api.call("GET", f"/workflows/{wf}/signals")["pending"]
        taken = api.call("GET", f"/workflows/{wf}")
        assert len(pending) <= 1, pending
        if not pending:  # its wait took it already
            step = next(s for s in taken["steps"] if s["name"] == "await_amendment")
            assert step["output"] == {"quantity": 3}
    assert api.call("GET", f"/workflows/{other}/signals")["pending"] == []


def test_a_match_nobody_waits_on_or_that_is_not_json_says_so(page: Any) -> None:
    page.goto("/#/definitions/order_amendment")
    form = page.locator("form.match-signal-form")
    outcome = page.locator("#match-signal-outcome")
    values = form.locator('textarea[name="match-values"]')
    values.fill('{"order_id": "nobody-waits-on-this"}')
    form.get_by_role("button", name="Send to every match").click()
    nothing = "No open workflow of yours waits on these values: nothing sent."
    expect(outcome).to_have_text(nothing, timeout=REPLY_MS)
    values.fill("{order_id")
    form.get_by_role("button", name="Send to every match").click()
    expect(outcome).to_have_text("The match and the payload are JSON.")
    values.fill('{"order_id": ["a list"]}')  # refused by the API: 400, shown as it says
    form.get_by_role("button", name="Send to every match").click()
    expect(outcome).to_contain_text("400 ValidationError (match.order_id", timeout=REPLY_MS)
