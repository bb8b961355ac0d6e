"""The run's time report (issue 36): every run ends with its total time, the time per top-level
test folder and its 30 slowest tests, so the next slow test is seen the day it lands.

A report only, never a check: timings on a shared machine must not fail a run. Times are each
test's setup + call + teardown (what --durations counts), so a session fixture's start-up is
charged to the first test that asks for it, and to that test's folder."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

SLOWEST = 30
NAME = "shepherd-timing-report"


class TimingReport:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.by_test: dict[str, float] = defaultdict(float)
        self.by_folder: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)

    def folder(self, nodeid: str) -> str:
        """`tests/infra/test_x.py::t` -> `tests/infra`; a test file at the top -> `tests`."""
        parts = nodeid.split("::", 1)[0].split("/")
        return "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:-1]) or "."

    @staticmethod
    def test_id(report: pytest.TestReport) -> str:
        """The report's test: its node id, with the parameters its name carries when the id
        lacks them (schemathesis names its tests per API operation, `test_x[GET /workflows]`,
        but gives every one the function's id: the contract fuzz's 35 operations summed into
        one "test")."""
        domain = report.location[2]
        params = domain[domain.index("[") :] if "[" in domain else ""
        return report.nodeid if report.nodeid.endswith(params) else report.nodeid + params

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.by_test[self.test_id(report)] += report.duration
        folder = self.folder(report.nodeid)
        self.by_folder[folder] += report.duration
        if report.when == "call":
            self.count[folder] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.by_test:
            return
        write = terminalreporter.write_line
        terminalreporter.section("time by folder (setup + call + teardown)")
        for folder, seconds in sorted(self.by_folder.items(), key=lambda kv: -kv[1]):
            write(f"{seconds:9.1f}s  {self.count[folder]:5d} tests  {folder}")
        terminalreporter.section(f"{SLOWEST} slowest tests (setup + call + teardown)")
        ranked = sorted(self.by_test.items(), key=lambda kv: -kv[1])[:SLOWEST]
        for nodeid, seconds in ranked:
            write(f"{seconds:9.1f}s  {nodeid}")
        total = time.monotonic() - self.started
        write(
            f"total: {total:.1f}s wall ({total / 60:.1f} min), "
            f"{sum(self.by_test.values()):.1f}s in tests, {sum(self.count.values())} tests run"
        )


def register(config: pytest.Config) -> None:
    """Called from the suite's conftest (`pytest_configure`): one report per run."""
    if not config.pluginmanager.has_plugin(NAME):
        config.pluginmanager.register(TimingReport(), NAME)
