"""Fibers: pieces of engine code that can let simulated time pass, run one at a time.

An agent function runs inside `AgentRuntime.handle`, deep in the real engine's call stack; a
sweep or an API call may wait on a slow store call. To let them wait for simulated time
without changing the engine, each runs as a greenlet of its own (a coroutine with its own
stack, on the caller's thread), and control is handed back and forth explicitly: at any
moment exactly one runs (the event loop or one fiber). That strict hand-off is what keeps a
run deterministic: nothing ever races, so the interleaving is decided only by the seeded
event queue. A greenlet switch costs a microsecond or two where a hand-off between threads
costs two wake-ups by the operating system (tens of microseconds on an idle machine,
milliseconds on a loaded one), and the simulator switches tens of thousands of times a run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import greenlet  # type: ignore[import-untyped]


class FiberKilled(BaseException):
    """Raised inside a fiber that is resumed only to be killed (the run is over)."""


_current = threading.local()

# Fibers started and not finished. A fiber the run leaves waiting is kept waiting, never
# collected: collecting a greenlet raises GreenletExit inside it, which would run the engine's
# exception handlers at whatever moment the collector chose.
_waiting: set[Fiber] = set()


class Fiber:
    def __init__(self, name: str, body: Callable[[], None]) -> None:
        self.name = name
        self.body = body
        self._glet: greenlet.greenlet | None = None
        self.finished = False
        self.killed = False
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            if not self.killed:
                self.body()
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished = True
            _waiting.discard(self)

    def switch_in(self) -> None:
        """Run the fiber until it yields or finishes (called by the event loop, or by another
        fiber, to which it then yields back)."""
        if self.finished:
            return
        if self._glet is None:
            self._glet = greenlet.greenlet(self._run)
            _waiting.add(self)
        self._glet.parent = greenlet.getcurrent()  # where it yields to, or ends into
        previous = getattr(_current, "fiber", None)
        _current.fiber = self
        try:
            self._glet.switch()
        finally:
            _current.fiber = previous

    def kill(self) -> None:
        """Resume it one last time with FiberKilled raised where it waits."""
        if self.finished:
            return
        self.killed = True
        self.switch_in()

    def yield_out(self) -> None:
        """Give control back to whoever switched it in, until it is switched in again."""
        glet = self._glet
        assert glet is not None
        assert glet is greenlet.getcurrent()
        glet.parent.switch()
        if self.killed:
            raise FiberKilled(self.name)


def current() -> Fiber | None:
    return getattr(_current, "fiber", None)
