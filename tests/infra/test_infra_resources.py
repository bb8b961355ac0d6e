"""What the stack contains, checked against the core modules it is derived from."""

from __future__ import annotations

import json
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk.assertions import Match, Template
from infra_support import EXTRA_POOL, VARIANT_CONTEXT, Synth, refers_to
from shepherd import routes
from shepherd.definitions import load_directory
from shepherd.observability import (
    ENV_POOL,
    ENV_SWEEP_INTERVAL,
    ENV_SWEEP_TICKS,
    ENV_SWEEP_WINDOW,
    ENV_TRACING,
    EVENT_SOURCE,
    HANDLER_AGENT,
    HANDLER_API,
    HANDLER_CALLBACKS,
    HANDLER_EVENTS,
    HANDLER_STREAM,
    HANDLER_SUPERVISOR,
    SIGNAL_DETAIL_TYPE,
    START_DETAIL_TYPE,
)
from shepherd.topology import TABLE, VISIBILITY_FACTOR
from shepherd_infra import config
from shepherd_infra.application import build_app
from shepherd_infra.runtime import FunctionSpec, LambdaRuntime
from shepherd_infra.schedules import schedule_count
from shepherd_infra.state_store import StateStore


def _supervisor_schedule(synth: Synth) -> dict[str, Any]:
    """The supervisor's schedule (the definitions' own are in their group: test_infra_schedules)."""
    return dict(synth.resources[synth.logical_id(synth.construct.supervisor.schedule)])


def test_resource_counts(shepherd: Synth) -> None:
    n = len(shepherd.construct.pool_specs)
    assert n >= 2, "the repository's definitions name several pools"
    scheduled = schedule_count(shepherd.construct.definitions)  # the definitions' Schedules
    shepherd.template.resource_count_is("AWS::Lambda::Function", 5 + n)  # + the event relay
    # + the relay's failure queue, the supervisor's tick queue, the start failures' queue (and
    # the schedules' DLQ)
    shepherd.template.resource_count_is("AWS::SQS::Queue", 2 * n + 3 + (1 if scheduled else 0))
    shepherd.template.resource_count_is("AWS::Lambda::EventSourceMapping", n + 2)
    shepherd.template.resource_count_is("AWS::DynamoDB::Table", 1)
    shepherd.template.resource_count_is("AWS::Scheduler::Schedule", 1 + scheduled)
    shepherd.template.resource_count_is("AWS::Events::EventBus", 1)
    shepherd.template.resource_count_is("AWS::ApiGateway::RestApi", 1)
    shepherd.template.resource_count_is("AWS::CloudWatch::Dashboard", 0)  # opt-in ($3 a month)
    # Only the two layers we build; Powertools is the public layer, referenced by ARN.
    shepherd.template.resource_count_is("AWS::Lambda::LayerVersion", 2)


def test_handlers(shepherd: Synth) -> None:
    handlers = sorted(
        f["Properties"]["Handler"] for f in shepherd.of_type("AWS::Lambda::Function").values()
    )
    n = len(shepherd.construct.pool_specs)
    assert handlers == sorted(
        [HANDLER_API, HANDLER_CALLBACKS, HANDLER_EVENTS, HANDLER_SUPERVISOR, HANDLER_STREAM]
        + [HANDLER_AGENT] * n
    )


def _powertools_parameter(synth: Synth) -> str:
    """The one template parameter that resolves the Powertools layer ARN at deploy time."""
    params = synth.tpl.get("Parameters", {})
    (name,) = [
        name
        for name, param in params.items()
        if param["Default"].startswith("/aws/service/powertools/")
    ]
    return name


def test_powertools_layer_is_resolved_at_deploy_time_from_the_public_parameter(
    shepherd: Synth,
) -> None:
    """No guessed layer number: CloudFormation reads the ARN from the parameter Powertools
    publishes per runtime, architecture and release, pinned to the version the code is tested
    with. Synth needs neither credentials nor a context lookup."""
    name = _powertools_parameter(shepherd)
    param = shepherd.tpl["Parameters"][name]
    assert param["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert param["Default"] == "/aws/service/powertools/python/arm64/python3.14/3.37.0"
    assert config.POWERTOOLS_VERSION == "3.37.0"
    for logical_id, fn in shepherd.of_type("AWS::Lambda::Function").items():
        assert {"Ref": name} in fn["Properties"]["Layers"], logical_id
    assert "AWSLambdaPowertoolsPythonV3" not in json.dumps(shepherd.tpl)
    manifest = json.loads((shepherd.outdir / "manifest.json").read_text(encoding="utf-8"))
    assert "missing" not in manifest  # no context lookup, so no credentials at synth


def test_powertools_version_is_the_one_constraints_pin() -> None:
    """The layer deployed is the Powertools the suite runs with: constraints.txt's exact pin
    (pyproject.toml asks only for a range, which must hold it)."""
    constraints = (config.REPO_ROOT / "constraints.txt").read_text(encoding="utf-8")
    (pin,) = [line for line in constraints.splitlines() if line.startswith("aws-lambda-powertools")]
    assert pin == f"aws-lambda-powertools=={config.POWERTOOLS_VERSION}", pin
    pyproject = tomllib.loads((config.REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (wanted,) = [
        d for d in pyproject["project"]["dependencies"] if d.startswith("aws-lambda-powertools")
    ]
    low = wanted.split(">=")[1].split(",")[0]
    assert tuple(map(int, low.split("."))) <= tuple(map(int, config.POWERTOOLS_VERSION.split(".")))
    assert metadata.version("aws-lambda-powertools") == config.POWERTOOLS_VERSION


def _probe_function(
    context: dict[str, Any] | None = None, **runtime_options: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One function of a bare LambdaRuntime: its properties and the template's parameters."""
    app = App(context=context)
    stack = Stack(app, "Probe")
    runtime = LambdaRuntime(
        stack,
        "Runtime",
        definitions=load_directory(config.DEFINITIONS_DIR),
        build_dir=Path(app.outdir) / "build",
        environment={},
        service="Probe-Runtime",
        **runtime_options,
    )
    runtime.function(
        stack,
        "Fn",
        FunctionSpec(
            handler="x.handler",
            timeout=Duration.seconds(3),
            memory_mb=128,
            description="probe",
            extra_env={},
        ),
    )
    tpl = Template.from_stack(stack).to_json()
    (fn,) = [r for r in tpl["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    return fn["Properties"], tpl.get("Parameters", {})


def _probe_layers(**runtime_options: Any) -> tuple[list[Any], dict[str, Any]]:
    props, params = _probe_function(**runtime_options)
    return props["Layers"], params


def test_the_xray_sdk_tracer_is_switched_on_by_context(variant: Synth) -> None:
    off, _ = _probe_function()
    assert ENV_TRACING not in off["Environment"]["Variables"]
    assert off["TracingConfig"] == {"Mode": "Active"}  # Lambda's own segments, no SDK
    on, _ = _probe_function(context={config.CTX_TRACING: "true"})
    assert on["Environment"]["Variables"][ENV_TRACING] == "true"
    # ... and the supervisor's active tracing, off by default (an idle stack runs it 525,600
    # times a month, and X-Ray bills each trace).
    # (the session's `variant` app is built with the tracing context: tests/infra/conftest.py)
    assert VARIANT_CONTEXT[config.CTX_TRACING] == "true"
    traced = variant.stack
    supervisor = traced.shepherd.supervisor.function.node.default_child
    assert traced.resolve(supervisor.tracing_config) == {"mode": "Active"}


def test_powertools_layer_overrides() -> None:
    arn = "arn:aws-cn:lambda:cn-north-1:498634801083:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:9"
    layers, params = _probe_layers(powertools_layer_arn=arn)
    assert arn in layers
    assert not [p for p in params.values() if "/powertools/" in str(p.get("Default"))]
    layers, params = _probe_layers(powertools_version="3.36.0")
    assert [p["Default"] for p in params.values() if "/powertools/" in p["Default"]] == [
        "/aws/service/powertools/python/arm64/python3.14/3.36.0"
    ]
    with pytest.raises(ValueError, match="layer ARN"):
        _probe_layers(powertools_layer_arn="AWSLambdaPowertoolsPythonV3-python314-arm64:40")
    with pytest.raises(ValueError, match="version"):
        _probe_layers(powertools_version="latest")


def test_the_guessed_layer_number_context_is_refused() -> None:
    with pytest.raises(ValueError, match="powertools_layer_arn"):
        build_app(context={"powertools_layer_version": "40"})


def test_every_function_runtime_tracing_logs_and_layers(shepherd: Synth) -> None:
    log_groups = shepherd.of_type("AWS::Logs::LogGroup")
    powertools = {"Ref": _powertools_parameter(shepherd)}
    supervisor = shepherd.logical_id(shepherd.construct.supervisor.function)
    for logical_id, fn in shepherd.of_type("AWS::Lambda::Function").items():
        props = fn["Properties"]
        assert props["Runtime"] == "python3.14", logical_id
        assert props["Architectures"] == ["arm64"], logical_id
        if logical_id == supervisor:
            # 525,600 runs a month on an idle stack: untraced and without Lambda's own lines
            # unless asked (test_the_xray_sdk_tracer_is_switched_on_by_context).
            assert "TracingConfig" not in props, logical_id
            assert props["LoggingConfig"]["SystemLogLevel"] == "WARN"
        else:
            assert props["TracingConfig"] == {"Mode": "Active"}, logical_id
            assert props["LoggingConfig"].get("SystemLogLevel", "INFO") == "INFO", logical_id
        log_group = props["LoggingConfig"]["LogGroup"]["Ref"]
        assert log_groups[log_group]["Properties"]["RetentionInDays"] == 30, logical_id
        layers = props["Layers"]
        assert len(layers) == 3, logical_id
        assert layers.count(powertools) == 1, logical_id
        # The deployment's own name: its metrics are series of their own.
        assert props["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "Shepherd-Shepherd"
        assert props["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == "Shepherd"


def test_queues_follow_the_pools(shepherd: Synth) -> None:
    policies = shepherd.of_type("AWS::SQS::QueuePolicy")
    for name, spec in shepherd.construct.pool_specs.items():
        pool = shepherd.construct.pools[name]
        fn = shepherd.props(shepherd.logical_id(pool.function))
        assert fn["Timeout"] == spec.function_timeout_seconds
        queue_id, dlq_id = shepherd.logical_id(pool.queue), shepherd.logical_id(pool.dlq)
        queue, dlq = shepherd.props(queue_id), shepherd.props(dlq_id)
        # Derived names the runtime finds from a prefix, ending in the stack's creation id.
        names = shepherd.construct.names
        assert shepherd.stack.resolve(names.queue(name)) == queue["QueueName"]
        assert shepherd.stack.resolve(names.dlq(name)) == dlq["QueueName"]
        assert queue["VisibilityTimeout"] == VISIBILITY_FACTOR * fn["Timeout"]
        assert queue["VisibilityTimeout"] == spec.visibility_timeout_seconds
        assert queue["RedrivePolicy"]["maxReceiveCount"] >= 5
        assert queue["RedrivePolicy"]["maxReceiveCount"] == spec.max_receive_count
        assert refers_to(queue["RedrivePolicy"]["deadLetterTargetArn"], dlq_id)
        for props in (queue, dlq):
            assert props["SqsManagedSseEnabled"] is True
        for logical_id in (queue_id, dlq_id):
            enforced = [
                s
                for p in policies.values()
                if {"Ref": logical_id} in p["Properties"]["Queues"]
                for s in p["Properties"]["PolicyDocument"]["Statement"]
                if s["Effect"] == "Deny"
                and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            ]
            assert enforced, f"{logical_id}: no SSL-only policy"


def test_event_source_mappings(shepherd: Synth) -> None:
    mappings = shepherd.of_type("AWS::Lambda::EventSourceMapping")
    for name, spec in shepherd.construct.pool_specs.items():
        pool = shepherd.construct.pools[name]
        queue_id = shepherd.logical_id(pool.queue)
        fn_id = shepherd.logical_id(pool.function)
        (mapping,) = [
            m["Properties"]
            for m in mappings.values()
            if refers_to(m["Properties"]["EventSourceArn"], queue_id)
        ]
        assert mapping["FunctionName"] == {"Ref": fn_id}
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["BatchSize"] == spec.batch_size
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": spec.max_concurrency}
        assert shepherd.function_env(fn_id)[ENV_POOL] == name


def test_supervisor_ticks(shepherd: Synth) -> None:
    """The scheduled run's delayed ticks: each invokes the supervisor through a mapping."""
    fn_id = shepherd.logical_id(shepherd.construct.supervisor.function)
    ticks_id = shepherd.logical_id(shepherd.construct.supervisor.ticks)
    queue = shepherd.props(ticks_id)
    assert queue["MessageRetentionPeriod"] == 300  # a late tick is worth nothing
    assert queue["VisibilityTimeout"] >= shepherd.props(fn_id)["Timeout"]
    assert "RedrivePolicy" not in queue
    assert shepherd.function_env(fn_id)[ENV_SWEEP_TICKS] == {"Ref": ticks_id}
    (mapping,) = [
        m["Properties"]
        for m in shepherd.of_type("AWS::Lambda::EventSourceMapping").values()
        if refers_to(m["Properties"]["EventSourceArn"], ticks_id)
    ]
    assert mapping["FunctionName"] == {"Ref": fn_id}
    assert mapping["BatchSize"] == 10  # a backlog collapses into one sweep
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 2}


def _attribute_types(props: dict[str, Any]) -> dict[str, str]:
    return {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}


def test_table_keys_indexes_ttl_and_protection(shepherd: Synth) -> None:
    ((_, table),) = shepherd.of_type("AWS::DynamoDB::Table").items()
    props = table["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": TABLE.partition_key, "KeyType": "HASH"},
        {"AttributeName": TABLE.sort_key, "KeyType": "RANGE"},
    ]
    types = _attribute_types(props)
    indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
    assert set(indexes) == {
        TABLE.watch_index.name,
        *(i.name for i in TABLE.list_indexes),
        TABLE.inbox_index.name,
        TABLE.key_index.name,
    }
    watch = indexes[TABLE.watch_index.name]
    assert watch["KeySchema"] == [
        {"AttributeName": "watch_shard", "KeyType": "HASH"},
        {"AttributeName": "due_at", "KeyType": "RANGE"},
    ]
    assert watch["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert (types["watch_shard"], types["due_at"]) == ("S", "N")
    # The list indexes: one sharded partition per caller, a sort key per filter, keys only.
    for name, sort_key in (
        ("by_owner", "list_sk"),
        ("by_status", "status_sk"),
        ("by_type", "type_sk"),
        ("by_type_status", "type_status_sk"),
    ):
        assert indexes[name]["KeySchema"] == [
            {"AttributeName": "list_pk", "KeyType": "HASH"},
            {"AttributeName": sort_key, "KeyType": "RANGE"},
        ]
        assert indexes[name]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
        assert types[sort_key] == "S"
    assert types["list_pk"] == "S"
    # The approval inbox: sparse, one partition per principal and shard, newest first by its
    # sort key, projecting what a row of GET /approvals shows (no read of the table).
    inbox = indexes["inbox"]
    assert inbox["KeySchema"] == [
        {"AttributeName": "inbox_pk", "KeyType": "HASH"},
        {"AttributeName": "inbox_sk", "KeyType": "RANGE"},
    ]
    assert inbox["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["wf_type", "step", "requested_at", "approval_due_at"],
    }
    assert (types["inbox_pk"], types["inbox_sk"]) == ("S", "S")
    # Business keys (issue 37): sparse, tags and matches, keys only.
    by_key = indexes["by_key"]
    assert by_key["KeySchema"] == [
        {"AttributeName": "key_pk", "KeyType": "HASH"},
        {"AttributeName": "key_sk", "KeyType": "RANGE"},
    ]
    assert by_key["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert (types["key_pk"], types["key_sk"]) == ("S", "S")
    assert props["TimeToLiveSpecification"] == {
        "AttributeName": TABLE.ttl_attribute,
        "Enabled": True,
    }
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    # Kept on destroy and on replacement, but a table created by a stack operation that rolls
    # back (a failed first deploy) goes with it instead of blocking the next attempt: so it is
    # not protected from deletion (DynamoDB would refuse the rollback's DeleteTable).
    assert props["DeletionProtectionEnabled"] is False
    assert table["DeletionPolicy"] == "RetainExceptOnCreate"
    assert table["UpdateReplacePolicy"] == "Retain"


def test_deletion_protection_is_opt_in_for_an_existing_table(extended: Synth) -> None:
    """The session's `extended` app sets it (EXTENDED_CONTEXT); the default app's table is
    not protected (the test above)."""
    from infra_support import EXTENDED_CONTEXT
    from shepherd_infra import config

    assert EXTENDED_CONTEXT[config.CTX_TABLE_DELETION_PROTECTION] == "true"
    ((_, table),) = extended.of_type("AWS::DynamoDB::Table").items()
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "RetainExceptOnCreate"


def test_supervisor_schedule_and_concurrency(shepherd: Synth) -> None:
    fn_id = shepherd.logical_id(shepherd.construct.supervisor.function)
    props = shepherd.props(fn_id)
    # No reserved concurrency anywhere: reserving any fails the deploy on new or low-quota
    # accounts, and overlapping sweeps are safe (conditional writes).
    for logical_id, fn in shepherd.of_type("AWS::Lambda::Function").items():
        assert "ReservedConcurrentExecutions" not in fn["Properties"], logical_id
    assert props["Timeout"] == 70
    env = shepherd.function_env(fn_id)
    assert env[ENV_SWEEP_INTERVAL] == "5"
    assert env[ENV_SWEEP_WINDOW] == "55"
    assert int(env[ENV_SWEEP_WINDOW]) < props["Timeout"]
    # The last sweep of one invocation and the first of the next are one interval apart.
    assert int(env[ENV_SWEEP_WINDOW]) + int(env[ENV_SWEEP_INTERVAL]) == 60
    schedule = _supervisor_schedule(shepherd)
    assert schedule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert schedule["Properties"]["State"] == "ENABLED"
    assert refers_to(schedule["Properties"]["Target"]["Arn"], fn_id)


def test_supervisor_runs_never_pile_up(shepherd: Synth) -> None:
    """A run that cannot start within about a minute is dropped, not queued or retried: the next
    scheduled run replaces it. Both the schedule's target and Lambda's asynchronous queue say so."""
    fn_id = shepherd.logical_id(shepherd.construct.supervisor.function)
    schedule = _supervisor_schedule(shepherd)
    assert schedule["Properties"]["Target"]["RetryPolicy"] == {
        "MaximumRetryAttempts": 0,
        "MaximumEventAgeInSeconds": 60,
    }
    (config,) = [
        c["Properties"]
        for c in shepherd.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": fn_id}
    ]
    assert config["Qualifier"] == "$LATEST"  # what the schedule invokes (an unqualified ARN)
    assert config["MaximumRetryAttempts"] == 0
    assert config["MaximumEventAgeInSeconds"] == 60


def test_first_scheduled_runs_wait_for_every_supervisor_policy(shepherd: Synth) -> None:
    """CloudFormation may create the schedule as soon as the function exists; a run fired
    before the role's policies are attached fails on AccessDenied. The schedule depends on every
    policy of the supervisor's role (and of the role the schedule invokes it with)."""
    fn_id = shepherd.logical_id(shepherd.construct.supervisor.function)
    function_role = shepherd.props(fn_id)["Role"]["Fn::GetAtt"][0]
    schedule = _supervisor_schedule(shepherd)
    scheduler_role = schedule["Properties"]["Target"]["RoleArn"]["Fn::GetAtt"][0]
    assert function_role != scheduler_role
    depends_on = set(schedule.get("DependsOn", []))
    for role in (function_role, scheduler_role):
        policies = {
            logical_id
            for logical_id, policy in shepherd.of_type("AWS::IAM::Policy").items()
            if {"Ref": role} in policy["Properties"]["Roles"]
        }
        # A policy of its own must come first; an inline policy is part of the role, which
        # the function (and so the schedule) refers to.
        inline = shepherd.props(role).get("Policies", [])
        assert policies or inline, role
        assert policies <= depends_on, (role, policies - depends_on)
    assert shepherd.props(function_role)["Policies"], "the supervisor's grants are inline"
    # Nothing else invokes the supervisor: no permission for any other service or principal.
    for permission in shepherd.of_type("AWS::Lambda::Permission").values():
        assert not refers_to(permission["Properties"]["FunctionName"], fn_id), permission


def test_start_rule_matches_external_start_events(shepherd: Synth) -> None:
    bus_id = shepherd.logical_id(shepherd.construct.events.bus)
    fn_id = shepherd.logical_id(shepherd.construct.events.function)
    shepherd.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventBusName": {"Ref": bus_id},
            "EventPattern": {
                # StartWorkflow and Signal (issue 37): both are owned by their source's caller
                "detail-type": [START_DETAIL_TYPE, SIGNAL_DETAIL_TYPE],
                "source": [{"anything-but": [EVENT_SOURCE]}],
            },
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [fn_id, "Arn"]}})],
        },
    )
    shepherd.template.has_resource_properties(
        "AWS::Events::EventBus", {"Name": "Shepherd-Shepherd-Events"}
    )


API_ROUTES = {(r.method, r.resource): r.target for r in routes.ROUTES}


def _paths(synth: Synth) -> dict[str, str]:
    """Resource logical id -> full path."""
    resources = synth.of_type("AWS::ApiGateway::Resource")
    paths: dict[str, str] = {}

    def path(logical_id: str) -> str:
        if logical_id not in paths:
            props = resources[logical_id]["Properties"]
            parent = props["ParentId"]
            prefix = "" if "Fn::GetAtt" in parent else path(parent["Ref"])
            paths[logical_id] = f"{prefix}/{props['PathPart']}"
        return paths[logical_id]

    for logical_id in resources:
        path(logical_id)
    return paths


def test_api_routes_are_iam_authorized_and_validated(shepherd: Synth) -> None:
    paths = _paths(shepherd)
    functions = {
        "api": shepherd.logical_id(shepherd.construct.api.api_function),
        "callbacks": shepherd.logical_id(shepherd.construct.api.callbacks_function),
    }
    ((validator_id, validator),) = shepherd.of_type("AWS::ApiGateway::RequestValidator").items()
    # Changed on purpose: bodies are validated by the handlers alone (the gateway's model had
    # drifted from them and answered in another shape); parameters still are, here.
    assert validator["Properties"]["ValidateRequestBody"] is False
    assert validator["Properties"]["ValidateRequestParameters"] is True
    routes_found = {}
    for method in shepherd.of_type("AWS::ApiGateway::Method").values():
        props = method["Properties"]
        assert props["AuthorizationType"] == "AWS_IAM"
        assert props["RequestValidatorId"] == {"Ref": validator_id}
        path = paths[props["ResourceId"]["Ref"]]
        params = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        if params:  # every path parameter required (a route may have two: a workflow, a step)
            assert props["RequestParameters"] == {f"method.request.path.{p}": True for p in params}
        integration = props["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        target = next(k for k, fid in functions.items() if fid in str(integration["Uri"]))
        routes_found[(props["HttpMethod"], path)] = target
    assert routes_found == API_ROUTES


def test_no_gateway_body_model_to_drift_from_the_handlers(shepherd: Synth) -> None:
    shepherd.template.resource_count_is("AWS::ApiGateway::Model", 0)
    for method in shepherd.of_type("AWS::ApiGateway::Method").values():
        assert "RequestModels" not in method["Properties"]


def test_gateway_responses_answer_in_the_error_shape(shepherd: Synth) -> None:
    found = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in shepherd.of_type("AWS::ApiGateway::GatewayResponse").values()
    }
    required = {
        "BAD_REQUEST_BODY",
        "BAD_REQUEST_PARAMETERS",
        "MISSING_AUTHENTICATION_TOKEN",
        "INVALID_SIGNATURE",
        "EXPIRED_TOKEN",
        "ACCESS_DENIED",
        "THROTTLED",
        "REQUEST_TOO_LARGE",
        "UNSUPPORTED_MEDIA_TYPE",
        "INTEGRATION_FAILURE",
        "INTEGRATION_TIMEOUT",
        "DEFAULT_4XX",
        "DEFAULT_5XX",
    }
    assert set(found) == required == {g.response_type for g in routes.GATEWAY_ERRORS}
    statuses = {"THROTTLED": "429", "REQUEST_TOO_LARGE": "413", "UNSUPPORTED_MEDIA_TYPE": "415"}
    for response_type, props in found.items():
        spec = routes.gateway_error(response_type)
        assert props.get("StatusCode") == (str(spec.status) if spec.status else None)
        if response_type in statuses:
            assert props["StatusCode"] == statuses[response_type]
        (template,) = props["ResponseTemplates"].values()
        assert list(props["ResponseTemplates"]) == ["application/json"]
        # What API Gateway substitutes, with values that need escaping: still valid JSON.
        rendered = template.replace("$context.requestId", "abc-123").replace(
            "$context.error.messageString", json.dumps('Say "hi"\\n')
        )
        assert "$" not in rendered and "#" not in rendered, template
        body = json.loads(rendered)
        assert body == {
            "error": {
                "code": spec.code,
                "message": spec.message or 'Say "hi"\\n',
                "request_id": "abc-123",
            }
        }


def _stage(synth: Synth) -> dict[str, Any]:
    ((_, stage),) = synth.of_type("AWS::ApiGateway::Stage").items()
    return dict(stage["Properties"])


def test_api_stage_throttling_tracing_and_no_logging_by_default(shepherd: Synth) -> None:
    """A fresh account has no API Gateway CloudWatch role, and API Gateway refuses a stage that
    logs without it: by default the stage asks for neither access nor execution logs."""
    props = _stage(shepherd)
    assert props["TracingEnabled"] is True
    assert "AccessLogSetting" not in props
    (settings,) = props["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == config.API_RATE_LIMIT
    assert settings["ThrottlingBurstLimit"] == config.API_BURST_LIMIT
    # Per-method metrics are custom metrics ($25-35 a month under traffic): opt-in.
    assert settings["MetricsEnabled"] is False
    assert settings.get("LoggingLevel", "OFF") == "OFF"
    assert settings["DataTraceEnabled"] is False


def test_api_logging_is_opt_in(extended: Synth) -> None:
    """`-c api_logging=true`, once the account's role exists: JSON access logs, ERROR logs."""
    props = _stage(extended)
    assert props["TracingEnabled"] is True
    assert "requestId" in props["AccessLogSetting"]["Format"]
    assert props["AccessLogSetting"]["Format"].startswith("{")
    log_group = props["AccessLogSetting"]["DestinationArn"]["Fn::GetAtt"][0]
    assert extended.props(log_group)["RetentionInDays"] == 30
    (settings,) = props["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == config.API_RATE_LIMIT
    assert settings["LoggingLevel"] == "ERROR"
    assert settings["MetricsEnabled"] is True  # -c api_detailed_metrics=true
    assert settings["DataTraceEnabled"] is False


def test_the_account_api_gateway_role_is_left_alone(shepherd: Synth, extended: Synth) -> None:
    """The region's one `AWS::ApiGateway::Account` (and its CloudWatch role) belongs to every API
    in the account: no stack may take it over, or delete it on destroy."""
    for synth in (shepherd, extended):
        synth.template.resource_count_is("AWS::ApiGateway::Account", 0)
        for logical_id, role in synth.of_type("AWS::IAM::Role").items():
            trust = json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
            assert "apigateway.amazonaws.com" not in trust, logical_id
        assert "AmazonAPIGatewayPushToCloudWatchLogs" not in json.dumps(synth.tpl)


def test_outputs(shepherd: Synth, extended: Synth) -> None:
    outputs = shepherd.tpl["Outputs"]
    assert {"ApiUrl", "EventBusName", "TableName"} <= set(outputs)
    assert "DashboardUrl" not in outputs  # no dashboard unless asked
    # What `shepherd events replay --queue` needs: the relay's on-failure queue.
    failures = shepherd.logical_id(shepherd.construct.relay_failures)
    assert outputs["EventRelayFailuresQueueUrl"]["Value"] == {"Ref": failures}
    dashboard = str(extended.tpl["Outputs"]["DashboardUrl"]["Value"])  # -c dashboard=true
    assert "AWS::Region" in dashboard
    dashboard_id = extended.logical_id(extended.construct.monitoring.dashboard)
    assert "#dashboards:name=" in dashboard
    assert f"'Ref': '{dashboard_id}'" in dashboard
    # Dashboards are account-wide: the region keeps one stack name in two regions apart.
    assert extended.props(dashboard_id)["DashboardName"] == {
        "Fn::Join": ["", ["Shepherd-Shepherd-Monitoring-", {"Ref": "AWS::Region"}]]
    }


def test_retain_data_false_lets_the_table_go_with_the_stack() -> None:
    app = App()
    stack = Stack(app, "Probe")
    StateStore(stack, "Store", retain=False)
    ((_, table),) = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table").items()
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is False


def test_memory_sizes_default_and_follow_the_context(shepherd: Synth, extended: Synth) -> None:
    """The API and callbacks functions hold a 100 MiB upload's parsed value (2048 MB); the
    other functions 256 MB; a pool (and the API) can be sized without forking the construct."""

    def memory(synth: Synth) -> dict[str, int]:
        return {
            name: synth.props(fn)["MemorySize"]
            for name, fn in synth.function_ids(relay=True).items()
        }

    defaults = memory(shepherd)
    assert defaults.pop("api") == defaults.pop("callbacks") == config.API_MEMORY_MB == 2048
    assert set(defaults.values()) == {config.WORKER_MEMORY_MB}
    sized = memory(extended)
    assert sized.pop("api") == sized.pop("callbacks") == 1024
    assert sized.pop(f"agent:{EXTRA_POOL}") == 3008
    assert set(sized.values()) == {config.WORKER_MEMORY_MB}


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"pool_memory_mb": '{"nope": 512}'}, "no definition uses"),
        ({"pool_memory_mb": '{"payments": 64}'}, "128..10240"),
        ({"pool_memory_mb": '{"payments": "lots"}'}, "whole number"),
        ({"api_memory_mb": "20000"}, "128..10240"),
        ({"api_memory_mb": "1.5"}, "whole number"),
    ],
)
def test_memory_sizes_lambda_refuses_are_refused_at_synth(
    context: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build_app(context=context)
