"""Named deployment sizes (`Shepherd(size=...)`, context `-c size=design_load`).

One setting names everything a deployment's load decides outside the engine's code: the watch
index's shards and the supervisor's sweep groups, every pool's event source concurrency, the
table's throughput (the on-demand maximum and the warm throughput set on the table and on each
index), the API stage's throttle, and the AWS quotas the stack cannot set but needs (what to
ask AWS to raise: docs/architecture.md, "Deploying for the design load"). `make scale` judges its
runs against exactly these values (tools/shepherd_bench/scale/model.py reads this file), so the
model and the stack cannot drift apart.

Standard library only: the scale model loads this file by its path, without the CDK (importing
`shepherd_infra` starts the CDK's jsii runtime).
"""

from __future__ import annotations

from dataclasses import dataclass

# AWS's defaults (per account and Region): DynamoDB's on-demand table-level throughput quota
# (read and write request units a second, for a table and for each of its indexes alike), API
# Gateway's account throttle (rate and burst) and Lambda's concurrent executions.
DEFAULT_TABLE_UNITS = 40_000
DEFAULT_API_RATE = 10_000
DEFAULT_API_BURST = 5_000
DEFAULT_LAMBDA_CONCURRENCY = 1_000
# The watch index's shards when nothing says otherwise (shepherd.settings.Settings'
# watch_shards default; tests/infra check the two agree).
DEFAULT_WATCH_SHARDS = 16


@dataclass(frozen=True)
class Quotas:
    """AWS quotas a stack cannot set: the values this size needs, to ask AWS for (Service
    Quotas) before deploying it. Each at AWS's default means nothing to ask."""

    table_read_units: int = DEFAULT_TABLE_UNITS  # DynamoDB "Table-level read throughput limit"
    table_write_units: int = DEFAULT_TABLE_UNITS  # DynamoDB "Table-level write throughput limit"
    api_rate: int = DEFAULT_API_RATE  # API Gateway "Throttle rate" (requests a second)
    api_burst: int = DEFAULT_API_BURST  # API Gateway "Throttle burst rate"
    lambda_concurrency: int = DEFAULT_LAMBDA_CONCURRENCY  # Lambda "Concurrent executions"

    def to_raise(self) -> dict[str, tuple[int, int]]:
        """{quota: (AWS's default, the value needed)} for each quota above its default."""
        defaults = Quotas()
        out = {}
        for name, title in QUOTA_TITLES.items():
            have, need = getattr(defaults, name), getattr(self, name)
            if need > have:
                out[title] = (have, need)
        return out


QUOTA_TITLES = {
    "table_read_units": "DynamoDB: Table-level read throughput limit (on-demand RRU/s)",
    "table_write_units": "DynamoDB: Table-level write throughput limit (on-demand WRU/s)",
    "api_rate": "API Gateway: Throttle rate (requests/s per account and Region)",
    "api_burst": "API Gateway: Throttle burst rate",
    "lambda_concurrency": "Lambda: Concurrent executions",
}


@dataclass(frozen=True)
class Size:
    """A deployment's size. `table_max_*` is the table's (and each index's) on-demand maximum
    (None: none set, bounded by the table-level quota); `table_warm_*` its warm throughput
    (None: DynamoDB's, 4,000 write and 12,000 read units a second for a new table, grown with
    use). `pool_max_concurrency` is every pool's event source `MaximumConcurrency` unless its
    `PoolSettings` sets one (None: each pool's own, 10)."""

    name: str
    watch_shards: int = DEFAULT_WATCH_SHARDS
    sweep_groups: int = 1
    pool_max_concurrency: int | None = None
    api_rate_limit: float = 100.0
    api_burst_limit: int = 200
    table_max_read_units: int | None = None
    table_max_write_units: int | None = None
    table_warm_read_units: int | None = None
    table_warm_write_units: int | None = None
    quotas: Quotas = Quotas()

    def __post_init__(self) -> None:
        q = self.quotas
        for what, value, quota in (
            ("table_max_read_units", self.table_max_read_units, q.table_read_units),
            ("table_max_write_units", self.table_max_write_units, q.table_write_units),
            ("table_warm_read_units", self.table_warm_read_units, q.table_read_units),
            ("table_warm_write_units", self.table_warm_write_units, q.table_write_units),
        ):
            if value is not None and not 1 <= value <= quota:
                raise ValueError(
                    f"size {self.name!r}: {what} is {value}: at most the table-level quota "
                    f"it asks for ({quota:,})"
                )
        if not 0 < self.api_rate_limit <= q.api_rate or not 0 < self.api_burst_limit <= q.api_burst:
            raise ValueError(
                f"size {self.name!r}: the API stage's throttle ({self.api_rate_limit}/s, burst "
                f"{self.api_burst_limit}) must be within the account's ({q.api_rate}/s, burst "
                f"{q.api_burst})"
            )

    @property
    def table_read_units(self) -> int:
        """What the table (and each index) can take a second: its maximum, else the quota."""
        return self.table_max_read_units or self.quotas.table_read_units

    @property
    def table_write_units(self) -> int:
        return self.table_max_write_units or self.quotas.table_write_units


# What the stack deploys when nothing is said: sized for a new account.
DEFAULT = Size("default")

# The design load (DESIGN.md invariant 10: 1,000,000 open workflows, 100,000 steps running,
# 5,000 starts a second from one caller), as `make scale` measures it: 256 watch shards in 128
# sweep groups (32 groups cannot keep up with the looks at 256 MB), every pool's event source at
# its largest concurrency, the table's units a second with room over the model's peaks (about
# 120,000 write and 160,000 read units at the table, 70,000 write units at the watch index),
# the API's starts and callbacks (about 18,000 requests a second) under its stage throttle.
DESIGN_LOAD = Size(
    "design_load",
    watch_shards=256,
    sweep_groups=128,
    pool_max_concurrency=1000,
    api_rate_limit=25_000.0,
    api_burst_limit=10_000,
    table_max_read_units=250_000,
    table_max_write_units=200_000,
    table_warm_read_units=250_000,
    table_warm_write_units=200_000,
    quotas=Quotas(
        table_read_units=250_000,
        table_write_units=200_000,
        api_rate=25_000,
        api_burst=10_000,
        lambda_concurrency=10_000,
    ),
)

SIZES = {size.name: size for size in (DEFAULT, DESIGN_LOAD)}


def size_named(name: str | None) -> Size:
    """The size a context value names (None or empty: the default)."""
    if not name:
        return DEFAULT
    found = SIZES.get(str(name))
    if found is None:
        raise ValueError(f"unknown size {name!r}: one of {sorted(SIZES)}")
    return found
