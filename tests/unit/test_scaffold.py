"""`shepherd init`: what it writes, checked without installing anything (the slow test in
tests/e2e/test_init_project.py installs and runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from shepherd_cli.scaffold import CDK_CONTEXT, ScaffoldError, Source, package_name, scaffold

ROOT = Path(__file__).resolve().parents[2]


def test_the_scaffold_builds_with_the_feature_flags_shepherd_is_tested_with() -> None:
    repo = json.loads((ROOT / "cdk.json").read_text())["context"]
    assert repo == CDK_CONTEXT


def test_init_writes_a_project_that_depends_on_the_named_shepherd(tmp_path: Path) -> None:
    target = tmp_path / "Travel-Desk"
    written = scaffold(target, Source(str(ROOT)))
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
    assert pyproject["project"]["dependencies"] == [f"shepherd @ {ROOT.as_uri()}"]
    assert pyproject["tool"]["shepherd"]["agent-modules"] == ["travel_desk.agents"]
    for path in written:
        if path.suffix == ".py":
            compile(path.read_text(), str(path), "exec")
    # The definition names exactly the agents the scaffold registers.
    probe = (
        "import sys; sys.path.insert(0, 'src');"
        "from shepherd import load_definitions; from shepherd.definitions import check_agents;"
        "from travel_desk.agents import registry;"
        "[check_agents(d, registry.names(), n) for n, d in load_definitions("
        "__import__('pathlib').Path('statemachines')).items()]"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=target, check=True)


def test_a_version_or_an_index_can_be_named(tmp_path: Path) -> None:
    source = Source("0.1.0", index_url="https://pypi.example.com/simple")
    assert source.requirement("cdk,cli") == "shepherd[cdk,cli]==0.1.0"
    scaffold(tmp_path / "app", source)
    assert (
        "--index-url https://pypi.example.com/simple" in (tmp_path / "app" / "Makefile").read_text()
    )
    with pytest.raises(ScaffoldError, match="neither a folder nor a version"):
        Source("not a thing").requirement()


def test_init_refuses_a_folder_with_files(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="not empty"):
        scaffold(tmp_path, Source(str(ROOT)))


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
    scaffold(target, Source(str(ROOT)))
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


def test_the_scaffold_refuses_a_node_older_than_22(tmp_path: Path) -> None:
    """`make synth` checks Node first, with the fix (the CDK CLI no longer supports Node 20)."""
    import shutil

    node, make = shutil.which("node"), shutil.which("make")
    if node is None or make is None:
        pytest.skip("no node or make on this machine")
    target = tmp_path / "travel-desk"
    scaffold(target, Source(str(ROOT)))
    done = subprocess.run(
        [make, "-s", "node-check"], cwd=target, capture_output=True, text=True, check=False
    )
    major = int(
        subprocess.run(
            [node, "-p", "process.versions.node"], capture_output=True, text=True, check=True
        ).stdout.split(".")[0]
    )
    if major < 22:
        assert done.returncode != 0
        assert "install Node 22 or later" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
