"""Per-pool function settings in the construct (issue 27): timeout, memory, environment, layers,
VPC and security groups, reserved concurrency, architecture; their defaults; and the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack, aws_ec2, aws_lambda
from infra_support import agent_package, render
from shepherd.topology import AGENT_OVERHEAD_SECONDS, VISIBILITY_FACTOR
from shepherd_infra import AgentCode, CircuitBreaker, PoolSettings, RateLimit, Shepherd, config
from shepherd_infra.nag import acknowledge, add_checks
from shepherd_infra.runtime import VPC_ACTIONS

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
LAYER = "arn:aws:lambda:us-east-1:123456789012:layer:pdf-tools:3"


def _user_code(base: Path) -> tuple[Path, AgentCode]:
    definitions = base / "flows"
    definitions.mkdir(parents=True, exist_ok=True)
    (definitions / "trip.yaml").write_text(DEFINITION)
    src = agent_package(base / "src", "trip_agents", definitions) / "trip_agents"
    return definitions, AgentCode(path=src.parent, modules=["trip_agents"])


def _build(base: Path, settings: Any = None, **props: Any) -> tuple[App, Stack]:
    definitions, code = _user_code(base)
    app = App(outdir=str(base / "cdk.out"))
    stack = Stack(app, "Trips")
    resolved = settings(stack) if callable(settings) else settings
    Shepherd(
        stack, "Shepherd", definitions_dir=definitions, agents=code, pool_settings=resolved, **props
    )
    return app, stack


def _pool(template: dict[str, Any], name: str) -> dict[str, Any]:
    """The pool's function, queue and mapping properties."""
    resources = template["Resources"]
    (fn_id, fn) = next(
        (k, r["Properties"])
        for k, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Environment"]["Variables"].get("SHEPHERD_POOL") == name
    )
    (queue,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::SQS::Queue"
        and render(r["Properties"].get("QueueName", "")).endswith(f"-Q-{name}")
    ]
    (mapping,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and r["Properties"]["FunctionName"] == {"Ref": fn_id}
    ]
    role_id = fn["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for policy in resources[role_id]["Properties"]["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    return {"function": fn, "queue": queue, "mapping": mapping, "statements": statements}


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`heavy` with every setting; `travel` with none. cdk-nag passes it."""

    def settings(stack: Stack) -> dict[str, PoolSettings]:
        vpc = aws_ec2.Vpc(
            stack, "Vpc", max_azs=2, nat_gateways=0, restrict_default_security_group=False
        )
        # The user's own VPC: its findings are the user's to answer, not Shepherd's.
        acknowledge(vpc, "AwsSolutions-VPC7", "A test VPC with no traffic to log at all")
        group = aws_ec2.SecurityGroup(stack, "Agents", vpc=vpc, allow_all_outbound=True)
        layer = aws_lambda.LayerVersion.from_layer_version_arn(stack, "PdfTools", LAYER)
        return {
            "heavy": PoolSettings(
                memory_mb=2048,
                timeout=Duration.minutes(5),
                environment={"PDF_FONTS": "/opt/fonts"},
                layers=[layer],
                vpc=vpc,
                vpc_subnets=aws_ec2.SubnetSelection(
                    subnet_type=aws_ec2.SubnetType.PRIVATE_ISOLATED
                ),
                security_groups=[group],
                reserved_concurrency=4,
                architecture=aws_lambda.Architecture.X86_64,
                rate_limit=RateLimit(per_second=50, burst=10),
                batch_size=2,
                max_concurrency=20,
                circuit_breaker=CircuitBreaker(
                    failure_ratio=0.5,
                    minimum_attempts=20,
                    window_seconds=60,
                    cooldown_seconds=300,
                    probe_attempts=2,
                ),
            )
        }

    app, _ = _build(tmp_path_factory.mktemp("pool-settings"), settings)
    add_checks(app)
    assembly = app.synth()  # cdk-nag runs: a pool in a VPC passes too
    template: dict[str, Any] = assembly.get_stack_by_name("Trips").template
    return template


def test_a_pool_without_settings_keeps_the_defaults(configured: dict[str, Any]) -> None:
    travel = _pool(configured, "travel")
    fn = travel["function"]
    assert fn["MemorySize"] == config.WORKER_MEMORY_MB == 256
    assert fn["Timeout"] == 30 + AGENT_OVERHEAD_SECONDS  # its longest step + the overhead
    assert travel["queue"]["VisibilityTimeout"] == VISIBILITY_FACTOR * fn["Timeout"]
    assert fn["Architectures"] == ["arm64"]
    assert "VpcConfig" not in fn and "ReservedConcurrentExecutions" not in fn
    assert len(fn["Layers"]) == 3
    assert set(fn["Environment"]["Variables"]) >= {"SHEPHERD_POOL", "SHEPHERD_AGENT_MODULES"}
    assert "PDF_FONTS" not in fn["Environment"]["Variables"]
    assert travel["mapping"]["ScalingConfig"]["MaximumConcurrency"] == 10
    assert travel["mapping"]["BatchSize"] == 10
    assert not any(a.startswith("ec2:") for s in travel["statements"] for a in _actions(s))


def test_a_pools_rate_limit_reaches_every_function(configured: dict[str, Any]) -> None:
    """The agents take tokens, the API shows it: every function reads the same policies."""
    functions = [
        r["Properties"]
        for r in configured["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and "Environment" in r["Properties"]
        and "SHEPHERD_TABLE" in r["Properties"]["Environment"]["Variables"]
    ]
    assert len(functions) >= 4  # api, supervisor, the two pools, ...
    for fn in functions:
        policies = json.loads(fn["Environment"]["Variables"]["SHEPHERD_POOL_POLICIES"])
        assert policies == {
            "heavy": {
                "RateLimit": {"PerSecond": 50.0, "Burst": 10},
                "CircuitBreaker": {
                    "FailureRatio": 0.5,
                    "MinimumAttempts": 20,
                    "WindowSeconds": 60,
                    "CooldownSeconds": 300,
                    "ProbeAttempts": 2,
                },
                "BatchSize": 2,
                "MaxConcurrency": 20,
            }
        }


def test_a_pool_with_a_breaker_has_its_own_circuit_alarm(configured: dict[str, Any]) -> None:
    alarms = [
        r["Properties"]
        for r in configured["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and r["Properties"].get("MetricName") == "PoolCircuitOpen"
    ]
    assert len(alarms) == 1  # heavy only: travel declares no breaker
    (alarm,) = alarms
    dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
    assert dimensions["Pool"] == "heavy" and "service" in dimensions
    assert alarm["Threshold"] == 0 and alarm["Statistic"] == "Maximum"
    assert alarm["TreatMissingData"] == "notBreaching"


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def test_every_setting_reaches_the_pools_function(configured: dict[str, Any]) -> None:
    heavy = _pool(configured, "heavy")
    fn = heavy["function"]
    assert fn["MemorySize"] == 2048
    assert fn["Timeout"] == 300
    assert heavy["queue"]["VisibilityTimeout"] == VISIBILITY_FACTOR * 300  # follows it
    assert fn["Environment"]["Variables"]["PDF_FONTS"] == "/opt/fonts"
    assert fn["Layers"][-1] == LAYER and len(fn["Layers"]) == 4  # after Shepherd's three
    assert fn["Architectures"] == ["x86_64"]
    powertools = json.dumps(fn["Layers"][0])
    assert "x8664" in powertools.lower() or "x86_64" in powertools.lower()  # its Powertools
    params = {p["Default"] for p in configured.get("Parameters", {}).values() if "Default" in p}
    assert "/aws/service/powertools/python/x86_64/python3.14/3.37.0" in params
    assert len(fn["VpcConfig"]["SubnetIds"]) == 2
    assert len(fn["VpcConfig"]["SecurityGroupIds"]) == 1
    assert fn["ReservedConcurrentExecutions"] == 4
    # Never more batches at once than the function may run (the rest would be throttled).
    assert heavy["mapping"]["ScalingConfig"]["MaximumConcurrency"] == 4  # 20 asked, 4 reserved
    assert heavy["mapping"]["BatchSize"] == 2  # long steps: fewer records per invocation
    # What Lambda needs to place it in the VPC, in its own role's policy (no managed policy).
    (vpc,) = [s for s in heavy["statements"] if "ec2:CreateNetworkInterface" in _actions(s)]
    assert set(_actions(vpc)) == set(VPC_ACTIONS)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"nope": PoolSettings()}, r"pool_settings names pools no definition uses: \['nope'\]"),
        (
            {"heavy": PoolSettings(timeout=Duration.seconds(60))},
            r"pool_settings\['heavy'\]\.timeout is 60 s: it must be 90\.\.\.900 s",
        ),
        (
            {"heavy": PoolSettings(timeout=Duration.minutes(16))},
            r"timeout is 960 s: it must be 90\.\.\.900 s",
        ),
        (
            {"heavy": PoolSettings(environment={"SHEPHERD_TABLE": "x"})},
            r"environment sets \['SHEPHERD_TABLE'\]: Shepherd, Powertools or Lambda set those",
        ),
        (
            {"heavy": PoolSettings(reserved_concurrency=1)},
            r"reserved_concurrency is 1: at least 2.*pause it",
        ),
        ({"heavy": PoolSettings(memory_mb=64)}, r"memory_mb must be a whole number of MB"),
        (
            {"heavy": PoolSettings(batch_size=11)},
            r"batch_size is 11: it must be a whole number 1\.\.10",
        ),
        (
            {"heavy": PoolSettings(max_concurrency=1)},
            r"max_concurrency is 1: it must be a whole number 2\.\.1000",
        ),
    ],
)
def test_a_setting_a_deploy_would_refuse_is_refused_at_synth(
    tmp_path: Path, settings: dict[str, PoolSettings], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        _build(tmp_path, settings)


def test_too_many_layers_and_a_memory_set_twice_are_refused(tmp_path: Path) -> None:
    def three_layers(stack: Stack) -> dict[str, PoolSettings]:
        layers = [
            aws_lambda.LayerVersion.from_layer_version_arn(stack, f"L{i}", f"{LAYER[:-1]}{i}")
            for i in range(3)
        ]
        return {"heavy": PoolSettings(layers=layers)}

    with pytest.raises(ValueError, match=r"has 3: Lambda takes 5 layers.*at most 2"):
        _build(tmp_path / "a", three_layers)
    with pytest.raises(ValueError, match=r"memory_mb and pool_memory_mb\['heavy'\] both set"):
        _build(
            tmp_path / "b", {"heavy": PoolSettings(memory_mb=512)}, pool_memory_mb={"heavy": 1024}
        )
