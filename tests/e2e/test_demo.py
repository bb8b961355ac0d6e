"""`make demo` is Shepherd's main job run locally: every example workflow, with its injected
faults, must end as expected. Run here as `make demo` runs it (free ports: a stack of the
suite may be up), so a change that breaks one of its scenarios fails the suite, not a
newcomer's first command (a merge once sent the carrier's callback to a retired route)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_demo_ends_every_workflow_as_expected() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shepherd_cli.demo"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "every workflow ended as expected" in done.stdout
    assert "<- unexpected" not in done.stdout
