"""The `Shepherd` construct in a user's own CDK app: their definitions, their agent code (shared,
or a code asset of its own for a pool), and nothing of the repository's examples."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from aws_cdk import App, NestedStack, Stack, Stage
from aws_cdk.assertions import Template
from shepherd.observability import ENV_POOL, HANDLER_AGENT
from shepherd.settings import ENV_AGENT_MODULES
from shepherd_infra import AgentCode, Shepherd
from shepherd_infra.application import cdk_json_context
from shepherd_infra.nag import add_checks

DEFINITION = """\
Name: trip
Steps:
  - Name: book
    Agent: book
    Pool: travel
    TimeoutSeconds: 30
  - Name: render
    DependsOn: [book]
    Agent: render_ticket
    Pool: heavy
    TimeoutSeconds: 60
"""


def _package(root: Path, name: str, agents: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(
        "from shepherd import AgentRegistry\n\nregistry = AgentRegistry()\n" + agents
    )
    return root


@pytest.fixture(scope="module")
def user_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[Shepherd, dict, Path]:
    base = tmp_path_factory.mktemp("user-app")
    definitions = base / "flows"
    definitions.mkdir()
    (definitions / "trip.yaml").write_text(DEFINITION)
    src = _package(base / "src", "trip_agents", "registry.register('book', lambda ctx: {})\n")
    heavy = _package(
        base / "heavy", "ticket_agents", "registry.register('render_ticket', lambda ctx: {})\n"
    )
    (heavy / "bigdep").mkdir()  # a vendored dependency
    (heavy / "bigdep" / "__init__.py").write_text("")
    outdir = base / "cdk.out"
    app = App(context=cdk_json_context(), outdir=str(outdir))
    stack = Stack(app, "TripStack")
    shepherd = Shepherd(
        stack,
        "Workflows",
        definitions_dir=definitions,
        agents=AgentCode(path=src, modules=["trip_agents"]),
        pool_agents={"heavy": AgentCode(path=heavy, modules=["ticket_agents:registry"])},
    )
    add_checks(app)
    app.synth()  # cdk-nag runs here: the construct alone passes it
    return shepherd, Template.from_stack(stack).to_json(), outdir


def _agent_functions(template: dict) -> dict[str, dict]:
    return {
        props["Environment"]["Variables"][ENV_POOL]: props
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and (props := resource["Properties"])["Handler"] == HANDLER_AGENT
    }


def _asset_dir(outdir: Path, code: dict) -> Path:
    manifest = json.loads((outdir / "TripStack.assets.json").read_text())
    key = code["S3Key"]
    (asset,) = [
        a
        for a in manifest["files"].values()
        if any(d["objectKey"] == key for d in a["destinations"].values())
    ]
    return outdir / asset["source"]["path"]


def test_each_pool_runs_only_its_own_agent_code(user_app: tuple[Shepherd, dict, Path]) -> None:
    _, template, outdir = user_app
    agents = _agent_functions(template)
    assert set(agents) == {"travel", "heavy"}
    assert agents["travel"]["Environment"]["Variables"][ENV_AGENT_MODULES] == "trip_agents"
    assert (
        agents["heavy"]["Environment"]["Variables"][ENV_AGENT_MODULES] == "ticket_agents:registry"
    )
    travel = _asset_dir(outdir, agents["travel"]["Code"])
    heavy = _asset_dir(outdir, agents["heavy"]["Code"])
    assert sorted(p.name for p in travel.iterdir()) == ["shepherd_handlers", "trip_agents"]
    assert sorted(p.name for p in heavy.iterdir()) == [
        "bigdep",
        "shepherd_handlers",
        "ticket_agents",
    ]


def test_functions_that_run_no_agents_carry_no_agent_code(
    user_app: tuple[Shepherd, dict, Path],
) -> None:
    _, template, outdir = user_app
    others = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] != HANDLER_AGENT
    ]
    assert len(others) == 5
    for props in others:
        assert ENV_AGENT_MODULES not in props["Environment"]["Variables"]
        code = _asset_dir(outdir, props["Code"])
        assert [p.name for p in code.iterdir()] == ["shepherd_handlers"]
    assert not any("shepherd_examples" in str(p) for p in outdir.rglob("*"))


def test_the_construct_exposes_what_users_compose_with(
    user_app: tuple[Shepherd, dict, Path],
) -> None:
    shepherd, _, _ = user_app
    assert set(shepherd.pools) == {"travel", "heavy"}
    assert shepherd.table is shepherd.store.table
    assert shepherd.bus is shepherd.events.bus
    assert "${Token[" in shepherd.api_url  # resolved at deploy time


def test_a_pool_without_agent_code_is_refused(tmp_path: Path) -> None:
    (tmp_path / "trip.yaml").write_text(DEFINITION)
    stack = Stack(App(outdir=str(tmp_path / "out")), "S")
    with pytest.raises(ValueError, match=r"no agent code for pools \['heavy', 'travel'\]"):
        Shepherd(stack, "W", definitions_dir=tmp_path)
    with pytest.raises(ValueError, match="pools no definition uses"):
        Shepherd(
            stack,
            "W2",
            definitions_dir=tmp_path,
            agents=AgentCode(path=tmp_path, modules=["x"]),
            pool_agents={"nope": AgentCode(path=tmp_path, modules=["x"])},
        )


def _user_code(base: Path) -> tuple[Path, AgentCode]:
    definitions = base / "flows"
    definitions.mkdir()
    (definitions / "trip.yaml").write_text(DEFINITION)
    src = _package(
        base / "src",
        "trip_agents",
        "registry.register('book', lambda ctx: {})\n"
        "registry.register('render_ticket', lambda ctx: {})\n",
    )
    return definitions, AgentCode(path=src, modules=["trip_agents"])


def _in_stack(app: App, definitions: Path, code: AgentCode) -> None:
    Shepherd(Stack(app, "Trips"), "Workflows", definitions_dir=definitions, agents=code)


def _in_stage(app: App, definitions: Path, code: AgentCode) -> None:
    stage = Stage(app, "Prod")
    Shepherd(Stack(stage, "Trips"), "Workflows", definitions_dir=definitions, agents=code)


def _in_nested_stack(app: App, definitions: Path, code: AgentCode) -> None:
    nested = NestedStack(Stack(app, "Trips"), "Engine")
    Shepherd(nested, "Workflows", definitions_dir=definitions, agents=code)


def _twice_in_one_stack(app: App, definitions: Path, code: AgentCode) -> None:
    stack = Stack(app, "Trips")
    Shepherd(stack, "Bookings", definitions_dir=definitions, agents=code)
    Shepherd(stack, "Refunds", definitions_dir=definitions, agents=code)


@pytest.mark.parametrize(
    "place", [_in_stack, _in_stage, _in_nested_stack, _twice_in_one_stack], ids=lambda f: f.__name__
)
def test_the_construct_passes_the_checks_in_any_app(
    tmp_path: Path, place: Callable[[App, Path, AgentCode], None]
) -> None:
    """A user's own app: no context at all (none of this repository's feature flags), the
    construct where the user puts it; cdk-nag's packs find nothing unacknowledged."""
    definitions, code = _user_code(tmp_path)
    app = App(outdir=str(tmp_path / "cdk.out"))
    place(app, definitions, code)
    add_checks(app)
    app.synth()  # raises ValidationFailed on any unacknowledged finding
    report = json.loads((tmp_path / "cdk.out" / "validation-report.json").read_text())
    assert report["pluginReports"] == []
