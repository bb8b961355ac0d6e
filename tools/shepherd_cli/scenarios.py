"""The demo's workflows: some clean, some with faults injected, one or two for each kind of step
(conditions, approvals, waits, maps), each with the ending it must reach."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

ORDER = {
    "order_id": "ord-1001",
    "customer": "ada@example.com",
    "amount": 129.9,
    "items": [{"sku": "BOOK-42", "qty": 1}, {"sku": "MUG-7", "qty": 2}],
}
ENV = {"env_name": "demo-env", "region": "eu-west-1", "size": "medium"}
# 47 s in chunks of 6 s: eight chunks (the last one 5 s), encoded three at a time.
VIDEO = {
    "video_id": "keynote",
    "source": "s3://uploads/keynote.mov",
    "duration_seconds": 47,
    "chunk_seconds": 6,
    "profile": "1080p",
}
VIDEO_CHUNKS = 8
MAP_STEP = "encode_chunks"  # transcode_video's map step
FLAKY_CHUNK = 2  # fails twice, then succeeds
HUNG_CHUNK = 5  # hangs once: timed out by its heartbeat, retried
CORRUPT_CHUNKS = (4, 6)  # fail for good: one more than encode_chunks tolerates


@dataclass(frozen=True)
class ItemExpect:
    """What one item of a map must end with: its status, at least this many attempts (faults
    add attempts; a busy machine may add one, never take one away), and the error type its
    last failed attempt left (None: no check)."""

    index: int
    status: str
    min_attempts: int = 1
    error: str | None = None


@dataclass(frozen=True)
class MapExpect:
    """How a map step must end: its verdict, its item count, the items named (every other item
    ends as the verdict implies: SUCCEEDED when the map did), and with `undone`, every item
    that may have acted undone (the engine's count, and nothing it encoded left behind)."""

    step: str
    status: str
    items: int
    marked: tuple[ItemExpect, ...] = ()
    undone: bool = False


@dataclass(frozen=True)
class ChildExpect:
    """One child workflow a Workflow step must have started (`index`: the map item's, None for
    a plain step), how it must end, and linked both ways: on the parent's step (or item) as
    `children`, and on the child as `parent_id`, `parent_step`, `parent_item`."""

    step: str
    index: int | None
    status: str


@dataclass(frozen=True)
class Scenario:
    label: str
    wf_type: str
    payload: dict[str, Any]
    expected: str
    story: str
    via_event: bool = False  # started by an EventBridge StartWorkflow event, not HTTP
    # What the operator does once it is PAUSED: resume, compensate, cancel. A workflow rests
    # while PAUSED, so the operator's action can never come too late.
    on_pause: str | None = None
    pause_at_start: bool = False  # the operator pauses it as soon as it is started
    # A carrier answers the waiting callback step with a result of at least this many bytes
    # (uploaded before the step waits, so the answer is one quick call).
    carrier_bytes: int | None = None
    # The fraud desk answers the order's waiting `fraud_review` through the API: "approve" or
    # "reject", with this comment.
    decide: str | None = None
    comment: str | None = None
    # The order asks for a reminder this many seconds after it is started (`remind_at`): its
    # Wait step rests until then and the supervisor wakes it.
    remind_in: float | None = None
    # Steps that must end in these states, and exactly the compensations that must succeed.
    steps: tuple[tuple[str, str], ...] = ()
    undone: tuple[str, ...] | None = None
    # A map step's ending, item by item (GET /workflows/{id}/steps/{step}/items).
    map: MapExpect | None = None
    # Every child workflow its Workflow steps must have started, one per step or item.
    children: tuple[ChildExpect, ...] = ()
    # An amendable order (issue 37): the customer sends this amendment by a signal matched on
    # the order id (POST /signals) once its `await_amendment` waits; None: nobody amends it.
    amend: dict[str, Any] | None = None

    def payload_now(self) -> dict[str, Any]:
        """The input as started now (a reminder's time counts from the start)."""
        if self.remind_in is None:
            return self.payload
        at = datetime.now(UTC) + timedelta(seconds=self.remind_in)
        return {**self.payload, "remind_at": at.isoformat(timespec="milliseconds")}


def _faults(base: dict[str, Any], **faults: dict[str, Any]) -> dict[str, Any]:
    return {**base, "faults": {k.replace("__", ":"): v for k, v in faults.items()}}


MIB = 1024 * 1024
# A 2 MiB input and a step returning 20 MiB: both live in the payload bucket (moto's S3).
LARGE = {**ORDER, "order_id": "ord-large-1", "attachment": "a" * (2 * MIB)}
LARGE["output_bytes"] = {"ship_order": 20 * MIB}

# What a small order (under the fraud review's threshold, naming no remind_at) runs.
NO_REVIEW_NO_REMINDER = (
    ("fraud_review", "SKIPPED"),
    ("until_reminder", "SKIPPED"),
    ("send_reminder", "SKIPPED"),
)

# An amendable order's window and its two branches (issue 37).
AMENDED = (
    ("await_amendment", "SUCCEEDED"),
    ("apply_amendment", "SUCCEEDED"),
    ("confirm_as_placed", "SKIPPED"),
)
NOT_AMENDED = (
    ("await_amendment", "SUCCEEDED"),
    ("apply_amendment", "SKIPPED"),
    ("confirm_as_placed", "SUCCEEDED"),
)

SCENARIOS = [
    Scenario(
        "order-amended",
        "order_amendment",
        {**ORDER, "order_id": "ord-amend-1"},
        "SUCCEEDED",
        "the customer amends it by a signal matched on its order id (POST /signals)",
        amend={"items": [{"sku": "A-1", "qty": 3}], "note": "make it three"},
        steps=AMENDED,
    ),
    Scenario(
        "order-not-amended",
        "order_amendment",
        {**ORDER, "order_id": "ord-amend-2"},
        "SUCCEEDED",
        "nobody amends it: its wait times out (20 s) and takes the other branch",
        steps=NOT_AMENDED,
    ),
    Scenario(
        "order-clean",
        "order_fulfilment",
        ORDER,
        "SUCCEEDED",
        "no faults; too small for a fraud review",
        steps=NO_REVIEW_NO_REMINDER,
    ),
    Scenario(
        "order-fraud-approved",
        "order_fulfilment",
        {**ORDER, "order_id": "ord-big-1", "amount": 2499.0},
        "SUCCEEDED",
        "2,499: held for fraud review; approved through the API, then charged",
        decide="approve",
        comment="known customer, address verified",
        steps=(("fraud_review", "SUCCEEDED"), ("charge_payment", "SUCCEEDED")),
    ),
    Scenario(
        "order-fraud-rejected",
        "order_fulfilment",
        {**ORDER, "order_id": "ord-big-2", "amount": 4200.0},
        "COMPENSATED",
        "4,200: held for fraud review; rejected through the API: stock released, never charged",
        decide="reject",
        comment="card reported stolen",
        steps=(("fraud_review", "FAILED"), ("charge_payment", "CANCELLED")),
        undone=("reserve_inventory",),
    ),
    Scenario(
        "order-reminder",
        "order_fulfilment",
        {**ORDER, "order_id": "ord-remind-1"},
        "SUCCEEDED",
        "asks for a reminder 10 s after it starts: a Wait step the supervisor wakes",
        remind_in=10.0,
        steps=(
            ("fraud_review", "SKIPPED"),
            ("until_reminder", "SUCCEEDED"),
            ("send_reminder", "SUCCEEDED"),
        ),
    ),
    Scenario(
        "order-large-payloads",
        "order_fulfilment",
        LARGE,
        "SUCCEEDED",
        "a 2 MiB input; shipping returns 20 MiB (kept in S3)",
    ),
    Scenario(
        "order-carrier-callback",
        "order_fulfilment",
        {**ORDER, "order_id": "ord-cb-1", "callback": ["ship_order"]},
        "SUCCEEDED",
        "shipping waits for the carrier's callback: an 8 MiB result, uploaded",
        carrier_bytes=8 * MIB,
    ),
    Scenario(
        "order-flaky-payment",
        "order_fulfilment",
        _faults(ORDER, charge_payment={"mode": "error", "times": 2}),
        "SUCCEEDED",
        "payment errors twice, succeeds on retry",
    ),
    Scenario(
        "order-hung-inventory",
        "order_fulfilment",
        _faults(ORDER, reserve_inventory={"mode": "hang", "times": 1}),
        "SUCCEEDED",
        "inventory hangs; heartbeat timeout; retried",
    ),
    Scenario(
        "order-bad-address",
        "order_fulfilment",
        _faults(ORDER, ship_order={"mode": "permanent"}),
        "COMPENSATED",
        "shipping fails for good; refund, then release",
    ),
    Scenario(
        "order-refund-flaky",
        "order_fulfilment",
        _faults(
            ORDER,
            ship_order={"mode": "permanent"},
            charge_payment__compensation={"mode": "error", "times": 2},
        ),
        "COMPENSATED",
        "shipping fails; the refund itself fails twice",
    ),
    Scenario("env-clean", "provision_environment", ENV, "SUCCEEDED", "no faults"),
    Scenario(
        "env-storage-crash",
        "provision_environment",
        _faults(ENV, create_storage={"mode": "crash", "times": 1}),
        "SUCCEEDED",
        "storage worker dies mid-step; recovered",
    ),
    Scenario(
        "env-verify-fails",
        "provision_environment",
        _faults(ENV, verify={"mode": "permanent"}),
        "COMPENSATED",
        "verification fails; tear down in reverse",
    ),
    Scenario(
        "order-charge-crashes",
        "order_fulfilment",
        _faults(ORDER, charge_payment={"mode": "crash_after_effect", "times": 99}),
        "COMPENSATED",
        "card charged, then the worker dies, every attempt; refunded anyway",
    ),
    Scenario(
        "env-config-fixed",
        "provision_environment",
        _faults(ENV, configure={"mode": "permanent", "times": 1}),
        "SUCCEEDED",
        "configure fails for good: PAUSED; fixed, resumed",
        on_pause="resume",
    ),
    Scenario(
        "env-config-given-up",
        "provision_environment",
        _faults(ENV, configure={"mode": "permanent"}),
        "COMPENSATED",
        "configure fails for good: PAUSED; operator gives up",
        on_pause="compensate",
    ),
    Scenario(
        "order-cancelled",
        "order_fulfilment",
        _faults(ORDER, ship_order={"mode": "error", "times": 3}),
        "CANCELLED",
        "paused by an operator mid-run, then cancelled: what ran is undone",
        pause_at_start=True,
        on_pause="cancel",
    ),
    Scenario(
        "order-via-event",
        "order_fulfilment",
        {**ORDER, "order_id": "ord-evt-7"},
        "SUCCEEDED",
        "started by a StartWorkflow event on the bus",
        via_event=True,
    ),
]

TRANSCODED = (
    ("split_video", "SUCCEEDED"),
    ("encode_chunks", "SUCCEEDED"),
    ("package_video", "SUCCEEDED"),
)
TRANSCODE_SCENARIOS = [
    Scenario(
        "video-clean",
        "transcode_video",
        VIDEO,
        "SUCCEEDED",
        "8 chunks encoded 3 at a time (a Map step), then packaged",
        steps=TRANSCODED,
        undone=(),
        map=MapExpect(MAP_STEP, "SUCCEEDED", VIDEO_CHUNKS),
    ),
    Scenario(
        "video-flaky-chunks",
        "transcode_video",
        _faults(
            {**VIDEO, "video_id": "keynote-flaky"},
            **{
                f"{MAP_STEP}[{FLAKY_CHUNK}]": {"mode": "error", "times": 2},
                f"{MAP_STEP}[{HUNG_CHUNK}]": {"mode": "hang", "times": 1},
            },
        ),
        "SUCCEEDED",
        f"chunk {FLAKY_CHUNK} fails twice; chunk {HUNG_CHUNK} hangs: heartbeat timeout, retried",
        steps=TRANSCODED,
        undone=(),
        map=MapExpect(
            MAP_STEP,
            "SUCCEEDED",
            VIDEO_CHUNKS,
            marked=(
                ItemExpect(FLAKY_CHUNK, "SUCCEEDED", 3, "TransientServiceError"),
                ItemExpect(HUNG_CHUNK, "SUCCEEDED", 2, "States.HeartbeatTimeout"),
            ),
        ),
    ),
    Scenario(
        "video-corrupt-chunks",
        "transcode_video",
        _faults(
            {**VIDEO, "video_id": "keynote-damaged"},
            **{f"{MAP_STEP}[{i}]": {"mode": "permanent"} for i in CORRUPT_CHUNKS},
        ),
        "COMPENSATED",
        "two corrupt chunks, one past the tolerance: every encoded chunk deleted",
        steps=(
            ("split_video", "SUCCEEDED"),
            ("encode_chunks", "FAILED"),
            ("package_video", "CANCELLED"),
        ),
        undone=("encode_chunks",),
        map=MapExpect(
            MAP_STEP,
            "FAILED",
            VIDEO_CHUNKS,
            marked=tuple(ItemExpect(i, "FAILED", 1, "CorruptChunk") for i in CORRUPT_CHUNKS),
            undone=True,
        ),
    ),
]
SCENARIOS += TRANSCODE_SCENARIOS

# onboard_tenant: each environment a provision_environment child workflow, the primary first,
# then the replicas (a Map of children). A replica's faults travel in its item, the child's
# input, as any scenario's do in its input.
TENANT = {
    "tenant_id": "acme",
    "contact": "ops@acme.example",
    "primary": {"env_name": "acme-eu", "region": "eu-west-1", "size": "medium"},
    "replicas": [
        {"env_name": "acme-us", "region": "us-east-1", "size": "small"},
        {"env_name": "acme-ap", "region": "ap-southeast-2", "size": "small"},
    ],
}
TENANT_FAILING = {
    "tenant_id": "globex",
    "contact": "ops@globex.example",
    "primary": {"env_name": "globex-eu", "region": "eu-west-1", "size": "medium"},
    "replicas": [
        _faults({"env_name": "globex-us", "region": "us-east-1"}, verify={"mode": "permanent"})
    ],
}
ONBOARD_SCENARIOS = [
    Scenario(
        "tenant-onboarded",
        "onboard_tenant",
        TENANT,
        "SUCCEEDED",
        "3 child workflows: the primary, then 2 replicas (a Map of children)",
        steps=(("provision_primary", "SUCCEEDED"), ("provision_replicas", "SUCCEEDED")),
        undone=(),
        children=(
            ChildExpect("provision_primary", None, "SUCCEEDED"),
            ChildExpect("provision_replicas", 0, "SUCCEEDED"),
            ChildExpect("provision_replicas", 1, "SUCCEEDED"),
        ),
    ),
    Scenario(
        "tenant-replica-fails",
        "onboard_tenant",
        TENANT_FAILING,
        "COMPENSATED",
        "the replica's child fails verify and undoes itself; the primary's child is torn down",
        steps=(
            ("provision_primary", "SUCCEEDED"),
            ("provision_replicas", "FAILED"),
            ("notify_tenant", "CANCELLED"),
        ),
        children=(
            ChildExpect("provision_primary", None, "COMPENSATED"),
            ChildExpect("provision_replicas", 0, "COMPENSATED"),
        ),
    ),
]
SCENARIOS += ONBOARD_SCENARIOS

# Phase two of `make demo`: the e-mail provider is down for OUTAGE_SECONDS while these orders
# reach notify_customer. The `notifications` pool's circuit breaker (OUTAGE_BREAKER) opens after
# the first failures, holds their tasks (no attempt spent) and probes after its cooldown; once
# the provider is back a probe succeeds, the circuit closes and every order finishes. Without
# the breaker notify_customer would spend its 5 attempts in 7.5 s and each order would be undone.
OUTAGE_SECONDS = 10
OUTAGE_POOL = "notifications"
OUTAGE_BREAKER = {
    "CircuitBreaker": {
        "FailureRatio": 0.5,
        "MinimumAttempts": 3,
        "WindowSeconds": 10,
        "CooldownSeconds": 8,
        "ProbeAttempts": 1,
    }
}
OUTAGE_SCENARIOS = [
    Scenario(
        f"order-email-down-{n}",
        "order_fulfilment",
        {**ORDER, "order_id": f"ord-mail-{n}", "amount": 40.0 + n},
        "SUCCEEDED",
        "the e-mail provider is down: its pool's circuit opens, probes, closes",
        steps=(("notify_customer", "SUCCEEDED"), *NO_REVIEW_NO_REMINDER),
        undone=(),
    )
    for n in (1, 2, 3)
]

# The provision example's `smoke-environment` schedule (rate(1 hour)): the demo sets the
# local stack's schedule clock so that it fires this many seconds after the start.
SCHEDULE = "smoke-environment"
SCHEDULE_FIRES_AFTER_SECONDS = 4
