"""The tutorial (docs/tutorial.md) from a clean machine, without this repository on any path.

Shepherd is built as a team would get it before it is published: `python -m build` makes the
sdist, then the wheel from the sdist (so the sdist is complete). The CLI is installed from that
wheel into a fresh environment with the tutorial's one command (what `pipx install` does: the
runtime's dependencies only, no Chromium; the local stack runs from the project's environment);
`shepherd init` makes the project and, since this Shepherd came from a wheel, copies the wheel
into its `wheels/`; the project's `make dev` makes its own environment and installs Shepherd
from there by version, every dependency from the package index. Then, as the tutorial does:
`shepherd validate`, `make test`, the synth and one workflow on the local stack.

Two environments are installed from scratch (pip's cache makes a second run faster): a few
minutes on a shared machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "shepherd_workflows"

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# Nothing of this checkout or its environment may leak into the new ones.
CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
}
PROBE = (
    "import importlib.util as u, json, sys, shepherd, shepherd_cli;"
    "print(json.dumps({'shepherd': shepherd.__file__, 'path': sys.path, 'tools': [n for n in "
    "('shepherd_sim', 'shepherd_bench', 'shepherd_examples') if u.find_spec(n)]}))"
)


def _run(args: list[str], cwd: Path, timeout: float, **env: str) -> str:
    result = subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**CLEAN_ENV, **env},
    )
    assert result.returncode == 0, f"{args}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout + result.stderr


def _isolated(python: Path, cwd: Path, venv: Path) -> None:
    """Shepherd imports from `venv`, and nothing on the path is from this repository."""
    found = json.loads(_run([str(python), "-c", PROBE], cwd, 60).splitlines()[-1])
    assert found["shepherd"].startswith(str(venv)), found
    assert found["tools"] == []
    assert not [p for p in found["path"] if p.startswith(str(ROOT))], found["path"]


def test_the_tutorial_from_a_clean_machine(tmp_path: Path) -> None:
    # Given Shepherd built into a wheel and an sdist
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], tmp_path, 600)
    (sdist,) = dist.glob(f"{DISTRIBUTION}-*.tar.gz")
    (wheel,) = dist.glob(f"{DISTRIBUTION}-*-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.startswith(DISTRIBUTION)} == {
        "shepherd",
        "shepherd_handlers",
        "shepherd_cli",
        "shepherd_infra",
    }
    assert "shepherd_cli/console/static/index.html" in names and "shepherd/py.typed" in names
    assert sdist.stat().st_size > 0

    # When the CLI is installed from the wheel with one command, into a fresh environment
    # (`pipx install <wheel>`: a virtualenv of its own; the local stack runs from the project's)
    cli = tmp_path / "cli"
    _run([sys.executable, "-m", "venv", str(cli)], tmp_path, 120)
    _run([str(cli / "bin" / "pip"), "install", "--quiet", str(wheel)], tmp_path, 900)
    _isolated(cli / "bin" / "python", tmp_path, cli)

    # And `shepherd init` makes the project, which installs that same wheel by version
    out = _run([str(cli / "bin" / "shepherd"), "init", "travel-desk"], tmp_path, 60)
    project = tmp_path / "travel-desk"
    assert f"shepherd-workflows==0.1.0 (`wheels/{wheel.name}`" in out
    assert (project / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    shutil.rmtree(dist)  # the project needs nothing but its own folder
    _run(["make", "dev"], project, 900)
    venv = project / ".venv"
    _isolated(venv / "bin" / "python", project, venv)

    # Then its definitions validate, its tests pass, its CDK app synthesizes, its workflow runs
    assert "welcome, 5 steps" in _run([str(venv / "bin" / "shepherd"), "validate"], project, 60)
    assert "5 passed" in _run(["make", "test"], project, 120)
    outdir = tmp_path / "cdk.out"
    _run([str(venv / "bin" / "python"), "infra/app.py"], project, 300, CDK_OUTDIR=str(outdir))
    template = json.loads((outdir / "TravelDesk.template.json").read_text())
    pools = {
        r["Properties"]["Environment"]["Variables"].get("SHEPHERD_POOL")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert {"accounts", "mail"} <= pools
    out = _run(
        [
            str(venv / "bin" / "shepherd"),
            "run",
            "welcome",
            "--input",
            '{"email": "ada@example.com"}',
        ],
        project,
        180,
    )
    assert "SUCCEEDED" in out
