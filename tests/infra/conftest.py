"""Synthesize the app once per session (jsii synth is slow) and share the templates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from aws_cdk import App, Environment, Stack
from aws_stack import ALICE
from infra_support import (
    ALARM_EMAIL,
    EXTENDED_CONTEXT,
    EXTRA_ASL,
    EXTRA_ASL_FILE,
    EXTRA_DEFINITION,
    SIDE_BY_SIDE,
    SIDE_BY_SIDE_PAIR,
    VARIANT_CONTEXT,
    Placed,
    Synth,
    synthesize,
)
from shepherd_infra import Shepherd, config
from shepherd_infra.application import ShepherdStack, cdk_json_context, example_agents
from shepherd_infra.nag import add_checks


@pytest.fixture(scope="session")
def shepherd(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The app as deployed from this repository, with an alarm email."""
    return synthesize(
        tmp_path_factory.mktemp("cdk-out"),
        context={
            config.CTX_ALARM_EMAIL: ALARM_EMAIL,
            # The rehearsal's StartWorkflow events come from this source, read back as ALICE.
            config.CTX_EVENT_OWNERS: json.dumps({"acme.platform": ALICE}),
        },
    )


@pytest.fixture(scope="session")
def extended(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The same app from a copy of statemachines/ plus one definition with a new pool and one
    ASL state machine with integrations (EXTRA_ASL), no alarm email, and the optional context
    values set (EXTENDED_CONTEXT)."""
    definitions = tmp_path_factory.mktemp("statemachines")
    for path in config.DEFINITIONS_DIR.iterdir():
        if path.is_file():
            shutil.copy(path, definitions / path.name)
    (definitions / "quarterly_report.yaml").write_text(EXTRA_DEFINITION, encoding="utf-8")
    (definitions / EXTRA_ASL_FILE).write_text(json.dumps(EXTRA_ASL), encoding="utf-8")
    return synthesize(
        tmp_path_factory.mktemp("cdk-out-extended"),
        definitions_dir=definitions,
        context=EXTENDED_CONTEXT,
    )


@pytest.fixture(scope="session")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The app with the settings no other fixture sets (VARIANT_CONTEXT): a second stack's name,
    webhooks, a mapping of two event sources, the data not kept, tracing. One synthesis for the
    tests of each: the name only prefixes names, the webhooks build their own resources, the
    mapping changes the bus policy and one variable, not keeping the data changes removal
    policies and empties the bucket, and tracing sets one variable and the supervisor's
    tracing mode."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-variant"), context=VARIANT_CONTEXT)


@pytest.fixture(scope="session")
def side_by_side(tmp_path_factory: pytest.TempPathFactory) -> list[Placed]:
    """Shepherds deployed side by side, from one synthesis with cdk-nag (issue 36: the names
    and the isolation tests read the same app): SIDE_BY_SIDE's stacks and `Pair`, two
    constructs in one stack; every one with its dashboard (opt-in: its name is account-wide)."""
    outdir = tmp_path_factory.mktemp("cdk-out-side-by-side")
    app = App(context=cdk_json_context(), outdir=str(outdir))
    placed: list[tuple[Stack, list[Shepherd], str]] = []
    for construct_id, stack_name, region in SIDE_BY_SIDE:
        stack = ShepherdStack(
            app,
            construct_id,
            stack_name=stack_name,
            env=Environment(region=region),
            build_dir=outdir / f"build-{construct_id}",
            dashboard=True,
        )
        placed.append((stack, [stack.shepherd], region))
    region = SIDE_BY_SIDE[0][2]
    pair = Stack(app, "Pair", env=Environment(region=region))
    both = [
        Shepherd(
            pair,
            construct_id,
            definitions_dir=config.DEFINITIONS_DIR,
            agents=example_agents(),
            build_dir=outdir / f"build-{construct_id}",
            dashboard=True,
        )
        for construct_id in SIDE_BY_SIDE_PAIR
    ]
    placed.append((pair, both, region))
    add_checks(app)
    assembly = app.synth()  # once: every stack's template from one synthesis
    return [
        Placed(stack, constructs, where, assembly.get_stack_artifact(stack.artifact_id).template)
        for stack, constructs, where in placed
    ]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return config.REPO_ROOT
