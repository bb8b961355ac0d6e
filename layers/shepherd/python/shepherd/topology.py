"""Resource wiring derived from the definitions: one source for the CDK app, the local stack
and the runtime settings. Pure data, no I/O.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the table's shape needs no definition model (the stream relay's import)
    from shepherd.definitions import Definition

# Lambda may run 900 s; an agent needs a few seconds around the user function to claim and record.
LAMBDA_MAX_TIMEOUT = 900
AGENT_OVERHEAD_SECONDS = 30
MIN_AGENT_TIMEOUT = 30
VISIBILITY_FACTOR = 6  # AWS: queue visibility timeout >= 6 x function timeout
MAX_RECEIVE_COUNT = 5  # AWS guidance for Lambda consumers: >= 5
DEFAULT_BATCH_SIZE = 10
# Stream records per event relay invocation (its event source mapping), at most.
RELAY_BATCH_SIZE = 100
DEFAULT_MAX_CONCURRENCY = 10


@dataclass(frozen=True)
class PoolSpec:
    """One agent pool: a queue, its DLQ and one Lambda function."""

    name: str
    agents: frozenset[str]
    longest_task_seconds: int

    @property
    def function_timeout_seconds(self) -> int:
        """Long enough for the longest task; tasks beyond Lambda's limit must be callbacks."""
        wanted = self.longest_task_seconds + AGENT_OVERHEAD_SECONDS
        return max(MIN_AGENT_TIMEOUT, min(LAMBDA_MAX_TIMEOUT, wanted))

    @property
    def visibility_timeout_seconds(self) -> int:
        return VISIBILITY_FACTOR * self.function_timeout_seconds

    @property
    def max_receive_count(self) -> int:
        return MAX_RECEIVE_COUNT

    @property
    def batch_size(self) -> int:
        return DEFAULT_BATCH_SIZE

    @property
    def max_concurrency(self) -> int:
        return DEFAULT_MAX_CONCURRENCY

    @property
    def queue_name(self) -> str:
        return f"shepherd-{self.name}"

    @property
    def dlq_name(self) -> str:
        return f"shepherd-{self.name}-dlq"


def pools(definitions: Mapping[str, Definition]) -> dict[str, PoolSpec]:
    """Every pool any step or compensation names, with what it must run."""
    agents: dict[str, set[str]] = {}
    longest: dict[str, int] = {}
    for definition in definitions.values():
        for task in definition.tasks:
            if not task.pool:  # a child-workflow step runs no agent (shepherd.fanout)
                continue
            agents.setdefault(task.pool, set()).add(task.agent)
            longest[task.pool] = max(longest.get(task.pool, 0), task.timeout_seconds)
    return {name: PoolSpec(name, frozenset(agents[name]), longest[name]) for name in sorted(agents)}


@dataclass(frozen=True)
class IndexSpec:
    name: str
    partition_key: str
    sort_key: str
    sort_key_type: Literal["S", "N"]
    projection: Literal["KEYS_ONLY", "INCLUDE", "ALL"]
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSpec:
    partition_key: str = "pk"
    sort_key: str = "sk"
    ttl_attribute: str = "expires_at"
    watch_index: IndexSpec = IndexSpec("watch", "watch_shard", "due_at", "N", "KEYS_ONLY")
    # The list indexes (docs/architecture.md, The list indexes): one sharded partition per
    # caller, one keys-only index per filter, each sort key ending in <created>#<id>.
    list_index: IndexSpec = IndexSpec("by_owner", "list_pk", "list_sk", "S", "KEYS_ONLY")
    status_index: IndexSpec = IndexSpec("by_status", "list_pk", "status_sk", "S", "KEYS_ONLY")
    type_index: IndexSpec = IndexSpec("by_type", "list_pk", "type_sk", "S", "KEYS_ONLY")
    type_status_index: IndexSpec = IndexSpec(
        "by_type_status", "list_pk", "type_status_sk", "S", "KEYS_ONLY"
    )

    # The approval inbox (docs/architecture.md): sparse, only pending approvals' inbox items,
    # projecting what a row of `GET /approvals` shows.
    inbox_index: IndexSpec = IndexSpec(
        "inbox",
        "inbox_pk",
        "inbox_sk",
        "S",
        "INCLUDE",
        ("wf_type", "step", "requested_at", "approval_due_at"),
    )

    # Business keys (docs/architecture.md, Business keys): sparse, only the tag and match items
    # (keys.py, `K#...`), keys only (the entry's `pk` names its workflow).
    key_index: IndexSpec = IndexSpec("by_key", "key_pk", "key_sk", "S", "KEYS_ONLY")

    @property
    def list_indexes(self) -> tuple[IndexSpec, ...]:
        return (self.list_index, self.status_index, self.type_index, self.type_status_index)

    @property
    def indexes(self) -> tuple[IndexSpec, ...]:
        return (self.watch_index, *self.list_indexes, self.inbox_index, self.key_index)


TABLE = TableSpec()
