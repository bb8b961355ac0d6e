"""The supervisor at the design load is set in the construct (issue 23.1, 23.8): shards,
groups (one invocation per group per tick) and looks in flight per invocation, reaching every
function's settings and the tick queue's mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from infra_support import agent_package
from shepherd.settings import ENV_SWEEP_GROUPS, ENV_SWEEP_LOOKS, ENV_WATCH_SHARDS
from shepherd_infra import AgentCode, Shepherd


def _template(tmp_path: Path, **props: Any) -> dict[str, Any]:
    definitions = tmp_path / "flows"
    definitions.mkdir(parents=True)
    (definitions / "trip.yaml").write_text(
        "Name: trip\nSteps:\n  - Name: book\n    Agent: book\n    Pool: travel\n"
        "    TimeoutSeconds: 30\n"
    )
    src = agent_package(tmp_path / "src", "trip_agents", definitions)
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Trips")
    code = AgentCode(path=src, modules=["trip_agents"])
    Shepherd(stack, "Shepherd", definitions_dir=definitions, agents=code, **props)
    return dict(Template.from_stack(stack).to_json())


def test_the_design_loads_supervisor_settings_reach_every_function_and_the_tick_mapping(
    tmp_path: Path,
) -> None:
    template = _template(tmp_path, watch_shards=256, sweep_groups=32, sweep_looks=16)
    resources = template["Resources"].values()
    envs = [
        r["Properties"]["Environment"]["Variables"]
        for r in resources
        if r["Type"] == "AWS::Lambda::Function" and "Environment" in r["Properties"]
    ]
    engine_envs = [e for e in envs if ENV_WATCH_SHARDS in e]
    assert len(engine_envs) >= 4  # api, callbacks, supervisor, the pool ...
    for env in engine_envs:
        assert env[ENV_WATCH_SHARDS] == "256"
        assert env[ENV_SWEEP_GROUPS] == "32"
        assert env[ENV_SWEEP_LOOKS] == "16"
    concurrency = sorted(
        r["Properties"].get("ScalingConfig", {}).get("MaximumConcurrency", 0)
        for r in resources
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
    )
    assert 32 in concurrency  # the tick queue: one invocation per group at once
