"""One distribution: the runtime with only its own dependencies; the construct and the CLI
behind extras; the simulator, the benchmarks and the examples never in it."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import shepherd
from shepherd_cli.scaffold import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[=<>!~ ;]", r, maxsplit=1)[0].strip() for r in requirements}


def test_the_runtime_depends_on_what_lambda_imports_only() -> None:
    runtime = _names(PYPROJECT["project"]["dependencies"])
    # jsonata-python: shepherd.asl's JSONata states (imported on first use, see
    # tests/statemachines/test_asl_units.py::test_importing_shepherd_asl_needs_no_jsonata).
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


def test_the_runtime_asks_for_ranges_and_this_repository_pins_them() -> None:
    """A service that pins its own boto3 or pydantic can install Shepherd: the runtime asks for
    ranges (a lower bound tested by `make release-check`, below the next major), and this
    repository's exact versions live in constraints.txt, which `make dev` (so CI) installs
    with."""
    from wheel_check import lowest_pins

    runtime = PYPROJECT["project"]["dependencies"]
    lows = lowest_pins(runtime)  # refuses a pin, or a range without a lower bound
    assert set(lows) == {
        "boto3",
        "aws-lambda-powertools",
        "pydantic",
        "fastjsonschema",
        "pyyaml",
        "jsonata-python",
    }
    pins = {
        name.lower(): version
        for name, _, version in (
            line.partition("==")
            for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line and not line.startswith("#")
        )
    }
    assert set(pins) == set(lows)
    for name, pin in pins.items():
        assert _version(lows[name]) <= _version(pin), f"{name}: pinned {pin} below {lows[name]}"
        assert importlib.metadata.version(name) == pin, f"{name}: not the pinned version"
    makefile = (ROOT / "Makefile").read_text()
    # by uv, or by pip where uv cannot reach the index: the same constraints either way
    assert "$(call pip_install,$(VENV),-c constraints.txt -e '.[dev]')" in makefile
    assert "&& $(1)/bin/uv pip install --quiet --python $(1)/bin/python $(2)" in makefile
    assert "|| $(1)/bin/python -m pip install --quiet $(2)" in makefile
    assert "$(STAMP): pyproject.toml constraints.txt" in makefile


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_lowest_pins_refuse_what_is_not_a_range() -> None:
    import pytest
    from wheel_check import CheckFailed, lowest_pins

    assert lowest_pins(["aws-lambda-powertools[tracer]>=3.0.0,<4", "boto3 >=1.35.0, <2"]) == {
        "aws-lambda-powertools": "3.0.0",
        "boto3": "1.35.0",
    }
    for bad in ("boto3==1.44.5", "boto3<2", "boto3>=1.35"):
        with pytest.raises(CheckFailed, match="is not a range"):
            lowest_pins([bad])


def test_the_wheel_metadata_check_finds_a_pinned_runtime_dependency() -> None:
    from wheel_check import metadata_problems

    good = (
        "Metadata-Version: 2.4\nName: shepherd-workflows\nVersion: 0.1.0\n"
        "Requires-Dist: boto3<2,>=1.35.0\n"
        'Requires-Dist: moto[server]==5.2.5; extra == "cli"\n\n# Shepherd\n'
    )
    assert metadata_problems(good, "0.1.0") == []
    pinned = good.replace("boto3<2,>=1.35.0", "boto3==1.44.5")
    assert metadata_problems(pinned, "0.2.0") == [
        "Version is '0.1.0', not shepherd.__version__ '0.2.0'",
        "runtime Requires-Dist 'boto3==1.44.5' is not a range",
    ]


def test_make_release_check_checks_the_wheel_and_the_layer_check_keeps_its_name() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "release-check: $(STAMP)\n\t$(BIN)/python tools/wheel_check.py\n" in makefile
    assert "powertools-layer-check: $(STAMP)\n\t$(BIN)/python tools/release_check.py\n" in makefile


def test_make_test_runs_the_handlers_and_stores_at_the_lowest_versions(tmp_path: Path) -> None:
    """Issue 39.1: `make test` runs a suite at each range's lower end (`make test-lowest`),
    with the test tools at the dev extra's own pins."""
    from wheel_check import lowest_constraints

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["boto3>=1.35.0,<2", "pydantic>=2.7.0,<3"]\n'
        '[project.optional-dependencies]\ndev = ["x[cdk]", "pytest==9.2.0", "ruff==0.17.6",'
        ' "hypothesis==6.1.0"]\n'
    )
    assert lowest_constraints(pyproject) == (
        "boto3==1.35.0\npydantic==2.7.0\npytest==9.2.0\nhypothesis==6.1.0\n"
    )
    makefile = (ROOT / "Makefile").read_text()
    (suite,) = [line for line in makefile.splitlines() if "mypy-timed unit-" in line]
    assert "test-lowest" in suite.split()
    assert "--print-lowest-constraints > $(LOW_VENV)/constraints.txt" in makefile
