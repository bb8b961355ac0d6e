"""What every Shepherd function shares: one code asset, three layers, one environment, and a
builder that gives each function its own role and log group (least privilege starts empty)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Token,
    aws_ec2,
    aws_iam,
    aws_lambda,
    aws_logs,
    aws_ssm,
)
from constructs import Construct
from shepherd.definitions import Definition
from shepherd.observability import ENV_TRACING, NAMESPACE
from shepherd.settings import ENV_SERVICE

from shepherd_infra import config
from shepherd_infra.code import stage_core_layer, stage_handlers
from shepherd_infra.nag import acknowledge, acknowledged_with

ENV_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"


DEFINITIONS_LAYER_DIR = "definitions-layer"


def write_definitions(definitions: Mapping[str, Definition], build_dir: Path) -> Path:
    """Write each definition's canonical JSON to
    `<build_dir>/definitions-layer/statemachines/<name>.json` and return the layer's folder: a
    layer made from it mounts the files at /opt/statemachines/, and holds nothing else (made
    from `build_dir` itself, it also shipped the staged handlers and core layer)."""
    root = build_dir / DEFINITIONS_LAYER_DIR
    target = root / config.DEFINITIONS_LAYER_SUBDIR
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.glob("*.json"):
        stale.unlink()
    for name, definition in sorted(definitions.items()):
        (target / f"{name}.json").write_text(definition.canonical_json, encoding="utf-8")
    return root


_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
_LAYER_ARN = re.compile(r"^arn:aws[\w-]*:lambda:[\w-]+:\d{12}:layer:[\w-]+:\d+$")


def resolve_powertools_layer_arn(
    scope: Construct,
    *,
    version: str,
    override: str | None = None,
    architecture: aws_lambda.Architecture = config.ARCHITECTURE,
) -> str:
    """The Powertools layer ARN: `override` as given, or else a deploy-time reference to the
    public SSM parameter of `version` for this runtime and architecture.

    The reference is a template parameter of type `AWS::SSM::Parameter::Value<String>`, so
    CloudFormation reads it in the deploying account and region; synth needs no credentials and
    no context lookup, and the template works in every region where Powertools publishes.
    """
    if override:
        if not Token.is_unresolved(override) and not _LAYER_ARN.match(override):
            raise ValueError(f"not a Lambda layer ARN with a version: {override!r}")
        return override
    if not _SEMVER.match(version):
        raise ValueError(f"pin a Powertools release as x.y.z, got version {version!r}")
    name = config.powertools_parameter_name(config.RUNTIME, architecture, version)
    return aws_ssm.StringParameter.value_for_string_parameter(scope, name)


class InlineRole(aws_iam.Role):
    """A role whose statements, CDK's own grants included, all live in one inline policy of the
    role itself: no policy resource per grant, nor a default policy beside the role (a stack
    holds 500 resources), and nothing a function could run without (CloudFormation creates
    the role, policy included, before the function that names it)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str,
        policies: Mapping[str, aws_iam.PolicyDocument] | None = None,
    ) -> None:
        """`policies`: inline policies beside the role's own (`Shepherd`), kept apart (the
        integrations role's `Integrations`: exactly what the ASL definitions name)."""
        self._document = aws_iam.PolicyDocument()
        super().__init__(
            scope,
            construct_id,
            assumed_by=aws_iam.ServicePrincipal("lambda.amazonaws.com"),
            description=description,
            inline_policies={"Shepherd": self._document, **(policies or {})},
        )

    def add_to_principal_policy(
        self, statement: aws_iam.PolicyStatement
    ) -> aws_iam.AddToPrincipalPolicyResult:
        self._document.add_statements(statement)
        return aws_iam.AddToPrincipalPolicyResult(statement_added=True, policy_dependable=self)


def allow(fn: aws_lambda.IFunction, statement: aws_iam.PolicyStatement) -> None:
    """Add a statement to the function's role, in the role's one policy.

    Never `Function.add_to_role_policy`: under the `createNewPoliciesWithAddToRolePolicy`
    feature flag it makes a policy resource per call (44 of them at 6 pools), and without
    it the statements land where cdk-nag acknowledgments on the function do not reach. Every
    grant, CDK's own included, goes to the role (an `InlineRole`) instead."""
    role = fn.role
    assert role is not None, f"{fn.node.path} has no role"
    role.add_to_principal_policy(statement)


def holder_of(fn: aws_lambda.IFunction) -> Construct:
    """The construct holding a function, its role and its log group: acknowledgments about
    the role's statements go here, so they cover its policy whatever the app's flags."""
    scope = fn.node.scope
    assert isinstance(scope, Construct)
    return scope


# The only statements on Resource '*': actions that take no resource (the IAM service
# authorization reference lists none for them).
STAR_REASON = (
    "X-Ray PutTraceSegments/PutTelemetryRecords (active tracing), for the API Lambda "
    "ListEventSourceMappings, and for a pool in a VPC the network interface actions Lambda "
    "needs support no resource-level permissions, so they need Resource '*'"
)
VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)
ARCHITECTURES = (aws_lambda.Architecture.ARM_64, aws_lambda.Architecture.X86_64)


@dataclass(frozen=True)
class FunctionSpec:
    handler: str
    timeout: Duration
    memory_mb: int
    description: str
    extra_env: Mapping[str, str]
    # The function's own code (an agent pool's: the handlers and its agents); default: the
    # handlers alone.
    code: aws_lambda.Code | None = None
    # Lambda's active tracing (X-Ray segments of each invocation).
    tracing: bool = True
    # A name of its own (an agent pool's function, found by name at run time); default: one
    # CloudFormation makes.
    function_name: str | None = None
    # Lambda's own START/END/REPORT lines: INFO, or WARN to drop them (a function that runs
    # every few seconds on an idle stack).
    system_log_level: aws_lambda.SystemLogLevel = aws_lambda.SystemLogLevel.INFO
    # An agent pool's own settings (shepherd_infra.pool_settings).
    architecture: aws_lambda.Architecture = config.ARCHITECTURE
    extra_layers: tuple[aws_lambda.ILayerVersion, ...] = ()
    vpc: aws_ec2.IVpc | None = None
    vpc_subnets: aws_ec2.SubnetSelection | None = None
    security_groups: tuple[aws_ec2.ISecurityGroup, ...] = ()
    reserved_concurrency: int | None = None
    # A log group shared with other functions (the agent pools'); default: one of its own.
    # Lambda names each stream after its function in a shared group, so nothing is mixed up.
    log_group: aws_logs.ILogGroup | None = None
    # A role made elsewhere (the integration pool's: the integrations role); default: one of
    # its own. Either way an `InlineRole`: every grant lands in its one `Shepherd` policy.
    role: InlineRole | None = None


class LambdaRuntime(Construct):
    """Code asset, layers and environment shared by all functions; builds the functions.

    The code and the core layer are staged under `build_dir` from the installed `shepherd`
    and `shepherd_handlers` packages (`shepherd_infra.code`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        definitions: Mapping[str, Definition],
        build_dir: Path,
        environment: Mapping[str, str],
        service: str,
        powertools_version: str = config.POWERTOOLS_VERSION,
        powertools_layer_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # `service`: the deployment's own name, the dimension of every engine metric.
        self.environment = {**environment, ENV_SERVICE: service, ENV_METRICS_NAMESPACE: NAMESPACE}
        # `-c tracing=true`: the Powertools Tracer (X-Ray SDK subsegments) in every handler,
        # and the supervisor's active tracing. Off by default: the SDK costs a cold start
        # about as much as boto3's own import; Lambda's active tracing (each invocation's
        # segment) needs no SDK and stays on for every function but the supervisor.
        self.tracing = str(self.node.try_get_context(config.CTX_TRACING) or "").lower() in {
            "1",
            "true",
        }
        if self.tracing:
            self.environment[ENV_TRACING] = "true"
        self.code = aws_lambda.Code.from_asset(str(stage_handlers(build_dir)))
        core = aws_lambda.LayerVersion(
            self,
            "CoreLayer",
            code=aws_lambda.Code.from_asset(str(stage_core_layer(build_dir))),
            compatible_runtimes=[config.RUNTIME],
            compatible_architectures=list(ARCHITECTURES),  # pure Python
            description="Shepherd core package (shepherd.*)",
        )
        definitions_layer = aws_lambda.LayerVersion(
            self,
            "DefinitionsLayer",
            code=aws_lambda.Code.from_asset(str(write_definitions(definitions, build_dir))),
            compatible_runtimes=[config.RUNTIME],
            compatible_architectures=list(ARCHITECTURES),
            description=f"Workflow definitions (JSON) in {config.RUNTIME_DEFINITIONS_DIR}",
        )
        powertools_arn = resolve_powertools_layer_arn(
            self, version=powertools_version, override=powertools_layer_arn
        )
        powertools = aws_lambda.LayerVersion.from_layer_version_arn(
            self, "PowertoolsLayer", powertools_arn
        )
        self.powertools_layer_arn = powertools_arn
        self._powertools_version = powertools_version
        self._powertools_override = powertools_layer_arn
        self._shepherd_layers = [core, definitions_layer]
        self._powertools = {config.ARCHITECTURE.name: powertools}
        self.layers: list[aws_lambda.ILayerVersion] = [powertools, core, definitions_layer]
        self.functions: list[aws_lambda.Function] = []
        # Each function's environment as given (the checks at synth read it: a function keeps
        # its own behind a lazy value).
        self.environments: dict[str, Mapping[str, str]] = {}
        self._pool_logs: aws_logs.LogGroup | None = None

    def layers_for(self, architecture: aws_lambda.Architecture) -> list[aws_lambda.ILayerVersion]:
        """Powertools (its layer is built per architecture), the core and the definitions."""
        if architecture.name not in self._powertools:
            if self._powertools_override:
                raise ValueError(
                    f"powertools_layer_arn is an {config.ARCHITECTURE.name} layer: a pool on "
                    f"{architecture.name} needs the Powertools parameter (drop the override) "
                    "or the same architecture"
                )
            arn = resolve_powertools_layer_arn(
                self, version=self._powertools_version, architecture=architecture
            )
            self._powertools[architecture.name] = aws_lambda.LayerVersion.from_layer_version_arn(
                self, f"PowertoolsLayer-{architecture.name}", arn
            )
        return [self._powertools[architecture.name], *self._shepherd_layers]

    def _log_group(self, scope: Construct, construct_id: str) -> aws_logs.LogGroup:
        return aws_logs.LogGroup(
            scope,
            construct_id,
            retention=config.LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )

    @property
    def pool_logs(self) -> aws_logs.LogGroup:
        """One log group for every agent pool's function: a resource per pool less, so a
        stack holds more pools (docs/benchmarks.md, What one stack holds). Lambda names
        each stream `<date>/<function>[<version>]<id>` in a shared group."""
        if self._pool_logs is None:
            self._pool_logs = self._log_group(self, "PoolLogs")
        return self._pool_logs

    def function(
        self, scope: Construct, construct_id: str, spec: FunctionSpec
    ) -> aws_lambda.Function:
        """A function with its own role (no managed policies) and its own log group, or the
        shared one its spec names."""
        holder = Construct(scope, construct_id)
        role = spec.role or InlineRole(holder, "Role", description=f"Shepherd {spec.description}")
        if spec.role is not None:  # what is acknowledged of its grants holds where it lives
            acknowledged_with(holder, spec.role)
        log_group = spec.log_group or self._log_group(holder, "Logs")
        log_group.grant_write(role)
        fn = aws_lambda.Function(
            holder,
            "Function",
            code=spec.code or self.code,
            handler=spec.handler,
            runtime=config.RUNTIME,
            architecture=spec.architecture,
            layers=[*self.layers_for(spec.architecture), *spec.extra_layers],
            role=role,
            vpc=spec.vpc,
            vpc_subnets=spec.vpc_subnets,
            security_groups=list(spec.security_groups) or None,
            reserved_concurrent_executions=spec.reserved_concurrency,
            log_group=log_group,
            logging_format=aws_lambda.LoggingFormat.JSON,
            system_log_level_v2=spec.system_log_level,
            function_name=spec.function_name,
            timeout=spec.timeout,
            memory_size=spec.memory_mb,
            description=spec.description,
            environment=(environment := {**self.environment, **spec.extra_env}),
        )
        self.environments[fn.node.path] = environment
        cfn = fn.node.default_child
        assert isinstance(cfn, aws_lambda.CfnFunction)
        if spec.vpc is not None:
            # What Lambda needs to put the function in the VPC (AWSLambdaVPCAccessExecutionRole,
            # as a statement of the role's own: no managed policies). The CDK adds nothing
            # to a role it is given.
            allow(fn, aws_iam.PolicyStatement(actions=list(VPC_ACTIONS), resources=["*"]))
        if spec.tracing:
            # Set on the resource, not with `tracing=`: the CDK would put X-Ray's statement
            # in a policy of its own under the createNewPoliciesWithAddToRolePolicy flag.
            cfn.tracing_config = aws_lambda.CfnFunction.TracingConfigProperty(mode="Active")
            allow(
                fn,
                aws_iam.PolicyStatement(
                    actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
                    resources=["*"],
                ),
            )
            for rule in ("AwsSolutions-IAM5[Resource::*]", "Serverless-LambdaStarPermissions"):
                acknowledge(holder, rule, STAR_REASON)
        else:
            acknowledge(
                holder,
                "Serverless-LambdaTracing",
                f"Active tracing is off for the {spec.description}: it runs about 525,000 "
                "times a month on an idle stack, and X-Ray would bill each trace "
                "(docs/benchmarks.md, Fixed monthly cost); `-c tracing=true` turns it on",
            )
        self.functions.append(fn)
        return fn
