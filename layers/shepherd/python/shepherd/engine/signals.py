"""Signals: durable inputs into a running workflow (docs/architecture.md, Signals; issue 37).

A signal sent (`send`) is kept in its workflow's signal partition, numbered in its name's queue,
by one transaction that also counts it (at most limits.MAX_SIGNALS_KEPT wait) and, with a
signal id, keeps that id once. A WaitForSignal step takes the oldest kept signal of its name
(`take`) by one transaction that ends the step (guarded by its status, attempt and deadline,
as an Approval's answer is) and moves the queue's head past that signal (guarded by the head
it read): a signal is taken at most once, by exactly one wait, and a wait that timed out (its
own guarded write) can take none.

Who hands a signal over: its sender, right after keeping it (if a step waits then); the step,
right after it starts resting (if one was kept before); and, should a sender stop between
the two, the supervisor, at the step's next look or at the latest at its deadline, where a
signal kept before the deadline is taken instead of timing the step out.

Who may send: the workflow's owner or a principal its definition's `SignalSenders` lists,
matched as an Approval's `Approvers` are; anyone else is told the workflow does not exist.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from shepherd import business_keys, jsonsafe, limits
from shepherd.decisions import transitions as tx
from shepherd.definitions import ONE_YEAR, Definition
from shepherd.engine import listing
from shepherd.errors import (
    InputInvalid,
    InvalidTransition,
    PayloadTooLarge,
    SignalIdConflict,
    SignalUnknown,
    StoreUnavailable,
    TooManyMatches,
    TooManySignals,
    WorkflowNotFound,
)
from shepherd.keys import WF_SK, signal_id_sk, signal_queue_sk, signal_sk, signals_pk, wf_pk
from shepherd.model import StepRecord, StepStatus, WorkflowRecord, WorkflowState, dumps, loads

if TYPE_CHECKING:
    from shepherd.engine.catalog import Catalog
    from shepherd.engine.executor import Executor
    from shepherd.keys import Kind


class Scheduler(Protocol):
    """What signals need of the scheduler (`shepherd.engine.scheduler.Scheduler` is one): its
    ports and settings, loading a workflow, keeping a value, the watch pull of a write no
    agent's reach covered, and the advance after a step ended. A protocol, so this module sits
    below the scheduler that calls `take` and `time_out` (no import cycle)."""

    ports: Any
    catalog: Catalog
    config: Any
    executor: Executor

    def load(self, workflow_id: str) -> tuple[WorkflowState, Definition] | None: ...

    def keep_for(self, rec: StepRecord, field_name: str, text: str) -> str: ...

    def expires(self, now: int) -> int: ...

    def pull_due(
        self, state: WorkflowState, kind: Kind, name: str, *, at: int | None = None
    ) -> int: ...

    def pull_due_again(self, state: WorkflowState, kind: Kind, name: str, at: int) -> None: ...

    def advance_after(
        self, rec: StepRecord, definition: Definition | None = None, *, failed: bool = False
    ) -> None: ...


TIMEOUT_ERROR = "States.Timeout"  # a WaitForSignal step no signal reached in time
MAX_ROUNDS = 16  # senders racing for a queue's next number, waits racing for its head
# How long a kept signal (and its queue) outlives its last write: a workflow may wait up to a
# year for it, then keep it for the deployment's retention like any finished item.
KEPT_SECONDS = ONE_YEAR


@dataclass(frozen=True)
class PendingSignal:
    """A signal kept and not taken yet (`GET /workflows/{id}/signals`)."""

    name: str
    sequence: int
    payload: Any
    signal_id: str | None
    sender: str | None
    sent_at: int


@dataclass(frozen=True)
class SignalReceipt:
    """A signal accepted: its name's sequence number, and whether this request repeated a
    signal id already kept (nothing new was written then)."""

    workflow_id: str
    name: str
    sequence: int
    signal_id: str | None
    duplicate: bool
    taken_by: str | None = None  # the step that took it at once, if one waited


def signal_hash(name: str, text: str) -> str:
    """What a repeated signal id is compared by: its name and its payload, as sent."""
    return hashlib.sha256(f"{name}\n{text}".encode()).hexdigest()[:32]


def sender_principals(owner: str, definition: Definition) -> tuple[str, ...]:
    """Who may send a workflow signals: its owner and its definition's `SignalSenders`."""
    return tx.approval_principals(owner, definition.signal_senders)


class Signals:
    """Send signals to workflows and hand them to the steps that wait for them."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def send(
        self,
        workflow_id: str,
        name: str,
        payload: Any,
        *,
        principal: str,
        signal_id: str | None = None,
    ) -> SignalReceipt:
        """Keep a signal for `workflow_id` and hand it to a step waiting for it, if one does.

        WorkflowNotFound for a workflow `principal` may not signal, SignalUnknown for a name
        no step waits for, InvalidTransition (409) for a workflow that is over or unwinding,
        InputInvalid or PayloadTooLarge for a payload that is not JSON or over the inline cap,
        SignalIdConflict (409) for an id kept for another signal, TooManySignals (409) when
        limits.MAX_SIGNALS_KEPT wait already. Every check is made before anything is written."""
        wf, text = self._checked(workflow_id, name, payload, principal)
        digest = signal_hash(name, text)
        if signal_id is not None:
            current = self.scheduler.ports.store.get(
                signals_pk(workflow_id), signal_id_sk(signal_id)
            )
            repeated = self._repeated(current, signal_id, digest)
            if repeated is not None:
                return SignalReceipt(workflow_id, name, repeated, signal_id, duplicate=True)
        # A repeat is answered as it was even once the workflow is over (its sender retried).
        if wf.status.terminal or wf.status.unwinding:
            raise InvalidTransition(
                f"workflow {workflow_id} is {wf.status.value}: it takes no more signals"
            )
        sequence = self._keep(workflow_id, name, text, digest, principal, signal_id)
        if sequence < 0:  # a concurrent repeat of this id won: answered as a repeat
            return SignalReceipt(workflow_id, name, -1 - sequence, signal_id, duplicate=True)
        taken = self._hand_over(workflow_id, name)
        return SignalReceipt(workflow_id, name, sequence, signal_id, False, taken)

    def pending(
        self, workflow_id: str, principal: str
    ) -> tuple[dict[str, tuple[str, ...]], list[PendingSignal]]:
        """The signal names the workflow's steps wait for (name -> steps) and the signals kept
        for them that no step took yet, oldest first per name: one read per name's queue and
        one BatchGetItem of at most limits.MAX_SIGNALS_KEPT items. WorkflowNotFound for a
        principal who may not send it signals (as `send`)."""
        scheduler = self.scheduler
        store = scheduler.ports.store
        item = store.get(wf_pk(workflow_id), WF_SK)
        if item is None:
            raise WorkflowNotFound(workflow_id)
        wf = WorkflowRecord.from_item(item)
        definition = scheduler.catalog.version(wf.wf_type, wf.def_hash)
        if principal not in sender_principals(wf.owner, definition):
            raise WorkflowNotFound(workflow_id)
        pk = signals_pk(workflow_id)
        wanted: list[tuple[str, str]] = []
        for name in sorted(definition.signal_waits):
            queue = store.get(pk, signal_queue_sk(name)) or {}
            head, end = int(queue.get("head", 0)), int(queue.get("next", 0))
            wanted += [(pk, signal_sk(name, n)) for n in range(head, end)]
        found: list[PendingSignal] = []
        for start in range(0, len(wanted), 100):
            for kept in store.get_many(wanted[start : start + 100]):
                if kept.get("taken_at") is not None:
                    continue
                name, _, number = str(kept["sk"])[2:].rpartition("#")
                found.append(
                    PendingSignal(
                        name=name,
                        sequence=int(number),
                        payload=loads(str(kept["payload"])),
                        signal_id=kept.get("signal_id"),
                        sender=kept.get("sender"),
                        sent_at=int(kept["sent_at"]),
                    )
                )
        found.sort(key=lambda p: (p.name, p.sequence))
        return dict(definition.signal_waits), found

    def send_matching(
        self,
        name: str,
        match: dict[str, Any],
        payload: Any,
        *,
        principal: str,
        signal_id: str | None = None,
    ) -> list[SignalReceipt]:
        """Send signal `name` to every open workflow of `principal` whose WaitForSignal step of
        that name names a `Match` on these values (issue 37.3), newest first, through the
        by_key index (no scan): one receipt each, a workflow that ended meanwhile skipped.

        Bounded before anything is sent: TooManyMatches (409) past limits.MAX_MATCHED open
        workflows, or past limits.MAX_MATCH_ENTRIES entries read (finished workflows' entries
        leave the index when they end: `Scheduler.release_matches`); InputInvalid or
        PayloadTooLarge as `send`."""
        values = business_keys.check_match(name, match)
        try:
            text = jsonsafe.dumps(payload, what="payload")
        except jsonsafe.JsonRejected as exc:
            raise InputInvalid(exc.message, "payload") from None
        cap = self.scheduler.ports.payloads.inline_bytes
        if jsonsafe.size(text) > cap:
            raise PayloadTooLarge("signal payload", jsonsafe.size(text), cap)
        receipts = []
        for workflow_id in self.matched(principal, name, values):
            try:
                receipts.append(
                    self.send(workflow_id, name, payload, principal=principal, signal_id=signal_id)
                )
            except (InvalidTransition, WorkflowNotFound):
                continue  # it ended (or TTL took it) since it was read
        return receipts

    def matched(self, owner: str, name: str, values: str) -> list[str]:
        """The ids of `owner`'s open workflows waiting on signal `name` matched on `values`
        (canonical JSON), newest first: at most limits.MAX_MATCHED, else TooManyMatches."""
        store = self.scheduler.ports.store
        filters = listing.ListFilter(match=(name, values))
        found: list[str] = []
        read = 0
        after = None
        while True:
            page = listing.list_page(store, owner, filters, limit=limits.MAX_MATCHED, after=after)
            read += limits.MAX_MATCHED
            for item in page.items:
                wf = WorkflowRecord.from_item(item)
                if wf.status.terminal or wf.status.unwinding or wf.workflow_id in found:
                    continue
                found.append(wf.workflow_id)
            if len(found) > limits.MAX_MATCHED or (
                page.next_position is not None and read >= limits.MAX_MATCH_ENTRIES
            ):
                raise TooManyMatches(name, limits.MAX_MATCHED)
            if page.next_position is None:
                return found
            after = page.next_position

    def _checked(
        self, workflow_id: str, name: str, payload: Any, principal: str
    ) -> tuple[WorkflowRecord, str]:
        """The workflow item and the payload's text, if `principal` may send it this signal."""
        scheduler = self.scheduler
        item = scheduler.ports.store.get(wf_pk(workflow_id), WF_SK)
        if item is None:
            raise WorkflowNotFound(workflow_id)
        wf = WorkflowRecord.from_item(item)
        definition = scheduler.catalog.version(wf.wf_type, wf.def_hash)
        if principal not in sender_principals(wf.owner, definition):
            raise WorkflowNotFound(workflow_id)
        if name not in definition.signal_waits:
            raise SignalUnknown(workflow_id, name)
        try:
            text = jsonsafe.dumps(payload, what="payload")
        except jsonsafe.JsonRejected as exc:
            raise InputInvalid(exc.message, "payload") from None
        cap = scheduler.ports.payloads.inline_bytes
        size = jsonsafe.size(text)
        if size > cap:
            raise PayloadTooLarge("signal payload", size, cap)
        return wf, text

    def _keep(
        self,
        workflow_id: str,
        name: str,
        text: str,
        digest: str,
        principal: str,
        signal_id: str | None,
    ) -> int:
        """Write the signal (`tx.keep_signal`): its sequence number, or `-1 - n` when a
        concurrent request with the same id kept it first as number `n`."""
        scheduler = self.scheduler
        store = scheduler.ports.store
        pk = signals_pk(workflow_id)
        now = scheduler.ports.clock.now_ms()
        fields = {"payload": text, "hash": digest, "sent_at": now, "sender": principal}
        if signal_id is not None:
            fields["signal_id"] = signal_id
        expires_at = now // 1000 + KEPT_SECONDS + scheduler.config.retention_seconds
        for _ in range(MAX_ROUNDS):
            queue = store.get(pk, signal_queue_sk(name))
            sequence = 0 if queue is None else int(queue.get("next", 0))
            writes = tx.keep_signal(workflow_id, name, sequence, fields, signal_id, expires_at)
            lost = scheduler.executor.contended(writes)
            if lost is None:
                return sequence
            index, current = lost
            if index == 0:
                raise TooManySignals(workflow_id, limits.MAX_SIGNALS_KEPT)
            if index == 3 and signal_id is not None:
                repeated = self._repeated(current, signal_id, digest)
                if repeated is not None:
                    return -1 - repeated
            # index 1 or 2: another sender numbered its signal `sequence` first; the next one
        raise StoreUnavailable("the signal queue kept moving; try again")

    @staticmethod
    def _repeated(current: dict[str, Any] | None, signal_id: str, digest: str) -> int | None:
        """The sequence number of the signal an id was kept for, if it is this same signal;
        None if the id is not kept yet; SignalIdConflict if it was kept for another."""
        if current is None:
            return None
        if current.get("hash") != digest:
            raise SignalIdConflict(signal_id)
        return int(current["sequence"])

    def _hand_over(self, workflow_id: str, name: str) -> str | None:
        """After keeping a signal: read the workflow (after the write, so a step that started
        waiting before it is seen, and one that starts after reads the signal itself) and
        hand the oldest kept signal to the first step waiting for its name. Its answer makes
        successors ready that no agent's reach covered: the watch entry is pulled first, as
        for an Approval's answer (a sender that stops here leaves it to the supervisor)."""
        scheduler = self.scheduler
        loaded = scheduler.load(workflow_id)
        if loaded is None:
            return None
        state, definition = loaded
        for step in definition.signal_waits.get(name, ()):
            rec = state.steps.get(step)
            if rec is None or rec.status is not StepStatus.WAITING or rec.wake_at is None:
                continue
            pulled = scheduler.pull_due(state, "step", step)
            current = state.steps[step]
            taken = take(scheduler, state, definition, current)
            if taken is None:
                continue
            scheduler.advance_after(taken, definition)
            scheduler.pull_due_again(state, "step", step, pulled)
            return step
        return None


def take(
    scheduler: Scheduler,
    state: WorkflowState,
    definition: Definition,
    rec: StepRecord,
    *,
    sent_by: int | None = None,
) -> StepRecord | None:
    """Hand the oldest kept signal of its name to WaitForSignal step `rec` (WAITING, as read):
    the step as it now is (SUCCEEDED, its output the signal's payload), or None if no signal
    is kept (or, with `sent_by`, none was kept by then) or the step no longer waits. The step
    is not advanced: the caller does."""
    spec = definition.by_name[rec.name].wait_for_signal
    if spec is None or rec.status is not StepStatus.WAITING or rec.wake_at is None:
        return None
    store = scheduler.ports.store
    workflow_id = rec.workflow_id
    pk = signals_pk(workflow_id)
    for _ in range(MAX_ROUNDS):
        queue = store.get(pk, signal_queue_sk(spec.name))
        if queue is None or int(queue.get("head", 0)) >= int(queue.get("next", 0)):
            return None
        head = int(queue.get("head", 0))
        signal = store.get(pk, signal_sk(spec.name, head))
        if signal is None:  # pragma: no cover - written with its number, in one transaction
            return None
        if sent_by is not None and int(signal["sent_at"]) > sent_by:
            return None
        now = scheduler.ports.clock.now_ms()
        expires_at = scheduler.expires(now)
        output = scheduler.keep_for(rec, "output", str(signal["payload"]))
        decision = dumps(
            {
                "signal": spec.name,
                "sequence": head,
                "signal_id": signal.get("signal_id"),
                "sender": signal.get("sender"),
                "sent_at": signal.get("sent_at"),
            }
        )
        write = tx.decide(
            rec,
            now,
            approved=True,
            decision=decision,
            output=output,
            error=None,
            expires_at=expires_at,
        )
        extras = tx.take_signal(workflow_id, spec.name, head, rec, now, expires_at)
        taken, lost = scheduler.executor.step_contended(state, rec, write, extras)
        if taken is not None:
            return taken
        if lost == 0:
            return None  # it timed out, was cancelled, or took another signal meanwhile
        # another wait took signal `head` first: the next one, if any
    raise StoreUnavailable("the signal queue kept moving; try again")


def time_out(
    scheduler: Scheduler, state: WorkflowState, definition: Definition, rec: StepRecord
) -> StepRecord | None:
    """A WaitForSignal step's deadline: it takes a signal kept before the deadline if one is
    (its handing-over was interrupted), else fails for good with `States.Timeout`; either by
    the step's one guarded write. The timeout is guarded by its name's queue as it read it
    (`transitions.queue_as_read`): a signal kept after that read and before the timeout lands
    makes it lose and look again, so a wait never times out over a signal kept in time
    (found by the simulator, issue 37.7). The step as it now is, or None if it lost."""
    assert rec.wake_at is not None
    spec = definition.by_name[rec.name].wait_for_signal
    assert spec is not None
    store = scheduler.ports.store
    pk, queue_sk = signals_pk(rec.workflow_id), signal_queue_sk(spec.name)
    for _ in range(MAX_ROUNDS):
        taken = take(scheduler, state, definition, rec, sent_by=rec.wake_at)
        if taken is not None:
            return taken
        current = state.steps.get(rec.name, rec)
        if current.status is not StepStatus.WAITING or current.attempt != rec.attempt:
            return None  # it ended (a take by a sender won, a cancel) while this looked
        queue = store.get(pk, queue_sk)
        seen = None if queue is None or "next" not in queue else int(queue["next"])
        head = 0 if queue is None else int(queue.get("head", 0))
        if seen is not None and head < seen:
            signal = store.get(pk, signal_sk(spec.name, head))
            if signal is not None and int(signal["sent_at"]) <= rec.wake_at:
                continue  # kept in time since `take` read the queue: take it
        now = scheduler.ports.clock.now_ms()
        expires_at = scheduler.expires(now)
        if spec.on_timeout == "CONTINUE":  # the timer's branch: it succeeds, saying so
            decision = dumps({"signal": spec.name, "timed_out": True})
            output = scheduler.keep_for(rec, "output", dumps({"timed_out": True}))
            write = tx.decide(
                rec,
                now,
                approved=True,
                decision=decision,
                output=output,
                error=None,
                expires_at=expires_at,
            )
        else:
            error = tx.error_json(
                TIMEOUT_ERROR,
                f"no signal '{spec.name}' came within TimeoutSeconds ({spec.timeout_seconds})",
            )
            write = tx.decide(
                rec,
                now,
                approved=False,
                decision=None,
                output=None,
                error=error,
                expires_at=expires_at,
            )
        guard = tx.queue_as_read(rec.workflow_id, spec.name, seen, now, expires_at)
        ended, lost = scheduler.executor.step_contended(state, rec, write, [guard])
        if ended is not None:
            return ended
        if lost == 0:
            return None  # it was taken or cancelled meanwhile
        # a signal was kept since this read: look again
    raise StoreUnavailable("the signal queue kept moving; try again")
