"""Who owns event-started workflows is deployment configuration: CDK context `event_owners`
reaches the functions as SHEPHERD_EVENT_OWNERS (shepherd.settings), and bad values fail the
synth instead of the first event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_stack import ALICE
from infra_support import Synth, synthesize
from pydantic import ValidationError
from shepherd.settings import ENV_EVENT_OWNERS, Settings
from shepherd_infra import config


def test_context_event_owners_reach_the_events_function(shepherd: Synth) -> None:
    """The session's app (tests/infra/conftest.py) maps acme.platform to ALICE in its context."""
    owners = {"acme.platform": ALICE}
    synth = shepherd
    env = synth.function_env(synth.logical_id(synth.construct.events.function))
    assert json.loads(env[ENV_EVENT_OWNERS]) == owners
    runtime = Settings.from_env(
        {"SHEPHERD_TABLE": "shepherd", ENV_EVENT_OWNERS: env[ENV_EVENT_OWNERS]}
    )
    assert runtime.event_owners == owners


def test_an_owner_that_is_not_a_principal_arn_fails_the_synth(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="IAM principal ARN"):
        synthesize(tmp_path, context={config.CTX_EVENT_OWNERS: '{"acme.orders": "alice"}'})


def test_without_context_no_source_is_mapped(tmp_path: Path) -> None:
    synth = synthesize(tmp_path)
    assert ENV_EVENT_OWNERS not in synth.function_env(
        synth.logical_id(synth.construct.events.function)
    )
