"""Where the demo's fake external services record their side effects, by idempotency key.

A real service dedupes on the key we pass it; these do the same, so a step retried after its
effect landed applies that effect once. They also answer the question a compensation asks
("did this key do anything?") and remember an undo: an effect is applied at most once per
key, ever, so a late attempt of a step (a zombie fenced out long ago) cannot apply it again
after its undo. With `SHEPHERD_LEDGER` set (the local stack), the ledger is a SQLite file
shared by worker processes; otherwise it lives in memory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import Any

_lock = threading.Lock()
_memory: dict[tuple[str, str], dict[str, Any]] = {}
_order: list[tuple[str, str, str]] = []


def _db() -> sqlite3.Connection | None:
    path = os.environ.get("SHEPHERD_LEDGER")
    if not path:
        return None
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "service TEXT, key TEXT, action TEXT, body TEXT, undone_by TEXT, "
        "UNIQUE(service, key))"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS outages (service TEXT PRIMARY KEY, until REAL)")
    return conn


def apply(service: str, key: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
    """Apply an effect once per (service, key); a repeat returns the first result."""
    conn = _db()
    if conn is None:
        with _lock:
            if (service, key) not in _memory:
                _memory[(service, key)] = {"action": action, **body}
                _order.append((service, key, action))
            return dict(_memory[(service, key)])
    with conn:
        conn.execute(
            "INSERT OR IGNORE INTO effects(service, key, action, body) VALUES (?, ?, ?, ?)",
            (service, key, action, json.dumps(body)),
        )
        row = conn.execute(
            "SELECT action, body FROM effects WHERE service = ? AND key = ?", (service, key)
        ).fetchone()
    conn.close()
    return {"action": row[0], **json.loads(row[1])}


def find(service: str, key: str) -> dict[str, Any] | None:
    """The effect a key applied, or None if it applied nothing."""
    conn = _db()
    if conn is None:
        with _lock:
            found = _memory.get((service, key))
            return None if found is None else dict(found)
    row = conn.execute(
        "SELECT action, body, undone_by FROM effects WHERE service = ? AND key = ?",
        (service, key),
    ).fetchone()
    conn.close()
    if row is None:
        return None
    return {"action": row[0], **json.loads(row[1]), **({"undone_by": row[2]} if row[2] else {})}


def undo(service: str, key: str, undo_key: str, action: str) -> dict[str, Any] | None:
    """Undo what `key` applied, once: the effect undone, or None if there was nothing to undo.

    Recorded under `undo_key` (the compensation's own idempotency key), so a repeated undo is
    a no-op that returns the same answer.
    """
    effect = find(service, key)
    if effect is None:
        return None
    apply(service, undo_key, action, {"of": key})
    conn = _db()
    if conn is None:
        with _lock:
            _memory[(service, key)].setdefault("undone_by", undo_key)
        return effect
    with conn:
        conn.execute(
            "UPDATE effects SET undone_by = ? WHERE service = ? AND key = ? AND undone_by IS NULL",
            (undo_key, service, key),
        )
    conn.close()
    return effect


def effects(prefix: str = "") -> list[tuple[str, str, str]]:
    """(service, key, action) in the order they were first applied."""
    conn = _db()
    if conn is None:
        with _lock:
            return [e for e in _order if e[1].startswith(prefix)]
    rows = conn.execute(
        "SELECT service, key, action FROM effects WHERE key LIKE ? ORDER BY seq", (prefix + "%",)
    ).fetchall()
    conn.close()
    return [(r[0], r[1], r[2]) for r in rows]


# A service that is down answers every call with an error until its outage ends (epoch
# seconds): the demo's downstream outage, shared by every worker process through the ledger.
_outages: dict[str, float] = {}


class ServiceDown(Exception):
    """A call to a service during its outage: retryable (it will be up again)."""


def start_outage(service: str, seconds: float) -> float:
    """`service` answers every call with ServiceDown for `seconds` from now; when it ends."""
    until = time.time() + seconds
    conn = _db()
    if conn is None:
        with _lock:
            _outages[service] = until
        return until
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS outages (service TEXT PRIMARY KEY, until REAL)")
        conn.execute(
            "INSERT OR REPLACE INTO outages(service, until) VALUES (?, ?)", (service, until)
        )
    conn.close()
    return until


def require_up(service: str) -> None:
    """Raise ServiceDown while `service` is in an outage (a real client's 503)."""
    conn = _db()
    if conn is None:
        with _lock:
            until = _outages.get(service, 0.0)
    else:
        with conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS outages (service TEXT PRIMARY KEY, until REAL)"
            )
            row = conn.execute("SELECT until FROM outages WHERE service = ?", (service,)).fetchone()
        conn.close()
        until = row[0] if row else 0.0
    left = until - time.time()
    if left > 0:
        raise ServiceDown(f"{service} is down (back in {left:.1f} s)")


def reset() -> None:
    with _lock:
        _memory.clear()
        _order.clear()
        _outages.clear()
