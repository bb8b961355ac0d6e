"""The table's indexes, staged: an upgrade in place changes one index per deployment.

DynamoDB creates or deletes one global secondary index per `UpdateTable`, and cannot change an
existing index's key schema or projection at all (CloudFormation: "Cannot update GSI's
properties other than Provisioned Throughput and Contributor Insights Specification"). The
previous release's table (`PREVIOUS`: `watch` and `by_owner` projecting four attributes) and
this release's (`TABLE.indexes`) differ by five new indexes and one changed projection, so a
stack deployed from the previous release reaches this layout in seven updates (`STAGES`), each
one index created or deleted. The construct deploys the layout of the stage it is given
(`Shepherd(table_stage=...)`, context `table_stage`), and the final layout by default, so a
new stack is created whole; `shepherd upgrade` finds the deployed table's stage and deploys
the next ones in turn (docs/upgrading.md). Only the table's indexes are staged: the rest of
the stack, the functions included, is this release's from the first stage on, and tolerates
the indexes not there yet (docs/upgrading.md, In-flight work).

Pure data: no CDK import, so the CLI plans an upgrade without synthesizing anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shepherd.topology import TABLE, IndexSpec

CTX_TABLE_STAGE = "table_stage"

# The list index as the previous release deployed it (before the list indexes were sharded,
# docs/architecture.md, The list indexes): same name and keys, a projection of four attributes.
PREVIOUS_LIST_INDEX = IndexSpec(
    "by_owner",
    "list_pk",
    "list_sk",
    "S",
    "INCLUDE",
    ("wf_type", "status", "created_at", "finished_at"),
)
PREVIOUS: tuple[IndexSpec, ...] = (TABLE.watch_index, PREVIOUS_LIST_INDEX)


@dataclass(frozen=True)
class TableStage:
    """One deployment of an upgrade: its number (context `table_stage`), what it changes and
    the indexes the table has once it is deployed."""

    number: int
    change: str
    indexes: tuple[IndexSpec, ...]


def _stages() -> tuple[TableStage, ...]:
    added: list[IndexSpec] = list(PREVIOUS)
    stages: list[TableStage] = []
    # The new indexes first, while the previous `by_owner` still serves unfiltered lists; the
    # projection change last, a delete and a create of the same name in two updates.
    for index in (TABLE.status_index, TABLE.type_index, TABLE.type_status_index, TABLE.inbox_index):
        added.append(index)
        stages.append(TableStage(len(stages) + 1, f"create index {index.name}", tuple(added)))
    without_list = tuple(i for i in added if i.name != TABLE.list_index.name)
    stages.append(
        TableStage(
            len(stages) + 1,
            f"delete index {TABLE.list_index.name} (its {PREVIOUS_LIST_INDEX.projection} "
            "projection cannot be changed in place)",
            without_list,
        )
    )
    with_list = (*without_list, TABLE.list_index)
    stages.append(
        TableStage(
            len(stages) + 1,
            f"create index {TABLE.list_index.name} ({TABLE.list_index.projection})",
            with_list,
        )
    )
    # Added after the release the six stages above led to (issue 37): last, so a table at any
    # of those stages keeps its number.
    stages.append(
        TableStage(len(stages) + 1, f"create index {TABLE.key_index.name}", TABLE.indexes)
    )
    return tuple(stages)


STAGES: tuple[TableStage, ...] = _stages()
FINAL = STAGES[-1].number


def indexes_at(stage: int | None) -> tuple[IndexSpec, ...]:
    """The indexes the construct deploys at `stage` (None: the final layout; 0: the previous
    release's)."""
    if stage is None or stage == FINAL:
        return TABLE.indexes
    if stage == 0:
        return PREVIOUS
    for candidate in STAGES:
        if candidate.number == stage:
            return candidate.indexes
    raise ValueError(f"table_stage {stage!r}: a stage is 1 to {FINAL} (docs/upgrading.md)")


def parse_stage(value: Any) -> int | None:
    """Context `table_stage` (a number, or unset/`final` for the final layout)."""
    if value is None or value in {"", "final"}:
        return None
    try:
        stage = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"context table_stage={value!r}: 1 to {FINAL}, or final") from None
    if not 1 <= stage <= FINAL:
        raise ValueError(f"context table_stage={value!r}: 1 to {FINAL}, or final")
    return stage


def layout(indexes: Iterable[IndexSpec]) -> dict[str, tuple[Any, ...]]:
    """What DynamoDB compares of each index: its keys and its projection, by name."""
    return {
        i.name: (
            i.partition_key,
            i.sort_key,
            i.sort_key_type,
            i.projection,
            tuple(sorted(i.non_key_attributes)),
        )
        for i in indexes
    }


def described_layout(table: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """The same, from a DescribeTable's `Table` (the layout deployed)."""
    types = {a["AttributeName"]: a["AttributeType"] for a in table.get("AttributeDefinitions", [])}
    result: dict[str, tuple[Any, ...]] = {}
    for index in table.get("GlobalSecondaryIndexes", []):
        keys = {k["KeyType"]: k["AttributeName"] for k in index["KeySchema"]}
        projection = index.get("Projection", {})
        result[index["IndexName"]] = (
            keys["HASH"],
            keys.get("RANGE"),
            types.get(keys.get("RANGE", ""), ""),
            projection.get("ProjectionType", "ALL"),
            tuple(sorted(projection.get("NonKeyAttributes", []))),
        )
    return result


def stage_of(deployed: Mapping[str, tuple[Any, ...]]) -> int | None:
    """The stage whose layout is deployed (0: the previous release's, FINAL: this one's), or
    None when it is none of them (changed by hand: nothing is deployed over it)."""
    if deployed == layout(PREVIOUS):
        return 0
    for stage in reversed(STAGES):
        if deployed == layout(stage.indexes):
            return stage.number
    return None


def remaining(deployed: Mapping[str, tuple[Any, ...]]) -> tuple[TableStage, ...]:
    """The stages still to deploy, in order (none when the table is already final)."""
    current = stage_of(deployed)
    if current is None:
        raise ValueError(
            "the deployed table's indexes match no stage of an upgrade from the previous "
            f"release: {sorted(deployed)} (docs/upgrading.md)"
        )
    return tuple(s for s in STAGES if s.number > current)


__all__ = [
    "CTX_TABLE_STAGE",
    "FINAL",
    "PREVIOUS",
    "STAGES",
    "TableStage",
    "described_layout",
    "indexes_at",
    "layout",
    "parse_stage",
    "remaining",
    "stage_of",
]
