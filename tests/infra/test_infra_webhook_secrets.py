"""A webhook's API key secret, checked before a deploy could trip on it: in the stack's own
region (CloudFormation reads a secret nowhere else), and a JSON secret read by its field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment
from aws_cdk.assertions import Template
from infra_support import HOOKS, SECRET, Synth
from shepherd_infra.application import ShepherdStack, cdk_json_context
from shepherd_infra.webhooks import parse_webhooks

HOOK = {
    "name": "crm",
    "url": "https://crm.example.com/hooks/shepherd",
    "detail_types": ["WorkflowFailed"],
    "header": "X-Api-Key",
    "secret_arn": SECRET,
    "secret_field": "apiKey",
}


# Each template by its region and hook, synthesized once in a run (issue 36: one synthesis per
# distinct input; two tests read the eu-west-1 one). A synthesis that raises is not kept. A stack
# without a region whose hook has no `secret_field` is the session's `variant` app (its `crm`
# hook: VARIANT_CONTEXT, tests/infra/conftest.py).
_TEMPLATES: dict[tuple[str | None, str], dict[str, Any]] = {}


def _template(tmp: Path, region: str | None, hook: dict[str, Any] = HOOK) -> dict[str, Any]:
    key = (region, json.dumps(hook, sort_keys=True))
    if key not in _TEMPLATES:
        _TEMPLATES[key] = _synthesized(tmp, region, hook)
    return copy.deepcopy(_TEMPLATES[key])


def _synthesized(tmp: Path, region: str | None, hook: dict[str, Any]) -> dict[str, Any]:
    app = App(context=cdk_json_context(), outdir=str(tmp / "cdk.out"))
    stack = ShepherdStack(
        app,
        "Hooked",
        env=Environment(region=region) if region else None,
        build_dir=tmp / "build",
        webhooks=parse_webhooks([hook]),
    )
    return Template.from_stack(stack).to_json()


def test_a_secret_in_another_region_than_the_stacks_is_refused_at_synth(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"secret is in eu-west-1.*replicate it.*\(us-east-1\)"):
        _template(tmp_path, "us-east-1")


def _region_rules(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for k, r in template.get("Rules", {}).items() if "SecretRegion" in k]


def test_a_secret_in_the_stacks_region_passes(tmp_path: Path) -> None:
    template = _template(tmp_path, "eu-west-1")
    assert _region_rules(template) == []


def _connection_key(template: dict[str, Any], hook: str) -> str:
    """The API key value of a hook's EventBridge connection, as JSON text."""
    (connection,) = [
        r["Properties"]
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::Events::Connection" and hook in k.lower()
    ]
    return json.dumps(connection["AuthParameters"]["ApiKeyAuthParameters"]["ApiKeyValue"])


def test_a_stack_without_a_region_refuses_the_deploy_elsewhere(variant: Synth) -> None:
    """CloudFormation checks a template's rules before it changes anything (the `variant` app
    has no region and one hook with a secret in eu-west-1)."""
    assert [h["secret_arn"] for h in HOOKS if "secret_arn" in h] == [SECRET]
    assert ":eu-west-1:" in SECRET
    template = variant.tpl
    (rule,) = _region_rules(template)
    (assertion,) = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": [{"Ref": "AWS::Region"}, "eu-west-1"]}
    assert "replicate it" in assertion["AssertDescription"]


def test_a_json_secret_is_read_by_its_field(tmp_path: Path, variant: Synth) -> None:
    template = _template(tmp_path, "eu-west-1")
    key = _connection_key(template, "crm")
    assert f"{{{{resolve:secretsmanager:{SECRET}:SecretString:apiKey::}}}}" in key
    # Without `secret_field` (the `variant` app's crm hook): the whole secret string.
    (crm,) = [h for h in HOOKS if h["name"] == "crm"]
    assert crm["secret_arn"] == SECRET and "secret_field" not in crm
    key = _connection_key(variant.tpl, "crm")
    assert f"{{{{resolve:secretsmanager:{SECRET}:SecretString:::}}}}" in key


def test_a_field_without_a_secret_is_refused() -> None:
    hook = {k: v for k, v in HOOK.items() if k not in ("header", "secret_arn")}
    with pytest.raises(ValueError, match="secret_field names a field of the secret_arn's JSON"):
        parse_webhooks([hook])
