"""The supervisor sleeps while the watch index is empty; whoever puts work in it wakes it.

An idle stack's sweeps (twelve a minute, each querying every watch shard) are most of what it
pays besides CloudWatch and the queues' polling. So the scheduled run (once a minute, always:
it also holds paused pools paused) first probes the index for any entry; found empty twice
(`shepherd.decisions.rest`), it sends no ticks and sweeps nothing until something wakes it:

* a start, or an operator's action (the only writers that can put a workflow in an empty
  index: every live workflow is in it, invariant 3), calls `Wakeup.watched` after its write
  won. Awake (seen within `SEEN_AWAKE_MS` by this process, or read now): nothing more. Drowsy:
  it writes awake, so the run that would put it to sleep loses its conditional write. Asleep:
  it writes awake and rings (a wake tick to the tick queue, delay 0): that tick runs the
  minute as a scheduled run does (a sweep now, then a tick every interval), so the new
  workflow's first look comes on time, as if the supervisor had never slept.
* the scheduled run's own probe, every minute while asleep: an entry found (a wake that failed
  to ring, an index slower than `DROWSY_MS` allows) wakes it. Nothing in the index is ever
  left unswept; at worst a look comes a minute late.

The state is one item (`CONFIG#supervisor`), written only when it changes: by the scheduled
run once a minute at most, by a writer only while the supervisor is not awake. A busy stack
reads it once per process every `SEEN_AWAKE_MS`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shepherd.clock import Clock
from shepherd.conditions import Update
from shepherd.decisions.rest import (
    ASLEEP,
    AWAKE,
    SEEN_AWAKE_MS,
    SINCE,
    STATE,
    Plan,
    Rest,
    plan,
)
from shepherd.errors import ConditionFailed
from shepherd.keys import shard_key, supervisor_rest_key
from shepherd.ports import Store

logger = logging.getLogger("shepherd.wakeup")

EVER = 2**62  # a due_at no entry reaches: the probe's upper bound
TRIES = 3


class Wakeup:
    """The supervisor's rest state over the store, and the bell that wakes it."""

    def __init__(self, store: Store, clock: Clock, ring: Callable[[], None] | None = None) -> None:
        self.store = store
        self.clock = clock
        self.ring = ring  # None: nothing to ring (the local stack sweeps on its own)
        self._seen_awake: int | None = None

    def _now(self) -> int:
        return int(self.clock.now_ms())

    def read(self) -> Rest:
        return Rest.of(self.store.get(*supervisor_rest_key()))

    def _write(self, rest: Rest, to: str, now: int) -> bool:
        """Move from `rest` to `to`, if nobody moved it since; lost: False."""
        try:
            self.store.update(
                *supervisor_rest_key(), Update(set={STATE: to, SINCE: now}), rest.guard()
            )
        except ConditionFailed:
            return False
        return True

    # --------------------------------------------------------------- the scheduled run

    def probe(self, shards: int) -> bool:
        """Whether the watch index holds any entry (one query of at most one item per shard,
        stopping at the first found)."""
        query = self.store.query_due
        return any(query(shard_key(n), EVER, 1, None).entries for n in range(shards))

    def scheduled(self, shards: int) -> Plan:
        """The scheduled run's decision, applied: whether it sweeps and sends its ticks. A
        lost write (a writer woke it meanwhile) ticks."""
        rest = self.read()
        watched = self.probe(shards)
        now = self._now()
        decided = plan(rest, watched, now)
        if decided.to is None:
            return decided
        if not self._write(rest, decided.to, now):
            logger.info("supervisor state moved meanwhile", extra={"from": rest.state})
            return Plan(None, True)
        if rest.state == ASLEEP:
            logger.warning("supervisor woken by its own probe: a wake did not ring")
        return decided

    # ------------------------------------------------------------------------- writers

    def watched(self) -> None:
        """After a write that may have put a workflow in the watch index: make sure the
        supervisor ticks (see the module). Never raises: the scheduled run's probe is the
        fallback, a minute at most."""
        try:
            self._watched()
        except Exception:
            logger.exception("supervisor not woken; its next scheduled run finds the work")

    def _watched(self) -> None:
        now = self._now()  # taken before the read: the trust runs from no later than the read
        if self._seen_awake is not None and now - self._seen_awake < SEEN_AWAKE_MS:
            return
        rest = self.read()
        for _ in range(TRIES):
            if rest.state == AWAKE:
                self._seen_awake = now
                return
            if self._write(rest, AWAKE, self._now()):
                if rest.state == ASLEEP and self.ring is not None:
                    self.ring()
                self._seen_awake = now
                return
            rest = self.read()
        logger.warning("supervisor state kept moving; its next scheduled run decides")
