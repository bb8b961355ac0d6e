"""The simulation: the real scheduler, agent runtime and supervisors over fault-injecting
in-memory ports, driven by a seeded discrete-event loop under a ManualClock.

One seed is one exact run: every choice comes from `random.Random(seed)` (faults, timing,
which worker runs a message) or from the engine's own `random.Random` (jitter), ids are
sequential, and agent invocations run as fibers that hand control back and forth with the
event loop, so no two pieces of code ever run at the same time.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import itertools
import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shepherd import limits
from shepherd.changes import Change
from shepherd.clock import ManualClock
from shepherd.conditions import Cond, Item, Update
from shepherd.decisions.repeat import LOOP_LIMIT
from shepherd.definitions import Definition, TaskSpec, load_directory, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry, AgentRuntime, Pending
from shepherd.engine.build import Engine, build_engine
from shepherd.engine.pools import pool_states
from shepherd.engine.scheduler import EngineConfig, Ports, derived_id
from shepherd.engine.supervisor import look_ahead_until
from shepherd.errors import (
    InvalidTransition,
    PermanentError,
    TaskTokenInvalid,
    TaskTokenStale,
    WorkflowNotFound,
)
from shepherd.keys import POOLS_PK, WF_SK, wf_pk
from shepherd.kinds import kind_of
from shepherd.model import (
    PoolState,
    StepRecord,
    StepStatus,
    TaskMessage,
    WorkflowState,
    WorkflowStatus,
    loads,
)
from shepherd.payloads import MemoryPayloadStore, Payloads
from shepherd.pool_policy import CircuitBreaker, PoolPolicy
from shepherd.ports import DueEntry, DuePage
from shepherd.testing import MemoryQueue, MemoryStore, Received, SequentialIds

from shepherd_sim import bounds
from shepherd_sim.faults import Faults, empty_counts
from shepherd_sim.fibers import Fiber, FiberKilled, current
from shepherd_sim.invariants import (
    TERMINAL_EVENTS,
    ApprovalCall,
    Claim,
    Firing,
    Handled,
    Redispatch,
    RunRecord,
    Sent,
    SignalCall,
    StatusWrite,
    Violation,
    announced,
    answered_after_deadline,
    approval_endings,
    check_all,
    check_findable,
    fresh,
    inbox_problems,
    item_units,
    missing_events,
    orphaned_effects,
    same_objects,
    unit_name,
    with_windows,
)
from shepherd_sim.people import SCHEDULED_TYPE, People, PersonStore
from shepherd_sim.ports import (
    FaultyPayloadStore,
    FaultyQueue,
    FaultyStore,
    SupervisorCrash,
    SweepPlan,
)
from shepherd_sim.relay import RELAY_FAULTS, Delivery, Relay
from shepherd_sim.service import Effect, FakeService
from shepherd_sim.signallers import (
    SIGNAL_NAME,
    SIGNAL_TYPE,
    Signallers,
    SignallerStore,
)

ROOT = Path(__file__).resolve().parents[2]


class SimClock(ManualClock):
    """The simulation's clock: the event loop moves it; a wait inside the engine (a backoff)
    is a fiber's sleep, so everything else happens meanwhile."""

    def __init__(self, sim: Simulation) -> None:
        super().__init__()
        self._sim = sim

    def sleep(self, seconds: float) -> None:
        self._sim.sleep(seconds)


OWNER = "sim"
# Who may answer `sim_approval`'s approval besides the workflow's owner (`shepherd_sim.people`).
APPROVERS = ("alice", "bob")

# A synthetic workflow with very short timeouts, small retry budgets, a step without a
# heartbeat, one without a compensation, a join and a compensation that is never retried,
# so exhausted retries, FAILED workflows and tight races come up often.
FLASH: dict[str, Any] = {
    "Name": "sim_flash",
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": "alpha",
            "Agent": "sim_alpha",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2, "NonRetryableErrors": ["Fatal"]},
            "Compensation": {
                "Agent": "sim_undo_alpha",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "beta",
            "DependsOn": ["alpha"],
            "Agent": "sim_beta",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 0},
        },
        {
            "Name": "gamma",
            "DependsOn": ["alpha"],
            "Agent": "sim_gamma",
            "Pool": "sim-b",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {
                "MaxAttempts": 2,
                "IntervalSeconds": 0.1,
                "BackoffRate": 3,
                "JitterStrategy": "FULL",
            },
            "Compensation": {
                "Agent": "sim_undo_gamma",
                "Pool": "sim-b",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 0},
            },
        },
        {
            "Name": "delta",
            "DependsOn": ["beta", "gamma"],
            "Agent": "sim_delta",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.5},
            "Compensation": {
                "Agent": "sim_undo_delta",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
    ],
}


# Independent branches that each have a compensation, undone in PARALLEL; a step failing for
# good PAUSES the workflow (but `east` unwinds it at once), and a workflow left paused for 1 s
# is given up (PauseTimedOut): shorter than every other timeout of the definition, so the
# pause timeout is the soonest deadline an event (the pause) can create. `east` backs off
# for seconds (3 s, then 6 s), longer than the dispatch grace, while the other branches go on. `south` is undone only after a recorded success (When:
# SUCCEEDED), so its failed attempts may leave effects behind (counted, by design); `report`
# has no compensation.
FAN: dict[str, Any] = {
    "Name": "sim_fan",
    "DispatchTimeoutSeconds": 2,
    "OnFailure": "PAUSE",
    "PauseTimeoutSeconds": 1,
    "CompensationOrder": "PARALLEL",
    "Steps": [
        {
            "Name": "north",
            "Agent": "sim_north",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2, "NonRetryableErrors": ["Fatal"]},
            "Compensation": {
                "Agent": "sim_undo_north",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "south",
            "Agent": "sim_south",
            "Pool": "sim-b",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 0},
            "Compensation": {
                "When": "SUCCEEDED",
                "Agent": "sim_undo_south",
                "Pool": "sim-b",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
            },
        },
        {
            "Name": "east",
            "Agent": "sim_east",
            "Pool": "sim",
            "OnFailure": "COMPENSATE",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 2, "IntervalSeconds": 3, "BackoffRate": 2},
            "Compensation": {
                "Agent": "sim_undo_east",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
            },
        },
        {
            "Name": "north_two",
            "DependsOn": ["north"],
            "Agent": "sim_north_two",
            "Pool": "sim-b",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.3},
            "Compensation": {
                "Agent": "sim_undo_north_two",
                "Pool": "sim-b",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "merge",
            "DependsOn": ["north_two", "south", "east"],
            "Agent": "sim_merge",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_merge",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "report",
            "DependsOn": ["merge"],
            "Agent": "sim_report",
            "Pool": "sim-b",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
        },
    ],
}

# A chain undone in REVERSE order whose later steps PAUSE the workflow when they fail for good
# (the definition unwinds by default) and that has no pause timeout: only an operator ends
# such a pause, and the paused workflow with nothing in flight leaves the watch index. `load`
# and `audit` are undone only after a recorded success (When: SUCCEEDED).
HOLD: dict[str, Any] = {
    "Name": "sim_hold",
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": "load",
            "Agent": "sim_load",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "When": "SUCCEEDED",
                "Agent": "sim_undo_load",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "apply",
            "DependsOn": ["load"],
            "Agent": "sim_apply",
            "Pool": "sim-b",
            "OnFailure": "PAUSE",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 0},
            "Compensation": {
                "Agent": "sim_undo_apply",
                "Pool": "sim-b",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "audit",
            "DependsOn": ["apply"],
            "Agent": "sim_audit",
            "Pool": "sim",
            "OnFailure": "PAUSE",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "When": "SUCCEEDED",
                "Agent": "sim_undo_audit",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 0},
            },
        },
    ],
}

# A two-way branch on the input (issue 25): `big` or `small` runs, the other is SKIPPED; a
# Wait rests 1 s behind `big` (woken by the supervisor, no Lambda), and `join` depends on the
# wait and on `small`, one of them always through a skip. Skipped steps must never be
# claimed or compensated; a wait never wakes before its time (`check_skips_and_waits`).
BRANCH: dict[str, Any] = {
    "Name": "sim_branch",
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": "probe",
            "Agent": "sim_probe",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_probe",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "big",
            "DependsOn": ["probe"],
            "Condition": {"Variable": "$.input.n", "NumericGreaterThan": 1},
            "Agent": "sim_big",
            "Pool": "sim-b",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_big",
                "Pool": "sim-b",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "small",
            "DependsOn": ["probe"],
            "Condition": {"Not": {"Variable": "$.input.n", "NumericGreaterThan": 1}},
            "Agent": "sim_small",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_small",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {"Name": "settle", "DependsOn": ["big"], "Wait": {"Seconds": 1}},
        {
            "Name": "join",
            "DependsOn": ["settle", "small"],
            "Agent": "sim_join",
            "Pool": "sim-b",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
        },
    ],
}

# A person decides (issue 25): `request` acts (and is undone when the approval is rejected or
# times out), `review` waits for the owner or an approver for 3 s (a person answers at random
# moments around that: `shepherd_sim.people`), then `fulfil` runs. Its schedule fires only in
# seeds that roll `schedule_dup`, each firing delivered more than once.
APPROVAL: dict[str, Any] = {
    "Name": "sim_approval",
    "DispatchTimeoutSeconds": 2,
    "Schedules": [
        {"Name": "sim_approval_nightly", "Expression": "cron(0 2 * * ? *)", "Input": {"n": 0}}
    ],
    "Steps": [
        {
            "Name": "request",
            "Agent": "sim_request",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_request",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "review",
            "DependsOn": ["request"],
            "Approval": {"TimeoutSeconds": 3, "Approvers": list(APPROVERS)},
        },
        {
            "Name": "fulfil",
            "DependsOn": ["review"],
            "Agent": "sim_fulfil",
            "Pool": "sim-b",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
        },
    ],
}

# A map (issue 24): `split` returns the items (as many as the input's `items` says, 0 to 40),
# `each` runs once per item in pool `sim-b` (the outage pool, behind its circuit breaker), at
# most MaxConcurrency at a time, then `report`. Every step is undone When: ATTEMPTED; `each`
# per item (each item that was claimed). The map's MaxConcurrency, tolerance and the
# definition's CompensationOrder are drawn per seed (`map_definition`): the base below is one
# of the variants.
MAP_STEP = "each"
MAP_SOURCE = "split"  # the step whose output holds the items
MAP: dict[str, Any] = {
    "Name": "sim_map",
    "DispatchTimeoutSeconds": 2,
    "CompensationOrder": "REVERSE",
    "Steps": [
        {
            "Name": MAP_SOURCE,
            "Agent": "sim_split",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_split",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": MAP_STEP,
            "DependsOn": [MAP_SOURCE],
            "Map": {"ItemsPath": f"$.steps.{MAP_SOURCE}.output.items", "MaxConcurrency": 2},
            "Agent": "sim_each",
            "Pool": "sim-b",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "When": "ATTEMPTED",
                "Agent": "sim_undo_each",
                "Pool": "sim-b",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "report",
            "DependsOn": [MAP_STEP],
            "Agent": "sim_map_report",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
            "Compensation": {
                "Agent": "sim_undo_map_report",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
    ],
}
MAP_TYPE = "sim_map"

# Child workflows (issue 24): `sim_kid` is only ever started by a parent (never by the
# workload): two steps, each undone (`fill` only after a recorded success). `sim_parent` runs it
# as its `kid` step between two agent steps: a `Workflow:` step with a TimeoutSeconds a slow or
# faulty child can pass (the child is then asked to cancel, and the attempt fails with
# States.Timeout) and a Retry, so an attempt whose child failed starts a fresh child. A
# Workflow step takes no Compensation: unwinding past it, its child (SUCCEEDED) undoes itself.
KID_TYPE = "sim_kid"
KID: dict[str, Any] = {
    "Name": KID_TYPE,
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": "dig",
            "Agent": "sim_dig",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_dig",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "fill",
            "DependsOn": ["dig"],
            "Agent": "sim_fill",
            "Pool": "sim-b",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
            "Compensation": {
                "When": "SUCCEEDED",
                "Agent": "sim_undo_fill",
                "Pool": "sim-b",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            },
        },
    ],
}
CHILD_STEP = "kid"
PARENT_TYPE = "sim_parent"
PARENT: dict[str, Any] = {
    "Name": PARENT_TYPE,
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": "prep",
            "Agent": "sim_prep",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_prep",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": CHILD_STEP,
            "DependsOn": ["prep"],
            "Workflow": KID_TYPE,
            "TimeoutSeconds": 4,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.5},
        },
        {
            "Name": "seal",
            "DependsOn": [CHILD_STEP],
            "Agent": "sim_seal",
            "Pool": "sim-b",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
            "Compensation": {
                "Agent": "sim_undo_seal",
                "Pool": "sim-b",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
    ],
}
# A map of child workflows (the Distributed Map shape): `spread` returns 0-4 items (drawn per
# start, `fleet_items`), `kids` starts one `sim_kid` per item, two at a time, each item's
# attempt a child of its own (a retry: a fresh child); unwinding undoes every item whose
# child SUCCEEDED, the children undoing themselves.
FLEET_SOURCE = "spread"
FLEET_STEP = "kids"
FLEET_TYPE = "sim_fleet"
FLEET: dict[str, Any] = {
    "Name": FLEET_TYPE,
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": FLEET_SOURCE,
            "Agent": "sim_spread",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_spread",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": FLEET_STEP,
            "DependsOn": [FLEET_SOURCE],
            "Map": {"ItemsPath": f"$.steps.{FLEET_SOURCE}.output.items", "MaxConcurrency": 2},
            "Workflow": KID_TYPE,
            "TimeoutSeconds": 4,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.3},
        },
        {
            "Name": "tally",
            "DependsOn": [FLEET_STEP],
            "Agent": "sim_tally",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
        },
    ],
}
# Signals (issue 37.7): `request` acts (undone if the workflow unwinds), `listen` waits 3 s
# for a `sim_ping` signal and `listen_again` 2 s for the next one (in order: the oldest kept
# first), then `fulfil` runs. Signallers send them at random moments around that
# (`shepherd_sim.signallers`); a wait nobody signals in time fails with States.Timeout.
SIGNAL: dict[str, Any] = {
    "Name": SIGNAL_TYPE,
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": "request",
            "Agent": "sim_request",
            "Pool": "sim",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_request",
                "Pool": "sim",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "listen",
            "DependsOn": ["request"],
            "WaitForSignal": {"Name": SIGNAL_NAME, "TimeoutSeconds": 3},
        },
        {
            "Name": "listen_again",
            "DependsOn": ["listen"],
            "WaitForSignal": {"Name": SIGNAL_NAME, "TimeoutSeconds": 2},
        },
        {
            "Name": "fulfil",
            "DependsOn": ["listen_again"],
            "Agent": "sim_fulfil",
            "Pool": "sim-b",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
        },
    ],
}

# Loops (issue 42.5): `poll` repeats until its output says `done` (at the iteration its
# input's `n` draws, `repeat_target`: 1-5, so some runs reach MaxIterations 4 and fail with
# States.LoopLimitExceeded), resting 1 s between iterations.
# Checked by `check_iterations_exact` (each iteration counted once, its rule held exactly at
# the last one, at most MaxIterations) and every other checker (an iteration is an attempt).
REPEAT_TYPE = "sim_repeat"
REPEAT: dict[str, Any] = {
    "Name": REPEAT_TYPE,
    "DispatchTimeoutSeconds": 2,
    "Steps": [
        {
            "Name": "open",
            "Agent": "sim_open",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Compensation": {
                "Agent": "sim_undo_open",
                "Pool": "sim",
                "TimeoutSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "poll",
            "DependsOn": ["open"],
            "Agent": "sim_poll",
            "Pool": "sim-b",
            "TimeoutSeconds": 3,
            "HeartbeatSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.2},
            "Repeat": {
                "Until": {"Variable": "$.steps.poll.output.done", "BooleanEquals": True},
                "IntervalSeconds": 1,
                "MaxIterations": 4,
            },
            "Compensation": {
                "Agent": "sim_undo_poll",
                "Pool": "sim-b",
                "TimeoutSeconds": 3,
                "HeartbeatSeconds": 2,
                "Retry": {"MaxAttempts": 2, "IntervalSeconds": 0.2},
            },
        },
        {
            "Name": "close",
            "DependsOn": ["poll"],
            "Agent": "sim_close",
            "Pool": "sim",
            "TimeoutSeconds": 2,
            "Retry": {"MaxAttempts": 1, "IntervalSeconds": 0.1},
        },
    ],
}


def repeat_target(input_value: Any) -> int:
    """The iteration at which a `sim_repeat` workflow's `poll` says it is done (1-5; 5 is
    past its MaxIterations): a seed's first workflow loops 3 times, its second is done at
    once, its third reaches the limit, its fourth ends at the limit's last iteration."""
    return (2, 3, 1, 5, 4)[int(input_value.get("n", 0)) % 5]


def repeat_output(ctx: AgentContext) -> dict[str, Any]:
    """What a `Repeat` step's iteration adds to its output: its number, and whether it is
    done (at the iteration its input draws); nothing for another step."""
    if ctx.iteration is None:
        return {}
    return {"iteration": ctx.iteration, "done": ctx.iteration >= repeat_target(ctx.input)}


# Types only a parent starts (the workload never does).
CHILD_ONLY = (KID_TYPE,)
# Types the default workload adds by a roll of their own (never by its draw of types, so a
# seed that rolls none runs as it did before they existed).
ROLLED_ONLY = (SIGNAL_TYPE, REPEAT_TYPE)

SYNTHETIC = (FLASH, FAN, HOLD, BRANCH, APPROVAL, MAP, KID, PARENT, FLEET, SIGNAL, REPEAT)


@dataclass(frozen=True)
class MapVariant:
    """What a seed draws for `sim_map` (its own stream, `map:{seed}`): the map's
    MaxConcurrency, its tolerance (none, a count, a percentage, or both) and the order its
    items (and the steps) are undone in."""

    concurrency: int
    count: int | None
    percentage: int | None
    order: str

    @classmethod
    def draw(cls, seed: int) -> MapVariant:
        rng = random.Random(f"map:{seed}")
        concurrency = rng.choice((1, 2, 3, 4, 5))
        tolerance = rng.choice(("none", "none", "count", "percentage", "both"))
        count = rng.choice((0, 1, 3)) if tolerance in ("count", "both") else None
        percentage = rng.choice((10, 25, 50)) if tolerance in ("percentage", "both") else None
        return cls(concurrency, count, percentage, rng.choice(("REVERSE", "PARALLEL")))

    def data(self) -> dict[str, Any]:
        steps = [dict(s) for s in MAP["Steps"]]
        fields: dict[str, Any] = {"ItemsPath": steps[1]["Map"]["ItemsPath"]}
        fields["MaxConcurrency"] = self.concurrency
        if self.count is not None:
            fields["ToleratedFailureCount"] = self.count
        if self.percentage is not None:
            fields["ToleratedFailurePercentage"] = self.percentage
        steps[1] = {**steps[1], "Map": fields}
        return {**MAP, "CompensationOrder": self.order, "Steps": steps}


@functools.cache
def map_definition(variant: MapVariant) -> Definition:
    return parse_definition(variant.data(), f"shepherd_sim.{MAP_TYPE}")


def map_items(seed: int, n: int) -> int:
    """How many items start `n` of seed `seed` maps over (its own stream): none now and then,
    a few often, up to 40."""
    rng = random.Random(f"map:{seed}:{n}")
    r = rng.random()
    if r < 0.1:
        return 0
    if r < 0.4:
        return rng.randint(1, 5)
    return rng.randint(6, 40)


def fleet_items(seed: int, n: int) -> int:
    """How many children start `n` of seed `seed` of type `sim_fleet` runs (its own stream):
    none now and then, up to 4."""
    return random.Random(f"fleet:{seed}:{n}").choice((0, 1, 2, 2, 3, 3, 4))


# The pools whose downstream service an `outage` takes down, and the circuit breaker they
# declare (issue 26), scaled to the simulator's time: its steps time out in 2-3 s and a seed's
# workflows run for about 20 s, so a window of 10 s (the least a policy takes), two failures
# out of four attempts to open, and a cooldown of 10 s (an outage of 5-40 s costs at most four
# probes, each an attempt of the task that took it).
OUTAGE_POOLS = ("sim-b",)
BREAKER = CircuitBreaker.model_validate(
    {
        "FailureRatio": 0.5,
        "MinimumAttempts": 2,
        "WindowSeconds": 10,
        "CooldownSeconds": 10,
        "ProbeAttempts": 1,
    }
)
OUTAGE_SECONDS = (5.0, 40.0)
# A throttling episode on one workflow's partition (issue 41.3: up to 5 minutes).
EPISODE_SECONDS = (5.0, 300.0)
# The workload the regression seeds were found with (their runs must not move).
CLASSIC_TYPES = ("order_fulfilment", "provision_environment", "sim_flash")


def _redact_tokens(item: Item) -> Item:
    """An item with its task-token hashes (current and in its history) replaced by a mark."""
    mark = "<redacted>"
    out = {**item}
    if "callback_token" in out:
        out["callback_token"] = mark
    if "history" in out:
        out["history"] = [{**h, "th": mark} if "th" in h else h for h in out["history"]]
    return out


# The real definitions of `statemachines/` the workload starts (`payload_for` gives each its
# input). The transcode example's map is not among them: `sim_map` is this simulator's map
# workload (drawn per seed to reach every tolerance and order), and another type would only
# move every seed's draws.
REAL_TYPES = ("order_fulfilment", "provision_environment")


def load_definitions() -> dict[str, Definition]:
    real = load_directory(ROOT / "statemachines")
    found = {name: real[name] for name in REAL_TYPES}
    for data in SYNTHETIC:
        parsed = parse_definition(data, f"shepherd_sim.{data['Name']}")
        found[parsed.name] = parsed
    return found


_DEFINITIONS: dict[str, Definition] | None = None


def definitions() -> dict[str, Definition]:
    global _DEFINITIONS  # noqa: PLW0603 - parsed once per process
    if _DEFINITIONS is None:
        _DEFINITIONS = load_definitions()
    return _DEFINITIONS


def payload_for(wf_type: str, n: int, items: int = 0) -> Any:
    if wf_type == MAP_TYPE:
        return {"n": n, "items": items}
    if wf_type == FLEET_TYPE:
        return {"n": n, "items": items}
    if wf_type == "order_fulfilment":
        # Small orders naming no remind_at: the fraud review (an Approval, which nobody here
        # answers) and the reminder are skipped (`sim_branch` has the conditions and waits).
        amount = 10 + n % 100
        return {"order_id": f"o-{n}", "items": [{"sku": "A", "qty": 1}], "amount": amount}
    if wf_type == "provision_environment":
        return {"env_name": f"env-{n}", "region": "eu-west-1", "size": "small"}
    return {"n": n}


class ObservedStore(MemoryStore):
    """The shared table, plus a read-only view for the simulator's own checks (no copies, no
    faults, no effect on the run) and the history of the watch index, so a query can see the
    index as it was a moment ago (the GSI is eventually consistent)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self._clock = clock
        self.index_log: dict[str, list[tuple[int, str | None, int | None]]] = {}
        self.versions: dict[str, int] = {}  # workflow pk -> writes to its item so far
        self.paused_by: dict[str, int] = {}  # workflow pk -> the version whose write paused it
        self.pool_version = 0  # writes to the pools' items so far
        # pool -> the version whose write paused it (an operator's pause or an open circuit)
        self.pool_paused_by: dict[str, int] = {}
        # Each pool's circuit as the table records it (absent: closed): the version of the
        # write that moved it into its current state, of the write that moved it out of
        # `closed` (until it closes again), and every stretch it spent away from `closed`.
        self.circuits: dict[str, str] = {}
        self.circuit_entered_by: dict[str, int] = {}
        self.circuit_left_closed_by: dict[str, int] = {}
        self.circuit_holds: list[tuple[str, int, int | None]] = []  # (pool, began, ended)
        self.on_change: Callable[[Change], None] | None = None  # the table's stream
        # The workflows' partitions (of `_parts`, in the same order): the per-tick checks
        # look at workflows only, not at the counters', pools' and maps' partitions.
        self._workflow_parts: dict[str, dict[str, Item]] = {}

    def _changed(self, old: Item | None, new: Item) -> None:
        super()._changed(old, new)
        if self.on_change is not None:
            self.on_change(self.changes[-1])

    def _log(self, pk: str, sk: str) -> None:
        if pk == POOLS_PK:
            self.pool_version += 1
            pool = self._items.get((pk, sk)) or {}
            if pool.get("paused") or pool.get("circuit") == "open":
                self.pool_paused_by.setdefault(sk, self.pool_version)
            else:
                self.pool_paused_by.pop(sk, None)
            self._circuit_moved(sk, str(pool.get("circuit", "closed")))
        if sk == WF_SK:
            item = self._items.get((pk, sk)) or {}
            self.versions[pk] = version = self.versions.get(pk, 0) + 1
            if item.get("status") == "PAUSED":
                self.paused_by.setdefault(pk, version)
            else:
                self.paused_by.pop(pk, None)
            entry = (self._clock.now_ms(), item.get("watch_shard"), item.get("due_at"))
            self.index_log.setdefault(pk, []).append(entry)

    def _circuit_moved(self, pool: str, circuit: str) -> None:
        was = self.circuits.get(pool, "closed")
        if circuit == was:
            return
        now = self._clock.now_ms()
        self.circuits[pool] = circuit
        self.circuit_entered_by[pool] = self.pool_version
        if was == "closed":
            self.circuit_left_closed_by[pool] = self.pool_version
            self.circuit_holds.append((pool, now, None))
        if circuit == "closed":
            self.circuit_left_closed_by.pop(pool, None)
            for i, (name, began, ended) in enumerate(self.circuit_holds):
                if name == pool and ended is None:
                    self.circuit_holds[i] = (name, began, now)

    def peek(self, pk: str, sk: str) -> Item | None:
        """The item as it is, uncopied: for the simulator's bookkeeping only (never mutated,
        never handed to the engine)."""
        return self._items.get((pk, sk))

    def create(self, items: Sequence[Item]) -> None:
        super().create(items)
        for item in items:
            self._log(item["pk"], item["sk"])

    def transact(self, writes: Sequence[tuple[str, str, Update, Cond]]) -> None:
        super().transact(writes)
        for pk, sk, _, _ in writes:
            self._log(pk, sk)

    def update(self, pk: str, sk: str, update: Update, condition: Cond | None) -> Item:
        item = super().update(pk, sk, update, condition)
        self._log(pk, sk)
        return item

    def lagged_due(
        self, shard: str, until_ms: int, limit: int, cursor: dict[str, object] | None, as_of: int
    ) -> DuePage:
        """`query_due` on the index as it was at `as_of`."""
        rows = []
        for pk, log in self.index_log.items():
            seen = [e for e in log if e[0] <= as_of]
            if (
                seen
                and seen[-1][1] == shard
                and seen[-1][2] is not None
                and seen[-1][2] <= until_ms
            ):
                rows.append((seen[-1][2], pk))
        rows.sort()
        if cursor:
            rows = [r for r in rows if r > (cursor["due_at"], cursor["pk"])]
        page = rows[:limit]
        more = {"due_at": page[-1][0], "pk": page[-1][1]} if len(rows) > limit else None
        return DuePage([DueEntry(pk[3:], due) for due, pk in page], more, len(page))

    def _put(self, pk: str, sk: str, item: Item) -> None:
        super()._put(pk, sk, item)
        if pk.startswith("WF#") and pk not in self._workflow_parts:
            self._workflow_parts[pk] = self._parts[pk]

    def heads(self) -> dict[str, Item]:
        """Each workflow's own item (uncopied, as `peek`), by workflow id."""
        return {pk[3:]: part[WF_SK] for pk, part in self._workflow_parts.items() if WF_SK in part}

    def partition(self, pk: str) -> list[Item]:
        """One partition's items (uncopied), in `by_workflow`'s order."""
        return list(self._parts.get(pk, {}).values())

    def by_workflow(self) -> dict[str, list[Item]]:
        # By partition, in the order the table first held each (as a scan of it would be).
        return {pk[3:]: list(part.values()) for pk, part in self._workflow_parts.items()}


class SimCrash(BaseException):
    """The agent's process died mid-step (the Lambda invocation fails, nothing is recorded)."""


class SimHang(BaseException):
    """The Lambda timeout killed a hung agent function."""


class SimTransient(Exception):
    """A retryable error from the external service."""


# An operator's decision on a pause: the action, and a step with its replacement input.
Decision = tuple[str, str | None, Any]


def input_tag(value: Any) -> Any:
    """Which replacement input (the operator numbers them) a value is; None: an original."""
    return value.get("replaced") if isinstance(value, dict) else None


_NAMED_ERRORS: dict[str, type[Exception]] = {}


def named_error(name: str) -> type[Exception]:
    """An exception class with a given name (a definition's NonRetryableErrors match names)."""
    if name not in _NAMED_ERRORS:
        _NAMED_ERRORS[name] = type(name, (Exception,), {})
    return _NAMED_ERRORS[name]


@dataclass(frozen=True)
class SimConfig:
    max_workflows: int = 4
    start_window_s: float = 5.0
    sweep_interval_s: float = 1.0
    visibility_s: int = 30
    max_receives: int | None = None
    """SQS maxReceiveCount before the DLQ; None: 1, 2 or 5, chosen per seed."""
    lambda_grace_s: float = 2.0
    max_latency_s: float = 3.0
    horizon_s: float = 4 * 3600.0
    max_events: int = 100_000
    watch_shards: int = 4
    workers: int = 3
    workflow_types: tuple[str, ...] = ()
    callback_share: float = 0.2
    """Share of attempts that hand their work to an external system (callback steps)."""
    sweep_groups: int = 2
    """Shard groups, each swept by an invocation of its own (the tick's fan-out), under its
    lease when `leases` (1 and no leases: one sweeper for the whole index, as before)."""
    leases: bool = True
    lease_s: float = 2.0
    """How long a group's lease lasts unless renewed (10 s deployed; shorter here, so a
    frozen sweeper's group is taken over within the run's timing bounds)."""
    breaker: bool = True
    """The outage pools (`OUTAGE_POOLS`) declare `BREAKER`; off, the same outages strike
    pools without one (`--no-breaker`). The recorded regression seeds run without it."""
    leave_due: bool = True
    """The supervisors know the sweep interval, so a look may leave a near watch entry due
    (the deployed rule). Off: every look moves its entry, as before that rule (the recorded
    regression seeds replay the trajectories they were found on)."""
    look_ahead: bool = True
    """Each sweep looks ahead until just before the next one (the deployed rule, `until_ms`):
    it looks at every entry due by then at its due time, sleeping in its fiber meanwhile. Only
    with `leave_due` (the supervisors know the interval); off, a sweep takes what is due when
    it starts (the recorded regression seeds replay the trajectories they were found on)."""


# Rolled in this order, at most one per attempt: a kind added later goes last, so it never
# changes which earlier kind a seed rolls.
AGENT_FAULTS = (
    "crash_before",
    "crash_after",
    "pause",
    "hang",
    "retryable",
    "permanent",
    "oversize",
)
# The simulator keeps most payloads in its payload bucket (a tiny inline threshold), so every
# read and write of one goes through the claim check and its faults.
SIM_INLINE_BYTES = 24
# Its caps are the pre-S3 ones: an oversize fault then costs milliseconds, not the seconds a
# 100 MiB canonical JSON takes; the engine's checks are the same code (see `sim_caps`).
SIM_CAPS = {
    "MAX_OUTPUT_BYTES": 64 * 1024,
    "MAX_DETAILS_BYTES": 16 * 1024,
    "MAX_WORKFLOW_OUTPUT_BYTES": 1024 * 1024,
}


@contextmanager
def sim_caps() -> Iterator[None]:
    """The simulator's caps (SIM_CAPS) while it runs; the real ones again after."""
    saved = {name: getattr(limits, name) for name in SIM_CAPS}
    for name, value in SIM_CAPS.items():
        setattr(limits, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(limits, name, value)


def oversize() -> int:
    """Bytes of filler that put a payload over its cap."""
    return limits.MAX_OUTPUT_BYTES + 1


MANUAL_MODES = ("handle", "duplicate", "lose", *AGENT_FAULTS)
RELAY_EVENTS = ("relay", "relay_replay")  # the relay's own events (not the engine's)


@dataclass
class External:
    """Work an agent handed to an external system, which reports back with the task token."""

    ctx: AgentContext
    token: str
    spec: TaskSpec
    done_at: int
    outcome: str  # "success" | "failure"
    oversize: bool = False  # calls back with an output over its cap


@dataclass
class SimResult:
    seed: int
    faults: Counter[str]
    outcomes: Counter[str]
    violations: list[Violation]
    digest: str
    sim_seconds: float
    events: int
    workflows: list[str]
    trace: list[tuple[str | None, str]]
    stats: Counter[str] = field(default_factory=Counter)

    def trace_for(self, workflow_id: str | None, limit: int = 400) -> list[str]:
        """The trace trimmed to one workflow (plus global events such as clock jumps)."""
        lines = [line for wf, line in self.trace if wf is None or wf == workflow_id]
        lines = [line for line in lines if " sweep " not in line or workflow_id is None]
        if len(lines) > limit:
            lines = [
                *lines[: limit // 2],
                f"... {len(lines) - limit} lines ...",
                *lines[-limit // 2 :],
            ]
        return lines


@contextmanager
def quiet_engine_logs() -> Iterator[None]:
    """The engine logs every fenced result and lost send at WARNING; thousands per run."""
    log = logging.getLogger("shepherd")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


class SimPoolControl:
    """The pools' consumers as a supervisor's circuit breaker switches them: the in-memory
    queue (a disabled pool receives nothing, as with a disabled event source mapping), and a
    poll as a pool starts again, so the backlog it held drains."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def set_enabled(self, pool: str, enabled: bool) -> None:
        self.sim.queue.set_enabled(pool, enabled)
        self.sim.trace(None, f"control pool {pool} {'started' if enabled else 'stopped'}")
        if enabled:
            self.sim._poll_at(pool, self.sim.now() + 1)


class Simulation:
    def __init__(
        self,
        seed: int,
        faults: Faults | None = None,
        *,
        config: SimConfig | None = None,
        auto: bool = True,
        defs: Mapping[str, Definition] | None = None,
    ) -> None:
        self.seed = seed
        self.faults = faults if faults is not None else Faults()
        self.config = config or SimConfig()
        self.auto = auto
        self.defs = dict(defs or definitions())
        if defs is None and MAP_TYPE in self.defs:
            self.map_variant = MapVariant.draw(seed)
            self.defs[MAP_TYPE] = map_definition(self.map_variant)
        self.rng = random.Random(seed)
        self._fault_rngs: dict[str, random.Random] = {}
        self.write_latency: dict[tuple[str, str], int] = {}  # item -> slowest write's lateness
        self.clock = SimClock(self)
        self.t0 = self.clock.now_ms()

        self.memory = ObservedStore(self.clock)
        cfg = self.config
        setup = random.Random(f"setup:{seed}")
        self.max_receives = cfg.max_receives or setup.choice((1, 2, 5))
        self.queue = MemoryQueue(
            self.clock, visibility_ms=cfg.visibility_s * 1000, max_receives=self.max_receives
        )
        # The table's stream and the event relay that consumes it (its own random stream:
        # the engine's run is the same with or without it).
        self.relay = Relay(self, random.Random(f"relay:{seed}"))
        self.relay.observe = self._delivered
        self.memory.on_change = self._changed
        # The people who answer approvals and the schedule's firings (shepherd_sim.people),
        # and what their calls were told; the writes each fiber made (an answer by someone
        # who may not answer must make none).
        self.people = People(self, seed)
        self.approval_calls: list[ApprovalCall] = []
        # Who sends signals, and what they were told (shepherd_sim.signallers).
        self.signallers = Signallers(self, seed)
        self.signal_calls: list[SignalCall] = []
        self.firings: list[Firing] = []
        self.writes_by: Counter[str] = Counter()
        self._inbox_seen: set[tuple[str, str]] = set()
        self._ended_at: int | None = None  # when the engine's run ended (the relay may go on)
        self.service = FakeService()
        self.counts = empty_counts()
        self.stats: Counter[str] = Counter()
        self.fault_log: list[tuple[int, str, str | None, float]] = []
        self.trace_lines: list[tuple[str | None, str]] = []
        self.handled: list[Handled] = []
        self.accepted: dict[str, int] = {}
        self.known: dict[str, str] = {}  # workflow id -> type, once a start may have written it
        self.online: list[Violation] = []
        self._plans: dict[str | None, SweepPlan] = {}  # by fiber (None: the event loop)
        self._queue_busy_at: dict[str, int] = {}  # see queue_busy_at
        self.next_agent_fault: str | None = None
        self.forced: list[str] = []  # faults that strike at their next chance (manual mode)
        self._heap: list[tuple[int, int, str, Any]] = []
        self._seq = 0
        self._events = 0
        self._fibers: dict[str, Fiber] = {}
        self._fiber_seq = 0
        self._pending_client = 0
        self._polls: set[tuple[str, int]] = set()
        self._done = False
        self._starts: dict[int, str] = {}  # start number -> accepted workflow id
        self._check_rng = random.Random(0)
        self._manual_starts = 0
        self._pending_external = 0
        self._redrive_considered: set[str] = set()
        self.parent_cancel_rng = random.Random(f"parent_cancel:{seed}")
        # The operator: its own random stream, so its choices never move anything else.
        self.ops = random.Random(f"ops:{seed}")
        self._labels: dict[str, str] = {}  # fiber (or "main") -> the operation it performs
        self._reads: dict[tuple[str, str, str], tuple[int, int]] = {}  # (who, role, pk) -> read
        self.claims: list[Claim] = []
        self.sent: list[Sent] = []
        self.status_writes: list[StatusWrite] = []
        self.given_inputs: dict[tuple[str, str, str, int], Any] = {}
        self._responding: dict[tuple[str, int], str] = {}  # (workflow, paused_at) -> plan
        self._resumes: Counter[str] = Counter()  # workflow -> operator resumes so far
        self._replacements = 0
        self.draining = False
        # Pools an operator paused: their own random stream, their intervals for the bound.
        self.pool_rng = random.Random(f"pools:{seed}")
        self.pool_pauses: list[tuple[str, int, int | None]] = []  # (pool, began, ended)
        self.redispatches: list[Redispatch] = []
        # Downstream outages: their own random stream, (pool, began, ends) each.
        self.outage_rng = random.Random(f"outage:{seed}")
        self.outages: list[tuple[str, int, int]] = []
        # Throttling episodes: their own random stream, (workflow partition, began, ends) each.
        self.episode_rng = random.Random(f"episode:{seed}")
        self.episodes: list[tuple[str, int, int]] = []
        # What the agents' breaker decided on: (role, pool) -> the pools' version at that
        # role's last read of the pool item (its breaker caches one state per process); per
        # fiber, that view as its claim began and the probe it took (pool, version).
        self._circuit_reads: dict[tuple[str, str], int] = {}
        self._claim_basis: dict[str, dict[str, int]] = {}
        self._probes: dict[str, tuple[str, int]] = {}
        # (who, role, workflow pk) -> the pools' version that role knew when it read it; a
        # supervisor starts knowing no pool paused (version 0) and keeps its last read.
        self._pool_views: dict[tuple[str, str, str], int] = {}
        self._resumed_at: dict[str, int] = {}  # workflow -> when it last left PAUSED
        # In manual mode nothing polls or sweeps until `drain`: bounds count from there.
        self.bound_origin: int | None = None

        self.bucket = MemoryPayloadStore()  # the payload bucket, shared by every role
        self.payloads = Payloads(self.bucket, SIM_INLINE_BYTES)  # the checker's view: no faults
        registry = AgentRegistry()
        for definition in self.defs.values():
            for agent in sorted(definition.agents()):
                registry.register(agent, self._agent)
        self.pools = sorted({t.pool for d in self.defs.values() for t in d.tasks})
        # The same set `queue_states` iterated, built once (the definitions never change).
        self._task_pools = {t.pool for d in self.defs.values() for t in d.tasks}
        self._pools_read: tuple[int, dict[str, PoolState]] | None = None
        self._queue_states: dict[str, tuple[PoolState | None, int, PoolState]] = {}
        self._parsed: dict[str, tuple[list[Item], WorkflowState | None]] = {}
        self._inbox_checked: dict[str, list[Item]] = {}
        engine_rng = random.Random(f"engine:{seed}")
        ids = SequentialIds()
        engine_config = EngineConfig(watch_shards=cfg.watch_shards)
        guarded = [pool for pool in OUTAGE_POOLS if pool in self.pools] if cfg.breaker else []
        policies = {
            pool: PoolPolicy.model_validate({"CircuitBreaker": BREAKER}) for pool in guarded
        }
        self.control = SimPoolControl(self)

        # Every role is an engine of its own over its own faulty ports (one shared memory,
        # queue, clock, ids and random stream), all from the one factory.
        every_ms = round(cfg.sweep_interval_s * 1000) if cfg.leave_due else 0

        def engine(role: str, store: type[FaultyStore] = FaultyStore, **extra: Any) -> Engine:
            ports = Ports(
                store(self.memory, self, role),
                FaultyQueue(self.queue, self, role),
                self.clock,
                ids,
                engine_rng,
                Payloads(FaultyPayloadStore(self.bucket, self, role), SIM_INLINE_BYTES),
            )
            return build_engine(
                ports,
                self.defs,
                agents=registry,
                config=engine_config,
                background_heartbeats=False,
                sweep_interval_ms=every_ms,
                pool_policies=policies,
                **extra,
            )

        # The pools' API, for an operator: the in-memory queue is its control (a paused
        # pool's consumers receive nothing, as with a disabled event source mapping).
        client = engine("client", pool_control=self.queue)
        self.client = client.scheduler
        self.operations = client.operations
        self.callbacks = client.callbacks
        self.pools_api = client.pools
        # A person's answer is an API call of its own, each store call a round trip away.
        self.approvals = engine("person", PersonStore).approvals
        self.signals_api = engine("signaller", SignallerStore).signals
        self.schedules_api = client.schedules
        agents = engine("agent", worker_id="w1")
        self.runtimes = [agents.agent_runtime] + [
            agents.worker(f"w{i}") for i in range(2, cfg.workers + 1)
        ]
        # Both promise the sweep interval: a look due again before the next sweep leaves its
        # watch entry where it is (the production rule, exercised under every fault).
        groups = cfg.sweep_groups

        def supervisor(role: str) -> Any:
            # A breaker that opens stops its pool's consumers, as a pause does.
            sup = engine(role, sweep_groups=groups, pool_control=self.control).supervisor
            sup.lease_ms = round(cfg.lease_s * 1000)
            return sup

        self.supervisors = {role: supervisor(role) for role in ("supA", "supB")}
        # One supervisor per group for A's fan-out (an invocation per group per tick).
        self.group_supervisors = [supervisor("supA") for _ in range(groups)]
        self._sweeps = 0
        timing = bounds.Timing(
            # A frozen sweeper holds its group up to its lease before another takes over.
            sweep_interval_s=cfg.sweep_interval_s + (cfg.lease_s if cfg.leases else 0.0),
            visibility_s=cfg.visibility_s,
            lambda_grace_s=cfg.lambda_grace_s,
            max_latency_s=cfg.max_latency_s,
            max_pause_s=max(t.timeout_seconds for d in self.defs.values() for t in d.tasks) + 4,
        )
        self.timing = timing

    # ======================================================================= bookkeeping

    def now(self) -> int:
        return self.clock.now_ms()

    def trace(self, workflow_id: str | None, text: str) -> None:
        self.trace_lines.append((workflow_id, f"{(self.now() - self.t0) / 1000:9.3f} {text}"))

    def roll(self, kind: str) -> bool:
        """Does fault `kind` strike now? (a forced fault strikes at its next chance)"""
        if kind in self.forced:
            self.forced.remove(kind)
            return True
        p: float = getattr(self.faults, kind)
        if p <= 0:
            return False
        stream = self._fault_rngs.get(kind)
        if stream is None:
            # One stream per kind: a knob at 0 draws nothing, so adding a fault kind to the
            # simulator leaves runs without it exactly as they were.
            stream = self._fault_rngs[kind] = random.Random(f"{self.seed}:{kind}")
        return stream.random() < p

    def fault(self, kind: str, workflow_id: str | None, text: str, *, delay_s: float = 0) -> None:
        self.counts[kind] += 1
        self.fault_log.append((self.now(), kind, workflow_id, delay_s))
        self.trace(workflow_id, f"FAULT   {kind}: {text}")

    def schedule(self, at: int, kind: str, data: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, data))

    def message_sent(self, pool: str, delay_s: int) -> None:
        self._poll_at(pool, self.now() + delay_s * 1000 + 1)

    def _poll_at(self, pool: str, at: int) -> None:
        if not self.auto or (pool, at) in self._polls:
            return
        self._polls.add((pool, at))
        self.schedule(at, "poll", pool)

    # ===================================================================== the workload

    def plan_workload(self) -> None:
        cfg = self.config
        types = list(
            cfg.workflow_types
            or [t for t in sorted(self.defs) if t not in CHILD_ONLY + ROLLED_ONLY]
        )
        if SCHEDULED_TYPE in types and self.roll("schedule_dup"):
            self.people.plan_firing()
        if not cfg.workflow_types and self.roll("signal_workload"):
            self.fault("signal_workload", None, "sim_signal workflows join the run")
            self._plan_signal_workload()
        if not cfg.workflow_types and self.roll("repeat_workload"):
            self.fault("repeat_workload", None, "sim_repeat workflows join the run")
            self._plan_repeat_workload()
        for n in range(1, self.rng.randint(1, cfg.max_workflows) + 1):
            wf_type = self.rng.choice(types)
            at = self.t0 + round(self.rng.uniform(0, cfg.start_window_s) * 1000)
            self._pending_client += 1
            self.schedule(at, "start", (n, wf_type, 0))
            if self.roll("cancel"):
                self._pending_client += 1
                self.schedule(at + round(self.rng.uniform(0.2, 20) * 1000), "cancel", n)
            if self.roll("operator"):
                self._pending_client += 1
                self.schedule(at + round(self.ops.uniform(0.2, 20) * 1000), "operator", n)

    def _plan_signal_workload(self) -> None:
        """1-2 `sim_signal` workflows (numbered from 500, apart from the draw's), at moments
        and with cancels drawn from the signallers' own stream."""
        rng = self.signallers.rng
        for k in range(rng.randint(1, 2)):
            n = 500 + k
            at = self.t0 + round(rng.uniform(0, self.config.start_window_s) * 1000)
            self._pending_client += 1
            self.schedule(at, "start", (n, SIGNAL_TYPE, 0))
            if rng.random() < 0.15:  # the client cancels it while it waits (or around)
                self._pending_client += 1
                self.schedule(at + round(rng.uniform(0.2, 8) * 1000), "cancel", n)

    def _plan_repeat_workload(self) -> None:
        """1-3 `sim_repeat` workflows (numbered from 600, apart from the draw's), at moments
        drawn from a stream of their own, so the rest of the run's draws stay as they were."""
        rng = random.Random(f"{self.seed}:repeat_workload:plan")
        for k in range(rng.randint(1, 3)):
            n = 600 + rng.randint(0, 99) * 5 + k
            at = self.t0 + round(rng.uniform(0, self.config.start_window_s) * 1000)
            self._pending_client += 1
            self.schedule(at, "start", (n, REPEAT_TYPE, 0))

    def start_workflow(self, wf_type: str, n: int | None = None) -> str | None:
        """Submit one start like a client: with an idempotency key, retried on errors."""
        if n is None:
            self._manual_starts += 1
            n = 1000 + self._manual_starts
        key = f"req-{n}"
        wf_id = derived_id(OWNER, key)
        self.known.setdefault(wf_id, wf_type)
        submits = 2 if self.roll("dup") else 1
        if submits == 2:
            self.fault("dup", wf_id, "client submits the start twice")
        result = None
        for _ in range(submits):
            try:
                count = (
                    fleet_items(self.seed, n) if wf_type == FLEET_TYPE else map_items(self.seed, n)
                )
                payload = payload_for(wf_type, n, count)
                result = self.client.start(wf_type, payload, idempotency_key=key, owner=OWNER)
            except Exception as exc:
                self.trace(wf_id, f"client  start {wf_type} failed: {type(exc).__name__}")
                return None
            if result.workflow_id != wf_id:
                self.online.append(
                    Violation("idempotent_start", wf_id, f"start returned {result.workflow_id}")
                )
        assert result is not None
        self.accepted.setdefault(wf_id, self.now())
        self._starts[n] = wf_id
        self.trace(wf_id, f"client  start {wf_type} accepted (created={result.created})")
        return wf_id

    def _on_start(self, data: tuple[int, str, int]) -> None:
        n, wf_type, tries = data

        def body() -> None:
            if self.start_workflow(wf_type, n) is None and tries < 4:
                self._pending_client += 1
                self.schedule(self.now() + 1000, "start", (n, wf_type, tries + 1))
            self._pending_client -= 1

        self.spawn(body, "start")

    def _on_cancel(self, n: int) -> None:
        def body() -> None:
            self._pending_client -= 1
            wf_id = self._starts.get(n)
            if wf_id is not None:
                self.cancel_workflow(wf_id)

        self.spawn(body, "cancel")

    def _on_parent_cancel(self, wf_id: str) -> None:
        def body() -> None:
            self._pending_client -= 1
            self.stats["parents_cancelled_mid_child_attempted"] += 1
            self.cancel_workflow(wf_id, kind="parent_cancel")

        self.spawn(body, "cancel")

    def cancel_workflow(self, wf_id: str, kind: str = "cancel") -> None:
        """The client asks to cancel (refused unless the workflow is RUNNING)."""
        self.fault(
            kind, wf_id, "client cancels" if kind == "cancel" else "operator cancels mid-child"
        )
        try:
            with self.acting("cancel"):
                wf = self.operations.cancel(wf_id, owner=OWNER)
            self.trace(wf_id, f"client  cancel -> {wf.status.value}")
        except (InvalidTransition, WorkflowNotFound) as exc:
            self.trace(wf_id, f"client  cancel refused: {exc}")
        except Exception as exc:
            self.trace(wf_id, f"client  cancel failed: {type(exc).__name__}")

    # ================================================================ queue and delivery

    def _on_poll(self, pool: str) -> None:
        self._polls.discard((pool, self._current_at))
        dead = len(self.queue.dead.get(pool, ()))
        batch = self.queue.receive(pool, 10)
        for body in self.queue.dead.get(pool, [])[dead:]:
            task = TaskMessage.from_body(body)
            self.trace(
                task.workflow_id,
                f"queue   {task.kind} {task.step}#{task.attempt} dead-lettered after "
                f"{self.max_receives} receive(s)",
            )
        for received in batch:
            self._received(pool, received)

    def _received(self, pool: str, received: Received) -> None:
        task = received.task
        who = f"{task.kind} {unit_name(task.step, task.item)}#{task.attempt}"
        # If nobody deletes it, it comes back after the visibility timeout.
        self._poll_at(pool, self.now() + self.config.visibility_s * 1000 + 1)
        if self.roll("lose"):
            self.fault("lose", task.workflow_id, f"message {who} deleted unprocessed")
            self.queue.delete(received.receipt)
            return
        latency = self.rng.uniform(0.005, 0.05)
        if self.roll("reorder"):
            latency = self.rng.uniform(0.3, self.config.max_latency_s)
            self.fault("reorder", task.workflow_id, f"message {who} held back {latency:.2f}s")
        self.schedule(self.now() + round(latency * 1000), "deliver", received)
        if self.roll("dup"):
            again = self.rng.uniform(0.0, 0.5)
            self.fault("dup", task.workflow_id, f"message {who} delivered twice")
            self.schedule(self.now() + round(again * 1000), "deliver", received)

    def spawn(self, body: Callable[[], None], label: str = "") -> None:
        """Run `body` as a fiber (a Lambda invocation, an API call, a sweep) until it waits.

        `label`: the operation it performs (`start`, `pause`, `resume`, ...), so every write
        and every message it makes is observed with it."""
        self._fiber_seq += 1
        name = f"f{self._fiber_seq}"
        fiber = Fiber(name, body)
        self._fibers[name] = fiber
        if label:
            self._labels[name] = label
        self._switch(fiber)

    def deliver(self, received: Received) -> None:
        """One Lambda invocation for one message, as a fiber."""
        runtime = self.runtimes[self.rng.randrange(len(self.runtimes))]
        self.spawn(lambda: self._invoke(runtime, received))

    def _invoke(self, runtime: AgentRuntime, received: Received) -> None:
        task = received.task
        who = f"{task.kind} {unit_name(task.step, task.item)}#{task.attempt}"
        self.trace(
            task.workflow_id,
            f"{runtime.worker_id:7} deliver {who} (receive {received.receive_count})",
        )
        delete = False
        try:
            outcome = runtime.handle(task).outcome.value
            delete = True
        except FiberKilled:
            outcome = "killed"
        except SimCrash:
            outcome = "crashed"
        except SimHang:
            outcome = "hung"
        except Exception as exc:
            outcome = f"error:{type(exc).__name__}"
        self.handled.append(
            Handled(
                self.now(),
                task.workflow_id,
                task.kind,
                task.step,
                task.attempt,
                outcome,
                task.item,
            )
        )
        self.trace(task.workflow_id, f"{runtime.worker_id:7} {who} -> {outcome}")
        if delete:
            self.queue.delete(received.receipt)

    def _switch(self, fiber: Fiber) -> None:
        fiber.switch_in()
        if fiber.finished:
            self._fibers.pop(fiber.name, None)
            self._labels.pop(fiber.name, None)
            if fiber.error is not None and not isinstance(fiber.error, FiberKilled):
                raise fiber.error

    # ======================================================================== the agents

    def sleep(self, seconds: float) -> None:
        """Let simulated time pass inside a fiber (an agent at work, a slow store call)."""
        fiber = current()
        if fiber is None:
            raise RuntimeError("sleep() outside a fiber")
        self.schedule(self.now() + max(1, round(seconds * 1000)), "resume", fiber.name)
        fiber.yield_out()

    def _work(self, ctx: AgentContext, seconds: float, *, beat: bool = True) -> None:
        remaining = seconds
        while remaining > 0:
            piece = min(1.0, remaining)
            self.sleep(piece)
            remaining -= piece
            if beat:
                ctx.report_progress({"left": round(remaining, 3)})

    def _agent_fault(self) -> str | None:
        if self.next_agent_fault is not None:
            fault, self.next_agent_fault = self.next_agent_fault, None
            return fault
        for kind in AGENT_FAULTS:
            if self.roll(kind):
                return kind
        return None

    def _agent(self, ctx: AgentContext) -> Any:
        """Every agent of every definition: work for a while, heartbeating, call the service."""
        rng = self.rng
        definition = self.defs[ctx.workflow_type]
        spec: TaskSpec = definition.spec(ctx.kind, ctx.step)
        wf = ctx.workflow_id
        who = f"{ctx.kind} {unit_name(ctx.step, ctx.item_index)}#{ctx.attempt}"
        unit = unit_name(ctx.step, ctx.item_index)
        self.given_inputs[(wf, ctx.kind, unit, ctx.attempt)] = input_tag(ctx.input)
        fault = self._agent_fault()
        duration = 0.0 if rng.random() < 0.25 else rng.uniform(0.05, spec.timeout_seconds * 0.3)
        where = rng.choice(("before", "after"))
        obeys_cancel = rng.random() < 0.5
        # A map item cannot wait for a callback (`CallbackNotSupported`): items never do.
        callback = rng.random() < self.config.callback_share and ctx.item_index is None
        if fault is not None:
            detail = f" {where} the effect" if fault in ("pause", "retryable", "oversize") else ""
            self.fault(fault, wf, f"{who}{detail}")
        if fault == "hang":
            self._hang(ctx, spec, beating=rng.random() < 0.5)
        if fault == "crash_before":
            self._work(ctx, rng.uniform(0, duration))
            raise SimCrash(who)
        self._work(ctx, duration)
        self._before_effect(ctx, spec, fault, where, obeys_cancel=obeys_cancel)
        if self.downstream_down(spec.pool):  # the call (or the hand-over) fails: no effect
            self.stats["calls_failed_by_outage"] += 1
            self.trace(wf, f"service {who} FAILED: pool {spec.pool}'s downstream is down")
            raise SimTransient(f"{who}: downstream outage")
        if callback:
            return self._hand_over(ctx, spec, fault)
        effect = self._call_service(ctx)
        if fault == "crash_after":
            raise SimCrash(who)
        if fault == "retryable":
            raise SimTransient(f"{who}: response lost after the effect")
        if fault == "pause":
            self._freeze(ctx, spec)
        seq = None if effect is None else effect.seq
        output: dict[str, Any] = {"attempt": ctx.attempt, "effect": seq}
        if fault == "oversize":
            output["blob"] = "x" * oversize()
        if ctx.kind == "step" and ctx.step == MAP_SOURCE and ctx.workflow_type == MAP_TYPE:
            # The map's items: as many as the input says (drawn per start, `map_items`).
            output["items"] = [{"i": i} for i in range(int(ctx.input.get("items", 0)))]
        if ctx.kind == "step" and ctx.step == FLEET_SOURCE and ctx.workflow_type == FLEET_TYPE:
            output["items"] = [{"i": i} for i in range(int(ctx.input.get("items", 0)))]
        return {**output, **repeat_output(ctx)}

    def _before_effect(
        self,
        ctx: AgentContext,
        spec: TaskSpec,
        fault: str | None,
        where: str,
        *,
        obeys_cancel: bool,
    ) -> None:
        """Faults that strike after the work, before the effect."""
        who = f"{ctx.kind} {unit_name(ctx.step, ctx.item_index)}#{ctx.attempt}"
        if fault == "pause" and where == "before":
            self._freeze(ctx, spec)
        if ctx.cancelled and obeys_cancel:
            raise SimTransient("this attempt was fenced out; stopping before the effect")
        if fault == "permanent":
            names = spec.retry.non_retryable_errors
            if names and self.rng.random() < 0.5:
                raise named_error(names[0])(f"{who}: non-retryable")
            raise PermanentError(f"{who}: permanent", name="SimPermanent")
        if fault == "retryable" and where == "before":
            raise SimTransient(f"{who}: service unavailable")
        if fault == "oversize" and where == "before":
            ctx.report_progress({"log": "x" * limits.MAX_DETAILS_BYTES})  # DetailsTooLarge

    # ----------------------------------------------------------- callback steps

    def _hand_over(self, ctx: AgentContext, spec: TaskSpec, fault: str | None) -> Pending:
        """A callback step: give the task token to the external system and return Pending.
        The external system works (heartbeating through the callback API), applies the effect
        and calls back; it may also fail, and its callbacks may be lost, doubled or late."""
        who = f"{ctx.kind} {unit_name(ctx.step, ctx.item_index)}#{ctx.attempt}"
        # What the external system is handed is read now, in the attempt (a large value from
        # the payload bucket, whose read may fail): it works from that copy later.
        dict(ctx.dependencies) if ctx.kind == "step" else ctx.step_output
        token = ctx.task_token()
        done_at = self.now() + round(self.rng.uniform(0.1, 1.2 * spec.timeout_seconds) * 1000)
        outcome = "failure" if self.rng.random() < 0.15 else "success"
        ext = External(ctx, token, spec, done_at, outcome, oversize=fault == "oversize")
        self.trace(ctx.workflow_id, f"agent   {who} handed to the external system ({outcome})")
        self._pending_external += 1
        self.schedule(self.now() + 1, "external", ext)
        if fault == "crash_after":
            raise SimCrash(who)  # the token is out, WAITING was never recorded
        if fault == "retryable":
            raise SimTransient(f"{who}: failed after handing the work over")
        if fault == "pause":
            self._freeze(ctx, spec)
        return Pending("sim")

    def _on_external(self, ext: External) -> None:
        self.spawn(lambda: self._external(ext), "callback")

    def _external(self, ext: External) -> None:
        hb = ext.spec.heartbeat_seconds
        if self.now() < ext.done_at:
            if hb is not None and not self._callback(ext, "heartbeat", tries=2):
                self._pending_external -= 1  # told the attempt is over: stop working
                return
            step_ms = round((hb or ext.spec.timeout_seconds) * 500)
            self.schedule(min(ext.done_at, self.now() + step_ms), "external", ext)
            return
        self._pending_external -= 1
        payload: dict[str, Any]
        if ext.outcome == "success":
            effect = self._call_service(ext.ctx)
            payload = {"attempt": ext.ctx.attempt, "effect": None if effect is None else effect.seq}
            if ext.oversize:
                payload["blob"] = "x" * oversize()
        else:
            payload = {"error": "ExternalFailure"}
        self._send_callback(ext, ext.outcome, payload, 0)

    def _send_callback(self, ext: External, action: str, payload: Any, tries: int) -> None:
        ctx = ext.ctx
        who = f"{ctx.kind} {unit_name(ctx.step, ctx.item_index)}#{ctx.attempt}"
        if tries == 0:
            if self.roll("lose"):
                self.fault("lose", ctx.workflow_id, f"callback {action} of {who} lost")
                return
            if self.roll("delay"):
                extra = self.rng.uniform(1, 2 * ext.spec.timeout_seconds)
                self.fault(
                    "delay",
                    ctx.workflow_id,
                    f"callback of {who} late by {extra:.1f}s",
                    delay_s=extra,
                )
                self._pending_external += 1
                self.schedule(
                    self.now() + round(extra * 1000), "callback", (ext, action, payload, 1)
                )
                return
            if self.roll("dup"):
                self.fault("dup", ctx.workflow_id, f"callback {action} of {who} sent twice")
                self._pending_external += 1
                self.schedule(
                    self.now() + self.rng.randint(0, 300), "callback", (ext, action, payload, 1)
                )
        self._callback(ext, action, payload=payload, tries=tries)

    def _on_callback(self, data: tuple[External, str, Any, int]) -> None:
        ext, action, payload, tries = data

        def body() -> None:
            self._pending_external -= 1
            self._send_callback(ext, action, payload, tries)

        self.spawn(body, "callback")

    def _callback(self, ext: External, action: str, *, payload: Any = None, tries: int = 0) -> bool:
        """One call to the callback API; False once the token's attempt is over."""
        ctx = ext.ctx
        who = f"{ctx.kind} {unit_name(ctx.step, ctx.item_index)}#{ctx.attempt}"
        try:
            if action == "success":
                rec = self.callbacks.callback(ext.token, "success", output=payload)
            elif action == "failure":
                rec = self.callbacks.callback(ext.token, "failure", error=payload["error"])
            else:
                rec = self.callbacks.callback(ext.token, "heartbeat", details={"at": self.now()})
        except (TaskTokenStale, TaskTokenInvalid) as exc:
            outcome = f"stale:{type(exc).__name__}"
            alive = False
        except Exception as exc:
            outcome = f"error:{type(exc).__name__}"
            alive = True
            if action != "heartbeat" and tries < 4:
                self._pending_external += 1
                self.schedule(self.now() + 1000, "callback", (ext, action, payload, tries + 1))
        else:
            alive = True
            outcome = {"SUCCEEDED": "succeeded", "FAILED": "failed", "QUEUED": "retrying"}.get(
                rec.status.value, rec.status.value.lower()
            )
        if outcome.startswith("stale"):
            self.stats["callbacks_stale"] += 1
        elif not outcome.startswith("error"):
            self.stats["callbacks_accepted"] += 1
        if action != "heartbeat" or not alive:
            self.handled.append(
                Handled(self.now(), ctx.workflow_id, ctx.kind, ctx.step, ctx.attempt, outcome)
            )
            self.trace(ctx.workflow_id, f"extern  callback {action} {who} -> {outcome}")
        return alive

    def _call_service(self, ctx: AgentContext) -> Effect | None:
        """Call the external service with the step's idempotency key, recording which
        accepted results this attempt was given (None: refused, its key was undone)."""
        if ctx.kind == "step":
            by_name = self.defs[ctx.workflow_type].by_name
            given: list[tuple[str, int]] = []
            for dep, out in ctx.dependencies.items():
                # A skipped dependency and a wait have no output; an approval's is a
                # person's (checked by `check_approvals`); a map's is its items' outputs, in
                # item order (None: a failed item its tolerance let pass).
                # A child-workflow step's is its child's output (checked by `check_children`).
                if out is None or not by_name[dep].runs_agent:
                    continue
                if isinstance(out, list):
                    given += [
                        (unit_name(dep, i), int(o["attempt"])) for i, o in enumerate(out) if o
                    ]
                else:
                    given.append((dep, int(out["attempt"])))
            inputs = tuple(sorted(given))
        elif ctx.step_output is not None:  # undoing a recorded success: given its output
            inputs = ((unit_name(ctx.step, ctx.item_index), int(ctx.step_output["attempt"])),)
        else:  # undoing a step whose outcome is ambiguous: given no output
            inputs = ()
        effect = self.service.apply(
            at=self.now(),
            workflow_id=ctx.workflow_id,
            kind=ctx.kind,
            step=ctx.step,
            attempt=ctx.attempt,
            key=ctx.idempotency_key,
            inputs=inputs,
            undoes=None if ctx.forward is None else ctx.forward.idempotency_keys,
            item=ctx.item_index,
        )
        if effect is None:
            what = "REFUSED (its key was undone)"
        else:
            what = "APPLIED" if effect.seq == self.service.calls[-1].seq else "already applied"
        unit = unit_name(ctx.step, ctx.item_index)
        self.trace(
            ctx.workflow_id,
            f"service {ctx.kind} {unit}#{ctx.attempt} key={ctx.idempotency_key} {what}",
        )
        return effect

    def _freeze(self, ctx: AgentContext, spec: TaskSpec) -> None:
        """The process stops (no heartbeats) past its lease, then carries on as a zombie."""
        lease = spec.heartbeat_seconds or spec.timeout_seconds
        self.sleep(lease + self.rng.uniform(1.0, spec.timeout_seconds + 3.0))
        ctx.report_progress({"resumed": True})  # its first heartbeat after the pause

    def _hang(self, ctx: AgentContext, spec: TaskSpec, *, beating: bool) -> None:
        """Never returns: heartbeats (if the process is alive) until the attempt deadline,
        then silence until the Lambda timeout kills it."""
        kill_at = ctx.deadline_ms + round(self.config.lambda_grace_s * 1000)
        if beating:
            self._work(ctx, max(0.0, (ctx.deadline_ms - self.now()) / 1000))
        self.sleep(max(0.001, (kill_at - self.now()) / 1000))
        raise SimHang(f"{ctx.kind} {ctx.step}#{ctx.attempt}")

    # ==================================================================== the supervisors

    def sweep(
        self,
        *,
        crash_at: int | None = None,
        crash_after: bool = False,
        double_at: int | None = None,
    ) -> None:
        """Supervisor A sweeps, as a fiber (a slow store call lets anything else happen in
        the middle, another sweep included); it dies at its `crash_at`-th store call (before
        it, or after it with `crash_after`), and B sweeps before A's `double_at`-th call.
        Without those, the dice decide."""
        self.spawn(lambda: self._sweep(crash_at, crash_after, double_at))

    def horizon(self) -> int | None:
        """A sweep starting now looks ahead until just before the next tick (or not at all)."""
        cfg = self.config
        if not (cfg.look_ahead and cfg.leave_due):
            return None
        every = round(cfg.sweep_interval_s * 1000)
        return look_ahead_until(self.now() + every, every)

    def current_plan(self) -> SweepPlan | None:
        fiber = current()
        return self._plans.get(fiber.name if fiber else None)

    def _sweep(
        self,
        crash_at: int | None,
        crash_after: bool,
        double_at: int | None,
        group: int | None = None,
    ) -> None:
        if group is None and self.config.leases:
            # The tick's fan-out: one invocation per group, each under the group's lease.
            for g in range(self.config.sweep_groups):
                self.spawn(functools.partial(self._sweep, crash_at, crash_after, double_at, g))
            return
        fiber = current()
        key = fiber.name if fiber else None
        plan = SweepPlan("supA", crash_at, crash_after, double_at, group=group)
        if crash_at is None and self.roll("sweep_crash"):
            plan.crash_at = self.rng.randint(1, 12)
            plan.crash_after = self.rng.random() < 0.5
        if double_at is None and self.roll("double_sweep"):
            plan.double_at = self.rng.randint(1, 8)
        self._plans[key] = plan
        try:
            if group is None:
                report = self.supervisors["supA"].sweep(until_ms=self.horizon())
            else:
                self._sweeps += 1
                owner = f"supA-{self._sweeps}"
                report = self.group_supervisors[group].sweep_group(
                    group, owner=owner, until_ms=self.horizon()
                )
                if report.lease == "busy":
                    self.trace(None, f"supA    group {group} lease busy")
            self.stats["supervisor_took_over"] += report.took_over
            if report.actions:
                self.trace(None, f"supA    sweep {dict(sorted(report.actions.items()))}")
        except SupervisorCrash:
            self.trace(None, "supA    sweep died")
        except Exception as exc:
            self.trace(None, f"supA    sweep failed: {type(exc).__name__}")
        finally:
            self._plans.pop(key, None)

    def nested_sweep(self, role: str, op: str, pk: str | None) -> None:
        """Supervisor B runs a whole sweep while A is paused before one of its store calls;
        under leases, of A's group, and (`lease_expiry`) only once A's lease ran out: A was
        frozen past it, B took the group over, and A carries on after."""
        other = "supB" if role == "supA" else "supA"
        fiber = current()
        key = fiber.name if fiber else None
        saved = self._plans.pop(key)
        group = saved.group
        if group is not None and self.roll("lease_expiry"):
            self.fault("lease_expiry", None, f"{role} frozen past its lease of group {group}")
            self.sleep(self.config.lease_s + 0.01)
        self.fault("double_sweep", None, f"{other} sweeps while {role} waits before {op}")
        try:
            if group is None:
                report = self.supervisors[other].sweep(until_ms=self.horizon())
            else:
                self._sweeps += 1
                report = self.supervisors[other].sweep_group(
                    group, owner=f"{other}-{self._sweeps}", until_ms=self.horizon()
                )
            self.stats["supervisor_took_over"] += report.took_over
            self.trace(None, f"{other}    sweep {dict(sorted(report.actions.items()))}")
        except Exception as exc:
            self.trace(None, f"{other}    sweep failed: {type(exc).__name__}")
        finally:
            self._plans[key] = saved

    def _on_tick(self, _: Any) -> None:
        self.check_findable()
        self.check_inbox()
        for wf_id, status in self.statuses().items():
            if status == "FAILED" and wf_id not in self._redrive_considered:
                self._redrive_considered.add(wf_id)
                if (self.memory.peek(wf_pk(wf_id), WF_SK) or {}).get("parent_id"):
                    # A child is redriven through its parent (its own redrive would bring it
                    # back to life outside its parent's watch): the operator tries anyway, and
                    # the engine must refuse (docs/simulation.md, child workflows).
                    self.spawn(functools.partial(self.redrive_workflow, wf_id), "redrive")
                    continue
                if self.roll("redrive"):
                    if self.failed_child_undo(wf_id):
                        # The redrive reaches down: the child is redriven with its parent.
                        self.stats["redrives_over_a_failed_child_undo"] += 1
                    self.spawn(functools.partial(self.redrive_workflow, wf_id), "redrive")
            if status == "PAUSED":
                self._on_call(wf_id)
        if self._quiescent():
            self._done = True
            return
        if self.roll("clock_jump"):
            jump = self.rng.uniform(2, 40)
            self.fault("clock_jump", None, f"clock jumps {jump:.1f}s", delay_s=jump)
            self.clock.advance(jump)
        if self.roll("pool_pause"):
            busy = {pool for pool, _, ended in self.pool_pauses if ended is None}
            free = [pool for pool in self.pools if pool not in busy]
            if free:
                pool = self.pool_rng.choice(free)
                seconds = self.pool_rng.uniform(1, 20)
                self.spawn(functools.partial(self.pause_pool, pool, seconds), "pool_pause")
        self._downstream_faults()
        self.sweep()
        self.schedule(self.now() + round(self.config.sweep_interval_s * 1000), "tick")

    # ======================================================================= observation

    def statuses(self) -> dict[str, str]:
        return {wf_id: head["status"] for wf_id, head in sorted(self.memory.heads().items())}

    def live(self) -> list[str]:
        terminal = ("SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED")
        return [wf for wf, status in self.statuses().items() if status not in terminal]

    def failed_child_undo(self, wf_id: str) -> bool:
        """Does FAILED workflow `wf_id` have a failed compensation that waited for a child to
        undo itself (a child step's, a map of children's or one of its items')?"""
        items = [
            i
            for i in self.memory.items()
            if i["pk"] == wf_pk(wf_id) or str(i["pk"]).startswith(f"MAP#{wf_id}#")
        ]
        wf_type = (self.memory.peek(wf_pk(wf_id), WF_SK) or {}).get("wf_type", "")
        definition = self.defs.get(str(wf_type))
        for item in items:
            sk = str(item.get("sk", ""))
            if item.get("status") != "FAILED" or not sk.startswith(("C#", "IC#")):
                continue
            if item.get("child_id") or (
                definition is not None
                and sk.startswith("C#")
                and definition.by_name[sk[2:]].workflow is not None
            ):
                return True
        return False

    def redrive_workflow(self, wf_id: str) -> None:
        """An operator retries a FAILED workflow's compensations with fresh budgets."""
        item = self.memory.get(wf_pk(wf_id), "#WF") or {}
        waited = (self.now() - int(item.get("finished_at") or self.now())) / 1000
        self.fault("redrive", wf_id, f"operator redrives after {waited:.1f}s", delay_s=waited)
        try:
            with self.acting("redrive"):
                wf = self.operations.redrive(wf_id, owner=OWNER)
            self.trace(wf_id, f"client  redrive -> {wf.status.value}")
        except (InvalidTransition, WorkflowNotFound) as exc:
            self.trace(wf_id, f"client  redrive refused: {exc}")
            if item.get("parent_id"):
                self.stats["redrives_of_a_child_refused"] += 1
            return
        except Exception as exc:
            self.trace(wf_id, f"client  redrive failed: {type(exc).__name__}")
            return
        if item.get("parent_id"):
            self.stats["redrives_of_a_child_accepted"] += 1

    # ====================================================================== the operator

    def _on_operator(self, n: int) -> None:
        """The `operator` fault: an operator pauses a running workflow, and later decides."""

        def body() -> None:
            self._pending_client -= 1
            wf_id = self._starts.get(n)
            if wf_id is not None:
                self.pause_workflow(wf_id, follow_up=True)

        self.spawn(body, "pause")

    def pause_workflow(self, wf_id: str, *, follow_up: bool = False) -> None:
        """An operator pauses a workflow (refused unless it is RUNNING); with `follow_up`, it
        comes back later (`_response_delay`) to resume, compensate or cancel it. A pause that failed, or
        whose follow-up never came, is picked up by the on-call operator (`_on_call`)."""
        self.fault("operator", wf_id, "operator pauses")
        try:
            with self.acting("pause"):
                wf = self.operations.pause(wf_id, owner=OWNER)
        except (InvalidTransition, WorkflowNotFound) as exc:
            self.trace(wf_id, f"client  pause refused: {exc}")
            return
        except Exception as exc:
            self.trace(wf_id, f"client  pause failed: {type(exc).__name__}")
            return
        self.trace(wf_id, f"client  pause -> {wf.status.value}")
        if follow_up and wf.status is WorkflowStatus.PAUSED and wf.paused_at is not None:
            self._respond_later(wf_id, wf.paused_at, self._response_delay(wf.wf_type))

    def _on_call(self, wf_id: str) -> None:
        """Every pause ends: whoever paused it (a failure, an operator whose follow-up never
        came), an on-call operator answers a pause nobody answers yet (`_response_delay`);
        where the definition has a pause timeout it sometimes leaves the workflow to it."""
        item = self.memory.peek(wf_pk(wf_id), WF_SK) or {}
        paused_at = item.get("paused_at")
        if item.get("status") != "PAUSED" or paused_at is None:
            return
        key = (wf_id, int(paused_at))
        if key in self._responding:
            return
        definition = self.defs[item["wf_type"]]
        timed = definition.pause_timeout_seconds is not None
        # Drawn only where a pause timeout could end the pause.
        if not self.draining and timed and self.ops.random() < 0.4:
            self._responding[key] = "timeout"
            self.stats["operator_left_for_the_pause_timeout"] += 1
            self.trace(wf_id, "operator leaves the paused workflow to its pause timeout")
            return
        self._respond_later(wf_id, key[1], self._response_delay(item["wf_type"]))

    def _response_delay(self, wf_type: str) -> float:
        """How long the operator takes: 0.5-30 s; up to twice the pause timeout where the
        definition has one (so the operator and the timeout race); 0.1-2 s while draining."""
        if self.draining:
            return self.ops.uniform(0.1, 2)
        timeout = self.defs[wf_type].pause_timeout_seconds
        if timeout is not None:
            return self.ops.uniform(0.2, 2 * timeout)
        return self.ops.uniform(0.5, 30)

    def _respond_later(self, wf_id: str, paused_at: int, delay_s: float) -> None:
        self._responding[(wf_id, paused_at)] = "act"
        self._pending_client += 1
        self.schedule(self.now() + round(delay_s * 1000), "respond", (wf_id, paused_at, None, 0))

    def _on_respond(self, data: tuple[str, int, Decision | None, int]) -> None:
        wf_id, paused_at, decision, tries = data

        def body() -> None:
            self._pending_client -= 1
            self.respond(wf_id, paused_at, decision, tries)

        self.spawn(body, "respond")

    def respond(self, wf_id: str, paused_at: int, decision: Decision | None, tries: int) -> None:
        """The operator ends the pause that began at `paused_at`: resume (sometimes with a
        replacement input for a step), compensate or cancel, through the client API. An error
        is retried a second later; a refusal while still paused (the step to replace is
        running again, a concurrent change) is retried without the replacement."""
        item = self.memory.peek(wf_pk(wf_id), WF_SK) or {}
        if item.get("status") != "PAUSED" or item.get("paused_at") != paused_at:
            self.trace(wf_id, "operator  finds the pause over (a timeout, a cancel, another)")
            return
        if decision is None:
            decision = self._decide(wf_id, item)
        action, step, step_input = decision
        waited = (self.now() - paused_at) / 1000
        detail = f" with a new input for '{step}'" if step else ""
        self.trace(wf_id, f"operator  {action}s after {waited:.1f}s paused{detail}")
        outcome = self.operator_call(action, wf_id, step, step_input)
        if outcome == "ok":
            self.stats[f"operator_{action}" + ("_with_input" if step else "")] += 1
            if action == "resume":
                self._resumes[wf_id] += 1
            return
        if tries >= 30:  # give up; the on-call operator takes the pause again
            self._responding.pop((wf_id, paused_at), None)
            return
        if outcome == "refused" and action == "resume" and self._failed_map(wf_id):
            # A failed map is not run again (409, docs/architecture.md): the operator is told
            # to compensate or cancel the workflow, and does.
            self.stats["operator_told_a_failed_map_is_not_run_again"] += 1
            decision = (self.ops.choice(("compensate", "cancel")), None, None)
        elif outcome == "refused":
            decision = (action, None, None)
        self._pending_client += 1
        self.schedule(self.now() + 1000, "respond", (wf_id, paused_at, decision, tries + 1))

    def _failed_map(self, wf_id: str) -> bool:
        """Whether a map step of the workflow failed after it opened (a resume is refused)."""
        return any(
            i["sk"].startswith("S#") and i["status"] == "FAILED" and "m_total" in i
            for i in self.memory.by_workflow().get(wf_id, [])
        )

    def _decide(self, wf_id: str, item: Item) -> Decision:
        """Resume (60 %, a third of them with a replacement input for a step that has not
        succeeded and is not running), compensate (20 %) or cancel (20 %); after three resumes
        of the same workflow, only compensate or cancel, so a workflow that keeps failing ends."""
        ops = self.ops
        r = ops.random()
        if r < 0.6 and self._resumes[wf_id] < 3:
            if ops.random() < 1 / 3:
                steps = self.replaceable(wf_id)
                if steps:
                    step = ops.choice(steps)
                    return ("resume", step, self.replacement_input(wf_id))
            return ("resume", None, None)
        return ("compensate", None, None) if r < 0.8 else ("cancel", None, None)

    def replaceable(self, wf_id: str) -> list[str]:
        """The steps an operator may give a replacement input now: not succeeded, not running."""
        return sorted(
            i["sk"][2:]
            for i in self.memory.by_workflow().get(wf_id, [])
            if i["sk"].startswith("S#") and i["status"] in ("PENDING", "QUEUED", "FAILED")
        )

    def replacement_input(self, wf_id: str) -> Any:
        """The workflow's input with a new replacement tag (the agents report which they got)."""
        item = self.memory.peek(wf_pk(wf_id), WF_SK) or {}
        self._replacements += 1
        return {**(self.payloads.value(item.get("input")) or {}), "replaced": self._replacements}

    def operator_call(
        self, action: str, wf_id: str, step: str | None = None, step_input: Any = None
    ) -> str:
        """One operator call (`pause`, `resume`, `compensate`, `cancel`) through the client
        API: `ok`, `refused` (InvalidTransition) or `failed` (any other error)."""
        try:
            with self.acting(action):
                if action == "pause":
                    wf = self.operations.pause(wf_id, owner=OWNER)
                elif action == "resume":
                    wf = self.operations.resume(
                        wf_id, owner=OWNER, step=step, step_input=step_input
                    )
                elif action == "compensate":
                    wf = self.operations.compensate(wf_id, owner=OWNER)
                else:
                    wf = self.operations.cancel(wf_id, owner=OWNER)
        except (InvalidTransition, WorkflowNotFound) as exc:
            self.trace(wf_id, f"client  {action} refused: {exc}")
            return "refused"
        except Exception as exc:
            self.trace(wf_id, f"client  {action} failed: {type(exc).__name__}")
            return "failed"
        self.trace(wf_id, f"client  {action} -> {wf.status.value}")
        return "ok"

    # ======================================================================= agent pools

    def pause_pool(self, pool: str, seconds: float) -> None:
        """An operator pauses an agent pool (through the pools' API: the table records it,
        then the pool's consumers stop) and resumes it `seconds` later. A failed call is
        retried a second later, a few times; the resume comes whatever happened."""
        self.fault("pool_pause", None, f"operator pauses pool {pool} for {seconds:.1f}s")
        self.pool_pauses.append((pool, self.now(), None))
        self._pending_client += 1
        self.schedule(self.now() + round(seconds * 1000), "pool_resume", (pool, 0))
        for _ in range(3):
            try:
                with self.acting("pool_pause"):
                    self.pools_api.pause(pool, by="ops")
            except Exception as exc:
                self.trace(None, f"client  pause pool {pool} failed: {type(exc).__name__}")
                if current() is None:
                    return
                self.sleep(1.0)
                continue
            self.trace(None, f"client  pool {pool} paused")
            return

    def _on_pool_resume(self, data: tuple[str, int]) -> None:
        pool, tries = data

        def body() -> None:
            try:
                with self.acting("pool_resume"):
                    self.pools_api.resume(pool, by="ops")
            except Exception as exc:
                self.trace(None, f"client  resume pool {pool} failed: {type(exc).__name__}")
                self.schedule(self.now() + 1000, "pool_resume", (pool, tries + 1))
                return
            self._pending_client -= 1
            for i, (name, began, ended) in enumerate(self.pool_pauses):
                if name == pool and ended is None:
                    self.pool_pauses[i] = (name, began, self.now())
            self.trace(None, f"client  pool {pool} resumed")
            self._poll_at(pool, self.now() + 1)  # its backlog drains

        self.spawn(body, "pool_resume")

    def _downstream_faults(self) -> None:
        """A tick's faults outside the engine: a pool's downstream outage, a throttling
        episode on a workflow's partition."""
        if self.roll("outage"):
            self.outage()
        if self.roll("throttle_episode"):
            self.throttle_episode()

    def outage(self, pool: str | None = None, seconds: float | None = None) -> None:
        """A pool's downstream fails every call for a while (none already down)."""
        down = {name for name, _, ends in self.outages if ends > self.now()}
        free = [name for name in OUTAGE_POOLS if name in self.pools and name not in down]
        if pool is None:
            if not free:
                return
            pool = self.outage_rng.choice(free)
        if seconds is None:
            seconds = self.outage_rng.uniform(*OUTAGE_SECONDS)
        self.fault("outage", None, f"pool {pool}'s downstream fails every call for {seconds:.1f}s")
        self.outages.append((pool, self.now(), self.now() + round(seconds * 1000)))

    def throttle_episode(
        self, workflow_id: str | None = None, seconds: float | None = None
    ) -> None:
        """Every write to one live workflow's partition is throttled for a while (a hot
        partition: DynamoDB rejects them all, the SDK's retries spent), once a workflow."""
        if workflow_id is None:
            # One episode a workflow at most: a partition throttled again and again would
            # never let it end (an outage without end, not an episode).
            struck = {pk for pk, _, _ in self.episodes}
            live = [w for w in self.live() if wf_pk(w) not in struck]
            if not live:
                return
            workflow_id = self.episode_rng.choice(live)
        if seconds is None:
            seconds = self.episode_rng.uniform(*EPISODE_SECONDS)
        self.fault(
            "throttle_episode", workflow_id, f"its partition's writes throttled for {seconds:.1f}s"
        )
        self.episodes.append((wf_pk(workflow_id), self.now(), self.now() + round(seconds * 1000)))

    def partition_throttled(self, pks: Iterable[str]) -> bool:
        """Whether a throttling episode holds any of these partitions now (a write to them is
        then refused, and counted)."""
        now = self.now()
        held = {pk for pk, began, ends in self.episodes if began <= now < ends}
        if held and any(pk in held for pk in pks):
            self.stats["writes_throttled_by_episode"] += 1
            return True
        return False

    def downstream_down(self, pool: str) -> bool:
        now = self.now()
        return any(name == pool and began <= now < ends for name, began, ends in self.outages)

    def pool_states(self) -> dict[str, PoolState]:
        """The pools' states as the table records them (the supervisor's truth)."""
        return pool_states(self.memory)

    def _recorded_pools(self) -> dict[str, PoolState]:
        """`pool_states`, read again only once the table took a write since the last read (a
        tick with no write between reads the same items; the read itself changes nothing)."""
        writes = len(self.memory.changes)
        if self._pools_read is None or self._pools_read[0] != writes:
            self._pools_read = (writes, self.pool_states())
        return self._pools_read[1]

    def queue_states(self) -> dict[str, PoolState]:
        """The pools as they are: paused or not, and how many messages each queue holds (a
        task sent twice is not called lost while its copy may be waiting behind others)."""
        recorded = self._recorded_pools() if self.pool_pauses or self.memory.circuit_holds else {}
        out = {}
        for name in self._task_pools:
            backlog = self.queue.backlog(name)
            waiting = backlog.visible + backlog.in_flight + backlog.delayed
            if waiting:
                self.queue_seen_busy(name)
            base = recorded.get(name)
            # The same (frozen) state as last tick when neither its record nor its queue moved.
            last = self._queue_states.get(name)
            if last is not None and last[0] is base and last[1] == waiting:
                out[name] = last[2]
                continue
            state = (
                PoolState(name, waiting=waiting) if base is None else replace(base, waiting=waiting)
            )
            self._queue_states[name] = (base, waiting, state)
            out[name] = state
        return out

    def queue_seen_busy(self, pool: str) -> None:
        self._queue_busy_at[pool] = max(self._queue_busy_at.get(pool, 0), self.now())

    def queue_busy_at(self, pool: str) -> int:
        """The last check at which the pool's queue held a message (0: never): a task sent
        twice may wait until a grace after the queue emptied, and this is when it last was
        not (checked every tick, so one tick coarser than the truth)."""
        busy = self._queue_busy_at.get(pool, 0)
        return busy + round(self.config.sweep_interval_s * 1000) if busy else 0

    # ================================================================= what the store saw

    def _who(self) -> str:
        fiber = current()
        return fiber.name if fiber is not None else "main"

    def who(self) -> str:
        """The fiber running now (its writes and sends are observed under this name)."""
        return self._who()

    def client_calls(self, delta: int) -> None:
        """A client call is planned (+1) or has begun (-1): the run is not over while any is
        pending (`_quiescent`)."""
        self._pending_client += delta

    @contextmanager
    def acting(self, label: str) -> Iterator[None]:
        """Label what the current fiber (or the test's own thread) does, for the observers."""
        who = self._who()
        previous = self._labels.get(who)
        self._labels[who] = label
        try:
            yield
        finally:
            if previous is None:
                self._labels.pop(who, None)
            else:
                self._labels[who] = previous

    def observe_read(self, role: str, pk: str) -> None:
        """`role`, in the current fiber, has just read the workflow item `pk` (as it is)."""
        if pk.startswith("WF#"):
            self._reads[(self._who(), role, pk)] = (self.memory.versions.get(pk, 0), self.now())
            # What this role knows of the pools when it reads a workflow is what it plans
            # that workflow with (a supervisor's look plans right after its read).
            pools = self._reads.get(("any", self._pool_scope(role), POOLS_PK))
            self._pool_views[(self._who(), role, pk)] = 0 if pools is None else pools[0]
        elif pk == POOLS_PK:
            # A supervisor keeps the pools' states it read last across its sweeps (a failed
            # read: `observe_pools_unread`): what it knows belongs to the supervisor, not a
            # fiber (`_pool_scope`).
            self._reads[("any", self._pool_scope(role), pk)] = (
                self.memory.pool_version,
                self.now(),
            )

    def observe_pools_unread(self, role: str) -> None:
        """`role`'s read of the pools failed: a supervisor then takes every pool as running
        until its next read, as if it had never seen a pause (version 0)."""
        self._reads[("any", self._pool_scope(role), POOLS_PK)] = (0, self.now())

    def _pool_scope(self, role: str) -> str:
        """Whose knowledge of the pools a read or a look of `role` is: under leases supervisor
        A runs one Supervisor per group (`group_supervisors`), each keeping the pools it read
        last, so one group's failed read leaves the others' knowledge as it was (found by
        seed 9323: one group's read failed and it re-sent a task of a pool whose circuit was
        open, while another group's read had seen it); B's nested sweeps share one instance.
        Looks run in their sweep's fiber, so the sweep's plan names the group."""
        plan = self.current_plan()
        if role == "supA" and plan is not None and plan.group is not None:
            return f"{role}#{plan.group}"
        return role

    def observe_redispatch(self, role: str, item: Item) -> None:
        """A write by `role` marked a queued task dispatched again (the item as it now is)."""
        rec = StepRecord.from_item(item)
        wf = self.memory.peek(wf_pk(rec.workflow_id), WF_SK) or {}
        pool = self.defs[wf["wf_type"]].spec(rec.kind, rec.name).pool
        read = self._pool_views.get((self._who(), role, wf_pk(rec.workflow_id)))
        self.redispatches.append(
            Redispatch(
                at=self.now(),
                workflow_id=rec.workflow_id,
                kind=rec.kind,
                step=rec.name,
                attempt=rec.attempt,
                role=role,
                label=self._labels.get(self._who(), ""),
                pool=pool,
                pool_paused_by=self.memory.pool_paused_by.get(pool),
                pool_read=read,
                item=rec.index,
            )
        )

    def observe_status(self, role: str, pk: str, before: str | None) -> None:
        """A write by `role` to the workflow item `pk` has landed; record a status change."""
        item = self.memory.peek(pk, WF_SK)
        if item is None or item.get("status") == before:
            return
        if before == "PAUSED":
            self._resumed_at[pk[3:]] = self.now()
        error = loads(item.get("error")) if item.get("error") else None
        pause = loads(item.get("pause")) if item.get("pause") else None
        self.status_writes.append(
            StatusWrite(
                at=self.now(),
                workflow_id=pk[3:],
                version=self.memory.versions.get(pk, 0),
                role=role,
                label=self._labels.get(self._who(), ""),
                before=before,
                after=str(item["status"]),
                error_type=error.get("type") if isinstance(error, dict) else None,
                pause_reason=pause.get("reason") if isinstance(pause, dict) else None,
                paused_at=item.get("paused_at"),
            )
        )

    def observe_pool_read(self, role: str, pool: str) -> None:
        """`role` has just read the pool item of `pool` (its breaker's state, for one)."""
        self._circuit_reads[(role, pool)] = self.memory.pool_version

    def observe_probe(self, role: str, pool: str) -> None:
        """`role`, in the current fiber, took one of a half-open circuit's probes."""
        self._probes[self._who()] = (pool, self.memory.pool_version)

    def observe_claim_start(self, role: str) -> None:
        """`role`, in the current fiber, sends a claim: what its breaker knew of each pool
        (its admission came right before, with nothing else running in between)."""
        self._claim_basis[self._who()] = {
            pool: version for (who, pool), version in self._circuit_reads.items() if who == role
        }

    def observe_claim(self, role: str, item: Item) -> None:
        """A claim write by `role` has landed (the item as it now is)."""
        rec = StepRecord.from_item(item)
        pk = wf_pk(rec.workflow_id)
        read = self._reads.get((self._who(), role, pk))
        wf = self.memory.peek(pk, WF_SK) or {}
        # A child-workflow unit has no pool (its start, or its undo's wait, is its claim).
        pool = (self.defs[wf["wf_type"]].spec(rec.kind, rec.name).pool or "") if wf else ""
        probe = self._probes.pop(self._who(), None)
        circuit = (self.memory.peek(POOLS_PK, pool) or {}).get("circuit", "closed")
        given = rec.input if rec.kind == "step" else None
        if rec.index is not None and rec.kind == "step":
            # A map item is given its step's input (an operator's replacement, if any).
            given = (self.memory.peek(pk, f"S#{rec.name}") or {}).get("input")
        elif given is None:
            # Else the workflow's: a child's is its parent step's (a replacement, if any).
            given = wf.get("input")
        self.claims.append(
            Claim(
                at=self.now(),
                workflow_id=rec.workflow_id,
                kind=rec.kind,
                step=rec.name,
                attempt=rec.attempt,
                claimed_at=rec.claimed_at or 0,
                role=role,
                paused_by=self.memory.paused_by.get(pk),
                read=None if read is None else read[0],
                input_tag=input_tag(self.payloads.value(given)),
                pool=pool,
                circuit=str(circuit),
                circuit_read=self._claim_basis.pop(self._who(), {}).get(pool),
                circuit_probe=probe[1] if probe is not None and probe[0] == pool else None,
                circuit_entered_by=self.memory.circuit_entered_by.get(pool),
                circuit_left_closed_by=self.memory.circuit_left_closed_by.get(pool),
                item=rec.index,
            )
        )

    def observe_send(self, role: str, message: TaskMessage) -> None:
        """`role`, in the current fiber, decided to send `message` (before any queue fault)."""
        pk = wf_pk(message.workflow_id)
        read = self._reads.get((self._who(), role, pk))
        self.sent.append(
            Sent(
                at=self.now(),
                workflow_id=message.workflow_id,
                kind=message.kind,
                step=message.step,
                attempt=message.attempt,
                role=role,
                label=self._labels.get(self._who(), ""),
                paused_by=self.memory.paused_by.get(pk),
                read=None if read is None else read[0],
                read_at=None if read is None else read[1],
                item=message.item,
            )
        )

    def _completed_state(self, wf_id: str) -> WorkflowState | None:
        """The workflow's state parsed from its partition and completed with its unstored
        steps, as a fresh object `check_findable` may fill in. Parsed again only when an item
        of the partition changed since the last tick: the store replaces an item on every
        write and never changes one in place, so the same item objects are the same items."""
        items = self.memory.partition(wf_pk(wf_id))
        cached = self._parsed.get(wf_id)
        if cached is None or not same_objects(cached[0], items):
            parsed = WorkflowState.from_items(items)
            if parsed is not None:
                parsed.complete(self.defs[parsed.workflow.wf_type].topological_order)
            self._parsed[wf_id] = cached = (items, parsed)
        return None if cached[1] is None else fresh(cached[1])

    def check_findable(self) -> None:
        now = self.now()
        pools = self.queue_states()
        for wf_id, head in sorted(self.memory.heads().items()):
            # An ended workflow has nothing to find: skip it before parsing its items (most
            # of a long run's workflows have ended; parsing them every tick was most of it).
            if WorkflowStatus(head["status"]).terminal:
                continue
            state = self._completed_state(wf_id)
            if state is None or state.workflow.status.terminal:
                continue
            definition = self.defs[state.workflow.wf_type]
            with_windows(state, self.memory.peek)  # its maps' items, as a look reads them
            resumed = self._resumed_at.get(wf_id)
            strict = check_findable(
                state,
                definition,
                now,
                self._check_rng,
                pools=pools,
                resumed_at=resumed,
                queue_busy_at=self.queue_busy_at,
            )
            found = check_findable(
                state,
                definition,
                now,
                self._check_rng,
                self._slack,
                pools=pools,
                resumed_at=resumed,
                queue_busy_at=self.queue_busy_at,
            )
            if len(strict) > len(found):
                self.stats["findable_late_by_write_latency"] += 1
            for v in found:
                self.online.append(v)
                self.trace(wf_id, f"VIOLATION {v}")

    def check_inbox(self) -> None:
        """The approval inbox is exact at this moment (`invariants.inbox_problems`), for every
        workflow whose definition has an approval; each problem is reported once. (Nothing
        to check before an approval first waits: its inbox items come with that write.)"""
        if not self.people.asked:
            return
        for wf_id, wf in sorted(self.memory.heads().items()):
            definition = self.defs[wf["wf_type"]]
            if not any(s.approval is not None for s in definition.steps):
                continue
            items = self.memory.partition(wf_pk(wf_id))
            # The problems are a function of the partition's items: with the same item
            # objects as at the last check (nothing written since), they were reported then.
            last = self._inbox_checked.get(wf_id)
            if last is not None and same_objects(last, items):
                continue
            self._inbox_checked[wf_id] = items
            for problem in inbox_problems(items, definition):
                if (wf_id, problem) in self._inbox_seen:
                    continue
                self._inbox_seen.add((wf_id, problem))
                violation = Violation("inbox", wf_id, f"at {self.now()}: {problem}")
                self.online.append(violation)
                self.trace(wf_id, f"VIOLATION {violation}")

    def _changed(self, change: Change) -> None:
        """Every write the table takes: to the stream, counted for the fiber that made it,
        and shown to the people (an approval that starts to wait)."""
        self.relay.append(change)
        self.writes_by[self._who()] += 1
        self.people.changed(change)
        self.signallers.changed(change)
        new = change.new
        if change.old is None and new is not None and new.get("sk") == WF_SK:
            parent = new.get("parent_id")
            if parent and self.roll("parent_cancel"):
                # An operator cancels the parent while this child runs (its own stream).
                later = round(self.parent_cancel_rng.uniform(0.05, 3.0) * 1000)
                self._pending_client += 1
                self.schedule(self.now() + later, "parent_cancel", str(parent))

    def _slack(self, key: tuple[str, str]) -> int:
        return self.write_latency.get(key, 0)

    def _quiescent(self) -> bool:
        return (
            self._pending_client == 0
            and self._pending_external == 0
            and not self._fibers
            and not self.live()
        )

    # ========================================================================== running

    def _dispatch(self, kind: str, data: Any) -> None:
        handlers: dict[str, Callable[[Any], None]] = {
            "start": self._on_start,
            "cancel": self._on_cancel,
            "parent_cancel": self._on_parent_cancel,
            "poll": self._on_poll,
            "deliver": self.deliver,
            "resume": self._on_resume,
            "tick": self._on_tick,
            "external": self._on_external,
            "callback": self._on_callback,
            "operator": self._on_operator,
            "respond": self._on_respond,
            "pool_resume": self._on_pool_resume,
            "answer": self.people.on_answer,
            "fire": self.people.on_fire,
            "signal": self.signallers.on_signal,
            "relay": self.relay.poll,
            "relay_replay": self._on_relay_replay,
        }
        handler = handlers.get(kind)
        if handler is None:
            raise ValueError(kind)
        handler(data)

    def _on_resume(self, name: str) -> None:
        """A fiber's wait is over: it carries on where it yielded."""
        fiber = self._fibers.get(name)
        if fiber is not None:
            self._switch(fiber)

    _current_at = 0

    def step_event(self) -> bool:
        """Process the next event; False when there is none."""
        if not self._heap:
            return False
        at, _, kind, data = heapq.heappop(self._heap)
        self._current_at = at
        if at > self.now():
            self.clock.set(at)
        if kind not in RELAY_EVENTS:
            self._events += 1
        self._dispatch(kind, data)
        return True

    def advance(self, seconds: float) -> None:
        """Run every event due in the next `seconds`, then set the clock there."""
        until = self.now() + round(seconds * 1000)
        while self._heap and self._heap[0][0] <= until:
            self.step_event()
        if until > self.now():
            self.clock.set(until)

    def run(self) -> SimResult:
        with quiet_engine_logs(), sim_caps():
            try:
                self.plan_workload()
                self.schedule(self.t0 + 1, "tick")
                self._loop()
            finally:
                self.kill_fibers()
            self.finish_relay()
        return self.result()

    def _loop(self) -> None:
        horizon = self.t0 + round(self.config.horizon_s * 1000)
        while not self._done and self._events < self.config.max_events and self.now() < horizon:
            if not self.step_event():
                break
        if not self._done:
            self.stats["unfinished_runs"] += 1

    def drain(self) -> None:
        """From manual mode: no more faults, let pollers and the supervisor finish the job."""
        self.auto = True
        self.draining = True  # the on-call operator ends every pause, quickly
        self.bound_origin = self.now()
        self.faults = Faults.none()
        self.next_agent_fault = None
        self.forced.clear()
        for pool in self.pools:
            self._poll_at(pool, self.now() + 1)
            for fiber_at in (self.config.visibility_s * 1000 + 2,):
                self._poll_at(pool, self.now() + fiber_at)
        self.schedule(self.now() + 1, "tick")
        with quiet_engine_logs():
            try:
                self._loop()
            finally:
                self.kill_fibers()
            self.finish_relay()

    def finish_relay(self) -> None:
        """The engine's run is over: the relay carries on (faults and all) until everything
        the stream holds is published, as the deployed one would."""
        self._ended_at = self.now()
        rest = [e for e in self._heap if e[2] not in RELAY_EVENTS]
        self._heap = [e for e in self._heap if e[2] in RELAY_EVENTS]
        heapq.heapify(self._heap)
        while self.step_event():
            pass
        self._heap = rest
        heapq.heapify(self._heap)

    def _on_relay_replay(self, _: Any) -> None:
        self.relay.replay()

    def _delivered(self, delivery: Delivery) -> None:
        detail = delivery.detail
        what = f" {detail['kind']} {detail['step']}#{detail['attempt']}" if "step" in detail else ""
        self.trace(
            str(detail.get("workflow_id")),
            f"relay   {delivery.detail_type}{what} (sequence {int(str(detail.get('sequence')))})"
            + (" replayed from the on-failure queue" if delivery.via == "replay" else ""),
        )

    def end_ms(self) -> int:
        """When the engine's run ended (the relay may publish after it)."""
        return self._ended_at if self._ended_at is not None else self.now()

    def kill_fibers(self) -> None:
        for name in sorted(self._fibers, key=lambda n: int(n[1:])):
            fiber = self._fibers.pop(name)
            fiber.kill()

    # ====================================================================== manual mode

    def receive_all(self) -> list[tuple[str, Received]]:
        out = []
        for pool in self.pools:
            out += [(pool, r) for r in self.queue.receive(pool, 10)]
        return out

    def deliver_one(self, index: int, mode: str) -> bool:
        """Manual mode: take one visible message and deliver it as `mode` says."""
        received = self.receive_all()
        if not received:
            return False
        _, chosen = received[index % len(received)]
        for _, other in received:
            if other is not chosen:
                self.queue.release(other.receipt)
        task = chosen.task
        if mode == "lose":
            self.fault("lose", task.workflow_id, f"message {task.step}#{task.attempt} lost")
            self.queue.delete(chosen.receipt)
            return True
        if mode in AGENT_FAULTS:
            self.next_agent_fault = mode
        self.deliver(chosen)
        if mode == "duplicate":
            self.fault("dup", task.workflow_id, f"message {task.step}#{task.attempt} twice")
            self.deliver(chosen)
        self.next_agent_fault = None
        return True

    def jump(self, seconds: float) -> None:
        self.fault("clock_jump", None, f"clock jumps {seconds:.1f}s", delay_s=seconds)
        self.clock.advance(seconds)

    # ========================================================================== results

    def bounds(
        self, states: Mapping[str, WorkflowState], items: Sequence[Item] = ()
    ) -> dict[str, int]:
        """When each workflow must have been terminal (see `bounds.py`); `items`: the table's,
        whose map item units count like steps."""
        units: dict[str, list[StepRecord]] = {}
        for (wf_id, _, _), by_index in item_units(items).items():
            units.setdefault(wf_id, []).extend(by_index.values())
        out = {}
        for wf_id, state in states.items():
            wf = state.workflow
            definition = self.defs[wf.wf_type]
            end = wf.finished_at or self.end_ms()
            faults = 0
            extra = 0.0
            for at, kind, target, size in self.fault_log:
                if target == wf_id or (target is None and wf.created_at <= at <= end):
                    if kind in ("clock_jump", "delay", "redrive", "slow", "index_lag"):
                        extra += size
                    elif kind not in (
                        *AGENT_FAULTS,
                        *RELAY_FAULTS,
                        "cancel",
                        "parent_cancel",
                        "redrive",
                        "operator",
                        "pool_pause",
                        "schedule_dup",
                    ):
                        faults += 1
            origin = max(wf.created_at, self.bound_origin or wf.created_at)
            writes = [w for w in self.status_writes if w.workflow_id == wf_id]
            used = {t.pool for t in definition.tasks}
            pool_waits = [  # an operator's pauses, and the stretches a breaker held the pool
                (began, ended)
                for pool, began, ended in [*self.pool_pauses, *self.memory.circuit_holds]
                if pool in used and began <= end and (ended is None or ended >= wf.created_at)
            ]
            out[wf_id] = (
                origin
                + bounds.used_budget_ms(state, definition, self.timing, units.get(wf_id, ()))
                + faults * bounds.fault_penalty_ms(definition, self.timing)
                + round(extra * 1000)
                + bounds.paused_wait_ms(writes, definition, self.timing, end)
                + bounds.pool_wait_ms(pool_waits, definition, self.timing, end)
            )
        return out

    def record(self) -> RunRecord:
        record = RunRecord(
            items=self.memory.items(),
            definitions=self.defs,
            calls=list(self.service.calls),
            effects=self.service.effect_list(),
            handled=list(self.handled),
            accepted=dict(self.accepted),
            end_ms=self.end_ms(),
            online=list(self.online),
            changes=list(self.relay.changes),
            deliveries=list(self.relay.deliveries),
            undone=dict(self.service.undone),
            claims=list(self.claims),
            sent=list(self.sent),
            status_writes=list(self.status_writes),
            given_inputs=dict(self.given_inputs),
            redispatches=list(self.redispatches),
            payloads=dict(self.bucket.objects),
            approval_calls=list(self.approval_calls),
            firings=list(self.firings),
            signal_calls=list(self.signal_calls),
        )
        record.bounds = self.bounds(record.states(), record.items)
        return record

    def result(self) -> SimResult:
        record = self.record()
        violations = check_all(record)
        states = record.states()
        outcomes = Counter(s.workflow.status.value for s in states.values())
        self._effects_left(record, states)
        self._operations(record, states)
        self._events_stats(record)
        self._approvals_stats(record)
        self._maps_stats(record, states)
        self._children_stats(record, states)
        self._kinds_stats(states)
        self._episode_stats(states)
        self.stats["dlq"] += sum(len(v) for v in self.queue.dead.values())
        digest = hashlib.sha256()
        for _, line in self.trace_lines:
            digest.update(line.encode() + b"\n")
        # Task tokens are secrets (not seeded); only their presence is part of the run.
        items = sorted((_redact_tokens(i) for i in record.items), key=lambda i: (i["pk"], i["sk"]))
        digest.update(json.dumps(items, sort_keys=True, default=str).encode())
        digest.update(json.dumps(self.service.snapshot(), sort_keys=True).encode())
        return SimResult(
            seed=self.seed,
            faults=Counter(self.counts),
            outcomes=outcomes,
            violations=violations,
            digest=digest.hexdigest(),
            sim_seconds=(self.end_ms() - self.t0) / 1000,
            events=self._events,
            workflows=sorted(states),
            trace=list(self.trace_lines),
            stats=Counter(self.stats),
        )

    def _episode_stats(self, states: Mapping[str, WorkflowState]) -> None:
        """What throttling episodes cost (issue 41.3: nothing): attempts of a struck workflow
        timed out during its episode or within a minute after it (an attempt consumed), and
        struck workflows that did not succeed. Printed, not yet an invariant: a throttle longer
        than an attempt's lease still consumes it (docs/architecture.md)."""
        if not self.episodes:
            return
        window = {pk: (began, ends + 60_000) for pk, began, ends in self.episodes}
        for wf_id, state in states.items():
            found = window.get(wf_pk(wf_id))
            if found is None:
                continue
            began, until = found
            self.stats["episode_struck_workflows"] += 1
            self.stats["episode_struck_unsucceeded"] += (
                state.workflow.status is not WorkflowStatus.SUCCEEDED
            )
            for rec in state.steps.values():
                for entry in rec.history:
                    if entry.get("o") in ("timeout", "heartbeat_timeout") and (
                        began <= int(entry.get("t", 0)) <= until
                    ):
                        self.stats["episode_attempts_timed_out"] += 1

    def _kinds_stats(self, states: Mapping[str, WorkflowState]) -> None:
        """Steps that succeeded, by kind, and steps a condition skipped: what a run's count of
        the supervisor's take-overs (`supervisor_took_over`) covers (issue 40.5)."""
        for state in states.values():
            definition = self.defs[state.workflow.wf_type]
            for rec in state.steps.values():
                self._repeat_stats(rec)
                if rec.status is StepStatus.SKIPPED:
                    self.stats["steps_skipped_by_a_condition"] += 1
                    continue
                if rec.status is not StepStatus.SUCCEEDED:
                    continue
                kind = kind_of(definition.by_name[rec.name]).name
                self.stats[f"steps_succeeded_{kind}"] += 1

    def _repeat_stats(self, rec: StepRecord) -> None:
        """Loops (issue 42.5): iterations counted, and how Repeat steps ended."""
        if not rec.iterations:
            return
        self.stats["repeat_iterations"] += rec.iterations
        error = loads(rec.error) if rec.error else None
        if rec.status is StepStatus.FAILED and (error or {}).get("type") == LOOP_LIMIT:
            self.stats["repeat_loop_limit"] += 1
        elif rec.status is StepStatus.SUCCEEDED:
            self.stats[f"repeat_succeeded_after_{min(rec.iterations, 3)}"] += 1

    def _maps_stats(self, record: RunRecord, states: Mapping[str, WorkflowState]) -> None:
        """How maps went (issue 24): opened, their items, how each ended (succeeded, within
        or without failed items; failed past its tolerance; halted by an unwinding), items
        retried and timed out, sent again by a supervisor, and items undone (in REVERSE, one
        at a time, or in PARALLEL)."""
        for state in states.values():
            definition = self.defs[state.workflow.wf_type]
            for rec in (*state.steps.values(), *state.compensations.values()):
                m = rec.fanout
                if m is None:
                    continue
                if rec.kind == "compensation":
                    order = definition.compensation_order.lower()
                    self.stats[f"map_compensations_{order}"] += 1
                    continue
                self.stats["maps_opened"] += 1
                self.stats["map_items"] += m.total
                ended = {"SUCCEEDED": "succeeded", "FAILED": "failed_past_their_tolerance"}
                self.stats[f"maps_{ended.get(m.status, 'halted_by_an_unwinding')}"] += 1
                if m.status == "SUCCEEDED" and m.failed:
                    self.stats["maps_succeeded_with_tolerated_failures"] += 1
        for units in item_units(record.items).values():
            for unit in units.values():
                if unit.kind == "compensation":
                    self.stats[f"map_item_undos_{unit.status.value.lower()}"] += 1
                    continue
                self.stats[f"map_items_{unit.status.value.lower()}"] += 1
                self.stats["map_item_attempts"] += unit.attempt
                self.stats["map_items_retried"] += unit.attempt > 1
                self.stats["map_items_timed_out"] += sum(
                    1 for h in unit.history if h.get("o") in ("timeout", "heartbeat_timeout")
                )
        for c in record.claims:
            if c.item is not None:
                self.stats["map_item_claims" if c.kind == "step" else "map_item_undo_claims"] += 1
        self.stats["map_items_sent_again"] += sum(
            1 for r in record.redispatches if r.item is not None
        )
        self.stats["map_item_messages_dropped"] += sum(
            1 for h in record.handled if h.item is not None and h.outcome == "dropped"
        )

    def _children_stats(self, record: RunRecord, states: Mapping[str, WorkflowState]) -> None:
        """How child workflows went (issue 24): started, how each ended, undone by a parent
        that unwound; children started by a retry (attempt 2 or later) and attempts ended by
        their TimeoutSeconds (the child asked to cancel), of child steps and map items."""
        for state in states.values():
            wf = state.workflow
            if wf.parent_id is None:
                continue
            self.stats["children_started"] += 1
            self.stats[f"children_{wf.status.value.lower()}"] += 1
            if (loads(wf.error) or {}).get("type") == "ParentCompensation" if wf.error else False:
                self.stats["children_undone_by_their_parent"] += 1
        units = [r for s in states.values() for r in s.steps.values() if r.child_id is not None]
        units += [
            u
            for forward in item_units(record.items).values()
            for u in forward.values()
            if u.child_id is not None and u.kind == "step"
        ]
        for rec in units:
            self.stats["children_cancelled_by_a_timeout"] += sum(
                1 for h in rec.history if h.get("o") == "timeout"
            )
            self.stats["children_of_a_retry"] += max(0, rec.attempt - 1)

    def _approvals_stats(self, record: RunRecord) -> None:
        """How approvals ended (approved, rejected, timed out, cancelled), how many a person
        decided after the deadline (the timeout lost the race), and the firings' workflows."""
        for hows in approval_endings(record).values():
            for how in hows:
                self.stats[f"approvals_{how.replace(' ', '_')}"] += 1
        self.stats["approvals_answered_after_their_deadline"] += answered_after_deadline(record)
        self.stats["schedule_firings_started"] += len(
            {f.workflow_id for f in record.firings if f.outcome == "ok"}
        )

    def _events_stats(self, record: RunRecord) -> None:
        """Count what the relay did: events announced, delivered (first time, again, from a
        replay), missing (announced, never delivered: a violation), and how late."""
        events = announced(record)
        self.stats["events_announced"] += len(events)
        self.stats["events_announced_terminal"] += sum(
            e.detail_type in TERMINAL_EVENTS for e in events
        )
        firsts: set[str] = set()
        for d in record.deliveries:
            key = str(d.detail.get("event_id"))
            if key in firsts:
                self.stats["events_delivered_again"] += 1
            else:
                firsts.add(key)
            if d.via == "replay":
                self.stats["events_replayed_from_the_on_failure_queue"] += 1
        missing = missing_events(record)
        self.stats["events_missing"] += len(missing)
        self.stats["events_missing_terminal"] += sum(
            e.detail_type in TERMINAL_EVENTS for e in missing
        )
        for e in missing:
            self.trace(str(e.detail.get("workflow_id")), f"note    {e.detail_type} never delivered")
        relay = self.relay
        self.stats["relay_invocations"] += relay.invocations
        self.stats["relay_records_filtered_out"] += relay.filtered
        self.stats["relay_records_written"] += len(relay.changes)
        self.stats["relay_published_after_5s"] += sum(lag > 5000 for lag in relay.lag_ms)

    def _effects_left(self, record: RunRecord, states: Mapping[str, WorkflowState]) -> None:
        """Count what a COMPENSATED or CANCELLED workflow left in the world: orphaned effects
        by their step's `When` (under ATTEMPTED each is also a violation), and effects of
        steps that have no compensation at all (by design, not orphans)."""
        for orphan in orphaned_effects(record):
            effect = orphan.effect
            self.stats[f"orphaned_effects_{orphan.when.lower()}"] += 1
            self.trace(
                effect.workflow_id,
                f"note    effect of '{effect.step}' (When: {orphan.when}) applied and never "
                f"undone; the workflow ended {orphan.status}",
            )
        for effect in record.effects:
            state = states.get(effect.workflow_id)
            if effect.kind != "step" or state is None:
                continue
            unwound = state.workflow.status in (
                WorkflowStatus.COMPENSATED,
                WorkflowStatus.CANCELLED,
            )
            spec = self.defs[state.workflow.wf_type].by_name[effect.step]
            if unwound and spec.compensation is None:
                self.stats["effects_without_compensation"] += 1

    def _operations(self, record: RunRecord, states: Mapping[str, WorkflowState]) -> None:
        """Count pauses and how they ended, what the documented pause race let through, and
        parallel undos that overlapped: evidence that each is exercised."""
        for w in record.status_writes:
            if w.after == "PAUSED" and w.before != "PAUSED":
                self.stats[f"paused_by_{w.pause_reason}"] += 1
            if w.before == "PAUSED" and w.after == "COMPENSATING" and w.role in ("supA", "supB"):
                self.stats["pause_timed_out"] += 1
        for sent in record.sent:
            if sent.paused_by is not None:
                self.stats[f"sent_while_paused_on_an_earlier_read_by_{sent.role}"] += 1
        for claim in record.claims:
            if claim.paused_by is not None:
                self.stats["claimed_while_paused_on_an_earlier_read"] += 1
        self._circuits(record, states)
        for again in record.redispatches:
            if again.pool_paused_by is not None:
                self.stats[
                    f"redispatched_while_its_pool_paused_by_{again.label or again.role}"
                ] += 1
        self._overlaps(record, states)

    def _circuits(self, record: RunRecord, states: Mapping[str, WorkflowState]) -> None:
        """Count the circuits' moves, the claims the breaker let through while not closed
        (probes, and the documented race), and the workflows an outage affected (one of
        their tasks runs in the pool that was down, and they were live during it) with how
        many of them SUCCEEDED: the measure of what a breaker saves (docs/simulation.md)."""
        for claim in record.claims:
            if claim.circuit != "closed":
                how = "as_a_probe" if claim.circuit_probe is not None else "on_an_earlier_read"
                self.stats[f"claimed_while_circuit_{claim.circuit}_{how}"] += 1
        for change in record.changes:
            if change.new is not None and change.new.get("pk") == POOLS_PK:
                was = (change.old or {}).get("circuit", "closed")
                if change.new.get("circuit", "closed") != was:
                    self.stats[f"circuit_to_{change.new['circuit']}"] += 1
        for state in states.values():
            wf = state.workflow
            used = {t.pool for t in self.defs[wf.wf_type].tasks}
            end = wf.finished_at or self.end_ms()
            if any(
                pool in used and began <= end and ends >= wf.created_at
                for pool, began, ends in self.outages
            ):
                self.stats["outage_affected_workflows"] += 1
                if wf.status is WorkflowStatus.SUCCEEDED:
                    self.stats["outage_affected_succeeded"] += 1

    def _overlaps(self, record: RunRecord, states: Mapping[str, WorkflowState]) -> None:
        """Count pairs of PARALLEL undos that ran at the same time (first claim to success)."""
        spans: dict[tuple[str, str], tuple[int, int]] = {}
        for claim in record.claims:
            if claim.kind == "compensation":
                spans.setdefault((claim.workflow_id, claim.step), (claim.at, claim.at))
        for wf_id, state in states.items():
            definition = self.defs[state.workflow.wf_type]
            if definition.compensation_order != "PARALLEL":
                continue
            done = {
                n: (spans[(wf_id, n)][0], c.finished_at)
                for n, c in state.compensations.items()
                if c.finished_at is not None and (wf_id, n) in spans
            }
            for a, b in itertools.combinations(sorted(done), 2):
                (sa, ea), (sb, eb) = done[a], done[b]
                if sa < eb and sb < ea:
                    self.stats["parallel_undos_overlapped"] += 1


def run_seed(
    seed: int,
    faults: Faults | None = None,
    config: SimConfig | None = None,
    hook: Callable[[Simulation], None] | None = None,
) -> SimResult:
    sim = Simulation(seed, faults, config=config)
    if hook is not None:
        hook(sim)
    return sim.run()
