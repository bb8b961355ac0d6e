"""The fault model: one probability knob per fault kind, and counters of what was injected."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields, replace

# Every knob, in the order reports print them, with what one injection means.
FAULT_KINDS: dict[str, str] = {
    "delay": "a task message is delivered late (extra SQS delay of 1-12 s)",
    "dup": "a message is delivered twice (sent twice or received twice), or a start is submitted twice",
    "reorder": "a received message is held back 0.3-3 s so later ones overtake it",
    "lose": "a message is lost (dropped on send, send raises DeliveryError, or deleted unprocessed)",
    "crash_before": "the agent process dies before its side effect",
    "crash_after": "the agent process dies after its side effect, before recording success",
    "pause": "the agent process freezes past its lease, then resumes (a zombie)",
    "hang": "the agent function hangs until the Lambda timeout kills it",
    "retryable": "the agent raises a retryable error (before or after its side effect)",
    "permanent": "the agent raises a permanent (non-retryable) error",
    "oversize": "the agent reports progress over its cap (before the effect) or returns an "
    "output over its cap (after it); a callback step's external system calls back with one",
    "store_before": "a store call fails (throttled) before taking effect",
    "store_after": "a store write takes effect, then the call fails (timeout)",
    "slow": "a store call takes 5 ms-1.5 s, so anything else can happen in the middle",
    "payload_slow": "a payload-bucket call (S3) takes 5 ms-1.5 s",
    "payload_put": "a payload-bucket put fails (S3 5xx) before storing anything",
    "payload_get": "a payload-bucket get fails (S3 5xx)",
    "index_lag": "a sweep's query reads the watch index as it was 0.05-2 s ago (the GSI lags)",
    "double_sweep": "a second supervisor sweeps in the middle of another's sweep",
    "sweep_crash": "a supervisor dies mid-sweep (at a random store call, before or after it)",
    "lease_expiry": "a sweeper frozen in the middle of its sweep outlives its group's lease: "
    "another takes the group over, then the first carries on (share of double sweeps)",
    "clock_jump": "the clock jumps forward 2-40 s (checked once per simulated second)",
    "cancel": "the client cancels a running workflow",
    "redrive": "an operator retries a FAILED workflow (fresh retry budgets)",
    "operator": "an operator pauses a running workflow, then resumes it (sometimes with a "
    "replacement input for a step), compensates it or cancels it a while later",
    "pool_pause": "an operator pauses an agent pool for 1-20 s, then resumes it",
    "outage": "an agent pool's downstream service fails every call (a retryable error) for "
    "5-40 s (checked once per simulated second; one outage per pool at a time)",
    "schedule_dup": "sim_approval's schedule fires once in the run, its firing delivered 2-3 "
    "times (Scheduler is at least once), some at once, some seconds later (once per seed)",
    "relay_delay": "the event relay polls a stream shard 2-30 s late (it falls behind)",
    "relay_crash": "a relay invocation dies after publishing part (or all) of its batch, "
    "before its checkpoint: the batch comes again, bisected (duplicates)",
    "relay_fail": "the relay cannot publish one record (a batch item failure): it is retried "
    "from there; after 10 retries it goes to the on-failure queue, replayed later",
    "throttle_episode": "every write to one live workflow's partition is throttled for 5-300 s "
    "(a hot partition; issue 41.3: throttling never costs an attempt)",
    "parent_cancel": "an operator cancels a parent workflow 0.05-3 s after one of its child "
    "workflows started (per child started): the cancel must reach down",
    "signal_workload": "the run adds 1-2 sim_signal workflows, signalled early, while they "
    "wait, around their deadlines and late, some twice, some cancelled (once per seed, when "
    "no workflow types are pinned)",
    "signal_crash": "a signal's sender stops right after keeping it, before handing it over "
    "(per signal sent): the supervisor must hand it over",
    "repeat_workload": "the run adds 1-3 sim_repeat workflows, whose Repeat step loops until "
    "its rule holds or fails at MaxIterations (once per seed, when no workflow types are "
    "pinned)",
}


@dataclass(frozen=True)
class Faults:
    """Probabilities, each in [0, 1]. Message knobs apply per message, agent knobs per
    attempt (at most one agent fault per attempt), store knobs per store call, sweep knobs
    per sweep, `clock_jump`, `pool_pause` and `outage` per simulated second, `cancel` and
    `operator` per workflow, `schedule_dup` per seed, `redrive` per FAILED workflow (once); `relay_delay` per poll of
    a stream shard, `relay_crash` per relay invocation, `relay_fail` per record published, `parent_cancel` per child workflow started, `throttle_episode` per tick,
    `signal_workload` per seed, `signal_crash` per signal sent, `repeat_workload` per seed.
    Callbacks of callback steps are messages too: `lose`, `dup` and `delay` apply to them."""

    delay: float = 0.05
    dup: float = 0.05
    reorder: float = 0.08
    lose: float = 0.04
    crash_before: float = 0.03
    crash_after: float = 0.03
    pause: float = 0.03
    hang: float = 0.02
    retryable: float = 0.08
    permanent: float = 0.03
    oversize: float = 0.02
    store_before: float = 0.004
    store_after: float = 0.004
    slow: float = 0.03
    payload_slow: float = 0.02
    payload_put: float = 0.01
    payload_get: float = 0.01
    index_lag: float = 0.2
    double_sweep: float = 0.03
    sweep_crash: float = 0.02
    lease_expiry: float = 0.5
    clock_jump: float = 0.005
    cancel: float = 0.05
    redrive: float = 0.5
    operator: float = 0.1
    pool_pause: float = 0.01
    outage: float = 0.01
    schedule_dup: float = 0.2
    relay_delay: float = 0.02
    relay_crash: float = 0.03
    relay_fail: float = 0.01
    parent_cancel: float = 0.15
    # Off by default (a new kind leaves every seed's run as it was): `FAULTS=throttle_episode=p`.
    throttle_episode: float = 0.0
    signal_workload: float = 0.3
    signal_crash: float = 0.15
    # Off by default (it would change the seeds that roll it, and tests/sim/equivalence.json
    # records them): `make sim` runs loops in a pass of their own (`--types sim_repeat`), and
    # `FAULTS=repeat_workload=p` mixes them into the default workload.
    repeat_workload: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault '{f.name}': probability {value} is not in [0, 1]")

    @classmethod
    def none(cls) -> Faults:
        return cls(**{f.name: 0.0 for f in fields(cls)})

    @classmethod
    def parse(cls, text: str, base: Faults | None = None) -> Faults:
        """`dup=0.1,lose=0.05` on top of `base` (the defaults); `none` starts from zero.

        `none,dup=0.2` injects only duplicates.
        """
        faults = base or cls()
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            if part == "none":
                faults = cls.none()
                continue
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep or name not in FAULT_KINDS:
                known = ", ".join(FAULT_KINDS)
                raise ValueError(f"bad fault '{part}': expected NAME=PROBABILITY, NAME in {known}")
            try:
                probability = float(value)
            except ValueError:
                raise ValueError(f"bad fault '{part}': {value!r} is not a number") from None
            faults = replace(faults, **{name: probability})
        return faults

    def scaled(self, factor: float) -> Faults:
        return Faults(**{f.name: min(1.0, getattr(self, f.name) * factor) for f in fields(self)})

    def describe(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name):g}" for f in fields(self))


def empty_counts() -> Counter[str]:
    return Counter({name: 0 for name in FAULT_KINDS})
