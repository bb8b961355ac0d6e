"""What a pool promises the systems its agents call: a rate limit and a circuit breaker.

Declared per pool in the construct's `pool_settings` (or the local stack's settings) and
handed to every function as one variable, `SHEPHERD_POOL_POLICIES` (JSON: pool -> policy), so
the agents, the supervisor and `GET /pools` read the same thing (docs/architecture.md, Pools
that protect what they call). Field names follow the definitions' style (PascalCase).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Caps, enforced when the policy is read (docs/architecture.md): a limit above this would need
# more than 400 limiter shards; a burst above it would let one pool flood its service anyway.
MAX_PER_SECOND = 100_000
MAX_BURST = 100_000
MAX_WINDOW_SECONDS = 86_400
MAX_COOLDOWN_SECONDS = 86_400
MAX_PROBE_ATTEMPTS = 100


class _Policy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class RateLimit(_Policy):
    """At most `PerSecond` claims a second in the pool, `Burst` at once after a quiet spell."""

    per_second: Annotated[float, Field(alias="PerSecond", gt=0, le=MAX_PER_SECOND)]
    burst: Annotated[int, Field(alias="Burst", ge=1, le=MAX_BURST)] = 1


class CircuitBreaker(_Policy):
    """Opens (pauses the pool) when, over `WindowSeconds`, at least `MinimumAttempts` attempts
    ended and the share that failed retryably reaches `FailureRatio`; after `CooldownSeconds`
    lets `ProbeAttempts` through, closing if they succeed."""

    failure_ratio: Annotated[float, Field(alias="FailureRatio", gt=0, le=1)]
    minimum_attempts: Annotated[int, Field(alias="MinimumAttempts", ge=1, le=1_000_000)]
    window_seconds: Annotated[int, Field(alias="WindowSeconds", ge=10, le=MAX_WINDOW_SECONDS)]
    cooldown_seconds: Annotated[int, Field(alias="CooldownSeconds", ge=1, le=MAX_COOLDOWN_SECONDS)]
    probe_attempts: Annotated[int, Field(alias="ProbeAttempts", ge=1, le=MAX_PROBE_ATTEMPTS)] = 1


# A pool's SQS event source mapping (Lambda's limits): records per invocation, and how many
# batches run at once (issue 23.7: a pool of long steps takes fewer records per invocation; a
# pool before a fragile service fewer at once).
MAX_BATCH_SIZE = 10
MIN_MAX_CONCURRENCY = 2
MAX_MAX_CONCURRENCY = 1000


class PoolPolicy(_Policy):
    rate_limit: Annotated[RateLimit | None, Field(alias="RateLimit")] = None
    circuit_breaker: Annotated[CircuitBreaker | None, Field(alias="CircuitBreaker")] = None
    # None: the defaults (shepherd.topology, 10 and 10).
    batch_size: Annotated[int | None, Field(alias="BatchSize", ge=1, le=MAX_BATCH_SIZE)] = None
    max_concurrency: Annotated[
        int | None,
        Field(alias="MaxConcurrency", ge=MIN_MAX_CONCURRENCY, le=MAX_MAX_CONCURRENCY),
    ] = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_policies(value: str | Mapping[str, Any], *, source: str) -> dict[str, PoolPolicy]:
    """Every pool's policy from JSON text or a mapping; a ValueError naming `source`, the pool
    and the field otherwise."""
    raw: Any = value
    if isinstance(value, str):
        try:
            raw = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ValueError(f"{source}: not JSON: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise ValueError(f"{source}: must be an object of pool -> policy")
    policies: dict[str, PoolPolicy] = {}
    for pool, body in raw.items():
        if isinstance(body, PoolPolicy):
            policies[str(pool)] = body
            continue
        try:
            policies[str(pool)] = PoolPolicy.model_validate(body)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise ValueError(f"{source}: pool '{pool}': {where}: {problem['msg']}") from exc
    return policies


def policies_json(policies: Mapping[str, PoolPolicy]) -> str:
    """The variable's value: compact, sorted, only what is set."""
    body = {pool: policies[pool].to_json() for pool in sorted(policies)}
    return json.dumps(body, separators=(",", ":"), sort_keys=True)
