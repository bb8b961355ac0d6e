"""Published us-east-1 on-demand prices the cost model uses, each with its source.

Copied from ../shared/reference/aws-limits-and-prices.md ("3P": only seen on third-party pages
that agree with each other). Marginal prices; free tiers ignored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    key: str
    usd: float  # per unit
    unit: str
    text: str
    source: str


PRICES: dict[str, Price] = {
    p.key: p
    for p in (
        Price(
            "dynamodb_wru",
            0.625 / 1e6,
            "write request unit",
            "DynamoDB on-demand: $0.625 per million write request units",
            "3P (after the 50 % cut of Nov 2024); unit rules: DynamoDB Developer Guide",
        ),
        Price(
            "dynamodb_rru",
            0.125 / 1e6,
            "read request unit",
            "DynamoDB on-demand: $0.125 per million read request units",
            "3P (after the 50 % cut of Nov 2024); unit rules: DynamoDB Developer Guide",
        ),
        Price(
            "dynamodb_gb_month",
            0.25,
            "GB-month",
            "DynamoDB Standard table class: $0.25 per GB-month of storage (first 25 GB free)",
            "3P (DynamoDB pricing page, on-demand)",
        ),
        Price(
            "sqs_request",
            0.40 / 1e6,
            "request",
            "SQS standard: $0.40 per million requests (64 KB chunks; a batch call is one request)",
            "3P",
        ),
        Price(
            "lambda_request",
            0.20 / 1e6,
            "invocation",
            "Lambda: $0.20 per million requests",
            "3P",
        ),
        Price(
            "lambda_gb_s_arm",
            0.0000133334,
            "GB-second",
            "Lambda arm64: $0.0000133334 per GB-second",
            "3P",
        ),
        Price(
            "eventbridge_event",
            1.00 / 1e6,
            "event",
            "EventBridge custom events: $1.00 per million (64 KB chunks)",
            "3P",
        ),
        Price(
            "apigw_rest_request",
            3.50 / 1e6,
            "request",
            "API Gateway REST: $3.50 per million requests",
            "AWS whitepaper cost table",
        ),
        Price(
            "scheduler_invocation",
            1.00 / 1e6,
            "invocation",
            "EventBridge Scheduler: $1.00 per million invocations (after 14 M free a month)",
            "3P",
        ),
        Price(
            "temporal_cloud_action",
            50.0 / 1e6,
            "action",
            "Temporal Cloud: $50 per million Actions (Developer plan; volume tiers fall to $25); "
            "a heartbeat that reaches the server is an Action, SDKs send one per 80 % of the "
            "heartbeat timeout",
            "Temporal Cloud pricing docs (temporalio/documentation docs/evaluate/cloud/"
            "pricing.mdx), via shared/reference/anchors-2026.md [T1][T2]",
        ),
        Price(
            "s3_put",
            0.005 / 1000,
            "request",
            "S3 Standard: $0.005 per 1,000 PUT, COPY, POST, LIST requests",
            "Amazon S3 pricing page",
        ),
        Price(
            "s3_get",
            0.0004 / 1000,
            "request",
            "S3 Standard: $0.0004 per 1,000 GET, SELECT and other requests",
            "Amazon S3 pricing page",
        ),
        Price(
            "s3_gb_month",
            0.023,
            "GB-month",
            "S3 Standard storage: $0.023 per GB-month (first 50 TB)",
            "Amazon S3 pricing page",
        ),
        Price(
            "sfn_standard_transition",
            0.025 / 1000,
            "state transition",
            "Step Functions Standard: $0.025 per 1,000 state transitions (retries count)",
            "AWS Step Functions pricing page",
        ),
        Price(
            "sfn_express_request",
            1.00 / 1e6,
            "execution",
            "Step Functions Express: $1.00 per million requests",
            "AWS Compute Blog, Building cost-effective AWS Step Functions workflows",
        ),
        Price(
            "cloudwatch_alarm_metric",
            0.10,
            "alarm metric-month",
            "CloudWatch: $0.10 per standard-resolution alarm metric a month (a metric math "
            "alarm pays for each metric it reads)",
            "CloudWatch pricing page; 3P",
        ),
        Price(
            "cloudwatch_custom_metric",
            0.30,
            "metric-month",
            "CloudWatch: $0.30 per custom metric a month (first 10,000; EMF metrics included)",
            "3P; EMF charging: CloudWatch User Guide",
        ),
        Price(
            "cloudwatch_dashboard",
            3.00,
            "dashboard-month",
            "CloudWatch: $3 per dashboard a month (3 free per account, up to 50 metrics each)",
            "CloudWatch pricing page",
        ),
        Price(
            "cloudwatch_logs_gb",
            0.50,
            "GB ingested",
            "CloudWatch Logs: $0.50 per GB ingested (standard class)",
            "3P",
        ),
        Price(
            "xray_trace",
            5.00 / 1e6,
            "trace recorded",
            "X-Ray: $5.00 per million traces recorded",
            "3P",
        ),
        Price(
            "kms_key",
            1.00,
            "key-month",
            "KMS: $1 per customer managed key a month",
            "3P",
        ),
        Price(
            "sfn_express_gb_s",
            0.00001667,
            "GB-second",
            "Step Functions Express: $0.00001667 per GB-second (64 MB steps, 100 ms rounding)",
            "3P",
        ),
    )
}


def usd(key: str, quantity: float) -> float:
    return PRICES[key].usd * quantity
