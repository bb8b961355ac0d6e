"""`make demo`: the local stack running the example workflows, some with injected faults.

Starts moto, the control process (HTTP API, supervisor, events) and one process per agent
worker; starts every scenario over HTTP (one through an EventBridge event); shows live
progress; prints a summary; exits 0 only if every workflow ended as expected.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shepherd.jsonsafe import canonical

from shepherd_cli import render
from shepherd_cli.apigw import caller_arn
from shepherd_cli.client import Api, ApiError
from shepherd_cli.console import Console
from shepherd_cli.local import BUS, LocalStack
from shepherd_cli.project import Project
from shepherd_cli.scenarios import SCENARIOS, Scenario

ROOT = Path(__file__).resolve().parents[2]  # the repository: the examples are its project
TIME_LIMIT_SECONDS = 100
DEMO_CALLER = "demo"
EVENT_SOURCE = "demo.shop"
EVENT_OWNERS = {EVENT_SOURCE: caller_arn(DEMO_CALLER)}
TERMINAL = {"SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"}


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
    note: str = ""  # what an operator (or the carrier) did to it


def _start(api: Api, stack: LocalStack, s: Scenario) -> str:
    if not s.via_event:
        return str(api.start(s.wf_type, s.payload, f"demo-{s.label}")["workflow_id"])
    import boto3

    events = boto3.client(
        "events",
        endpoint_url=stack.moto_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    # The event names no owner: the stack maps its source to the demo caller (EVENT_OWNERS).
    detail = {"type": s.wf_type, "input": s.payload, "idempotency_key": f"demo-{s.label}"}
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
                if (view["input"] or {}).get("order_id") == s.payload.get("order_id"):
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
        t.note = f"the carrier's answer was refused: {exc}"


OPERATOR_POLL_SECONDS = 0.2


def _operate(api: Api, t: Tracked, deadline: float) -> None:
    """One operator (or carrier) per scenario that needs one, watching only its workflow, so
    it acts within a fraction of a second however many workflows the demo follows."""
    if t.scenario.pause_at_start:
        try:
            api.call("POST", f"/workflows/{t.workflow_id}/pause")
        except ApiError as exc:
            t.note = f"pause refused: {exc}"
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
        if t.view["status"] in TERMINAL:
            return
        time.sleep(OPERATOR_POLL_SECONDS)


def _operated(s: Scenario) -> bool:
    return s.on_pause is not None or s.pause_at_start or s.carrier_bytes is not None


def _seconds(view: dict[str, Any]) -> float:
    """How long the workflow ran, from its own timestamps."""
    from datetime import datetime

    end = view.get("finished_at") or view["updated_at"]
    return (
        datetime.fromisoformat(end) - datetime.fromisoformat(view["created_at"])
    ).total_seconds()


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
                if last_status.get(t.workflow_id) != status:
                    last_status[t.workflow_id] = status
                    note = f"  ({t.note})" if t.note else ""
                    print(f"  [{now - t0:5.1f}s] {t.scenario.label:<22} {status}{note}", flush=True)
        if all(t.finished for t in tracked):
            return
        time.sleep(0.4)


def _report(tracked: list[Tracked]) -> bool:
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
    for t in tracked:
        c = _counts(t.view)
        status = t.view["status"]
        good = status == t.scenario.expected
        ok &= good
        mark = "" if good else f"  {render.RED}<- unexpected{render.RESET}"
        seconds = _seconds(t.view)
        print(
            f"{t.scenario.label:<22} {render.paint(status)}{' ' * (12 - len(status))} {t.scenario.expected:<12} "
            f"{c['attempts']:>8} {c['retries']:>8} {c['timeouts']:>9} {c['compensations']:>7} {seconds:>8.1f}{mark}"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m shepherd_cli.demo", description=__doc__)
    for name, what in (("port", "API"), ("moto-port", "moto's"), ("console-port", "console's")):
        parser.add_argument(f"--{name}", type=int, default=0, help=f"the {what} port (0: any)")
    args = parser.parse_args(argv)
    print(
        f"{render.BOLD}Shepherd demo{render.RESET}: starting the local stack (moto, API + supervisor, agent workers)...",
        flush=True,
    )
    t0 = time.monotonic()
    with (
        LocalStack(
            project=Project.find(ROOT),
            port=args.port,
            moto_port=args.moto_port,
            workers=2,
            sweep_interval=0.5,
            event_owners=EVENT_OWNERS,
        ) as stack,
        Console(stack.api_url, caller=DEMO_CALLER, port=args.console_port) as console,
    ):
        api = Api(stack.api_url, caller=DEMO_CALLER)
        print(
            f"  up in {time.monotonic() - t0:.1f}s: API {stack.api_url}, {len(stack.pids())} processes, logs in .shepherd/logs",
            flush=True,
        )
        print(f"  watch it in the web console: {console.url}  (while the demo runs)\n", flush=True)
        tracked = []
        for s in SCENARIOS:
            workflow_id = _start(api, stack, s)
            _seen.add(workflow_id)
            tracked.append(Tracked(s, workflow_id, time.monotonic()))
            print(f"  started {s.label:<22} {render.DIM}{s.story}{render.RESET}", flush=True)
        print()
        # The time limit counts from the workflows' start: a slow start-up (a loaded machine)
        # must not eat the time the workflows have.
        _follow(api, tracked, time.monotonic())
        restarts = stack.restarts
    print()
    ok = _report(tracked)
    elapsed = time.monotonic() - t0
    print(f"\nworker processes replaced after crashes: {restarts}")
    if ok:
        print(f"{render.GREEN}every workflow ended as expected{render.RESET} in {elapsed:.1f}s")
    else:
        print(f"{render.RED}some workflows did not end as expected{render.RESET} ({elapsed:.1f}s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
