"""DynamoDB's partitions as the scale model meters them: units, limits, throttling.

Every table item collection (one `pk`) and every index partition (one index partition-key
value) is a partition with its own budget: 1,000 write units and 3,000 read units a second
(DynamoDB Developer Guide, "key range throughput exceeded"; the same for tables and GSIs).
A request that would take a partition past its budget in the current second is rejected
whole and consumes nothing, and a base-table write whose index entry lands in a throttled
index partition is rejected with it (GSI back-pressure). No burst credit is modelled (a
pessimistic choice) and split-for-heat is not: an item collection is capped like one
partition, which is exact for the index partitions whose sort key only grows.

A *shared* partition (anything but a workflow's collection and a watch shard: the caller's
list-index partitions, pool states, config, leases, definition snapshots) serves every shard
group, while the model runs only a fraction `f` of them. Its budget is kept over a window
of `1 / f` seconds, sliding a second at a time, instead of one second: the subset's requests
in `1 / f` seconds are, in number and in their spread, the whole system's in one second (a
Poisson stream thinned by `f`), so its utilization in any window is the design load's in a
second, noise included (counting each request `1 / f` times in a one-second window would
inflate the peaks by `sqrt(1 / f)`). What it cannot keep is the timing inside an overloaded
window: a burst that fills it is throttled for longer than a second. Nor can it know the
requests before the run's start: a shared partition's peaks count only from the first window
that lies wholly inside the run (`start_ms`), since a partial window holds fewer than a
second's requests at full size and would read low (its throttling is optimistic for as
long). A list-index partition's factor is
measured instead (`overrides`): the engine's own item for sample workflow ids of every group
says how the whole system's writes spread over the list partitions and the subset's do, so
a sharding of the list index that follows the watch shard is not counted 1 / f times.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from shepherd.keys import WF_PREFIX
from shepherd.topology import TABLE

WRITE_LIMIT = 1000.0  # write units a second per partition (and per item)
READ_LIMIT = 3000.0  # read units a second per partition (and per item)
KB = 1024
READ_UNIT = 4 * KB
TABLE_NAME = "table"


def write_units(size_before: int, size_after: int) -> int:
    """1 WRU per started KB of the larger image, at least 1."""
    return max(1, math.ceil(max(size_before, size_after) / KB))


def read_units(size: int, *, consistent: bool = True) -> float:
    """1 RRU per started 4 KB read consistently (0.5 eventually), at least one unit."""
    units = max(1, math.ceil(size / READ_UNIT))
    return float(units) if consistent else units / 2


@dataclass
class Partition:
    """One partition's budget in its current window, and its history."""

    index: str
    key: str
    scale: float  # its window in seconds: 1, or 1 / f (or the measured factor) if shared
    second: int = -1
    wru: float = 0.0  # consumed in the window ending with the current second
    rru: float = 0.0
    offered_wru: float = 0.0  # asked for in it, throttled requests included
    offered_rru: float = 0.0
    peak: float = 0.0  # largest consumed / limit in any window
    peak_offered: float = 0.0  # largest offered / limit in any window
    peak_second: int = 0
    throttled: int = 0
    total_wru: float = 0.0  # what this run's requests consumed
    total_rru: float = 0.0
    # A window longer than a second slides a second at a time: per-second buckets of
    # [second, wru, rru, offered wru, offered rru], the sums above over the last `scale`.
    buckets: deque[list[float]] | None = None

    def roll(self, second: int) -> None:
        """Move the window to end with `second`."""
        if second == self.second:
            return
        self.second = second
        if self.scale <= 1:
            self.wru = self.rru = self.offered_wru = self.offered_rru = 0.0
            return
        if self.buckets is None:
            self.buckets = deque()
        buckets = self.buckets
        buckets.append([float(second), 0.0, 0.0, 0.0, 0.0])
        oldest = second - max(1, round(self.scale))
        while buckets[0][0] <= oldest:
            _, w, r, ow, orr = buckets.popleft()
            self.wru -= w
            self.rru -= r
            self.offered_wru -= ow
            self.offered_rru -= orr

    def add(self, wru: float = 0.0, rru: float = 0.0, offered: bool = False) -> None:
        if offered:
            self.offered_wru += wru
            self.offered_rru += rru
        else:
            self.wru += wru
            self.rru += rru
        if self.buckets:
            bucket = self.buckets[-1]
            at = 3 if offered else 1
            bucket[at] += wru
            bucket[at + 1] += rru

    @property
    def kind(self) -> str:
        """A label for the report: which family of partitions this is."""
        if self.index != TABLE_NAME:
            return self.index
        return self.key.split("#", 1)[0] + "#" if "#" in self.key else self.key


@dataclass
class Capacity:
    """Every partition the run touched, and the hottest second of any of them."""

    shared_scale: float = 1.0
    partitions: dict[tuple[str, str], Partition] = field(default_factory=dict)
    # Measured factors for shared partitions whose key comes from the workflow (the list
    # index): how much more the whole system writes there than the subset does.
    overrides: dict[tuple[str, str], float] = field(default_factory=dict)
    hottest: float = 0.0
    hottest_key: tuple[str, str] = ("", "")
    hottest_second: int = 0
    # The run's start: a window that began before it holds part of the load only.
    start_ms: float | None = None

    def full(self, part: Partition) -> bool:
        """Whether `part`'s current window lies wholly inside the run (its peaks count)."""
        if self.start_ms is None or part.scale <= 1:
            return True
        return part.second - int(self.start_ms // 1000) + 1 >= round(part.scale)

    def scale_of(self, index: str, key: str) -> float:
        """The window (seconds) a partition's budget is kept over: 1 for a partition the
        subset owns whole (a workflow's collection, a watch shard); 1 / f for one every shard
        group shares; the measured factor of a partition whose key comes from the workflow id
        (a subset's workflows may map to some of them only)."""
        found = self.overrides.get((index, key))
        if found is not None:
            return found
        if index == TABLE_NAME and key.startswith(WF_PREFIX):
            return 1.0
        if index == TABLE.watch_index.name:
            return 1.0
        return self.shared_scale

    def partition(self, index: str, key: str) -> Partition:
        found = self.partitions.get((index, key))
        if found is None:
            found = Partition(index, key, self.scale_of(index, key))
            self.partitions[(index, key)] = found
        return found

    def admit(
        self,
        now_ms: float,
        writes: list[tuple[Partition, float]],
        reads: list[tuple[Partition, float]],
    ) -> bool:
        """Consume the units if every partition has room in its current window; else consume
        nothing (the request is throttled) and count the throttle where there was no room."""
        fits = True
        second = int(now_ms // 1000)
        for part, units in writes:
            part.roll(second)
            part.add(wru=units, offered=True)
            if self.full(part):
                part.peak_offered = max(part.peak_offered, part.offered_wru / WRITE_LIMIT)
            if part.wru + units > WRITE_LIMIT:
                part.throttled += 1
                fits = False
        for part, units in reads:
            part.roll(second)
            part.add(rru=units, offered=True)
            if self.full(part):
                part.peak_offered = max(part.peak_offered, part.offered_rru / READ_LIMIT)
            if part.rru + units > READ_LIMIT:
                part.throttled += 1
                fits = False
        if not fits:
            return False
        for part, units in writes:
            part.add(wru=units)
            part.total_wru += units
            self._consumed(part, part.wru / WRITE_LIMIT)
        for part, units in reads:
            part.add(rru=units)
            part.total_rru += units
            self._consumed(part, part.rru / READ_LIMIT)
        return True

    def _consumed(self, part: Partition, value: float) -> None:
        if not self.full(part):
            return
        if value > part.peak:
            part.peak = value
            part.peak_second = part.second
        if value > self.hottest:
            self.hottest = value
            self.hottest_key = (part.index, part.key)
            self.hottest_second = part.second

    def by_kind(self) -> dict[str, dict[str, float]]:
        """The hottest partition of each family, consumed and offered, and its throttles."""
        out: dict[str, dict[str, float]] = {}
        for part in self.partitions.values():
            row = out.setdefault(
                part.kind,
                {"partitions": 0, "peak": 0.0, "peak_offered": 0.0, "throttled": 0, "scale": 0.0},
            )
            row["partitions"] += 1
            row["peak"] = max(row["peak"], part.peak)
            row["peak_offered"] = max(row["peak_offered"], part.peak_offered)
            row["throttled"] += part.throttled
            row["scale"] = part.scale
        return dict(sorted(out.items()))
