"""`make demo`: the local stack running the example workflows, some with injected faults.

Starts moto, the control process (HTTP API, supervisor, events, the schedules' clock) and one
process per agent worker; starts every scenario over HTTP (one through an EventBridge event);
shows live progress; a fraud desk approves one large order and rejects another through the API,
one order's Wait step rests until its reminder is due, a customer amends an order
(`order_amendment`) by a signal matched on its order id (`POST /signals`) while another's
amendment window times out and takes its other branch (issue 37), the provision example's
`smoke-environment` schedule fires once, and three videos are transcoded by a Map step (one
clean, one with a flaky and a hanging chunk, one with more corrupt chunks than it tolerates,
unwound), and two tenants are onboarded with child workflows (one clean; one whose failing
replica unwinds the tenant, its primary's child compensated). Then the e-mail provider goes
down for a while: the `notifications` pool's circuit breaker opens, probes and closes, and the
orders caught in the outage finish. Prints a summary; exits 0 only if every workflow ended as
expected (its status, the steps its scenario names, small orders never reviewed, approvals
recorded as given, a wait never woken early, each map's items and undos, each child's end and
links to its parent, the schedule's firing started its workflow, the circuit opened and closed
again).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shepherd import schedules
from shepherd.definitions import load_directory
from shepherd.jsonsafe import canonical

from shepherd_cli import render
from shepherd_cli.apigw import caller_arn
from shepherd_cli.client import Api, ApiError, CliError
from shepherd_cli.console import Console
from shepherd_cli.local import BUS, LocalStack, StartupTimeout
from shepherd_cli.project import Project
from shepherd_cli.scenarios import (
    OUTAGE_BREAKER,
    OUTAGE_POOL,
    OUTAGE_SCENARIOS,
    OUTAGE_SECONDS,
    SCENARIOS,
    SCHEDULE,
    SCHEDULE_FIRES_AFTER_SECONDS,
    ChildExpect,
    MapExpect,
    Scenario,
)

ROOT = Path(__file__).resolve().parents[2]  # the repository: the examples are its project
TIME_LIMIT_SECONDS = 100
DEMO_CALLER = "demo"
EVENT_SOURCE = "demo.shop"
EVENT_OWNERS = {EVENT_SOURCE: caller_arn(DEMO_CALLER)}
TERMINAL = {"SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"}
# Steps a small order must never reach: the fraud review is asked only over its threshold.
REVIEWED = {"WAITING", "SUCCEEDED", "FAILED"}
VERDICT = {"approve": "approved", "reject": "rejected"}  # a decision's record of each answer
TIMEOUTS = {"States.Timeout", "States.HeartbeatTimeout"}


@dataclass
class Tracked:
    scenario: Scenario
    workflow_id: str
    started: float
    view: dict[str, Any] = field(default_factory=dict)
    finished: float | None = None
    operated: bool = False
    answered: bool = False
    answered_token: str | None = None
    upload: str | None = None  # the carrier's result, uploaded ahead
    note: str = ""  # what an operator (or the carrier, or the fraud desk) did to it
    payload: dict[str, Any] = field(default_factory=dict)  # the input as started
    decided: bool = False
    # A map scenario's items as GET .../steps/{step}/items shows them, and what each item's
    # key did in the example ledger (index -> undone or not), read before the stack stops.
    items: list[dict[str, Any]] = field(default_factory=list)
    effects: dict[int, bool] = field(default_factory=dict)
    # A child-workflow scenario's children as GET /workflows/{child} shows them, by the step
    # and item that started them (read once the parent ended: a parent is never terminal
    # while a child is not, so they have ended too).
    children: dict[tuple[str, int | None], list[dict[str, Any]]] = field(default_factory=dict)


def _start(api: Api, stack: LocalStack, s: Scenario, payload: dict[str, Any]) -> str:
    if not s.via_event:
        return str(api.start(s.wf_type, payload, f"demo-{s.label}")["workflow_id"])
    events = stack.client("events")
    # The event names no owner: the stack maps its source to the demo caller (EVENT_OWNERS).
    detail = {"type": s.wf_type, "input": payload, "idempotency_key": f"demo-{s.label}"}
    events.put_events(
        Entries=[
            {
                "Source": EVENT_SOURCE,
                "DetailType": "StartWorkflow",
                "Detail": json.dumps(detail),
                "EventBusName": BUS,
            }
        ]
    )
    for _ in range(100):  # the control process relays it to the events handler
        page = api.call("GET", "/workflows", query={"limit": 50})
        for item in page["items"]:
            if item["workflow_id"] not in _seen:
                view = api.call("GET", f"/workflows/{item['workflow_id']}")
                if (view["input"] or {}).get("order_id") == payload.get("order_id"):
                    return str(item["workflow_id"])
        time.sleep(0.1)
    raise RuntimeError("the StartWorkflow event did not start a workflow")


_seen: set[str] = set()


def _row(t: Tracked, now: float) -> str:
    view = t.view
    status = view.get("status", "?")
    steps = " ".join(render.SYMBOL.get(s["status"], "?") for s in view.get("steps", []))
    undo = " ".join(
        "↺" if c["status"] == "SUCCEEDED" else "…" for c in view.get("compensations", [])
    )
    seconds = (t.finished or now) - t.started
    return f"  {t.scenario.label:<22} {render.paint(status)}{' ' * (12 - len(status))} [{steps}] {undo:<10} {seconds:5.1f}s {render.DIM}{t.note}{render.RESET}"


def _counts(view: dict[str, Any]) -> dict[str, int]:
    items = view["steps"] + view["compensations"]
    attempts = [a for s in items for a in s["attempts"]]
    return {
        "attempts": len(attempts),
        "retries": sum(1 for s in items for a in s["attempts"] if a["attempt"] < s["attempt"]),
        "timeouts": sum(1 for a in attempts if "timeout" in a["outcome"]),
        "compensations": sum(1 for c in view["compensations"] if c["status"] == "SUCCEEDED"),
    }


def _maybe_operate(api: Api, t: Tracked) -> None:
    """The operator of a pausing scenario resumes it, gives up or cancels, once it is PAUSED."""
    action = t.scenario.on_pause
    if action is None or t.operated or t.view["status"] != "PAUSED":
        return
    t.operated = True
    step = (t.view.get("pause") or {}).get("step") or "its start"
    try:
        api.call("POST", f"/workflows/{t.workflow_id}/{action}")
        t.note = f"paused at {step}, operator: {action}"
    except ApiError as exc:
        t.note = f"{action} refused: {exc}"


def _carrier_upload(api: Api, t: Tracked) -> str:
    """The carrier's result, uploaded ahead (the upload names no token)."""
    size = t.scenario.carrier_bytes or 0
    result = {"tracking": f"CARRIER-{t.workflow_id[:6].upper()}", "manifest": "m" * size}
    return api.upload(canonical(result).encode())


def _maybe_answer(api: Api, t: Tracked) -> None:
    """The carrier of a callback scenario answers its waiting step: one call naming its
    result, uploaded before (a new upload for a retried attempt's new token)."""
    if t.scenario.carrier_bytes is None or t.answered:
        return
    waiting = next((s for s in t.view["steps"] if s["status"] == "WAITING"), None)
    token = ((waiting or {}).get("details") or {}).get("task_token")
    if waiting is None or token is None or token == t.answered_token:
        return
    t.answered_token = str(token)
    upload = t.upload or _carrier_upload(api, t)
    t.upload = None
    try:
        api.task(str(token), "success", {"output_upload": upload})
        t.answered = True
        size = t.scenario.carrier_bytes or 0
        t.note = f"the carrier answered {waiting['name']} with {size // (1024 * 1024)} MiB"
    except ApiError as exc:  # the attempt timed out first: answer the next one
        t.note = carrier_refused(exc)


def carrier_refused(exc: ApiError) -> str:
    """The note for a carrier's refused answer. A stale token is the engine doing its job on
    a slow machine (the attempt timed out and was retried before the carrier answered; the
    carrier answers the retry), said as such, not as a bare `409 TaskTokenStale` that reads
    like a failure in a demo that passes."""
    if exc.code == "TaskTokenStale":
        return (
            "the carrier answered after its attempt timed out: the answer was refused "
            "(TaskTokenStale, as it should be) and the carrier answers the retry"
        )
    return f"the carrier's answer was refused: {exc}"


def _step(view: dict[str, Any], name: str) -> dict[str, Any]:
    return next((s for s in view.get("steps", []) if s["name"] == name), {})


def _maybe_decide(api: Api, t: Tracked) -> None:
    """The fraud desk answers the order's fraud review once it waits for a person: one call,
    POST .../steps/fraud_review/approve or /reject, with a comment."""
    verdict = t.scenario.decide
    if verdict is None or t.decided or _step(t.view, "fraud_review").get("status") != "WAITING":
        return
    t.decided = True
    body = {"comment": t.scenario.comment} if t.scenario.comment else {}
    try:
        api.call("POST", f"/workflows/{t.workflow_id}/steps/fraud_review/{verdict}", body)
        t.note = f"fraud review {VERDICT[verdict]} through the API: {t.scenario.comment!r}"
    except ApiError as exc:
        t.note = f"the fraud desk's {verdict} was refused: {exc}"


def _amend(api: Api, t: Tracked) -> None:
    """The customer of an amendable order amends it right after placing it: one call, POST
    /signals naming the order id (not the workflow's), with a signal id a retry repeats. The
    order is indexed by its id at its start, so the signal reaches it at once and is kept
    until `await_amendment` waits (after `reserve_inventory`), which takes it as it starts:
    on a busy machine the 20 s window may have run out before an operator's first look."""
    amendment = t.scenario.amend
    if amendment is None:
        return
    order_id = t.payload["order_id"]
    body = {
        "name": "amend",
        "match": {"order_id": order_id},
        "payload": amendment,
        "signal_id": f"amend-{order_id}",
    }
    try:
        reply = api.call("POST", "/signals", body)
        reached = [s["workflow_id"] for s in reply["signals"]]
        t.note = f"amended by a signal matched on order_id {order_id} (reached {len(reached)})"
    except ApiError as exc:
        t.note = f"the amendment was refused: {exc}"


def _amend_problems(t: Tracked) -> list[str]:
    """An amendable order's window: the amendment is the wait's output and what was applied;
    with none, the wait says it timed out."""
    if t.scenario.wf_type != "order_amendment":
        return []
    output = _step(t.view, "await_amendment").get("output")
    if t.scenario.amend is not None:
        applied = (_step(t.view, "apply_amendment").get("output") or {}).get("amended")
        if output != t.scenario.amend or applied != t.scenario.amend:
            return [f"await_amendment's output is {output}, applied {applied}"]
    elif output != {"timed_out": True}:
        return [f"await_amendment's output is {output}, not a timeout's"]
    return []


def _show_wait(t: Tracked) -> None:
    """Say when the reminder's Wait step rests, and when the supervisor woke it."""
    if t.scenario.remind_in is None:
        return
    wait = _step(t.view, "until_reminder")
    if wait.get("status") == "WAITING" and wait.get("wake_at"):
        t.note = f"until_reminder rests until {wait['wake_at']} (no Lambda running)"
    elif wait.get("status") == "SUCCEEDED" and wait.get("finished_at"):
        late = _at(wait["finished_at"]) - _at(t.payload["remind_at"])
        sent = _step(t.view, "send_reminder").get("status") == "SUCCEEDED"
        t.note = f"until_reminder woke {late:.1f}s after remind_at" + (
            "; reminder sent" if sent else ""
        )


def _show_map(t: Tracked) -> None:
    """A map step's progress: its items by where they are."""
    if t.scenario.map is None:
        return
    counts = _step(t.view, t.scenario.map.step).get("map")
    if counts:
        t.note = f"{t.scenario.map.step}: {render.map_progress(counts)}"


OPERATOR_POLL_SECONDS = 0.2


def _pause_at_start(api: Api, t: Tracked) -> None:
    """The operator of a `pause_at_start` scenario pauses it as soon as it is started: at once,
    not when the operators start watching (after every start and the schedule's firing), by
    which time a busy machine may have finished it."""
    try:
        api.call("POST", f"/workflows/{t.workflow_id}/pause")
    except ApiError as exc:
        t.note = f"pause refused: {exc}"


def _operate(api: Api, t: Tracked, deadline: float) -> None:
    """One operator (or carrier) per scenario that needs one, watching only its workflow, so
    it acts within a fraction of a second however many workflows the demo follows."""
    if t.scenario.carrier_bytes is not None:
        t.upload = _carrier_upload(api, t)
    while time.monotonic() < deadline:
        try:
            t.view = api.call("GET", f"/workflows/{t.workflow_id}")
        except ApiError:
            time.sleep(OPERATOR_POLL_SECONDS)
            continue
        _maybe_operate(api, t)
        _maybe_answer(api, t)
        _maybe_decide(api, t)
        _show_wait(t)
        if t.view["status"] in TERMINAL:
            return
        time.sleep(OPERATOR_POLL_SECONDS)


def _operated(s: Scenario) -> bool:
    return (
        s.on_pause is not None
        or s.pause_at_start
        or s.carrier_bytes is not None
        or s.decide is not None
        or s.remind_in is not None
    )


def _at(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def _seconds(view: dict[str, Any]) -> float:
    """How long the workflow ran, from its own timestamps."""
    return _at(view.get("finished_at") or view["updated_at"]) - _at(view["created_at"])


def _review_threshold() -> float:
    """The amount over which an order waits for a fraud review, read from the definition."""
    order = load_directory(ROOT / "statemachines")["order_fulfilment"]
    condition = order.by_name["fraud_review"].condition
    assert condition is not None
    assert condition.numeric_greater_than is not None
    return float(condition.numeric_greater_than)


def _problems(t: Tracked, threshold: float) -> list[str]:
    """What in this workflow's end differs from its scenario, beyond its status."""
    view, s = t.view, t.scenario
    found = []
    for name, status in s.steps:
        if (got := _step(view, name).get("status")) != status:
            found.append(f"{name} ended {got}, expected {status}")
    if s.undone is not None:
        undone = tuple(c["name"] for c in view["compensations"] if c["status"] == "SUCCEEDED")
        if undone != s.undone:
            found.append(f"undone {list(undone)}, expected {list(s.undone)}")
    if s.wf_type == "order_fulfilment" and float(t.payload["amount"]) <= threshold:
        review = _step(view, "fraud_review").get("status")
        if review in REVIEWED or (view["status"] == "SUCCEEDED" and review != "SKIPPED"):
            found.append(f"a {t.payload['amount']} order's fraud_review is {review}, not SKIPPED")
    if s.decide is not None:
        decision = _step(view, "fraud_review").get("decision") or {}
        said = (decision.get("verdict"), decision.get("by"), decision.get("comment"))
        if said != (VERDICT[s.decide], caller_arn(DEMO_CALLER), s.comment):
            found.append(f"fraud_review's decision is {decision}")
        if s.decide == "reject" and (view.get("error") or {}).get("type") != "Rejected":
            found.append(f"the workflow's error is {view.get('error')}, not Rejected")
    if s.remind_in is not None:
        woke = _step(view, "until_reminder").get("finished_at")
        if woke is None or _at(woke) < _at(t.payload["remind_at"]):
            found.append(
                f"until_reminder woke at {woke}, before remind_at {t.payload['remind_at']}"
            )
    return found + _amend_problems(t)


def _map_problems(t: Tracked) -> list[str]:
    """What in a map step's end differs from its scenario: the verdict and counts, the items
    it names (status, attempts, the last failed attempt's error), the others, and the undos,
    as the engine counts them and as the example ledger holds them."""
    expect = t.scenario.map
    if expect is None:
        return []
    counts = _step(t.view, expect.step).get("map") or {}
    found = []
    if (counts.get("status"), counts.get("total")) != (expect.status, expect.items):
        found.append(
            f"{expect.step}'s map ended {counts.get('status')} with {counts.get('total')} "
            f"items, expected {expect.status} with {expect.items}"
        )
    items = {i["index"]: i for i in t.items}
    if sorted(items) != list(range(expect.items)):
        return [*found, f"{expect.step}'s items read: {sorted(items)}"]
    found += _item_problems(items, expect)
    claimed = {i for i, item in items.items() if item["attempt"] > 0}
    return found + _undo_problems(t, claimed, counts.get("compensated"))


def _item_problems(items: dict[int, dict[str, Any]], expect: MapExpect) -> list[str]:
    """The items a map scenario names end as it says; the others as the verdict implies."""
    marked = {m.index: m for m in expect.marked}
    found = []
    for index, item in items.items():
        m = marked.get(index)
        if m is None:
            if expect.status == "SUCCEEDED" and item["status"] != "SUCCEEDED":
                found.append(f"item {index} ended {item['status']}, expected SUCCEEDED")
            continue
        if item["status"] != m.status or item["attempt"] < m.min_attempts:
            found.append(
                f"item {index} ended {item['status']} after {item['attempt']} attempts, "
                f"expected {m.status} after at least {m.min_attempts}"
            )
        error = (item.get("error") or {}).get("type")
        # A busy machine may add an attempt (one timed out while starved): its timeout is then
        # the last error, which is no fault of the scenario's.
        added = item["attempt"] > m.min_attempts and error in TIMEOUTS
        if m.error is not None and error != m.error and not added:
            found.append(f"item {index}'s last error is {error}, expected {m.error}")
    return found


def _undo_problems(t: Tracked, claimed: set[int], compensated: int | None) -> list[str]:
    """An unwound map undid every item that may have acted (the engine's count) and left no
    effect behind (the ledger); a map that was not unwound undid nothing, and each of its
    items acted once."""
    assert t.scenario.map is not None
    if not t.scenario.map.undone:
        if sorted(t.effects) != sorted(claimed) or any(t.effects.values()):
            return [f"the ledger holds {t.effects} for the items {sorted(claimed)}"]
        return []
    found = []
    if compensated != len(claimed):
        found.append(f"{compensated} items undone, expected the {len(claimed)} that may have acted")
    left = sorted(i for i, undone in t.effects.items() if not undone)
    if left:
        found.append(f"items {left} acted and were never undone")
    if not set(t.effects) <= claimed:
        found.append(f"items {sorted(set(t.effects) - claimed)} acted but were never claimed")
    return found


def _story(t: Tracked) -> str | None:
    """One line on what a condition, an approval or a wait did in this workflow."""
    view, s = t.view, t.scenario
    if s.decide is not None:
        d = _step(view, "fraud_review").get("decision") or {}
        return f"fraud_review {d.get('verdict')} by {d.get('by')}: {d.get('comment')!r}; undone: {[c['name'] for c in view['compensations']] or 'nothing'}"
    if s.wf_type == "order_amendment":
        wait = _step(view, "await_amendment")
        if s.amend is not None:
            return f"await_amendment took the customer's signal (matched on order_id): {wait.get('output')}; apply_amendment {_step(view, 'apply_amendment').get('status')}"
        return f"await_amendment timed out ({wait.get('output')}); confirm_as_placed {_step(view, 'confirm_as_placed').get('status')}, apply_amendment {_step(view, 'apply_amendment').get('status')}"
    if s.remind_in is not None:
        wait = _step(view, "until_reminder")
        if wait.get("finished_at"):
            late = _at(wait["finished_at"]) - _at(t.payload["remind_at"])
            return f"until_reminder rested until {t.payload['remind_at']}, woke {late:.1f}s after it; send_reminder {_step(view, 'send_reminder').get('status')}"
    return None


def _map_story(t: Tracked) -> str:
    """One line on a map: its verdict, its items' attempts and errors, what was undone."""
    assert t.scenario.map is not None
    step = t.scenario.map.step
    counts = _step(t.view, step).get("map") or {}
    retried = [
        f"item {i['index']} {i['status']} after {i['attempt']} attempts "
        f"(last error {(i.get('error') or {}).get('type')})"
        for i in t.items
        if i["attempt"] > 1 or i["status"] == "FAILED"
    ]
    acted = len(t.effects)
    undone = sum(t.effects.values())
    return (
        f"{step} {counts.get('status')}, at most {counts.get('max_concurrency')} at once: "
        f"{render.map_progress(counts) if counts else 'no counts'}"
        f"{'; ' + '; '.join(retried) if retried else '; every item took one attempt'}"
        f"; the ledger: {acted} items acted, {undone} of them undone"
    )


def _follow(api: Api, tracked: list[Tracked], t0: float) -> None:
    """Poll every workflow until all end (bounded); redraw a table on a terminal, else log changes."""
    tty = sys.stdout.isatty()
    lines_drawn = 0
    last_status: dict[str, str] = {}
    operators = [
        threading.Thread(target=_operate, args=(api, t, t0 + TIME_LIMIT_SECONDS), daemon=True)
        for t in tracked
        if _operated(t.scenario)
    ]
    for operator in operators:
        operator.start()
    while time.monotonic() - t0 < TIME_LIMIT_SECONDS:
        now = time.monotonic()
        for t in tracked:
            if t.finished:
                continue
            if not _operated(t.scenario):  # an operator's thread keeps its view
                t.view = api.call("GET", f"/workflows/{t.workflow_id}")
                _show_map(t)
            if t.view.get("status") in TERMINAL:
                t.finished = now
        if tty:
            if lines_drawn:
                print(f"\033[{lines_drawn}F\033[J", end="")
            rows = [_row(t, now) for t in tracked]
            print("\n".join(rows), flush=True)
            lines_drawn = len(rows)
        else:
            for t in tracked:
                status = t.view.get("status", "")
                if last_status.get(t.workflow_id) != status + t.note:  # a new status or note
                    last_status[t.workflow_id] = status + t.note
                    note = f"  ({t.note})" if t.note else ""
                    print(f"  [{now - t0:5.1f}s] {t.scenario.label:<22} {status}{note}", flush=True)
        if all(t.finished for t in tracked):
            return
        time.sleep(0.4)


def _report(tracked: list[Tracked], threshold: float) -> bool:
    for t in tracked:
        view = t.view
        print(
            f"{render.BOLD}{t.scenario.label}{render.RESET} -> {render.paint(view['status'])}  {render.DIM}{t.scenario.story}{render.RESET}"
        )
        for line in render.status_lines(view)[2:]:
            print("  " + line)
    print()
    header = f"{'workflow':<22} {'status':<12} {'expected':<12} {'attempts':>8} {'retries':>8} {'timeouts':>9} {'undone':>7} {'seconds':>8}"
    print(render.BOLD + header + render.RESET)
    ok = True
    problems: dict[str, list[str]] = {}
    for t in tracked:
        c = _counts(t.view)
        status = t.view["status"]
        problems[t.scenario.label] = found = (
            _problems(t, threshold) + _map_problems(t) + _child_problems(t)
        )
        good = status == t.scenario.expected and not found
        ok &= good
        mark = "" if good else f"  {render.RED}<- unexpected{render.RESET}"
        seconds = _seconds(t.view)
        print(
            f"{t.scenario.label:<22} {render.paint(status)}{' ' * (12 - len(status))} {t.scenario.expected:<12} "
            f"{c['attempts']:>8} {c['retries']:>8} {c['timeouts']:>9} {c['compensations']:>7} {seconds:>8.1f}{mark}"
        )
    small = [
        t
        for t in tracked
        if t.scenario.wf_type == "order_fulfilment" and float(t.payload["amount"]) <= threshold
    ]
    reviews = [_step(t.view, "fraud_review").get("status") for t in small]
    print(f"\n{render.BOLD}Conditions, approvals and waits{render.RESET}")
    print(
        f"  orders of {threshold:g} or less: {len(small)}; fraud_review SKIPPED in "
        f"{reviews.count('SKIPPED')}, asked for in {sum(1 for r in reviews if r in REVIEWED)}"
    )
    for t in tracked:
        if (story := _story(t)) is not None:
            print(f"  {t.scenario.label}: {story}")
    mapped = [t for t in tracked if t.scenario.map is not None]
    if mapped:
        print(f"\n{render.BOLD}Map steps{render.RESET}")
    for t in mapped:
        print(f"  {t.scenario.label}: {_map_story(t)}")
    parents = [t for t in tracked if t.scenario.children]
    if parents:
        print(
            f"\n{render.BOLD}Child workflows{render.RESET} (each child's parent_id names its parent)"
        )
    for t in parents:
        print(f"  {t.scenario.label}: {_children_story(t)}")
    for label, found in problems.items():
        for problem in found:
            print(f"  {render.RED}{label}: {problem}  <- unexpected{render.RESET}")
    return ok


def _schedule_anchor() -> datetime:
    """When the schedules' clock starts counting: one period of SCHEDULE before a moment a few
    seconds from now, so its first firing comes while the demo runs."""
    definitions = load_directory(ROOT / "statemachines")
    (spec,) = [s for d in definitions.values() for s in d.schedules if s.name == SCHEDULE]
    rate = schedules.parse(spec.expression)
    assert isinstance(rate, schedules.Rate), f"{SCHEDULE} must be a rate(...) schedule"
    fires = datetime.now(UTC) + timedelta(seconds=SCHEDULE_FIRES_AFTER_SECONDS)
    return fires - timedelta(seconds=rate.seconds)


def _scheduled(api: Api, deadline: float) -> Tracked | None:
    """The workflow SCHEDULE's firing started (idempotency key `schedule:<name>:<time>`,
    owned by the demo's caller), once it shows in the caller's list; None if it never does."""
    prefix = f"schedule:{SCHEDULE}:"
    while time.monotonic() < deadline:
        listed = api.call("GET", "/workflows", query={"type": "provision_environment", "limit": 50})
        for row in listed["items"]:
            if (row.get("idempotency_key") or "").startswith(prefix):
                view = api.call("GET", f"/workflows/{row['workflow_id']}")
                scenario = Scenario(
                    "env-scheduled",
                    "provision_environment",
                    json.loads(view["input"]) if isinstance(view["input"], str) else view["input"],
                    "SUCCEEDED",
                    f"started by its schedule {SCHEDULE} ({row['idempotency_key']})",
                )
                return Tracked(scenario, row["workflow_id"], time.monotonic(), view=view)
        time.sleep(0.5)
    return None


@contextlib.contextmanager
def _workers_ledger(stack: LocalStack) -> Iterator[Any]:
    """The example ledger the workers' fake services write (shepherd_examples.agents.ledger),
    for the calls made inside: left set, it would send every later in-process agent of this
    process (the test suite runs the demo in process) to a file that is gone with the stack."""
    from shepherd_examples.agents import ledger

    previous = os.environ.get("SHEPHERD_LEDGER")
    os.environ["SHEPHERD_LEDGER"] = stack.env["SHEPHERD_LEDGER"]
    try:
        yield ledger
    finally:
        if previous is None:
            del os.environ["SHEPHERD_LEDGER"]
        else:
            os.environ["SHEPHERD_LEDGER"] = previous


def _read_maps(api: Api, stack: LocalStack, tracked: list[Tracked]) -> None:
    """For each map scenario, its items (every page) and what each item's key did in the
    example ledger, read while the stack still runs."""
    for t in tracked:
        expect = t.scenario.map
        if expect is None:
            continue
        path = f"/workflows/{t.workflow_id}/steps/{expect.step}/items"
        query: dict[str, Any] = {"limit": 100}
        t.items = []
        while True:
            page = api.call("GET", path, query=query)
            t.items += page["items"]
            if not page.get("next_token"):
                break
            query = {"limit": 100, "next_token": page["next_token"]}
        # An item's effect is recorded under its idempotency key, <workflow id>:<step>[<i>].
        own = re.compile(rf"{re.escape(t.workflow_id)}:{re.escape(expect.step)}\[(\d+)\]")
        with _workers_ledger(stack) as ledger:
            for service, key, _ in ledger.effects(t.workflow_id):
                if (matched := own.fullmatch(key)) is not None:
                    effect = ledger.find(service, key) or {}
                    t.effects[int(matched.group(1))] = "undone_by" in effect


def _pages(api: Api, path: str) -> list[dict[str, Any]]:
    query: dict[str, Any] = {"limit": 100}
    rows: list[dict[str, Any]] = []
    while True:
        page = api.call("GET", path, query=query)
        rows += page["items"]
        if not page.get("next_token"):
            return rows
        query = {"limit": 100, "next_token": page["next_token"]}


def _read_children(api: Api, tracked: list[Tracked]) -> None:
    """For each child-workflow scenario, the children its Workflow steps name (a plain step's
    `children`, a map's per item), each as its own view shows it."""
    for t in tracked:
        steps = {c.step: c.index is not None for c in t.scenario.children}
        ids: dict[tuple[str, int | None], list[str]] = {}
        for step, mapped in steps.items():
            if mapped:
                for item in _pages(api, f"/workflows/{t.workflow_id}/steps/{step}/items"):
                    ids[(step, item["index"])] = item.get("children") or []
            else:
                ids[(step, None)] = _step(t.view, step).get("children") or []
        t.children = {
            key: [api.call("GET", f"/workflows/{child}") for child in children]
            for key, children in ids.items()
        }


def _child_problems(t: Tracked) -> list[str]:
    """Each child the scenario names was started once, ended as it says and names its parent,
    step and item; no other child was started."""
    found = []
    expected = {(c.step, c.index): c for c in t.scenario.children}
    for key, views in t.children.items():
        where = key[0] if key[1] is None else f"{key[0]}[{key[1]}]"
        expect: ChildExpect | None = expected.get(key)
        if expect is None:
            found.append(f"{where} started {len(views)} children, expected none")
            continue
        if len(views) != 1:
            found.append(f"{where} started {len(views)} children, expected one")
            continue
        child = views[0]
        if child["status"] != expect.status:
            found.append(f"{where}'s child ended {child['status']}, expected {expect.status}")
        link = (child.get("parent_id"), child.get("parent_step"), child.get("parent_item"))
        if link != (t.workflow_id, expect.step, expect.index):
            found.append(f"{where}'s child names its parent as {link}")
    for key in expected.keys() - t.children.keys():
        found.append(f"{key[0]}{'' if key[1] is None else f'[{key[1]}]'} started no child")
    return found


def _children_story(t: Tracked) -> str:
    """One line on a scenario's children: each one's step, id, end and what it undid."""
    parts = []
    for (step, index), views in t.children.items():
        for child in views:
            undone = sum(1 for c in child.get("compensations", []) if c["status"] == "SUCCEEDED")
            where = step if index is None else f"{step}[{index}]"
            parts.append(
                f"{where} -> {child['workflow_id'][:8]} {child['status']}"
                + (f" ({undone} steps undone)" if undone else "")
            )
    return "; ".join(parts)


WARM_UP = "order-clean"  # `--only outage` runs this scenario first


def _warm_up(api: Api, stack: LocalStack) -> list[Tracked]:
    """One clean order to its end, before an outage on a stack of its own: the outage's orders
    must reach notify_customer while the e-mail provider is down, and a cold stack (each
    worker's first task loads its agents) on a busy machine got them there after it was
    back (the circuit never opened). After the workflows phase, the stack is warm already."""
    (s,) = [s for s in SCENARIOS if s.label == WARM_UP]
    payload = s.payload_now()
    tracked = [Tracked(s, _start(api, stack, s, payload), time.monotonic(), payload=payload)]
    print(f"  started {s.label:<22} {render.DIM}{s.story} (warming up){render.RESET}", flush=True)
    _follow(api, tracked, time.monotonic())
    return tracked


def _outage(api: Api, stack: LocalStack) -> tuple[list[Tracked], dict[str, Any], list[str]]:
    """Phase two: the e-mail provider down for OUTAGE_SECONDS while OUTAGE_SCENARIOS reach
    notify_customer; what the breaker did, and what is wrong with it."""
    print(
        f"\n{render.BOLD}An outage{render.RESET}: the e-mail provider is down for "
        f"{OUTAGE_SECONDS} s; pool {OUTAGE_POOL} has a circuit breaker {OUTAGE_BREAKER['CircuitBreaker']}",
        flush=True,
    )
    tracked = []
    for s in OUTAGE_SCENARIOS:
        workflow_id = _start(api, stack, s, s.payload)
        tracked.append(Tracked(s, workflow_id, time.monotonic(), payload=s.payload))
        print(f"  started {s.label:<22} {render.DIM}{s.story}{render.RESET}", flush=True)
    # Down from when the orders are in: their starts took seconds on a loaded machine, which
    # came off the outage when it began before them (they reached notify_customer after it).
    with _workers_ledger(stack) as ledger:  # the workers' fake services
        ledger.start_outage("email", OUTAGE_SECONDS)
    _follow(api, tracked, time.monotonic())
    pools = {p["name"]: p for p in api.call("GET", "/pools")["items"]}
    circuit = pools[OUTAGE_POOL].get("circuit") or {}
    moves = [(c["from"], c["to"]) for c in circuit.get("history", [])]
    problems = []
    if ("closed", "open") not in moves:
        problems.append(f"the circuit of {OUTAGE_POOL} never opened: {moves}")
    if circuit.get("state") != "closed":
        problems.append(f"the circuit of {OUTAGE_POOL} ended {circuit.get('state')}, not closed")
    return tracked, circuit, problems


PARTS = ("workflows", "outage")  # the demo's two phases, in the order `make demo` runs them


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m shepherd_cli.demo", description=__doc__)
    for name, what in (("port", "API"), ("moto-port", "moto's"), ("console-port", "console's")):
        parser.add_argument(f"--{name}", type=int, default=0, help=f"the {what} port (0: any)")
    parser.add_argument(
        "--only",
        choices=PARTS,
        help="one phase on a stack of its own: the example workflows (with the schedule's "
        "firing), or the e-mail outage (default: both, the outage after the workflows)",
    )
    args = parser.parse_args(argv)
    parts = (args.only,) if args.only else PARTS
    print(
        f"{render.BOLD}Shepherd demo{render.RESET}: starting the local stack (moto, API + supervisor, agent workers)...",
        flush=True,
    )
    t0 = time.monotonic()
    tracked: list[Tracked] = []
    scheduled: Tracked | None = None
    outage: list[Tracked] = []
    circuit: dict[str, Any] = {}
    outage_problems: list[str] = []
    with (
        LocalStack(
            project=Project.find(ROOT),
            port=args.port,
            moto_port=args.moto_port,
            workers=2,
            sweep_interval=0.5,
            event_owners=EVENT_OWNERS,
            schedule_owner=caller_arn(DEMO_CALLER),
            # The schedule fires while the workflows run; on the outage's own stack it waits
            # its hour (rates count from the stack's start).
            schedule_anchor=_schedule_anchor() if "workflows" in parts else None,
            pool_policies={OUTAGE_POOL: OUTAGE_BREAKER},
        ) as stack,
        Console(stack.api_url, caller=DEMO_CALLER, port=args.console_port) as console,
    ):
        api = Api(stack.api_url, caller=DEMO_CALLER)
        print(
            f"  up in {time.monotonic() - t0:.1f}s: API {stack.api_url}, {len(stack.pids())} processes, logs in .shepherd/logs",
            flush=True,
        )
        print(f"  watch it in the web console: {console.url}  (while the demo runs)\n", flush=True)
        if "workflows" in parts:
            tracked, scheduled = _workflows(api, stack)
        else:  # the outage on a stack of its own: warm, as the workflows leave it
            tracked = _warm_up(api, stack)
        if "outage" in parts:
            outage, circuit, outage_problems = _outage(api, stack)
        restarts = stack.restarts
    print()
    ok = _report(tracked + outage, _review_threshold())
    if "workflows" in parts and scheduled is None:
        ok = False
        print(
            f"  {render.RED}schedule {SCHEDULE} never started a workflow  <- unexpected{render.RESET}"
        )
    if "outage" in parts:
        print(
            f"\n{render.BOLD}The outage{render.RESET} ({OUTAGE_SECONDS} s of the e-mail provider)"
        )
    for change in circuit.get("history", []):
        print(
            f"  circuit of {OUTAGE_POOL}: {change['from']} -> {change['to']} at {change['at']} ({change['why']})"
        )
    for t in outage:
        notify = _step(t.view, "notify_customer")
        print(
            f"  {t.scenario.label}: {t.view['status']}, notify_customer took {notify.get('attempt')} attempts"
        )
    for problem in outage_problems:
        ok = False
        print(f"  {render.RED}{problem}  <- unexpected{render.RESET}")
    elapsed = time.monotonic() - t0
    print(f"\nworker processes replaced after crashes: {restarts}")
    if ok:
        print(f"{render.GREEN}every workflow ended as expected{render.RESET} in {elapsed:.1f}s")
    else:
        print(f"{render.RED}some workflows did not end as expected{render.RESET} ({elapsed:.1f}s)")
    return 0 if ok else 1


STARTERS = 6  # the demo's scenarios started this many at a time


def _start_one(api: Api, stack: LocalStack, s: Scenario) -> Tracked:
    """One scenario started, paused at once if its operator does so, amended by its
    customer if it is."""
    payload = s.payload_now()
    workflow_id = _start(api, stack, s, payload)
    _seen.add(workflow_id)
    t = Tracked(s, workflow_id, time.monotonic(), payload=payload)
    if s.pause_at_start:
        _pause_at_start(api, t)
    _amend(api, t)
    return t


def _workflows(api: Api, stack: LocalStack) -> tuple[list[Tracked], Tracked | None]:
    """Phase one: every scenario started and followed to its end (with the operators, the
    carrier and the fraud desk acting), the schedule's firing found; the maps' items and the
    children read while the stack runs."""
    # The maps start first: theirs are the longest runs (a pool of their own, a hang, an
    # unwinding of many items), which then overlap the other starts. The starts go out
    # STARTERS at a time, as many users' would: one after another they took 9-18 s on a busy
    # machine (each a few requests), which the workflows started first spent running while the
    # last had not started. The event's start goes out before them all (it waits seconds for
    # the relay) but is listed in its place; the schedule's firing is looked for meanwhile.
    ordered = sorted(SCENARIOS, key=lambda s: s.map is None)
    with ThreadPoolExecutor(STARTERS + 1) as starters:
        fired = starters.submit(_scheduled, api, time.monotonic() + 30)
        started = {
            s.label: starters.submit(_start_one, api, stack, s)
            for s in sorted(ordered, key=lambda s: not s.via_event)
        }
        tracked = []
        for s in ordered:
            tracked.append(started[s.label].result())
            print(f"  started {s.label:<22} {render.DIM}{s.story}{render.RESET}", flush=True)
        scheduled = fired.result()
    tracked.sort(key=lambda t: SCENARIOS.index(t.scenario))  # shown in the scenarios' order
    if scheduled is not None:
        tracked.append(scheduled)
        print(
            f"  fired   {'env-scheduled':<22} {render.DIM}{scheduled.scenario.story}{render.RESET}",
            flush=True,
        )
    print()
    # The time limit counts from the workflows' start: a slow start-up (a loaded machine)
    # must not eat the time the workflows have.
    _follow(api, tracked, time.monotonic())
    _read_maps(api, stack, tracked)
    _read_children(api, tracked)
    return tracked, scheduled


def run(argv: list[str] | None = None) -> int:
    """`main`, with a stack that cannot start or cannot keep up (a busy machine, a port in use)
    said in a sentence and exit 1, not a traceback."""
    try:
        return main(argv)
    except StartupTimeout as exc:
        print(
            f"\n{render.RED}the demo could not start the local stack{render.RESET}: {exc}",
            file=sys.stderr,
        )
    except CliError as exc:  # e.g. 504: a handler past API Gateway's 29 s on a starved machine
        try:
            load = f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        except OSError:
            load = "load unknown"
        print(
            f"\n{render.RED}the demo stopped: the local stack did not keep up{render.RESET} "
            f"({exc}; {load}). The machine is too busy for it now: try again when it is "
            "quieter. Its logs: .shepherd/logs/",
            file=sys.stderr,
        )
    return 1


if __name__ == "__main__":
    sys.exit(run())
