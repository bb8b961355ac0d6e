"""Deployment constants of the CDK app. Everything about pools, tables, env vars and handler names
comes from the `shepherd` core; this module only holds what is about *deploying* it."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, aws_lambda, aws_logs

# The repository's example app (infra/app.py): its definitions and its agents' code.
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS_DIR = REPO_ROOT / "statemachines"
EXAMPLES_DIR = REPO_ROOT / "examples"
ASSET_EXCLUDES = ["__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache"]

# Where the definitions layer puts the canonical JSON files inside the function sandbox.
LAYER_MOUNT = "/opt"
DEFINITIONS_LAYER_SUBDIR = "statemachines"
RUNTIME_DEFINITIONS_DIR = f"{LAYER_MOUNT}/{DEFINITIONS_LAYER_SUBDIR}"

# The newest Python runtime in aws-cdk-lib 2.275 that the Powertools V3 layer is published for.
RUNTIME = aws_lambda.Runtime.PYTHON_3_14
ARCHITECTURE = aws_lambda.Architecture.ARM_64

# Powertools for AWS Lambda (Python) V3, public layer. Its number differs per region, runtime and
# architecture and grows with every release, so it is never written here: Powertools publishes
# the layer ARN of each release in a public SSM parameter in every commercial region where it
# publishes the layer (its release workflow writes .../python/arm64/python3.14/<version> among
# others), and CloudFormation resolves it at deploy time. Pinned to the version the functions are
# tested with (constraints.txt: aws-lambda-powertools==3.37.0), never `latest`, so a deploy is
# reproducible. Override the version with `-c powertools_version=<x.y.z>`, or the whole ARN
# (regions without the parameter: GovCloud, China) with `-c powertools_layer_arn=<arn>`.
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_PARAMETER_ROOT = "/aws/service/powertools/python"


def powertools_parameter_name(
    runtime: aws_lambda.Runtime, architecture: aws_lambda.Architecture, version: str
) -> str:
    """`/aws/service/powertools/python/arm64/python3.14/3.37.0`: the runtime keeps its dot here,
    unlike the layer name (`AWSLambdaPowertoolsPythonV3-python314-arm64`)."""
    return f"{POWERTOOLS_PARAMETER_ROOT}/{architecture.name}/{runtime.name}/{version}"


LOG_RETENTION = aws_logs.RetentionDays.ONE_MONTH
# How long a workflow may run and still read its payloads: they expire retention + this many
# days after they were written (infra/shepherd_infra/payload_store.py).
PAYLOAD_LIVE_DAYS = 90

# Function sizing. Agent timeouts come from the pools (shepherd.topology).
API_TIMEOUT = Duration.seconds(29)  # API Gateway's integration limit
# The API and callbacks functions: a start or a callback success from a 100 MiB upload holds
# the parsed value, its canonical JSON and bytes at once: ~200 MiB for one large string, ~1 GiB
# for 100 MiB of small records (3 million objects; measured in process, docs/architecture.md).
# 2048 MB holds that with room, and buys a full vCPU (such a start parses in ~7 s, under API
# Gateway's 29 s). A deployment that never takes large uploads may lower it (`api_memory_mb`).
API_MEMORY_MB = 2048
LAMBDA_MEMORY_RANGE = (128, 10240)  # what Lambda accepts, in MB
EVENTS_TIMEOUT = Duration.seconds(30)
RELAY_TIMEOUT = Duration.seconds(60)  # a batch of 100 records: about 10 PutEvents calls
# The event relay is behind when its oldest unprocessed stream record is older than this.
RELAY_ITERATOR_AGE_ALARM = Duration.minutes(2)
WORKER_MEMORY_MB = 256
SUPERVISOR_TIMEOUT = Duration.seconds(70)  # runs every minute, sweeps for SWEEP_WINDOW seconds
SUPERVISOR_SCHEDULE = Duration.minutes(1)
SWEEP_INTERVAL_SECONDS = 5
# Sweeps start at 0, 5, ..., 55 s into each invocation; the next invocation sweeps at 60 s:
# one sweep every 5 s around the clock, so detection lag stays within the sweep interval.
SWEEP_WINDOW_SECONDS = 55

# API stage throttling (requests per second / burst): the defaults of `ApiThrottling`.
API_STAGE_NAME = "v1"
API_RATE_LIMIT = 100
API_BURST_LIMIT = 200
# API Gateway's account-level throttle per Region (a soft quota, raised on request): a stage
# cannot usefully be set above it.
API_ACCOUNT_RATE_LIMIT = 10_000
API_ACCOUNT_BURST_LIMIT = 5_000

# Alarm thresholds.
ALARM_PERIOD = Duration.minutes(5)
OLDEST_MESSAGE_FLOOR_SECONDS = 300

# Context keys (`cdk deploy -c key=value`).
CTX_STACK_NAME = "stack_name"
CTX_ALARM_EMAIL = "alarm_email"
CTX_EVENT_BUS_NAME = "event_bus_name"
CTX_RETAIN_DATA = "retain_data"
CTX_TABLE_DELETION_PROTECTION = "table_deletion_protection"
CTX_API_LOGGING = "api_logging"
CTX_DEFINITIONS_DIR = "definitions_dir"
CTX_POWERTOOLS_VERSION = "powertools_version"
CTX_POWERTOOLS_LAYER_ARN = "powertools_layer_arn"
CTX_TRACING = "tracing"  # "true": the Powertools Tracer (X-Ray SDK) in every handler
# Keys that used to exist: refused with a pointer rather than silently ignored.
REMOVED_CONTEXT = {
    "powertools_layer_version": (
        "the Powertools layer number is resolved at deploy time now; pin another release with "
        f"-c {CTX_POWERTOOLS_VERSION}=<x.y.z> or give the whole ARN with "
        f"-c {CTX_POWERTOOLS_LAYER_ARN}=<arn>"
    ),
}
# {event source: owner principal ARN} for StartWorkflow events (JSON; see docs/api.md, Events)
CTX_EVENT_OWNERS = "event_owners"
CTX_OPERATORS = "operators"  # JSON list (or a,b) of IAM principal ARNs: pool pause/resume
# The owner of the workflows the definitions' Schedules start: an IAM principal ARN
CTX_SCHEDULE_OWNER = "schedule_owner"
# The deployment's size (shepherd_infra.deployments: default, design_load): shards, groups,
# pool concurrency, table throughput, API throttle, and the AWS quotas it needs.
CTX_SIZE = "size"
CTX_WATCH_SHARDS = "watch_shards"  # the watch index's shards (16; 256 at the design load)
CTX_SWEEP_GROUPS = "sweep_groups"  # supervisor invocations per tick (1; 128 at the design load)
CTX_WEBHOOKS = "webhooks"  # selected events to HTTPS endpoints (shepherd_infra.webhooks)
CTX_API_MEMORY_MB = "api_memory_mb"  # the API and callbacks functions' memory
CTX_POOL_MEMORY_MB = "pool_memory_mb"  # {"<pool>": MB}: an agent pool's function memory
CTX_RELEASE_POOLS = "release_pools"  # retired pools to take out of the stack (a,b)
CTX_DASHBOARD = "dashboard"  # "true": the CloudWatch dashboard ($3 a month past the free three)
# "true": API Gateway's per-method metrics (billed as custom metrics, 7 per method and stage)
CTX_API_DETAILED_METRICS = "api_detailed_metrics"

# The supervisor is behind when a sweep finds work due for longer than this, three minutes in a
# row (the design's detection-lag target is HeartbeatSeconds + 5 s; a sweep every 5 s).
SUPERVISOR_BEHIND = Duration.seconds(60)
