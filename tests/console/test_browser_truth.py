"""A console that stays true (issue 35.5), in a real browser against the session's local stack.

Each test is one finding: a hung API is an error within 5 s, not a spinner; a deadline says
what the supervisor will do and when it is overdue; an approval shows what is approved and an
answered row offers no second answer; a caller who is not an operator is offered no pause; a
failed undo names the failure that began the unwinding; schedule times name their zone; the
graph's boxes are named as they read and its scroll area is reachable by keyboard; the events
panel keeps reading a lagging relay after an operator's action. Where the stack cannot be made
to lag or hang on cue, the page's own requests are answered by Playwright (`page.route`) from
the stack's real answers, and its clock is Playwright's (simulated time: no test waits minutes).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from browser_support import DESKTOP, NARROW, shot
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect
from shepherd_cli.client import Api
from shepherd_cli.console import Console
from shepherd_cli.local import LocalStack
from support import ORDER

pytestmark = pytest.mark.e2e
LIVE_OFF = "window.sessionStorage.setItem('shepherd-live', 'off');"


def start(api: Api, wf_type: str, payload: Any) -> str:
    return str(api.call("POST", "/workflows", {"type": wf_type, "input": payload})["workflow_id"])


def finish(api: Api, workflow_id: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view = api.call("GET", f"/workflows/{workflow_id}")
        if view["status"] in ("SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"):
            return dict(view)
        time.sleep(0.3)
    raise AssertionError(f"{workflow_id} did not finish in {seconds} s")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture
def context_for(browser: Any) -> Iterator[Any]:
    """A browser context on a console of the test's own choosing, closed afterwards."""
    opened: list[Any] = []

    def open_on(console: Console, *, live: bool = True) -> Any:
        context = browser.new_context(viewport=DESKTOP, base_url=console.url)
        context.set_default_timeout(10_000)
        if not live:
            context.add_init_script(LIVE_OFF)
        opened.append(context)
        return context.new_page()

    yield open_on
    for context in opened:
        context.close()


@pytest.fixture
def hung_api() -> Iterator[str]:
    """An address that accepts connections and never answers (a hung API), for this test."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    for conn in held:
        conn.close()
    server.close()


def test_a_hung_api_is_an_error_within_5_seconds_not_a_spinner(
    context_for: Any, hung_api: str
) -> None:
    # Given a console whose API accepts connections and never answers (its proxy gives up
    # after 6 s here, 30 s by default)
    with Console(hung_api, caller="console", timeout=6) as console:
        page = context_for(console)
        began = time.monotonic()
        page.goto("/#/workflows/wf-hung")
        # Then within 5 s every page says which read the API has not answered
        slow = page.locator("#api-slow")
        expect(slow).to_contain_text("has not answered GET /workflows/wf-hung", timeout=5_000)
        assert time.monotonic() - began < 5
        expect(slow).to_have_attribute("role", "alert")
        shot(page, "hung-api", full_page=False)
        # And when the proxy gives up, the page says so and offers to try again
        expect(page.locator("#page-problem")).to_contain_text("504 ApiTimeout")
        expect(page.get_by_role("button", name="Try again")).to_be_visible()
        expect(slow).to_be_hidden()


def patched_json(route: Any, patch: Any) -> None:
    """Answer the page's request with the stack's own answer, changed by `patch`."""
    try:
        response = route.fetch()
        body = response.json()
        route.fulfill(response=response, body=json.dumps(patch(body)))
    except PlaywrightError:  # the page closed while a live refresh was being answered
        return


def test_a_deadline_says_the_action_and_marks_it_overdue(
    context_for: Any, console: Console, api: Api
) -> None:
    # Given a running order whose steps' deadlines are: one 51 s past (its task unclaimed),
    # one 30 s ahead (an attempt's heartbeat), and a map item's timeout
    workflow_id = start(
        api,
        "order_fulfilment",
        {**ORDER, "faults": {"reserve_inventory": {"mode": "hang", "times": 5}}},
    )
    page = context_for(console, live=False)
    now = datetime.now(UTC)
    page.clock.install(time=now)
    deadlines = {
        "reserve_inventory": {"at": iso(now + timedelta(seconds=30)), "why": "heartbeat"},
        "charge_payment": {"at": iso(now - timedelta(seconds=51)), "why": "dispatch"},
        "ship_order": {"at": iso(now + timedelta(seconds=300)), "why": "item 3 timeout"},
    }

    def patch(view: dict[str, Any]) -> dict[str, Any]:
        for step in view["steps"]:
            if step["name"] in deadlines:
                step["next_deadline"] = deadlines[step["name"]]
        return view

    page.route(f"**/api/workflows/{workflow_id}", lambda route: patched_json(route, patch))
    page.goto(f"/#/workflows/{workflow_id}")
    listed = page.locator("#deadlines")
    overdue = listed.locator('li[data-step="step:charge_payment"] .deadline')
    # Then each says what the supervisor will do, not only why: the past one is overdue
    expect(overdue).to_contain_text(
        re.compile(r"sends the task again \(nobody claimed it\) overdue by 5\d s")
    )
    expect(overdue).to_contain_text("(dispatch)")
    expect(overdue).to_have_class(re.compile(r"\boverdue\b"))
    expect(overdue.locator("time")).to_have_attribute("data-overdue", "true")
    beat = listed.locator('li[data-step="step:reserve_inventory"] .deadline')
    expect(beat).to_contain_text(re.compile(r"times out the attempt \(no heartbeat\) in [23]\d s"))
    expect(beat).not_to_have_class(re.compile(r"\boverdue\b"))
    expect(listed.locator('li[data-step="step:ship_order"]')).to_contain_text(
        re.compile(r"item 3: times out the attempt in [45] min")
    )
    shot(page, "deadline-overdue", full_page=False)
    # When its time passes with no news, the countdown turns overdue by itself
    page.clock.fast_forward(32_000)
    expect(beat).to_have_class(re.compile(r"\boverdue\b"))
    expect(beat).to_contain_text(re.compile(r"overdue by \d+ s"))
    api.call("POST", f"/workflows/{workflow_id}/cancel")


def test_an_approval_shows_what_is_approved_and_an_answered_row_offers_no_second_answer(
    context_for: Any, console: Console, api: Api
) -> None:
    # Given a large order waiting for its fraud review, and an inbox that lags (the index
    # still lists the review after it was answered, as docs/api.md says it may)
    order_id = f"truth-approve-{time.time_ns()}"
    workflow_id = start(api, "order_fulfilment", {**ORDER, "amount": 5000, "order_id": order_id})
    page = context_for(console, live=False)
    seen: dict[str, Any] = {}

    def lagging(inbox: dict[str, Any]) -> dict[str, Any]:
        mine = [a for a in inbox["items"] if a["workflow_id"] == workflow_id]
        if mine:
            seen["row"] = mine[0]
        elif "row" in seen:
            inbox["items"].insert(0, seen["row"])
        return inbox

    page.route(re.compile(r"/api/approvals\?"), lambda route: patched_json(route, lagging))
    deadline = time.monotonic() + 30  # the review waits once the stock is reserved
    while not any(
        a["workflow_id"] == workflow_id
        for a in api.call("GET", "/approvals", query={"limit": 100})["items"]
    ):
        assert time.monotonic() < deadline, "the review never waited"
        time.sleep(0.5)
    page.goto("/#/approvals")
    row = page.locator(f'tr[data-approval="{workflow_id}:fraud_review"]')
    expect(row).to_be_visible()

    # When the person opens the approval, the dialog shows what they approve
    row.get_by_role("button", name="Approve fraud_review").click()
    dialog = page.locator("dialog.confirm")
    context = dialog.locator("#approval-context")
    expect(context).to_contain_text("order_fulfilment")
    expect(context).to_contain_text(order_id)
    expect(context).to_contain_text("5000")
    shot(page, "approval-context", full_page=False)
    dialog.get_by_role("button", name="Approve fraud_review").click()
    expect(page.locator("#action-outcome")).to_contain_text("Approve fraud_review: done")

    # Then the row the lagging inbox still lists says it is answered, with no live button
    expect(row).to_be_visible()
    expect(row.locator("[data-answered]")).to_have_text("Approved: no longer waiting")
    expect(row.get_by_role("button")).to_have_count(0)
    finish(api, workflow_id)


def test_a_caller_who_is_not_an_operator_is_offered_no_pause(
    context_for: Any, local_stack: LocalStack, page: Any
) -> None:
    # Given a caller the stack does not name an operator
    with Console(local_stack.api_url, caller="viewer") as viewer:
        theirs = context_for(viewer)
        # Then the pools and schedules pages show state but offer no action the API refuses
        theirs.goto("/#/pools")
        expect(theirs.locator('tr[data-pool="config"]')).to_be_visible()
        expect(theirs.locator("#not-operator")).to_contain_text("you are not one")
        expect(theirs.locator("#pools").get_by_role("button")).to_have_count(0)
        expect(theirs.locator("#pools th", has_text="Actions")).to_have_count(0)
        theirs.goto("/#/schedules")
        expect(theirs.locator('tr[data-schedule="nightly-staging"]')).to_be_visible()
        expect(theirs.locator("#not-operator")).to_be_visible()
        expect(theirs.locator("#schedules").get_by_role("button")).to_have_count(0)
    # While an operator (the console's caller) is offered them
    page.goto("/#/pools")
    expect(page.get_by_role("button", name="Pause config")).to_be_visible()
    expect(page.locator("#not-operator")).to_have_count(0)


def test_a_failed_undo_names_the_failure_that_began_the_unwinding(page: Any, api: Api) -> None:
    # Given an order whose charge fails for good, and whose stock's release then fails too
    faults = {
        "charge_payment": {"mode": "permanent"},
        "reserve_inventory:compensation": {"mode": "permanent"},
    }
    workflow_id = start(api, "order_fulfilment", {**ORDER, "faults": faults})
    view = finish(api, workflow_id)
    assert view["status"] == "FAILED" and view["error"]["type"] == "CompensationFailed", view
    page.goto(f"/#/workflows/{workflow_id}")
    banner = page.locator("#root-cause")
    # Then the banner names the undo that failed and, below it, the failure that started it
    expect(banner.locator("h2")).to_contain_text("at undo reserve_inventory")
    first = banner.locator("#first-failure")
    expect(first).to_contain_text("The unwinding began when step charge_payment failed:")
    expect(first).to_contain_text(view["error"]["cause"]["message"])
    expect(banner.locator('[data-traceback="step:charge_payment"]')).to_contain_text(
        view["error"]["cause"]["type"]
    )
    shot(page, "failed-undo")
    # And once the relay has published the end, the history is not said to lag: the event's
    # time is the view's end (the page compares them)
    deadline = time.monotonic() + 60
    while not any(
        e["type"] == "WorkflowFailed"
        for e in api.call("GET", f"/workflows/{workflow_id}/events", query={"limit": 100})["items"]
    ):
        assert time.monotonic() < deadline, "the relay never published the end"
        time.sleep(1)
    page.reload()
    expect(page.locator('#events tr[data-event="WorkflowFailed"]')).to_have_count(
        1,
        timeout=30_000,  # the page's reads, on a busy machine
    )
    expect(page.locator("#history-behind")).to_have_count(0)


def test_schedule_times_name_their_zone(page: Any) -> None:
    page.goto("/#/schedules")
    nightly = page.locator('tr[data-schedule="nightly-staging"] td.next time').first
    # cron(0 2 * * ? *) in Europe/Paris: 02:00 on Paris' clock, said so
    expect(nightly).to_have_attribute("data-zone", "Europe/Paris")
    expect(nightly).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d 02:00:00 \S+ \(Europe/Paris\)$"))
    # rate(1 hour) counts from its deploy, which the API does not know: its period bounds the
    # next firing
    smoke = page.locator('tr[data-schedule="smoke-environment"] td.next')
    expect(smoke).to_have_text("every period from its deploy: the next within 1 hour")


def test_the_graph_names_each_box_as_it_reads_and_its_scroll_area_takes_the_keyboard(
    page: Any,
) -> None:
    page.set_viewport_size(NARROW)
    page.goto("/#/definitions/order_fulfilment")
    graph = page.locator(".dag-wrap").first
    # The scroll area is a named region the keyboard reaches and scrolls
    expect(graph).to_have_attribute("tabindex", "0")
    expect(graph).to_have_attribute("role", "region")
    expect(graph).to_have_attribute("aria-label", re.compile("Graph of order_fulfilment"))
    assert graph.evaluate("el => el.scrollWidth > el.clientWidth"), "the graph should overflow"
    graph.focus()
    for _ in range(10):
        page.keyboard.press("ArrowRight")
    assert graph.evaluate("el => el.scrollLeft") > 0
    # Every box's name starts with the words it shows; the drawn words are read once
    boxes = graph.locator("g.node")
    assert boxes.count() > 3
    for box in boxes.all():
        name = box.get_attribute("aria-label") or ""
        shown = box.locator("text.node-name").text_content() or ""
        status = box.locator("text.node-status").text_content() or ""
        visible = shown.rstrip("…")
        assert name.startswith(visible), (name, shown)
        assert status.rstrip("…") in name, (name, status)
    assert graph.locator("g.node text:not([aria-hidden='true'])").count() == 0


def test_the_events_panel_keeps_reading_a_lagging_relay_after_an_operators_retry(
    context_for: Any, console: Console, api: Api
) -> None:
    # Given a FAILED workflow whose history has its end (a real run, its answers then shaped
    # by this test: the page's view and history come through page.route)
    workflow_id = start(api, "order_fulfilment", ORDER)
    real = finish(api, workflow_id)
    first_end = datetime.fromisoformat(real["finished_at"].replace("Z", "+00:00"))
    state: dict[str, Any] = {"ended": first_end, "relay": [("WorkflowFailed", first_end)]}

    def view(body: dict[str, Any]) -> dict[str, Any]:
        body.update(
            status="FAILED",
            finished_at=iso(state["ended"]),
            updated_at=iso(state["ended"]),
            error={
                "type": "CompensationFailed",
                "message": "undo failed",
                "step": "reserve_inventory",
                "operator_needed": True,
            },
        )
        return body

    def events(body: dict[str, Any]) -> dict[str, Any]:
        kept = [e for e in body["items"] if e["type"] == "WorkflowStarted"]
        for kind, at in state["relay"]:
            kept.append(
                {"type": kind, "at": iso(at), "detail": {"status": "FAILED", "at": iso(at)}}
            )
        body.update(items=kept, next_token=None)
        return body

    page = context_for(console)
    now = datetime.now(UTC)
    page.clock.install(time=now)
    page.route(f"**/api/workflows/{workflow_id}", lambda route: patched_json(route, view))
    page.route(
        re.compile(rf"/api/workflows/{workflow_id}/events\?"),
        lambda route: patched_json(route, events),
    )
    page.route(
        f"**/api/workflows/{workflow_id}/retry",
        lambda route: route.fulfill(
            status=202, json={"workflow_id": workflow_id, "status": "RUNNING"}
        ),
    )
    page.goto(f"/#/workflows/{workflow_id}")
    failed_rows = page.locator('#events tr[data-event="WorkflowFailed"]')
    expect(failed_rows).to_have_count(1)
    expect(page.locator("#history-behind")).to_have_count(0)

    # When the operator retries it, and it fails again, later, while the relay lags
    state["ended"] = now + timedelta(seconds=5)
    page.locator('#actions button[data-action="retry"]').click()
    page.locator("dialog.confirm").get_by_role("button", name="Retry workflow").click()
    expect(page.locator("#action-outcome")).to_contain_text("status now RUNNING")
    # Then the page says its history is behind, and keeps reading it past 2 minutes
    expect(page.locator("#history-behind")).to_be_visible()
    for _ in range(13):  # 130 s of the page's clock, 10 s at a time
        page.clock.run_for(10_000)
    state["relay"].append(("WorkflowFailed", state["ended"]))
    page.clock.run_for(11_000)
    expect(failed_rows).to_have_count(2)
    expect(page.locator("#history-behind")).to_have_count(0)
