"""Runtime settings: one pydantic model, read from the environment once.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shepherd import limits
from shepherd.pool_policy import PoolPolicy, parse_policies, policies_json
from shepherd.project import AGENT_MODULE

PREFIX = "SHEPHERD_"

# Environment variable names: the CDK app and the local stack set exactly these.
ENV_TABLE = "SHEPHERD_TABLE"
ENV_QUEUE_URLS = "SHEPHERD_QUEUE_URLS"
ENV_EVENT_BUS = "SHEPHERD_EVENT_BUS"
ENV_DEFINITIONS_DIR = "SHEPHERD_DEFINITIONS_DIR"
ENV_WATCH_SHARDS = "SHEPHERD_WATCH_SHARDS"
ENV_RETENTION_DAYS = "SHEPHERD_RETENTION_DAYS"
ENV_POOL_MAPPINGS = "SHEPHERD_POOL_MAPPINGS"  # JSON: pool -> its SQS event source mapping id
# A deployment derives what grows with its pools instead of listing it (Lambda allows 4 KB of
# environment): a pool's queue URL is this prefix + the pool's name, its agent function's name
# this prefix + the pool's name (its event source mapping is looked up by that name).
ENV_QUEUE_URL_PREFIX = "SHEPHERD_QUEUE_URL_PREFIX"
ENV_POOL_FUNCTION_PREFIX = "SHEPHERD_POOL_FUNCTION_PREFIX"
# Pools no definition names any more but still deployed (retired, docs/architecture.md): their
# queues take tasks of workflows that started on an earlier definition version. Comma-separated.
ENV_RETIRED_POOLS = "SHEPHERD_RETIRED_POOLS"
ENV_EVENT_OWNERS = "SHEPHERD_EVENT_OWNERS"
# Who owns the workflows a definition's schedules start (their firings' source is
# `shepherd.schedule`): an IAM principal ARN, which may then read them through the API, or a
# name no caller has (the default: nobody reads them but through an operator's tools).
ENV_SCHEDULE_OWNER = "SHEPHERD_SCHEDULE_OWNER"
DEFAULT_SCHEDULE_OWNER = "shepherd:schedules"
SCHEDULE_SOURCE = "shepherd.schedule"  # the source of their firings (shepherd.schedules)
# Each pool's rate limit and circuit breaker (shepherd.pool_policy): JSON, pool -> policy.
ENV_POOL_POLICIES = "SHEPHERD_POOL_POLICIES"
# The principals (IAM ARNs, comma-separated) who may act on what every caller shares: pause and
# resume an agent pool, see who paused one. None by default: nobody may, through the API.
ENV_OPERATORS = "SHEPHERD_OPERATORS"
# The user's agent modules, comma-separated (`my_app.agents,my_app.billing:agents`): each is
# imported and its AgentRegistry (`registry`, or the attribute after a colon) taken.
ENV_AGENT_MODULES = "SHEPHERD_AGENT_MODULES"

ENV_PAYLOAD_BUCKET = "SHEPHERD_PAYLOAD_BUCKET"
ENV_PAYLOAD_INLINE_BYTES = "SHEPHERD_PAYLOAD_INLINE_BYTES"
# The supervisor's timing (docs/architecture.md, Supervisor): seconds between sweeps, how long
# one scheduled invocation keeps sweeping, and the queue of its delayed ticks.
ENV_SWEEP_INTERVAL = "SHEPHERD_SWEEP_INTERVAL_SECONDS"
ENV_SWEEP_WINDOW = "SHEPHERD_SWEEP_WINDOW_SECONDS"
ENV_SWEEP_TICKS = "SHEPHERD_SWEEP_TICKS_URL"
# The partitioned supervisor (docs/architecture.md, the supervisor at load): how many groups
# the watch shards are dealt into (one sweep invocation each per tick), and how many looks one
# invocation overlaps.
ENV_SWEEP_GROUPS = "SHEPHERD_SWEEP_GROUPS"
ENV_SWEEP_LOOKS = "SHEPHERD_SWEEP_LOOKS"
# "false": a sweep looks at what is due when it starts only, not ahead at what comes due before
# the next sweep (docs/architecture.md, the supervisor at load).
ENV_SWEEP_LOOK_AHEAD = "SHEPHERD_SWEEP_LOOK_AHEAD"
ENV_TRACING = "SHEPHERD_TRACING"  # "true": Powertools Tracer (X-Ray SDK) in every handler
# Set by Lambda, not by Shepherd: the sandbox's log stream names the agent worker.
ENV_LOG_STREAM = "AWS_LAMBDA_LOG_STREAM_NAME"
# Powertools' own variable: the `service` of logs and the dimension of every engine metric. A
# deployment sets it to a name of its own, so two stacks in one account never share a series.
ENV_SERVICE = "POWERTOOLS_SERVICE_NAME"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def parse_flag(name: str, value: str | bool) -> bool:
    """An on/off environment variable: 1/true/yes/on or 0/false/no/off (or empty)."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name}: '{value}' is not a flag (true/false, 1/0, yes/no, on/off)")


# An owner is an IAM principal ARN (what API callers are identified by).
_PRINCIPAL_ARN = re.compile(r"^arn:aws[\w-]*:(iam|sts)::\d{12}:[\w+=,.@/-]+$")


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    table: Annotated[str, Field(min_length=3, max_length=255)]
    queue_urls: dict[str, str] = {}
    pool_mappings: dict[str, str] = {}
    queue_url_prefix: str | None = None
    pool_function_prefix: str | None = None
    retired_pools: tuple[str, ...] = ()
    event_bus: str | None = None
    definitions_dir: Path
    # Virtual shards of the watch index (1,000 write units a second each); 16 hold about
    # 5,000 starts a second, 256 the design load (docs/benchmarks.md, the scale model).
    watch_shards: Annotated[int, Field(ge=1, le=1024)] = 16
    retention_days: Annotated[int, Field(ge=1, le=3650)] = 30
    # Who owns a workflow a StartWorkflow event starts, by the event's source: an IAM
    # principal ARN, which may then read it through the API. A source not listed owns its
    # workflows itself, as `events:<account>:<source>` (docs/api.md, Events).
    event_owners: dict[str, str] = {}
    # The owner of the workflows schedules start (ENV_SCHEDULE_OWNER): an IAM principal ARN,
    # or a name of the form `<word>:<word>` that no IAM caller can be.
    schedule_owner: Annotated[
        str, Field(pattern=r"^(arn:aws[\w-]*:(iam|sts)::\d{12}:[\w+=,.@/-]+|[\w.-]+:[\w.-]+)$")
    ] = DEFAULT_SCHEDULE_OWNER
    # Who may pause and resume pools (docs/api.md, Authorization): IAM principal ARNs.
    operators: tuple[str, ...] = ()
    # The modules whose agent registries the agent runtime uses (none: a deployment that only
    # schedules and supervises, or whose pools run elsewhere).
    agent_modules: tuple[str, ...] = ()
    # Each pool's rate limit and circuit breaker (docs/architecture.md, Pools that protect).
    pool_policies: dict[str, PoolPolicy] = {}

    @field_validator("pool_policies", mode="before")
    @classmethod
    def _policies(cls, value: Any) -> Any:
        return parse_policies(value, source=ENV_POOL_POLICIES)

    @field_validator("operators", mode="before")
    @classmethod
    def _operator_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("operators")
    @classmethod
    def _operator_arns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arn in value:
            if not _PRINCIPAL_ARN.match(arn):
                raise ValueError(f"{ENV_OPERATORS}: '{arn}' is not an IAM principal ARN")
        return value

    @field_validator("agent_modules", "retired_pools", mode="before")
    @classmethod
    def _module_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("agent_modules")
    @classmethod
    def _module_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for module in value:
            if not AGENT_MODULE.match(module):
                raise ValueError(
                    f"{ENV_AGENT_MODULES}: '{module}' is not a module path (pkg.module[:attr])"
                )
        return value

    # The payload bucket (large payloads: docs/architecture.md, Large payloads), and the size
    # over which a payload goes there instead of into its item.
    payload_bucket: str | None = None
    payload_inline_bytes: Annotated[int, Field(ge=0, le=limits.MAX_PAYLOAD_INLINE_BYTES)] = (
        limits.PAYLOAD_INLINE_BYTES
    )

    # The supervisor: it sweeps every `sweep_interval_seconds` (SHEPHERD_SWEEP_INTERVAL_SECONDS,
    # 5 by default) for `sweep_window_seconds` (SHEPHERD_SWEEP_WINDOW_SECONDS, 0: one sweep) of
    # each scheduled invocation; with `sweep_ticks_url` (SHEPHERD_SWEEP_TICKS_URL, deployed) it
    # sends delayed ticks to that queue instead of sleeping between sweeps.
    sweep_interval_seconds: Annotated[float, Field(gt=0, le=900)] = 5.0
    sweep_window_seconds: Annotated[float, Field(ge=0, le=900)] = 0.0
    sweep_ticks_url: str | None = None
    sweep_groups: Annotated[int, Field(ge=1, le=1024)] = 1
    sweep_looks: Annotated[int, Field(ge=1, le=64)] = 8
    # Whether a sweep also looks ahead: at each entry due before the next sweep, at its due
    # time, in the same invocation (SHEPHERD_SWEEP_LOOK_AHEAD, on by default).
    sweep_look_ahead: bool = True
    # SHEPHERD_TRACING: the Powertools Tracer (X-Ray SDK) in every handler. The handlers decide
    # it at import, before the rest of the settings: `Settings.tracing_from_env`.
    tracing: bool = False
    # The agent runtime's worker id (a step's owner): the Lambda sandbox's log stream
    # (AWS_LAMBDA_LOG_STREAM_NAME, set by Lambda), "agent" outside Lambda.
    worker_id: str = "agent"

    @field_validator("tracing", mode="before")
    @classmethod
    def _tracing_flag(cls, value: Any) -> Any:
        return parse_flag(ENV_TRACING, value) if isinstance(value, str) else value

    @field_validator("sweep_look_ahead", mode="before")
    @classmethod
    def _look_ahead_flag(cls, value: Any) -> Any:
        return parse_flag(ENV_SWEEP_LOOK_AHEAD, value) if isinstance(value, str) else value

    @field_validator("queue_urls", "pool_mappings", "event_owners", mode="before")
    @classmethod
    def _json_map(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"must be a JSON object: {exc}") from exc
        return value

    @field_validator("event_owners")
    @classmethod
    def _principals(cls, value: dict[str, str]) -> dict[str, str]:
        for source, owner in value.items():
            if not source or not _PRINCIPAL_ARN.match(owner):
                raise ValueError(
                    f"{ENV_EVENT_OWNERS}: '{source}' must map to an IAM principal ARN, not "
                    f"'{owner}'"
                )
        return value

    def owner_of(self, source: str) -> str | None:
        """Who owns a workflow a `StartWorkflow` event from `source` starts: the principal
        `event_owners` maps it to, else for schedules' firings `schedule_owner`; None: the
        source is not mapped (the event starts nothing)."""
        owner = self.event_owners.get(source)
        if owner is None and source == SCHEDULE_SOURCE:
            return self.schedule_owner
        return owner

    def queue_urls_for(self, pools: Iterable[str]) -> dict[str, str]:
        """Every queue URL the engine may send to: those listed, and for a deployment's pools
        (`pools`, the retired ones too) the queue URL prefix + the pool's name."""
        urls = dict(self.queue_urls)
        if self.queue_url_prefix:
            for pool in (*pools, *self.retired_pools):
                urls.setdefault(pool, self.queue_url_prefix + pool)
        return urls

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 24 * 3600

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {
            "table": env.get(ENV_TABLE, ""),
            "queue_urls": env.get(ENV_QUEUE_URLS, "{}"),
            "pool_mappings": env.get(ENV_POOL_MAPPINGS, "{}"),
            "event_bus": env.get(ENV_EVENT_BUS) or None,
            "definitions_dir": env.get(ENV_DEFINITIONS_DIR, "statemachines"),
        }
        # Optional variables: field <- variable, read when set (or when set and not empty).
        when_set = {
            "watch_shards": ENV_WATCH_SHARDS,
            "retention_days": ENV_RETENTION_DAYS,
            "sweep_interval_seconds": ENV_SWEEP_INTERVAL,
            "sweep_window_seconds": ENV_SWEEP_WINDOW,
            "sweep_groups": ENV_SWEEP_GROUPS,
            "sweep_looks": ENV_SWEEP_LOOKS,
            "sweep_look_ahead": ENV_SWEEP_LOOK_AHEAD,
            "tracing": ENV_TRACING,
            "worker_id": ENV_LOG_STREAM,
        }
        when_not_empty = {
            "queue_url_prefix": ENV_QUEUE_URL_PREFIX,
            "pool_function_prefix": ENV_POOL_FUNCTION_PREFIX,
            "retired_pools": ENV_RETIRED_POOLS,
            "event_owners": ENV_EVENT_OWNERS,
            "schedule_owner": ENV_SCHEDULE_OWNER,
            "operators": ENV_OPERATORS,
            "agent_modules": ENV_AGENT_MODULES,
            "pool_policies": ENV_POOL_POLICIES,
            "payload_bucket": ENV_PAYLOAD_BUCKET,
            "payload_inline_bytes": ENV_PAYLOAD_INLINE_BYTES,
            "sweep_ticks_url": ENV_SWEEP_TICKS,
        }
        values.update({f: env[name] for f, name in when_set.items() if name in env})
        values.update({f: env[name] for f, name in when_not_empty.items() if env.get(name)})
        return cls.model_validate(values)

    @staticmethod
    def tracing_from_env(environ: Mapping[str, str] | None = None) -> bool:
        """SHEPHERD_TRACING alone, as `from_env` reads it: the handlers decide at import whether
        to load the X-Ray SDK, before the rest of the settings is read (and may be missing)."""
        env = os.environ if environ is None else environ
        return parse_flag(ENV_TRACING, env.get(ENV_TRACING, ""))

    @staticmethod
    def service_from_env(default: str, environ: Mapping[str, str] | None = None) -> str:
        """POWERTOOLS_SERVICE_NAME, read at import by the handlers (their logger and metrics
        exist before the settings): the deployment's own name, `default` where none is set."""
        env = os.environ if environ is None else environ
        return env.get(ENV_SERVICE, "").strip() or default

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces these settings (used by the CDK app and local stack):
        the required variables, then each optional one that differs from its default."""
        env = {
            ENV_TABLE: self.table,
            ENV_DEFINITIONS_DIR: str(self.definitions_dir),
            ENV_WATCH_SHARDS: str(self.watch_shards),
            ENV_RETENTION_DAYS: str(self.retention_days),
        }
        if self.queue_urls or not self.queue_url_prefix:
            env[ENV_QUEUE_URLS] = _json(self.queue_urls)
        inline = self.payload_inline_bytes
        optional = {
            ENV_EVENT_BUS: self.event_bus,
            ENV_PAYLOAD_BUCKET: self.payload_bucket,
            ENV_PAYLOAD_INLINE_BYTES: str(inline) if inline != limits.PAYLOAD_INLINE_BYTES else "",
            ENV_QUEUE_URL_PREFIX: self.queue_url_prefix,
            ENV_POOL_FUNCTION_PREFIX: self.pool_function_prefix,
            ENV_RETIRED_POOLS: ",".join(self.retired_pools),
            ENV_POOL_MAPPINGS: _json(self.pool_mappings) if self.pool_mappings else "",
            ENV_AGENT_MODULES: ",".join(self.agent_modules),
            ENV_EVENT_OWNERS: _json(self.event_owners) if self.event_owners else "",
            ENV_OPERATORS: ",".join(self.operators),
            ENV_SCHEDULE_OWNER: (
                self.schedule_owner if self.schedule_owner != DEFAULT_SCHEDULE_OWNER else ""
            ),
            ENV_POOL_POLICIES: policies_json(self.pool_policies) if self.pool_policies else "",
            ENV_SWEEP_INTERVAL: (
                str(self.sweep_interval_seconds) if self.sweep_interval_seconds != 5.0 else ""
            ),
            ENV_SWEEP_WINDOW: str(self.sweep_window_seconds) if self.sweep_window_seconds else "",
            ENV_SWEEP_TICKS: self.sweep_ticks_url,
            ENV_SWEEP_GROUPS: str(self.sweep_groups) if self.sweep_groups != 1 else "",
            ENV_SWEEP_LOOKS: str(self.sweep_looks) if self.sweep_looks != 8 else "",
            ENV_SWEEP_LOOK_AHEAD: "" if self.sweep_look_ahead else "false",
            ENV_TRACING: "true" if self.tracing else "",
        }
        env.update({name: value for name, value in optional.items() if value})
        return env


def _json(value: Mapping[str, str]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
