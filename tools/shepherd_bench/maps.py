"""Map items priced on the engine (issue 24), beside a plain step and Step Functions' maps.

A workflow of one map step over N items (`bench_map_<C>`, MaxConcurrency C, its definition
given to the stack beside the repository's) runs through the real Lambda handlers on moto
under the request meter (`shepherd_bench.stack.HandlerStack`), as `shepherd_bench.cost`
measures a plain step: the start through the API handler; every task message through the
agent handler; the supervisor swept on its deployed schedule; the relay consuming the
table's stream. Item agents return a small output at once; the simulated clock moves in
rounds: every message visible at a round's start is delivered `cost.HOP_MS` later, in
invocations of up to the pool's batch size (10, as the event source hands them), and the
round's items take `ITEM_MS` (the demo agents' mean latency) before the next round. Priced
as `cost`'s worst case (one message per invocation: an invocation, a receive and a delete per
message); the invocations made as delivered are shown too.

What each request is for is known by where it was made (meter components): `open`, the map
step's own message (its claim, the item pages, the counters and first window); `end`, the
verdict and the advance that ends the step with the item outputs (one paged read of the
item partitions, the output object) and the workflow; `api`, the start; per item: the item
messages' invocations (`agent`: claim, result, the accounting write with its refill, the
refill's message), the first window's messages (sent by the opener), and the supervisor's
looks at the running map (`supervisor`, its idle index queries excepted as for a plain
step). Fixed per map: opening, end, start; shown apart and amortized over the items.

S3: the bench's one process reads each items page once (an items page of 1,000 small items is
an object: over the 8 KB inline threshold); on AWS each of the C sandboxes a window keeps busy
reads it once, so the page reads are priced C times (at most N) what the bench made.

Bounded reads (`bounded_requests`): on maps of 100 and 10,000 items at MaxConcurrency 10,
one item's claim, result and accounting, a supervisor look at the running map,
`GET /workflows/{id}` and a page of `GET .../items`, each metered apart (requests, read and
write units) and its keys counted on the store port (`shepherd_bench.mapreads.KeyCounter`):
the same at both sizes, bounded by the window and the steps, not the items.
"""

from __future__ import annotations

import contextlib
import functools
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from shepherd.clock import ManualClock
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry
from shepherd.keys import MAP_ITEM_PAGE
from shepherd.model import TaskMessage
from shepherd.topology import DEFAULT_BATCH_SIZE

from shepherd_bench import cost
from shepherd_bench.mapreads import KeyCounter, instrument
from shepherd_bench.meter import Meter, Tally
from shepherd_bench.prices import usd
from shepherd_bench.stack import HandlerStack, Held, handler_stack

REGION = "us-east-1"
POOL = "bench-items"
AGENT = "bench_item"
STEP = "each"
ITEM_MS = 70  # an item's agent: the demo agents' mean latency (20 to 120 ms)
SIM_LIMIT_MS = 30 * 60_000
CONCURRENCIES = (10, 100, 1_000)

# The items' agent (this module is named to the stack as an agent module).
registry = AgentRegistry()


@registry.agent(AGENT)
def bench_item(ctx: AgentContext) -> dict[str, Any]:
    """A small output, as a demo step's: the item's id, marked done."""
    return {"id": ctx.item["id"], "done": True}


def definition_document(concurrency: int) -> dict[str, Any]:
    """A workflow of one map step over `$.input.items`, its step as the order's steps are
    (timeouts, heartbeat, retry, dispatch grace)."""
    return {
        "Name": f"bench_map_{concurrency}",
        "Comment": "shepherd_bench.maps: one map step over the input's items",
        "DispatchTimeoutSeconds": 10,
        "Steps": [
            {
                "Name": STEP,
                "Agent": AGENT,
                "Pool": POOL,
                "TimeoutSeconds": 8,
                "HeartbeatSeconds": 3,
                "Retry": {"MaxAttempts": 3, "IntervalSeconds": 0.5, "BackoffRate": 2},
                "Map": {"ItemsPath": "$.input.items", "MaxConcurrency": concurrency},
            }
        ],
    }


def definitions(concurrencies: tuple[int, ...] = CONCURRENCIES) -> dict[str, Definition]:
    return {
        f"bench_map_{c}": parse_definition(definition_document(c), f"bench_map_{c}")
        for c in concurrencies
    }


def make_items(count: int) -> list[dict[str, str]]:
    """Small items (an id each, about 20 bytes), as a map over keys or ids has."""
    return [{"id": f"item-{i:06d}"} for i in range(count)]


# ------------------------------------------------------------------------------- running


def _phase(meter: Meter, component: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def tallied(*args: Any, **kwargs: Any) -> Any:
        with meter.component(component):
            return fn(*args, **kwargs)

    return tallied


def _map_end_tallied(stack: HandlerStack) -> None:
    """The map's end (its verdict, the advance that ends its step and the workflow) is
    tallied as `end`, whichever process makes it."""
    scheduler = stack.engine.scheduler
    scheduler.advance = _phase(stack.meter, "end", scheduler.advance)  # type: ignore[method-assign]
    maps = scheduler.maps
    maps.decide = _phase(stack.meter, "end", maps.decide)  # type: ignore[method-assign]
    maps.finish = _phase(stack.meter, "end", maps.finish)  # type: ignore[method-assign]


def _is_item(held: Held) -> bool:
    return TaskMessage.from_body(held.message["Body"]).item is not None


def run_map(
    stack: HandlerStack, counter: KeyCounter, concurrency: int, items: int
) -> tuple[str, int]:
    """Start one map workflow and drive it to its end in rounds (see the module's doc);
    midway through, read it as a console would (GET the workflow and a page of its items:
    tallied as `reads`, not priced). The workflow's id and its simulated duration."""
    clock = stack.clock
    started = clock.now_ms()
    workflow_id = stack.start(f"bench_map_{concurrency}", {"items": make_items(items)})
    timeline = cost.Timeline(stack, cost.next_sweep(clock.now_ms()))
    held: list[Held] = []
    read_at = items // 2  # item messages delivered when the console reads it
    delivered = 0
    while clock.now_ms() - started < SIM_LIMIT_MS:
        held += stack.receive()
        if not held and stack.status(workflow_id) in cost.TERMINAL:
            stack.relay()
            _console_reads(stack, counter, workflow_id)
            return workflow_id, clock.now_ms() - started
        first = min((h.visible_at for h in held), default=None)
        deliver_at = None if first is None else max(clock.now_ms(), first) + cost.HOP_MS
        if deliver_at is None or timeline.sweep_at <= deliver_at:
            timeline.sweep_until(timeline.sweep_at)
            continue
        clock.set(deliver_at)
        due = [h for h in held if h.visible_at + cost.HOP_MS <= deliver_at]
        held = [h for h in held if h.visible_at + cost.HOP_MS > deliver_at]
        for h in [h for h in due if not _is_item(h)]:  # the map step's message: opening
            stack.deliver(h.pool, [h.message], component="open")
        by_pool: dict[str, list[Held]] = {}
        for h in due:
            if _is_item(h):
                by_pool.setdefault(h.pool, []).append(h)
        for pool, batch in by_pool.items():
            for start in range(0, len(batch), DEFAULT_BATCH_SIZE):
                chunk = batch[start : start + DEFAULT_BATCH_SIZE]
                stack.deliver(pool, [h.message for h in chunk])
                delivered += len(chunk)
        if read_at and delivered >= read_at:
            read_at = 0
            _console_reads(stack, counter, workflow_id)
        timeline.sweep_until(clock.now_ms() + ITEM_MS)  # the round's items take their time
    raise RuntimeError(f"map workflow {workflow_id} did not finish")


def _console_reads(stack: HandlerStack, counter: KeyCounter, workflow_id: str) -> None:
    """GET /workflows/{id} and the first page of its map's items, keys counted by kind and
    requests tallied as `view` and `items` (not priced)."""
    with counter.during("view"):
        stack.read(
            f"/workflows/{workflow_id}",
            "/workflows/{workflow_id}",
            {"workflow_id": workflow_id},
            component="view",
        )
    with counter.during("items"):
        stack.read(
            f"/workflows/{workflow_id}/steps/{STEP}/items",
            "/workflows/{workflow_id}/steps/{step}/items",
            {"workflow_id": workflow_id, "step": STEP},
            {"limit": "100"},
            component="items",
        )


def _partitions(workflow_id: str, items: int) -> list[str]:
    from shepherd.engine.maps import page_pk

    return [page_pk(workflow_id, STEP, p) for p in range(-(-items // MAP_ITEM_PAGE))]


@contextlib.contextmanager
def map_stack(meter: Meter, clock: ManualClock) -> Iterator[tuple[HandlerStack, KeyCounter]]:
    """The handlers on moto with the bench's map workflows and their agent; the engine's
    store counted by `KeyCounter`, the map's end tallied as `end`."""
    from shepherd.engine.listing import Position
    from shepherd_handlers import pagination

    with handler_stack(
        meter, clock, definitions=definitions(), agent_modules=("shepherd_bench.maps",)
    ) as stack:
        counter = KeyCounter(stack.engine.ports.store)
        stack.engine.ports.store = counter
        instrument(stack.engine.engine, counter)
        _map_end_tallied(stack)
        with meter.paused():  # once per sandbox: the API's secret for `next_token`
            pagination.paginator(counter).sign("bench", Position(0, "warm"), ())
        yield stack, counter


def measure(
    stack: HandlerStack, counter: KeyCounter, items: int, concurrency: int, seed: int = 7
) -> dict[str, Any]:
    """One clean map of `items` items at `concurrency`: its requests and units, per item
    and per map."""
    meter = stack.meter
    rng = random.Random(seed)
    with meter.paused():  # once per sandbox, not per map: the definition's snapshot
        warm, _ = run_map(stack, counter, concurrency, 3)
        stack.forget(warm, _partitions(warm, 3))
        stack.sweep()
    meter.reset()
    counter.reset()
    before = (stack.agent_invocations, stack.relay_records, stack.sweeps, stack.payload_bytes())
    before_messages = dict(stack.agent_messages)
    stack.clock.advance(rng.uniform(0, 60))  # a random phase against the sweep schedule
    workflow_id, took = run_map(stack, counter, concurrency, items)
    state = stack.items(workflow_id)
    head = next(i for i in state if i.get("sk") == "#WF")
    if head["status"] != "SUCCEEDED":
        raise RuntimeError(f"map of {items} at {concurrency}: {head['status']}")
    stored = stack.payload_bytes() - before[3]
    invocations = stack.agent_invocations - before[0]
    messages = stack.agent_messages[POOL] - before_messages.get(POOL, 0)
    relay_records = stack.relay_records - before[1]
    sweeps = stack.sweeps - before[2]
    stack.forget(workflow_id, _partitions(workflow_id, items))
    return summarize(
        meter,
        counter,
        items=items,
        concurrency=concurrency,
        item_messages=messages - 1,  # the map step's own message opened it
        invocations=invocations,
        relay_records=relay_records,
        stored_bytes=stored,
        sweeps=sweeps,
        duration_ms=took,
    )


# ------------------------------------------------------------------------- bounded reads

BOUNDED = (100, 10_000)
BOUNDED_CONCURRENCY = 10  # below both counts: the window stays full as items end
# What one item's message, a look and the console's reads are made of (meter components).
OPERATIONS = ("claim", "result", "accounting", "look", "view", "items")


@contextlib.contextmanager
def _tallied_as(meter: Meter, owner: Any, name: str, component: str) -> Iterator[None]:
    """`owner.name`'s requests tallied as `component` here (the innermost component wins)."""
    saved = owner.__dict__.get(name)
    setattr(owner, name, _phase(meter, component, getattr(owner, name)))
    try:
        yield
    finally:
        if saved is None:
            delattr(owner, name)
        else:
            setattr(owner, name, saved)


def bounded_requests(
    stack: HandlerStack, counter: KeyCounter, items: int, concurrency: int = BOUNDED_CONCURRENCY
) -> dict[str, Any]:
    """What one item's claim, result and accounting, one supervisor look at the running map
    and the console's two reads cost, on a map of `items` items: requests, read and write
    units, as the meter counts them on moto. The map is opened (its first window sent), one
    item runs, the supervisor sweeps until it looks at the map (the window's other messages
    are held: their dispatch grace ends), then GET /workflows/{id} and a page of 100 items.
    The map is left unfinished and forgotten."""
    meter, clock = stack.meter, stack.clock
    scheduler, supervisor = stack.engine.scheduler, stack.engine.engine.supervisor
    meter.reset()
    counter.reset()
    workflow_id = stack.start(f"bench_map_{concurrency}", {"items": make_items(items)})
    for held in stack.receive():  # the map step's own message: the opening
        stack.deliver(held.pool, [held.message], component="open")
    window = stack.receive()
    if len(window) != min(items, concurrency):
        raise RuntimeError(f"map of {items}: {len(window)} messages in its first window")
    with (
        _tallied_as(meter, scheduler, "load_item", "claim"),
        _tallied_as(meter, scheduler, "record_result", "result"),
        _tallied_as(meter, scheduler, "after_item", "accounting"),
    ):
        stack.deliver(window[0].pool, [window[0].message], component="item")
    timeline = cost.Timeline(stack, cost.next_sweep(clock.now_ms()))
    started = clock.now_ms()
    with _tallied_as(meter, supervisor, "look", "look"):
        while not counter.operations["look"]:
            if clock.now_ms() - started > SIM_LIMIT_MS:
                raise RuntimeError(f"map of {items}: the supervisor never looked at it")
            timeline.sweep_until(timeline.sweep_at)
    _console_reads(stack, counter, workflow_id)
    for held in (*window[1:], *stack.receive()):  # unmetered: the map is not run on
        stack.raw["sqs"].delete_message(
            QueueUrl=stack.queue_urls[held.pool], ReceiptHandle=held.message["ReceiptHandle"]
        )
    stack.forget(workflow_id, _partitions(workflow_id, items))

    looks = counter.operations["look"]

    def cost_of(component: str) -> dict[str, Any]:
        # A sweep looks ahead, so the one that first looks at the map may look again at its
        # next deadline before the next sweep: a look's cost is per look.
        per = looks if component == "look" else 1
        tally = meter.tally(component)
        return {
            "requests": sum(tally.requests.values()) / per,
            "rru": tally.total_rru / per,
            "wru": tally.total_wru / per,
            "by_request": {k: v / per for k, v in sorted(tally.requests.items())},
        }

    return {
        "items": items,
        "max_concurrency": concurrency,
        "looks": looks,
        "operations": {k: cost_of(k) for k in OPERATIONS},
        "max_keys_read": counter.most_per_operation(),
    }


# ------------------------------------------------------------------------------- pricing

PER_ITEM = ("agent", "supervisor")  # items' invocations, and the looks at the running map
FIXED = ("api", "open", "end")  # the start, the opening, the end


def _sends(tally: Tally) -> int:
    return tally.sqs["SendMessageBatch"] + tally.sqs["SendMessage"]


def _rru(tally: Tally) -> float:
    return tally.total_rru - sum(v for k, v in tally.rru.items() if k in cost.FIXED_LABELS)


def summarize(
    meter: Meter,
    counter: KeyCounter,
    *,
    items: int,
    concurrency: int,
    item_messages: int,
    invocations: int,
    relay_records: int,
    stored_bytes: int,
    sweeps: int,
    duration_ms: int,
) -> dict[str, Any]:
    per_item, fixed, opening = meter.total(PER_ITEM), meter.total(FIXED), meter.tally("open")
    page_gets = meter.tally("agent").requests["s3.GetObject"]
    sandboxes = min(concurrency, items)
    variable = {
        "dynamodb_wru_table": sum(per_item.wru.values()) / items,
        "dynamodb_wru_index": sum(per_item.gsi_wru.values()) / items,
        "dynamodb_rru": _rru(per_item) / items,
        # the item messages: the first window's (sent by the opener) and every refill's
        "sqs_send": (_sends(per_item) + _sends(opening)) / items,
        "sqs_event_source": 2 * item_messages / items,  # a receive and a delete each
        "lambda_agent": item_messages / items,
        "s3_put": per_item.requests["s3.PutObject"] / items,
        # each of the window's sandboxes reads the items pages the bench's process read once
        "s3_get": (per_item.requests["s3.GetObject"] + (sandboxes - 1) * page_gets) / items,
        "s3_gb_month": 0.0,
    }
    fixed_units = {
        "dynamodb_wru_table": float(sum(fixed.wru.values())),
        "dynamodb_wru_index": float(sum(fixed.gsi_wru.values())),
        "dynamodb_rru": _rru(fixed),
        "sqs_send": float(_sends(fixed) - _sends(opening)),  # the map step's message
        "sqs_event_source": 2.0,  # the map step's message: one invocation
        "lambda_agent": 1.0,
        "s3_put": float(fixed.requests["s3.PutObject"]),
        "s3_get": float(fixed.requests["s3.GetObject"]),
        "s3_gb_month": stored_bytes / 2**30 * cost.PAYLOAD_STORED_MONTHS,
    }
    total = {k: variable[k] + fixed_units[k] / items for k in variable}
    relay = meter.tally("relay")
    fixed_events = {
        "eventbridge_events_out": float(sum(relay.events.values())),
        "lambda_relay": float(relay_records),  # worst: one invocation per record
        "apigw_requests": 1.0,
        "lambda_api": 1.0,
    }
    plain_dollars = _dollars(variable)
    fixed_dollars = _dollars(fixed_units)
    row: dict[str, Any] = {
        "items": items,
        "max_concurrency": concurrency,
        "units_per_item": total,
        "units_per_item_variable": variable,
        "fixed_units_per_map": fixed_units,
        "fixed_events_and_ingress_per_map": fixed_events,
        "usd_per_million_items": 1e6 * (plain_dollars + fixed_dollars / items),
        "usd_per_million_items_variable": 1e6 * plain_dollars,
        "usd_per_million_items_by_kind": {
            k: 1e6 * usd(cost.PRICE_OF[k], v) for k, v in total.items()
        },
        "fixed_usd_per_map": fixed_dollars,
        "per_item_by_request": {
            "wru": _per_item_labels(per_item.wru, items),
            "rru": _per_item_labels(per_item.rru, items),
            "requests": _per_item_labels(per_item.requests, items),
        },
        "fixed_by_request": {
            "wru": _per_item_labels(fixed.wru, 1),
            "rru": _per_item_labels(fixed.rru, 1),
            "requests": _per_item_labels(fixed.requests, 1),
        },
        "delivery": {
            "item_messages": item_messages,
            "agent_invocations_as_delivered": invocations,
            "batch_size": DEFAULT_BATCH_SIZE,
            "priced_as": "one message per invocation (worst case)",
        },
        "sweeps": sweeps,
        "looks": counter.operations["look"],
        "simulated_duration_ms": duration_ms,
        "max_keys_read": counter.most_per_operation(),
        "max_keys_per_request": counter.most_per_request(),
        # the map's requests (start, items, looks, opening, end), as the key always held
        "requests": dict(sorted(meter.total((*PER_ITEM, *FIXED)).requests.items())),
        "requests_by_component": {
            k: v.as_dict()["requests"] for k, v in sorted(meter.tallies.items())
        },
    }
    return row


_WINDOW_NAME = re.compile(r"\bw_\d+")


def _per_item_labels(values: Any, items: int) -> dict[str, float]:
    """Per item, by label (a window entry's name, `w_<index>`, as `w_i`)."""
    out: Counter[str] = Counter()
    for label, value in values.items():
        if label not in cost.FIXED_LABELS:  # idle sweeps' index queries, as for a plain step
            out[_WINDOW_NAME.sub("w_i", label)] += value
    return {k: v / items for k, v in sorted(out.items()) if v}


def _dollars(units: dict[str, float]) -> float:
    return sum(usd(cost.PRICE_OF[k], v) for k, v in units.items() if k in cost.CORE)


def step_functions_per_million_items() -> dict[str, float]:
    """Step Functions' price of the same item: an inline `Map` (Standard) enters one Task
    state per item (one state transition), a Distributed Map runs one child execution per
    item (Standard: the child's Task transition plus its start, counted as a transition of
    the map run; Express children: one request and at least 100 ms at 64 MB), each Task a
    Lambda invocation; as `shepherd_bench.cost` prices a step."""
    lambda_task = usd("lambda_request", 1)
    express_child = usd("sfn_express_request", 1) + usd("sfn_express_gb_s", 0.1 * 64 / 1024)
    return {
        "inline_map_standard": 1e6 * (usd("sfn_standard_transition", 1) + lambda_task),
        "distributed_map_standard_children": 1e6
        * (usd("sfn_standard_transition", 2) + lambda_task),
        "distributed_map_express_children": 1e6
        * (usd("sfn_standard_transition", 1) + express_child + lambda_task),
    }


ROWS = ((100, 10), (100, 100), (1_000, 10), (1_000, 100), (1_000, 1_000))


def run_maps(
    plain_step_usd_per_million: float | None,
    rows: tuple[tuple[int, int], ...] = ROWS,
    bounded: tuple[int, ...] = BOUNDED,
) -> dict[str, Any]:
    """The `maps` section of benchmarks.json: each row's cost per item (and per map), the
    plain step it is compared with (`cost`'s clean order, core, worst case), Step Functions,
    and what a claim, a result, a look and the console's reads cost at growing item counts
    (requests and units on moto; the keys they read)."""
    meter = Meter()
    clock = ManualClock()
    with map_stack(meter, clock) as (stack, counter):
        measured = [measure(stack, counter, n, c) for n, c in rows]
        reads = [bounded_requests(stack, counter, n) for n in bounded]
    out: dict[str, Any] = {
        "rows": measured,
        "step_functions": step_functions_per_million_items(),
        "item_ms": ITEM_MS,
        "hop_ms": cost.HOP_MS,
        "bounded_reads": reads,
    }
    if plain_step_usd_per_million is not None:
        out["plain_step_core_usd_per_million_steps"] = plain_step_usd_per_million
        for row in measured:
            row["ratio_to_plain_step"] = row["usd_per_million_items"] / plain_step_usd_per_million
            row["ratio_variable_to_plain_step"] = (
                row["usd_per_million_items_variable"] / plain_step_usd_per_million
            )
    return out


def main() -> None:
    import json
    import os
    from pathlib import Path

    for key, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(key, value)

    root = Path(__file__).resolve().parents[2]
    path = root / "docs" / "benchmarks.json"
    results = json.loads(path.read_text())
    clean = next(s for s in results["cost"]["scenarios"] if s["scenario"] == "order clean")
    plain = clean["worst"]["usd_per_million_steps"]["core"]
    results["maps"] = run_maps(plain)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    for line in describe(results["maps"]):
        print(line)


def describe(maps: dict[str, Any]) -> list[str]:
    """One line per row and per bounded-read count (what `make bench` logs)."""
    lines = []
    for row in maps["rows"]:
        units = row["units_per_item"]
        ratio = row.get("ratio_to_plain_step")
        lines.append(
            f"map of {row['items']:,} items, MaxConcurrency {row['max_concurrency']:,}: "
            f"${row['usd_per_million_items']:.2f}/M items"
            f"{'' if ratio is None else f' ({ratio:.2f}x a plain step)'}; items alone "
            f"${row['usd_per_million_items_variable']:.2f}/M, ${row['fixed_usd_per_map']:.6f} "
            f"a map; {units['dynamodb_wru_table']:.2f} WRU, {units['dynamodb_rru']:.2f} RRU an "
            f"item; most keys read {row['max_keys_read']}"
        )
    for case in maps.get("bounded_reads", []):
        ops = case["operations"]
        lines.append(
            f"bounded reads, {case['items']:,} items at MaxConcurrency "
            f"{case['max_concurrency']:,}: requests (RRU) "
            + ", ".join(f"{k} {v['requests']} ({v['rru']:g})" for k, v in ops.items())
            + f"; most keys read {case['max_keys_read']}"
        )
    for name, value in maps["step_functions"].items():
        lines.append(f"Step Functions {name}: ${value:.2f}/M items")
    return lines


if __name__ == "__main__":
    main()
