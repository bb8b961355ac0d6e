"""Fibers: agent invocations that can let simulated time pass, run one at a time.

An agent function runs inside `AgentRuntime.handle`, deep in the real engine's call stack. To
let it wait for simulated time (work, a frozen process, a hang) without changing the engine,
each invocation runs on its own thread, and control is handed back and forth explicitly: at
any moment exactly one thread runs (the event loop or one fiber). That strict hand-off is what
keeps a run deterministic: no two threads ever race, so the interleaving is decided only by
the seeded event queue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class FiberKilled(BaseException):
    """Raised inside a fiber that is resumed only to be killed (the run is over)."""


_current = threading.local()


class Fiber:
    def __init__(self, name: str, body: Callable[[], None]) -> None:
        self.name = name
        self._body = body
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self._thread = threading.Thread(target=self._main, name=f"fiber-{name}", daemon=True)
        self._started = False
        self.finished = False
        self._kill = False
        self.error: BaseException | None = None

    def _main(self) -> None:
        self._go.acquire()
        _current.fiber = self
        try:
            if not self._kill:
                self._body()
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished = True
            self._back.release()

    def switch_in(self) -> None:
        """Run the fiber until it yields or finishes (called by the event loop)."""
        if self.finished:
            return
        if not self._started:
            self._started = True
            self._thread.start()
        self._go.release()
        self._back.acquire()
        if self.finished:
            self._thread.join()

    def kill(self) -> None:
        """Resume it one last time with FiberKilled raised where it waits."""
        if self.finished:
            return
        self._kill = True
        self.switch_in()

    def yield_out(self) -> None:
        """Give control back to the event loop until it switches this fiber in again."""
        self._back.release()
        self._go.acquire()
        if self._kill:
            raise FiberKilled(self.name)


def current() -> Fiber | None:
    return getattr(_current, "fiber", None)
