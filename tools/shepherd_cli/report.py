"""Rendering of workflow states for people: per-step attempts and a summary table."""

from __future__ import annotations

import os
import sys
from typing import Any

from shepherd.model import StepRecord, WorkflowState, loads

_ANSI = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
GREEN, RED, YELLOW, DIM, BOLD, RESET = (
    ("\033[32m", "\033[31m", "\033[33m", "\033[2m", "\033[1m", "\033[0m") if _ANSI else ("",) * 6
)

OUTCOME = {"ok": "ok", "error": "error", "timeout": "timeout", "heartbeat_timeout": "no heartbeat"}


def attempts(rec: StepRecord) -> str:
    parts = []
    for h in rec.history:
        text = f"{h['a']}:{OUTCOME.get(h['o'], h['o'])}"
        if h.get("e") and h["o"] == "error":
            text += f"({h['e']})"
        parts.append(text)
    if rec.status.value in ("QUEUED", "RUNNING"):
        parts.append(f"{rec.attempt}:{rec.status.value.lower()}")
    return " ".join(parts) or "-"


def counts(state: WorkflowState) -> dict[str, int]:
    records = [*state.steps.values(), *state.compensations.values()]
    history = [h for r in records for h in r.history]
    return {
        "attempts": len(history),
        "retries": sum(
            1 for r in records for h in r.history if h["o"] != "ok" and h["a"] < r.attempt
        ),
        "timeouts": sum(1 for h in history if "timeout" in h["o"]),
        "compensations": sum(
            1 for c in state.compensations.values() if c.status.value == "SUCCEEDED"
        ),
    }


def color(status: str, expected: str | None = None) -> str:
    if expected is not None and status != expected:
        return f"{RED}{status}{RESET}"
    return f"{GREEN if status == 'SUCCEEDED' else YELLOW}{status}{RESET}"


def detail(label: str, state: WorkflowState, expected: str | None = None) -> list[str]:
    wf = state.workflow
    lines = [
        f"{BOLD}{label}{RESET} {DIM}{wf.wf_type} {wf.workflow_id[:12]}{RESET} -> {color(wf.status.value, expected)}"
    ]
    for name, rec in sorted(state.steps.items(), key=lambda kv: _started(kv[1])):
        lines.append(f"    {name:<22} {rec.status.value:<10} attempts {attempts(rec)}")
    for name, rec in sorted(state.compensations.items(), key=lambda kv: _started(kv[1])):
        lines.append(f"    {'undo ' + name:<22} {rec.status.value:<10} attempts {attempts(rec)}")
    error = loads(wf.error) if wf.error else None
    if error:
        lines.append(f"    {DIM}reason: {error.get('message')}{RESET}")
    return lines


def _started(rec: StepRecord) -> tuple[int, str]:
    """Execution order: when the first attempt ended (unstarted steps last)."""
    first = rec.history[0]["t"] if rec.history else (rec.finished_at or 2**62)
    return (first, rec.name)


def summary(rows: list[tuple[str, WorkflowState, str, float]]) -> list[str]:
    header = f"{'workflow':<22} {'status':<12} {'expected':<12} {'attempts':>8} {'retries':>8} {'timeouts':>9} {'undone':>7} {'seconds':>8}"
    lines = [BOLD + header + RESET]
    for label, state, expected, seconds in rows:
        c = counts(state)
        status = state.workflow.status.value
        mark = "" if status == expected else f"  {RED}<- unexpected{RESET}"
        lines.append(
            f"{label:<22} {color(status, expected)}{' ' * (12 - len(status))} {expected:<12} "
            f"{c['attempts']:>8} {c['retries']:>8} {c['timeouts']:>9} {c['compensations']:>7} {seconds:>8.1f}{mark}"
        )
    return lines


def as_dict(state: WorkflowState) -> dict[str, Any]:
    return {
        "workflow_id": state.workflow.workflow_id,
        "status": state.workflow.status.value,
        **counts(state),
    }
