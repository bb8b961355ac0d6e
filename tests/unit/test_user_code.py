"""Agents come from the modules the settings name, never from a package the runtime knows."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from shepherd import AgentRegistry
from shepherd.settings import ENV_AGENT_MODULES, Settings
from shepherd.user_code import AgentModuleError, load_agents
from shepherd_cli.project import Project, ProjectError


@pytest.fixture
def modules() -> Iterator[Callable[..., types.ModuleType]]:
    made: dict[str, types.ModuleType] = {}

    def module(name: str, **attrs: object) -> types.ModuleType:
        mod = types.ModuleType(name)
        for key, value in attrs.items():
            setattr(mod, key, value)
        sys.modules[name] = made[name] = mod
        return mod

    yield module
    for name in made:
        sys.modules.pop(name, None)


def _registry(*names: str) -> AgentRegistry:
    registry = AgentRegistry()
    for name in names:
        registry.register(name, lambda ctx: None)
    return registry


def test_one_module_gives_its_own_registry(modules: Callable[..., types.ModuleType]) -> None:
    registry = _registry("a")
    modules("user_agents_one", registry=registry)
    assert load_agents(["user_agents_one"]) is registry


def test_several_modules_merge_and_an_attribute_can_be_named(
    modules: Callable[..., types.ModuleType],
) -> None:
    modules("user_agents_a", registry=_registry("a", "b"))
    modules("user_agents_b", billing=_registry("c"))
    merged = load_agents(["user_agents_a", "user_agents_b:billing"])
    assert merged.names() == {"a", "b", "c"}


def test_a_name_registered_by_two_modules_is_refused(
    modules: Callable[..., types.ModuleType],
) -> None:
    modules("user_agents_x", registry=_registry("a"))
    modules("user_agents_y", registry=_registry("a"))
    with pytest.raises(AgentModuleError, match="'a' is registered by both"):
        load_agents(["user_agents_x", "user_agents_y"])


def test_modules_sharing_one_registry_give_that_registry(
    modules: Callable[..., types.ModuleType],
) -> None:
    # Given a package whose agents live in two modules that both register on one registry
    shared = _registry("book", "pay")
    modules("user_agents_booking", registry=shared)
    modules("user_agents_billing", registry=shared)
    # When both modules are named, Then that registry is used, once, with no conflict
    assert load_agents(["user_agents_booking", "user_agents_billing"]) is shared


def test_a_module_that_raises_on_import_is_named_with_the_line(tmp_path: Path) -> None:
    (tmp_path / "user_agents_broken.py").write_text("x = 1\nundefined_name()\n")
    (tmp_path / "user_agents_needs.py").write_text("import no_such_dependency_here\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(AgentModuleError) as err:
            load_agents(["user_agents_broken"])
        assert str(err.value) == (
            "agent module 'user_agents_broken' failed while it was imported: NameError: "
            f"name 'undefined_name' is not defined ({tmp_path / 'user_agents_broken.py'}:2)"
        )
        with pytest.raises(AgentModuleError, match="No module named 'no_such_dependency_here'"):
            load_agents(["user_agents_needs"])
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("user_agents_broken", "user_agents_needs"):
            sys.modules.pop(name, None)


def test_a_registry_under_another_name_is_pointed_at(
    modules: Callable[..., types.ModuleType],
) -> None:
    modules("user_agents_named", agents=_registry("a"))
    with pytest.raises(AgentModuleError, match="name it as 'user_agents_named:agents'"):
        load_agents(["user_agents_named"])


def test_a_missing_module_or_registry_says_which(modules: Callable[..., types.ModuleType]) -> None:
    modules("user_agents_empty")
    with pytest.raises(AgentModuleError, match="cannot be imported"):
        load_agents(["no_such_module_anywhere"])
    with pytest.raises(AgentModuleError, match="no AgentRegistry named 'registry'"):
        load_agents(["user_agents_empty"])


def test_no_modules_no_agents() -> None:
    assert load_agents([]).names() == set()


def test_settings_read_and_write_the_agent_modules() -> None:
    env = {"SHEPHERD_TABLE": "tbl", ENV_AGENT_MODULES: "my_app.agents, my_app.billing:agents"}
    settings = Settings.from_env(env)
    assert settings.agent_modules == ("my_app.agents", "my_app.billing:agents")
    assert settings.to_env()[ENV_AGENT_MODULES] == "my_app.agents,my_app.billing:agents"
    assert ENV_AGENT_MODULES not in Settings.from_env({"SHEPHERD_TABLE": "tbl"}).to_env()
    with pytest.raises(ValueError, match="not a module path"):
        Settings.from_env({**env, ENV_AGENT_MODULES: "my-app/agents"})


def test_the_project_table_names_definitions_and_agents(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shepherd]\ndefinitions = "flows"\nagent-modules = ["my_app.agents"]\n'
    )
    nested = tmp_path / "src" / "my_app"
    nested.mkdir(parents=True)
    project = Project.find(nested)
    assert project.root == tmp_path.resolve()
    assert project.definitions_dir == (tmp_path / "flows").resolve()
    assert project.agent_modules == ("my_app.agents",)
    assert project.overridden(agent_modules=["other"]).agent_modules == ("other",)
    (tmp_path / "pyproject.toml").write_text('[tool.shepherd]\nagent-modules = "my_app"\n')
    with pytest.raises(ProjectError, match="agent-modules"):
        Project.find(tmp_path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[tool.shepherd\n", "not valid TOML"),
        (
            '[tool.shepherd]\nagent_modules = ["a"]\n',
            "no key 'agent_modules'; did you mean 'agent-modules'?",
        ),
        (
            '[tool.shepherd]\nagent-modules = ["my-app/agents"]\n',
            "'my-app/agents' is not a module path",
        ),
        ("[tool.shepherd]\ndefinitions = 3\n", "definitions must be a folder"),
    ],
)
def test_a_bad_project_table_names_the_file_and_the_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ProjectError) as err:
        Project.find(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'pyproject.toml'}: ")
    assert expected in str(err.value)


def test_this_repository_runs_the_examples() -> None:
    project = Project.find(Path(__file__).parent)
    assert project.agent_modules == ("shepherd_examples.agents",)
    assert project.definitions_dir.name == "statemachines"
