"""The tutorial (docs/tutorial.md) from a clean machine, without this repository on any path.

Shepherd is built as a team would get it before it is published: `python -m build` makes the
sdist, then the wheel from the sdist (so the sdist is complete). The CLI is installed from that
wheel into a fresh environment with the tutorial's one command (what `pipx install` does: the
runtime's dependencies only, no Chromium; the local stack runs from the project's environment);
`shepherd init` makes the project and, since this Shepherd came from a wheel, copies the wheel
into its `wheels/`; the project's `make dev` makes its own environment and installs Shepherd
from there by version, every dependency from the package index. Then, as the tutorial does:
`shepherd validate`, `make test`, the synth and one workflow on the local stack.

Two environments are installed from scratch, without byte-compiling: the CLI's by pip, as
`pipx install` does (the one place `make test` installs the wheel by pip), the project's by
its own `make dev`, by uv (pip when uv cannot reach the index: tests/unit/test_scaffold.py).
Each step of the tutorial is a module-scoped fixture that needs the one before it, and each
test checks one step's outcome: the steps run once, in order, and each test's time is its own
step's (issue 36: no test over a minute), while a test run alone (`-k`) still runs every step
it needs. A step that fails errors every test after it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "shepherd_workflows"

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# Nothing of this checkout or its environment may leak into the new ones (its Makefile's
# bytecode settings neither: see PIP_COMPILE).
LEAKS = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONPYCACHEPREFIX",
)
CLEAN_ENV = {
    k: v for k, v in os.environ.items() if k not in (*LEAKS, "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
}
# Every pip here installs without byte-compiling what it installs (issue 36; uv never does):
# it compiled aws-cdk-lib's 176 MB of Python, about 35 s of CPU, where the tutorial's steps
# import a small part of it. Python compiles what each step imports instead, once, and writes
# it beside the source as pip would have. What is installed, from where and at which version
# is unchanged.
CLEAN_ENV["PIP_COMPILE"] = "0"
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


@dataclass(frozen=True)
class Built:
    """Shepherd built as a team would get it before it is published."""

    wheel: Path
    sdist: Path
    wheel_bytes: bytes  # read at once: the project's step deletes the build folder


@dataclass(frozen=True)
class Cli:
    """The CLI installed from the wheel into an environment of its own."""

    built: Built
    venv: Path


@dataclass(frozen=True)
class Made:
    """The project `shepherd init` made, after its own `make dev`."""

    cli: Cli
    root: Path
    init_output: str

    @property
    def venv(self) -> Path:
        return self.root / ".venv"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tutorial")


@pytest.fixture(scope="module")
def built(work: Path) -> Built:
    """Step 1: `python -m build` makes the sdist, then the wheel from the sdist."""
    dist = work / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], work, 600)
    (sdist,) = dist.glob(f"{DISTRIBUTION}-*.tar.gz")
    (wheel,) = dist.glob(f"{DISTRIBUTION}-*-py3-none-any.whl")
    return Built(wheel, sdist, wheel.read_bytes())


@pytest.fixture(scope="module")
def cli(built: Built, work: Path) -> Cli:
    """Step 2: the CLI installed from the wheel with one command, into a fresh environment
    (`pipx install <wheel>`: a virtualenv of its own; the local stack runs from the
    project's)."""
    venv = work / "cli"
    _run([sys.executable, "-m", "venv", str(venv)], work, 120)
    _run([str(venv / "bin" / "pip"), "install", "--quiet", str(built.wheel)], work, 900)
    return Cli(built, venv)


@pytest.fixture(scope="module")
def made(cli: Cli, work: Path) -> Made:
    """Step 3: `shepherd init` makes the project, which installs that same wheel by version
    (`make dev`), with nothing but its own folder (the build folder is gone first)."""
    out = _run([str(cli.venv / "bin" / "shepherd"), "init", "travel-desk"], work, 60)
    project = work / "travel-desk"
    shutil.rmtree(cli.built.wheel.parent)  # the project needs nothing but its own folder
    _run(["make", "dev"], project, 900)
    return Made(cli, project, out)


def test_shepherd_builds_into_a_complete_wheel_and_sdist(built: Built) -> None:
    names = zipfile.ZipFile(built.wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.startswith(DISTRIBUTION)} == {
        "shepherd",
        "shepherd_handlers",
        "shepherd_cli",
        "shepherd_infra",
    }
    assert "shepherd_cli/console/static/index.html" in names and "shepherd/py.typed" in names
    assert built.sdist.stat().st_size > 0


def test_the_cli_installs_from_the_wheel_alone(cli: Cli, work: Path) -> None:
    _isolated(cli.venv / "bin" / "python", work, cli.venv)


def test_init_makes_a_project_that_installs_the_same_wheel_by_version(made: Made) -> None:
    wheel = made.cli.built.wheel
    assert f"shepherd-workflows==0.1.0 (`wheels/{wheel.name}`" in made.init_output
    assert (made.root / "wheels" / wheel.name).read_bytes() == made.cli.built.wheel_bytes
    _isolated(made.venv / "bin" / "python", made.root, made.venv)


def test_the_projects_definitions_validate_and_its_tests_pass(made: Made) -> None:
    venv = made.venv
    assert "welcome, 5 steps" in _run([str(venv / "bin" / "shepherd"), "validate"], made.root, 60)
    assert "5 passed" in _run(["make", "test"], made.root, 120)


def test_the_projects_cdk_app_synthesizes(made: Made, work: Path) -> None:
    outdir = work / "cdk.out"
    _run(
        [str(made.venv / "bin" / "python"), "infra/app.py"],
        made.root,
        300,
        CDK_OUTDIR=str(outdir),
    )
    template = json.loads((outdir / "TravelDesk.template.json").read_text())
    pools = {
        r["Properties"]["Environment"]["Variables"].get("SHEPHERD_POOL")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert {"accounts", "mail"} <= pools


def test_the_projects_workflow_runs_on_the_local_stack(made: Made) -> None:
    out = _run(
        [
            str(made.venv / "bin" / "shepherd"),
            "run",
            "welcome",
            "--input",
            '{"email": "ada@example.com"}',
        ],
        made.root,
        180,
    )
    assert "SUCCEEDED" in out
