"""One distribution: the runtime with only its own dependencies; the construct and the CLI
behind extras; the simulator, the benchmarks and the examples never in it."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import shepherd
from shepherd_cli.scaffold import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _names(requirements: list[str]) -> set[str]:
    return {r.split("[")[0].split("=")[0].split(" ")[0].strip() for r in requirements}


def test_the_runtime_depends_on_what_lambda_imports_only() -> None:
    runtime = _names(PYPROJECT["project"]["dependencies"])
    # jsonata-python: shepherd.asl's JSONata states (imported on first use, see
    # tests/asl/test_asl_units.py::test_importing_shepherd_asl_needs_no_jsonata).
    assert runtime == {
        "boto3",
        "aws-lambda-powertools",
        "pydantic",
        "fastjsonschema",
        "pyyaml",
        "jsonata-python",
    }


def test_the_construct_and_the_cli_are_extras() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert _names(extras["cdk"]) == {"aws-cdk-lib", "constructs", "cdk-nag"}
    assert _names(extras["cli"]) == {"moto"}
    assert f"{DISTRIBUTION}[cdk,cli]" in extras["dev"]


def test_the_distribution_has_a_name_of_its_own_and_the_packages_version() -> None:
    # `shepherd` on the public index is an unrelated project: a dependency on it would resolve
    # to the wrong package. `shepherd init` pins this name at this version.
    project = PYPROJECT["project"]
    assert project["name"] == DISTRIBUTION != "shepherd"
    assert "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "shepherd.__version__"}
    assert importlib.metadata.version(DISTRIBUTION) == shepherd.__version__


def test_the_distribution_holds_no_tool_and_no_example() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    tops = {p.split(".")[0] for p in setuptools["packages"]}
    assert tops == {"shepherd", "shepherd_handlers", "shepherd_cli", "shepherd_infra"}
    assert set(setuptools["package-dir"]) == tops
    # Every subpackage of the core is listed (a missing one would be left out of the wheel).
    core = ROOT / "layers" / "shepherd" / "python" / "shepherd"
    subpackages = {
        "shepherd." + p.parent.relative_to(core).as_posix().replace("/", ".")
        for p in core.rglob("__init__.py")
        if p.parent != core
    }
    assert subpackages <= set(setuptools["packages"])
