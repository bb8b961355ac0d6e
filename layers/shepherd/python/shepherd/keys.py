"""The item key layout of the one table: every partition and sort key Shepherd writes.

The one place these strings live (docs/architecture.md, Table layout). A workflow and its
steps share a partition, so one consistent query reads a whole workflow.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import hashlib
from typing import Literal

Kind = Literal["step", "compensation"]

WF_PREFIX = "WF#"  # pk of a workflow's partition: WF#<workflow id>
WF_SK = "#WF"  # sk of the workflow item
STEP_PREFIX = "S#"  # sk of a step item: S#<step name>
COMP_PREFIX = "C#"  # sk of a compensation item: C#<step name>
JOIN_PREFIX = "J#"  # sk of a join's counter: J#<step name> (J#: the end, over the sinks)
OWNER_PREFIX = "OWNER#"  # list index partition: OWNER#<owner>#<shard>
WATCH_PREFIX = "W#"  # watch index shard: W#<n>
EVENTS_PREFIX = "EV#"  # a workflow's history: pk EV#<workflow id>, sk <time ms>#<event id>
DEF_PREFIX = "DEF#"  # a definition snapshot: pk DEF#<name>, sk <content hash>
POOLS_PK = "POOLS"  # pool states: pk POOLS, sk <pool name>
SCHEDULES_PK = "SCHEDULES"  # schedule states: pk SCHEDULES, sk <workflow type>#<schedule name>
CONFIG_PREFIX = "CONFIG#"  # deployment-wide settings the engine creates on first use
UPLOAD_PREFIX = "UP#"  # a presigned upload (POST /payloads): pk UP#<upload id>
UPLOAD_SK = "#UP"  # sk of the upload item
UPLOAD_KEY_PREFIX = "uploads/"  # its object: uploads/<hash of the owner>/<upload id>


# A state machine's Task visits (shepherd.asl.engine): step items named V#<state>#<visit>, kept
# in a partition of their own, so a look or a view of the workflow reads its item alone however
# many visits a loop made.
VISIT_PREFIX = "V#"
VISITS_PREFIX = "ASLV#"  # pk of a workflow's visit units: ASLV#<workflow id>


def visits_pk(workflow_id: str) -> str:
    return VISITS_PREFIX + workflow_id


def wf_pk(workflow_id: str) -> str:
    return WF_PREFIX + workflow_id


def workflow_id_of(pk: str) -> str:
    return pk.removeprefix(WF_PREFIX)


def item_sk(kind: Kind, name: str) -> str:
    return (STEP_PREFIX if kind == "step" else COMP_PREFIX) + name


# The list indexes' write sharding: one caller's workflows spread over this many partitions
# (docs/architecture.md, The list indexes). Fixed per table: a change needs the re-keying
# pass that doc describes, so it is a constant, not a variable.
LIST_SHARDS = 32
CREATED_DIGITS = 15  # a list sort key's zero-padded creation time (epoch ms)


def _stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def list_shard(workflow_id: str) -> int:
    return _stable_hash(workflow_id) % LIST_SHARDS


def list_pk(owner: str, workflow_id: str) -> str:
    """The list partition of one of the owner's workflows: OWNER#<owner>#<shard>."""
    return list_shard_pk(owner, list_shard(workflow_id))


def list_shard_pk(owner: str, shard: int) -> str:
    return f"{OWNER_PREFIX}{owner}#{shard}"


def list_sk(created_at: int, workflow_id: str) -> str:
    """Newest first when read backwards: zero-padded creation time, then the id."""
    return f"{created_at:0{CREATED_DIGITS}d}#{workflow_id}"


def list_keys(
    owner: str, wf_type: str, status: str, created_at: int, workflow_id: str
) -> dict[str, str]:
    """Every list-index attribute of a workflow item (the four indexes share `list_pk`)."""
    when = list_sk(created_at, workflow_id)
    return {
        "list_pk": list_pk(owner, workflow_id),
        "list_sk": when,
        "type_sk": f"{wf_type}#{when}",
        **status_keys(wf_type, status, created_at, workflow_id),
    }


def status_keys(wf_type: str, status: str, created_at: int, workflow_id: str) -> dict[str, str]:
    """The two list-index sort keys that move when a workflow's status changes."""
    when = list_sk(created_at, workflow_id)
    return {"status_sk": f"{status}#{when}", "type_status_sk": f"{wf_type}#{status}#{when}"}


def watch_shard(workflow_id: str, shards: int) -> str:
    """Write-sharding of the watch index: a stable hash of the id, never Python's `hash`."""
    return f"{WATCH_PREFIX}{_stable_hash(workflow_id) % shards}"


def shard_key(n: int) -> str:
    return f"{WATCH_PREFIX}{n}"


LEASE_PK = "LEASE#sweep"  # a sweep group's lease: pk LEASE#sweep, sk <group>
WATCH_CONFIG = ("CONFIG#watch", "CONFIG#watch")  # the most watch shards any deployment used


# Whether the supervisor ticks: awake, drowsy or asleep (shepherd.engine.wakeup).
SUPERVISOR_REST = ("CONFIG#supervisor", "CONFIG#supervisor")


def supervisor_rest_key() -> tuple[str, str]:
    return SUPERVISOR_REST


def lease_pk(group: int) -> tuple[str, str]:
    return LEASE_PK, str(group)


def watch_config_key() -> tuple[str, str]:
    return WATCH_CONFIG


def schedule_sk(workflow_type: str, name: str) -> str:
    """A schedule's state item: pk SCHEDULES, sk <workflow type>#<schedule name>."""
    return f"{workflow_type}#{name}"


def definition_pk(name: str) -> str:
    return DEF_PREFIX + name


# An upload id: 32 hex digits (16 random bytes), as POST /payloads makes them.
UPLOAD_ID_PATTERN = r"^[0-9a-f]{32}$"


def upload_pk(upload_id: str) -> str:
    return UPLOAD_PREFIX + upload_id


def upload_object_key(owner: str, upload_id: str) -> str:
    """`uploads/<sha256 of the owner, 32 hex>/<upload id>`: server-made, owner-scoped."""
    owner_hash = hashlib.sha256(owner.encode()).hexdigest()[:32]
    return f"{UPLOAD_KEY_PREFIX}{owner_hash}/{upload_id}"


# ------------------------------------------------------------------ map items (issue 24)
# A map's items live in their own partitions, MAP_ITEM_PAGE items each, so the workflow's
# partition (read whole by a look) never holds one and no partition takes more than a page's
# writes (docs/architecture.md, "Item layout and cost per item").
MAP_PREFIX = "MAP#"  # pk of an item partition: MAP#<workflow id>#<step>#<page>
ITEM_PREFIX = "I#"  # sk of an item: I#<index, 6 digits>
ITEM_COMP_PREFIX = "IC#"  # sk of an item's compensation: IC#<index, 6 digits>
MAP_ITEM_PAGE = 1_000  # = limits.MAP_ITEM_PAGE (keys import nothing of the engine)


def map_item_key(workflow_id: str, step: str, index: int, kind: Kind = "step") -> tuple[str, str]:
    """The item `index` of map step `step` (or its compensation)."""
    page = index // MAP_ITEM_PAGE
    prefix = ITEM_PREFIX if kind == "step" else ITEM_COMP_PREFIX
    return f"{MAP_PREFIX}{workflow_id}#{step}#{page}", f"{prefix}{index:06d}"


def map_item_of(pk: str, sk: str) -> tuple[str, str, int, Kind]:
    """Workflow id, step, index and kind from an item's key (the inverse of map_item_key)."""
    workflow_id, step, _page = pk.removeprefix(MAP_PREFIX).rsplit("#", 2)
    kind: Kind = "compensation" if sk.startswith(ITEM_COMP_PREFIX) else "step"
    return workflow_id, step, int(sk.split("#", 1)[1]), kind


# A map's window and counters live on window shards beside its unit in the workflow's partition
# (docs/architecture.md, "Item layout and cost per item"): shard s holds the window entries of
# the stripes j = i mod C with j mod K = s, and the counts of the items it accounted, so an
# item's accounting write touches one item of at most MAP_SHARD_ENTRIES entries (under 1 KB:
# one WRU) whatever MaxConcurrency is. A look reads them with the partition (K <= C / 32 + 1).
MAP_SHARD_PREFIX = "MW#"  # sk of a window shard: MW#<S|C>#<shard>#<step>
MAP_SHARD_ENTRIES = 32  # window entries a shard holds at most (~16 bytes each)


def map_shard_count(stride: int) -> int:
    """K: how many window shards a map of stride (MaxConcurrency) C has."""
    return max(1, -(-stride // MAP_SHARD_ENTRIES))


def map_shard_of(position: int, stride: int, shards: int) -> int:
    """The shard of a window position: its stripe's (a stripe's items share one shard)."""
    return (position % stride) % shards


def map_shard_sk(kind: Kind, step: str, shard: int) -> str:
    return f"{MAP_SHARD_PREFIX}{'S' if kind == 'step' else 'C'}#{shard}#{step}"


def map_shard_parts(sk: str) -> tuple[Kind, str, int]:
    """Kind, step and shard from a window shard's sort key (the inverse of map_shard_sk)."""
    letter, shard, step = sk.removeprefix(MAP_SHARD_PREFIX).split("#", 2)
    kind: Kind = "step" if letter == "S" else "compensation"
    return kind, step, int(shard)


RATE_PREFIX = "RATE#"  # a pool's rate-limiter shard: pk RATE#<pool>#<shard>, sk RATE
RATE_SK = "RATE"


def rate_pk(pool: str, shard: int) -> tuple[str, str]:
    """One GCRA bucket of a pool's limiter, its own partition (no hot item: docs/architecture.md,
    the rate limiter)."""
    return f"{RATE_PREFIX}{pool}#{shard}", RATE_SK


# A breaker's outcome counters: one partition per shard of a slot, pk CB#<pool>#<slot>#<shard>,
# sk CB. The shard is in the partition key: a pool ends every one of its attempts on the slot's
# counters, so as sort keys under one partition key they would take its whole rate on one
# partition's 1,000 WCU a second (5x over at 5,000 attempts a second: issue 41.2).
CIRCUIT_PREFIX = "CB#"
CIRCUIT_SK = "CB"


def circuit_counter_key(pool: str, slot: int, shard: int) -> tuple[str, str]:
    """One shard's counter item of `pool`'s breaker for `slot`: a partition of its own (a
    reader of the window gets every shard's and sums them)."""
    return f"{CIRCUIT_PREFIX}{pool}#{slot}#{shard}", CIRCUIT_SK


# ------------------------------------------------------- the approval inbox (issue 25)
# One item per principal who may answer a pending approval, in the workflow's own partition
# (docs/architecture.md, The approval inbox), carrying the sparse `inbox` index's keys.
APPROVAL_PREFIX = "A#"  # sk of an inbox item: A#<step>#<sha256(principal), 16 hex>
INBOX_PREFIX = "INBOX#"  # inbox index partition: INBOX#<principal>#<shard>
# A principal's inbox is write-sharded this many ways (invariant 10: no partition key written
# by every workflow of a caller); a read queries them all and merges. Fixed, as LIST_SHARDS: a
# principal on every approval of 5,000 approval-bearing starts a second writes 10,000 index
# entries a second (each added, then taken out), ~310 a shard, under a third of a partition's
# 1,000 (at 4 shards, 2,500: 2.5x over; issue 41.2). Raising it keeps old entries readable: a
# read queries every shard, and an entry lies in its shard below the count.
INBOX_SHARDS = 32
REQUESTED_DIGITS = 13  # an inbox sort key's request time (epoch ms, 13 digits until 2286)


def inbox_item_sk(step: str, principal: str) -> str:
    principal_hash = hashlib.sha256(principal.encode()).hexdigest()[:16]
    return f"{APPROVAL_PREFIX}{step}#{principal_hash}"


def inbox_shard(workflow_id: str) -> int:
    return _stable_hash(workflow_id) % INBOX_SHARDS


def inbox_pk(principal: str, shard: int) -> str:
    return f"{INBOX_PREFIX}{principal}#{shard}"


def inbox_sk(requested_at: int, workflow_id: str, step: str) -> str:
    """Newest first when read backwards: the request time, then the workflow and the step."""
    return f"{requested_at:0{REQUESTED_DIGITS}d}#{workflow_id}#{step}"


def events_pk(workflow_id: str) -> str:
    """A workflow's published events, apart from its own partition (its reads never grow)."""
    return EVENTS_PREFIX + workflow_id


def event_sk(at_ms: int, event_id: str) -> str:
    return f"{at_ms:0{CREATED_DIGITS}d}#{event_id}"


# ------------------------------------------------------------ signals (issue 37)
# A workflow's signals live in a partition of their own, so a look at the workflow (one query
# of its partition) never reads them (docs/architecture.md, Signals). A name's signals are a
# queue: `next` is the sequence number the next one sent gets, `head` the next to be taken;
# each kept signal is one item under its name and number, taken in order. A signal id names
# its dedupe item. The counter item bounds how many wait, over every name.
SIGNAL_PREFIX = "SIG#"  # pk of a workflow's signals: SIG#<workflow id>
SIGNALS_SK = "#SIG"  # sk of its counter item: `kept`, how many wait for a step
SIGNAL_NAME_PREFIX = "N#"  # sk of a name's queue: N#<name> (`next`, `head`)
SIGNAL_ITEM_PREFIX = "Q#"  # sk of a signal: Q#<name>#<sequence, 10 digits>
SIGNAL_ID_PREFIX = "D#"  # sk of a signal id, kept once: D#<signal id>
SIGNAL_SEQUENCE_DIGITS = 10


def signals_pk(workflow_id: str) -> str:
    return SIGNAL_PREFIX + workflow_id


def signal_queue_sk(name: str) -> str:
    return SIGNAL_NAME_PREFIX + name


def signal_sk(name: str, sequence: int) -> str:
    return f"{SIGNAL_ITEM_PREFIX}{name}#{sequence:0{SIGNAL_SEQUENCE_DIGITS}d}"


def signal_id_sk(signal_id: str) -> str:
    return SIGNAL_ID_PREFIX + signal_id


# ------------------------------------------------- business keys: tags and matches (issue 37)
# A workflow's tags and its WaitForSignal steps' correlations (`Match`) are items in its own
# partition, `K#T#<tag key>` and `K#M#<step>`, each carrying the sparse `by_key` index's keys
# (docs/architecture.md, Business keys). The index's partition names the owner, the tag (or the
# signal name and the matched values) and one of KEY_SHARDS write shards, by the workflow id,
# so one caller tagging every start alike spreads its writes (5,000 starts a second over 8
# shards is 625 a partition, under DynamoDB's 1,000); a read queries every shard and merges.
# Its sort key is the list's (`list_sk`): newest first when read backwards.
KEY_ITEM_PREFIX = "K#"  # sk of a business-key item in the workflow's partition
TAG_ITEM_PREFIX = "K#T#"  # sk of a tag: K#T#<tag key>
MATCH_ITEM_PREFIX = "K#M#"  # sk of a step's correlation: K#M#<step>
TAG_PREFIX = "TAG#"  # by_key partition of a tag: TAG#<owner>#<hash of key and value>#<shard>
MATCH_PREFIX = "MATCH#"  # of a match: MATCH#<owner>#<signal name>#<hash of the values>#<shard>
KEY_SHARDS = 8  # fixed per table, as LIST_SHARDS


def key_shard(workflow_id: str) -> int:
    return _stable_hash(workflow_id) % KEY_SHARDS


def _digest(*parts: str) -> str:
    """A fixed-length name for values of any characters ('#' included)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def tag_item_sk(key: str) -> str:
    return TAG_ITEM_PREFIX + key


def match_item_sk(step: str) -> str:
    return MATCH_ITEM_PREFIX + step


def tag_pk(owner: str, key: str, value: str, shard: int) -> str:
    """The by_key partition of the owner's workflows tagged key=value, shard `shard`."""
    return f"{TAG_PREFIX}{owner}#{_digest(key, value)}#{shard}"


def match_pk(owner: str, name: str, values: str, shard: int) -> str:
    """The by_key partition of the owner's workflows waiting for signal `name` matched on
    `values` (the canonical JSON of the matched fields and their values), shard `shard`."""
    return f"{MATCH_PREFIX}{owner}#{name}#{_digest(values)}#{shard}"


def join_sk(join: str | None) -> str:
    """A join's counter item (`Scheduler.counted`): J#<step>, or J# for the workflow's end."""
    return JOIN_PREFIX + (join or "")
