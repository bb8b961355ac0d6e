"""People and clocks (issue 25): who answers approvals, and a schedule that fires twice.

*The person.* Every time an Approval step starts to WAIT (seen on the table's writes as they
land, as `ApprovalRequested` would tell a chat channel), a person plans an answer: nobody
(the timeout ends it), well before the deadline, right around it (racing the supervisor's
timeout) or after it (too late); approve or reject; sometimes twice (a double click, or two
approvers at once, with their own verdicts); and sometimes someone who may not answer tries
too. Every answer is a fiber through the real `Approvals.decide` of the client's engine, so
store faults, slow calls and everything else interleave with it; an answer that failed
(a throttled read, a timeout after its write) is given again a second later, up to three
times, as a person clicks again. What each call was told is recorded for the checks
(`invariants.check_approvals`).

*The schedule.* A seed that rolls `schedule_dup` fires `sim_approval`'s schedule once, its
firing delivered two or three times (EventBridge Scheduler is at least once): some at the
same moment (so slow writes interleave the starts), some seconds later. Each delivery takes
the events handler's path: the schedule's pause check, then a start with the key
`schedule:<name>:<time>` owned by the schedules' principal; a failed delivery is retried a
second later (Scheduler's retry policy). `invariants.check_schedule_firings` checks one
workflow came of it.

Both draw from their own random streams (`person:{seed}`, `schedule:{seed}`), so a seed with
no approval and no schedule runs exactly as before they existed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from shepherd.changes import Change
from shepherd.definitions import Definition
from shepherd.engine.approvals import Approvals
from shepherd.engine.scheduler import Scheduler, derived_id
from shepherd.engine.schedules import Schedules
from shepherd.errors import ApprovalNotPending, WorkflowNotFound
from shepherd.keys import WF_SK, wf_pk
from shepherd.settings import DEFAULT_SCHEDULE_OWNER

from shepherd_sim.fibers import current
from shepherd_sim.invariants import ApprovalCall, Firing, approval_principals
from shepherd_sim.ports import FaultyStore, SimHooks

INTRUDER = "mallory"  # in no Approvers list, owns no workflow: must be told "not found"
SCHEDULE_OWNER = DEFAULT_SCHEDULE_OWNER
SCHEDULED_TYPE = "sim_approval"
RETRIES = 3  # a person clicks again after a failed answer; Scheduler retries a firing


# How long each store call of a person's API request takes (a round trip, in seconds): long
# enough that two answers given at once, or an answer and the supervisor's timeout, interleave.
ROUND_TRIPS = (0.005, 0.02, 0.08, 0.3)


class _StartWindow(Protocol):
    @property
    def start_window_s(self) -> float: ...


class Crowd(SimHooks, Protocol):
    """What the people and the schedule ask of the simulation they live in (besides what the
    faulty ports ask, `SimHooks`): its definitions, the client's APIs, its event queue and
    fibers, and where it keeps what their calls were told. A protocol, so this module imports
    nothing of `shepherd_sim.sim` (which imports it): `Simulation` is one."""

    t0: int
    stats: Counter[str]
    known: dict[str, str]
    accepted: dict[str, int]
    approval_calls: list[ApprovalCall]
    firings: list[Firing]
    writes_by: Counter[str]

    @property
    def defs(self) -> Mapping[str, Definition]: ...
    @property
    def config(self) -> _StartWindow: ...
    @property
    def people(self) -> People: ...
    @property
    def approvals(self) -> Approvals: ...
    @property
    def schedules_api(self) -> Schedules: ...
    @property
    def client(self) -> Scheduler: ...
    def schedule(self, at: int, kind: str, data: Any = None) -> None: ...
    def spawn(self, body: Callable[[], None], label: str = "") -> None: ...
    def acting(self, label: str) -> AbstractContextManager[None]: ...
    def who(self) -> str: ...
    def client_calls(self, delta: int) -> None: ...


class PersonStore(FaultyStore):
    """The store as a person's API request sees it: every call a round trip away (drawn from
    the person's stream, `ROUND_TRIPS`), then the faults every role meets."""

    sim: Crowd

    def _before(self, op: str, pk: str | None, keys: Sequence[tuple[str, str]] = ()) -> None:
        sim = self.sim
        if current() is not None:
            sent = sim.now()
            sim.sleep(sim.people.rng.choice(ROUND_TRIPS))
            for key in keys:  # lands late, with timestamps taken before it was sent
                sim.write_latency[key] = max(sim.write_latency.get(key, 0), sim.now() - sent)
        super()._before(op, pk, keys)


@dataclass(frozen=True)
class Answer:
    """One answer a person will give: who, which verdict, to which approval."""

    workflow_id: str
    step: str
    principal: str
    approve: bool
    tries: int = 0


@dataclass(frozen=True)
class Delivery:
    """One delivery of a schedule's firing."""

    wf_type: str
    name: str
    key: str
    payload: Any
    tries: int = 0


class People:
    """The approvers (and the intruder) and the schedule's deliveries of one simulation."""

    def __init__(self, sim: Crowd, seed: int) -> None:
        self.sim = sim
        self.rng = random.Random(f"person:{seed}")
        self.clock_rng = random.Random(f"schedule:{seed}")
        self.asked: set[tuple[str, str, int]] = set()

    # ------------------------------------------------------------------ approvals

    def changed(self, change: Change) -> None:
        """A write landed: an Approval step that starts to wait (a new attempt) is asked."""
        new, old = change.new or {}, change.old or {}
        if not str(new.get("sk", "")).startswith("S#") or not new.get("approval"):
            return
        if new.get("status") != "WAITING":
            return
        if old.get("status") == "WAITING" and old.get("attempt") == new.get("attempt"):
            return
        wf_id, step, attempt = str(new["pk"])[3:], str(new["sk"])[2:], int(new["attempt"])
        if (wf_id, step, attempt) in self.asked:
            return
        self.asked.add((wf_id, step, attempt))
        if attempt > 1:  # a resume asks again after a rejection or a timeout while paused
            self.sim.stats["approvals_asked_again"] += 1
        self.plan(wf_id, step, int(new["wake_at"]))

    def plan(self, wf_id: str, step: str, deadline: int) -> None:
        """When and how this approval is answered (drawn from the person's own stream)."""
        sim, rng = self.sim, self.rng
        wf = sim.memory.peek(wf_pk(wf_id), WF_SK) or {}
        allowed = approval_principals(str(wf.get("owner")), sim.defs[wf["wf_type"]], step)
        now = sim.now()
        r = rng.random()
        if r < 0.15:
            when = None  # nobody answers: the timeout ends it
            sim.stats["approval_left_to_its_timeout"] += 1
        elif r < 0.55:  # well before the deadline
            when = now + round(rng.uniform(0.05, 0.9) * max(1, deadline - now))
        elif r < 0.85:  # right around it: the person races the supervisor's timeout
            when = deadline + rng.randint(-700, 1200)
        else:  # too late
            when = deadline + rng.randint(1200, 6000)
        if when is not None:
            principal = rng.choice(allowed)
            approve = rng.random() < 0.6
            self.later(max(now + 1, when), Answer(wf_id, step, principal, approve))
            d = rng.random()
            if d < 0.15:  # a double click
                sim.stats["approval_double_clicks"] += 1
                again = Answer(wf_id, step, principal, approve)
                self.later(max(now + 1, when + rng.randint(0, 400)), again)
            elif d < 0.3:  # two approvers at once, each with a verdict of their own
                sim.stats["approval_two_approvers_at_once"] += 1
                other = rng.choice([p for p in allowed if p != principal] or [principal])
                rival = Answer(wf_id, step, other, rng.random() < 0.6)
                self.later(max(now + 1, when + rng.randint(0, 50)), rival)
        if rng.random() < 0.1:  # someone who may not answer tries
            at = now + rng.randint(1, max(2, deadline + 2000 - now))
            self.later(at, Answer(wf_id, step, INTRUDER, rng.random() < 0.5))

    def later(self, at: int, answer: Answer) -> None:
        self.sim.client_calls(+1)
        self.sim.schedule(at, "answer", answer)

    def on_answer(self, answer: Answer) -> None:
        label = "approve" if answer.approve else "reject"

        def body() -> None:
            self.sim.client_calls(-1)
            self.answer(answer)

        self.sim.spawn(body, label)

    def answer(self, answer: Answer) -> ApprovalCall:
        """One answer through the client's `Approvals.decide`, recorded as it came back."""
        sim = self.sim
        who = sim.who()
        step = sim.memory.peek(wf_pk(answer.workflow_id), f"S#{answer.step}") or {}
        waiting = int(step["attempt"]) if step.get("status") == "WAITING" else None
        started, writes = sim.now(), sim.writes_by[who]
        verdict = "approve" if answer.approve else "reject"
        attempt = None
        try:
            with sim.acting(verdict):
                rec = sim.approvals.decide(
                    answer.workflow_id,
                    answer.step,
                    principal=answer.principal,
                    approve=answer.approve,
                    comment=f"{verdict} by {answer.principal}",
                )
            outcome, attempt = "ok", rec.attempt
        except ApprovalNotPending:
            outcome = "not_pending"
        except WorkflowNotFound:
            outcome = "not_found"
        except Exception as exc:
            outcome = f"error:{type(exc).__name__}"
        call = ApprovalCall(
            started=started,
            ended=sim.now(),
            workflow_id=answer.workflow_id,
            step=answer.step,
            principal=answer.principal,
            approve=answer.approve,
            outcome=outcome,
            attempt=attempt,
            waiting=waiting,
            writes=sim.writes_by[who] - writes,
        )
        sim.approval_calls.append(call)
        sim.stats[f"approval_answers_{outcome.split(':')[0]}"] += 1
        if outcome == "not_pending" and waiting is not None:  # it was waiting as it began
            now = sim.memory.peek(wf_pk(answer.workflow_id), f"S#{answer.step}") or {}
            timed_out = "ApprovalTimedOut" in str(now.get("error"))
            sim.stats[
                "approval_answers_lost_to_the_timeout"
                if timed_out
                else "approval_answers_lost_a_race"
            ] += 1
        sim.trace(
            answer.workflow_id,
            f"person  {answer.principal} {verdict}s '{answer.step}' -> {outcome}"
            + (f" (attempt {attempt})" if attempt else ""),
        )
        if outcome.startswith("error") and answer.tries < RETRIES:
            retry = Answer(
                answer.workflow_id,
                answer.step,
                answer.principal,
                answer.approve,
                answer.tries + 1,
            )
            self.later(sim.now() + 1000, retry)
        return call

    # ------------------------------------------------------------------ schedules

    def plan_firing(self) -> None:
        """`sim_approval`'s schedule fires once, its firing delivered 2-3 times."""
        sim, rng = self.sim, self.clock_rng
        definition = sim.defs[SCHEDULED_TYPE]
        spec = definition.schedules[0]
        at = sim.t0 + round(rng.uniform(0, sim.config.start_window_s) * 1000)
        when = datetime.fromtimestamp(at // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        key = f"schedule:{spec.name}:{when}"
        sim.known.setdefault(derived_id(SCHEDULE_OWNER, key), SCHEDULED_TYPE)
        deliveries = rng.choice((2, 2, 3))
        sim.fault("schedule_dup", None, f"{key} delivered {deliveries}x")
        for n in range(deliveries):
            if n == 0:
                offset = 0
            elif rng.random() < 0.5:
                offset = rng.randint(0, 30)  # at once: the starts interleave
            else:
                offset = rng.randint(500, 15_000)  # Scheduler's retry, seconds later
            sim.client_calls(+1)
            delivery = Delivery(SCHEDULED_TYPE, spec.name, key, spec.input)
            sim.schedule(at + offset, "fire", delivery)

    def on_fire(self, delivery: Delivery) -> None:
        def body() -> None:
            self.sim.client_calls(-1)
            self.fire(delivery)

        self.sim.spawn(body, "schedule")

    def fire(self, delivery: Delivery) -> None:
        """The events handler's path for one delivery: the pause check, then the start."""
        sim = self.sim
        wf_id = None
        created = None
        try:
            with sim.acting("schedule"):
                if sim.schedules_api.paused(delivery.wf_type, delivery.name):
                    outcome = "skipped"
                else:
                    result = sim.client.start(
                        delivery.wf_type,
                        delivery.payload,
                        idempotency_key=delivery.key,
                        owner=SCHEDULE_OWNER,
                    )
                    outcome, wf_id, created = "ok", result.workflow_id, result.created
                    sim.accepted.setdefault(wf_id, sim.now())
        except Exception as exc:
            outcome = f"error:{type(exc).__name__}"
        sim.firings.append(Firing(sim.now(), delivery.key, SCHEDULE_OWNER, outcome, wf_id, created))
        sim.stats[f"schedule_deliveries_{outcome.split(':')[0]}"] += 1
        traced = wf_id or derived_id(SCHEDULE_OWNER, delivery.key)
        sim.trace(traced, f"sched   {delivery.key} -> {outcome} (created={created})")
        if outcome.startswith("error") and delivery.tries < RETRIES:
            sim.client_calls(+1)
            again = Delivery(
                delivery.wf_type, delivery.name, delivery.key, delivery.payload, delivery.tries + 1
            )
            sim.schedule(sim.now() + 1000, "fire", again)
