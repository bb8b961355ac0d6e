"""The console's list at 3 a.m. (issue 29), in the OS's Chromium against the session's local
stack: a rare status found among 2,000 workflows through the counts, pages in the URL, no
paging race with live refresh, triage columns with the error a click away, bulk actions behind
a confirmation, and every button's label legible in every state (computed contrast >= 4.5:1,
light and dark). Each test has its own caller (and console), apart from the other tests."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from browser_support import DESKTOP, FAST_REFRESH, NARROW, hold_reads, shot, until
from playwright.sync_api import expect
from shepherd import jsonsafe, keys
from shepherd.adapters.dynamodb import to_attr
from shepherd.model import WorkflowRecord, WorkflowStatus
from shepherd_cli.apigw import caller_arn
from shepherd_cli.client import Api
from shepherd_cli.console import Console
from shepherd_cli.local import TABLE, LocalStack
from shepherd_cli.project import Project
from shepherd_cli.streams import StreamReader, stream_arn
from support import ENV, ORDER, ROOT

pytestmark = pytest.mark.e2e
SLOW = 60_000  # ms: a list or count over 2,000 workflows on moto, on a shared machine
LIVE_OFF = "window.sessionStorage.setItem('shepherd-live', 'off');"


def start(api: Api, wf_type: str, payload: Any, **extra: Any) -> str:
    return str(
        api.call("POST", "/workflows", {"type": wf_type, "input": payload, **extra})["workflow_id"]
    )


@pytest.fixture
def own(browser: Any, local_stack: LocalStack) -> Iterator[Any]:
    """own(caller) -> (page, api): a console of the caller's own, and a fresh page on it that
    fails the test on any script error."""
    opened: list[Any] = []
    errors: list[str] = []

    def make(caller: str, *, init: str | None = None) -> tuple[Any, Api]:
        console = Console(local_stack.api_url, caller=caller).__enter__()
        opened.append(console)
        context = browser.new_context(viewport=DESKTOP, base_url=console.url)
        context.set_default_timeout(15_000)
        opened.append(context)
        if init:
            context.add_init_script(init)
        tab = context.new_page()
        tab.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        return tab, Api(local_stack.api_url, caller=caller)

    yield make
    for thing in reversed(opened):
        if isinstance(thing, Console):
            thing.__exit__(None, None, None)
        else:
            thing.close()
    assert errors == [], errors


def seed(local_stack: LocalStack, real: str, records: list[tuple[str, str, int]]) -> None:
    """Write workflows (id, status, created_at) of the caller who started `real` straight into
    the stack's table, in the real layout: a list of many rows without running them."""
    dynamodb = boto3.client("dynamodb", endpoint_url=local_stack.moto_url, region_name="us-east-1")
    owner = dynamodb.get_item(
        TableName=TABLE, Key={"pk": {"S": keys.wf_pk(real)}, "sk": {"S": keys.WF_SK}}
    )["Item"]["owner"]["S"]
    for workflow_id, status, at in records:
        record = WorkflowRecord(
            workflow_id=workflow_id,
            wf_type="order_fulfilment",
            def_hash="h",
            status=WorkflowStatus(status),
            input="{}",
            owner=owner,
            request_hash="r",
            created_at=at,
            updated_at=at,
        )
        dynamodb.put_item(TableName=TABLE, Item=to_attr(record.to_item()))


def rows(page: Any) -> Any:
    return page.locator("#workflow-table tbody tr.wf-row")


def ids_shown(page: Any) -> list[str]:
    return [str(x) for x in rows(page).evaluate_all("rs => rs.map(r => r.dataset.workflowId)")]


# ------------------------------------------------------------ no paging race with live refresh

# The race (issue 29): a live refresh of page 1 is in flight when the operator goes to page 2;
# the old console then drew page 1's rows under "Page 2". The page's list replies are held
# until the test lets them go, so the race is set up, not waited for: a refresh of page 1
# provably in flight at the navigation, its reply landing after page 2's rows (and, the other
# order, before them).
HOLD_LIST_READS = hold_reads("text.startsWith('/api/workflows?')")
LANDED_MS = 500  # after a held reply is handed back: ample for the page to draw it, were it to


def test_paging_while_live_refresh_never_shows_the_previous_pages_rows(
    own: Any, local_stack: LocalStack
) -> None:
    page, api = own("console-paging", init=FAST_REFRESH + HOLD_LIST_READS)
    page.set_default_timeout(20_000)
    # One workflow started through the API, eleven more of the same caller written straight
    # into the table in the real layout (the list reads them as it reads any): nothing to run.
    real = start(api, "provision_environment", ENV)
    now = int(time.time() * 1000)
    seed(local_stack, real, [(f"paging{n:02d}", "SUCCEEDED", now - n * 1_000) for n in range(11)])
    first = [w["workflow_id"] for w in api.call("GET", "/workflows?limit=5")["items"]]
    token = api.call("GET", "/workflows?limit=5")["next_token"]
    second = [
        w["workflow_id"] for w in api.call("GET", f"/workflows?limit=5&next_token={token}")["items"]
    ]
    assert len(first) == len(second) == 5 and not set(first) & set(second)
    page.goto("/#/workflows?limit=5")
    expect(page.get_by_role("button", name=re.compile("Live refresh"))).to_have_text(
        "Live refresh: on"
    )
    for attempt, stale_first in enumerate((False, True)):
        expect(rows(page).first).to_have_attribute("data-workflow-id", first[0], timeout=20_000)
        delivered = page.evaluate("window.__delivered")
        # The next live refresh of page 1 (within its period) is held in flight ...
        page.evaluate("window.__hold.first = true")
        until(page, "window.__held.first.length === 1")
        if stale_first:
            page.evaluate("window.__hold.next = true")
        # ... when the operator goes to page 2.
        page.get_by_role("button", name="Next page").click()
        expect(page).to_have_url(re.compile(r"page=2"), timeout=20_000)
        if stale_first:
            # Page 1's reply lands before page 2's: nothing of it is drawn.
            until(page, "window.__held.next.length === 1")
            assert page.evaluate("window.__release('first')") == 1
            until(page, f"window.__delivered === {delivered + 1}")
            page.wait_for_timeout(LANDED_MS)
            assert not set(ids_shown(page)) & set(first), f"try {attempt}: page 1's rows"
            assert page.evaluate("window.__release('next')") == 1
        expect(page.locator(".pager span")).to_have_text("Page 2", timeout=20_000)
        expect(rows(page).first).to_have_attribute("data-workflow-id", second[0], timeout=20_000)
        if not stale_first:
            # Page 1's reply lands after page 2's rows are drawn: they stay.
            assert page.evaluate("window.__release('first')") == 1
            until(page, f"window.__delivered === {delivered + 1}")
            page.wait_for_timeout(LANDED_MS)
        assert ids_shown(page) == second, f"try {attempt}: page 1's rows under page 2"
        page.go_back()  # the URL holds the page: Back is page 1
        expect(page).not_to_have_url(re.compile(r"page=2"), timeout=20_000)


# --------------------------------------------------- triage, bulk actions, legible buttons

CONTRAST = """
(el) => {
  const parse = (c) => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return [0, 0, 0, 0];
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const lum = (rgb) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  const layers = [];
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
    const bg = parse(getComputedStyle(node).backgroundColor);
    if (bg[3] > 0) layers.push(bg);
    if (bg[3] >= 1) break;
  }
  let base = [255, 255, 255];
  for (const l of layers.reverse()) base = base.map((v, i) => l[i] * l[3] + v * (1 - l[3]));
  const fg = parse(getComputedStyle(el).color);
  const ink = base.map((v, i) => fg[i] * fg[3] + v * (1 - fg[3]));
  const a = lum(ink), b = lum(base);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}
"""


def legible(page: Any, scope: str) -> dict[str, float]:
    """Every enabled button's (and button-like link's) contrast, at rest and hovered."""
    found: dict[str, float] = {}
    buttons = page.locator(f"{scope} button:not([disabled]), {scope} a.button-link")
    for i in range(buttons.count()):
        button = buttons.nth(i)
        if not button.is_visible():
            continue
        name = (button.text_content() or "").strip()
        page.mouse.move(0, 0)
        found[f"{name} (rest)"] = button.evaluate(CONTRAST)
        button.hover()
        found[f"{name} (hover)"] = button.evaluate(CONTRAST)
    page.mouse.move(0, 0)
    return found


@pytest.fixture
def inventory_paused(local_stack: LocalStack) -> Iterator[None]:
    """The inventory pool paused for the test, and resumed after it (as an operator: the
    console's caller is one of the stack's)."""
    operator = Api(local_stack.api_url, caller="console")
    operator.call("POST", "/pools/inventory/pause")
    yield
    operator.call("POST", "/pools/inventory/resume")


def test_triage_columns_bulk_cancel_and_every_button_legible(
    own: Any, inventory_paused: None
) -> None:
    page, api = own("console-triage")
    # Two orders stuck RUNNING: their first step waits for the paused pool (a hung step held
    # both of the pool's workers ~10 s and its cancel waited for the attempt to be fenced).
    stuck = [start(api, "order_fulfilment", ORDER, idempotency_key=f"triage-{n}") for n in range(2)]
    page.clock.install()  # the page's clock, moved on below past the counts' 30 s
    page.goto("/#/workflows")
    expect(rows(page)).to_have_count(2)
    row = page.locator(f'tr[data-workflow-id="{stuck[0]}"]')
    expect(row).to_contain_text("triage-0")  # the idempotency key column
    created = row.locator("time[data-ago]")
    expect(created).to_have_text(re.compile(r"\d+ s ago|\d+ min ago"))
    assert re.search(r"\(.+\) — \d{4}-\d\d-\d\dT", created.get_attribute("title") or "")
    expect(page.locator('#status-counts a[data-status="RUNNING"]')).to_have_text(
        "RUNNING 2", timeout=SLOW
    )
    # The small chart of the range, from the same counts.
    expect(page.locator('#range-chart g[data-bar="Started"]')).to_have_attribute("data-count", "2")
    expect(page.locator('#range-chart g[data-bar="Succeeded"]')).to_have_attribute(
        "data-count", "0"
    )

    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        low = {k: v for k, v in legible(page, "main").items() if v < 4.5}
        assert low == {}, (scheme, low)

    # Bulk cancel: select both, the confirmation lists what will change.
    for workflow_id in stuck:
        page.get_by_label(f"Select {workflow_id}").check()
    cancel = page.locator('button[data-bulk="cancel"]')
    expect(cancel).to_have_text("Cancel selected (2)")
    expect(page.locator('button[data-bulk="retry"]')).to_be_disabled()  # none FAILED
    cancel.click()
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_contain_text("Cancel 2 workflows?")
    for workflow_id in stuck:
        expect(dialog.locator(".bulk-list")).to_contain_text(workflow_id)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        contrast = legible(page, "dialog.confirm")
        assert set(contrast) >= {
            "Back (rest)",
            "Back (hover)",
            "Cancel 2 (rest)",
            "Cancel 2 (hover)",
        }
        low = {k: v for k, v in contrast.items() if v < 4.5}
        assert low == {}, (scheme, low)
    page.emulate_media(color_scheme="light")
    shot(page, "list-bulk-cancel-confirmation", full_page=False)
    dialog.get_by_role("button", name="Cancel 2").click()
    expect(page.locator("#bulk-outcome")).to_contain_text("Cancel: 2 of 2 accepted")
    for workflow_id in stuck:
        assert api.call("GET", f"/workflows/{workflow_id}")["status"] in ("CANCELLING", "CANCELLED")
    # The counts are read again at most every 30 s: once both have ended, 30 s later on the
    # page's clock (not the wall's), the counts say so.
    deadline = time.monotonic() + 60
    while any(api.call("GET", f"/workflows/{w}")["status"] != "CANCELLED" for w in stuck):
        assert time.monotonic() < deadline, "the cancels did not end"
        time.sleep(0.3)
    page.clock.fast_forward(30_000)
    expect(page.locator('#status-counts a[data-status="CANCELLED"]')).to_have_text(
        "CANCELLED 2", timeout=SLOW
    )


# ------------------------------------------- the chart of a time range (issue 29.8)

CHART_STATUSES = ("SUCCEEDED", "SUCCEEDED", "FAILED", "RUNNING", "COMPENSATED", "SUCCEEDED")


def test_the_chart_shows_starts_successes_and_failures_per_bucket_of_the_range(
    own: Any, local_stack: LocalStack
) -> None:
    page, api = own("console-chart", init=FAST_REFRESH)
    real = start(api, "provision_environment", ENV)
    now = int(time.time() * 1000)
    # 28 workflows over the last hour (one every 2 minutes, 1 to 55 minutes ago), in the
    # real layout, with every outcome; and the real one, started now.
    seeded = [
        (now - (1 + 2 * n) * 60_000, CHART_STATUSES[n % len(CHART_STATUSES)]) for n in range(28)
    ]
    seed(local_stack, real, [(f"chart{n:03d}", st, at) for n, (at, st) in enumerate(seeded)])
    expect_done = api.call("GET", f"/workflows/{real}")
    for _ in range(60):
        if expect_done["status"] == "SUCCEEDED":
            break
        page.wait_for_timeout(500)
        expect_done = api.call("GET", f"/workflows/{real}")
    assert expect_done["status"] == "SUCCEEDED"
    seeded.append(
        (int(datetime.fromisoformat(expect_done["created_at"]).timestamp() * 1000), "SUCCEEDED")
    )

    series_reads: list[str] = []
    list_reads: list[str] = []
    page.on("request", lambda r: series_reads.append(r.url) if "/series?" in r.url else None)
    page.on("request", lambda r: list_reads.append(r.url) if "/workflows?" in r.url else None)
    page.goto("/#/workflows")
    # Of every time: the three totals, and no series read.
    expect(page.locator('#range-chart g[data-bar="Started"]')).to_have_attribute(
        "data-count", "29", timeout=SLOW
    )
    page.get_by_label("Created").select_option("1h")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"range=1h&created_after="))
    chart = page.locator("#range-chart svg.series")
    expect(chart).to_have_attribute("data-buckets", "12", timeout=SLOW)
    expect(page.locator("#range-chart figcaption")).to_have_text(
        "Started, succeeded and failed per 5 min, by when each workflow started"
    )
    bars = chart.locator("g.series-bar")
    expect(bars).to_have_count(12)
    got = bars.evaluate_all(
        "bs => bs.map(b => [Date.parse(b.dataset.start), +b.dataset.started,"
        " +b.dataset.succeeded, +b.dataset.failed, b.dataset.capped])"
    )
    # Every bucket holds exactly the workflows started in it, split by what became of them.
    starts = [g[0] for g in got] + [now + 3_600_000]
    for i, (_, started, succeeded, failed, capped) in enumerate(got):
        mine = [st for at, st in seeded if starts[i] <= at < starts[i + 1]]
        assert started == len(mine), (i, got[i], mine)
        assert succeeded == mine.count("SUCCEEDED"), (i, got[i], mine)
        assert failed == mine.count("FAILED") + mine.count("COMPENSATED"), (i, got[i], mine)
        assert capped == "false"
    assert sum(g[1] for g in got) == 29
    # In words: the SVG's label, a line under it, and every bucket in a table.
    label = chart.get_attribute("aria-label") or ""
    outcomes = [st for _, st in seeded]
    words = (
        f"29 started, {outcomes.count('SUCCEEDED')} succeeded, "
        f"{outcomes.count('FAILED') + outcomes.count('COMPENSATED')} failed or undone, per 5 min"
    )
    assert words == "29 started, 15 succeeded, 9 failed or undone, per 5 min"
    assert label.startswith(words), label
    expect(page.locator("#series-total")).to_contain_text(words)
    page.locator(".series-table summary").click()
    table_rows = page.locator(".series-table tbody tr")
    expect(table_rows).to_have_count(12)
    first = table_rows.nth(0).locator("td")
    expect(first.nth(0)).to_have_text(str(got[0][1]))
    expect(first.nth(2)).to_have_text(str(got[0][3]))
    # Read once and kept 30 s (as the counts are): live refreshes of the list read it again
    # from the page's cache, not from the API. Two of them, counted, not slept on:
    # a refresh looks at the cache after its list read, so the third read says two have.
    refreshed = len(list_reads) + 3
    for _ in range(300):
        if len(list_reads) >= refreshed:
            break
        page.wait_for_timeout(100)
    assert len(list_reads) >= refreshed, "the list did not refresh"
    assert len(series_reads) == 1, series_reads
    assert "buckets=12" in series_reads[0]
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        ratio = page.locator("#series-total").evaluate(CONTRAST)
        assert ratio >= 4.5, (scheme, ratio)
        shot(page, f"list-chart-last-hour-{scheme}", full_page=False)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(NARROW)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the chart scrolls sideways by {overflow}px at 400px"


# ------------------------------------------------------- 2,000 workflows, a rare status

TOTAL = 2_000
RARE = 14
BASE = 1_750_000_000_000  # the seeded starts: long ago, one a second
PAGE_SIZE = 20  # the console's rows per page (workflows.js PAGE_SIZE)


CROWD = "console-crowd"  # the caller; its workflows are owned by its principal


def crowd() -> tuple[list[dict[str, Any]], list[str]]:
    """2,000 workflow items of the crowd's caller in the real layout, 14 of them FAILED among
    the oldest, and those 14's ids, newest first."""
    seeded: list[dict[str, Any]] = []
    failed: list[str] = []
    for n in range(TOTAL):
        rare = n < RARE * 10 and n % 10 == 3
        record = WorkflowRecord(
            workflow_id=f"crowd{n:05d}",
            wf_type="order_fulfilment",
            def_hash="h",
            status=WorkflowStatus.FAILED if rare else WorkflowStatus.SUCCEEDED,
            input="{}",
            owner=caller_arn(CROWD),
            request_hash="r",
            created_at=BASE + n * 1_000,
            updated_at=BASE + n * 1_000,
            finished_at=BASE + n * 1_000 + 4_000,
            error='{"type": "CardDeclined", "message": "the card was declined", '
            '"step": "charge_payment", "operator_needed": true}'
            if rare
            else None,
        )
        seeded.append(record.to_item())
        if rare:
            failed.append(record.workflow_id)
    return seeded, list(reversed(failed))


@dataclass
class SeededStack(LocalStack):
    """A local stack whose table holds `rows` before its control process starts, with the
    relay's checkpoint after them: they are listed and counted as any workflow is, and never
    announced. The relay would otherwise write 2,000 history items and 200 event batches
    through moto's one DynamoDB lock while the test's reads wait on it (what the relay does
    with a workflow's changes is the end-to-end tests' to prove)."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def _create_resources(self) -> tuple[dict[str, Any], str]:
        made = super()._create_resources()
        dynamodb = self.client("dynamodb")
        for at in range(0, len(self.rows), 25):
            batch = [{"PutRequest": {"Item": to_attr(i)}} for i in self.rows[at : at + 25]]
            dynamodb.batch_write_item(RequestItems={TABLE: batch})
        reader = StreamReader(self.client("dynamodbstreams"), stream_arn(dynamodb, TABLE))
        while reader.read():
            pass
        (self.state_dir / f"relay-{self.moto_port}.json").write_text(json.dumps(reader.positions))
        return made


@pytest.fixture
def crowded(browser: Any, tmp_path: Path) -> Iterator[tuple[Any, Api, list[str]]]:
    """A caller with 2,000 workflows written straight into the table (`crowd`) and one started
    through the API today (it stays RUNNING: no worker takes its steps), on a stack of its own:
    nothing on it runs a step (the test reads lists and counts), so it starts no agent worker
    and sweeps seldom, and it is thrown away whole afterwards."""
    seeded, failed = crowd()
    with (
        SeededStack(
            project=Project.find(ROOT),
            port=0,
            workers=0,
            sweep_interval=5,
            state_dir=tmp_path,
            rows=seeded,
        ) as stack,
        Console(stack.api_url, caller=CROWD) as console,
    ):
        api = Api(stack.api_url, caller=CROWD)
        start(api, "provision_environment", ENV)
        context = browser.new_context(viewport=DESKTOP, base_url=console.url)
        context.set_default_timeout(15_000)
        context.add_init_script(LIVE_OFF)
        try:
            yield context.new_page(), api, failed
        finally:
            context.close()


def test_a_rare_status_among_2000_workflows_is_found_through_the_counts(
    crowded: tuple[Any, Api, list[str]],
) -> None:
    page, _, failed = crowded
    page.goto("/#/workflows")
    expect(page.locator('#status-counts a[data-status="ALL"]')).to_have_text(
        "All 2,001", timeout=SLOW
    )
    failures = page.locator('#status-counts a[data-status="FAILED"]')
    expect(failures).to_have_text("FAILED 14")
    shot(page, "list-2000-counts", full_page=False)
    failures.click()
    expect(page).to_have_url(re.compile(r"status=FAILED"))
    # Every failure on the first page, newest first: never "No workflows match."
    expect(rows(page)).to_have_count(RARE, timeout=SLOW)
    assert ids_shown(page) == failed
    first = rows(page).first
    expect(first.locator(".step-name")).to_have_text("charge_payment")
    expect(first).to_contain_text("CardDeclined: the card was declined")
    expect(first).to_contain_text("operator needed")
    first.get_by_role("button", name="Show error").click()
    detail = page.locator(f"#row-detail-{failed[0]}")
    expect(detail).to_be_visible()
    expect(detail).to_contain_text("step: charge_payment")
    shot(page, "list-2000-failed-expanded", full_page=False)

    # The page lives in the URL: page 2 of everything survives a reload; Back is page 1. At
    # the console's own page size, so the counts read above (kept 30 s per set of filters, a
    # page size is one) serve these pages too: three more count reads of 2,000 would only
    # queue the page reads behind them on moto.
    page.goto("/#/workflows")
    expect(rows(page)).to_have_count(PAGE_SIZE, timeout=SLOW)
    top = ids_shown(page)[0]
    page.get_by_role("button", name="Next page").click()
    expect(page).to_have_url(re.compile(r"page=2"))
    expect(rows(page).first).not_to_have_attribute("data-workflow-id", top, timeout=SLOW)
    second = ids_shown(page)
    page.reload()
    expect(rows(page)).to_have_count(PAGE_SIZE, timeout=SLOW)
    assert ids_shown(page) == second
    page.go_back()
    expect(rows(page).first).to_have_attribute("data-workflow-id", top, timeout=SLOW)

    # A time range: the last hour holds only the workflow started today.
    page.goto("/#/workflows")
    page.get_by_label("Created").select_option("1h")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"range=1h&created_after="))
    expect(rows(page)).to_have_count(1, timeout=SLOW)
    expect(page.locator('#status-counts a[data-status="ALL"]')).to_have_text("All 1", timeout=SLOW)


# ------------------------------------------ the workflow page: root cause, deadlines, resume


def test_a_paused_workflow_says_why_when_and_what_to_do(page: Any, api: Api) -> None:
    broken = {**ENV, "faults": {"configure": {"mode": "permanent", "times": 1}}}
    workflow_id = start(api, "provision_environment", broken)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(page.locator("#wf-status")).to_have_text("PAUSED", timeout=30_000)
    # The root cause at the top, with the step, the error and who must act.
    banner = page.locator("#root-cause")
    expect(banner.locator("h2")).to_have_text("Paused at configure")
    expect(banner.locator("#operator-needed")).to_contain_text("An operator is needed")
    expect(banner.locator("#pause-timeout")).to_contain_text(re.compile(r"in (59|60) min"))
    # The traceback as text, read through the API: real lines, no bucket link, no escapes.
    traceback = banner.locator("pre.traceback")
    expect(traceback).to_contain_text("Traceback (most recent call last)")
    text = traceback.inner_text()
    assert "\n" in text and "\\n" not in text
    assert page.locator("a", has_text="Download large payload").count() == 0
    shot(page, "workflow-paused-banner", full_page=False)

    # Resume offers the failed step (not those that succeeded), its box filled with its input.
    page.locator('#actions button[data-action="resume"]').click()
    dialog = page.locator("dialog.confirm")
    options = dialog.locator("#resume-step option").all_inner_texts()
    assert "configure (FAILED)" in options
    assert not any(o.startswith("create_network") for o in options)  # it succeeded
    dialog.get_by_label("Replacement input for step").select_option("configure")
    box = dialog.get_by_label("Replacement input (JSON)")
    expect(box).to_be_enabled()
    prefilled = box.input_value()
    assert '"env_name": "dev-one"' in prefilled and '"faults"' in prefilled
    box.fill(prefilled.replace('"times": 1', '"times": 0'))
    dialog.get_by_role("button", name="Resume workflow").click()
    expect(page.locator("#action-outcome")).to_contain_text("status now RUNNING")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=30_000)
    expect(page.locator("#root-cause")).to_have_count(0)
    # The history, as published, keeps the pause (why, where) after the resume.
    events = page.locator("#events tr[data-event]")
    expect(page.locator('#events tr[data-event="WorkflowSucceeded"]')).to_have_count(1)
    expect(page.locator('#events tr[data-event="WorkflowPaused"]')).to_contain_text(
        "failure at configure"
    )
    # ... and says who resumed it (issue 29.4: every operator action with who did it).
    expect(page.locator('#events tr[data-event="WorkflowResumed"]')).to_contain_text(
        re.compile(r"by \S+")
    )
    expect(events.first).to_have_attribute("data-event", "WorkflowStarted")


def test_a_step_behind_a_paused_pool_says_so_with_no_countdown(page: Any, api: Api) -> None:
    api.call("POST", "/pools/cloud/pause")
    try:
        workflow_id = start(api, "provision_environment", ENV)
        page.goto(f"/#/workflows/{workflow_id}")
        waiting = page.locator('#deadlines li[data-step="step:create_network"]')
        expect(waiting).to_contain_text("waiting for pool cloud (paused)")
        view = api.call("GET", f"/workflows/{workflow_id}")
        network = next(s for s in view["steps"] if s["name"] == "create_network")
        assert network["next_deadline"] == {"at": None, "why": "waiting for pool cloud (paused)"}
    finally:
        api.call("POST", "/pools/cloud/resume")
    # Once the pool runs, the step's deadline is a countdown again (or it is already done).
    expect(page.locator("#deadlines li", has_text="(paused)")).to_have_count(0, timeout=30_000)
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=30_000)


# ----------------------------------------------------------------------- large payloads


def test_a_large_payload_downloads_as_a_named_file_from_a_fresh_link(page: Any, api: Api) -> None:
    payload = {**ORDER, "note": "n" * 20_000}
    workflow_id = start(api, "order_fulfilment", payload)
    page.clock.install()  # the page's timers under a clock the test moves
    page.goto(f"/#/workflows/{workflow_id}")
    page.clock.run_for(1_000)
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=30_000)
    link = page.locator("#data .json", has_text="Input").locator("a.payload-link")
    expect(link).to_have_attribute("href", re.compile("response-content-disposition="))
    assert link.get_attribute("target") is None  # no tab full of JSON
    with page.expect_download() as download:
        link.click()
    assert download.value.suggested_filename == f"{workflow_id}-input.json"
    path = download.value.path()
    assert path.stat().st_size > 20_000 and '"note"' in path.read_text()
    # The page stopped following the finished workflow, but while it shows links it reads
    # its view again each minute: each read presigns anew (new signing time), so a link
    # clicked later never expired (they last 5 minutes).
    first = link.get_attribute("href")
    page.wait_for_timeout(1_100)  # the next presign is at another second: another signature
    page.clock.run_for(61_000)
    expect(link).not_to_have_attribute("href", first or "")
    expect(link).to_have_attribute("href", re.compile("response-content-disposition="))


HOSTILE = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'


def test_a_large_payload_shows_its_first_kilobytes_as_text_beside_its_download(
    page: Any, api: Api
) -> None:
    # A 20 KiB input that starts with markup, and a step returning 40 KiB: both in the bucket.
    payload = {**ORDER, "a_note": HOSTILE + "n" * 20_000, "output_bytes": {"ship_order": 40_000}}
    workflow_id = start(api, "order_fulfilment", payload)
    previews: list[str] = []
    page.on("request", lambda r: previews.append(r.url) if "/preview?" in r.url else None)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=30_000)
    view = api.call("GET", f"/workflows/{workflow_id}")
    data = jsonsafe.dumps(payload).encode()
    assert view["input_ref"]["size"] == len(data)

    box = page.locator("#data .json", has_text="Input")
    preview = box.locator('figure.payload-preview[data-preview="workflow:input"]')
    preview.scroll_into_view_if_needed()
    caption = preview.locator("figcaption")
    expect(caption).to_have_text(
        re.compile(r"^Truncated preview: the first 4\.0 KiB of 19\.\d KiB")
    )
    # The payload's first 4 KiB, exactly, as text (markup and all), the download beside it.
    text = preview.locator("pre.preview-text")
    expect(text).to_have_text(data[:4096].decode(), use_inner_text=False)
    assert str(text.text_content()).startswith('{"a_note":"<img src=x onerror=')
    expect(preview.locator(".cut-note")).to_contain_text("more in the download")
    expect(box.locator("a.payload-link")).to_have_text(re.compile(r"Download large payload"))
    # Never rendered: no element came of it, nothing ran.
    expect(page.locator("main img")).to_have_count(0)
    expect(page.locator("main script")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None

    # The output's large member is its step's output: previewed once, shown in both places.
    member = page.locator('#data figure.payload-preview[data-preview="ship_order:output"]')
    member.scroll_into_view_if_needed()
    expect(member.locator("figcaption")).to_contain_text("of 39.")
    expect(member.locator("pre.preview-text")).to_contain_text('{"')
    step = page.locator("#item-step-ship_order")
    step.locator("summary").click()
    inner = step.locator('figure.payload-preview[data-preview="ship_order:output"]')
    inner.scroll_into_view_if_needed()
    expect(inner.locator("pre.preview-text")).to_have_text(
        str(member.locator("pre.preview-text").text_content()), use_inner_text=False
    )
    shot(page, "workflow-payload-preview", full_page=False)
    # Two payloads, two reads of 4 KiB each through the API: none per redraw, none per place.
    assert sorted(previews) == sorted(
        [
            f"{page.url.split('#')[0]}api/workflows/{workflow_id}/preview?field=input&bytes=4096",
            f"{page.url.split('#')[0]}api/workflows/{workflow_id}/preview"
            "?field=output&step=ship_order&bytes=4096",
        ]
    ), previews


def test_a_steps_earlier_attempts_fold_under_its_latest(page: Any, api: Api) -> None:
    flaky = {**ORDER, "faults": {"reserve_inventory": {"mode": "error", "times": 2}}}
    workflow_id = start(api, "order_fulfilment", flaky)
    page.goto(f"/#/workflows/{workflow_id}")
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=30_000)
    rows = {
        n: page.locator(f'#timeline tr[data-row="step:reserve_inventory:{n}"]') for n in (1, 2, 3)
    }
    expect(rows[3]).to_be_visible()
    expect(rows[1]).to_be_hidden()
    expect(rows[2]).to_be_hidden()
    fold = page.locator('#timeline button[data-fold="step:reserve_inventory"]')
    expect(fold).to_have_text("Show 2 earlier attempts")
    fold.click()
    expect(rows[1]).to_be_visible()
    expect(rows[1]).to_have_attribute("data-outcome", "error")
    expect(fold).to_have_attribute("aria-expanded", "true")
    fold.click()
    expect(rows[1]).to_be_hidden()
    # A step with one attempt has nothing to fold.
    expect(page.locator('#timeline button[data-fold="step:ship_order"]')).to_have_count(0)
