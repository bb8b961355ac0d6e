"""`shepherd init` end to end: the scaffold in a temporary folder, Shepherd installed into its
own environment from this working tree, then the scaffold's definitions validated, its unit
tests, its CDK app's synth and one of its workflows on a local stack started for it
(`shepherd run`: what its `make demo` runs).

Installing Shepherd's dependencies from scratch (aws-cdk-lib, moto, boto3...) takes minutes on
a shared machine, so the scaffold's environment borrows them, as already installed at the
same pins, from this checkout's venv (a path entry, whose .pth files, this checkout's editable
install among them, are not processed); Shepherd itself and the scaffold are installed with
pip from their folders (a built wheel, not editable), and `pip check` proves every requirement
of both is met."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIP_CACHE = ROOT / ".shepherd" / "cache" / "pip"

SITE = "import sysconfig; print(sysconfig.get_paths()['purelib'])"

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _run(args: list[str], cwd: Path, timeout: float, **env: str) -> str:
    result = subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, f"{args}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def test_init_install_test_synth_and_run(tmp_path: Path) -> None:
    project = tmp_path / "travel-desk"
    shepherd = Path(sys.executable).with_name("shepherd")
    # Given a new project that installs Shepherd from this working tree
    _run([str(shepherd), "init", str(project), "--shepherd", str(ROOT)], tmp_path, 60)
    _run([sys.executable, "-m", "venv", ".venv"], project, 120)
    venv = project / ".venv" / "bin"
    env = {"PIP_CACHE_DIR": str(PIP_CACHE), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for key in ("VIRTUAL_ENV", "PYTHONPATH"):
        os.environ.pop(key, None)
    _run(
        [str(venv / "python"), "-m", "pip", "install", "--quiet", "-e", ".[dev]"],
        project,
        600,
        **env,
    )

    # Its environment has Shepherd from a built distribution: none of the repository's tools
    probe = (
        "import importlib.util as u, json, shepherd;"
        "print(json.dumps([shepherd.__file__] + [n for n in "
        "('shepherd_sim', 'shepherd_bench', 'shepherd_examples') if u.find_spec(n)]))"
    )
    found = json.loads(_run([str(venv / "python"), "-c", probe], project, 60))
    assert str(project / ".venv") in found[0] and found[1:] == []

    # When its definitions are validated against its agents, its unit tests run, its CDK app synthesizes, and its workflow runs locally
    assert "welcome, 2 steps" in _run([str(venv / "shepherd"), "validate"], project, 60)
    assert "3 passed" in _run([str(venv / "pytest"), "-q"], project, 120)
    outdir = tmp_path / "cdk.out"
    _run([str(venv / "python"), "infra/app.py"], project, 300, CDK_OUTDIR=str(outdir))
    template = json.loads((outdir / "TravelDesk.template.json").read_text())
    pools = {
        r["Properties"]["Environment"]["Variables"].get("SHEPHERD_POOL")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert {"accounts", "mail"} <= pools
    out = _run(
        [str(venv / "shepherd"), "run", "welcome", "--input", '{"email": "ada@example.com"}'],
        project,
        180,
    )
    # Then the workflow succeeded
    assert "SUCCEEDED" in out
