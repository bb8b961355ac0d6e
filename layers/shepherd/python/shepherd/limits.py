"""Every cap on a value that grows, and the DynamoDB item budget they add up to.

One place, so a change to one cap is checked against the whole item it lands in
(`tests/unit/test_limits.py` proves each budget stays under DynamoDB's 400 KB item limit).
Caps are enforced before the write that would store the value, never discovered by DynamoDB.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

KIB = 1024
MIB = 1024 * KIB

# DynamoDB's hard limit: attribute names plus values, as DynamoDB counts them.
DYNAMODB_ITEM_LIMIT = 400 * KIB
# What the engine may use of it: the rest is headroom for attribute-size rounding.
ITEM_BUDGET = 380 * KIB

# ------------------------------------------------------------------------- user payloads
# Sizes are of the canonical JSON (UTF-8 bytes) the engine stores. A payload over the inline
# threshold is stored in the payload bucket and the item keeps a reference of at most
# MAX_REF_BYTES (docs/architecture.md, Large payloads: why 8 KiB), so these caps bound S3
# objects and memory, and only PAYLOAD_INLINE_BYTES counts against an item.
PAYLOAD_INLINE_BYTES = 8 * KIB  # default of the SHEPHERD_PAYLOAD_INLINE_BYTES setting
MAX_PAYLOAD_INLINE_BYTES = 64 * KIB  # the most the setting may say (the item budget uses it)
MAX_REF_BYTES = 512  # `@ref {"h":..., "k":..., "n":...}`: keys are server-made and bounded
# A workflow's input (and an operator's replacement input) through the API: API Gateway ->
# Lambda caps a request near 6 MB; a larger one is uploaded first (POST /payloads).
MAX_INPUT_BYTES = 5 * MIB
# The schema errors one refused input lists (each with its path): enough for any form a person
# fills in, few enough that a wrong array of a million items is a short reply.
MAX_INPUT_PROBLEMS = 20
MAX_UPLOAD_BYTES = 100 * MIB  # one presigned upload (a start's input, a callback's output)
MAX_OUTPUT_BYTES = 100 * MIB  # one step, compensation or callback output
MAX_WORKFLOW_OUTPUT_BYTES = 1024 * MIB  # every step and compensation output of one workflow
MAX_DETAILS_BYTES = 1 * MIB  # progress details (heartbeats, callback heartbeats)
MAX_ASSIGN_BYTES = 64 * KIB  # the variables one step's `Assign` sets, inline in its item
# One callback heartbeat per token per second at most (429 HeartbeatTooSoon with Retry-After):
# a heartbeat keeps an attempt alive within HeartbeatSeconds (at least 2 s), so a faster one
# buys nothing, and each may put a details object.
MIN_CALLBACK_HEARTBEAT_MS = 1000
# POST /tasks/heartbeats: an external worker holding many attempts keeps them alive in one
# request (one API call and one invocation instead of one each); each entry is still one
# conditional write, answered on its own. Larger details go to POST /tasks/heartbeat.
MAX_HEARTBEAT_BATCH = 100
MAX_HEARTBEAT_BATCH_BODY_BYTES = 256 * KIB
MAX_JSON_DEPTH = 64  # nesting levels of any payload ([] and {} each add one)
PAYLOAD_LINK_SECONDS = 300  # a presigned download in GET /workflows/{id}
UPLOAD_SECONDS = 900  # a presigned upload (POST /payloads)

# -------------------------------------------------------------------------------- errors
MAX_ERROR_NAME = 128  # an error's name (type), as matched by NonRetryableErrors
MAX_ERROR_MESSAGE = 2000  # characters; longer messages are cut, marked with an ellipsis
MAX_ERROR_CAUSE = 4096  # characters of a callback failure's cause
# An agent error's full text (its whole message and traceback), kept in the payload bucket
# beside the item's cut message (`error_ref` in the API); longer texts keep their end.
MAX_ERROR_FULL_CHARS = 256 * KIB

# ------------------------------------------------------------------------------ history
MAX_HISTORY = 20  # ended attempts kept per step; `attempts_total` counts them all
# The start of an ended attempt's error message kept in its history entry (characters; the
# step keeps only its last error whole).
MAX_HISTORY_MESSAGE = 100
# One entry at most: attempt, outcome, times, error name (128 characters, 4 bytes each at
# worst), the message's start (100, likewise), a token hash, an actor.
MAX_HISTORY_ENTRY_BYTES = 1_152

# ------------------------------------------------------------------------------ requests
# API Gateway's REST payload limit (10 MB): a larger body is a 413, locally too.
MAX_REQUEST_BYTES = 10 * MIB
# The body of a start: the input cap plus room for the envelope (type, idempotency key).
MAX_START_BODY_BYTES = MAX_INPUT_BYTES + 8 * KIB
# The body of a callback: an output (or details) as large as a start's input, plus the
# envelope; a larger output is uploaded first and named (POST /payloads).
MAX_CALLBACK_INLINE_BYTES = MAX_INPUT_BYTES
MAX_CALLBACK_BODY_BYTES = MAX_CALLBACK_INLINE_BYTES + 8 * KIB
MAX_DEFINITION_BYTES = 256 * KIB  # a definition's canonical JSON (snapshotted in one item)

# ------------------------------------------------------------------- maps and children
# docs/architecture.md, "Map steps and child workflows": a map's window lives on its step's
# item (one entry per item in flight), so MaxConcurrency bounds that item and every look.
MAX_MAP_ITEMS = 100_000  # items of one map (ItemsPath); more fails the map at open
DEFAULT_MAP_CONCURRENCY = 100  # MaxConcurrency when a Map omits it
MAX_MAP_CONCURRENCY = 1_000  # the most MaxConcurrency may say
MAP_ITEM_PAGE = 1_000  # items per item partition (keys.map_item_key) and per items page
MAX_WORKFLOW_NESTING = 5  # levels of child workflows, the root counted
# A step's `Repeat` (issue 42.5): its `MaxIterations` is required and at most this. Each
# iteration writes only its counter and its last output on the step's item (nothing grows
# with the iterations done), so the cap bounds a loop's running time, not an item.
MAX_REPEAT_ITERATIONS = 10_000
MAX_REPEAT_INTERVAL_SECONDS = 86_400  # a rest between two iterations: at most a day

# Fixed parts of an item (keys, statuses, times, counters, hashes, owner ARN, ...),
# generously: the largest measured workflow item without payloads is about 1 KB.
FIXED_OVERHEAD = 8 * KIB


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked so a reader knows it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- item sizes


def attribute_size(value: Any) -> int:
    """Bytes DynamoDB counts for one attribute value (an upper bound where it rounds).

    Strings: UTF-8 bytes; numbers: about one byte per two significant digits plus one;
    booleans and null: 1; lists and maps: 3 bytes plus 1 per element plus their contents
    (and, for maps, their keys).
    """
    # The commonest exact types first (every write is sized): the same sizes as below.
    kind = type(value)
    if kind is str:
        return len(value.encode("utf-8", "surrogatepass"))
    if kind is dict:
        return 3 + sum(1 + attribute_size(str(k)) + attribute_size(v) for k, v in value.items())
    if kind is list:
        return 3 + sum(1 + attribute_size(v) for v in value)
    match value:
        case None | bool():
            return 1
        case str():
            return len(value.encode("utf-8", "surrogatepass"))
        case bytes():
            return len(value)
        case int() | float() | Decimal():
            digits = len(str(value).lstrip("-").replace(".", "").lstrip("0")) or 1
            return (digits + 1) // 2 + 1
        case Mapping():
            return 3 + sum(1 + attribute_size(str(k)) + attribute_size(v) for k, v in value.items())
        case list() | tuple() | set() | frozenset():
            return 3 + sum(1 + attribute_size(v) for v in value)
    raise TypeError(f"not a DynamoDB value: {type(value).__name__}")


def item_size(item: Mapping[str, Any]) -> int:
    """The size DynamoDB checks against its 400 KB limit: names plus values."""
    return sum(len(name.encode("utf-8")) + attribute_size(v) for name, v in item.items())


# ------------------------------------------------------------------------------ budgets


def stored_payload_budget() -> int:
    """The most one stored payload takes in an item: inline up to the threshold, else a ref."""
    return max(MAX_PAYLOAD_INLINE_BYTES, MAX_REF_BYTES)


def workflow_item_budget() -> int:
    """The largest workflow item the caps allow."""
    error = MAX_ERROR_NAME + MAX_ERROR_MESSAGE * 4 + MAX_ERROR_CAUSE * 4 + 1 * KIB
    # the input, and the error with the cause it keeps (errors are cut, never offloaded)
    return FIXED_OVERHEAD + stored_payload_budget() + 2 * error


def step_item_budget() -> int:
    """The largest step or compensation item the caps allow."""
    error = MAX_ERROR_NAME + MAX_ERROR_MESSAGE * 4 + MAX_ERROR_CAUSE * 4 + 1 * KIB
    history = MAX_HISTORY * MAX_HISTORY_ENTRY_BYTES
    # output, progress details and an operator's replacement input: each inline or a ref
    return FIXED_OVERHEAD + 3 * stored_payload_budget() + error + history


# An Approval step (issue 25): who may answer besides the owner, and what they may say. Each
# principal is an IAM ARN (IAM allows 2,048 characters; 512 here, more than any role or user
# path a team plausibly writes); the decision is kept on the step's item.
MAX_APPROVERS = 10
MAX_PRINCIPAL_CHARS = 512
MAX_APPROVAL_COMMENT_CHARS = 1000
MAX_SCHEDULES = 20  # per definition (each one an EventBridge Scheduler schedule)

# Signals (issue 37): how many a workflow keeps waiting for a step to take them (over every
# name), refused past that before anything is written; a signal's payload is kept inline, in
# its own item, so it is capped by the deployment's inline payload size (`payload_inline_bytes`).
MAX_SIGNALS_KEPT = 100
MAX_SIGNAL_ID_CHARS = 128
SIGNAL_NAME = r"^[A-Za-z0-9_.-]{1,64}$"  # a signal's name (a URL path segment)

# Business keys (issue 37): a workflow's tags (at its start and by its agents' ctx.tag), and
# the correlations of its WaitForSignal steps (`Match`), each an item of its own written with
# the write it belongs to, so every cap is checked before that write (docs/architecture.md,
# Business keys). A signal sent by its match reaches at most MAX_MATCHED open workflows
# (more is refused, nothing sent), found among at most MAX_MATCH_ENTRIES index entries.
MAX_TAGS = 10
MAX_TAG_KEY_CHARS = 64
MAX_TAG_VALUE_CHARS = 256
TAG_KEY = r"^[A-Za-z0-9_./=+@-]{1,64}$"  # a tag's key (no spaces, no #, : or ,)
MAX_MATCH_FIELDS = 4  # fields one Match names
MAX_MATCH_STEPS = 10  # WaitForSignal steps with a Match, per definition
MAX_MATCH_VALUE_CHARS = 256  # a matched value, as canonical JSON
MAX_MATCHED = 100
MAX_MATCH_ENTRIES = 1_000
