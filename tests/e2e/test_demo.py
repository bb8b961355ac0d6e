"""`make demo` is Shepherd's main job run locally: every example workflow, with its injected
faults, must end as expected. Run here as `make demo` runs it (free ports: a stack of the
suite may be up), so a change that breaks one of its scenarios fails the suite, not a
newcomer's first command (a merge once sent the carrier's callback to a retired route).

Its two phases run as `make demo ONLY=workflows` and `make demo ONLY=outage` (the demo's
`--only`), one test each on a stack of its own: each phase's checks are the whole demo's, and
no test waits on both phases' clocks (issue 36: none over a minute). That `make demo` runs
both, in order, on one stack is tests/unit/test_demo_start.py's."""

from __future__ import annotations

import os
import subprocess
import sys


def _demo(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "shepherd_cli.demo", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "every workflow ended as expected" in done.stdout
    assert "<- unexpected" not in done.stdout
    return done.stdout


def test_the_demo_ends_every_workflow_as_expected() -> None:
    out = _demo("--only", "workflows")
    assert "fired   env-scheduled" in out  # the schedule's firing was found and followed
    assert "The outage" not in out


def test_the_demos_outage_opens_and_closes_the_circuit() -> None:
    out = _demo("--only", "outage")
    assert "circuit of notifications: closed -> open" in out
    assert "order-email-down-3" in out and "order-clean" in out  # the warm-up order too
    assert "video-clean" not in out
