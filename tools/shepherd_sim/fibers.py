"""Fibers: pieces of engine code that can let simulated time pass, run one at a time.

An agent function runs inside `AgentRuntime.handle`, deep in the real engine's call stack; a
sweep or an API call may wait on a slow store call. To let them wait for simulated time
without changing the engine, each runs on a thread of its own, and control is handed back and
forth explicitly: at any moment exactly one thread runs (the event loop or one fiber). That
strict hand-off is what keeps a run deterministic: no two threads ever race, so the
interleaving is decided only by the seeded event queue. Threads are reused across fibers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class FiberKilled(BaseException):
    """Raised inside a fiber that is resumed only to be killed (the run is over)."""


_current = threading.local()


class _Worker:
    """A thread that runs one fiber body after another."""

    def __init__(self) -> None:
        # Raw locks as binary semaphores (released by the other side): the cheapest hand-off.
        self.go = threading.Lock()
        self.back = threading.Lock()
        self.go.acquire()
        self.back.acquire()
        self.fiber: Fiber | None = None
        self.thread = threading.Thread(target=self._loop, name="sim-fiber", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self.go.acquire()
            fiber = self.fiber
            assert fiber is not None
            _current.fiber = fiber
            try:
                if not fiber.killed:
                    fiber.body()
            except BaseException as exc:
                fiber.error = exc
            finally:
                _current.fiber = None
                fiber.finished = True
                self.fiber = None
                _idle.append(self)  # before handing back: the loop is blocked until then
                self.back.release()


_idle: list[_Worker] = []


class Fiber:
    def __init__(self, name: str, body: Callable[[], None]) -> None:
        self.name = name
        self.body = body
        self._worker: _Worker | None = None
        self.finished = False
        self.killed = False
        self.error: BaseException | None = None

    def switch_in(self) -> None:
        """Run the fiber until it yields or finishes (called by the event loop)."""
        if self.finished:
            return
        if self._worker is None:
            self._worker = _idle.pop() if _idle else _Worker()
            self._worker.fiber = self
        worker = self._worker
        worker.go.release()
        worker.back.acquire()

    def kill(self) -> None:
        """Resume it one last time with FiberKilled raised where it waits."""
        if self.finished:
            return
        self.killed = True
        self.switch_in()

    def yield_out(self) -> None:
        """Give control back to the event loop until it switches this fiber in again."""
        worker = self._worker
        assert worker is not None
        worker.back.release()
        worker.go.acquire()
        if self.killed:
            raise FiberKilled(self.name)


def current() -> Fiber | None:
    return getattr(_current, "fiber", None)
