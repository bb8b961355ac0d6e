"""Synth refuses what a deploy would refuse, naming the cause and the fix; and what grows with
the pools stays out of every function's environment, so one stack holds 56 pools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from infra_support import agent_package, render
from shepherd_infra import AgentCode, Shepherd
from shepherd_infra.limits import (
    LAMBDA_ENVIRONMENT_BYTES,
    POOL_RESOURCES,
    STACK_RESOURCES,
    TEMPLATE_BYTES,
    TemplateSize,
)
from shepherd_infra.nag import add_checks


def _wide(base: Path, pools: int) -> tuple[Path, AgentCode]:
    """One definition whose steps use `pools` pools (names as long as allowed: 32)."""
    definitions = base / "flows"
    definitions.mkdir(parents=True)
    steps = [
        f"  - Name: s{i}\n    Agent: a{i}\n    Pool: p{i:03d}-{'x' * 27}\n    TimeoutSeconds: 30"
        + (f"\n    DependsOn: [s{i - 1}]" if i else "")
        for i in range(pools)
    ]
    (definitions / "wide.yaml").write_text("Name: wide\nSteps:\n" + "\n".join(steps) + "\n")
    src = agent_package(base / "src", "wide_agents", definitions) / "wide_agents"
    return definitions, AgentCode(path=src.parent, modules=["wide_agents"])


def _synth(base: Path, pools: int, **props: Any) -> dict[str, Any]:
    definitions, code = _wide(base, pools)
    app = App(outdir=str(base / "cdk.out"))
    stack = Stack(app, "WideStack")
    Shepherd(stack, "Shepherd", definitions_dir=definitions, agents=code, **props)
    add_checks(app)
    assembly = app.synth()
    template: dict[str, Any] = assembly.get_stack_by_name("WideStack").template
    return template


def _environments(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        k: r["Properties"]["Environment"]["Variables"]
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function"
    }


# The most pools one stack holds: 57 since the pools' functions share one log group (six
# resources a pool), the task-token path routes went (seven fewer resources) and the start
# failures' queue came (its policy, the events function's on-failure config, the StartsFailed
# alarm: four more); 56 since the signal routes by business key came (`POST /signals` and `GET
# /workflows/{id}/signals`: three more API resources); 57 are refused.
MOST_POOLS = 56


@pytest.fixture(scope="module")
def fifty(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _synth(tmp_path_factory.mktemp("fifty"), MOST_POOLS)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _synth(tmp_path_factory.mktemp("two"), 2)


def test_a_pool_takes_the_resources_the_refusal_names(
    fifty: dict[str, Any], two: dict[str, Any]
) -> None:
    """POOL_RESOURCES, which the refusal quotes, is what a pool adds (alarms aside: a pool
    shares its alarms with up to eight others); the pools' functions share one log group."""

    def counted(template: dict[str, Any]) -> int:
        return sum(r["Type"] != "AWS::CloudWatch::Alarm" for r in template["Resources"].values())

    assert counted(fifty) - counted(two) == (MOST_POOLS - 2) * POOL_RESOURCES
    groups = [r for r in fifty["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup"]
    assert len(groups) < 10  # not one a pool


def test_the_most_pools_fit_in_one_stack(fifty: dict[str, Any]) -> None:
    resources = fifty["Resources"]
    assert sum(r["Type"] == "AWS::SQS::Queue" for r in resources.values()) == 2 * MOST_POOLS + 3
    assert len(resources) <= STACK_RESOURCES
    assert len(json.dumps(fifty)) <= TEMPLATE_BYTES


def test_nothing_in_an_environment_grows_with_the_pools(
    fifty: dict[str, Any], two: dict[str, Any]
) -> None:
    """Every function's environment is the same size with 2 pools as with 56 (what grows is
    derived at run time from two prefixes), and far below 4 KB once deployed."""

    def sizes(template: dict[str, Any]) -> dict[str, int]:
        out = {}
        for env in _environments(template).values():
            rendered = {k: render(v) for k, v in env.items() if k != "SHEPHERD_POOL"}
            kind = (env.get("SHEPHERD_POOL") and "agent") or json.dumps(sorted(env))
            out[kind] = len(json.dumps(rendered))
        return out

    assert sizes(two) == sizes(fifty)
    assert max(sizes(fifty).values()) < LAMBDA_ENVIRONMENT_BYTES / 2


def test_too_many_pools_for_one_stack_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as refused:
        _synth(tmp_path, MOST_POOLS + 1)
    message = str(refused.value)
    assert "CloudFormation refuses a stack of more than 500" in message
    assert f"this Shepherd has {MOST_POOLS + 1}" in message
    assert "second Shepherd construct in another stack" in message  # the fix
    assert "TooManyResourcesInStack" not in message  # ours, before the CDK's own


def test_an_environment_over_4_kb_is_refused_naming_the_variable(tmp_path: Path) -> None:
    owners = {
        f"team-{i:03d}.orders": f"arn:aws:iam::123456789012:role/orders-team-{i:03d}-publisher"
        for i in range(60)
    }
    with pytest.raises(RuntimeError) as refused:
        _synth(tmp_path, 2, event_owners=owners)
    message = str(refused.value)
    assert "Lambda refuses more than 4,096 (4 KB) of environment variables" in message
    assert "SHEPHERD_EVENT_OWNERS" in message
    assert "Fix:" in message


def test_a_template_over_1_mb_is_refused_after_synth(tmp_path: Path) -> None:
    """The size is known once the template is written: the construct's Stage checks it."""
    definitions, code = _wide(tmp_path, 1)
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Big")
    Shepherd(stack, "Shepherd", definitions_dir=definitions, agents=code)
    stack.template_options.metadata = {"padding": "x" * TEMPLATE_BYTES}
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = (tmp_path / "cdk.out" / "validation-report.json").read_text()
    assert "shepherd-deploy-limits" in report
    assert "CloudFormation refuses a template over 1,000,000 (1 MB)" in report
    assert "second Shepherd construct" in report


def test_the_template_check_passes_what_fits(tmp_path: Path) -> None:
    small = tmp_path / "t.json"
    small.write_text("{}")

    class Context:
        template_paths = [str(small)]

    assert TemplateSize().validate(Context()).success  # type: ignore[arg-type]


def _example_with(base: Path, extra: int) -> dict[str, Any] | str:
    """The example app (this repository's definitions, schedules and options) with one more
    definition whose steps use `extra` more pools: its template, or the synth's refusal."""
    import shutil

    from shepherd_infra import config
    from shepherd_infra.application import build_app

    definitions = base / "statemachines"
    shutil.copytree(config.DEFINITIONS_DIR, definitions)
    steps = [
        f"  - Name: s{i}\n    Agent: reserve_inventory\n    Pool: p{i:03d}-{'x' * 27}\n"
        "    TimeoutSeconds: 30"
        for i in range(extra)
    ]
    (definitions / "wide.yaml").write_text("Name: wide\nSteps:\n" + "\n".join(steps) + "\n")
    app, stack = build_app(definitions_dir=definitions, outdir=str(base / "cdk.out"))
    try:
        assembly = app.synth()
    except RuntimeError as exc:
        return str(exc)
    template: dict[str, Any] = assembly.get_stack_by_name(stack.stack_name).template
    return template


def test_the_example_app_holds_the_pools_the_readme_says(
    tmp_path_factory: pytest.TempPathFactory, repo_root: Path
) -> None:
    """Issue 35.1: the README quoted the bare construct's count (57) while the example app,
    with its schedules, fitted 55. The README's number is the example's: it synthesizes at
    that many pools and is refused at one more."""
    import re

    from shepherd.definitions import load_directory
    from shepherd.topology import pools
    from shepherd_infra import config

    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    (quoted,) = re.findall(r"\*\*One stack holds (\d+) pools\*\*", readme)
    most = int(quoted)
    own = len(pools(load_directory(config.DEFINITIONS_DIR)))
    fits = _example_with(tmp_path_factory.mktemp("fits"), most - own)
    assert isinstance(fits, dict), fits
    assert len(fits["Resources"]) <= STACK_RESOURCES
    refused = _example_with(tmp_path_factory.mktemp("refused"), most - own + 1)
    assert isinstance(refused, str) and "CloudFormation refuses a stack of more than" in refused
