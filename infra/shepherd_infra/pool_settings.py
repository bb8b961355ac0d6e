"""A pool's function, beyond what its definitions decide: `Shepherd(pool_settings={...})`.

Defaults (what a pool gets without settings) and limits:

* `memory_mb`: 256 (128..10240).
* `timeout`: the pool's longest step `TimeoutSeconds` + 30 s, 30..900 s; never below that
  default (an attempt must fit in an invocation). The queue follows it (visibility = 6 x the
  function's timeout), and so does the pool's backlog alarm.
* `environment`: none; names Shepherd, Powertools or Lambda set are refused, and the whole
  environment stays within Lambda's 4 KB (checked at synth).
* `layers`: none; after Shepherd's three (Powertools, core, definitions), at most 2 (Lambda
  takes 5).
* `vpc`, `vpc_subnets`, `security_groups`: no VPC. In one, the subnets need a way to DynamoDB,
  SQS and S3 (a NAT gateway or VPC endpoints); the role gets the network interface actions.
* `reserved_concurrency`: none (reserving fails deploys on new accounts); at least 2, and the
  pool's event source never runs more batches at once than it.
* `architecture`: arm64; x86_64 uses Powertools' x86_64 layer.
* `rate_limit`: none. `RateLimit(per_second=..., burst=...)`: claims in the pool take a token
  from a limiter all its invocations share (docs/architecture.md, Pools that protect what they
  call); every function reads it from `SHEPHERD_POOL_POLICIES`, and `GET /pools` shows it.
* `batch_size`: 10 (1..10), the records one invocation takes from the queue: a pool of long
  steps takes fewer, so a whole batch fits in an invocation. Shown in `GET /pools`.
* `max_concurrency`: 10 (2..1,000), the batches the pool's event source runs at once (never
  more than `reserved_concurrency`). Shown in `GET /pools`.
* `circuit_breaker`: none. `CircuitBreaker(failure_ratio=..., minimum_attempts=...,
  window_seconds=..., cooldown_seconds=..., probe_attempts=...)`: the pool pauses itself while
  its downstream fails (docs/architecture.md, the circuit breaker); read the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration, Token, aws_ec2, aws_lambda
from shepherd.pool_policy import (
    MAX_BATCH_SIZE,
    MAX_MAX_CONCURRENCY,
    MIN_MAX_CONCURRENCY,
    CircuitBreaker,
    PoolPolicy,
    RateLimit,
)
from shepherd.topology import LAMBDA_MAX_TIMEOUT

from shepherd_infra import config

# What Lambda sets or reserves, and what Shepherd sets: a pool's environment may not shadow it.
RESERVED_PREFIXES = ("SHEPHERD_", "POWERTOOLS_", "AWS_", "_", "LAMBDA_")
RESERVED_NAMES = frozenset({"LANG", "TZ", "PATH", "LD_LIBRARY_PATH", "PYTHONPATH"})
MAX_EXTRA_LAYERS = 2  # Lambda takes 5 layers; Shepherd's functions use 3
MIN_RESERVED_CONCURRENCY = 2  # an SQS event source's maximum concurrency is at least 2


@dataclass(frozen=True)
class PoolSettings:
    """One pool's function settings; every field left out keeps its default (module doc)."""

    memory_mb: int | None = None
    timeout: Duration | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    layers: Sequence[aws_lambda.ILayerVersion] = ()
    vpc: aws_ec2.IVpc | None = None
    vpc_subnets: aws_ec2.SubnetSelection | None = None
    security_groups: Sequence[aws_ec2.ISecurityGroup] = ()
    reserved_concurrency: int | None = None
    architecture: aws_lambda.Architecture | None = None
    rate_limit: RateLimit | None = None
    circuit_breaker: CircuitBreaker | None = None
    batch_size: int | None = None
    max_concurrency: int | None = None


@dataclass(frozen=True)
class ResolvedPool:
    """A pool's function as it will be deployed: the settings checked, defaults filled in."""

    memory_mb: int
    timeout_seconds: int
    environment: Mapping[str, str]
    layers: Sequence[aws_lambda.ILayerVersion]
    vpc: aws_ec2.IVpc | None
    vpc_subnets: aws_ec2.SubnetSelection | None
    security_groups: Sequence[aws_ec2.ISecurityGroup]
    reserved_concurrency: int | None
    architecture: aws_lambda.Architecture
    policy: PoolPolicy = field(default_factory=PoolPolicy)


def resolve(
    pool: str, settings: PoolSettings | None, *, needed_timeout: int, memory_mb: int | None
) -> ResolvedPool:
    """`settings` checked against what Lambda and the pool need; a clear error otherwise.
    `needed_timeout` is the pool's default timeout (its longest step + the agent's overhead);
    `memory_mb` the older `pool_memory_mb` for this pool, if any."""
    given = settings or PoolSettings()
    where = f"pool_settings['{pool}']"
    if given.memory_mb is not None and memory_mb is not None:
        raise ValueError(f"{where}.memory_mb and pool_memory_mb['{pool}'] both set: keep one")
    memory = given.memory_mb if given.memory_mb is not None else memory_mb
    memory = config.WORKER_MEMORY_MB if memory is None else memory
    low, high = config.LAMBDA_MEMORY_RANGE
    if isinstance(memory, bool) or not isinstance(memory, int) or not low <= memory <= high:
        raise ValueError(f"{where}.memory_mb must be a whole number of MB, {low}..{high}")
    timeout = needed_timeout
    if given.timeout is not None:
        timeout = int(given.timeout.to_seconds())
        if not needed_timeout <= timeout <= LAMBDA_MAX_TIMEOUT:
            raise ValueError(
                f"{where}.timeout is {timeout} s: it must be {needed_timeout}..."
                f"{LAMBDA_MAX_TIMEOUT} s (the pool's longest TimeoutSeconds "
                "plus the agent's overhead, up to Lambda's 15 minutes); a longer task is a "
                "callback step"
            )
    shadowed = sorted(
        name
        for name in given.environment
        if name.startswith(RESERVED_PREFIXES) or name in RESERVED_NAMES
    )
    if shadowed:
        raise ValueError(
            f"{where}.environment sets {shadowed}: Shepherd, Powertools or Lambda set those; "
            "use names of your own"
        )
    if len(given.layers) > MAX_EXTRA_LAYERS:
        raise ValueError(
            f"{where}.layers has {len(given.layers)}: Lambda takes 5 layers and Shepherd's "
            f"functions use 3, so at most {MAX_EXTRA_LAYERS}; vendor the rest into the pool's "
            "AgentCode"
        )
    reserved = given.reserved_concurrency
    if (
        reserved is not None
        and not Token.is_unresolved(reserved)
        and reserved < MIN_RESERVED_CONCURRENCY
    ):
        raise ValueError(
            f"{where}.reserved_concurrency is {reserved}: at least "
            f"{MIN_RESERVED_CONCURRENCY} (an SQS event source runs 2 at least); to stop a pool, "
            "pause it (POST /pools/{pool}/pause)"
        )
    if (given.vpc_subnets is not None or given.security_groups) and given.vpc is None:
        raise ValueError(f"{where}: vpc_subnets and security_groups need vpc")
    return ResolvedPool(
        memory_mb=memory,
        timeout_seconds=timeout,
        environment=dict(given.environment),
        layers=list(given.layers),
        vpc=given.vpc,
        vpc_subnets=given.vpc_subnets,
        security_groups=list(given.security_groups),
        reserved_concurrency=reserved,
        architecture=given.architecture or config.ARCHITECTURE,
        policy=_policy(where, given),
    )


def _policy(where: str, given: PoolSettings) -> PoolPolicy:
    """What every function reads of the pool (SHEPHERD_POOL_POLICIES), checked."""
    if given.rate_limit is not None and not isinstance(given.rate_limit, RateLimit):
        raise ValueError(f"{where}.rate_limit must be a RateLimit(per_second=..., burst=...)")
    if given.circuit_breaker is not None and not isinstance(given.circuit_breaker, CircuitBreaker):
        raise ValueError(f"{where}.circuit_breaker must be a CircuitBreaker(...)")
    for name, value, low, high in (
        ("batch_size", given.batch_size, 1, MAX_BATCH_SIZE),
        ("max_concurrency", given.max_concurrency, MIN_MAX_CONCURRENCY, MAX_MAX_CONCURRENCY),
    ):
        if value is not None and (isinstance(value, bool) or not low <= value <= high):
            raise ValueError(
                f"{where}.{name} is {value}: it must be a whole number {low}..{high} (the SQS "
                "event source mapping's limits)"
            )
    return PoolPolicy(
        rate_limit=given.rate_limit,
        circuit_breaker=given.circuit_breaker,
        batch_size=given.batch_size,
        max_concurrency=given.max_concurrency,
    )
