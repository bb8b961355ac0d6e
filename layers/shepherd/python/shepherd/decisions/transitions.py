"""Every state change as one named conditional write: (key, update, condition).

Pure functions: they build writes and never perform them. The condition of each names the
status and the attempt it expects; `attempt` is the fencing token.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from shepherd import limits
from shepherd.conditions import Cond, Eq, Exists, In, Item, Lt, Missing, Update, all_of, any_of
from shepherd.decisions.retry import GiveUp, RetryDecision, RetryIn
from shepherd.definitions import MAX_SQS_DELAY
from shepherd.keys import (
    POOLS_PK,
    SCHEDULES_PK,
    SIGNALS_SK,
    WF_SK,
    inbox_item_sk,
    inbox_pk,
    inbox_shard,
    inbox_sk,
    join_sk,
    schedule_sk,
    signal_id_sk,
    signal_queue_sk,
    signal_sk,
    signals_pk,
    wf_pk,
)
from shepherd.model import (
    StepRecord,
    StepStatus,
    WorkflowRecord,
    WorkflowStatus,
    dumps,
    loads,
)


@dataclass(frozen=True)
class Write:
    pk: str
    sk: str
    update: Update
    condition: Cond | None  # None only for items no race can hurt (a pool's switch)


def _is(status: StepStatus | WorkflowStatus) -> Cond:
    return Eq("status", status.value)


def _attempt(attempt: int) -> Cond:
    return Eq("attempt", attempt)


def _seen(rec: StepRecord) -> Cond:
    """Exactly the step as it was read: its status and attempt, or, for a step with no item
    yet, that it still has none (whoever created it since planned on something newer)."""
    if not rec.stored:
        return Missing("pk")
    return all_of(_is(rec.status), _attempt(rec.attempt))


def _creating(rec: StepRecord, update: Update) -> Update:
    """`update` as it may create the step's item: what a PENDING step's item would hold
    (status, attempt 0, its workflow's type; a map item compensation's position in its
    order), kept where the item already holds it."""
    base = {
        "status": StepStatus.PENDING.value,
        "attempt": 0,
        "wf_type": rec.wf_type,
        "position": rec.position,
    }
    missing = {k: v for k, v in base.items() if v is not None and k not in update.names()}
    return replace(update, set_if_missing={**update.set_if_missing, **missing})


def _step_write(rec: StepRecord, update: Update, condition: Cond) -> Write:
    """A write planned on the step as read: on a step with no item yet, it creates it."""
    return Write(*rec.key, update if rec.stored else _creating(rec, update), condition)


def _history(
    attempt: int,
    outcome: str,
    at: int,
    error: str | None = None,
    token_hash: str | None = None,
    claimed_at: int | None = None,
    stored_error: str | None = None,
) -> dict[str, Any]:
    """One ended attempt: its number, outcome, end (and claim) time, error name and the
    start of its message (`stored_error`'s, cut to MAX_HISTORY_MESSAGE: the step keeps only
    its last error whole, so each earlier attempt says why it failed here). `th` keeps
    the hash of a callback attempt's task token, so the genuine token of an attempt that is
    over gets 409 and a forged one still gets 404."""
    entry: dict[str, Any] = {"a": attempt, "o": outcome, "t": at}
    if claimed_at is not None:
        entry["c"] = claimed_at
    if error:
        entry["e"] = error
    message = (loads(stored_error) or {}).get("message") if stored_error else None
    if isinstance(message, str) and message:
        entry["m"] = limits.truncate(message, limits.MAX_HISTORY_MESSAGE)
    if token_hash:
        entry["th"] = token_hash
    return entry


def error_json(error_type: str, message: str, **extra: Any) -> str:
    """An error as stored: its name and message cut to their caps (shepherd.limits)."""
    return dumps(
        {
            "type": limits.truncate(error_type, limits.MAX_ERROR_NAME),
            "message": limits.truncate(message, limits.MAX_ERROR_MESSAGE),
            **extra,
        }
    )


def _ended(rec: StepRecord, entry: dict[str, Any]) -> dict[str, Any]:
    """SET of the step's history with `entry` appended, keeping the last MAX_HISTORY.

    Exact without a read: every write that ends an attempt is fenced on the status and
    attempt it saw, and changes one of them, so the history it saw is the history it replaces.
    """
    return {"history": [*rec.history, entry][-limits.MAX_HISTORY :]}


# ---------------------------------------------------------------------------- step writes


def claim(rec: StepRecord, attempt: int, now: int, owner: str) -> Write:
    """QUEUED(a) -> RUNNING(a); for a step's attempt 1 also PENDING(0) -> RUNNING(1) (implicit
    dispatch), which creates the item when the step has none yet."""
    expected = all_of(_is(StepStatus.QUEUED), _attempt(attempt))
    if attempt == 1 and (rec.kind == "step" or rec.index is not None):
        pending = all_of(_is(StepStatus.PENDING), _attempt(0))
        expected = any_of(expected, pending, Missing("pk"))
    # A held step's workflow is paused and unwatched: a claim read before the pause loses.
    expected = all_of(expected, Missing("held_at"))
    update = Update(
        set={
            "status": StepStatus.RUNNING.value,
            "attempt": attempt,
            "claimed_at": now,
            "heartbeat_at": now,
            "lease_owner": owner,
        },
        # The evidence that this step may have acted, whatever its attempts end in.
        set_if_missing={"first_claimed_at": now},
    )
    if attempt == 1 and (rec.kind == "step" or rec.index is not None):
        update = _creating(rec, update)
    return Write(*rec.key, update, expected)


def heartbeat(
    rec: StepRecord,
    attempt: int,
    now: int,
    details: str | None,
    token_hash: str | None = None,
    *,
    quiet_ms: int = 0,
) -> Write:
    """Agent heartbeat (RUNNING), or a callback heartbeat (RUNNING/WAITING, token-checked).

    `quiet_ms` (a callback heartbeat): only if the token's last heartbeat is at least that
    old: its rate limit, exact under concurrent callers (the condition decides, not a read).
    The agent's own writes do not count: a carrier may heartbeat as soon as it has the token.
    """
    values: dict[str, Any] = {"heartbeat_at": now}
    if details is not None:
        values["details"] = details
    condition = _fenced(attempt, token_hash)
    if quiet_ms:
        values["callback_heartbeat_at"] = now
        last = "callback_heartbeat_at"
        quiet = any_of(Missing(last), Lt(last, now - quiet_ms + 1))
        condition = all_of(condition, quiet)
    return Write(*rec.key, Update(set=values), condition)


def _fenced(attempt: int, token_hash: str | None) -> Cond:
    """An agent's own attempt, or (with a token) a callback for that exact attempt."""
    if token_hash is None:
        return all_of(_is(StepStatus.RUNNING), _attempt(attempt))
    return all_of(
        In("status", (StepStatus.RUNNING.value, StepStatus.WAITING.value)),
        _attempt(attempt),
        Eq("callback_token", token_hash),
    )


def arm_callback(rec: StepRecord, attempt: int, token_hash: str) -> Write:
    """Record the attempt's task token before it leaves the agent, so a fast callback works."""
    return Write(
        *rec.key,
        Update(set={"callback_token": token_hash}),
        all_of(_is(StepStatus.RUNNING), _attempt(attempt)),
    )


def wait_for_callback(
    rec: StepRecord, attempt: int, now: int, token_hash: str, details: str | None = None
) -> Write:
    """RUNNING(a) -> WAITING(a): the agent is done; the callback will record the result."""
    return Write(
        *rec.key,
        Update(
            set={
                "status": StepStatus.WAITING.value,
                "heartbeat_at": now,
                **({"details": details} if details is not None else {}),
            },
            remove=("lease_owner",),
        ),
        all_of(_is(StepStatus.RUNNING), _attempt(attempt), Eq("callback_token", token_hash)),
    )


def complete(
    rec: StepRecord,
    attempt: int,
    now: int,
    output: str,
    expires_at: int,
    token_hash: str | None = None,
    variables: str | None = None,
) -> Write:
    """RUNNING(a) -> SUCCEEDED, fenced: a superseded attempt can no longer record anything.

    With `token_hash`, a callback completes RUNNING(a) or WAITING(a) holding that token.
    `variables`: what its `Assign` set (issue 42.5), in the same write.
    """
    entry = _history(
        attempt, "ok", now, token_hash=token_hash or rec.callback_token, claimed_at=rec.claimed_at
    )
    update = Update(
        set={
            "status": StepStatus.SUCCEEDED.value,
            "output": output,
            "finished_at": now,
            "expires_at": expires_at,
            **_ended(rec, entry),
            **({} if variables is None else {"variables": variables}),
        },
        remove=("lease_owner", "callback_token", "callback_heartbeat_at"),
        add={"attempts_total": 1},
    )
    return Write(*rec.key, update, _fenced(attempt, token_hash))


def iterate(
    rec: StepRecord,
    attempt: int,
    now: int,
    output: str,
    *,
    delay_ms: int,
    dispatch: bool,
    token_hash: str | None = None,
    fence: Cond | None = None,
) -> Write:
    """A `Repeat` step's iteration returned and `Until` did not hold (decisions/repeat.py):
    RUNNING(a) -> QUEUED(a+1) for the next iteration, fenced as `complete` is (a child
    step's: WAITING(a) on its child, `fence`), keeping only the counter and this output. The
    next attempt's number is the fence (a late result of this iteration's attempts can no
    longer land); its Retry budget starts again (`budget_from`). It rests `delay_ms` unsent
    (the supervisor sends it when due); with no interval and `dispatch`, it is sent at once
    (`dispatched_at` set)."""
    entry = _history(
        attempt, "ok", now, token_hash=token_hash or rec.callback_token, claimed_at=rec.claimed_at
    )
    values: dict[str, Any] = {
        "status": StepStatus.QUEUED.value,
        "attempt": attempt + 1,
        "budget_from": attempt,
        "available_at": now + delay_ms,
        "output": output,
        **_ended(rec, entry),
    }
    remove = [
        "claimed_at",
        "heartbeat_at",
        "lease_owner",
        "callback_token",
        "callback_heartbeat_at",
        "resent_at",
        "details",
        "error",
    ]
    add = {"attempts_total": 1, "iterations": 1}
    if dispatch and delay_ms == 0:
        values["dispatched_at"] = now
        add["dispatches"] = 1
    else:
        remove.append("dispatched_at")
    update = Update(values, tuple(remove), add=add)
    return Write(*rec.key, update, fence or _fenced(attempt, token_hash))


def last_iteration(
    rec: StepRecord,
    attempt: int,
    now: int,
    output: str,
    expires_at: int,
    token_hash: str | None = None,
    *,
    child: bool = False,
    variables: str | None = None,
) -> Write:
    """A `Repeat` step's iteration after which `Until` held: `complete` (with what its
    `Assign` set; a child step's: `child_succeeded`), counting it."""
    if child:
        write = child_succeeded(rec, now, output, expires_at)
    else:
        write = complete(rec, attempt, now, output, expires_at, token_hash, variables=variables)
    update = replace(write.update, add={**write.update.add, "iterations": 1})
    return replace(write, update=update)


def loop_limit(
    rec: StepRecord,
    attempt: int,
    now: int,
    output: str,
    error: str,
    expires_at: int,
    token_hash: str | None = None,
    fence: Cond | None = None,
) -> Write:
    """A `Repeat` step's last allowed iteration returned and `Until` did not hold:
    RUNNING(a) -> FAILED for good (`States.LoopLimitExceeded`), fenced as `complete` is (a
    child step's: `fence`), keeping the last output (the view shows what the loop ended on)."""
    entry = _history(
        attempt, "ok", now, token_hash=token_hash or rec.callback_token, claimed_at=rec.claimed_at
    )
    update = Update(
        set={
            "status": StepStatus.FAILED.value,
            "fail_reason": "permanent",
            "error": error,
            "output": output,
            "finished_at": now,
            "expires_at": expires_at,
            **_ended(rec, entry),
        },
        remove=("lease_owner", "callback_token", "callback_heartbeat_at"),
        add={"attempts_total": 1, "iterations": 1},
    )
    return Write(*rec.key, update, fence or _fenced(attempt, token_hash))


def end_attempt(
    rec: StepRecord,
    *,
    attempt: int,
    now: int,
    error: str,
    error_type: str,
    outcome: str,
    decision: RetryDecision,
    expires_at: int,
    guard: Cond | None = None,
    token_hash: str | None = None,
    from_status: StepStatus = StepStatus.RUNNING,
    details: str | None = None,
    dispatch: bool = True,
) -> Write:
    """RUNNING(a) or WAITING(a) -> QUEUED(a+1) after a backoff, or -> FAILED.

    `dispatch=False` (the workflow is paused) queues the retry without sending it.

    `details` are progress details the attempt reported but had not heartbeated yet: kept
    for the next attempt to resume from.

    `outcome` is what happened to attempt `a` (`error`, `timeout`, `heartbeat_timeout`).
    A retry within SQS's delay limit is sent at once with a delay (`dispatched_at` set); a
    longer one is left for the supervisor to dispatch when due (`dispatched_at` absent).
    """
    fence = (
        _fenced(attempt, token_hash) if token_hash else all_of(_is(from_status), _attempt(attempt))
    )
    condition = all_of(fence, *([guard] if guard else []))
    ended = _history(
        attempt,
        outcome,
        now,
        limits.truncate(error_type, limits.MAX_ERROR_NAME),
        token_hash or rec.callback_token,
        rec.claimed_at,
        error,
    )
    if isinstance(decision, RetryIn):
        available_at = now + decision.delay_ms
        values: dict[str, Any] = {
            "status": StepStatus.QUEUED.value,
            "attempt": attempt + 1,
            "available_at": available_at,
            "error": error,
            **_ended(rec, ended),
        }
        if details is not None:
            values["details"] = details
        remove = [
            "claimed_at",
            "heartbeat_at",
            "lease_owner",
            "callback_token",
            "callback_heartbeat_at",
            "resent_at",
        ]
        add = {"attempts_total": 1}
        if dispatch and decision.delay_ms <= MAX_SQS_DELAY * 1000:
            values["dispatched_at"] = now
            add["dispatches"] = 1
        else:
            remove.append("dispatched_at")
        return Write(*rec.key, Update(values, tuple(remove), add=add), condition)
    assert isinstance(decision, GiveUp)
    values = {
        "status": StepStatus.FAILED.value,
        "fail_reason": decision.reason,
        "error": error,
        "finished_at": now,
        "expires_at": expires_at,
        **_ended(rec, ended),
    }
    return Write(
        *rec.key,
        Update(
            values,
            ("lease_owner", "callback_token", "callback_heartbeat_at"),
            add={"attempts_total": 1},
        ),
        condition,
    )


def dispatch(rec: StepRecord, now: int, *, lost: bool = False) -> Write:
    """Mark a step dispatched (first time or again), guarded by exactly what was seen.

    `lost`: the supervisor sends this attempt's task again because its message looks lost;
    `resent_at` records that a copy is out, so a second copy waits for an empty queue
    (docs/architecture.md: no congestion collapse)."""
    copy = {"resent_at": now} if lost else {}
    if rec.status is StepStatus.PENDING:
        update = Update(
            set={
                "status": StepStatus.QUEUED.value,
                "attempt": 1,
                "dispatched_at": now,
                "available_at": now,
                **copy,
            },
            add={"dispatches": 1},
        )
        return _step_write(rec, update, _seen(rec))
    seen = (
        Missing("dispatched_at")
        if rec.dispatched_at is None
        else Eq("dispatched_at", rec.dispatched_at)
    )
    update = Update(set={"dispatched_at": now, **copy}, add={"dispatches": 1})
    return Write(*rec.key, update, all_of(_is(StepStatus.QUEUED), _attempt(rec.attempt), seen))


def fail_undeliverable(
    rec: StepRecord, attempt: int, now: int, error: str, expires_at: int
) -> Write:
    """QUEUED(a) (or a step with no item yet, sent implicitly) -> FAILED for good: its pool
    has no queue, so no message for it can ever be delivered. Never claimed: it had no
    effect, and its history says so (no attempt ended)."""
    entry = _history(attempt, "undeliverable", now, "PoolRemoved", stored_error=error)
    update = Update(
        set={
            "status": StepStatus.FAILED.value,
            "attempt": max(attempt, rec.attempt),
            "fail_reason": "permanent",
            "error": error,
            "finished_at": now,
            "expires_at": expires_at,
            **_ended(rec, entry),
        },
    )
    if rec.stored and rec.status is StepStatus.QUEUED:
        condition = all_of(_is(StepStatus.QUEUED), _attempt(rec.attempt))
    else:
        condition = _seen(rec)
    return _step_write(rec, update, condition)


def cancel(rec: StepRecord, now: int, expires_at: int) -> Write:
    """PENDING/QUEUED -> CANCELLED: only if still exactly as seen (a claim may win the race)."""
    update = Update(
        set={"status": StepStatus.CANCELLED.value, "finished_at": now, "expires_at": expires_at}
    )
    return _step_write(rec, update, _seen(rec))


def skip(rec: StepRecord, now: int, expires_at: int) -> Write:
    """PENDING (or no item) -> SKIPPED: its condition was false. Only if still exactly as seen,
    so racing planners skip it once and the winner alone advances past it."""
    update = Update(
        set={"status": StepStatus.SKIPPED.value, "finished_at": now, "expires_at": expires_at}
    )
    return _step_write(rec, update, _seen(rec))


def pass_through(
    rec: StepRecord, now: int, output: str, expires_at: int, variables: str | None = None
) -> Write:
    """A ready Pass step, PENDING (or no item; or QUEUED after a resume) -> SUCCEEDED with
    `output` (as stored), in one write: no message, no claim, no attempt run. Only if still
    exactly as seen, so racing planners pass it once and the winner alone advances past it."""
    attempt = max(rec.attempt, 1)
    entry = _history(attempt, "ok", now)
    update = Update(
        set={
            "status": StepStatus.SUCCEEDED.value,
            "attempt": attempt,
            "output": output,
            "finished_at": now,
            "expires_at": expires_at,
            **_ended(rec, entry),
            **({} if variables is None else {"variables": variables}),
        },
        remove=("fail_reason",) if rec.stored else (),
        add={"attempts_total": 1},
    )
    return _step_write(rec, update, all_of(_seen(rec), Missing("held_at")))


def start_wait(
    rec: StepRecord, now: int, wake_at: int, approvers: tuple[str, ...] | None = None
) -> Write:
    """A ready Wait step, PENDING (or no item; or QUEUED after a resume) -> WAITING with its
    wake time. No message, no claim: only the supervisor's wake (or an unwinding's cancel)
    moves it on. Guarded as a claim is, by what was read and by no hold (a paused workflow
    that left the watch index must not gain a wait nobody watches)."""
    update = Update(
        set={
            "status": StepStatus.WAITING.value,
            "attempt": max(rec.attempt, 1),
            "claimed_at": now,
            "wake_at": wake_at,
            # An Approval announces itself (ApprovalRequested) with who may answer.
            **({} if approvers is None else {"approval": True, "approvers": list(approvers)}),
        },
        # A resume asks again (a new attempt): the last attempt's answer is not this one's.
        remove=("decision", "fail_reason") if rec.stored else (),
    )
    return _step_write(rec, update, all_of(_seen(rec), Missing("held_at")))


def wake(rec: StepRecord, now: int, expires_at: int) -> Write:
    """WAITING(a, wake_at) -> SUCCEEDED with no output: its time came. Fenced on the attempt
    and the wake time it saw, so it lands once."""
    assert rec.wake_at is not None
    entry = _history(rec.attempt, "ok", now, claimed_at=rec.claimed_at)
    update = Update(
        set={
            "status": StepStatus.SUCCEEDED.value,
            "finished_at": now,
            "expires_at": expires_at,
            **_ended(rec, entry),
        },
        add={"attempts_total": 1},
    )
    condition = all_of(_is(StepStatus.WAITING), _attempt(rec.attempt), Eq("wake_at", rec.wake_at))
    return Write(*rec.key, update, condition)


def decide(
    rec: StepRecord,
    now: int,
    *,
    approved: bool,
    decision: str | None,
    output: str | None,
    error: str | None,
    expires_at: int,
) -> Write:
    """An Approval step's end: WAITING(a, deadline) -> SUCCEEDED (approved, with `output`) or
    FAILED (rejected, or its timeout: `error`, never retried), with who decided (`decision`,
    JSON; None for a timeout). Guarded by the status, attempt and deadline it saw: an answer
    given twice, or as it times out, ends the step once."""
    assert rec.wake_at is not None
    values: dict[str, Any] = {"finished_at": now, "expires_at": expires_at}
    if decision is not None:
        values["decision"] = decision
    if approved:
        entry = _history(rec.attempt, "ok", now, claimed_at=rec.claimed_at)
        values |= {"status": StepStatus.SUCCEEDED.value, "output": output}
    else:
        name = (loads(error) or {}).get("type", "Rejected")
        outcome = "error" if decision is not None else "timeout"
        entry = _history(
            rec.attempt, outcome, now, name, claimed_at=rec.claimed_at, stored_error=error
        )
        values |= {"status": StepStatus.FAILED.value, "error": error, "fail_reason": "permanent"}
    update = Update(set={**values, **_ended(rec, entry)}, add={"attempts_total": 1})
    condition = all_of(_is(StepStatus.WAITING), _attempt(rec.attempt), Eq("wake_at", rec.wake_at))
    return Write(*rec.key, update, condition)


# ------------------------------------------------------------------ the approval inbox

# An inbox item is never a step (it has no status): the guard of its writes, which ride in the
# transaction of the approval step's own fenced write and so need no fence of their own.
_INBOX_ITEM = Missing("status")


# An approver named without an ARN is a caller of the local stack, which acts as this IAM
# user of moto's account (`X-Shepherd-Caller: alice`): no AWS account has that number, so a
# bare name in `Approvers` answers locally and matches no deployed principal.
LOCAL_USER_ARN = "arn:aws:iam::000000000000:user/{}"


def approver_principal(approver: str) -> str:
    """The principal an `Approvers` entry names: an ARN as written, a bare name as the local
    stack's caller of that name."""
    return approver if approver.startswith("arn:") else LOCAL_USER_ARN.format(approver)


def approval_principals(owner: str, approvers: Sequence[str]) -> tuple[str, ...]:
    """Who may answer an approval, each once: the workflow's owner, then its `Approvers`
    (at most 1 + limits.MAX_APPROVERS)."""
    return tuple(dict.fromkeys((owner, *(approver_principal(a) for a in approvers))))


def inbox_entries(
    wf: WorkflowRecord,
    rec: StepRecord,
    principals: Sequence[str],
    requested_at: int,
    due_at: int,
) -> list[Write]:
    """One inbox item per principal for an Approval step starting to wait (docs/architecture.md,
    The approval inbox): written in the transaction of its WAITING write, so a pending
    approval is listed exactly while its step waits. A leftover item of an earlier attempt is
    overwritten (and its expiry lifted)."""
    workflow_id = wf.workflow_id
    shard = inbox_shard(workflow_id)
    return [
        Write(
            wf_pk(workflow_id),
            inbox_item_sk(rec.name, principal),
            Update(
                set={
                    "inbox_pk": inbox_pk(principal, shard),
                    "inbox_sk": inbox_sk(requested_at, workflow_id, rec.name),
                    "wf_type": wf.wf_type,
                    "step": rec.name,
                    "requested_at": requested_at,
                    "approval_due_at": due_at,
                },
                remove=("expires_at",),
            ),
            _INBOX_ITEM,
        )
        for principal in principals
    ]


def inbox_cleared(rec: StepRecord, principals: Sequence[str], expires_at: int) -> list[Write]:
    """The inbox items of an approval that stops waiting (answered, timed out, cancelled),
    in the transaction of that write: out of the sparse index at once (their index keys
    removed), the items themselves left to TTL as a finished step is (no function of the
    engine may delete an item: docs/architecture.md, The approval inbox)."""
    return [
        Write(
            wf_pk(rec.workflow_id),
            inbox_item_sk(rec.name, principal),
            Update(set={"expires_at": expires_at}, remove=("inbox_pk", "inbox_sk")),
            _INBOX_ITEM,
        )
        for principal in principals
    ]


# ------------------------------------------------------------------ signals (issue 37)

# A signal's items are never steps (no status): their writes are guarded by what they count.


def keep_signal(
    workflow_id: str,
    name: str,
    sequence: int,
    fields: dict[str, Any],
    signal_id: str | None,
    expires_at: int,
) -> list[Write]:
    """A signal sent, as one transaction: counted among the kept ones (refused past
    limits.MAX_SIGNALS_KEPT: index 0 loses), numbered next in its name's queue (index 1 loses
    to a concurrent sender, who took `sequence`), written under that number (index 2), and,
    with an id, that id kept once (index 3 loses to a repeat: the caller compares). Every item
    expires `expires_at` after its last write unless a take moves it sooner."""
    pk = signals_pk(workflow_id)
    keep = {"expires_at": expires_at}
    writes = [
        Write(
            pk,
            SIGNALS_SK,
            Update(set=keep, add={"kept": 1}),
            any_of(Missing("kept"), Lt("kept", limits.MAX_SIGNALS_KEPT)),
        ),
        Write(
            pk,
            signal_queue_sk(name),
            Update(set={"next": sequence + 1, **keep}, set_if_missing={"head": 0}),
            Eq("next", sequence) if sequence else Missing("next"),
        ),
        Write(pk, signal_sk(name, sequence), Update(set={**fields, **keep}), Missing("pk")),
    ]
    if signal_id is not None:
        remembered = {"name": name, "sequence": sequence, "hash": fields["hash"], **keep}
        writes.append(Write(pk, signal_id_sk(signal_id), Update(set=remembered), Missing("pk")))
    return writes


def take_signal(
    workflow_id: str, name: str, head: int, by: StepRecord, now: int, expires_at: int
) -> list[Write]:
    """Signal `head` of its name taken by waiting step `by`: the queue's head moves past it
    (guarded by the head seen: a concurrent take of the same one loses), it is counted out,
    and marked taken (never twice), in the transaction of the step's own guarded end."""
    pk = signals_pk(workflow_id)
    return [
        Write(pk, signal_queue_sk(name), Update(set={"head": head + 1}), Eq("head", head)),
        Write(pk, SIGNALS_SK, Update(add={"kept": -1}), Exists("kept")),
        Write(
            pk,
            signal_sk(name, head),
            Update(
                set={
                    "taken_by": by.name,
                    "taken_attempt": by.attempt,
                    "taken_at": now,
                    "expires_at": expires_at,
                }
            ),
            Missing("taken_at"),
        ),
    ]


def queue_as_read(
    workflow_id: str, name: str, seen_next: int | None, now: int, expires_at: int
) -> Write:
    """A WaitForSignal step's timeout, in the transaction of its guarded end: its name's queue
    is as the timeout read it (`next` as seen, or no signal ever kept), so a signal kept after
    that read, before the timeout lands, makes the timeout lose and look again (the signal is
    taken if it was sent by the deadline). Writes only a mark (and, to a queue not written
    yet, its expiry): `next` and `head` are untouched."""
    guard = Missing("next") if seen_next is None else Eq("next", seen_next)
    update = Update(set={"timed_out_at": now}, set_if_missing={"expires_at": expires_at})
    return Write(signals_pk(workflow_id), signal_queue_sk(name), update, guard)


def tell_cancel(rec: StepRecord, now: int) -> Write:
    """Its workflow is cancelling: mark the running attempt so its agent's next heartbeat sees
    it (`AgentContext.cancel_requested`). Changes neither status nor attempt (no fence: the
    agent's own end still lands, and is undone), guarded by both and written once."""
    condition = all_of(_is(rec.status), _attempt(rec.attempt), Missing("cancel_requested_at"))
    return Write(*rec.key, Update(set={"cancel_requested_at": now}), condition)


def fail_wait(rec: StepRecord, now: int, error: str, expires_at: int) -> Write:
    """A ready Wait step whose time cannot be read (`UntilPath` absent or not a timestamp, or
    more than a year away) fails for good, as a permanent error would: never retried."""
    update = Update(
        set={
            "status": StepStatus.FAILED.value,
            "attempt": max(rec.attempt, 1),
            "error": error,
            "fail_reason": "permanent",
            "finished_at": now,
            "expires_at": expires_at,
        }
    )
    return _step_write(rec, update, _seen(rec))


def new_compensation(workflow_id: str, wf_type: str, name: str, now: int) -> Item:
    """The item of a compensation when unwinding reaches it, already dispatched."""
    return StepRecord(
        workflow_id=workflow_id,
        kind="compensation",
        name=name,
        status=StepStatus.QUEUED,
        attempt=1,
        dispatched_at=now,
        available_at=now,
        dispatches=1,
        wf_type=wf_type,
    ).to_item()


# ------------------------------------------------------------- child workflows (issue 24)


def start_child(rec: StepRecord, attempt: int, now: int, child_id: str) -> Write:
    """A child-workflow step, PENDING (or no item) for attempt 1 or QUEUED(a) for a retry,
    -> WAITING(a) for child `child_id`, in the transaction that creates the child. Guarded as
    a claim is: by what was read and by no hold (a paused workflow that left the watch index
    must not gain an attempt nobody watches). From then on the step may have acted."""
    update = Update(
        set={
            "status": StepStatus.WAITING.value,
            "attempt": attempt,
            "claimed_at": now,
            "heartbeat_at": now,
            "child_id": child_id,
        },
        remove=("child_cancel", "dispatched_at", "available_at"),
        set_if_missing={"first_claimed_at": now},
    )
    return _step_write(rec, update, all_of(_seen(rec), Missing("held_at")))


def open_directly(rec: StepRecord, now: int, values: dict[str, Any]) -> Write:
    """A ready map of child workflows opens with no claim (no pool carries it): PENDING (or
    no item; QUEUED after a resume) -> RUNNING with its counters and first window, guarded as
    a claim is (what was read, no hold), so racing openers open it once."""
    update = Update(
        set={
            "status": StepStatus.RUNNING.value,
            "attempt": max(rec.attempt, 1),
            "claimed_at": now,
            "heartbeat_at": now,
            **values,
        },
        set_if_missing={"first_claimed_at": now},
    )
    return _step_write(rec, update, all_of(_seen(rec), Missing("held_at")))


def waiting_for(rec: StepRecord) -> Cond:
    """The unit still waits for the child it read (its attempt, that child)."""
    return all_of(_is(StepStatus.WAITING), _attempt(rec.attempt), Eq("child_id", rec.child_id))


def mark_child_cancel(rec: StepRecord, reason: str) -> Write:
    """Record why the parent asks this unit's child to cancel (timeout | unwinding), before
    it asks: the child's end then reads as the step's timeout, or as unwinding."""
    condition = all_of(waiting_for(rec), Missing("child_cancel"))
    return Write(*rec.key, Update(set={"child_cancel": reason}), condition)


def child_succeeded(rec: StepRecord, now: int, output: str, expires_at: int) -> Write:
    """WAITING(a, child) -> SUCCEEDED: the child ended SUCCEEDED (its output is the step's),
    or, for a compensation, the child it asked to undo itself ended COMPENSATED."""
    entry = _history(rec.attempt, "ok", now, claimed_at=rec.claimed_at)
    update = Update(
        set={
            "status": StepStatus.SUCCEEDED.value,
            "output": output,
            "finished_at": now,
            "expires_at": expires_at,
            **_ended(rec, entry),
        },
        add={"attempts_total": 1},
    )
    return Write(*rec.key, update, waiting_for(rec))


def compensate_child(child: WorkflowRecord, now: int, shard: str, error: str) -> Write:
    """A SUCCEEDED child whose parent unwinds undoes itself: -> COMPENSATING, back in the
    watch index due at once (a transition only its parent asks for)."""
    values: dict[str, Any] = {
        "status": WorkflowStatus.COMPENSATING.value,
        "updated_at": now,
        "watch_shard": shard,
        "due_at": now,
        "error": error,
    }
    return Write(
        wf_pk(child.workflow_id),
        WF_SK,
        Update(set=values, remove=("finished_at", "expires_at", ACTED)),
        all_of(_is(WorkflowStatus.SUCCEEDED), _redrives(child)),
    )


def child_compensation(workflow_id: str, wf_type: str, name: str, now: int, child_id: str) -> Item:
    """The compensation unit of a child-workflow step: it waits for the child to undo
    itself (no agent, no message)."""
    return StepRecord(
        workflow_id=workflow_id,
        kind="compensation",
        name=name,
        status=StepStatus.WAITING,
        attempt=1,
        claimed_at=now,
        first_claimed_at=now,
        wf_type=wf_type,
        child_id=child_id,
    ).to_item()


# ------------------------------------------------------------------------ workflow writes


def unwind(
    wf: WorkflowRecord,
    to: WorkflowStatus,
    now: int,
    error: str | None,
    *,
    shard: str,
    due_by: int,
) -> Write:
    """RUNNING -> an unwinding status, due no later than `due_by` (the compensations it will
    start are deadlines no step's reach counted)."""
    values: dict[str, Any] = {"status": to.value, "updated_at": now}
    if error is not None:
        values["error"] = error
    guards = [_is(wf.status)]
    pulled, seen_due = _pull_due(wf, shard, due_by)
    if pulled and seen_due is not None:
        values.update(pulled)
        guards.append(seen_due)
    return Write(wf_pk(wf.workflow_id), WF_SK, Update(set=values), all_of(*guards))


def _pull_due(wf: WorkflowRecord, shard: str, at: int) -> tuple[dict[str, Any], Cond | None]:
    """The watch entry due no later than `at`, exactly (docs/architecture.md, the deadline
    rule: a writer that creates a deadline nobody counted pulls the entry to it): an operator
    action (to now), an unwinding or a pause (to the deadlines they create). A PAUSED
    workflow's entry may be far off or gone (it is watched only for its attempts in flight).
    Never moves an entry later; guarded by the entry it saw, even one already due: meanwhile
    a supervisor may have taken a paused workflow out of the index (found by the fault
    simulator, seed 1589)."""
    if wf.due_at is None:
        return {"watch_shard": shard, "due_at": at}, Missing("due_at")
    if wf.due_at > at:
        return {"due_at": at}, Eq("due_at", wf.due_at)
    return {}, Eq("due_at", wf.due_at)


_LIVE = tuple(s.value for s in WorkflowStatus if not s.terminal)


def pull_due(wf: WorkflowRecord, shard: str, at: int) -> Write:
    """The watch entry due no later than `at`, alone: for a writer that creates a deadline no
    look counted (a callback's answer, a child's end), before its state write.

    Always a write that changes `due_at` (to `at`, or 1 ms earlier than it was): a look that
    read the workflow before this writer's state write plans on a stale state, and its move
    (guarded by the `due_at` it saw) must lose, or it would put the entry back after the new
    deadline (found by the fault simulator, seed 1459: a look read a callback step WAITING,
    the callback's success made the next step runnable without a pull, since the entry was
    already early, and the look's move landed after it). Only on a live workflow, so a pull
    that comes after the finish never puts a terminal workflow back in the index."""
    if wf.due_at is None:
        values: dict[str, Any] = {"watch_shard": shard, "due_at": at}
        seen: Cond = Missing("due_at")
    else:
        values, seen = {"due_at": min(at, wf.due_at - 1)}, Eq("due_at", wf.due_at)
    condition = all_of(In("status", _LIVE), seen)
    return Write(wf_pk(wf.workflow_id), WF_SK, Update(set=values), condition)


def _same_pause(wf: WorkflowRecord) -> Cond | None:
    """A write planned on a PAUSED workflow holds only for the pause it read: a resume and a
    new pause in between bring the status back to PAUSED (an ABA the entry's `due_at` does
    not always catch, since a look may leave an entry due; found by the fault simulator, seed
    3241: a pause timeout planned for the first pause struck the second one early)."""
    if wf.status is not WorkflowStatus.PAUSED:
        return None
    return Missing("paused_at") if wf.paused_at is None else Eq("paused_at", wf.paused_at)


def _operator_write(
    wf: WorkflowRecord,
    shard: str,
    now: int,
    values: dict[str, Any],
    acted: dict[str, Any] | None = None,
) -> Write:
    pulled, seen_due = _pull_due(wf, shard, now)
    guards = [g for g in (seen_due, _same_pause(wf)) if g is not None]
    condition = all_of(_is(wf.status), _redrives(wf), *guards)
    remove = _PAUSE_ATTRIBUTES if acted else (*_PAUSE_ATTRIBUTES, ACTED)
    return Write(
        wf_pk(wf.workflow_id),
        WF_SK,
        Update(set={**values, "updated_at": now, **pulled, **(acted or {})}, remove=remove),
        condition,
    )


_PAUSE_ATTRIBUTES = ("pause", "paused_at")
# Who did an operator action and when (JSON `{action, by, at}`), on the workflow item the
# action writes: the relay announces it with the transition (`shepherd.changes`). A write no
# person asked for (a pause timeout's give-up) removes it, so no event borrows an old one.
ACTED = "acted"


def acted(action: str, by: str | None, now: int) -> dict[str, Any] | None:
    """The `acted` attribute of an operator's write (None when no person asked for it)."""
    if by is None:
        return None
    return {ACTED: dumps({"action": action, "by": by, "at": now})}


def request_cancel(wf: WorkflowRecord, now: int, shard: str, by: str | None = None) -> Write:
    """RUNNING or PAUSED -> CANCELLING: stop dispatching and unwind, due at once."""
    return _operator_write(
        wf,
        shard,
        now,
        {"status": WorkflowStatus.CANCELLING.value, "cancel_requested_at": now},
        acted("cancel", by, now),
    )


def pause(
    wf: WorkflowRecord, now: int, reason: str, *, shard: str, timeout_ms: int | None
) -> Write:
    """RUNNING -> PAUSED (an operator, or a step that failed for good under OnFailure PAUSE).

    Its watch entry stays as it is (valid for a running workflow, so for a paused one too),
    pulled to the pause timeout if that comes sooner: the supervisor's next look computes
    what to watch while it is paused (its attempts in flight, its pause timeout) or takes it
    out of the index.
    """
    values: dict[str, Any] = {
        "status": WorkflowStatus.PAUSED.value,
        "updated_at": now,
        "paused_at": now,
        "pause": reason,
    }
    guards = [_is(WorkflowStatus.RUNNING), _redrives(wf)]
    if timeout_ms is not None:
        # Guarded by the entry it saw even when that is already sooner than the timeout: a
        # look planned on the RUNNING workflow may move it past the timeout meanwhile, and
        # this pause must then lose and be planned again (found by the fault simulator, seed
        # 956 at x4).
        pulled, seen_due = _pull_due(wf, shard, now + timeout_ms)
        values.update(pulled)
        if seen_due is not None:
            guards.append(seen_due)
    return Write(wf_pk(wf.workflow_id), WF_SK, Update(set=values), all_of(*guards))


def resume(wf: WorkflowRecord, now: int, shard: str, by: str | None = None) -> Write:
    """PAUSED -> RUNNING, due at once (in a transaction with its failed steps' re-queue)."""
    return _operator_write(
        wf, shard, now, {"status": WorkflowStatus.RUNNING.value}, acted("resume", by, now)
    )


def give_up(wf: WorkflowRecord, now: int, shard: str, error: str, by: str | None = None) -> Write:
    """RUNNING or PAUSED -> COMPENSATING: unwind as a failure would (an operator gave up, or
    the pause timed out), due at once."""
    return _operator_write(
        wf,
        shard,
        now,
        {"status": WorkflowStatus.COMPENSATING.value, "error": error},
        acted("compensate", by, now),
    )


def replace_input(rec: StepRecord, now: int, text: str, by: str) -> Write:
    """An operator's replacement input for a step not in flight and not succeeded, recorded
    in its history with who changed it (in the resume's transaction)."""
    entry = {"a": rec.attempt, "o": "input_replaced", "t": now, "by": by}
    return _step_write(rec, Update(set={"input": text, **_ended(rec, entry)}), _seen(rec))


def redrive_workflow(
    wf: WorkflowRecord,
    to: WorkflowStatus,
    now: int,
    shard: str,
    due_at: int,
    error: str | None,
    by: str | None = None,
) -> Write:
    """FAILED -> unwinding again, back in the watch index (with the cause it unwinds for)."""
    values: dict[str, Any] = {
        "status": to.value,
        "updated_at": now,
        "watch_shard": shard,
        "due_at": due_at,
        **(acted("retry", by, now) or {}),
    }
    if error is not None:
        values["error"] = error
    return Write(
        wf_pk(wf.workflow_id),
        WF_SK,
        Update(
            set=values,
            remove=("finished_at", "expires_at") if by else ("finished_at", "expires_at", ACTED),
            add={"redrives": 1},
        ),
        _is(WorkflowStatus.FAILED),
    )


def redrive_step(rec: StepRecord, now: int) -> Write:
    """FAILED(a) -> QUEUED(a+1) with a fresh retry budget; `attempt` keeps growing (fencing).
    A `Repeat` step's loop gets a fresh `MaxIterations` too (`loop_from`), its count and its
    last output kept (the next iteration goes on from it)."""
    update = Update(
        set={
            "status": StepStatus.QUEUED.value,
            "attempt": rec.attempt + 1,
            "budget_from": rec.attempt,
            "dispatched_at": now,
            "available_at": now,
            **({"loop_from": rec.iterations} if rec.iterations else {}),
        },
        remove=(
            "finished_at",
            "expires_at",
            "claimed_at",
            "heartbeat_at",
            "callback_token",
            "callback_heartbeat_at",
            "resent_at",
        ),
        add={"dispatches": 1},
    )
    return Write(*rec.key, update, all_of(_is(StepStatus.FAILED), _attempt(rec.attempt)))


def redrive_child_undo(rec: StepRecord, now: int) -> Write:
    """A failed child-undo unit (a child-workflow step's compensation, whose child's own undo
    failed): FAILED(a) -> WAITING(a+1) for the same child, which the same redrive brings back
    to undo itself again (no agent, no message: the child's end decides it, as before)."""
    update = Update(
        set={
            "status": StepStatus.WAITING.value,
            "attempt": rec.attempt + 1,
            "budget_from": rec.attempt,
            "claimed_at": now,
            # Set again (the same child): like the unit's creation, this write is the
            # attempt's claim, a wait for a child and no agent's.
            "child_id": rec.child_id,
        },
        remove=(
            "finished_at",
            "expires_at",
            "heartbeat_at",
            "callback_token",
            "callback_heartbeat_at",
            "resent_at",
        ),
    )
    condition = all_of(_is(StepStatus.FAILED), _attempt(rec.attempt), Eq("child_id", rec.child_id))
    return Write(*rec.key, update, condition)


def finish(
    wf: WorkflowRecord,
    to: WorkflowStatus,
    now: int,
    expires_at: int,
    *,
    error: str | None = None,
) -> Write:
    """-> a terminal status; leaves the watch index.

    The workflow's output is not copied here: it is its steps' outputs, assembled when read,
    so the workflow item never grows with them (shepherd.limits).
    """
    values: dict[str, Any] = {
        "status": to.value,
        "updated_at": now,
        "finished_at": now,
        "expires_at": expires_at,
    }
    if error is not None:
        values["error"] = error
    return Write(
        wf_pk(wf.workflow_id),
        WF_SK,
        Update(set=values, remove=("watch_shard", "due_at")),
        all_of(_is(wf.status), _redrives(wf)),
    )


def _redrives(wf: WorkflowRecord) -> Cond:
    """The workflow's fencing token: a redrive brings a FAILED workflow back to the status it
    failed from, so a write planned before it must not pass on the status alone."""
    return Missing("redrives") if not wf.redrives else Eq("redrives", wf.redrives)


def count_join(workflow_id: str, join: str | None, expires_at: int) -> tuple[str, str, Update]:
    """One more of a join's dependencies (None: of the end's sinks) done: an unconditional
    ADD on its counter item, a trigger for the bounded advance, never a decision."""
    update = Update(add={"done": 1}, set_if_missing={"expires_at": expires_at})
    return wf_pk(workflow_id), join_sk(join), update


def move_due(wf: WorkflowRecord, due_at: int | None, *, shard: str | None = None) -> Write:
    """Move the watch deadline (None: leave the index, for a paused workflow with nothing to
    watch), only if nobody moved it or changed the status meanwhile. `shard`: the workflow's
    shard under the current shard count; an entry in another (a count changed since) moves
    there.

    A look that got this far succeeded, so it also clears a count of failed looks.
    """
    seen = Missing("due_at") if wf.due_at is None else Eq("due_at", wf.due_at)
    remove = ("look_failures", "look_failed_at") if wf.look_failures else ()
    if due_at is None:
        update = Update(remove=("watch_shard", "due_at", *remove))
    else:
        values: dict[str, Any] = {"due_at": due_at}
        if shard is not None and shard != wf.watch_shard:
            values["watch_shard"] = shard
        update = Update(set=values, remove=remove)
    return Write(wf_pk(wf.workflow_id), WF_SK, update, all_of(_is(wf.status), seen, _redrives(wf)))


def unwatch_paused(
    wf: WorkflowRecord,
    unclaimed: Sequence[StepRecord],
    now: int,
    due_at: int | None = None,
    *,
    shard: str | None = None,
) -> list[Write]:
    """A paused workflow with nothing in flight leaves the watch index (or, with a pause
    timeout, moves its entry to it), and each step that could still be claimed (PENDING or
    QUEUED) is held, in one transaction.

    Without the hold, an agent that read the workflow before the pause could land its claim
    after this write and run an attempt nobody watches (until the pause timeout, if any: found
    by the fault simulator, seed 1380 at x4). With it, such a claim fails (the claim requires
    no hold), or it landed first and this transaction fails, so the workflow stays due and the
    next look watches the attempt. A resume releases the holds.
    """
    writes = [move_due(wf, due_at, shard=shard)]
    for rec in unclaimed:
        condition = all_of(_seen(rec), Missing("held_at"))
        writes.append(_step_write(rec, Update(set={"held_at": now}), condition))
    return writes


def release(rec: StepRecord) -> Write:
    """A resume lifts a hold (in the resume's transaction)."""
    return Write(*rec.key, Update(remove=("held_at",)), all_of(_is(rec.status), Exists("held_at")))


def pool_paused(pool: str, now: int, by: str) -> Write:
    """A pool's consumers stop: recorded for the supervisor (idempotent, unconditional)."""
    return Write(POOLS_PK, pool, Update(set={"paused": True, "paused_at": now, "by": by}), None)


def pool_resumed(pool: str, now: int, by: str) -> Write:
    """A pool's consumers start again; a queued task's dispatch grace restarts at `now`."""
    return Write(POOLS_PK, pool, Update(set={"paused": False, "resumed_at": now, "by": by}), None)


def schedule_paused(workflow_type: str, name: str, paused: bool, now: int, by: str) -> Write:
    """An operator pauses or resumes a schedule: the state every firing reads (idempotent,
    unconditional; the last word wins, as for a pool)."""
    values = {"paused": paused, "at": now, "by": by}
    return Write(SCHEDULES_PK, schedule_sk(workflow_type, name), Update(set=values), None)


def _failures_seen(seen: int) -> Cond:
    return Missing("look_failures") if not seen else Eq("look_failures", seen)


def look_failed(pk: str, seen_failures: int, now: int) -> Write:
    """A supervisor look at this workflow raised: count it; looks back off from `now`.

    Works on the raw item (the look may have failed because the item does not parse), only
    while the workflow is still in the watch index, and leaves `due_at` where it is: the
    entry stays due (invariant 3), and later looks skip it until the backoff has passed.
    """
    return Write(
        pk,
        WF_SK,
        Update(set={"look_failed_at": now}, add={"look_failures": 1}),
        all_of(Exists("due_at"), _failures_seen(seen_failures)),
    )


def park(
    pk: str, seen_status: str, seen_failures: int, now: int, expires_at: int, error: str
) -> Write:
    """Looks kept failing: FAILED with the reason, out of the watch index, for a person.

    `parked_from` remembers the status it had, which an operator's retry restores.
    """
    return Write(
        pk,
        WF_SK,
        Update(
            set={
                "status": WorkflowStatus.FAILED.value,
                "parked_from": seen_status,
                "error": error,
                "updated_at": now,
                "finished_at": now,
                "expires_at": expires_at,
            },
            remove=("watch_shard", "due_at", "look_failed_at"),
            add={"look_failures": 1},
        ),
        all_of(Exists("due_at"), Eq("status", seen_status), _failures_seen(seen_failures)),
    )


def unpark(
    wf: WorkflowRecord, now: int, shard: str, error: str | None, by: str | None = None
) -> Write:
    """FAILED (parked) -> the status it was parked from, due at once, its look count reset."""
    values: dict[str, Any] = {
        "status": wf.parked_from,
        "updated_at": now,
        "watch_shard": shard,
        "due_at": now,
        **(acted("retry", by, now) or {}),
    }
    if error is not None:
        values["error"] = error
    remove: tuple[str, ...] = (
        "finished_at",
        "expires_at",
        "parked_from",
        "look_failures",
        "look_failed_at",
    )
    if by is None:
        remove = (*remove, ACTED)
    return Write(
        wf_pk(wf.workflow_id),
        WF_SK,
        Update(
            set=values,
            remove=remove if error is not None else (*remove, "error"),
            add={"redrives": 1},
        ),
        all_of(_is(WorkflowStatus.FAILED), _redrives(wf), Exists("parked_from")),
    )


def finish_map(
    rec: StepRecord,
    now: int,
    expires_at: int,
    *,
    seen_status: str,
    output: str | None = None,
    error: str | None = None,
    reason: str = "permanent",
) -> Write:
    """A decided map (or map compensation) whose window drained ends its step: RUNNING ->
    SUCCEEDED with the item outputs (`output`), or -> FAILED (`error`). Guarded by the verdict
    it saw (`seen_status`): once decided, no item enters the window again, so a drained window
    stays drained, and the write needs no guard on it."""
    # A failed map's attempt says why in its entry, as any ended attempt does (name, message).
    name = None if error is None else (loads(error) or {}).get("type")
    entry = _history(
        rec.attempt,
        "ok" if output is not None else "error",
        now,
        None if name is None else limits.truncate(str(name), limits.MAX_ERROR_NAME),
        claimed_at=rec.claimed_at,
        stored_error=error,
    )
    values: dict[str, Any] = {"finished_at": now, "expires_at": expires_at, **_ended(rec, entry)}
    if output is not None:
        values.update(status=StepStatus.SUCCEEDED.value, output=output)
    else:
        values.update(status=StepStatus.FAILED.value, fail_reason=reason, error=error)
    return Write(
        *rec.key,
        Update(set=values, remove=("lease_owner",), add={"attempts_total": 1}),
        all_of(_is(StepStatus.RUNNING), _attempt(rec.attempt), Eq("m_status", seen_status)),
    )


__all__ = [
    "Write",
    "cancel",
    "claim",
    "complete",
    "dispatch",
    "end_attempt",
    "error_json",
    "finish",
    "give_up",
    "heartbeat",
    "look_failed",
    "move_due",
    "new_compensation",
    "park",
    "pause",
    "replace_input",
    "request_cancel",
    "resume",
    "unpark",
    "unwind",
]


def add_tag(
    step: Write, workflow_id: str, tags_as_read: str | None, tags: str, tag_item: Item
) -> list[Write]:
    """An agent's tag (`ctx.tag`, issue 37.5), as one transaction: its attempt still holds
    the step (index 0: the step's heartbeat write, fenced as any), the workflow's `tags`
    exactly as read (index 1 loses to a concurrent tag: read again, so the cap of
    limits.MAX_TAGS holds whoever tags at once) set to `tags`, and the tag's index item
    (index 2: written over the key's earlier value, whose index entry it replaces)."""
    as_read = Missing("tags") if tags_as_read is None else Eq("tags", tags_as_read)
    pk, sk = str(tag_item["pk"]), str(tag_item["sk"])
    fields = {k: v for k, v in tag_item.items() if k not in ("pk", "sk")}
    return [
        step,
        Write(wf_pk(workflow_id), WF_SK, Update(set={"tags": tags}), all_of(Exists("pk"), as_read)),
        Write(pk, sk, Update(set=fields), any_of(Missing("pk"), Exists("pk"))),
    ]
