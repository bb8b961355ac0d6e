"""Synthesize the app once per session (jsii synth is slow) and share the templates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from aws_stack import ALICE
from infra_support import (
    ALARM_EMAIL,
    EXTENDED_CONTEXT,
    EXTRA_ASL,
    EXTRA_ASL_FILE,
    EXTRA_DEFINITION,
    Synth,
    synthesize,
)
from shepherd_infra import config


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
def repo_root() -> Path:
    return config.REPO_ROOT
