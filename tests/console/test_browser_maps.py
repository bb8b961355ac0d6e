"""Map steps and child workflows in the console (issue 24.3, 29.9), in the OS's Chromium
against a local stack of this module's own: a project in a temporary folder with a map of
agents, a map of child workflows and a child-workflow step. A map's progress bar and its words,
its item table paged through the API's signed tokens with the page in the URL (no paging race
with live refresh), a status filter that follows a short page's next_token and never says "no
items" while more remain, a failed item's error, a large output's download; a child's link to
its parent and the parent's links to its children, the current and the earlier ones."""

from __future__ import annotations

import dataclasses
import re
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from browser_support import DESKTOP, hold_reads, shot, until
from playwright.sync_api import expect
from shepherd import keys
from shepherd.adapters.dynamodb import from_attr, to_attr
from shepherd.decisions.transitions import error_json
from shepherd.model import StepRecord
from shepherd_cli.client import Api
from shepherd_cli.console import Console
from shepherd_cli.local import TABLE, LocalStack
from shepherd_cli.project import Project

pytestmark = pytest.mark.e2e
TERMINAL = ("SUCCEEDED", "COMPENSATED", "FAILED", "CANCELLED")
PAGE = 25  # the console's items per page (mapitems.js ITEMS_PAGE)

FAN = """\
Name: fan
Comment: A map of agents that lets its failed items pass (console browser tests).
Steps:
  - Name: each
    Agent: item_work
    Pool: items
    TimeoutSeconds: 60
    Retry: {MaxAttempts: 0}
    Map: {ItemsPath: $.input.items, MaxConcurrency: 3, ToleratedFailurePercentage: 100}
"""
FAN_STRICT = """\
Name: fan_strict
Comment: A map of agents, one at a time, that fails on its first failed item.
Steps:
  - Name: each
    Agent: item_work
    Pool: items
    TimeoutSeconds: 60
    Retry: {MaxAttempts: 0}
    Map: {ItemsPath: $.input.items, MaxConcurrency: 1}
"""
LEG = """\
Name: leg
Comment: A child workflow of one step.
Steps:
  - Name: walk
    Agent: leg_work
    Pool: items
    TimeoutSeconds: 60
    Retry: {MaxAttempts: 0}
"""
TRIP = """\
Name: trip
Comment: A child-workflow step (retried once) and a map of child workflows, both roots.
Steps:
  - Name: first_leg
    Workflow: leg
    TimeoutSeconds: 300
    InputPath: $.input.first
    Retry: {MaxAttempts: 1, IntervalSeconds: 1}
  - Name: other_legs
    Workflow: leg
    TimeoutSeconds: 300
    Map: {ItemsPath: $.input.others, MaxConcurrency: 2}
"""
AGENTS = """\
import os
import time

from shepherd.engine.agent import AgentRegistry
from shepherd.errors import PermanentError

registry = AgentRegistry()


@registry.agent("item_work")
def item_work(ctx):
    item = ctx.item if isinstance(ctx.item, dict) else {}
    gate = item.get("gate")  # a file the test creates when the items may go on
    give_up = time.monotonic() + 50  # under the step's 60 s, if the test never opens it
    while gate and not os.path.exists(gate) and time.monotonic() < give_up:
        time.sleep(0.05)
    if item.get("sleep"):
        time.sleep(item["sleep"])
    if item.get("fail"):
        raise PermanentError(f"item {ctx.item_index} refused: {item['fail']}", name="ItemRefused")
    if item.get("big"):
        return {"i": ctx.item_index, "blob": "x" * item["big"]}
    return {"i": ctx.item_index}


@registry.agent("leg_work")
def leg_work(ctx):
    marker = ctx.input.get("fail_once")
    if marker and not os.path.exists(marker):
        open(marker, "w").close()
        raise PermanentError("the first try of this leg fails", name="LegBlocked")
    return {"walked": ctx.input.get("to")}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("console-maps")
    (root / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nagent-modules = ["console_map_agents"]\n'
    )
    flows = root / "flows"
    flows.mkdir()
    for name, text in {"fan": FAN, "fan_strict": FAN_STRICT, "leg": LEG, "trip": TRIP}.items():
        (flows / f"{name}.yaml").write_text(text)
    (root / "console_map_agents.py").write_text(textwrap.dedent(AGENTS))
    return root


@pytest.fixture(scope="module")
def stack(project: Path) -> Iterator[LocalStack]:
    with LocalStack(
        project=Project.find(project),
        port=0,
        workers=2,
        sweep_interval=0.5,
        state_dir=project / ".shepherd",
    ) as running:
        yield running


@pytest.fixture
def own(browser: Any, stack: LocalStack) -> Iterator[Any]:
    """own(caller, init=None) -> (page, api): a console of the caller's own on this module's
    stack, and a fresh page on it that fails the test on any script error."""
    opened: list[Any] = []
    errors: list[str] = []

    def make(caller: str, *, init: str | None = None) -> tuple[Any, Api]:
        console = Console(stack.api_url, caller=caller).__enter__()
        opened.append(console)
        context = browser.new_context(viewport=DESKTOP, base_url=console.url)
        context.set_default_timeout(20_000)
        opened.append(context)
        if init:
            context.add_init_script(init)
        tab = context.new_page()
        tab.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))

        def on_console(msg: Any) -> None:
            if msg.type == "error" and "Failed to load resource" not in msg.text:
                errors.append(f"console: {msg.text}")

        tab.on("console", on_console)
        return tab, Api(stack.api_url, caller=caller)

    yield make
    for thing in reversed(opened):
        if isinstance(thing, Console):
            thing.__exit__(None, None, None)
        else:
            thing.close()
    assert errors == [], errors


def start(api: Api, wf_type: str, payload: Any) -> str:
    return str(api.call("POST", "/workflows", {"type": wf_type, "input": payload})["workflow_id"])


def finish(api: Api, workflow_id: str, seconds: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view = dict(api.call("GET", f"/workflows/{workflow_id}"))
        if view["status"] in TERMINAL:
            return view
        time.sleep(0.5)
    raise AssertionError(f"{workflow_id} did not finish: {view}")


def step_of(view: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in view["steps"] if s["name"] == name)


def item_rows(page: Any, step: str = "each") -> Any:
    return page.locator(f'section[data-map="{step}"] tr.item-row')


def indexes_shown(page: Any, step: str = "each") -> list[int]:
    found = item_rows(page, step).evaluate_all("rs => rs.map(r => Number(r.dataset.index))")
    return [int(i) for i in found]


# WCAG's contrast of two colours, computed in the page from their computed styles.
CONTRAST = """
(pair) => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const [a, b] = pair.map((c) => lum(rgb(c)));
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}
"""


def contrast(page: Any, first: str, second: str) -> float:
    return float(page.evaluate(CONTRAST, [first, second]))


def page_background(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.documentElement).backgroundColor"))


# ------------------------------------------------------------ progress, items, paging, filter


ITEMS = 30  # two pages: all of the first and five of the second (was 40: engine time per item)
REFUSED = (7, 27)  # one failed item on each page
OK = ITEMS - len(REFUSED)


def fan_items(gate: Path) -> list[dict[str, Any]]:
    """ITEMS items (a page and a part of another), each held at `gate` until the test opens it
    (so the page sees the map run): one item on each page fails, item 3 returns a large
    output."""
    return [
        {
            "gate": str(gate),
            **({"fail": "no stock"} if i in REFUSED else {}),
            **({"big": 12_000} if i == 3 else {}),
        }
        for i in range(ITEMS)
    ]


def test_a_maps_progress_and_item_table_live_paged_and_filtered(own: Any, tmp_path: Path) -> None:
    page, api = own("console-map")
    gate = tmp_path / "items-may-go-on"
    wf = start(api, "fan", {"items": fan_items(gate)})
    page.goto(f"/#/workflows/{wf}")
    bar = page.locator('section[data-map="each"] [role="progressbar"]')
    expect(bar).to_have_attribute("aria-valuemax", str(ITEMS), timeout=60_000)
    # Live: while it runs, the bar shows fewer than all items ended, then all of them.
    running = int(bar.get_attribute("aria-valuenow") or "0")
    assert running < ITEMS, "the map ended before the page could watch it run"
    gate.touch()
    expect(bar).to_have_attribute("aria-valuenow", str(ITEMS), timeout=180_000)
    view = finish(api, wf)
    assert view["status"] == "SUCCEEDED" and step_of(view, "each")["map"]["failed"] == 2
    expect(page.locator("#wf-status")).to_have_text("SUCCEEDED", timeout=30_000)
    expect(bar).to_have_attribute(
        "aria-valuetext", f"{OK} of {ITEMS} items succeeded, 2 failed; map SUCCEEDED"
    )
    words = page.locator('section[data-map="each"] .map-words')
    expect(words).to_contain_text(f"{OK} of {ITEMS} items succeeded, 2 failed")
    expect(bar.locator('[data-part="succeeded"]')).to_have_attribute("data-count", str(OK))
    expect(bar.locator('[data-part="failed"]')).to_have_attribute("data-count", "2")
    # The graph's box says it is a map, with its items, in words and as a bar.
    box = page.locator('svg.dag g.node[data-name="each"]')
    expect(box).to_have_attribute("data-step-kind", "map")
    expect(box.locator("text.node-status")).to_have_text(
        f"SUCCEEDED · {OK}/{ITEMS} items · 2 failed"
    )
    expect(box).to_have_attribute("aria-label", re.compile(rf"\(a map\).*{OK} succeeded, 2 failed"))
    expect(box.locator('.node-bar rect[data-part="failed"]')).to_have_count(1)

    # Page 1: items 0-24 by index, a failed item's error, an output inline, a large one a link.
    expect(item_rows(page)).to_have_count(PAGE)
    assert indexes_shown(page) == list(range(PAGE))
    failed = page.locator('section[data-map="each"] tr[data-index="7"]')
    expect(failed).to_have_attribute("data-status", "FAILED")
    expect(failed.locator(".error-text")).to_have_text("ItemRefused: item 7 refused: no stock")
    expect(page.locator('tr[data-index="0"] .item-output')).to_have_text('{"i":0}')
    big = page.locator('tr[data-index="3"] a.payload-link')
    expect(big).to_have_text(re.compile(r"Download large payload \(11\.\d KiB\)"))
    assert (big.get_attribute("href") or "").startswith("http")

    # Page 2 is a navigation: the URL holds the page and its token; the keyboard lands on it.
    page.locator('section[data-map="each"] .pager').get_by_role("button", name="Next page").click()
    expect(page).to_have_url(re.compile(r"items=each.*page=2.*at="))
    expect(item_rows(page)).to_have_count(ITEMS - PAGE)
    assert indexes_shown(page) == list(range(PAGE, ITEMS))
    assert page.evaluate("document.activeElement.id") == "map-each-title"
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"page=2"))
    expect(item_rows(page)).to_have_count(PAGE)

    # The status filter keeps only the failed items (the API's `status`).
    section = page.locator('section[data-map="each"]')
    section.get_by_label("Status").select_option("FAILED")
    section.get_by_role("button", name="Show items").click()
    expect(page).to_have_url(re.compile(r"items=each&status=FAILED"))
    expect(item_rows(page)).to_have_count(2)
    assert indexes_shown(page) == list(REFUSED)
    expect(page.locator(f'tr[data-index="{REFUSED[1]}"] .error-text')).to_contain_text(
        f"item {REFUSED[1]} refused"
    )

    # Legible in both themes: the words at 4.5:1, the bar's parts at 3:1 against the page.
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        background = page_background(page)
        ink = words.evaluate("e => getComputedStyle(e).color")
        assert contrast(page, ink, background) >= 4.5, (scheme, ink, background)
        page.goto(f"/#/workflows/{wf}")
        expect(bar).to_have_attribute("aria-valuenow", str(ITEMS))
        for part in bar.locator(".map-part").all():
            fill = part.evaluate("e => getComputedStyle(e).backgroundColor")
            assert contrast(page, fill, background) >= 3, (scheme, fill, background)
        # The graph's box keeps its light fill in both themes: its words stay dark on it.
        box_fill = box.locator("rect").first.evaluate("e => getComputedStyle(e).fill")
        for line in ("text.node-name", "text.node-status"):
            ink = box.locator(line).evaluate("e => getComputedStyle(e).fill")
            assert contrast(page, ink, box_fill) >= 4.5, (scheme, line, ink, box_fill)
        shot(page, f"map-items-{scheme}")
    page.emulate_media(color_scheme="light")


# The race: a live refresh of page 1's items in flight when the operator goes to page 2; its
# rows must never land under "Page 2". Item reads are held until the test lets them go, so the
# race is set up, not waited for: page 1's reply lands after page 2's rows, and (the other
# order) before them.
HOLD_ITEM_READS = hold_reads("text.includes('/items?')")
LANDED_MS = 500  # after a held reply is handed back: ample for the page to draw it, were it to


def test_paging_a_running_maps_items_never_shows_another_pages_rows(own: Any) -> None:
    page, api = own("console-map-race", init=HOLD_ITEM_READS)
    wf = start(api, "fan", {"items": [{"sleep": 3} for _ in range(60)]})
    page.goto(f"/#/workflows/{wf}")
    expect(item_rows(page)).to_have_count(PAGE, timeout=60_000)
    pager = page.locator('section[data-map="each"] .pager')
    first = list(range(PAGE))
    for attempt, stale_first in enumerate((False, True)):
        expect(item_rows(page).first).to_have_attribute("data-index", "0", timeout=20_000)
        delivered = page.evaluate("window.__delivered")
        # The next live read of page 1 (within its 2 s period) is held in flight ...
        page.evaluate("window.__hold.first = true")
        until(page, "window.__held.first.length === 1")
        if stale_first:
            page.evaluate("window.__hold.next = true")
        # ... when the operator goes to page 2.
        pager.get_by_role("button", name="Next page").click()
        expect(page).to_have_url(re.compile(r"page=2"), timeout=20_000)
        if stale_first:
            # Page 1's reply lands before page 2's: nothing of it is drawn.
            until(page, "window.__held.next.length >= 1")
            assert page.evaluate("window.__release('first')") == 1
            until(page, f"window.__delivered === {delivered + 1}")
            page.wait_for_timeout(LANDED_MS)
            assert not set(indexes_shown(page)) & set(first), f"try {attempt}: page 1's rows"
            assert page.evaluate("window.__release('next')") >= 1
        expect(pager.locator(".page-number")).to_have_text("Page 2", timeout=20_000)
        expect(item_rows(page).first).to_have_attribute("data-index", str(PAGE), timeout=20_000)
        if not stale_first:
            # Page 1's reply lands after page 2's rows are drawn: they stay.
            assert page.evaluate("window.__release('first')") == 1
            until(page, f"window.__delivered === {delivered + 1}")
            page.wait_for_timeout(LANDED_MS)
        assert indexes_shown(page) == list(range(PAGE, 2 * PAGE)), f"try {attempt}"
        page.go_back()
        expect(page).not_to_have_url(re.compile(r"page=2"), timeout=20_000)
    assert api.call("GET", f"/workflows/{wf}")["status"] == "RUNNING", "ran out before the end"
    api.call("POST", f"/workflows/{wf}/cancel")


# ------------------------------------------------- a filter that follows short pages' tokens

BIG = 6_000  # items: a filtered read scans 1,000 of them, a page follows at most 5 reads
SEEDED = (1_500, 2_200, 5_600)


@pytest.fixture
def big_map(own: Any, stack: LocalStack) -> tuple[Any, Api, str]:
    """A map of 6,000 items whose first item failed (so it stopped, the rest CANCELLED), and
    three more FAILED items far apart: copies of the engine's own failed item unit at indexes
    1,500, 2,200 and 5,600 (written in the real layout), counted on the map's window shard."""
    page, api = own("console-map-filter")
    items: list[dict[str, Any]] = [{} for _ in range(BIG)]
    items[0] = {"fail": "first"}
    wf = start(api, "fan_strict", {"items": items})
    view = finish(api, wf)
    assert step_of(view, "each")["map"]["status"] == "FAILED", view
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.moto_url, region_name="us-east-1")
    pk, sk = keys.map_item_key(wf, "each", 0)
    first = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}})["Item"]
    stored = from_attr(first)
    assert stored is not None
    unit = StepRecord.from_item(stored)
    for index in SEEDED:
        copy = dataclasses.replace(
            unit, index=index, error=error_json("ItemRefused", f"item {index} refused: far")
        )
        dynamodb.put_item(TableName=TABLE, Item=to_attr(copy.to_item()))
    # Counted as the engine counts: on a window shard of the map (their counts are summed).
    dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": keys.wf_pk(wf)}, "sk": {"S": keys.map_shard_sk("step", "each", 0)}},
        UpdateExpression="ADD m_failed :n",
        ExpressionAttributeValues={":n": {"N": str(len(SEEDED))}},
    )
    return page, api, wf


def test_a_status_filter_follows_short_pages_and_never_says_none_while_more_remain(
    big_map: tuple[Any, Api, str],
) -> None:
    page, api, wf = big_map
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if "/steps/each/items" in r.url else None)
    page.goto(f"/#/workflows/{wf}?items=each&status=FAILED")
    # Five reads of 1,000 items (the first holds item 0, the next three are short or empty):
    # the page holds what they found and says more remain; Next goes on from the last token.
    expect(item_rows(page)).to_have_count(3, timeout=30_000)
    assert indexes_shown(page) == [0, 1_500, 2_200]
    expect(page.locator('tr[data-index="2200"] .error-text')).to_have_text(
        "ItemRefused: item 2200 refused: far"
    )
    note = page.locator('section[data-map="each"] .items-note')
    expect(note).to_contain_text("among 5,000 items from its start; more items remain")
    assert len(reads) == 5, reads
    assert sum("next_token" in url for url in reads) == 4  # each read after the first follows
    page.locator('section[data-map="each"] .pager').get_by_role("button", name="Next page").click()
    expect(item_rows(page)).to_have_count(1, timeout=30_000)  # the next reads, as the first's
    assert indexes_shown(page) == [5_600]
    expect(
        page.locator('section[data-map="each"] .pager button:text-is("Next page")')
    ).to_be_disabled()

    # No WAITING item at all (a map of agents' items never wait): five empty reads say so,
    # with the way on, never "none"; the last read finds none and says so.
    page.goto(f"/#/workflows/{wf}?items=each&status=WAITING")
    searching = page.locator('section[data-map="each"] .items-searching')
    expect(searching).to_contain_text(
        "No WAITING items among the 5,000 items from this page's start; more items remain",
        timeout=30_000,
    )
    expect(page.locator('section[data-map="each"] .empty[data-more="false"]')).to_have_count(0)
    searching.get_by_role("link", name="search on").click()
    expect(page.locator('section[data-map="each"] .empty[data-more="false"]')).to_have_text(
        "No more WAITING items."
    )
    # The progress counts the seeded failures with the engine's own counts.
    counts = step_of(api.call("GET", f"/workflows/{wf}"), "each")["map"]
    assert counts["failed"] == 4, counts
    bar = page.locator('section[data-map="each"] [role="progressbar"]')
    expect(bar).to_have_attribute("aria-valuenow", str(BIG - counts["pending"] - counts["running"]))
    expect(bar).to_have_attribute(
        "aria-valuetext",
        f"{counts['succeeded']:,} of {BIG:,} items succeeded, 4 failed, "
        f"{counts['cancelled']:,} cancelled; map FAILED",
    )


# ----------------------------------------------------------------- parents and their children


def test_a_child_links_its_parent_and_the_parent_its_children(own: Any, tmp_path: Path) -> None:
    page, api = own("console-children")
    marker = tmp_path / "first-leg-tried"
    wf = start(
        api,
        "trip",
        {
            "first": {"to": "harbour", "fail_once": str(marker)},
            "others": [{"to": "hill"}, {"to": "lake"}],
        },
    )
    view = finish(api, wf)
    assert view["status"] == "SUCCEEDED", view
    children = step_of(view, "first_leg")["children"]
    assert len(children) == 2  # the first child failed, the retry's succeeded
    items = api.call("GET", f"/workflows/{wf}/steps/other_legs/items")["items"]
    item_children = [i["children"][-1] for i in items]

    page.goto(f"/#/workflows/{wf}")
    # The graph says which steps run child workflows.
    first_box = page.locator('svg.dag g.node[data-name="first_leg"]')
    expect(first_box).to_have_attribute("data-step-kind", "child")
    expect(first_box.locator("text.node-status")).to_have_text(
        "child workflow · SUCCEEDED · attempt 2"
    )
    others_box = page.locator('svg.dag g.node[data-name="other_legs"]')
    expect(others_box).to_have_attribute("data-step-kind", "map-of-children")
    expect(others_box).to_have_attribute("aria-label", re.compile(r"a map of child workflows"))
    # At the top, each child step's current child; in the step's details, the earlier ones.
    expect(page.locator("#children-summary a[data-child]")).to_have_text([children[1]])
    page.locator("#item-step-first_leg > details > summary").click()
    expect(page.locator("#child-of-first_leg a")).to_have_text(children[1])
    expect(page.locator("#earlier-children-first_leg a")).to_have_text([children[0]])
    # A map of children: each item's row links its child.
    for index, child in enumerate(item_children):
        link = page.locator(f'section[data-map="other_legs"] tr[data-index="{index}"] a')
        expect(link).to_have_text(child)
    shot(page, "workflow-with-children")

    # To the child and back: the child says whose it is, with a link.
    page.locator(f'#children-summary a[data-child="{children[1]}"]').click()
    expect(page.locator("h1")).to_have_text(f"Child workflow {children[1]}")
    parent = page.locator("#parent-link")
    expect(parent).to_have_text(f"A child workflow of {wf} (step first_leg).")
    parent.get_by_role("link", name=wf).click()
    expect(page.locator("h1")).to_have_text(f"Workflow {wf}")
    # The earlier child failed, and says so; a map item's child names its item.
    page.goto(f"/#/workflows/{children[0]}")
    expect(page.locator("#wf-status")).to_have_text(re.compile("COMPENSATED|FAILED"))
    expect(page.locator("#parent-link")).to_have_text(f"A child workflow of {wf} (step first_leg).")
    page.goto(f"/#/workflows/{item_children[1]}")
    expect(page.locator("#parent-link")).to_have_text(
        f"A child workflow of {wf} (step other_legs, item 1)."
    )


def test_the_definitions_say_what_each_step_runs(own: Any) -> None:
    page, _ = own("console-map-defs")
    page.goto("/#/definitions/trip")
    graph = page.locator(".definition svg.dag")
    expect(graph.locator('g.node[data-name="first_leg"] text.node-status')).to_have_text(
        "child workflow leg"
    )
    expect(graph.locator('g.node[data-name="other_legs"] text.node-status')).to_have_text(
        "map of child workflows leg"
    )
    expect(graph).not_to_contain_text("undefined")
    card = page.locator('section[data-step="other_legs"]')
    expect(card.locator('dt:text-is("Map") + dd')).to_have_text(
        "each item of $.input.others, at most 2 at once; no failure tolerated"
    )
    expect(card.locator('dt:text-is("Workflow") + dd a')).to_have_attribute(
        "href", "#/definitions/leg"
    )
    page.goto("/#/definitions/fan")
    box = page.locator('.definition svg.dag g.node[data-name="each"]')
    expect(box.locator("text.node-status")).to_have_text("map · items · item_work")
    expect(page.locator('section[data-step="each"] dt:text-is("Map") + dd')).to_have_text(
        "each item of $.input.items, at most 3 at once; tolerates 100 %"
    )
