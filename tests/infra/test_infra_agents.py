"""At synth, every agent a definition names is registered by the code its pool ships, and the
CDK app takes its agent modules from `[tool.shepherd]`, as the other tools do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from shepherd.project import Project
from shepherd_infra import AgentCode, Shepherd
from shepherd_infra.agent_check import AgentCheckError
from shepherd_infra.application import example_agents
from shepherd_infra.config import EXAMPLES_DIR, REPO_ROOT

DEFINITION = """\
Name: trip
Steps:
  - Name: book
    Agent: book
    Pool: travel
    TimeoutSeconds: 30
    Compensation: {Agent: cancel_booking, Pool: travel, TimeoutSeconds: 30}
  - Name: render
    DependsOn: [book]
    Agent: render_ticket
    Pool: heavy
    TimeoutSeconds: 60
"""


def _project(root: Path, modules: dict[str, list[str]]) -> Path:
    """A project: flows/trip.yaml, and under src/ one module per entry registering its agents."""
    (root / "flows").mkdir(parents=True)
    (root / "flows" / "trip.yaml").write_text(DEFINITION)
    for module, agents in modules.items():
        package, _, name = module.rpartition(".")
        folder = root / "src" / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").touch()
        (folder / f"{name}.py").write_text(
            "from shepherd import AgentRegistry\n\nregistry = AgentRegistry()\n"
            + "".join(f"registry.register({a!r}, lambda ctx: {{}})\n" for a in agents)
        )
    return root


def _synth(root: Path, **kwargs: Any) -> Shepherd:
    stack = Stack(App(outdir=str(root / "cdk.out")), "Trip")
    return Shepherd(stack, "Workflows", definitions_dir=root / "flows", **kwargs)


def test_a_pool_whose_code_misses_an_agent_fails_the_synth_naming_it(tmp_path: Path) -> None:
    # Given modules that register every agent but the compensation of `book`
    root = _project(tmp_path, {"trip_app.agents": ["book", "render_ticket"]})
    code = AgentCode(path=root / "src", modules=["trip_app.agents"])

    # When the app is synthesized, Then the synth fails naming the agent, the pool and the modules
    with pytest.raises(AgentCheckError) as err:
        _synth(root, agents=code)
    assert str(err.value) == (
        f"pool 'travel' ships agent modules ['trip_app.agents'] (from {root / 'src'}), which do "
        "not register agent 'cancel_booking' (trip: Steps[0] (book).Compensation.Agent); "
        "they register: book, render_ticket"
    )


def test_a_pool_with_code_of_its_own_is_checked_against_its_own_modules(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "trip_app.agents": ["book", "cancel_booking", "render_ticket"],
            "trip_app.render": ["render_pdf"],
        },
    )
    with pytest.raises(
        AgentCheckError,
        match=r"pool 'heavy' ships agent modules \['trip_app.render'\].* do not register agent 'render_ticket' \(trip: Steps\[1\] \(render\).Agent\)",
    ):
        _synth(
            root,
            agents=AgentCode(path=root / "src", modules=["trip_app.agents"]),
            pool_agents={"heavy": AgentCode(path=root / "src", modules=["trip_app.render"])},
        )


def test_modules_come_from_the_shipped_folder_not_the_environment(tmp_path: Path) -> None:
    # Given agent code that is importable here (the examples, on this venv's path) but is not
    # in the folder the pools ship
    root = _project(tmp_path, {"trip_app.agents": ["book", "cancel_booking", "render_ticket"]})
    assert (EXAMPLES_DIR / "shepherd_examples").is_dir()
    code = AgentCode(path=root / "src", modules=["shepherd_examples.agents"])
    with pytest.raises(AgentCheckError) as err:
        _synth(root, agents=code)
    assert "pool 'heavy' ships agent modules ['shepherd_examples.agents']" in str(err.value)
    assert "cannot be imported: No module named 'shepherd_examples'" in str(err.value)
    # and no bytecode landed in the staged code asset
    assert not list((root / "cdk.out").rglob("__pycache__"))


def test_a_module_that_fails_on_import_fails_the_synth(tmp_path: Path) -> None:
    root = _project(tmp_path, {"trip_app.agents": ["book", "cancel_booking", "render_ticket"]})
    (root / "src" / "trip_app" / "agents.py").write_text("import missing_dependency\n")
    with pytest.raises(AgentCheckError, match="No module named 'missing_dependency'"):
        _synth(root, agents=AgentCode(path=root / "src", modules=["trip_app.agents"]))


def test_agent_code_from_the_project_table_synthesizes(tmp_path: Path) -> None:
    # Given a project whose [tool.shepherd] names both of its agent modules
    root = _project(
        tmp_path,
        {"trip_app.booking": ["book", "cancel_booking"], "trip_app.tickets": ["render_ticket"]},
    )
    (root / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\n'
        'agent-modules = ["trip_app.booking", "trip_app.tickets"]\n'
    )
    # When the app takes its agent code from the project
    code = AgentCode.from_project(root)
    shepherd = _synth(root, agents=code)
    # Then the pools ship the project's modules, and the check found every agent there
    assert code.modules == ("trip_app.booking", "trip_app.tickets")
    assert code.path == root / "src"
    assert set(shepherd.pools) == {"travel", "heavy"}


def test_a_project_without_agent_modules_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.shepherd]\ndefinitions = "flows"\n')
    with pytest.raises(
        ValueError,
        match=r"no agent modules: .*pyproject.toml \[tool.shepherd\] agent-modules names none",
    ):
        AgentCode.from_project(tmp_path)


def test_this_repositorys_app_ships_the_modules_its_project_table_names() -> None:
    assert example_agents().modules == Project.find(REPO_ROOT).agent_modules
