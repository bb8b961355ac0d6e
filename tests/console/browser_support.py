"""Helpers of the console's browser tests (a module, so tests can import them)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

SCREENSHOTS = Path(__file__).parent / "screenshots"  # git-ignored
DESKTOP = {"width": 1280, "height": 800}
NARROW = {"width": 400, "height": 800}


def shot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """Save what the page shows, for a human to look at."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def until(page: Any, script: str, *, seconds: float = 30) -> None:
    """Wait until `script` (an expression) is true in the page. Playwright's wait_for_function
    evaluates its text with eval(), which the console's CSP refuses; page.evaluate is not."""
    deadline = time.monotonic() + seconds
    while not page.evaluate(script):
        assert time.monotonic() < deadline, f"not within {seconds} s: {script}"
        page.wait_for_timeout(50)


# The console's periodic timers (live refresh, the "ago" ticker) at a quarter of their period,
# as an init script: a test that waits for the next refresh waits 0.5 s, not 2 s. Caches kept
# by the clock (the counts' and the chart's 30 s) keep their real age: Date is untouched.
FAST_REFRESH = """
const realSetInterval = window.setInterval.bind(window);
window.setInterval = (fn, ms, ...rest) => realSetInterval(fn, Math.max(100, (ms || 0) / 4), ...rest);
"""


def hold_reads(matches: str) -> str:
    """An init script that holds the page's replies to the reads `matches` (a JavaScript test
    of the request's URL text `text`) until the test lets them go: `window.__hold.first` (or
    `.next`, for a read with a `next_token`) set true holds the next such replies in flight;
    `window.__release(kind)` hands them back and answers how many it held;
    `window.__delivered` counts the held replies handed back. A race between two reads is
    then set up, not waited for."""
    return (
        """
window.__hold = { first: false, next: false };
window.__held = { first: [], next: [] };
window.__delivered = 0;
window.__release = (kind) => {
  const held = window.__held[kind];
  window.__hold[kind] = false;
  window.__held[kind] = [];
  held.forEach((resolve) => resolve());
  return held.length;
};
const realFetch = window.fetch.bind(window);
window.fetch = async (url, options) => {
  const text = String(url);
  const reply = await realFetch(url, options);
  if ("""
        + matches
        + """) {
    const kind = text.includes('next_token') ? 'next' : 'first';
    if (window.__hold[kind]) {
      await new Promise((resolve) => window.__held[kind].push(resolve));
      window.__delivered += 1;
    }
  }
  return reply;
};
"""
    )
