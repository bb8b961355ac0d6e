"""Browser fixtures: Playwright for Python driving the operating system's Chromium (installed by
`tools/ensure-chromium.sh`, which `make dev` and `make test` run), the console in-process in
front of the session's local stack, and a screenshot of every page under screenshots/."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import DESKTOP
from playwright.sync_api import expect
from shepherd_cli.client import Api
from shepherd_cli.console import Console
from shepherd_cli.local import LocalStack
from support import ROOT

CALLER = "console"  # the browser tests' workflows, apart from the e2e tests' own

# An expectation's wait when a test names none: the page's reads go through the local stack's
# moto (a list is 32 shard queries), which on two loaded cores took over Playwright's 5 s
# default (a passing page, a failed test). A check of how soon something shows names its
# own timeout; a longer default only makes a real failure slower to report.
expect.set_options(timeout=15_000)


def chromium_path() -> str:
    """The OS's Chromium, or a skip that says why it is not there."""
    explicit = os.environ.get("SHEPHERD_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    reason_file = ROOT / ".shepherd" / "chromium-unavailable"
    reason = (
        reason_file.read_text().strip()
        if reason_file.exists()
        else "Chromium is not installed (run `make browser`, i.e. tools/ensure-chromium.sh)"
    )
    pytest.skip(f"console browser tests skipped: {reason}")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def console(local_stack: LocalStack) -> Iterator[Console]:
    with Console(local_stack.api_url, caller=CALLER) as running:
        yield running


@pytest.fixture
def api(local_stack: LocalStack) -> Api:
    return Api(local_stack.api_url, caller=CALLER)


@pytest.fixture
def page(browser: Any, console: Console) -> Iterator[Any]:
    """A fresh page at 1280x800; any script error on it fails the test."""
    context = browser.new_context(viewport=DESKTOP, base_url=console.url)
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))

    def on_console(msg: Any) -> None:
        # A refused API call is logged by the browser itself; the page shows those to the
        # operator. Anything else on the error console is a bug.
        if msg.type == "error" and "Failed to load resource" not in msg.text:
            errors.append(f"console: {msg.text}")

    tab.on("console", on_console)
    yield tab
    context.close()
    assert errors == [], errors
