"""`shepherd validate` on a user's project: every mistake is a line naming the file, the step and
the field in Shepherd's words, with the nearest name; exit 1; never a traceback."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from shepherd_cli.main import main

PACKAGE = "validate_demo_app"

DEFINITION = """\
Name: trip
Steps:
  - Name: book_hotel
    Agent: book_hotel
    Pool: travel
    TimeoutSeconds: 30
    Compensation: {Agent: cancel_hotel, Pool: travel, TimeoutSeconds: 30}
  - Name: charge_card
    DependsOn: [book_hotel]
    Agent: charge_card
    Pool: billing
    TimeoutSeconds: 30
"""

# Two modules of one package, both registering on the registry the package makes.
REGISTRY = "from shepherd import AgentRegistry\n\nregistry = AgentRegistry()\n"
BOOKING = f"""\
from {PACKAGE}.shared import registry


@registry.agent("book_hotel")
def book_hotel(ctx):
    return {{}}


@registry.agent("cancel_hotel")
def cancel_hotel(ctx):
    return {{}}
"""
BILLING = f"""\
from {PACKAGE}.shared import registry


@registry.agent("charge_card")
def charge_card(ctx):
    return {{}}
"""

TRACEBACK = re.compile(r"Traceback|\bFile \"|Input should|Field required|Extra inputs|pydantic")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.shepherd]\n"
        'definitions = "statemachines"\n'
        f'agent-modules = ["{PACKAGE}.booking", "{PACKAGE}.billing"]\n'
    )
    (tmp_path / "statemachines").mkdir()
    (tmp_path / "statemachines" / "trip.yaml").write_text(DEFINITION)
    package = tmp_path / "src" / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "shared.py").write_text(REGISTRY)
    (package / "booking.py").write_text(BOOKING)
    (package / "billing.py").write_text(BILLING)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def _validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    assert not TRACEBACK.search(err), err
    return code, out, err


def test_two_modules_sharing_one_registry_validate(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _validate(capsys)
    assert (code, err) == (0, "")
    assert "trip.yaml: ok (trip, 2 steps" in out


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("TimeoutSeconds: 30\n    Compensation", "TimeoutSecond: 30\n    Compensation"),
            [
                "trip.yaml: Steps[0] (book_hotel).TimeoutSeconds: is required",
                "trip.yaml: Steps[0] (book_hotel).TimeoutSecond: unknown field; "
                "did you mean 'TimeoutSeconds'?",
            ],
        ),
        (
            ("Agent: charge_card", "Agent: charge_crad"),
            [
                "trip.yaml: Steps[1] (charge_card).Agent: unknown agent 'charge_crad'; "
                "did you mean 'charge_card'?"
            ],
        ),
        (
            ("DependsOn: [book_hotel]", "DependsOn: [book_hotle]"),
            [
                "trip.yaml: Steps[1] (charge_card).DependsOn: unknown step 'book_hotle'; "
                "did you mean 'book_hotel'?"
            ],
        ),
        (
            ("Pool: billing", "Pool: Billing Team"),
            [
                "trip.yaml: Steps[1] (charge_card).Pool: 'Billing Team' is not a valid name: "
                "lowercase letters, digits and -, starting with a letter, at most 32"
            ],
        ),
        (
            ("Steps:\n  - Name: book_hotel", "Steps:\n  - Name: book_hotel\n  Name: x"),
            ["trip.yaml: line 4, column 3: not valid YAML: expected <block end>"],
        ),
        (
            ("Name: trip", "Name: [trip"),
            ["trip.yaml: line 2, column 6: not valid YAML: expected ',' or ']', but got ':'"],
        ),
    ],
)
def test_a_mistake_in_a_definition_is_one_line_per_problem(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    change: tuple[str, str],
    expected: list[str],
) -> None:
    path = project / "statemachines" / "trip.yaml"
    path.write_text(path.read_text().replace(*change, 1))
    code, out, err = _validate(capsys)
    assert code == 1 and out == ""
    for line in expected:
        assert line in err, err
    assert all(str(path) in line for line in err.splitlines()), err


@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        (
            f"src/{PACKAGE}/billing.py",
            BILLING + "\nundefined_helper()\n",
            f"agent module '{PACKAGE}.billing' failed while it was imported: NameError: "
            "name 'undefined_helper' is not defined (",
        ),
        (
            f"src/{PACKAGE}/billing.py",
            "def broken(:\n",
            f"agent module '{PACKAGE}.billing' failed while it was imported: SyntaxError: ",
        ),
        (
            "pyproject.toml",
            '[tool.shepherd]\nagent-modules = ["no_such_app.agents"]\n',
            "agent module 'no_such_app.agents' cannot be imported: No module named 'no_such_app'",
        ),
        (
            "pyproject.toml",
            '[tool.shepherd]\nagent_modules = ["x.agents"]\n',
            "no key 'agent_modules'; did you mean 'agent-modules'?",
        ),
        ("pyproject.toml", "[tool.shepherd\n", "pyproject.toml: not valid TOML"),
        (
            "pyproject.toml",
            '[tool.shepherd]\ndefinitions = "flows"\n',
            "no definitions folder",
        ),
    ],
)
def test_a_mistake_in_the_project_or_an_agent_module_is_a_message(
    project: Path, capsys: pytest.CaptureFixture[str], file: str, text: str, expected: str
) -> None:
    (project / file).write_text(text)
    code, _, err = _validate(capsys)
    assert code == 1
    assert expected in err, err


def test_an_empty_definitions_folder_is_an_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "statemachines" / "trip.yaml").unlink()
    code, _, err = _validate(capsys)
    assert code == 1 and "no definitions in" in err


def test_two_registries_with_one_name_are_refused_with_the_rule(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    billing = project / "src" / PACKAGE / "billing.py"
    billing.write_text(
        REGISTRY + BILLING.replace(f"from {PACKAGE}.shared import registry\n", "") + "\n"
        '@registry.agent("book_hotel")\ndef again(ctx):\n    return {}\n'
    )
    code, _, err = _validate(capsys)
    assert code == 1
    assert (
        f"agent 'book_hotel' is registered by both '{PACKAGE}.booking' and '{PACKAGE}.billing', "
        "two different registries" in err
    )


PARENT = """\
Name: holiday
Steps:
  - Name: first_trip
    Workflow: trp
    TimeoutSeconds: 600
"""


def test_a_child_workflow_that_is_not_defined_is_refused_with_the_nearest(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The in-memory engine and `shepherd local` refuse a `Workflow:` no definition has: so does
    validate, naming the file and the step, whether it checks the folder or one file."""
    parent = project / "statemachines" / "holiday.yaml"
    parent.write_text(PARENT)
    expected = (
        f"{parent}: Steps[0] (first_trip).Workflow: unknown workflow 'trp'; did you mean 'trip'?"
    )
    code, out, err = _validate(capsys)
    assert code == 1 and expected in err, err
    assert "trip.yaml: ok" in out and "holiday.yaml: ok" not in out
    code, out, err = _validate(capsys, str(parent))
    assert code == 1 and expected in err, err
    parent.write_text(PARENT.replace("trp", "trip"))
    code, out, err = _validate(capsys, str(parent))
    assert (code, err) == (0, ""), err
    assert "holiday.yaml: ok (holiday, 1 steps" in out


def test_a_pool_policy_for_a_pool_no_definition_names_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policies = project / "pools.json"
    policies.write_text('{"biling": {"RateLimit": {"PerSecond": 5, "Burst": 5}}}')
    code, _, err = _validate(capsys, "--pool-policies", str(policies))
    assert code == 1
    assert (
        f"{policies}: pool 'biling': no definition names this pool; did you mean 'billing'?" in err
    )
    policies.write_text('{"billing": {"RateLimit": {"PerSecond": 5, "Burst": 5}}}')
    assert _validate(capsys, "--pool-policies", str(policies))[:3:2] == (0, "")


def test_a_repeated_child_whose_workflow_declares_a_compensation_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42.5: only a repeated child step's last child undoes itself, so its workflow may
    declare no Compensation (`trip` undoes its hotel): validate says so, naming the field."""
    parent = project / "statemachines" / "holiday.yaml"
    parent.write_text(
        PARENT.replace("trp", "trip")
        + "    Repeat:\n"
        + "      Until: {Variable: $.steps.first_trip.output.book_hotel.ok, IsPresent: true}\n"
        + "      MaxIterations: 3\n"
    )
    code, out, err = _validate(capsys)
    assert code == 1, err
    assert (
        f"{parent}: Steps[0] (first_trip).Repeat: its child workflow declares a compensation "
        "('trip' Steps[0] (book_hotel).Compensation)"
    ) in err
    assert "holiday.yaml: ok" not in out
