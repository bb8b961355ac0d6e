"""The supervisor at the design load is set in the construct (issue 23.1, 23.8): shards,
groups (one invocation per group per tick) and looks in flight per invocation, reaching every
function's settings and the tick queue's mapping."""

from __future__ import annotations

from pathlib import Path

from infra_support import one_step_template
from shepherd.settings import ENV_SWEEP_GROUPS, ENV_SWEEP_LOOKS, ENV_WATCH_SHARDS


def test_the_design_loads_supervisor_settings_reach_every_function_and_the_tick_mapping(
    tmp_path: Path,
) -> None:
    template = one_step_template(tmp_path, watch_shards=256, sweep_groups=32, sweep_looks=16)
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
    mappings = [
        r["Properties"] for r in resources if r["Type"] == "AWS::Lambda::EventSourceMapping"
    ]
    ticks = [m for m in mappings if m.get("ScalingConfig", {}).get("MaximumConcurrency") == 32]
    assert ticks  # the tick queue: one invocation per group at once
    # One tick per invocation: each group swept in an invocation (and on a CPU) of its own.
    assert [m["BatchSize"] for m in ticks] == [1]


def test_only_this_accounts_schedules_may_assume_the_supervisors_scheduler_role(
    tmp_path: Path,
) -> None:
    """Issue 35.1: the role EventBridge Scheduler assumes to run the supervisor trusts the
    service for this account's schedules only (`aws:SourceAccount`), as the definitions'
    schedules' role does: no confused deputy in another account can name it."""
    resources = one_step_template(tmp_path)["Resources"]
    trusts = [
        statement
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Role"
        for statement in r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        if statement["Principal"].get("Service") == "scheduler.amazonaws.com"
    ]
    assert trusts, "no role trusts EventBridge Scheduler"
    for trust in trusts:
        assert trust["Condition"] == {
            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        }, trust
