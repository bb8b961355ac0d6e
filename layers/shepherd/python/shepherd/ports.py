"""The ports the core talks through. Adapters implement them for AWS; `shepherd.testing`
implements them in memory, and both pass the same contract tests.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from shepherd.conditions import Cond, Item, Update
from shepherd.model import DomainEvent, OutgoingTask
from shepherd.topology import IndexSpec

MAX_BATCH_GET = 100  # keys in one BatchGetItem (DynamoDB's limit)


@dataclass(frozen=True)
class DueEntry:
    workflow_id: str
    due_at: int


@dataclass(frozen=True)
class DuePage:
    entries: list[DueEntry]
    cursor: dict[str, object] | None
    items_read: int


@dataclass(frozen=True)
class ListPage:
    items: list[Item]
    cursor: dict[str, object] | None


class Store(Protocol):
    """The state store: one table, every write conditional.

    Writes that lose their condition raise `ConditionFailed` carrying the item as it is now
    (from ReturnValuesOnConditionCheckFailure), never a second read.
    """

    def create(self, items: Sequence[Item]) -> None:
        """Put all items in one transaction; each must not exist yet.

        Raises TransactionConflict with the index and current value of an item that exists.
        """
        ...

    def put_new(self, item: Item) -> None:
        """Put one item that must not exist yet; raises ConditionFailed(current)."""
        ...

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        """Apply several conditional updates atomically (distinct items).

        Raises TransactionConflict with the index and current value of the item whose
        condition failed; nothing is written then.
        """
        ...

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        """Apply an update if the condition holds; returns the new item."""
        ...

    def load(self, pk: str) -> list[Item]:
        """Every item of a partition, read consistently."""
        ...

    def get(self, pk: str, sk: str) -> Item | None:
        """One item, read consistently."""
        ...

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        """The items that exist among `keys` (at most 100), read consistently, in any order:
        what a claim or an advance needs, never a whole workflow (one BatchGetItem)."""
        ...

    def query_due(
        self, shard: str, until_ms: int, limit: int, cursor: dict[str, object] | None
    ) -> DuePage:
        """Watch-index entries of a shard with due_at <= until_ms, earliest first.

        The index is eventually consistent: callers re-read before acting.
        """
        ...

    def query_range(
        self,
        index: IndexSpec,
        partition: str,
        low: str,
        high: str,
        *,
        limit: int,
        newest_first: bool,
        cursor: dict[str, object] | None,
    ) -> ListPage:
        """Keys of one list-index partition whose sort key lies in [low, high], in sort-key
        order (descending when `newest_first`), at most `limit`; eventually consistent."""
        ...

    def query_after(self, pk: str, after_sk: str, limit: int) -> ListPage:
        """Items of one table partition whose sort key sorts after `after_sk`, in sort-key
        order, at most `limit` (a workflow's history, a map's item units, page by page);
        consistent: every write made before the call is seen."""
        ...

    def count_range(self, index: IndexSpec, partition: str, low: str, high: str, cap: int) -> int:
        """How many entries of one list-index partition lie in [low, high], counting no
        further once `cap` is reached (the result is then at least `cap`)."""
        ...


@dataclass(frozen=True)
class Backlog:
    """A pool's queue, approximately (SQS's own counts)."""

    visible: int
    in_flight: int
    delayed: int


class TaskQueue(Protocol):
    """Sends task messages to agent pools. Best effort: the supervisor recovers lost sends."""

    def send(self, tasks: Sequence[OutgoingTask]) -> None:
        """Raises DeliveryError if some could not be sent."""
        ...

    def backlog(self, pool: str) -> Backlog | None:
        """The pool's queue depth, or None if it cannot be read (no queue configured)."""
        ...

    def has(self, pool: str) -> bool:
        """Whether this deployment has a queue for the pool (a pool a definition version still
        names may have been removed: its tasks can never be delivered)."""
        ...


class EventPublisher(Protocol):
    def publish(self, events: Sequence[DomainEvent]) -> None:
        """Raises DeliveryError if some could not be published."""
        ...


class IdSource(Protocol):
    def new_id(self) -> str: ...


class NullEvents:
    """An EventPublisher that drops everything (no bus configured)."""

    def publish(self, events: Sequence[DomainEvent]) -> None:
        return None
