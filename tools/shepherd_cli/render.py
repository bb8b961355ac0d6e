"""Text views of workflows and definitions for the CLI and the demo."""

from __future__ import annotations

import os
import sys
from typing import Any

from shepherd.definitions import Definition

_ANSI = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
GREEN, RED, YELLOW, DIM, BOLD, RESET = (
    ("\033[32m", "\033[31m", "\033[33m", "\033[2m", "\033[1m", "\033[0m") if _ANSI else ("",) * 6
)
SYMBOL = {
    "SUCCEEDED": "✓",
    "FAILED": "✗",
    "CANCELLED": "-",
    "RUNNING": "▶",
    "WAITING": "…",
    "QUEUED": "·",
    "PENDING": " ",
    "SKIPPED": "↷",
}
OUTCOME = {"ok": "ok", "error": "err", "timeout": "timeout", "heartbeat_timeout": "no-heartbeat"}


def paint(status: str) -> str:
    color = {"SUCCEEDED": GREEN, "FAILED": RED, "COMPENSATED": YELLOW, "CANCELLED": YELLOW}.get(
        status, ""
    )
    return f"{color}{status}{RESET}" if color else status


def attempts(step: dict[str, Any]) -> str:
    parts = [
        f"{a['attempt']}:{OUTCOME.get(a['outcome'], a['outcome'])}"
        for a in step.get("attempts", [])
    ]
    if step["status"] in ("QUEUED", "RUNNING", "WAITING") and step["attempt"]:
        parts.append(f"{step['attempt']}:{step['status'].lower()}")
    return " ".join(parts)


def map_bar(counts: dict[str, Any], width: int = 20) -> str:
    """A map step's progress in `shepherd status`: a bar of its ended items, then the counts
    in the words of `map_progress` (one wording for the CLI and the demo)."""
    total = int(counts["total"]) or 1
    ended = counts["succeeded"] + counts["failed"] + counts["cancelled"]
    filled = round(width * ended / total)
    return f"[{'#' * filled}{'.' * (width - filled)}] {map_progress(counts)}"


def map_progress(counts: dict[str, Any]) -> str:
    """A map step's items by where they are (its `map` in a workflow's view)."""
    parts = [f"{counts['succeeded']}/{counts['total']} items succeeded"]
    for key, label in (
        ("running", "in flight"),
        ("pending", "to start"),
        ("failed", "failed"),
        ("cancelled", "cancelled"),
        ("compensated", "undone"),
    ):
        if counts.get(key):
            parts.append(f"{counts[key]} {label}")
    return ", ".join(parts)


def _rest(step: dict[str, Any]) -> str:
    """A map step's progress, a child-workflow step's child, a person's answer to an Approval
    step, the signal a WaitForSignal step took (or its timeout), or when a resting Wait (or
    Approval) ends."""
    if step.get("map"):
        return f"  {map_bar(step['map'])}"
    if step.get("children"):
        return f"  {DIM}child {step['children'][-1]}{RESET}"
    decision = step.get("decision")
    if decision and decision.get("timed_out"):  # a WaitForSignal's timeout that went on
        return f"  {DIM}no signal {decision.get('signal')} in time: went on{RESET}"
    if decision and "signal" in decision:  # a WaitForSignal step took a signal
        return f"  {DIM}took signal {decision['signal']} #{decision.get('sequence')}{RESET}"
    if decision:
        said = f": {decision['comment']}" if decision.get("comment") else ""
        return f"  {DIM}{decision['verdict']} by {decision['by']}{said}{RESET}"
    if step["status"] == "WAITING" and step.get("wake_at"):
        return f"  {DIM}until {step['wake_at']}{RESET}"
    return ""


def status_lines(view: dict[str, Any]) -> list[str]:
    lines = [f"{BOLD}{view['workflow_id']}{RESET}  {view['type']}  {paint(view['status'])}"]
    if view.get("parent_id"):
        lines.append(f"  {DIM}child of {view['parent_id']} (step {view['parent_step']}){RESET}")
    lines.append(
        f"  created {view['created_at']}"
        + (f"  finished {view['finished_at']}" if view.get("finished_at") else "")
    )
    for step in view["steps"]:
        lines.append(
            f"  {SYMBOL.get(step['status'], '?')} {step['name']:<22} {step['status']:<10} {attempts(step)}{_rest(step)}"
        )
    for comp in view["compensations"]:
        lines.append(f"  ↺ {'undo ' + comp['name']:<22} {comp['status']:<10} {attempts(comp)}")
    if view.get("error"):
        lines.append(f"  {DIM}{view['error'].get('message', '')}{RESET}")
    return lines


def watch_frame(view: dict[str, Any]) -> list[str]:
    return status_lines(view)


def _rest_label(step: Any) -> str:
    """What a Wait, an Approval or a WaitForSignal step rests on, or a Pass step's "pass"
    (none runs an agent)."""
    if step.pass_ is not None:
        return "pass"
    if step.wait_for_signal is not None:
        return f"wait for signal {step.wait_for_signal.name}"
    if step.approval is not None:
        return f"approval ≤{step.approval.timeout_seconds} s"
    wait = step.wait
    if wait.seconds is not None:
        return f"wait {wait.seconds} s"
    if wait.seconds_path is not None:
        return f"wait {wait.seconds_path} s"
    return f"wait until {wait.until.isoformat() if wait.until else wait.until_path}"


def graph(definition: Definition) -> str:
    """Mermaid flowchart: steps and their dependencies; dashed edges to compensations."""
    lines = ["flowchart LR"]
    for step in definition.steps:
        if not step.is_task:
            runs = _rest_label(step)
        elif step.runs_agent:
            runs = f"{step.pool} · {step.agent}"
        else:
            runs = f"workflow {step.workflow}"
        if step.map is not None:
            runs = f"map ≤{step.map.max_concurrency} · {runs}"
        lines.append(f'  {step.name}["{step.name}<br/><small>{runs}</small>"]')
    for step in definition.steps:
        for dep in step.depends_on:
            lines.append(f"  {dep} --> {step.name}")
    for step in definition.steps:
        if step.compensation is not None:
            node = f"undo_{step.name}"
            lines.append(f'  {node}[/"{step.compensation.agent}"/]')
            lines.append(f"  {step.name} -. compensate .-> {node}")
    lines.append("  classDef undo stroke-dasharray: 4 2")
    undo = [f"undo_{s.name}" for s in definition.steps if s.compensation is not None]
    if undo:
        lines.append(f"  class {','.join(undo)} undo")
    return "\n".join(lines)
