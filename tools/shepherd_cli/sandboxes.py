"""Lambda's concurrency for the local API: each function's invocations run in sandbox
processes, each serving one invocation at a time, as Lambda's sandboxes do.

The handlers keep per-request state in module globals (the Powertools resolver's current
event), so two requests can never share a process at once; before this the local API served
every request behind one lock (500 starts over 50 connections: p50 20 s). A sandbox is started
when every running one is busy (a cold start), up to the function's concurrency; one that
does not answer within the gateway's timeout is ended (Lambda would end it at its own
timeout) and the caller told so, as API Gateway answers 504 at 29 s.
"""

from __future__ import annotations

import multiprocessing
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from shepherd_cli.lambda_kit import local_context

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
DEFAULT_CONCURRENCY = 4


class InvocationTimeout(Exception):
    """No reply within the time the caller gave (API Gateway's 29 s)."""


class InvocationFailed(Exception):
    """The handler raised, or its sandbox died: Lambda reports an invocation error."""


def _serve(conn: Connection, function: str, load: Callable[[str], Handler], timeout_s: int) -> None:
    """A sandbox's life: load the handler once, then one invocation at a time until EOF."""
    handler = load(function)
    context = f"shepherd-local-{function}"
    while True:
        try:
            event = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", handler(event, local_context(context, timeout_s)))
        except Exception:  # an invocation error: reported, the sandbox lives on
            traceback.print_exc(file=sys.stderr)
            reply = ("error", None)
        conn.send(reply)


@dataclass
class _Sandbox:
    process: Any  # multiprocessing's SpawnProcess
    conn: Connection
    generation: int  # the deployment it runs (see `recycle`)

    def end(self) -> None:
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)


class Sandboxes:
    """One function's sandboxes: `invoke` runs an event in an idle one, or a new one while
    fewer than `concurrency` run; otherwise it waits for one (within its timeout)."""

    def __init__(
        self,
        function: str,
        load: Callable[[str], Handler],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        warm: int = 1,
        timeout_s: int = 29,
    ) -> None:
        self.function = function
        self._load = load
        self._timeout_s = timeout_s
        self._spawn_context = multiprocessing.get_context("spawn")
        self._idle: queue.LifoQueue[_Sandbox] = queue.LifoQueue()  # the warmest first
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._all: list[_Sandbox] = []
        self._generation = 0
        self.started = 0  # sandboxes started (cold starts)
        for _ in range(warm):
            self._idle.put(self._start())

    def _start(self) -> _Sandbox:
        parent, child = self._spawn_context.Pipe()
        process = self._spawn_context.Process(
            target=_serve,
            args=(child, self.function, self._load, self._timeout_s),
            name=f"sandbox-{self.function}",
            daemon=True,
        )
        process.start()
        child.close()
        sandbox = _Sandbox(process, parent, self._generation)
        with self._lock:
            self._all.append(sandbox)
            self.started += 1
        return sandbox

    def _retire(self, sandbox: _Sandbox) -> None:
        with self._lock:
            if sandbox in self._all:
                self._all.remove(sandbox)
        sandbox.end()

    def invoke(self, event: dict[str, Any], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        if not self._slots.acquire(timeout=timeout):
            raise InvocationTimeout(f"no {self.function} sandbox free within {timeout:.0f}s")
        try:
            sandbox = self._take()
            try:
                sandbox.conn.send(event)
                if not sandbox.conn.poll(max(0.0, deadline - time.monotonic())):
                    self._retire(sandbox)  # still running: Lambda would end it at its timeout
                    raise InvocationTimeout(f"{self.function} did not answer in {timeout:.0f}s")
                status, reply = sandbox.conn.recv()
            except (EOFError, OSError, BrokenPipeError) as exc:
                self._retire(sandbox)
                raise InvocationFailed(f"the {self.function} sandbox died") from exc
            self._release(sandbox)
            if status != "ok":
                raise InvocationFailed(f"{self.function} raised")
            return dict(reply)
        finally:
            self._slots.release()

    def _take(self) -> _Sandbox:
        while True:
            try:
                sandbox = self._idle.get_nowait()
            except queue.Empty:
                return self._start()
            if sandbox.process.is_alive() and sandbox.generation == self._generation:
                return sandbox
            self._retire(sandbox)

    def _release(self, sandbox: _Sandbox) -> None:
        if sandbox.generation != self._generation:
            self._retire(sandbox)  # code or definitions changed while it ran
        else:
            self._idle.put(sandbox)

    def recycle(self) -> None:
        """A new deployment: the idle sandboxes end now, busy ones after their invocation."""
        self._generation += 1
        while True:
            try:
                self._retire(self._idle.get_nowait())
            except queue.Empty:
                return

    def close(self) -> None:
        with self._lock:
            sandboxes = list(self._all)
            self._all.clear()
        for sandbox in sandboxes:
            sandbox.end()
