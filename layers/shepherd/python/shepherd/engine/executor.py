"""The executor: the one place a workflow's state changes.

Every transition is one named conditional write (or one transaction) built by
`shepherd.decisions.transitions` and applied here, whoever asks for it: the agent runtime
(claim, heartbeat, callback arming, waiting), the scheduler (results, dispatches, unwinding,
operator actions) and the supervisor (timeouts, the watch entry, parking). The winner's item,
or on a lost condition the item as it now is (from ReturnValuesOnConditionCheckFailure), is
folded back into the caller's `WorkflowState`, so no caller ever plans on a write it lost.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shepherd.conditions import Item, Missing, Update
from shepherd.decisions import transitions as tx
from shepherd.engine import listing
from shepherd.errors import ConditionFailed, TransactionConflict
from shepherd.keys import wf_pk
from shepherd.model import StepRecord, WorkflowRecord, WorkflowState
from shepherd.ports import Store


class _HasStore(Protocol):
    store: Store


class Executor:
    """Applies transitions to the store and folds each outcome into the state."""

    def __init__(self, ports: _HasStore) -> None:
        self._ports = ports

    @property
    def store(self) -> Store:
        """The engine's store, read at each write (a test may wrap it after wiring)."""
        return self._ports.store

    # ----------------------------------------------------------------- one step item

    def step(self, state: WorkflowState | None, write: tx.Write) -> StepRecord | None:
        """Apply a step (or compensation) write: the new record, or None if it lost."""
        try:
            item = self.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed as lost:
            if state is not None and lost.current is not None:
                state.put(StepRecord.from_item(lost.current))
            return None
        rec = StepRecord.from_item(item)
        if state is not None:
            state.put(rec)
        return rec

    def step_with(
        self,
        state: WorkflowState | None,
        seen: StepRecord,
        write: tx.Write,
        extras: Sequence[tx.Write],
    ) -> StepRecord | None:
        """Apply a step write planned on `seen` together with the items that go with it (an
        approval's inbox items), in one transaction: the new record, or None if the step's
        write lost (folded as `step` folds it). The extras never lose (their guard holds for
        every item they name), so a lost transaction is the step's.

        A transaction returns no item: the new record is `seen` with the write applied, exact
        because the write is fenced on exactly what `seen` holds (its status and attempt)."""
        if not extras:
            return self.step(state, write)
        writes = [write, *extras]
        if any(w.condition is None for w in writes):
            raise ValueError("every write in a transaction is conditional")
        try:
            self.store.transact(
                [(w.pk, w.sk, w.update, w.condition) for w in writes if w.condition is not None]
            )
        except TransactionConflict as lost:
            if state is not None and lost.index == 0 and lost.current is not None:
                state.put(StepRecord.from_item(lost.current))
            return None
        before = seen.to_item() if seen.stored else {"pk": write.pk, "sk": write.sk}
        rec = StepRecord.from_item(write.update.apply(before))
        if state is not None:
            state.put(rec)
        return rec

    def step_contended(
        self,
        state: WorkflowState | None,
        seen: StepRecord,
        write: tx.Write,
        extras: Sequence[tx.Write],
    ) -> tuple[StepRecord | None, int | None]:
        """`step_with` for extras that may lose too (a signal's queue, whose head another
        wait may take first): (the new record, None) if every write landed, else (None, the
        index of the write that lost: 0 the step's, folded into `state` as `step` folds it)."""
        lost = self.contended([write, *extras])
        if lost is not None:
            index, current = lost
            if state is not None and index == 0 and current is not None:
                state.put(StepRecord.from_item(current))
            return None, index
        before = seen.to_item() if seen.stored else {"pk": write.pk, "sk": write.sk}
        rec = StepRecord.from_item(write.update.apply(before))
        if state is not None:
            state.put(rec)
        return rec, None

    def step_or_current(self, write: tx.Write) -> tuple[StepRecord | None, Item | None]:
        """Apply a step write: (the new record, None) if it won, (None, the item as it now is)
        if it lost. For a caller that decides by who won (an agent told it was fenced)."""
        try:
            item = self.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed as lost:
            return None, lost.current
        return StepRecord.from_item(item), None

    def create_step(self, state: WorkflowState, item: Item) -> bool:
        """Create a step item (a compensation reached by unwinding); False if it exists."""
        try:
            self.store.put_new(item)
        except ConditionFailed as lost:
            if lost.current is not None:
                state.put(StepRecord.from_item(lost.current))
            return False
        state.put(StepRecord.from_item(item))
        return True

    # ------------------------------------------------------------- the workflow item

    def workflow(self, state: WorkflowState | None, write: tx.Write) -> bool:
        """Apply a workflow write; fold the new (or, if it lost, current) item into `state`."""
        write = listing.keyed(write, state.workflow if state is not None else None)
        try:
            item = self.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed as lost:
            if state is not None and lost.current is not None:
                state.workflow = WorkflowRecord.from_item(lost.current)
            return False
        if state is not None:
            state.workflow = WorkflowRecord.from_item(item)
        return True

    def raw(self, write: tx.Write, listed: Item | None = None) -> bool:
        """Apply a write to an item that may not parse (the supervisor's failed looks);
        `listed` is that item, needed when the write sets its status (a park)."""
        write = listing.keyed(write, listed)
        try:
            self.store.update(write.pk, write.sk, write.update, write.condition)
        except ConditionFailed:
            return False
        return True

    def raw_or_current(self, write: tx.Write) -> tuple[Item | None, Item | None]:
        """Apply a write to an item of no workflow (a pool's limiter or breaker): (the new
        item, None) if it won, (None, the item as it now is) if it lost, with no second read."""
        try:
            return self.store.update(write.pk, write.sk, write.update, write.condition), None
        except ConditionFailed as lost:
            return None, lost.current

    # -------------------------------------------------------------------- several items

    def together(
        self,
        writes: Sequence[tx.Write],
        wf: WorkflowRecord | None = None,
        *,
        also: Sequence[WorkflowRecord] = (),
    ) -> bool:
        """Apply writes on distinct items in one transaction: all or nothing (`wf`: the
        workflow they were decided on, needed when one sets its status; `also`: other
        workflows whose status a write sets, each keyed by its own record)."""
        others = {wf_pk(o.workflow_id): o for o in also}
        writes = [listing.keyed(w, others.get(w.pk, wf)) for w in writes]
        for write in writes:
            if write.condition is None:
                raise ValueError("every write in a transaction is conditional")
        try:
            self.store.transact(
                [(w.pk, w.sk, w.update, w.condition) for w in writes if w.condition is not None]
            )
        except TransactionConflict:
            return False
        return True

    def contended(self, writes: Sequence[tx.Write]) -> tuple[int, Item | None] | None:
        """Apply writes on distinct items of no step in one transaction (a signal kept):
        None if they landed, else the index of the write that lost and its item as it is."""
        guarded = [(w.pk, w.sk, w.update, w.condition) for w in writes if w.condition]
        if len(guarded) != len(writes):
            raise ValueError("every write in a transaction is conditional")
        try:
            self.store.transact(guarded)
        except TransactionConflict as lost:
            return lost.index, lost.current
        return None

    def start_child(
        self, state: WorkflowState, seen: StepRecord, child: Item, write: tx.Write
    ) -> bool:
        """Create a child workflow's item and move its parent's step (planned on `seen`) to
        wait for it, in one transaction: True if both landed. Lost, the step is read again
        into `state` (a racing starter, a cancel, a hold won)."""
        pk, sk = child["pk"], child["sk"]
        put = Update(set={k: v for k, v in child.items() if k not in ("pk", "sk")})
        assert write.condition is not None
        try:
            self.store.transact(
                [(pk, sk, put, Missing("pk")), (write.pk, write.sk, write.update, write.condition)]
            )
        except TransactionConflict:
            current = self.store.get(write.pk, write.sk)
            if current is not None:
                state.put(StepRecord.from_item(current))
            return False
        before = seen.to_item() if seen.stored else {"pk": write.pk, "sk": write.sk}
        state.put(StepRecord.from_item(write.update.apply(before)))
        return True

    def start(self, item: Item, extra: Sequence[Item] = ()) -> Item | None:
        """Create a workflow's item (one conditional put: its steps come later; with `extra`,
        its business-key items, one transaction): None if it was created, else the item that
        exists (an idempotent replay, or a conflict)."""
        try:
            if extra:
                self.store.create([item, *extra])
            else:
                self.store.put_new(item)
        except ConditionFailed as lost:
            if lost.current is None:  # pragma: no cover - the port returns the item that won
                raise
            return lost.current
        except TransactionConflict as lost:
            # A new id's partition: only the workflow item (index 0) can exist already.
            if lost.index != 0 or lost.current is None:  # pragma: no cover
                raise
            return lost.current
        return None
