"""The repository's example app (cdk.json): one stack holding the `Shepherd` construct with the
two example definitions and their agents, checked by cdk-nag on every synth. A user's app does
the same with its own definitions and `AgentCode`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Aws, CfnOutput, Environment, Stack
from constructs import Construct

from shepherd_infra import config, table_stages
from shepherd_infra.code import AgentCode
from shepherd_infra.deployments import size_named
from shepherd_infra.ledger import LEDGER_FILE
from shepherd_infra.nag import add_checks
from shepherd_infra.stack import BUILD_SUBDIR, Shepherd
from shepherd_infra.webhooks import parse_webhooks

STACK_NAME = "Shepherd"

__all__ = ["BUILD_SUBDIR", "STACK_NAME", "ShepherdStack", "build_app"]


def example_agents() -> AgentCode:
    """The examples' agents (examples/shepherd_examples): only they go into the functions; the
    modules are the ones this repository's `[tool.shepherd]` names for every other tool."""
    return AgentCode.from_project(config.REPO_ROOT, path=config.EXAMPLES_DIR)


class ShepherdStack(Stack):
    """A stack with one `Shepherd` construct and its outputs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str | None = None,
        stack_name: str | None = None,
        env: Environment | None = None,
        definitions_dir: Path = config.DEFINITIONS_DIR,
        agents: AgentCode | None = None,
        **shepherd_props: Any,
    ) -> None:
        super().__init__(
            scope, construct_id, description=description, stack_name=stack_name, env=env
        )
        self.shepherd = Shepherd(
            self,
            "Shepherd",
            definitions_dir=definitions_dir,
            agents=agents or example_agents(),
            **shepherd_props,
        )
        shepherd = self.shepherd
        CfnOutput(self, "ApiUrl", value=shepherd.api_url, description="Scheduler API")
        CfnOutput(self, "EventBusName", value=shepherd.bus.event_bus_name)
        CfnOutput(self, "TableName", value=shepherd.table.table_name)
        CfnOutput(self, "PayloadBucketName", value=shepherd.payload_bucket.bucket_name)
        CfnOutput(
            self,
            "EventRelayFailuresQueueUrl",
            value=shepherd.relay_failures.queue_url,
            description="Stream records the event relay gave up on: shepherd events replay",
        )
        CfnOutput(
            self,
            "StartFailuresQueueUrl",
            value=shepherd.events.start_failures.queue_url,
            description="Starts that could not be made: shepherd replay-starts",
        )
        CfnOutput(
            self,
            "EventsFunctionName",
            value=shepherd.events.function.function_name,
            description="The function that starts workflows from events and schedules",
        )
        if shepherd.schedules is not None:
            CfnOutput(
                self,
                "ScheduleDeadLettersQueueUrl",
                value=shepherd.schedules.dlq.queue_url,
                description="Schedule firings Scheduler could not deliver: shepherd replay-starts",
            )
        board = shepherd.monitoring.dashboard
        if board is not None:
            CfnOutput(
                self,
                "DashboardUrl",
                value=(
                    f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home"
                    f"?region={Aws.REGION}#dashboards:name={board.dashboard_name}"
                ),
            )


def cdk_json_context() -> dict[str, Any]:
    """Feature flags and defaults from cdk.json, so a direct `python infra/app.py` (and the
    tests) build exactly what the CDK CLI builds."""
    data = json.loads((config.REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))
    return dict(data.get("context", {}))


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in ("false", "0", "no", "off")


def _json_map(value: Any) -> dict[str, str]:
    """A context map given as JSON text (`-c key='{...}'`) or as an object (cdk.json)."""
    if not value:
        return {}
    return dict(json.loads(value) if isinstance(value, str) else value)


def _int(value: Any, default: int) -> int:
    """A whole number from context (`-c key=1024` gives text); the construct checks its range."""
    if value is None:
        return default
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"expected a whole number, got {value!r}")


def _maybe_int(value: Any) -> int | None:
    """A whole number from context, or None when not given."""
    return None if value is None else _int(value, 0)


def _names(value: Any) -> list[str]:
    """A list of names from context: `a,b` (the CLI's `-c key=a,b`) or a JSON list."""
    if not value:
        return []
    if isinstance(value, str) and value.lstrip().startswith("["):
        value = json.loads(value)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return [str(v) for v in value]


def _given(**values: Any) -> dict[str, Any]:
    """The construct's settings the context gives (the rest keep the construct's defaults)."""
    return {key: value for key, value in values.items() if value}


def _json_ints(value: Any, key: str) -> dict[str, int]:
    """A context map of whole numbers, as JSON text or an object."""
    mapping = _json_map(value)
    try:
        return {k: _int(v, 0) for k, v in mapping.items()}
    except ValueError as exc:
        raise ValueError(f"context {key!r}: {exc}") from None


def build_app(
    *,
    definitions_dir: Path | None = None,
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
) -> tuple[App, ShepherdStack]:
    """The app and its stack. `definitions_dir` (or context `definitions_dir`) overrides
    `statemachines/`; the definitions layer is written under the cloud assembly directory.
    Context `stack_name` (default `Shepherd`) names the stack, and through it every name the
    stack sets, so a second Shepherd can be deployed beside the first."""
    app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    ctx = app.node.try_get_context
    for key, instead in config.REMOVED_CONTEXT.items():
        if ctx(key) is not None:
            raise ValueError(f"context {key!r} is no longer read: {instead}")
    directory = definitions_dir or Path(ctx(config.CTX_DEFINITIONS_DIR) or config.DEFINITIONS_DIR)
    stack = ShepherdStack(
        app,
        str(ctx(config.CTX_STACK_NAME) or STACK_NAME),
        description="Shepherd: Scheduler-Agent-Supervisor workflows on AWS serverless",
        definitions_dir=Path(directory).resolve(),
        build_dir=Path(app.outdir) / BUILD_SUBDIR,
        event_bus_name=ctx(config.CTX_EVENT_BUS_NAME) or None,
        retain_data=_flag(ctx(config.CTX_RETAIN_DATA), default=True),
        table_deletion_protection=_flag(ctx(config.CTX_TABLE_DELETION_PROTECTION), default=False),
        alarm_email=ctx(config.CTX_ALARM_EMAIL) or None,
        api_logging=_flag(ctx(config.CTX_API_LOGGING), default=False),
        powertools_version=str(ctx(config.CTX_POWERTOOLS_VERSION) or config.POWERTOOLS_VERSION),
        powertools_layer_arn=ctx(config.CTX_POWERTOOLS_LAYER_ARN) or None,
        event_owners=_json_map(ctx(config.CTX_EVENT_OWNERS)),
        **_given(schedule_owner=ctx(config.CTX_SCHEDULE_OWNER)),
        operators=_names(ctx(config.CTX_OPERATORS)),
        # The deployment's size (-c size=design_load); -c watch_shards / sweep_groups override
        # its shards and groups.
        size=size_named(ctx(config.CTX_SIZE)),
        **_given(
            watch_shards=_maybe_int(ctx(config.CTX_WATCH_SHARDS)),
            sweep_groups=_maybe_int(ctx(config.CTX_SWEEP_GROUPS)),
        ),
        webhooks=parse_webhooks(ctx(config.CTX_WEBHOOKS)),
        pool_memory_mb=_json_ints(ctx(config.CTX_POOL_MEMORY_MB), config.CTX_POOL_MEMORY_MB),
        api_memory_mb=_int(ctx(config.CTX_API_MEMORY_MB), config.API_MEMORY_MB),
        # The pools deployed, beside the definitions: a removed pool is retired, not deleted.
        pool_ledger=Path(directory).resolve() / LEDGER_FILE,
        dashboard=_flag(ctx(config.CTX_DASHBOARD), default=False),
        api_detailed_metrics=_flag(ctx(config.CTX_API_DETAILED_METRICS), default=False),
        release_pools=_names(ctx(config.CTX_RELEASE_POOLS)),
        # One stage of an upgrade in place (`shepherd upgrade`); unset: this release's table.
        table_stage=table_stages.parse_stage(ctx(table_stages.CTX_TABLE_STAGE)),
    )
    add_checks(app)
    return app, stack
