"""SQS queues, their event source mappings and Lambda, as the scale model runs them.

* A queue holds messages with delays, receive counts, a visibility timeout and a DLQ after
  `maxReceiveCount` receives (SQS Developer Guide).
* An event source mapping takes up to `batch_size` visible messages per invocation (at once
  when the batching window is 0, the deployed setting: a poller returns what is there), at
  most `MaximumConcurrency` invocations at a time, and scales up by 300 concurrent
  invocations a minute while messages wait (Lambda Developer Guide, SQS scaling). At load it
  starts scaled to its maximum (the run starts in steady state); a mapping that was stopped
  starts again from 5 and scales up.
* An invocation holds one unit of the account's concurrency; it lasts as long as its task
  waits (requests, CPU, backoffs, an agent's own work) and dies at the function's timeout.
  Its records are deleted in one DeleteMessageBatch; a failed record comes back when its
  visibility times out (or sooner, if the handler changes its visibility).

Concurrency limits are multiplied by the subset fraction `f` where every shard group shares
them (an agent pool's consumers, the account), so the subset sees its share of the design
load's capacity.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from shepherd.ports import Backlog
from shepherd_bench.scale.kernel import Invocation, Kernel, Killed, LogNormal, Task, wait_call

FULL_VCPU_MB = 1769  # Lambda: one full vCPU at 1,769 MB
SQS_LATENCY = LogNormal(8.0, 0.4)  # a send, a receive or a delete (*estimate*)
SQS_CPU_MS = 0.4  # client CPU per call on one full core, as for DynamoDB
ESM_START = 5  # concurrent invocations a mapping starts with
ESM_RAMP_PER_S = 300 / 60  # it adds up to 300 a minute


@dataclass
class Message:
    seq: int
    body: Any
    sent_at: float
    visible_at: float
    receives: int = 0
    receipt: int = 0
    inflight: bool = False
    deleted: bool = False


@dataclass
class QueueStats:
    sent: int = 0
    send_requests: int = 0
    receive_requests: int = 0
    delete_requests: int = 0
    received: int = 0
    dead_lettered: int = 0
    attribute_reads: int = 0
    expired: int = 0


class SimQueue:
    """One SQS standard queue."""

    def __init__(
        self,
        kernel: Kernel,
        name: str,
        *,
        visibility_s: float,
        max_receives: int,
        retention_s: float = 4 * 86400,
    ) -> None:
        self.kernel = kernel
        self.retention_ms = retention_s * 1000
        self.name = name
        self.visibility_ms = visibility_s * 1000
        self.max_receives = max_receives
        self.stats = QueueStats()
        self.dead: list[Message] = []
        self.listeners: list[Callable[[], None]] = []
        self._ready: list[tuple[float, int, Message]] = []
        self._inflight = 0
        self._seq = 0

    def put(self, body: Any, delay_s: float = 0.0) -> Message:
        """A message enters the queue (its SendMessageBatch request is counted by the caller)."""
        self._seq += 1
        now = self.kernel.now
        message = Message(self._seq, body, now, now + delay_s * 1000)
        self.stats.sent += 1
        self._push(message)
        return message

    def _push(self, message: Message) -> None:
        heapq.heappush(self._ready, (message.visible_at, message.seq, message))
        self.kernel.at(message.visible_at, self._notify)

    def _notify(self) -> None:
        for listener in self.listeners:
            listener()

    def visible(self) -> int:
        now = self.kernel.now
        return sum(1 for when, _, m in self._ready if when <= now and not m.deleted)

    def oldest_visible_at(self) -> float | None:
        now = self.kernel.now
        times = [w for w, _, m in self._ready if w <= now and not m.deleted]
        return min(times, default=None)

    def has_visible(self) -> bool:
        ready = self._ready
        while ready and ready[0][2].deleted:
            heapq.heappop(ready)
        return bool(ready) and ready[0][0] <= self.kernel.now

    def take(self, n: int) -> list[Message]:
        """Receive up to `n` visible messages (one ReceiveMessage)."""
        out: list[Message] = []
        now = self.kernel.now
        ready = self._ready
        while ready and len(out) < n and ready[0][0] <= now:
            _, _, message = heapq.heappop(ready)
            if message.deleted:
                continue
            if now - message.sent_at > self.retention_ms:  # expired: SQS deletes it
                message.deleted = True
                self.stats.expired += 1
                continue
            message.receives += 1
            if message.receives > self.max_receives:
                message.deleted = True
                self.dead.append(message)
                self.stats.dead_lettered += 1
                continue
            message.receipt += 1
            message.inflight = True
            message.visible_at = now + self.visibility_ms
            self._inflight += 1
            receipt = message.receipt
            self.kernel.at(message.visible_at, partial(self._expire, message, receipt))
            out.append(message)
        self.stats.receive_requests += 1
        self.stats.received += len(out)
        return out

    def _expire(self, message: Message, receipt: int) -> None:
        if message.inflight and message.receipt == receipt and not message.deleted:
            message.inflight = False
            self._inflight -= 1
            self._push(message)

    def delete(self, message: Message) -> None:
        if message.inflight and not message.deleted:
            self._inflight -= 1
        message.deleted = True
        message.inflight = False

    def release(self, message: Message, delay_s: float) -> None:
        """ChangeMessageVisibility: visible again after `delay_s`."""
        if not message.inflight or message.deleted:
            return
        message.receipt += 1
        message.inflight = False
        self._inflight -= 1
        message.visible_at = self.kernel.now + delay_s * 1000
        self._push(message)

    def backlog(self) -> Backlog:
        now = self.kernel.now
        live = [(w, m) for w, _, m in self._ready if not m.deleted]
        visible = sum(1 for w, _ in live if w <= now)
        return Backlog(visible=visible, in_flight=self._inflight, delayed=len(live) - visible)


@dataclass
class Account:
    """The account's concurrent executions, the subset's share: `limit` is the account's x f.
    A function of the subset holds 1 of it per invocation; one that runs at full size (the
    supervisor's fan-out) holds f per invocation, its share of the whole account."""

    limit: float
    in_use: float = 0.0
    peak: float = 0.0
    throttles: int = 0
    waiting: list[Callable[[], None]] = field(default_factory=list)

    def take(self, weight: float = 1.0) -> bool:
        if self.in_use + weight > self.limit + 1e-9:
            self.throttles += 1
            return False
        self.in_use += weight
        self.peak = max(self.peak, self.in_use)
        return True

    def give_back(self, weight: float = 1.0) -> None:
        self.in_use -= weight
        for poke in self.waiting:
            poke()


@dataclass
class FunctionStats:
    invocations: int = 0
    gb_seconds: float = 0.0
    timeouts: int = 0
    crashes: int = 0
    duration_ms: list[float] = field(default_factory=list)
    records: int = 0


class Function:
    """A Lambda function: memory (and so its share of a vCPU), a timeout, a handler that
    runs in a task and may wait."""

    def __init__(
        self,
        kernel: Kernel,
        account: Account,
        name: str,
        *,
        memory_mb: int,
        timeout_s: float,
        handler: Callable[[Invocation, Any], None],
        weight: float = 1.0,
    ) -> None:
        self.kernel = kernel
        self.account = account
        self.weight = weight  # of the account's share per invocation (see Account)
        self.name = name
        self.memory_mb = memory_mb
        self.timeout_ms = timeout_s * 1000
        self.handler = handler
        self.stats = FunctionStats()
        self._count = 0

    @property
    def vcpu(self) -> float:
        return min(1.0, self.memory_mb / FULL_VCPU_MB)

    def invoke(self, event: Any, done: Callable[[Invocation], None] | None = None) -> Invocation:
        """Start an invocation (the caller took the concurrency); `done` runs when it ends,
        however it ends."""
        self._count += 1
        kernel = self.kernel
        inv = Invocation(f"{self.name}-{self._count}", kernel.now, vcpu=self.vcpu)
        self.stats.invocations += 1

        def body() -> None:
            self.handler(inv, event)

        task = kernel.spawn(body, inv)

        def finished() -> None:
            duration = kernel.now - inv.started_ms
            self.stats.duration_ms.append(duration)
            self.stats.gb_seconds += self.memory_mb / 1024 * math.ceil(duration) / 1000
            self.account.give_back(self.weight)
            if done is not None:
                done(inv)

        task.on_done.append(finished)
        kernel.at(inv.started_ms + self.timeout_ms, lambda: self._time_out(inv, task))
        return inv

    def _time_out(self, inv: Invocation, task: Task) -> None:
        if not task.done:
            self.stats.timeouts += 1
            kill(inv)

    def invoke_now(self, event: Any, done: Callable[[Invocation], None] | None = None) -> bool:
        """A synchronous invocation (API Gateway): False if the account is out of
        concurrency (429)."""
        if not self.account.take(self.weight):
            return False
        self.invoke(event, done)
        return True


def kill(inv: Invocation) -> None:
    """End every task of an invocation where it stands (its sandbox died). From the loop;
    a task that kills its own invocation uses `crash`."""
    inv.dead = True
    for task in list(inv.tasks):
        task.kill()


def crash(kernel: Kernel) -> None:
    """The current invocation dies now (a crash, out of memory): its other tasks end as the
    loop gets to them, and this one unwinds from here."""
    inv = kernel.invocation()
    current = kernel.current
    assert inv is not None
    assert current is not None
    inv.dead = True
    for task in list(inv.tasks):
        if task is not current:
            kernel.at(kernel.now, task.kill)
    raise Killed()


class EventSource:
    """An SQS event source mapping: polls `queue`, invokes `function` with batches."""

    def __init__(
        self,
        kernel: Kernel,
        queue: SimQueue,
        function: Function,
        *,
        batch_size: int,
        max_concurrency: float,
        scale: float = 1.0,
        window_s: float = 0.0,
    ) -> None:
        self.kernel = kernel
        self.queue = queue
        self.function = function
        self.batch_size = batch_size
        self.max_concurrency = max_concurrency
        self.window_ms = window_s * 1000
        self.scale = scale  # the subset's share of the mapping's scaling
        self.limit = max_concurrency  # steady state: scaled up already
        self.active = 0
        self.enabled = True
        self.peak = 0
        self.batches: Counter[int] = Counter()
        self._scheduled = False
        self._ramp_at = kernel.now
        queue.listeners.append(self.poke)
        function.account.waiting.append(self.poke)

    def poke(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.kernel.at(self.kernel.now, self._dispatch)

    def stop(self) -> None:
        self.enabled = False

    def start(self) -> None:
        """Enabled again: it starts from 5 concurrent invocations and scales up."""
        self.enabled = True
        self.limit = max(1.0, min(self.max_concurrency, ESM_START * self.scale))
        self._ramp_at = self.kernel.now
        self.poke()

    def _ramp(self) -> None:
        """Up to 300 more concurrent invocations a minute (scaled), while messages wait."""
        elapsed = (self.kernel.now - self._ramp_at) / 1000
        self._ramp_at = self.kernel.now
        if self.limit < self.max_concurrency:
            step = ESM_RAMP_PER_S * self.scale * elapsed
            self.limit = min(self.max_concurrency, self.limit + step)

    def _dispatch(self) -> None:
        self._scheduled = False
        if not self.enabled:
            return
        self._ramp()
        if self.window_ms and self.queue.visible() < self.batch_size:
            oldest = self.queue.oldest_visible_at()
            if oldest is not None and self.kernel.now < oldest + self.window_ms:
                self.kernel.at(oldest + self.window_ms, self.poke)  # filling the batch
                return
        account = self.function.account
        while self.active < max(1, math.floor(self.limit)) and self.queue.has_visible():
            if not account.take(self.function.weight):
                return  # woken when an invocation ends
            batch = self.queue.take(self.batch_size)
            if not batch:
                account.give_back(self.function.weight)
                break
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.batches[len(batch)] += 1
            self.function.stats.records += len(batch)
            self.function.invoke(batch, self._finished)
        if self.queue.has_visible() and self.limit < self.max_concurrency:
            self.kernel.at(self.kernel.now + 1000, self.poke)  # scaling up

    def _finished(self, inv: Invocation) -> None:
        self.active -= 1
        self.poke()


def sqs_call(kernel: Kernel) -> None:
    """One SQS request from the current task (a send, a delete, a queue-attributes read)."""
    wait_call(kernel, SQS_LATENCY.sample(kernel.rng), SQS_CPU_MS)
