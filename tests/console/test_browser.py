"""The console in a real browser (the OS's Chromium through Playwright), against the session's
local stack: find a workflow, open it, watch it run to its end without reloading; cancel one
from the page; pause and resume a pool with the keyboard; hostile payloads stay text; every
page readable at 1280x800 and 400px wide. Every wait is Playwright's bounded `expect`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import NARROW, shot
from playwright.sync_api import expect
from shepherd_cli.client import Api
from support import ENV, ORDER

pytestmark = pytest.mark.e2e
RUN_SECONDS = 30_000  # ms: a workflow's whole run on a busy machine


def start(api: Api, wf_type: str, payload: Any, **extra: Any) -> str:
    body = {"type": wf_type, "input": payload, **extra}
    return str(api.call("POST", "/workflows", body)["workflow_id"])


def node(page: Any, name: str, kind: str = "step") -> Any:
    return page.locator(f'#graph g.node[data-kind="{kind}"][data-name="{name}"]')


def attempt_row(page: Any, name: str, attempt: int, kind: str = "step") -> Any:
    return page.locator(f'#timeline tr[data-row="{kind}:{name}:{attempt}"]')


@pytest.fixture
def paused_pool(api: Api) -> Iterator[Any]:
    """Pause a pool for the test; it is running again afterwards whatever happened."""
    paused: list[str] = []

    def pause(pool: str) -> None:
        api.call("POST", f"/pools/{pool}/pause")
        paused.append(pool)

    yield pause
    for pool in paused:
        api.call("POST", f"/pools/{pool}/resume")


def test_a_workflow_is_found_opened_and_watched_to_its_end(
    page: Any, api: Api, paused_pool: Any
) -> None:
    # Given a workflow that fails one attempt of create_compute, then waits for the config pool
    paused_pool("config")
    payload = {**ENV, "faults": {"create_compute": {"mode": "error", "times": 1}}}
    workflow_id = start(api, "provision_environment", payload)

    # When the operator finds it in the list and opens it
    page.goto("/#/workflows")
    row = page.locator(f'tr[data-workflow-id="{workflow_id}"]')
    expect(row).to_contain_text("provision_environment", timeout=30_000)  # a cold stack's first
    shot(page, "workflows")
    row.get_by_role("link", name=workflow_id).click()
    expect(page.locator("h1")).to_contain_text(workflow_id)
    page.evaluate("window.__notReloaded = true")

    # Then the page shows it waiting: the failed attempt and its retry, configure not yet run
    expect(node(page, "create_compute")).to_have_attribute("data-status", "SUCCEEDED")
    expect(node(page, "configure")).to_have_attribute("data-status", re.compile("PENDING|QUEUED"))
    expect(page.locator("#wf-status")).to_have_text("RUNNING")
    expect(attempt_row(page, "create_compute", 1)).to_have_attribute("data-outcome", "error")
    # Each attempt says why, name and message (issue 29.5), after the step moved on.
    expect(attempt_row(page, "create_compute", 1).locator("td.error-text")).to_have_text(
        "TransientServiceError: injected transient error on attempt 1"
    )
    expect(attempt_row(page, "create_compute", 1).locator(".attempt-message")).to_have_attribute(
        "data-cut", "false"
    )
    expect(attempt_row(page, "create_compute", 2)).to_have_attribute("data-outcome", "ok")
    expect(node(page, "configure")).to_contain_text(re.compile("PENDING|QUEUED"))  # in words too
    shot(page, "workflow-running")

    # When the pool runs again, the same page follows the workflow to its end
    api.call("POST", "/pools/config/resume")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=RUN_SECONDS)
    for step in ("create_network", "create_storage", "create_compute", "configure", "verify"):
        expect(node(page, step)).to_have_attribute("data-status", "SUCCEEDED")
        expect(node(page, step)).to_contain_text("SUCCEEDED")
    expect(attempt_row(page, "configure", 1)).to_have_attribute("data-outcome", "ok")
    expect(attempt_row(page, "verify", 1)).to_have_attribute("data-outcome", "ok")
    expect(page.locator('#events tr[data-event="WorkflowSucceeded"]')).to_have_count(1)
    expect(page.locator('#events tr[data-event="StepRetried"]')).to_contain_text("create_compute")
    expect(page.locator("#data")).to_contain_text('"healthy": true')
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("#live-state")).to_have_text("Finished: not refreshing.")
    shot(page, "workflow")
    page.set_viewport_size(NARROW)
    shot(page, "workflow-narrow")


def test_cancel_from_the_page_through_the_confirmation_ends_cancelled(page: Any, api: Api) -> None:
    # Given an order whose first step hangs (its worker stops heartbeating)
    payload = {**ORDER, "faults": {"reserve_inventory": {"mode": "hang", "times": 5}}}
    workflow_id = start(api, "order_fulfilment", payload)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(node(page, "reserve_inventory")).to_have_attribute("data-status", "RUNNING")
    expect(page.locator('#actions button[data-action="retry"]')).to_be_disabled()

    # When the operator cancels it and confirms
    page.locator('#actions button[data-action="cancel"]').click()
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(f"Cancel workflow {workflow_id}?")
    shot(page, "workflow-cancel-confirmation", full_page=False)
    dialog.get_by_role("button", name="Cancel workflow").click()

    # Then the page says what happened, and follows it to CANCELLED
    expect(dialog).to_have_count(0)
    expect(page.locator("#action-outcome")).to_contain_text("status now CANCELLING")
    expect(page.locator("#wf-status")).to_have_text("CANCELLED", timeout=RUN_SECONDS)
    expect(node(page, "reserve_inventory", "compensation")).to_have_attribute(
        "data-status", "SUCCEEDED"
    )
    expect(node(page, "charge_payment")).to_have_attribute("data-status", "CANCELLED")
    expect(attempt_row(page, "reserve_inventory", 1)).to_contain_text("supervisor")
    expect(page.locator('#events tr[data-event="WorkflowCancelled"]')).to_have_count(1)
    # Who cancelled it, in the history (issue 29.4): the console's caller, as the API says.
    expect(page.locator('#events tr[data-event="WorkflowCancelRequested"]')).to_contain_text(
        re.compile(r"by \S+")
    )
    expect(page.locator('#actions button[data-action="cancel"]')).to_be_disabled()
    assert api.call("GET", f"/workflows/{workflow_id}")["status"] == "CANCELLED"


def test_an_action_the_api_refuses_shows_its_error(page: Any, api: Api) -> None:
    workflow_id = start(api, "order_fulfilment", ORDER)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=RUN_SECONDS)
    # Every action is disabled once it ended; the API still has the last word if asked.
    for action in ("cancel", "pause", "resume", "compensate", "retry"):
        expect(page.locator(f'#actions button[data-action="{action}"]')).to_be_disabled()
    page.evaluate(
        "document.querySelector('#actions button[data-action=\"pause\"]').disabled = false"
    )
    page.locator('#actions button[data-action="pause"]').click()
    page.locator("dialog.confirm").get_by_role("button", name="Pause workflow").click()
    expect(page.locator("#action-outcome")).to_contain_text("409 InvalidTransition")


def test_pause_then_resume_with_a_replacement_input_validated_before_sending(
    page: Any, api: Api, paused_pool: Any
) -> None:
    # Given an order waiting for the payments pool, paused from the page
    paused_pool("payments")
    workflow_id = start(api, "order_fulfilment", ORDER)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(node(page, "reserve_inventory")).to_have_attribute("data-status", "SUCCEEDED")
    page.locator('#actions button[data-action="pause"]').click()
    page.locator("dialog.confirm").get_by_role("button", name="Pause workflow").click()
    expect(page.locator("#wf-status")).to_have_text("PAUSED")
    expect(page.locator("#action-outcome")).to_contain_text("status now PAUSED")

    # When the operator resumes with a replacement input that is not JSON, nothing is sent
    page.locator('#actions button[data-action="resume"]').click()
    dialog = page.locator("dialog.confirm")
    dialog.get_by_label("Replacement input for step").select_option("charge_payment")
    dialog.get_by_label("Replacement input (JSON)").fill('{"amount": 41, oops}')
    dialog.get_by_role("button", name="Resume workflow").click()
    expect(dialog.locator(".problem")).to_contain_text("not valid JSON")
    expect(dialog.get_by_label("Replacement input (JSON)")).to_be_focused()
    shot(page, "workflow-resume-dialog", full_page=False)
    assert api.call("GET", f"/workflows/{workflow_id}")["status"] == "PAUSED"

    # JSON that does not fit the definition's InputSchema is refused by the API, which says
    # what is missing (issue 29.7), and nothing changes
    dialog.get_by_label("Replacement input (JSON)").fill('{"amount": 41}')
    dialog.get_by_role("button", name="Resume workflow").click()
    expect(page.locator("#action-outcome")).to_contain_text("400 InvalidInput")
    expect(page.locator("#action-outcome")).to_contain_text("order_id")
    assert api.call("GET", f"/workflows/{workflow_id}")["status"] == "PAUSED"

    # Then, with an input that fits, it resumes and the step runs on the replacement
    replacement = {**ORDER, "amount": 41}
    page.locator('#actions button[data-action="resume"]').click()
    dialog.get_by_label("Replacement input for step").select_option("charge_payment")
    dialog.get_by_label("Replacement input (JSON)").fill(json.dumps(replacement))
    dialog.get_by_role("button", name="Resume workflow").click()
    expect(page.locator("#action-outcome")).to_contain_text("status now RUNNING")
    api.call("POST", "/pools/payments/resume")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=RUN_SECONDS)
    view = api.call("GET", f"/workflows/{workflow_id}")
    charge = next(s for s in view["steps"] if s["name"] == "charge_payment")
    assert charge["input"] == replacement and charge["output"]["amount"] == 41
    # The events panel is the workflow's history as published (issue 29.4): the operator's
    # pause with who did it, one resume; the replacement input is in the attempts table.
    expect(page.locator('#events tr[data-event="WorkflowPaused"]')).to_contain_text("operator by")
    expect(page.locator('#events tr[data-event="WorkflowResumed"]')).to_have_count(1)
    expect(page.locator('#timeline tr[data-outcome="input_replaced"]')).to_contain_text(
        "charge_payment"
    )


def _same_object(url: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(url.split("?", maxsplit=1)[0]) + r"\?")


def test_large_payloads_are_download_links_to_the_payload_bucket(page: Any, api: Api) -> None:
    # A 20 KiB input and a step returning 40 KiB: over the 8 KiB inline threshold, both are
    # kept in the payload bucket and the API gives presigned downloads in `_ref` twins.
    payload = {**ORDER, "note": "n" * 20_000, "output_bytes": {"ship_order": 40_000}}
    workflow_id = start(api, "order_fulfilment", payload)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=RUN_SECONDS)
    view = api.call("GET", f"/workflows/{workflow_id}")
    data = page.locator("#data")
    input_link = data.locator(".json", has_text="Input").get_by_role(
        "link", name=re.compile(r"Download large payload \(19\.\d KiB\)")
    )
    # Each read presigns anew (a fresh signature and expiry): the same object, not the same URL.
    expect(input_link).to_have_attribute("href", _same_object(view["input_ref"]["url"]))
    output = data.locator(".json", has_text="Output")
    ship = output.get_by_role("link", name=re.compile(r"Download large payload \(39\.\d KiB\)"))
    expect(ship).to_have_attribute("href", _same_object(view["output_ref"]["ship_order"]["url"]))
    expect(output).to_contain_text('"notify_customer"')  # small outputs stay inline beside it
    expect(output).to_contain_text(view["output_ref"]["ship_order"]["sha256"])


HOSTILE = '<img src=x onerror="window.__pwned = 1">'
SCRIPT = "<script>window.__pwned = 2</script>"


def test_no_payload_is_ever_rendered_as_html(page: Any, api: Api) -> None:
    payload = {
        **ORDER,
        "customer": HOSTILE,  # the demo agent copies it into its output
        "note": SCRIPT,
        SCRIPT: "a hostile key",
        # User data shaped like a link is data: only a `_ref` twin from the API is a link.
        "big": {"url": "https://payloads.example/o?X-Sig=1", "size": 1536, "sha256": "ab" * 32},
        "fake": {"url": "javascript:window.__pwned = 3", "size": 1},
    }
    workflow_id = start(api, "order_fulfilment", payload)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=RUN_SECONDS)
    main = page.locator("main")
    expect(main.locator("img")).to_have_count(0)
    expect(main.locator("script")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None
    # The text is there, literally, in the input and in the output that copied it.
    expect(page.locator("#data .j-str", has_text="<img src=x onerror=")).to_have_count(2)
    expect(page.locator("#data .j-key", has_text="<script>")).to_have_count(1)
    expect(
        page.locator("#data .j-str", has_text="<script>window.__pwned = 2</script>")
    ).to_have_count(1)
    # Link-shaped user data is never a link, https or javascript:.
    expect(page.get_by_role("link", name=re.compile("Download large payload"))).to_have_count(0)
    expect(page.locator('a[href^="javascript"]')).to_have_count(0)
    expect(page.locator("#data")).to_contain_text("javascript:window.__pwned = 3")
    expect(page.locator("#data")).to_contain_text("https://payloads.example/o?X-Sig=1")
    # Opening a dialog titled with the id stays inert too.
    expect(page.locator("#data")).to_contain_text("a hostile key")
    assert page.evaluate("window.__pwned") is None


def test_pause_and_resume_a_pool_from_the_page_with_the_keyboard(
    page: Any, api: Api, paused_pool: Any
) -> None:
    page.goto("/#/pools")
    row = page.locator('tr[data-pool="notifications"]')
    expect(row).to_contain_text("RUNNING")
    shot(page, "pools")

    # Escape leaves the confirmation without doing anything.
    row.get_by_role("button", name="Pause notifications").focus()
    page.keyboard.press("Enter")
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(row).to_contain_text("RUNNING")

    # Enter, Tab to the confirm button, Enter: paused.
    paused_pool("notifications")  # resumed after the test, whatever happens
    api.call("POST", "/pools/notifications/resume")
    row.get_by_role("button", name="Pause notifications").focus()
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    page.keyboard.press("Tab")
    expect(dialog.get_by_role("button", name="Pause pool")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#action-outcome")).to_contain_text("Pause notifications: done")
    expect(row).to_contain_text("PAUSED")
    pools = {p["name"]: p for p in api.call("GET", "/pools")["items"]}
    assert pools["notifications"]["paused"] is True and pools["notifications"]["by"]

    row.get_by_role("button", name="Resume notifications").click()
    dialog.get_by_role("button", name="Resume pool").click()
    expect(row).to_contain_text("RUNNING")
    pools = {p["name"]: p for p in api.call("GET", "/pools")["items"]}
    assert pools["notifications"]["paused"] is False


def test_a_pools_rate_limit_and_circuit_are_shown_and_its_circuit_forced(
    page: Any, api: Api
) -> None:
    """Issue 26: the pool's rate limit, its breaker's state, since when, whether an operator
    forced it, and its last changes are on the pools page; an operator forces it open or
    closed and gives it back to its breaker, each confirmed."""
    page.goto("/#/pools")
    row = page.locator('tr[data-pool="config"]')
    expect(row.locator("td.rate")).to_have_text("1000/s, burst 1000")
    circuit = row.locator("td.circuit")
    expect(circuit).to_have_attribute("data-circuit", "closed")
    expect(circuit).to_have_attribute("data-mode", "auto")
    expect(page.locator('tr[data-pool="notifications"] td.circuit')).to_have_text("none")
    dialog = page.locator("dialog.confirm")
    try:
        row.get_by_role("button", name="Open circuit of config").click()
        expect(dialog).to_contain_text("claims nothing")
        dialog.get_by_role("button", name="Open circuit").click()
        expect(page.locator("#action-outcome")).to_contain_text("Open the circuit of config: done")
        expect(circuit).to_have_attribute("data-circuit", "open")
        expect(circuit).to_contain_text("forced open")
        expect(row).to_contain_text("PAUSED by its circuit")
        expect(row.get_by_role("button", name="Resume config")).to_have_count(0)
        circuit.locator("summary").click()
        expect(circuit.locator(".circuit-history li").first).to_contain_text("closed → open")
        shot(page, "pools-circuit-open")
        pools = {p["name"]: p for p in api.call("GET", "/pools")["items"]}
        assert pools["config"]["circuit"]["state"] == "open"
        assert pools["config"]["circuit"]["mode"] == "open"

        row.get_by_role("button", name="Close circuit of config").click()
        dialog.get_by_role("button", name="Close circuit").click()
        expect(circuit).to_have_attribute("data-circuit", "closed")
        expect(circuit).to_have_attribute("data-mode", "closed")
        row.get_by_role("button", name="Automatic circuit of config").click()
        dialog.get_by_role("button", name="Automatic circuit").click()
        expect(circuit).to_have_attribute("data-mode", "auto")
        expect(row.get_by_role("button", name="Automatic circuit of config")).to_have_count(0)
    finally:  # the other tests need the pool claiming
        api.call("POST", "/pools/config/circuit", {"action": "close"})
        api.call("POST", "/pools/config/circuit", {"action": "auto"})


def test_schedules_show_their_next_firings_and_are_paused_and_resumed(page: Any, api: Api) -> None:
    """Issue 25.4: the console lists every schedule of the definitions with its expression,
    zone and next firings, and an operator pauses and resumes one, each confirmed."""
    page.goto("/#/schedules")
    nightly = page.locator('tr[data-schedule="nightly-staging"]')
    expect(nightly).to_contain_text("cron(0 2 * * ? *)")
    expect(nightly).to_contain_text("Europe/Paris")
    expect(nightly.locator("td.next time").first).to_have_attribute(
        "datetime",
        re.compile(r"T0[01]:00:00"),  # 02:00 in Paris is 00:00 or 01:00 UTC
    )
    smoke = page.locator('tr[data-schedule="smoke-environment"]')
    expect(smoke.locator("td.next")).to_contain_text("every period")
    dialog = page.locator("dialog.confirm")
    try:
        nightly.get_by_role("button", name="Pause nightly-staging").click()
        expect(dialog).to_contain_text("start nothing until it is resumed")
        dialog.get_by_role("button", name="Pause schedule").click()
        expect(page.locator("#action-outcome")).to_contain_text("Pause nightly-staging: done")
        expect(nightly).to_contain_text("PAUSED")
        expect(nightly.locator("td.next")).to_have_text("paused: fires nothing")
        shot(page, "schedules-paused")
        listed = {s["name"]: s for s in api.call("GET", "/schedules")["items"]}
        assert listed["nightly-staging"]["paused"] is True
        nightly.get_by_role("button", name="Resume nightly-staging").click()
        dialog.get_by_role("button", name="Resume schedule").click()
        expect(nightly).to_contain_text("RUNNING")
    finally:
        api.call("POST", "/schedules/nightly-staging/resume")
    listed = {s["name"]: s for s in api.call("GET", "/schedules")["items"]}
    assert listed["nightly-staging"]["paused"] is False


def test_a_person_approves_from_the_inbox_and_rejects_from_the_workflow_page(
    page: Any, api: Api
) -> None:
    """Issue 25.3: the console's pending approvals (GET /approvals, newest first) and the
    workflow page answer an Approval step behind the confirmation, with a comment that is
    recorded with who decided; the order example's fraud_review waits for orders over 1000."""
    large = {**ORDER, "amount": 5000}
    approved = start(api, "order_fulfilment", {**large, "order_id": "console-approve"})
    rejected = start(api, "order_fulfilment", {**large, "order_id": "console-reject"})
    page.goto("/#/approvals")
    rows = page.locator("#approvals tbody tr")
    first = page.locator(f'tr[data-approval="{approved}:fraud_review"]')
    expect(first).to_be_visible(timeout=30_000)
    expect(page.locator(f'tr[data-approval="{rejected}:fraud_review"]')).to_be_visible(
        timeout=30_000  # its reservation may come later; the page refreshes every 5 s
    )
    # Newest first, as the API lists them (by when each review was requested).
    order = rows.evaluate_all("rs => rs.map(r => r.dataset.approval)")
    listed = api.call("GET", "/approvals", query={"limit": 50})["items"]
    assert order == [f"{a['workflow_id']}:{a['step']}" for a in listed]
    requested = [a["requested_at"] for a in listed]
    assert requested == sorted(requested, reverse=True)
    shot(page, "approvals-inbox")
    first.get_by_role("button", name="Approve fraud_review").click()
    dialog = page.locator("dialog.confirm")
    dialog.get_by_label("Comment (optional)").fill("called the customer")
    dialog.get_by_role("button", name="Approve fraud_review").click()
    expect(page.locator("#action-outcome")).to_contain_text("Approve fraud_review: done")
    expect(first).to_have_count(0)
    review = next(
        s for s in api.call("GET", f"/workflows/{approved}")["steps"] if s["name"] == "fraud_review"
    )
    assert review["status"] == "SUCCEEDED"
    assert review["decision"]["verdict"] == "approved"
    assert review["decision"]["comment"] == "called the customer"

    page.goto(f"/#/workflows/{rejected}")
    answer = page.locator('#answers [data-step="fraud_review"]')
    expect(answer).to_contain_text("waits for a person")
    answer.get_by_role("button", name="Reject fraud_review").click()
    dialog.get_by_label("Comment (optional)").fill("card reported stolen")
    dialog.get_by_role("button", name="Reject fraud_review").click()
    expect(page.locator("#action-outcome")).to_contain_text("Reject fraud_review: done")
    expect(page.locator("#wf-status")).to_have_text(
        re.compile("COMPENSAT|FAILED|PAUSED"), timeout=30_000
    )
    expect(answer).to_have_count(0)
    review = next(
        s for s in api.call("GET", f"/workflows/{rejected}")["steps"] if s["name"] == "fraud_review"
    )
    assert (review["status"], review["decision"]["verdict"]) == ("FAILED", "rejected")
    assert review["decision"]["comment"] == "card reported stolen"
    # The answer is on the page too: who, when, and the comment (issue 29.9).
    decision = page.locator("#item-step-fraud_review .decision")
    expect(decision).to_have_attribute("data-verdict", "rejected")
    expect(decision).to_contain_text("rejected by ")
    expect(decision).to_contain_text(": “card reported stolen”")
    # ... and in the history, as published (issue 29.4): the answer, who gave it, and when.
    answered = page.locator('#events tr[data-event="ApprovalAnswered"]')
    expect(answered).to_contain_text(
        f"fraud_review attempt 1 — rejected: “card reported stolen” — by {review['decision']['by']}"
    )
    expect(answered.locator("time")).to_have_count(1)


def test_the_list_filters_pages_and_finds_by_id_or_idempotency_key(page: Any, api: Api) -> None:
    keyed = start(api, "order_fulfilment", ORDER, idempotency_key="console-order-7")
    env = start(api, "provision_environment", ENV)
    page.goto("/#/workflows?limit=1")
    first = page.locator("#workflow-table tbody tr")
    expect(first).to_have_count(1, timeout=30_000)  # a list read of 32 shards, on a busy machine
    expect(first).to_have_attribute("data-workflow-id", env)  # newest first
    page.get_by_role("button", name="Next page").click()
    expect(first).to_have_attribute("data-workflow-id", keyed)
    page.get_by_role("button", name="Previous page").click()
    expect(first).to_have_attribute("data-workflow-id", env)

    page.get_by_label("Type").select_option("order_fulfilment")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"type=order_fulfilment"))
    expect(first).to_have_attribute("data-workflow-id", keyed)

    # Live: a workflow started now shows up without a reload.
    later = start(api, "order_fulfilment", ORDER)
    expect(first).to_have_attribute("data-workflow-id", later)

    finder = page.get_by_role("searchbox", name="Find")
    finder.fill("console-order-7")
    finder.press("Enter")
    expect(page.locator("h1")).to_contain_text(keyed)
    page.go_back()
    page.get_by_role("searchbox", name="Find").fill(env)
    page.get_by_role("searchbox", name="Find").press("Enter")
    expect(page.locator("h1")).to_contain_text(env)
    page.go_back()
    page.get_by_role("searchbox", name="Find").fill("no-such-key")
    page.get_by_role("searchbox", name="Find").press("Enter")
    expect(page.locator(".lookup-result")).to_contain_text("None of your workflows")

    toggle = page.get_by_role("button", name=re.compile("Live refresh"))
    expect(toggle).to_have_attribute("aria-pressed", "true")
    toggle.click()
    expect(toggle).to_have_text("Live refresh: off")
    expect(toggle).to_have_attribute("aria-pressed", "false")


def field(scope: Any, term: str) -> Any:
    """The value of a term in a definition list (dt/dd) inside `scope`."""
    return scope.locator(f'dt:text-is("{term}") + dd')


def test_definitions_show_each_graph_and_every_field(page: Any) -> None:
    page.goto("/#/definitions/provision_environment")
    expect(page.locator("h2#def-title")).to_have_text("provision_environment")
    graph = page.locator(".definition svg.dag")
    expect(graph.locator('g.node[data-kind="step"]')).to_have_count(5)
    expect(graph.locator('g.node[data-kind="compensation"]')).to_have_count(4)
    expect(graph.locator("path.edge")).to_have_count(4)  # the join has two of them
    compute = page.locator('section[data-step="create_compute"]')
    expect(field(compute, "DependsOn")).to_have_text("create_network, create_storage")
    expect(field(compute, "Pool")).to_have_text("cloud")
    expect(field(compute, "TimeoutSeconds")).to_have_text("10 s")
    expect(field(compute, "HeartbeatSeconds")).to_have_text("3 s")
    expect(field(compute, "Retry")).to_have_text(
        "3 retries, 0.5 s × 2 (≤ 4 s), FULL jitter; not retried: QuotaExceeded"  # noqa: RUF001
    )
    expect(field(compute, "OnFailure")).to_have_text("COMPENSATE (the definition's)")
    expect(field(compute, "Compensation")).to_contain_text("delete_compute on cloud")
    shot(page, "definitions")
    page.get_by_role("link", name="order_fulfilment").click()
    expect(page.locator("h2#def-title")).to_have_text("order_fulfilment")
    notify = page.locator('section[data-step="notify_customer"]')
    expect(field(notify, "Compensation")).to_have_text("none")
    # An Approval and a Wait say what they are, in the graph and on their cards (issue 29.9).
    order = page.locator(".definition svg.dag")
    expect(order).not_to_contain_text("undefined")
    review = order.locator('g.node[data-name="fraud_review"]')
    expect(review.locator("text.node-status")).to_have_text("approval by a person")
    expect(review).to_have_attribute("data-step-kind", "approval")
    reminder = order.locator('g.node[data-name="until_reminder"] text.node-status')
    expect(reminder).to_have_text("wait until $.input.remind_at")
    review_card = page.locator('section[data-step="fraud_review"]')
    expect(field(review_card, "Approval")).to_have_text("answered within 3600 s by the owner")
    expect(field(review_card, "Condition")).to_contain_text('"NumericGreaterThan":1000')


@pytest.mark.parametrize("width", [1280, 400])
def test_every_page_reflows_without_sideways_scrolling(page: Any, api: Api, width: int) -> None:
    workflow_id = start(api, "provision_environment", ENV)
    page.set_viewport_size({"width": width, "height": 800})
    for name, route, heading in (
        ("workflows", "/#/workflows", "Workflows"),
        ("workflow", f"/#/workflows/{workflow_id}", f"Workflow {workflow_id}"),
        ("definitions", "/#/definitions/order_fulfilment", "Definitions"),
        ("pools", "/#/pools", "Pools"),
    ):
        page.goto(route)
        expect(page.locator("h1")).to_have_text(heading)
        expect(page.locator("main[data-ready]")).to_have_count(1)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} at {width}px scrolls sideways by {overflow}px"
        shot(page, f"page-{name}-{width}")


def test_a_workflows_signals_are_listed_and_sent_and_its_tags_filter_the_list(
    page: Any, api: Api
) -> None:
    """Issue 37.8: an order_amendment's page lists the signals its steps wait for and those
    kept not taken yet, and sends one through its form (taken by the waiting step, the step's
    decision saying so); its tags show on its page and `tag=` filters the list."""
    order_id = "console-amend"
    wf = start(
        api, "order_amendment", {**ORDER, "order_id": order_id}, tags={"customer": "console-ada"}
    )
    start(api, "order_amendment", {**ORDER, "order_id": "console-other"})
    page.goto(f"/#/workflows/{wf}")
    signals = page.locator("#signals")
    expect(signals).to_contain_text("amend (await_amendment)", timeout=RUN_SECONDS)
    expect(page.locator("#summary")).to_contain_text("customer:console-ada")
    # Sent at once (its 20 s window may not be open yet: then it is kept until it is).
    form = signals.locator("form.signal-form")
    form.locator('textarea[name="signal-payload"]').fill('{"quantity": 3}')
    form.get_by_role("button", name="Send signal").click()
    expect(page.locator("#signal-outcome")).to_contain_text(
        re.compile("taken by await_amendment|kept until a step waits for it"),
        timeout=RUN_SECONDS,
    )
    decision = page.locator("#item-step-await_amendment .decision")
    expect(decision).to_contain_text("took signal amend #0", timeout=RUN_SECONDS)
    page.goto("/#/workflows?tag=customer%3Aconsole-ada")
    rows = page.locator("#workflow-table tr.wf-row")
    expect(rows).to_have_count(1, timeout=RUN_SECONDS)
    expect(rows.first).to_have_attribute("data-workflow-id", wf)
    expect(rows.first).to_contain_text("customer:console-ada")
