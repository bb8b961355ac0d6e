"""Stage options of the scheduler API, and why its logging is opt-in.

API Gateway writes execution logs and access logs to CloudWatch Logs through one role per account
and region (the `cloudWatchRoleArn` of its account settings), and refuses a stage that asks for
either kind of logging while that role is unset. A stack must not set it: the setting is shared
by every API in the region, so taking it over (CDK's `cloud_watch_role=True` creates an
`AWS::ApiGateway::Account` resource) breaks or changes other teams' APIs, and destroying the
stack removes the role they log through. So on a fresh account logging is off, and
`-c api_logging=true` turns on access logs (JSON) and ERROR execution logs once the account's
role exists (README, Deploy). Metrics, throttling and X-Ray tracing need no role and stay on.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy, aws_apigateway, aws_logs
from constructs import Construct, IConstruct

from shepherd_infra import config
from shepherd_infra.nag import acknowledge

LOGGING_OFF = (
    "API Gateway logs through the one CloudWatch role of the account and region, which this "
    "stack must not take over (other APIs use it) and refuses logging while it is unset; so "
    "logging is opt-in (-c api_logging=true) once the account's role exists. Metrics and "
    "X-Ray tracing stay on"
)


def stage_options(
    scope: Construct, *, logging: bool, detailed_metrics: bool = False
) -> aws_apigateway.StageOptions:
    """The `v1` stage: throttled, traced; access and execution logs if `logging`, per-method
    metrics if `detailed_metrics` (API Gateway bills them as custom metrics, 7 per method and
    stage: some $25-35 a month for this API's 17 methods under traffic; its API-wide metrics,
    which the dashboard and alarms read, are free and always there)."""
    common: dict[str, Any] = {
        "stage_name": config.API_STAGE_NAME,
        "data_trace_enabled": False,
        "metrics_enabled": detailed_metrics,
        "tracing_enabled": True,
        "throttling_rate_limit": config.API_RATE_LIMIT,
        "throttling_burst_limit": config.API_BURST_LIMIT,
    }
    if not logging:
        return aws_apigateway.StageOptions(**common)
    access_logs = aws_logs.LogGroup(
        scope,
        "AccessLogs",
        retention=config.LOG_RETENTION,
        removal_policy=RemovalPolicy.DESTROY,
    )
    return aws_apigateway.StageOptions(
        **common,
        access_log_destination=aws_apigateway.LogGroupLogDestination(access_logs),
        access_log_format=aws_apigateway.AccessLogFormat.json_with_standard_fields(
            caller=True,
            http_method=True,
            ip=True,
            protocol=True,
            request_time=True,
            resource_path=True,
            response_length=True,
            status=True,
            user=True,
        ),
        logging_level=aws_apigateway.MethodLoggingLevel.ERROR,
    )


def acknowledge_logging_off(rest_api: IConstruct, *, logging: bool) -> None:
    """Without logging, cdk-nag rightly reports the missing access and execution logs."""
    if logging:
        return
    for rule in ("AwsSolutions-APIG1", "AwsSolutions-APIG6", "Serverless-APIGWAccessLogging"):
        acknowledge(rest_api, rule, LOGGING_OFF)
