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

from dataclasses import dataclass
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


@dataclass(frozen=True)
class ApiThrottling:
    """The stage's throttling (`Shepherd(api_throttling=...)`): requests a second and burst
    for the whole API, and optionally for starts (`POST /workflows`) alone. The defaults
    (100/s, burst 200) protect a new account; the design load (5,000 starts a second) needs
    `starts_rate_limit=5000` and an account quota that allows it (API Gateway's default is
    10,000/s, burst 5,000, per account and Region). A throttled request is a `429` from API
    Gateway, before any Lambda runs: it costs nothing."""

    rate_limit: float = config.API_RATE_LIMIT
    burst_limit: int = config.API_BURST_LIMIT
    starts_rate_limit: float | None = None
    starts_burst_limit: int | None = None
    # The account's throttle in the Region the stage may not exceed: AWS's default unless a
    # raised quota is known (a deployment size's `Quotas`, shepherd_infra.deployments).
    account_rate_limit: float = config.API_ACCOUNT_RATE_LIMIT
    account_burst_limit: int = config.API_ACCOUNT_BURST_LIMIT

    def __post_init__(self) -> None:
        rates = {"rate_limit": self.rate_limit, "starts_rate_limit": self.starts_rate_limit}
        bursts = {"burst_limit": self.burst_limit, "starts_burst_limit": self.starts_burst_limit}
        for name, rate in rates.items():
            if rate is not None and not 0 < rate <= self.account_rate_limit:
                raise ValueError(
                    f"api_throttling.{name} is {rate}: it must be above 0 and at most "
                    f"{self.account_rate_limit:g} (API Gateway's account throttle)"
                )
        for name, burst in bursts.items():
            if burst is not None and not 0 < burst <= self.account_burst_limit:
                raise ValueError(
                    f"api_throttling.{name} is {burst}: it must be 1.."
                    f"{self.account_burst_limit} (API Gateway's account burst)"
                )
        if (self.starts_rate_limit is None) != (self.starts_burst_limit is None):
            raise ValueError(
                "api_throttling: set starts_rate_limit and starts_burst_limit together"
            )


def stage_options(
    scope: Construct,
    *,
    logging: bool,
    detailed_metrics: bool = False,
    throttling: ApiThrottling | None = None,
) -> aws_apigateway.StageOptions:
    """The `v1` stage: throttled, traced; access and execution logs if `logging`, per-method
    metrics if `detailed_metrics` (API Gateway bills them as custom metrics, 7 per method and
    stage: some $25-35 a month for this API's 17 methods under traffic; its API-wide metrics,
    which the dashboard and alarms read, are free and always there)."""
    limits = throttling or ApiThrottling()
    common: dict[str, Any] = {
        "stage_name": config.API_STAGE_NAME,
        "data_trace_enabled": False,
        "metrics_enabled": detailed_metrics,
        "tracing_enabled": True,
        "throttling_rate_limit": limits.rate_limit,
        "throttling_burst_limit": limits.burst_limit,
    }
    if limits.starts_rate_limit is not None:
        common["method_options"] = {
            "/workflows/POST": aws_apigateway.MethodDeploymentOptions(
                throttling_rate_limit=limits.starts_rate_limit,
                throttling_burst_limit=limits.starts_burst_limit,
                metrics_enabled=detailed_metrics,
            )
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
