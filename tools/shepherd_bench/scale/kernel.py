"""Simulated time for the real engine: a discrete-event loop and greenlet tasks.

The engine is synchronous code that calls its ports and reads its clock. To let a DynamoDB
request, an SQS call, a backoff or an agent's work take simulated time without changing the
engine, every piece of engine code runs in a greenlet (a *task*); a port call that takes time
parks its task on the event heap and switches to the loop, which resumes it when simulated
time reaches the wake-up. Exactly one greenlet runs at any moment, and the heap is ordered by
(time, sequence number), so a run is deterministic from its seed. Greenlets, not threads: a
switch costs about a microsecond, and a run makes millions of them.

Each task belongs to an *invocation* (a Lambda invocation, or an outside caller): its CPU is
a single server (a burst waits for the one before it), so the looks a sweep overlaps on its
pool share the function's fraction of a vCPU as they would on Lambda.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import greenlet  # type: ignore[import-untyped]
from shepherd.clock import ManualClock


class Killed(BaseException):
    """Thrown into a task whose invocation died (a Lambda timeout, a crash): unwinds the
    engine's stack past every `except Exception`, as the end of a sandbox would."""


@dataclass
class Invocation:
    """One Lambda invocation (or one outside caller): what it used and how it ends."""

    name: str
    started_ms: float
    vcpu: float = 1.0  # the function's share of a vCPU (memory / 1,769 MB)
    cpu_free_at: float = 0.0
    cpu_ms: float = 0.0
    aws_calls: int = 0
    tasks: list[Task] = field(default_factory=list)
    dead: bool = False

    def cpu(self, kernel: Kernel, full_core_ms: float) -> float:
        """Queue a CPU burst (measured on one full core) on this invocation's CPU; returns
        when it ends, in simulated ms."""
        burst = full_core_ms / self.vcpu
        self.cpu_ms += burst
        start = max(kernel.now, self.cpu_free_at)
        self.cpu_free_at = start + burst
        return self.cpu_free_at


class Task:
    """A greenlet running engine code for one invocation."""

    def __init__(self, kernel: Kernel, body: Callable[[], None], inv: Invocation) -> None:
        self.kernel = kernel
        self.inv = inv
        self.done = False
        self.wake = 0  # a resume is valid only with the current token
        self.on_done: list[Callable[[], None]] = []
        self.glet = greenlet.greenlet(self._run, parent=kernel.loop)
        self._body = body
        inv.tasks.append(self)

    def _run(self) -> None:
        try:
            self._body()
        except Killed:
            pass
        except BaseException as exc:  # a bug in the model or the engine: stop the run
            self.kernel.failures.append(exc)
        finally:
            self.done = True
            for callback in self.on_done:
                callback()

    def resume(self, token: int) -> None:
        if not self.done and token == self.wake:
            self.kernel.current = self
            self.glet.switch()
            self.kernel.current = None

    def kill(self) -> None:
        """End the task where it waits (Killed raised there); one not started never runs."""
        if self.done:
            return
        self.wake += 1
        if not self.glet:  # not started
            self.done = True
            for callback in self.on_done:
                callback()
            return
        self.kernel.current = self
        self.glet.throw(Killed())
        self.kernel.current = None


class Kernel:
    """The event heap and the simulated clock's source of truth."""

    def __init__(self, start_ms: int, seed: int) -> None:
        self.now = float(start_ms)
        self.rng = random.Random(seed)
        self.loop = greenlet.getcurrent()
        self.current: Task | None = None
        self.failures: list[BaseException] = []
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self.events = 0

    def at(self, when_ms: float, action: Callable[[], None]) -> None:
        """Run `action` in the loop at `when_ms` (never earlier than now). It must not wait."""
        self._seq += 1
        heapq.heappush(self._heap, (max(when_ms, self.now), self._seq, action))

    def spawn(
        self, body: Callable[[], None], inv: Invocation, when_ms: float | None = None
    ) -> Task:
        task = Task(self, body, inv)
        token = task.wake
        self.at(self.now if when_ms is None else when_ms, lambda: task.resume(token))
        return task

    def sleep_until(self, when_ms: float) -> None:
        """Park the current task until `when_ms`. Outside a task (setting up the initial
        population) nothing waits: time stands still."""
        task = self.current
        if task is None:
            return
        task.wake += 1
        token = task.wake
        self.at(when_ms, lambda: task.resume(token))
        self.loop.switch()

    def sleep(self, seconds: float) -> None:
        self.sleep_until(self.now + seconds * 1000)

    def park(self) -> Callable[[], None]:
        """Park the current task until the returned function is called (from the loop or
        another task: it schedules the resume)."""
        task = self.current
        assert task is not None, "park() outside a task"
        task.wake += 1
        token = task.wake

        def wake() -> None:
            self.at(self.now, lambda: task.resume(token))

        return wake

    def join(self, bodies: list[Callable[[], None]]) -> None:
        """Run `bodies` as tasks of the current invocation, overlapped, and wait for all of
        them (outside a task: one after another)."""
        task = self.current
        if task is None:
            for body in bodies:
                body()
            return
        if not bodies:
            return
        left = [len(bodies)]
        wake = self.park()

        def one_done() -> None:
            left[0] -= 1
            if left[0] == 0:
                wake()

        for body in bodies:
            self.spawn(body, task.inv).on_done.append(one_done)
        self.loop.switch()

    def invocation(self) -> Invocation | None:
        return None if self.current is None else self.current.inv

    def run(self, until_ms: float) -> None:
        """Process every event up to `until_ms`, then leave the clock there."""
        heap = self._heap
        while heap and heap[0][0] <= until_ms:
            when, _, action = heapq.heappop(heap)
            self.now = when
            self.events += 1
            action()
            if self.failures:
                raise self.failures[0]
        self.now = max(self.now, until_ms)


class TaskLock:
    """A lock for the model's tasks, in place of the engine's `threading.Lock` where the
    engine holds one across a request (`Supervisor._waiting` reads a queue's backlog under
    it): every task runs on one OS thread, so a task waiting on a thread lock that another
    task holds across a simulated request would block the whole loop. Waiters park, first in
    first out, and are woken in turn."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.held = False
        self._waiting: deque[Callable[[], None]] = deque()

    def __enter__(self) -> TaskLock:
        while self.held:
            if self.kernel.current is None:
                raise RuntimeError("a TaskLock contended outside a task")
            self._waiting.append(self.kernel.park())
            self.kernel.loop.switch()
        self.held = True
        return self

    def __exit__(self, *_: object) -> None:
        self.held = False
        if self._waiting:
            self._waiting.popleft()()


class SimClock(ManualClock):
    """The engine's clock: the kernel's time. `sleep` lets simulated time pass for the task
    that sleeps only (a backoff, an agent's work); nothing else moves the clock."""

    def __init__(self, kernel: Kernel) -> None:
        super().__init__(int(kernel.now))
        self.kernel = kernel

    def now_ms(self) -> int:
        return int(self.kernel.now)

    def sleep(self, seconds: float) -> None:
        self.kernel.sleep(max(0.0, seconds))

    def advance(self, seconds: float) -> int:
        raise RuntimeError("simulated time moves with the event loop, not by hand")

    def set(self, now_ms: int) -> None:
        raise RuntimeError("simulated time moves with the event loop, not by hand")


@dataclass(frozen=True)
class LogNormal:
    """A latency distribution by its median and the spread of its logarithm."""

    median_ms: float
    sigma: float

    def sample(self, rng: random.Random) -> float:
        return self.median_ms * math.exp(rng.gauss(0.0, self.sigma))

    @property
    def mean_ms(self) -> float:
        return self.median_ms * math.exp(self.sigma**2 / 2)

    def length_biased(self) -> LogNormal:
        """The distribution of the interval a random moment falls in (a waiting time seen
        by someone arriving at random): for a lognormal, its median times e^(sigma^2)."""
        return LogNormal(self.median_ms * math.exp(self.sigma**2), self.sigma)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[k]


def wait_call(kernel: Kernel, latency_ms: float, cpu_ms: float) -> None:
    """An AWS call from the current task: its client CPU on the invocation's CPU, then the
    request's latency."""
    inv = kernel.invocation()
    if inv is None:
        return
    inv.aws_calls += 1
    ready = inv.cpu(kernel, cpu_ms) if cpu_ms else kernel.now
    kernel.sleep_until(ready + latency_ms)
