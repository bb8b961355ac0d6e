"""The design-load deployment is one named setting (issue 41.5): `Shepherd(size=DESIGN_LOAD)`
(context `-c size=design_load`) deploys the watch shards, sweep groups, every pool's event
source concurrency, the table's and each index's on-demand maximum and warm throughput, and the
API stage's throttle the design load needs; the default deployment sets none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from infra_support import one_step_template
from shepherd.settings import ENV_SWEEP_GROUPS, ENV_TABLE, ENV_WATCH_SHARDS, Settings
from shepherd_infra import deployments
from shepherd_infra.deployments import DEFAULT, DESIGN_LOAD, Quotas, Size, size_named


def _of_type(template: dict[str, Any], cfn_type: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == cfn_type]


def _engine_envs(template: dict[str, Any]) -> list[dict[str, Any]]:
    envs = [
        p["Environment"]["Variables"]
        for p in _of_type(template, "AWS::Lambda::Function")
        if "Environment" in p
    ]
    return [e for e in envs if ENV_TABLE in e]


def _stage(template: dict[str, Any]) -> dict[str, Any]:
    (stage,) = _of_type(template, "AWS::ApiGateway::Stage")
    (setting,) = [m for m in stage["MethodSettings"] if m["HttpMethod"] == "*"]
    return dict(setting)


def test_the_design_load_size_deploys_every_value_it_names(tmp_path: Path) -> None:
    template = one_step_template(tmp_path, size=DESIGN_LOAD)
    assert len(_engine_envs(template)) >= 4  # api, callbacks, supervisor, the pool ...
    for env in _engine_envs(template):
        assert env[ENV_WATCH_SHARDS] == "256"
        assert env[ENV_SWEEP_GROUPS] == "128"
    mappings = _of_type(template, "AWS::Lambda::EventSourceMapping")
    concurrency = [m.get("ScalingConfig", {}).get("MaximumConcurrency") for m in mappings]
    assert 1000 in concurrency  # the pool's mapping
    assert 128 in concurrency  # the tick queue's: one invocation per group
    (table,) = _of_type(template, "AWS::DynamoDB::Table")
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    maximum = {"MaxReadRequestUnits": 250_000, "MaxWriteRequestUnits": 200_000}
    warm = {"ReadUnitsPerSecond": 250_000, "WriteUnitsPerSecond": 200_000}
    assert table["OnDemandThroughput"] == maximum
    assert table["WarmThroughput"] == warm
    indexes = table["GlobalSecondaryIndexes"]
    assert indexes
    for index in indexes:  # a GSI has its own throughput: the watch index takes ~70,000 WRU/s
        assert index["OnDemandThroughput"] == maximum, index["IndexName"]
        assert index["WarmThroughput"] == warm, index["IndexName"]
    stage = _stage(template)
    assert stage["ThrottlingRateLimit"] == 25_000
    assert stage["ThrottlingBurstLimit"] == 10_000


def test_the_default_size_sets_no_throughput_and_keeps_the_small_throttle(tmp_path: Path) -> None:
    template = one_step_template(tmp_path)
    for env in _engine_envs(template):
        # A setting at the engine's default is left out of the environment.
        shards = str(Settings.model_fields["watch_shards"].default)
        assert env.get(ENV_WATCH_SHARDS, shards) == shards
        assert env.get(ENV_SWEEP_GROUPS, "1") == "1"
    (table,) = _of_type(template, "AWS::DynamoDB::Table")
    assert "OnDemandThroughput" not in table
    assert "WarmThroughput" not in table
    for index in table["GlobalSecondaryIndexes"]:
        assert "OnDemandThroughput" not in index
    mappings = _of_type(template, "AWS::Lambda::EventSourceMapping")
    assert 1000 not in [m.get("ScalingConfig", {}).get("MaximumConcurrency") for m in mappings]
    stage = _stage(template)
    assert (stage["ThrottlingRateLimit"], stage["ThrottlingBurstLimit"]) == (100, 200)


def test_a_setting_given_beside_the_size_overrides_it(tmp_path: Path) -> None:
    template = one_step_template(tmp_path, size=DESIGN_LOAD, sweep_groups=64)
    for env in _engine_envs(template):
        assert env[ENV_WATCH_SHARDS] == "256"
        assert env[ENV_SWEEP_GROUPS] == "64"


def test_sizes_are_named_and_an_unknown_one_is_refused() -> None:
    assert size_named("design_load") is DESIGN_LOAD
    assert size_named(None) is DEFAULT
    with pytest.raises(ValueError, match="unknown size 'huge'"):
        size_named("huge")


def test_a_size_cannot_set_more_than_the_quota_it_asks_for() -> None:
    with pytest.raises(ValueError, match="table_max_write_units"):
        Size("x", table_max_write_units=50_000)  # the default quota is 40,000
    with pytest.raises(ValueError, match="API stage's throttle"):
        Size("x", api_rate_limit=20_000)  # API Gateway's default account rate is 10,000
    assert Size("x", api_rate_limit=20_000, quotas=Quotas(api_rate=20_000)).api_rate_limit


def test_the_design_load_says_which_quotas_to_raise_and_the_default_none() -> None:
    assert DEFAULT.quotas.to_raise() == {}
    raise_ = DESIGN_LOAD.quotas.to_raise()
    assert raise_ == {
        deployments.QUOTA_TITLES["table_read_units"]: (40_000, 250_000),
        deployments.QUOTA_TITLES["table_write_units"]: (40_000, 200_000),
        deployments.QUOTA_TITLES["api_rate"]: (10_000, 25_000),
        deployments.QUOTA_TITLES["api_burst"]: (5_000, 10_000),
        deployments.QUOTA_TITLES["lambda_concurrency"]: (1_000, 10_000),
    }


def test_the_docs_name_every_quota_the_design_load_needs(repo_root: Path) -> None:
    """docs/architecture.md says what to ask AWS to raise, with the values this file holds."""
    text = (repo_root / "docs" / "architecture.md").read_text()
    for title, (_, need) in DESIGN_LOAD.quotas.to_raise().items():
        assert title in text, title
        assert f"{need:,}" in text, (title, need)


def test_the_default_watch_shards_are_the_engines() -> None:
    assert Settings.model_fields["watch_shards"].default == deployments.DEFAULT_WATCH_SHARDS
