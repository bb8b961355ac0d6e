"""`shepherd init`: what it writes, and that a team can install what it names, checked without
installing anything (the slow test in tests/e2e/test_init_project.py builds Shepherd's wheel,
installs it into a fresh environment and runs the scaffold from there)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from shepherd_cli import sources
from shepherd_cli.main import main
from shepherd_cli.scaffold import (
    CDK_CONTEXT,
    DISTRIBUTION,
    UV_VERSION,
    ScaffoldError,
    Source,
    SourceError,
    package_name,
    scaffold,
)

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_the_scaffold_builds_with_the_feature_flags_shepherd_is_tested_with() -> None:
    repo = json.loads((ROOT / "cdk.json").read_text())["context"]
    assert repo == CDK_CONTEXT


def _texts(target: Path) -> dict[str, str]:
    return {
        p.relative_to(target).as_posix(): p.read_text()
        for p in target.rglob("*")
        if p.is_file() and p.suffix != ".whl"
    }


def test_init_writes_a_project_that_depends_on_shepherd_by_version(tmp_path: Path) -> None:
    target = tmp_path / "Travel-Desk"
    written = scaffold(target, Source.parse("0.1.0"))
    names = {p.relative_to(target).as_posix() for p in written}
    assert {
        "pyproject.toml",
        "Makefile",
        "README.md",
        "cdk.json",
        "statemachines/welcome.yaml",
        "src/travel_desk/agents.py",
        "tests/test_welcome.py",
        "infra/app.py",
    } <= names
    pyproject = tomllib.loads((target / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == [f"{DISTRIBUTION}==0.1.0"]
    assert "require-hashes" not in (target / "Makefile").read_text()  # no wheel to pin
    assert not (target / "wheels").exists()
    assert pyproject["project"]["optional-dependencies"]["dev"][0] == (
        f"{DISTRIBUTION}[cdk,cli]==0.1.0"
    )
    assert pyproject["tool"]["shepherd"]["agent-modules"] == ["travel_desk.agents"]
    # The CDK app takes its agent modules from [tool.shepherd], as the tests and the CLI do.
    assert "AgentCode.from_project(ROOT" in (target / "infra" / "app.py").read_text()
    # Nothing of this machine: no path and no file URL a teammate could not follow.
    for name, text in _texts(target).items():
        assert "file:" not in text and str(ROOT) not in text, name
    for path in written:
        if path.suffix == ".py":
            compile(path.read_text(), str(path), "exec")


@pytest.mark.slow  # a pytest of its own (make test runs it; make check does not)
def test_the_scaffolds_own_tests_pass_on_this_shepherd(tmp_path: Path) -> None:
    # Its tests read [tool.shepherd] (MemoryEngine.from_project) and override an agent per
    # engine; run them as the project does, with its package on the path.
    target = tmp_path / "travel-desk"
    scaffold(target, Source.parse("0.1.0"))
    tests = (target / "tests" / "test_welcome.py").read_text()
    assert "MemoryEngine.from_project(" in tests and "overrides=" in tests
    assert "registry.register" not in tests  # no global registry patched
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=target,
        env={**os.environ, "PYTHONPATH": str(target / "src")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed" in run.stdout


def _wheel(folder: Path, version: str = "0.1.0") -> Path:
    wheel = folder / f"shepherd_workflows-{version}-py3-none-any.whl"
    wheel.write_bytes(b"PK, a stand-in for the wheel's bytes")
    return wheel


def test_a_wheel_goes_into_the_project_and_is_installed_by_version(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "0.2.0rc1")
    target = tmp_path / "app"
    scaffold(target, Source.parse(str(wheel)))
    assert (target / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    pyproject = tomllib.loads((target / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == [f"{DISTRIBUTION}==0.2.0rc1"]
    makefile = (target / "Makefile").read_text()
    assert "PIP_ARGS ?= --find-links wheels\n" in makefile
    # Pinned by its hash: installed from the file, checked, before the project resolves the
    # version (so no index's package of that name and version can stand in for it).
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    pin = (target / "wheels" / "requirements.txt").read_text()
    assert f"./wheels/{wheel.name} --hash=sha256:{digest}\n" in pin
    hashed = makefile.index("--no-deps --require-hashes -r wheels/requirements.txt")
    assert hashed < makefile.index("$(PIP_ARGS) -e '.[dev]'")
    assert f"`wheels/{wheel.name}`, pinned by its sha256" in (target / "README.md").read_text()
    other = tmp_path / "other-0.1.0-py3-none-any.whl"
    other.write_bytes(b"PK")
    with pytest.raises(SourceError, match="not a wheel of shepherd-workflows"):
        Source.parse(str(other))
    with pytest.raises(SourceError, match="no such wheel file"):
        Source.parse(str(tmp_path / "shepherd_workflows-9.9.9-py3-none-any.whl"))


@pytest.mark.parametrize("ref", [COMMIT, "v0.1.0", "0.1.0"])
def test_a_git_url_pinned_to_a_commit_or_a_tag_is_the_requirement(ref: str) -> None:
    url = f"git+https://git.example.com/acme/shepherd.git@{ref}"
    source = Source.parse(url)
    assert source.requirement() == f"{DISTRIBUTION} @ {url}"
    assert source.requirement("cdk,cli") == f"{DISTRIBUTION}[cdk,cli] @ {url}"


@pytest.mark.parametrize(
    "spec",
    [
        "git+https://git.example.com/acme/shepherd.git",
        "git+https://git.example.com/acme/shepherd.git@main",
        "git+ssh://git@git.example.com/acme/shepherd.git",
    ],
)
def test_an_unpinned_git_url_is_refused(spec: str) -> None:
    with pytest.raises(SourceError, match="pin the git URL to a commit or a release tag"):
        Source.parse(spec)


def test_a_folder_is_refused_with_how_to_make_a_wheel() -> None:
    with pytest.raises(SourceError, match=r"build a wheel from it \(python -m build"):
        Source.parse(str(ROOT))
    with pytest.raises(SourceError, match="not a version, a wheel file or a git URL"):
        Source.parse("not a thing")


def test_a_version_and_an_index_can_be_named(tmp_path: Path) -> None:
    source = Source.parse("0.1.0", index_url="https://pypi.example.com/simple")
    assert source.requirement("cdk,cli") == f"{DISTRIBUTION}[cdk,cli]==0.1.0"
    scaffold(tmp_path / "app", source)
    makefile = (tmp_path / "app" / "Makefile").read_text()
    assert "PIP_ARGS ?= --index-url https://pypi.example.com/simple\n" in makefile


class _Dist:
    """An installed distribution as importlib.metadata shows it, with its direct_url.json."""

    version = "0.1.0"

    def __init__(self, direct_url: dict[str, Any] | None) -> None:
        self._direct = direct_url

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return None if self._direct is None else json.dumps(self._direct)


def test_by_default_the_project_installs_shepherd_as_it_was_installed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def installed_from(direct_url: dict[str, Any] | None) -> Source:
        monkeypatch.setattr(
            sources.importlib.metadata, "distribution", lambda name: _Dist(direct_url)
        )
        return Source.installed()

    wheel = _wheel(tmp_path)
    from_wheel = installed_from({"url": wheel.as_uri(), "archive_info": {}})
    assert (from_wheel.kind, from_wheel.wheel) == ("wheel", wheel)
    from_git = installed_from(
        {
            "url": "https://git.example.com/acme/shepherd.git",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT},
        }
    )
    assert from_git.requirement() == (
        f"{DISTRIBUTION} @ git+https://git.example.com/acme/shepherd.git@{COMMIT}"
    )
    from_index = installed_from(None)
    assert (from_index.requirement(), from_index.note) == (f"{DISTRIBUTION}==0.1.0", "")
    # A checkout (make dev) cannot be shared: pinned by version, and the user told how to share.
    from_folder = installed_from({"url": ROOT.as_uri(), "dir_info": {"editable": True}})
    assert from_folder.requirement() == f"{DISTRIBUTION}==0.1.0"
    assert "a wheel of it (python -m build)" in from_folder.note
    # A wheel gone from disk since: its version.
    wheel.unlink()
    assert installed_from({"url": wheel.as_uri(), "archive_info": {}}).kind == "index"


def test_shepherd_init_says_what_the_project_installs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path)
    assert main(["init", str(tmp_path / "app"), "--shepherd", str(wheel)]) == 0
    assert f"Shepherd: {DISTRIBUTION}==0.1.0 (`wheels/{wheel.name}`" in capsys.readouterr().out
    assert main(["init", str(tmp_path / "app2"), "--shepherd", str(ROOT)]) == 1
    assert "build a wheel from it" in capsys.readouterr().err
    assert not (tmp_path / "app2").exists()


def test_init_refuses_a_folder_with_files(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="not empty"):
        scaffold(tmp_path, Source.parse("0.1.0"))


@pytest.mark.parametrize(
    ("folder", "package"),
    [
        ("my-app", "my_app"),
        ("2fast", "app_2fast"),
        ("class", "class_app"),
        ("shepherd", "shepherd_app"),
    ],
)
def test_package_names(folder: str, package: str) -> None:
    assert package_name(Path(folder)) == package


def test_the_scaffold_pins_the_cdk_cli_this_repository_pins(tmp_path: Path) -> None:
    """`make synth` in a new project runs the CDK CLI of its package-lock.json (npm ci), the
    same release as this repository's, never whatever `npx aws-cdk@2` resolves that day."""
    repo_package = json.loads((ROOT / "package.json").read_text())
    repo_lock = json.loads((ROOT / "package-lock.json").read_text())
    target = tmp_path / "travel-desk"
    scaffold(target, Source.parse("0.1.0"))
    package = json.loads((target / "package.json").read_text())
    lock = json.loads((target / "package-lock.json").read_text())
    assert package["devDependencies"] == repo_package["devDependencies"]
    assert lock["packages"]["node_modules/aws-cdk"] == repo_lock["packages"]["node_modules/aws-cdk"]
    assert lock["packages"][""]["devDependencies"] == package["devDependencies"]
    assert package["engines"]["node"] == ">=22"
    makefile = (target / "Makefile").read_text()
    assert "npm ci" in makefile and "npx cdk synth" in makefile
    assert "aws-cdk@" not in makefile  # nothing floats
    assert "node_modules/" in (target / ".gitignore").read_text()


def _fake_venv(target: Path, uv_installs: bool) -> Path:
    """A `.venv` whose python and uv log their arguments instead of installing: pip's install
    of uv succeeds or fails as asked, every other call succeeds."""
    log = target / "calls.log"
    fail = 'case "$*" in *uv==*) exit 1;; esac\n' if not uv_installs else ""
    for name, script in (
        ("python", f'echo "python $*" >> {log}\n{fail}'),
        ("uv", f'echo "uv $*" >> {log}\n'),
    ):
        path = target / ".venv" / "bin" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!/bin/bash\n{script}")
        path.chmod(0o755)
    return log


@pytest.mark.parametrize("uv_installs", [True, False])
def test_make_dev_installs_by_the_uv_this_repository_pins_else_by_pip(
    tmp_path: Path, uv_installs: bool
) -> None:
    """A project's `make dev` installs as this repository's `make setup` does: by uv, at the
    version its Makefile pins, and by pip (the same arguments) when uv cannot be had; the
    hash-pinned wheel first either way."""
    import shutil

    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on this machine")
    assert f"UV_VERSION := {UV_VERSION}\n" in (ROOT / "Makefile").read_text()
    wheel = _wheel(tmp_path, "0.1.0")
    target = tmp_path / "app"
    scaffold(target, Source.parse(str(wheel)))
    log = _fake_venv(target, uv_installs)
    done = subprocess.run(
        [make, "-s", "dev"], cwd=target, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    if uv_installs:
        by = "uv pip install --quiet --python .venv/bin/python"
        assert (
            f"python -m pip install --quiet --disable-pip-version-check uv=={UV_VERSION}" in calls
        )
        assert not [c for c in calls if "uv==" not in c and c.startswith("python")], calls
    else:
        by = "python -m pip install --quiet"
        assert not [c for c in calls if c.startswith("uv")], calls
    assert [c for c in calls if c.startswith(by) and "uv==" not in c] == [
        f"{by} --no-deps --require-hashes -r wheels/requirements.txt",
        f"{by} --find-links wheels -e .[dev]",
    ]


@pytest.mark.slow
def test_the_scaffold_runs_its_cdk_cli_on_node_22_or_later(tmp_path: Path) -> None:
    """The CDK CLI no longer supports Node 20: `make node` uses the machine's Node when it is
    22 or later, else installs Node 22 from the npm registry into `.shepherd/node`, which the
    Makefile puts first on every recipe's PATH."""
    import shutil

    node, make = shutil.which("node"), shutil.which("make")
    if node is None or make is None:
        pytest.skip("no node or make on this machine")
    target = tmp_path / "travel-desk"
    scaffold(target, Source.parse("0.1.0"))
    done = subprocess.run(
        [make, "-s", "node"], cwd=target, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    used = subprocess.run(
        [make, "-s", "--eval", "v:\n\t@node -p process.versions.node", "v"],
        cwd=target,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert int(used.split(".")[0]) >= 22, used
