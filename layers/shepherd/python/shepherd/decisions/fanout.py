"""Map steps and child workflows: the pure decisions (docs/architecture.md, "Map steps and
child workflows").

A map's counters and its window of in-flight items live on the map step's unit, flattened
into top-level attributes (`m_*` counters, `w_<index> = entered_at` per item in flight), so
each write here is one conditional `UpdateItem` of the condition algebra, with no nested path.

**Stripes, not a cursor.** The window has `MaxConcurrency` (C) stripes; item `i` belongs to
stripe `i mod C`, and the item that follows it is `i + C`. Opening the map puts items
`0..C-1` in the window; the write that accounts item `i` removes `w_i` and, while the map
runs, adds `w_{i+C}`. So no two accountings contend (each is conditioned on its own window
entry, counters move by `ADD`), no accounting reads anything first (the write returns the new
counters), and at most one item per stripe, C in all, is ever in flight. The price: a stripe
whose item is slow holds back only its own successors, so the tail of a map can run with
fewer than C items in flight.

**Exactly once.** An item is counted only by the write that removes its window entry, and
that entry is removed once. The map's verdict is a second conditional write (`m_status`
RUNNING to SUCCEEDED or FAILED) by whoever sees the counters decide it; a process that dies
before it leaves the decision to the next look, which sees the same counters.

Pure: no I/O. Builds `transitions.Write`s; the executor applies them.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shepherd import limits
from shepherd.conditions import Cond, Eq, Exists, Item, Lt, Missing, Update, all_of
from shepherd.decisions.transitions import Write
from shepherd.fanout import MapSpec
from shepherd.keys import (
    COMP_PREFIX,
    Kind,
    map_item_key,
    map_item_of,
    map_shard_count,
    map_shard_of,
    map_shard_sk,
)
from shepherd.model import (
    CANCELLED_COUNT,
    COMPENSATED_COUNT,
    DONE,
    FAILED_COUNT,
    MAP_STATUS,
    OPENED,
    SHARDS,
    STRIDE,
    SUCCEEDED_COUNT,
    TOTAL,
    WINDOW,
    MapState,
    Verdict,
)

# The attribute names (and MapState) live with the records (shepherd.model); WINDOW, TOTAL,
# STRIDE and OPENED are imported from there under their own names.
SUCCEEDED = SUCCEEDED_COUNT
FAILED = FAILED_COUNT
CANCELLED = CANCELLED_COUNT
COMPENSATED = COMPENSATED_COUNT
STATUS = MAP_STATUS
# Window entries one write may enter: DynamoDB caps an expression at 4 KB, and each entry is
# about 15 characters of it ("#n12 = :v12, "); 128 leave room for the rest.
OPEN_CHUNK = 128

Outcome = Literal["succeeded", "failed", "cancelled"]
__all__ = ["OPENED", "STRIDE", "TOTAL", "WINDOW", "MapState", "Verdict"]
EXCEEDED = "States.ExceedToleratedFailureThreshold"  # the ASL error name
_COUNTER = {"succeeded": SUCCEEDED, "failed": FAILED, "cancelled": CANCELLED}


def exceeded(failed: int, total: int, spec: MapSpec) -> bool:
    """Past the tolerance (ASL: a tolerance left out does not apply; neither: none)."""
    count, percentage = spec.tolerated_failure_count, spec.tolerated_failure_percentage
    if count is None and percentage is None:
        return failed > 0
    over_count = count is not None and failed > count
    over_percentage = percentage is not None and failed * 100 > percentage * total
    return over_count or over_percentage


def tolerated(total: int, spec: MapSpec | None) -> int:
    """The most failed items a map of `total` items may have and still run (`exceeded` is
    false for it, true for one more); a map's compensation (`spec` None) tolerates none."""
    if spec is None:
        return 0
    count, percentage = spec.tolerated_failure_count, spec.tolerated_failure_percentage
    if count is None and percentage is None:
        return 0
    most = total if count is None else min(count, total)
    if percentage is not None:
        most = min(most, math.floor(percentage * total / 100))
    while most > 0 and exceeded(most, total, spec):  # a float's rounding: a step at most
        most -= 1
    while most < total and not exceeded(most + 1, total, spec):
        most += 1
    return most


def verdict(state: MapState, spec: MapSpec) -> Verdict:
    """FAILED as soon as the failures pass the tolerance (without waiting for the window);
    SUCCEEDED when every item has been accounted within it; RUNNING otherwise."""
    if state.status != "RUNNING":
        return state.status
    if exceeded(state.failed, state.total, spec):
        return "FAILED"
    if state.accounted == state.total:
        return "SUCCEEDED"
    return "RUNNING"


@dataclass(frozen=True)
class Opened:
    write: Write
    entered: tuple[int, ...]  # send these items' messages after the write lands


def entry_value(now: int, index: int | None) -> Any:
    """A window entry: when it entered, and for a map compensation's window (over positions
    in its order) the item it undoes, so a look needs no order read."""
    return now if index is None else [now, index]


def open_values(
    total: int,
    stride: int,
    now: int,
    index_of: Callable[[int], int] | None = None,
    *,
    sharded: bool = True,
) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The attributes that open a map (counters, the stride, the first chunk of its first
    window) and the positions that chunk enters. An empty map has succeeded. `sharded`
    (the engine's): the unit holds the counters' frame and K (`m_shards`), and the first
    window is entered by creating its shards (`open_shard`), so none enters here."""
    if not sharded:  # the window and the counters on the unit (maps opened before shards)
        entered = tuple(range(min(total, stride, OPEN_CHUNK)))
        return {
            OPENED: len(entered),
            TOTAL: total,
            STRIDE: stride,
            SUCCEEDED: 0,
            FAILED: 0,
            CANCELLED: 0,
            COMPENSATED: 0,
            STATUS: "SUCCEEDED" if total == 0 else "RUNNING",
            **{WINDOW + str(i): entry_value(now, index_of and index_of(i)) for i in entered},
        }, entered
    values: dict[str, Any] = {
        TOTAL: total,
        STRIDE: stride,
        SHARDS: map_shard_count(stride),
        COMPENSATED: 0,
        STATUS: "SUCCEEDED" if total == 0 else "RUNNING",
    }
    return values, ()


def shard_key(key: tuple[str, str], shard: int) -> tuple[str, str]:
    """Window shard `shard` of the map whose unit is `key` (same partition)."""
    pk, sk = key
    kind: Kind = "compensation" if sk.startswith(COMP_PREFIX) else "step"
    return pk, map_shard_sk(kind, sk[2:], shard)


def shard_stripes(state: MapState, shard: int) -> tuple[int, ...]:
    """The first window's positions (stripes) whose entries shard `shard` holds."""
    return tuple(j for j in range(min(state.total, state.stride)) if j % state.shards == shard)


def unit_key(key: tuple[str, str], state: MapState, position: int) -> tuple[str, str]:
    """The item that holds `position`'s window entry: its shard (the unit, unsharded)."""
    if not state.shards:
        return key
    return shard_key(key, map_shard_of(position, state.stride, state.shards))


def open_map(key: tuple[str, str], total: int, spec: MapSpec, now: int) -> Opened:
    """The write that opens a map over `total` items with its window on its unit (the map
    simulator's protocol model, and maps opened before window shards): counters, the stride,
    and the first window's first `OPEN_CHUNK` stripes (`open_more` enters the rest).
    Conditioned on the map not being open, so two openers (a duplicate advance, a racing
    look) open it once. An empty map has succeeded."""
    values, entered = open_values(total, spec.max_concurrency, now, sharded=False)
    return Opened(Write(*key, Update(set=values), Missing(TOTAL)), entered)


def open_shard(
    key: tuple[str, str],
    state: MapState,
    now: int,
    index_of: Callable[[int], int] | None = None,
) -> Opened | None:
    """The next window shard of a sharded map to create (while the map runs), with its first
    window's entries: by the opener after `open_map`, or by a look when the opener died.
    Conditioned on the shard's absence (a halt's close creates a shard it finds missing, so
    no shard is entered after its map stopped)."""
    if state.status != "RUNNING":
        return None
    for shard in range(state.shards):
        entered = shard_stripes(state, shard)
        if shard in state.present or not entered:
            continue
        values = {
            STATUS: "RUNNING",
            SUCCEEDED: 0,
            FAILED: 0,  # a failure's refill is conditioned on it
            CANCELLED: 0,
            **{WINDOW + str(i): entry_value(now, index_of and index_of(i)) for i in entered},
        }
        return Opened(Write(*shard_key(key, shard), Update(set=values), Missing(STATUS)), entered)
    return None


def close_shards(key: tuple[str, str], state: MapState, verdict: Verdict) -> list[Write]:
    """A sharded map's stop (FAILED, or CANCELLED: a halt), written on each shard before its
    unit's verdict: no refill lands on a closed shard (creating a shard not yet there)."""
    return [
        Write(*shard_key(key, shard), Update(set={STATUS: verdict}), None)
        for shard in range(state.shards)
    ]


def mark_done(key: tuple[str, str], shard: int) -> Write:
    """Shard `shard` accounted every item it holds: marked on the map's unit (a SET: any
    number of markers of one shard are one)."""
    return Write(*key, Update(set={DONE + str(shard): 1}), None)


def open_more(
    key: tuple[str, str],
    state: MapState,
    now: int,
    index_of: Callable[[int], int] | None = None,
) -> Opened | None:
    """The next chunk of the first window, while stripes are left to enter and the map runs:
    by the opener right after `open_map`, or by a look when the opener died between chunks.
    Conditioned on `m_opened` as read, so a chunk is entered once."""
    if state.shards:
        return open_shard(key, state, now, index_of)
    stripes = min(state.total, state.stride)
    if state.status != "RUNNING" or state.opened >= stripes:
        return None
    entered = tuple(range(state.opened, min(stripes, state.opened + OPEN_CHUNK)))
    values = {
        OPENED: state.opened + len(entered),
        **{WINDOW + str(i): entry_value(now, index_of and index_of(i)) for i in entered},
    }
    condition = all_of(Eq(OPENED, state.opened), Eq(STATUS, "RUNNING"))
    return Opened(Write(*key, Update(set=values), condition), entered)


@dataclass(frozen=True)
class Accounting:
    write: Write
    entered: tuple[int, ...]  # the stripe's next item: send it after the write lands


def account(
    key: tuple[str, str],
    state: MapState,
    index: int,
    outcome: Outcome,
    now: int,
    follower_index: int | None = None,
    *,
    tolerated_failures: int | None = None,
    refill: bool = True,
) -> Accounting:
    """The write that counts item `index`'s end and, while the map runs, brings the next item
    of its stripe into the window. No read is needed before it: `state` may be any earlier
    read, as it only says whether the map runs (its stride and total never change).
    Conditioned on the item's window entry (and, when it refills, on the map still running).
    When it loses, re-read: an item no longer in the window was accounted already (a
    duplicate, a late result, a racing look) and nothing is counted twice; a map that stopped
    running, or a failure that decides it, is accounted again without the refill (`refill`
    False).

    A failure refills only while the map's failures stay within `tolerated_failures` (`tolerated`;
    None: unbounded) after it, a condition on `m_failed` as it is: the failure that decides
    the map brings no item into the window (with no tolerance, no failure does), so a failed
    map sends nothing more, and a map compensation (which tolerates none) never undoes an item
    after an undo that failed."""
    entry = WINDOW + str(index)
    follower = index + state.stride
    bounded = outcome == "failed" and tolerated_failures is not None
    refill = (
        refill
        and state.status == "RUNNING"
        and follower < state.total
        and not (bounded and not tolerated_failures)
    )
    update = Update(
        set={WINDOW + str(follower): entry_value(now, follower_index)} if refill else {},
        remove=(entry,),
        add={_COUNTER[outcome]: 1},
    )
    condition: Cond = Exists(entry)
    if refill:
        condition = all_of(condition, Eq(STATUS, "RUNNING"))
        if bounded:
            condition = all_of(condition, Lt(FAILED, tolerated_failures))
    where = unit_key(key, state, index)
    return Accounting(Write(*where, update, condition), (follower,) if refill else ())


def decide(key: tuple[str, str], after: MapState, spec: MapSpec) -> tuple[Write, Verdict] | None:
    """The verdict write, when the map's counters (as an accounting returned them, or as a
    look read them) decide it: RUNNING -> SUCCEEDED or FAILED, once."""
    decided = verdict(after, spec)
    if after.status != "RUNNING" or decided == "RUNNING":
        return None
    return Write(*key, Update(set={STATUS: decided}), Eq(STATUS, "RUNNING")), decided


def compensated(key: tuple[str, str], count: int = 1) -> Write:
    """Count compensations that ended (the item's compensation write is the token)."""
    return Write(*key, Update(add={COMPENSATED: count}), None)


# ------------------------------------------------------------------------- the window's look


@dataclass(frozen=True)
class ItemView:
    """What a look needs of an item unit (None fields: the unit does not exist yet)."""

    index: int
    status: str | None = None  # None: no unit yet (its message may be on its way)
    attempt: int = 0
    dispatched_at: int | None = None
    finished_at: int | None = None
    first_claimed_at: int | None = None

    @classmethod
    def from_item(cls, index: int, item: Mapping[str, Any] | None) -> ItemView:
        if item is None:
            return cls(index)
        return cls(
            index,
            str(item["status"]),
            int(item.get("attempt", 0)),
            item.get("dispatched_at"),
            item.get("finished_at"),
            item.get("first_claimed_at"),
        )


_TERMINAL = {"SUCCEEDED": "succeeded", "FAILED": "failed", "CANCELLED": "cancelled"}


@dataclass(frozen=True)
class WindowLook:
    """What a look at a map decides from its window (never from items outside it)."""

    to_account: tuple[tuple[int, Outcome], ...]  # ended items a crashed process left counted
    to_resend: tuple[int, ...]  # items whose message may be lost (never claimed, grace over)
    next_due: int | None  # the earliest such deadline still to come


def window_keys(workflow_id: str, step: str, state: MapState) -> list[tuple[str, str]]:
    """The item units a look reads: the window's, at most `MaxConcurrency`."""
    return [map_item_key(workflow_id, step, i) for i in sorted(state.window)]


def look(state: MapState, items: Mapping[int, ItemView], now: int, grace_ms: int) -> WindowLook:
    """Items in the window that ended but were never accounted (their process died between
    the item's write and the map's), and items never claimed whose message's grace is over
    (lost: send again while the map runs; once it has failed, cancel them instead). Attempt
    deadlines of running items are the step rules', applied by the planner to each item unit
    as to a step; a verdict and a first window's chunks a dead process left are `decide` and
    `open_more` on the same read."""
    ended: list[tuple[int, Outcome]] = []
    resend: list[int] = []
    due: list[int] = []
    for index, entered_at in sorted(state.window.items()):
        item = items.get(index, ItemView(index))
        if item.status in _TERMINAL:
            ended.append((index, _TERMINAL[item.status]))  # type: ignore[arg-type]
            continue
        if item.status in (None, "PENDING", "QUEUED"):
            sent = item.dispatched_at if item.dispatched_at is not None else entered_at
            if sent + grace_ms <= now:
                resend.append(index)
            else:
                due.append(sent + grace_ms)
    return WindowLook(tuple(ended), tuple(resend), min(due, default=None))


# ------------------------------------------------------------------ compensation and output


def to_compensate(items: Iterable[ItemView], when: Literal["ATTEMPTED", "SUCCEEDED"]) -> list[int]:
    """Items that may have acted, in the order their compensations run: reverse order of
    completion (a recorded success by `finished_at`, an ambiguous item by its first claim),
    later first, ties by the higher index. A never-claimed item is never compensated."""
    chosen = [
        item
        for item in items
        if (
            item.status == "SUCCEEDED" if when == "SUCCEEDED" else item.first_claimed_at is not None
        )
    ]

    def completed(item: ItemView) -> int:
        if item.status == "SUCCEEDED" and item.finished_at is not None:
            return item.finished_at
        return item.first_claimed_at or 0

    return [
        item.index for item in sorted(chosen, key=lambda i: (completed(i), i.index), reverse=True)
    ]


def output_list(total: int, outputs: Mapping[int, Any]) -> list[Any]:
    """The map step's output: each item's output in item order, None for a failed item the
    tolerance let pass."""
    return [outputs.get(i) for i in range(total)]


# ---------------------------------------------------------------------------- identities


def item_idempotency_key(workflow_id: str, step: str, index: int, kind: Kind = "step") -> str:
    """Stable across the item's retries (no attempt in it), distinct per item; its
    compensation's is distinct too, as a step's is."""
    return f"{workflow_id}:{step}[{index}]" + (":compensate" if kind == "compensation" else "")


def child_id(parent_id: str, step: str, index: int | None, attempt: int) -> str:
    """The id of the child workflow a child-workflow step's attempt starts: derived, so a
    retried start, a duplicate message or racing supervisors make the same conditional put
    and one attempt never has two children. 32 hex digits, as random ids are."""
    text = "\0".join(("child", parent_id, step, "" if index is None else str(index), str(attempt)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ChildEnd:
    """What a child workflow's end does to the attempt of the step that started it."""

    succeeded: bool  # the child's output becomes the step's output
    error_type: str | None = None  # else the attempt fails with the child's error
    message: str | None = None


_CHILD_FAILED = ("COMPENSATED", "FAILED", "CANCELLED")


def child_end(child_id: str, status: str, error: Mapping[str, Any] | None) -> ChildEnd | None:
    """The step's outcome from its child's status; None while the child is not terminal (the
    step keeps waiting, so its parent cannot be terminal before it). A child that ended
    `COMPENSATED`, `FAILED` or `CANCELLED` fails the attempt with the child's own error name
    (so `Retry.NonRetryableErrors` can name it), else `ChildWorkflow<Status>`; `Retry` may
    then start a fresh child (a new attempt, a new id)."""
    if status == "SUCCEEDED":
        return ChildEnd(True)
    if status not in _CHILD_FAILED:
        return None
    error = error or {}
    name = str(error.get("type") or f"ChildWorkflow{status.title()}")
    message = f"child workflow {child_id} ended {status}"
    if error.get("message"):
        message += f": {error['message']}"
    return ChildEnd(
        False,
        limits.truncate(name, limits.MAX_ERROR_NAME),
        limits.truncate(message, limits.MAX_ERROR_MESSAGE),
    )


# ----------------------------------------------------------------------------- internals


def items_of(items: Sequence[Item]) -> dict[int, Item]:
    """Item units by index (from a batch read of `window_keys`)."""
    return {map_item_of(it["pk"], it["sk"])[2]: it for it in items}
