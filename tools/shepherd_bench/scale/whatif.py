"""What-if runs: the engine with one change it does not have yet, applied in this process only.

`sharded_list_index`: the list index write-sharded per caller (`list_pk` =
`OWNER#<owner>#<k>`, `k` from the workflow id), the change issue 23 point 7 asks for and the
engine's owner is making. Until it lands, the design load's single caller throttles its one
list partition and everything behind it, and the run says little else; with it applied here
the run measures what comes next. The patch wraps `WorkflowRecord.to_item` for the duration
of a run and is a no-op once the engine shards the list index itself.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from shepherd import keys, model
from shepherd.conditions import Item

LIST_SHARDS = 32  # the arithmetic: ~312 WCU/s per shard at 5,000 starts a second


def engine_shards_list() -> bool:
    """Whether the engine already shards the list index (its `list_pk` takes more than the
    owner)."""
    return len(inspect.signature(keys.list_pk).parameters) > 1


@contextmanager
def sharded_list_index(shards: int = LIST_SHARDS) -> Iterator[bool]:
    """Yields whether the patch is in force."""
    if engine_shards_list():
        yield False
        return
    original: Callable[[model.WorkflowRecord], Item] = model.WorkflowRecord.to_item

    def to_item(self: model.WorkflowRecord) -> Item:
        item = original(self)
        # Its own hash, not the watch shard's: a caller's writes spread over every list shard.
        digest = hashlib.sha256(f"list:{self.workflow_id}".encode()).hexdigest()[:8]
        item["list_pk"] = f"{item['list_pk']}#{int(digest, 16) % shards}"
        return item

    setattr(model.WorkflowRecord, "to_item", to_item)  # noqa: B010 - a patch, on purpose
    try:
        yield True
    finally:
        setattr(model.WorkflowRecord, "to_item", original)  # noqa: B010
