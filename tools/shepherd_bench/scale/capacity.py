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
window: a burst that fills it is throttled for longer than a second.

A window never reaches back before the partition's first request in the run: a key that lives
shorter than `1 / f` seconds (a circuit breaker's counter slot lives `WindowSeconds / 6`, 10 s
by default; the window at 1 group of 128 is 128 s) would otherwise have its life's requests
spread over a window mostly empty, and read `life / window` of its rate (a breaker 5x over a
partition printed a peak of 0.0). So a shared partition's rate is its units since its first
request, up to `1 / f` seconds back, over that span, at full size: `units x (1 / f) / span`.
A span under `MIN_SPAN_S` holds too few of the subset's requests to say a rate: its units are
counted over `MIN_SPAN_S` (and its peaks not taken), which reads a key that lives shorter than
that low by `life / MIN_SPAN_S`. A partition the run finds already written (the list index,
the pool states) starts its span with the run, which is the same rule. A list-index
partition's factor is measured instead (`overrides`): the engine's own item for sample
workflow ids of every group says how the whole system's writes spread over the list partitions
and the subset's do, so a sharding of the list index that follows the watch shard is not
counted 1 / f times.

The table's and each index's own throughput (on-demand: 40,000 read and 40,000 write units a
second per table unless configured) is accounted a second at a time over every partition: the
subset's units in a second / f (a sum over thousands of keys: no window needed), offered and
consumed (`TableRates`).
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from shepherd.keys import WF_PREFIX
from shepherd.topology import TABLE

WRITE_LIMIT = 1000.0  # write units a second per partition (and per item)
READ_LIMIT = 3000.0  # read units a second per partition (and per item)
MIN_SPAN_S = 10  # seconds of a shared partition's requests before its rate is taken
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
    first: int | None = None  # the second of its first request in the run
    # A window longer than a second slides a second at a time: per-second buckets of
    # [second, wru, rru, offered wru, offered rru], the sums above over the last `scale`.
    buckets: deque[list[float]] | None = None

    def roll(self, second: int) -> None:
        """Move the window to end with `second`."""
        if second == self.second:
            return
        if self.first is None:
            self.first = second
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

    def span(self) -> int:
        """Seconds the window holds: `1 / f`, or fewer since the partition's first request."""
        first = self.second if self.first is None else self.first
        return min(max(1, round(self.scale)), self.second - first + 1)

    def counted(self) -> bool:
        """Whether its window holds enough seconds to say a rate (see the module's doc)."""
        return self.scale <= 1 or self.span() >= min(max(1, round(self.scale)), MIN_SPAN_S)

    def per_second(self, units: float) -> float:
        """`units` in the current window as the whole system's units in a second."""
        if self.scale <= 1:
            return units
        whole = max(1, round(self.scale))
        return units * self.scale / max(self.span(), min(whole, MIN_SPAN_S))

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
    # The first second a partition throttled a request, and which (what broke first).
    first_throttle: tuple[int, str, str] | None = None
    # The table's and the indexes' units a second, at full size (TableRates).
    rates: TableRates = field(default_factory=lambda: TableRates())  # noqa: PLW0108 - defined below

    def __post_init__(self) -> None:
        self.rates.fraction = 1 / self.shared_scale

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
        rates = self.rates
        for part, units in writes:
            part.roll(second)
            part.add(wru=units, offered=True)
            rates.add(second, part.index, wru=units, offered=True)
            if part.counted():
                part.peak_offered = max(
                    part.peak_offered, part.per_second(part.offered_wru) / WRITE_LIMIT
                )
            if part.per_second(part.wru + units) > WRITE_LIMIT:
                part.throttled += 1
                fits = False
        for part, units in reads:
            part.roll(second)
            part.add(rru=units, offered=True)
            rates.add(second, part.index, rru=units, offered=True)
            if part.counted():
                part.peak_offered = max(
                    part.peak_offered, part.per_second(part.offered_rru) / READ_LIMIT
                )
            if part.per_second(part.rru + units) > READ_LIMIT:
                part.throttled += 1
                fits = False
        if not fits:
            if self.first_throttle is None:
                over = next(p for p, _ in (*writes, *reads) if p.throttled)
                self.first_throttle = (second, over.index, over.key)
            return False
        for part, units in writes:
            part.add(wru=units)
            part.total_wru += units
            rates.add(second, part.index, wru=units)
            self._consumed(part, part.per_second(part.wru) / WRITE_LIMIT)
        for part, units in reads:
            part.add(rru=units)
            part.total_rru += units
            rates.add(second, part.index, rru=units)
            self._consumed(part, part.per_second(part.rru) / READ_LIMIT)
        return True

    def _consumed(self, part: Partition, value: float) -> None:
        if not part.counted():
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

    def hot_keys(self, count: int = 10) -> list[dict[str, object]]:
        """The `count` hottest partitions by peak one-second utilization (consumed, and what
        was asked of it, throttled requests included), each with its key pattern."""
        ranked = sorted(
            self.partitions.values(), key=lambda p: (p.peak_offered, p.peak), reverse=True
        )
        return [
            {
                "index": p.index,
                "key": p.key,
                "pattern": key_pattern(p.key),
                "peak": round(p.peak, 3),
                "peak_offered": round(p.peak_offered, 3),
                "throttled": p.throttled,
            }
            for p in ranked[:count]
        ]


def key_pattern(key: str) -> str:
    """A partition key with its variable parts named (`CB#<pool>#<slot>#<shard>`...): the
    digits of each `#` part, and a workflow's id, as placeholders."""
    if key.startswith(WF_PREFIX):
        return WF_PREFIX + "<workflow id>"
    parts = key.split("#")
    return "#".join("<n>" if p.isdigit() else p for p in parts)


@dataclass
class TableRates:
    """The subset's units each second by table or index, offered and consumed; read at full
    size through `f` (`per_second`)."""

    offered: dict[str, defaultdict[int, float]] = field(default_factory=dict)
    consumed: dict[str, defaultdict[int, float]] = field(default_factory=dict)
    fraction: float = 1.0

    def add(
        self, second: int, index: str, *, wru: float = 0.0, rru: float = 0.0, offered: bool = False
    ) -> None:
        into = self.offered if offered else self.consumed
        for kind, units in (("wru", wru), ("rru", rru)):
            if units:
                into.setdefault(f"{index}:{kind}", defaultdict(float))[second] += units

    def per_second(self, index: str, kind: str, *, offered: bool = True) -> dict[int, float]:
        """Full-size units a second of `index` (`table` or an index's name), `wru` or `rru`."""
        got: Mapping[int, float] = (self.offered if offered else self.consumed).get(
            f"{index}:{kind}", {}
        )
        return {s: u / self.fraction for s, u in got.items()}

    def indexes(self) -> list[str]:
        return sorted({key.split(":", 1)[0] for key in self.offered})
