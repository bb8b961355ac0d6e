"""Tags an agent adds to its own workflow (`ctx.tag`, issue 37.5).

A start's tags are written with the workflow (`Scheduler.create`); an agent's come later, one
transaction each (`transitions.add_tag`): fenced by the attempt that asks (a superseded one
writes nothing), the workflow's tags guarded as read (so at most limits.MAX_TAGS, whoever tags
at once), and the tag's index item, so `GET /workflows?tag=k:v` lists it at once. A repeat of
a tag the workflow carries writes nothing: an attempt retried after a crash may tag again.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shepherd import business_keys
from shepherd.decisions import transitions as tx
from shepherd.engine import signals
from shepherd.errors import AttemptSuperseded, StoreUnavailable
from shepherd.keys import WF_SK, wf_pk
from shepherd.model import StepRecord

if TYPE_CHECKING:
    from shepherd.engine.scheduler import Scheduler

# Concurrent tags of one workflow each lose at most once to each other: a few reads bound it.
TAG_ATTEMPTS = 5


def add_tag(scheduler: Scheduler, rec: StepRecord, key: Any, value: Any) -> bool:
    """Tag `rec`'s workflow with key=value for the attempt `rec` holds: True if written, False
    if the workflow carried that tag already. TagInvalid (nothing written) past a cap;
    AttemptSuperseded if the attempt no longer holds its step."""
    business_keys.check_tag(key, value)
    store = scheduler.ports.store
    for _ in range(TAG_ATTEMPTS):
        item = store.get(wf_pk(rec.workflow_id), WF_SK)
        if item is None:  # pragma: no cover - a running step's workflow exists
            raise AttemptSuperseded("this attempt's workflow is gone")
        stored = item.get("tags")
        tags = business_keys.tags_with(stored, key, value)
        if tags is None:
            return False
        now = scheduler.ports.clock.now_ms()
        created = int(item["created_at"])
        kept = created // 1000 + signals.KEPT_SECONDS + scheduler.config.retention_seconds
        index_item = business_keys.tag_item(
            str(item["owner"]), rec.workflow_id, created, key, value, kept
        )
        step = tx.heartbeat(rec, rec.attempt, now, None)
        lost = scheduler.executor.contended(
            tx.add_tag(step, rec.workflow_id, stored, tags, index_item)
        )
        if lost is None:
            return True
        if lost[0] == 0:
            raise AttemptSuperseded("this attempt was superseded")
    raise StoreUnavailable(f"tag {key!r}: the workflow's tags kept changing; try again")
