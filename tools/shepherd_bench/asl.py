"""Amazon States Language state machines priced on the engine (issue 42's targets).

Four small state machines (a Lambda chain with a Pass and a Choice, a Parallel of two Lambda
branches, an inline Map over four items, a loop of ten iterations) run through the real Lambda
handlers on moto under the request meter, as `shepherd_bench.cost` runs the example
workflows: the start through the API handler, every task message through the agent handler,
the supervisor swept on its deployed schedule, the relay consuming the table's stream. Their
Lambda tasks are agents of this module answering at once (the `asl` pool).

**Transitions** are counted as Step Functions bills them: one per state entered, in the
machine and in every Parallel branch and Map iteration (the path items the engine writes,
`ASLPATH#<id>`, one per state entered, children's included; no retry happens here). The cost
per transition is the mix's modelled dollars (`cost`'s worst case: an invocation per message,
core and events, no API ingress) over its transitions, beside Step Functions Standard's list
price per transition (`prices`).

**Per execution, beside Step Functions Standard and Express** (issue 38's target): each
machine's one execution at list price, ours (core and events) beside Standard's transitions
and Express's request and simulated duration at 64 MB. Beside the mix's Lambda chain, two
more machines (`INTEGRATION_MACHINES`, outside the mix): an inline Map of four items each
putting a DynamoDB item (`dynamodb:putItem`, units of Shepherd's integration pool), and a
callback (`lambda:invoke.waitForTaskToken`, answered through the API's `POST /tasks/success`
as soon as the function returned). The put itself is paid alike on either service, so its own
request is not metered (the integration pool's every other request is); Express runs no
`.waitForTaskToken` Task, so the callback has no Express price.

**A long loop**: a Lambda task and a Choice back to it, N iterations. `loop_store_requests`
runs 10,000 on the in-memory engine (the real engine over ports that pass the DynamoDB
adapter's contract tests), counting each iteration's store operations (each one DynamoDB
request) and items written; `loop_profile` runs 300 through the real handlers on moto with
each iteration's requests, WRU and RRU metered apart. Each prints its first and last 100
iterations' averages (the last before the final one, which ends the workflow): flat, because
a transition reads and writes the workflow item and the visit's own items, never the history
(the path and the visits done live in partitions of their own that nothing on the run's path
reads back). On moto the supervisor is not swept in the loop (its sweeps are a fixed cost per
5 s, not per iteration), and the visits, path entries and stream records done are deleted
unmetered as the loop goes: moto copies the whole table, its stream records included, once
per item of every transaction, so a long loop on moto slows by the bench's own doing (10,000
iterations there would take about an hour).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from shepherd.clock import ManualClock
from shepherd.definitions import Definition, parse_definition
from shepherd.engine.agent import AgentContext, AgentRegistry

from shepherd_bench import cost
from shepherd_bench.meter import Meter, Tally
from shepherd_bench.prices import usd
from shepherd_bench.stack import (
    ACCOUNT,
    REGION,
    TABLE,
    AlarmClock,
    HandlerStack,
    LambdaContext,
    handler_stack,
    rest_event,
)

TOKEN_HEADER = "X-Shepherd-Task-Token"  # noqa: S105 - a header's name, not a secret

FN = "arn:aws:lambda:us-east-1:123456789012:function:"
AGENTS = ("BenchAdd", "BenchDouble", "BenchCheck")
LOOP_ITERATIONS = 10_000
WINDOW = 100  # iterations averaged at each end of the loop
METERED_ITERATIONS = 300  # the loop through the handlers on moto, metered (WRU and RRU)
KEEP = 20  # the loop's newest visits and path entries kept as it goes (the rest deleted)

registry = AgentRegistry()


@registry.agent("BenchAdd")
def bench_add(ctx: AgentContext) -> dict[str, Any]:
    """`{"n": n + 1}` (a plain Lambda ARN's result is the payload itself)."""
    value = ctx.input if isinstance(ctx.input, dict) else {}
    return {**value, "n": int(value.get("n", 0)) + 1}


@registry.agent("BenchDouble")
def bench_double(ctx: AgentContext) -> dict[str, Any]:
    value = ctx.input if isinstance(ctx.input, dict) else {}
    return {**value, "n": int(value.get("n", 0)) * 2}


@registry.agent("BenchCheck")
def bench_check(ctx: AgentContext) -> dict[str, Any]:
    return {"ok": True, "id": ctx.input.get("id") if isinstance(ctx.input, dict) else None}


def _task(fn: str, **rest: Any) -> dict[str, Any]:
    return {"Type": "Task", "Resource": f"{FN}{fn}", **rest}


MACHINES: dict[str, tuple[dict[str, Any], Any]] = {
    # A Lambda chain: Pass, three tasks, a Choice between them, Succeed. 6 transitions.
    "bench_asl_chain": (
        {
            "StartAt": "Init",
            "States": {
                "Init": {"Type": "Pass", "Result": {"n": 1}, "Next": "Add"},
                "Add": _task("BenchAdd", Next="Double"),
                "Double": _task("BenchDouble", Next="Big?"),
                "Big?": {
                    "Type": "Choice",
                    "Choices": [{"Variable": "$.n", "NumericGreaterThan": 1, "Next": "Check"}],
                    "Default": "Check",
                },
                "Check": _task("BenchCheck", Next="Done"),
                "Done": {"Type": "Succeed"},
            },
        },
        {"id": "order-1"},
    ),
    # A Parallel of two Lambda branches. 1 + 2 = 3 transitions.
    "bench_asl_parallel": (
        {
            "StartAt": "Both",
            "States": {
                "Both": {
                    "Type": "Parallel",
                    "Branches": [
                        {"StartAt": "A", "States": {"A": _task("BenchAdd", End=True)}},
                        {"StartAt": "B", "States": {"B": _task("BenchCheck", End=True)}},
                    ],
                    "End": True,
                }
            },
        },
        {"n": 1, "id": "order-2"},
    ),
    # An inline Map over four items, each a Lambda task. 1 + 4 = 5 transitions.
    "bench_asl_map": (
        {
            "StartAt": "Each",
            "States": {
                "Each": {
                    "Type": "Map",
                    "ItemsPath": "$.items",
                    "MaxConcurrency": 4,
                    "ItemProcessor": {
                        "ProcessorConfig": {"Mode": "INLINE"},
                        "StartAt": "Check",
                        "States": {"Check": _task("BenchCheck", End=True)},
                    },
                    "End": True,
                }
            },
        },
        {"items": [{"id": f"item-{i}"} for i in range(4)]},
    ),
    # A loop: Pass, then a task and a Choice back to it, ten times. 1 + 2 * 10 + 1 transitions.
    "bench_asl_loop": (
        {
            "StartAt": "Init",
            "States": {
                "Init": {
                    "Type": "Pass",
                    "Parameters": {"n": 0, "times.$": "$.times"},
                    "Next": "Add",
                },
                "Add": _task("BenchAdd", Next="More?"),
                "More?": {
                    "Type": "Choice",
                    "Choices": [
                        {"Variable": "$.n", "NumericLessThanPath": "$.times", "Next": "Add"}
                    ],
                    "Default": "Done",
                },
                "Done": {"Type": "Succeed"},
            },
        },
        {"times": 10},
    ),
}


ORDERS_TABLE = "bench-orders"  # the service-call Map's table (the user's, not Shepherd's)
ASKED: list[str] = []  # the callback machine's task tokens, as its function hands them out


@registry.agent("BenchAsk")
def bench_ask(ctx: AgentContext) -> str:
    """A function that hands its task token to someone who answers later (a person, another
    system): the token is kept for the bench to answer through the API."""
    ASKED.append(str(ctx.input["token"]))
    return "asked"


# Issue 38's machines beside the mix's Lambda chain: priced per execution, outside the mix.
INTEGRATION_MACHINES: dict[str, tuple[dict[str, Any], Any]] = {
    # An inline Map over four items, each a DynamoDB put. 1 + 4 = 5 transitions.
    "bench_asl_service_map": (
        {
            "StartAt": "Each",
            "States": {
                "Each": {
                    "Type": "Map",
                    "ItemsPath": "$.items",
                    "MaxConcurrency": 4,
                    "ItemProcessor": {
                        "ProcessorConfig": {"Mode": "INLINE"},
                        "StartAt": "Put",
                        "States": {
                            "Put": {
                                "Type": "Task",
                                "Resource": "arn:aws:states:::dynamodb:putItem",
                                "Parameters": {
                                    "TableName": ORDERS_TABLE,
                                    "Item": {"pk": {"S.$": "$.id"}},
                                },
                                "ResultPath": None,
                                "End": True,
                            }
                        },
                    },
                    "End": True,
                }
            },
        },
        {"items": [{"id": f"item-{i}"} for i in range(4)]},
    ),
    # A Lambda task that waits for its token, then a Pass. 2 transitions.
    "bench_asl_callback": (
        {
            "StartAt": "Ask",
            "States": {
                "Ask": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                    "Parameters": {
                        "FunctionName": "BenchAsk",
                        "Payload": {"token.$": "$$.Task.Token", "id.$": "$.id"},
                    },
                    "TimeoutSeconds": 3600,
                    "Next": "Done",
                },
                "Done": {"Type": "Pass", "End": True},
            },
        },
        {"id": "order-3"},
    ),
}
# The three machines issue 38 prices per execution: a Lambda chain, a Map with service calls,
# a callback.
PER_EXECUTION = ("bench_asl_chain", "bench_asl_service_map", "bench_asl_callback")
NO_EXPRESS = frozenset({"bench_asl_callback"})  # Express runs no .waitForTaskToken Task


def definitions() -> dict[str, Definition]:
    return {
        name: parse_definition({"Name": name, "Steps": [], "StateMachine": machine}, name)
        for name, (machine, _) in {**MACHINES, **INTEGRATION_MACHINES}.items()
    }


def _stack(meter: Meter, clock: ManualClock) -> Any:
    return handler_stack(meter, clock, definitions=definitions(), agent_modules=(__name__,))


# ------------------------------------------------------------------------- the table, raw


def _partitions(stack: HandlerStack, workflow_id: str) -> Counter[str]:
    """Items per partition of a workflow and its children (their ids start with its id), by
    partition kind (`WF`, `ASLV`, `ASLPATH`, ...): unmetered scans of a small table."""
    kinds: Counter[str] = Counter()
    pages = stack.raw["dynamodb"].get_paginator("scan")
    for page in pages.paginate(TableName=TABLE, ProjectionExpression="pk"):
        for item in page["Items"]:
            kind, _, rest = item["pk"]["S"].partition("#")
            if rest.startswith(workflow_id):
                kinds[kind] += 1
    return kinds


def _forget(stack: HandlerStack, workflow_id: str) -> None:
    """Delete a workflow's items and its children's, unmetered (`HandlerStack.forget`'s
    reason: moto copies the table on every transaction)."""
    pages = stack.raw["dynamodb"].get_paginator("scan")
    for page in pages.paginate(TableName=TABLE, ProjectionExpression="pk, sk"):
        for key in page["Items"]:
            if key["pk"]["S"].partition("#")[2].startswith(workflow_id):
                stack.raw["dynamodb"].delete_item(TableName=TABLE, Key=key)


def _trim_stream() -> None:
    """Drop moto's table stream records so far, unmetered, keeping its sequence numbers: moto
    copies the table (stream records included) once per item of every transaction, so a long
    loop's records would make each transaction slower than the last. Only for the loop, whose
    relay is not measured (nothing reads the stream meanwhile)."""
    from moto.dynamodb.models import dynamodb_backends

    shard = dynamodb_backends[ACCOUNT][REGION].tables[TABLE].stream_shard
    if shard is not None:
        shard.starting_sequence_number += len(shard.items)
        shard.items = []


def _forget_done(stack: HandlerStack, workflow_id: str, keep: int = KEEP) -> None:
    """Delete the loop's visits and path entries but its `keep` newest of each, unmetered: the
    newest are the run's (a visit running, a path entry whose exit is written next)."""
    pages = stack.raw["dynamodb"].get_paginator("query")
    for prefix in ("ASLV#", "ASLPATH#"):
        keys = [
            key
            for page in pages.paginate(
                TableName=TABLE,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": f"{prefix}{workflow_id}"}},
                ProjectionExpression="pk, sk",
                ConsistentRead=True,
            )
            for key in page["Items"]
        ]
        # a visit's sort key ends in its visit number, unpadded: oldest first by that number
        keys.sort(key=lambda k: int(k["sk"]["S"].rsplit("#", 1)[-1]))
        for key in keys[: max(0, len(keys) - keep)]:
            stack.raw["dynamodb"].delete_item(TableName=TABLE, Key=key)


# --------------------------------------------------------------------------- the mix


def run_mix(workflows: int = 4, seed: int = 7) -> dict[str, Any]:
    """Each machine `workflows` times; per machine and for the mix: transitions, requests,
    modelled dollars per million transitions beside Step Functions Standard's."""
    return _mix(_price(MACHINES, workflows, seed))


def run_machines(workflows: int = 4, seed: int = 7) -> dict[str, Any]:
    """The mix (`run_mix`) and, on the same stack after it, issue 38's machines beyond the
    mix's Lambda chain (`INTEGRATION_MACHINES`, each `workflows` times: the same figures as
    the mix's rows, one execution beside Step Functions Standard and Express)."""
    rows = _price({**MACHINES, **INTEGRATION_MACHINES}, workflows, seed)
    return {
        "mix": _mix([r for r in rows if r["machine"] in MACHINES]),
        "per_execution": {"machines": [r for r in rows if r["machine"] in INTEGRATION_MACHINES]},
    }


def _mix(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total_transitions = round(sum(r["transitions_per_workflow"] * r["workflows"] for r in rows))
    total_usd = sum(r["usd_per_million_executions"] / 1e6 * r["workflows"] for r in rows)
    standard = usd("sfn_standard_transition", 1) * 1e6
    ours = total_usd / total_transitions * 1e6
    return {
        "machines": rows,
        "mix": {
            "transitions": total_transitions,
            "usd_per_million_transitions": ours,
            "step_functions_standard_usd_per_million_transitions": standard,
            "ratio_standard_to_ours": standard / ours,
        },
    }


def _price(
    machines: dict[str, tuple[dict[str, Any], Any]], workflows: int, seed: int
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    meter = Meter()
    clock = AlarmClock()
    rows = []
    with _stack(meter, clock) as stack:
        _integrations_unmetered(stack, meter)
        for name, (_, payload) in machines.items():
            scenario = cost.Scenario(name, name, payload, "SUCCEEDED")
            outside = _answer(stack) if name in NO_EXPRESS else None
            with meter.paused():  # the definition snapshot: once per sandbox
                warm, _ = cost.run_workflow(stack, scenario, outside=outside)
                _forget(stack, warm)
                stack.sweep()
            meter.reset()
            before = (stack.api_requests, sum(stack.agent_messages.values()), stack.relay_records)
            transitions = 0
            billed_ms = 0  # Express's duration, billed in 100 ms steps
            statuses: Counter[str] = Counter()
            for _ in range(workflows):
                clock.advance(rng.uniform(0, 60))  # a random phase against the sweeps
                workflow_id, took = cost.run_workflow(stack, scenario, outside=outside)
                billed_ms += -(-took // 100) * 100
                statuses[stack.status(workflow_id)] += 1
                transitions += _partitions(stack, workflow_id)["ASLPATH"]
                _forget(stack, workflow_id)
            if statuses != Counter({"SUCCEEDED": workflows}):
                raise RuntimeError(f"{name}: unexpected outcomes {dict(statuses)}")
            run = cost.ScenarioRun(scenario, workflows, 0, meter.total())
            run.api_requests = stack.api_requests - before[0]
            run.agent_messages = sum(stack.agent_messages.values()) - before[1]
            run.relay_records = stack.relay_records - before[2]
            dollars = cost.dollars(run, full_batches=False)
            usd_core_events = sum(dollars[k] for k in (*cost.CORE, *cost.EVENTS)) * workflows
            express = usd("sfn_express_request", workflows) + usd(
                "sfn_express_gb_s", billed_ms / 1000 * cost.EXPRESS_MEMORY_GB
            )
            rows.append(
                {
                    "machine": name,
                    "workflows": workflows,
                    "transitions_per_workflow": transitions / workflows,
                    "requests_per_workflow": {
                        k: v / workflows for k, v in sorted(run.tally.requests.items())
                    },
                    "wru_per_transition": run.tally.total_wru / transitions,
                    "rru_per_transition": run.tally.total_rru / transitions,
                    "usd_per_million_transitions": usd_core_events / transitions * 1e6,
                    # One execution, ours beside Step Functions' (Standard: its transitions;
                    # Express: a request and its simulated duration at 64 MB; None where
                    # Express cannot run the machine).
                    "usd_per_million_executions": usd_core_events / workflows * 1e6,
                    "standard_usd_per_million_executions": usd(
                        "sfn_standard_transition", transitions / workflows
                    )
                    * 1e6,
                    "express_usd_per_million_executions": (
                        None if name in NO_EXPRESS else express / workflows * 1e6
                    ),
                }
            )
    return rows


def _integrations_unmetered(stack: HandlerStack, meter: Meter) -> None:
    """The service-call Map's table, and its puts made unmetered: the put is the user's own
    request, paid alike on Step Functions (the integration pool's other requests, its claim,
    its result, its messages, are metered as any step's)."""
    stack.raw["dynamodb"].create_table(
        TableName=ORDERS_TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    asl_engine = stack.engine.engine.scheduler.asl
    call = asl_engine.integrations.call
    assert call is not None, "the handlers' engine has no service client"

    def unmetered(resource: str, parameters: Any, key: str | None) -> Any:
        with meter.paused():
            return call(resource, parameters, key)

    asl_engine.integrations = dataclasses.replace(asl_engine.integrations, call=unmetered)


def _answer(stack: HandlerStack) -> Callable[[], bool]:
    """The callback's answer: each token handed out is answered through the callbacks
    handler's `POST /tasks/success` (metered, and priced as an API request is)."""

    def outside() -> bool:
        if not ASKED:
            return False
        from shepherd_handlers import callbacks

        token = ASKED.pop(0)
        event = rest_event("POST", "/tasks/success", "/tasks/success", {"output": {"ok": True}})
        event["headers"][TOKEN_HEADER] = token
        event["multiValueHeaders"][TOKEN_HEADER] = [token]
        stack.api_requests += 1
        stack.api_invocations += 1
        with stack.meter.component("api"):
            reply = callbacks.handler(event, LambdaContext())
        if int(reply["statusCode"]) != 200:
            raise RuntimeError(f"the callback's answer failed: {reply}")
        return True

    return outside


# ----------------------------------------------------------------------------- the loop


def _units(tally: Tally) -> dict[str, float]:
    return {
        "requests": float(sum(tally.requests.values())),
        "dynamodb_requests": float(
            sum(v for k, v in tally.requests.items() if k.startswith("dynamodb."))
        ),
        "wru": float(tally.total_wru),
        "rru": float(tally.total_rru),
        "sqs_requests": float(sum(tally.sqs.values())),
    }


def loop_profile(iterations: int = LOOP_ITERATIONS, window: int = WINDOW) -> dict[str, Any]:
    """The loop machine run for `iterations`: the requests and units of each of the first
    `window` iterations and of the last `window` before the final one (which ends the
    workflow: shown apart), metered apart; the iterations between run unmetered (the meter's
    own reads of each written item are most of the bench's time)."""
    if iterations < 2 * window + 1:
        raise ValueError(f"a loop of {iterations} has no two windows of {window} and an end")
    meter = Meter()
    clock = AlarmClock()
    first: list[dict[str, float]] = []
    last: list[dict[str, float]] = []
    final: dict[str, float] = {}
    done = 0
    with _stack(meter, clock) as stack:
        workflow_id = stack.start("bench_asl_loop", {"times": iterations})
        while held := stack.receive():
            for message in held:
                metered = done < window or done >= iterations - window - 1
                meter.reset()
                clock.advance(0.05)
                if metered:
                    stack.deliver(message.pool, [message.message])
                else:
                    with meter.paused():
                        stack.deliver(message.pool, [message.message])
                done += 1
                if done <= window:
                    first.append(_units(meter.total()))
                elif done == iterations:
                    final = _units(meter.total())
                elif metered:
                    last.append(_units(meter.total()))
                if done % KEEP == 0:  # the visits and path done: nothing reads them again
                    _forget_done(stack, workflow_id)
                    _trim_stream()
        status = stack.status(workflow_id)
    if status != "SUCCEEDED" or done != iterations:
        raise RuntimeError(f"the loop ended {status} after {done} iterations")

    def average(rows: list[dict[str, float]]) -> dict[str, float]:
        return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}

    head, tail = average(first), average(last)
    return {
        "iterations": iterations,
        "window": window,
        "first": head,
        "last": tail,
        "final_iteration": final,
        "flat": all(abs(tail[k] - head[k]) <= 1e-9 for k in head),
    }


# The store port's operations, each one DynamoDB request (shepherd.adapters.dynamodb).
STORE_REQUESTS = {
    "create": "TransactWriteItems",
    "put_new": "PutItem",
    "transact": "TransactWriteItems",
    "update": "UpdateItem",
    "load": "Query",
    "get": "GetItem",
    "get_many": "BatchGetItem",
    "query_due": "Query",
    "query_range": "Query",
    "query_after": "Query",
    "count_range": "Query",
}


def loop_store_requests(iterations: int = LOOP_ITERATIONS, window: int = WINDOW) -> dict[str, Any]:
    """The same loop on the in-memory engine (`shepherd.testing.MemoryEngine`, the real engine
    over ports that pass the DynamoDB adapter's contract tests), for as many iterations as the
    target asks (10,000; moto's whole-table copy on every transaction makes that an hour
    through the handlers): the store operations, each a DynamoDB request, and the items each
    writes, of every iteration; the first and last `window` (before the final one) averaged."""
    from shepherd.testing import MemoryEngine

    engine = MemoryEngine(
        {"bench_asl_loop": definitions()["bench_asl_loop"]}, agents=registry, owner="bench"
    )
    calls: Counter[str] = Counter()
    store = engine.store
    for name in STORE_REQUESTS:
        original = getattr(store, name)

        def counted(*args: Any, _name: str = name, _fn: Any = original, **kwargs: Any) -> Any:
            calls[STORE_REQUESTS[_name]] += 1
            if _name == "transact":
                calls["items written"] += len(args[0])
            elif _name in ("update", "put_new"):
                calls["items written"] += 1
            return _fn(*args, **kwargs)

        setattr(store, name, counted)
    workflow_id = engine.start("bench_asl_loop", {"times": iterations})
    rows: list[dict[str, float]] = []
    while True:
        calls.clear()
        if not engine.deliver(rounds=1):
            break
        rows.append({k: float(v) for k, v in calls.items()})
    status = engine.outcome(workflow_id).status.value
    if status != "SUCCEEDED" or len(rows) != iterations:
        raise RuntimeError(f"the loop ended {status} after {len(rows)} iterations")
    keys = sorted({k for r in rows for k in r})

    def average(part: list[dict[str, float]]) -> dict[str, float]:
        return {k: sum(r.get(k, 0.0) for r in part) / len(part) for k in keys}

    head, tail = average(rows[:window]), average(rows[-window - 1 : -1])
    return {
        "iterations": iterations,
        "window": window,
        "first": head,
        "last": tail,
        "flat": head == tail,
    }


def describe(results: dict[str, Any]) -> list[str]:
    lines = []
    for row in results["mix"]["machines"]:
        lines.append(
            f"ASL {row['machine']}: {row['transitions_per_workflow']:g} transitions, "
            f"${row['usd_per_million_transitions']:.2f}/M transitions, "
            f"{row['wru_per_transition']:.2f} WRU and {row['rru_per_transition']:.2f} RRU each"
        )
    for row in per_execution(results):
        express = row["express_usd_per_million_executions"]
        lines.append(
            f"ASL per execution, {row['machine']}: ${row['usd_per_million_executions']:.2f}/M "
            f"executions; Step Functions Standard "
            f"${row['standard_usd_per_million_executions']:.2f}/M, Express "
            + ("n/a (no .waitForTaskToken)" if express is None else f"${express:.2f}/M")
            + f" ({row['standard_usd_per_million_executions'] / row['usd_per_million_executions']:.1f}x "
            "below Standard)"
        )
    mix = results["mix"]["mix"]
    lines.append(
        f"ASL mix: ${mix['usd_per_million_transitions']:.2f}/M transitions; Step Functions "
        f"Standard ${mix['step_functions_standard_usd_per_million_transitions']:.2f}/M "
        f"({mix['ratio_standard_to_ours']:.1f}x)"
    )
    loop = results["loop"]
    f, la = loop["first"], loop["last"]
    lines.append(
        f"ASL loop of {loop['iterations']:,} in memory: requests per iteration, first "
        f"{loop['window']} vs last {loop['window']} before the end: "
        + ", ".join(f"{k} {f[k]:g} vs {la[k]:g}" for k in f)
        + f" ({'flat' if loop['flat'] else 'NOT flat'})"
    )
    m = results["loop_metered"]
    f, la = m["first"], m["last"]
    lines.append(
        f"ASL loop of {m['iterations']:,} through the handlers on moto: per iteration, first "
        f"{m['window']} vs last {m['window']} before the end: requests {f['requests']:.2f} vs "
        f"{la['requests']:.2f}, WRU {f['wru']:.2f} vs {la['wru']:.2f}, RRU {f['rru']:.2f} vs "
        f"{la['rru']:.2f} ({'flat' if m['flat'] else 'NOT flat'})"
    )
    return lines


def per_execution(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 38's three machines, in order, from a run's results: the mix's Lambda chain and
    the integration machines (an older run without them: only what it has)."""
    rows = [*results["mix"]["machines"], *results.get("per_execution", {}).get("machines", [])]
    by_name = {r["machine"]: r for r in rows}
    return [by_name[name] for name in PER_EXECUTION if name in by_name]


def run_asl(
    iterations: int = LOOP_ITERATIONS, metered: int = METERED_ITERATIONS, workflows: int = 4
) -> dict[str, Any]:
    return {
        **run_machines(workflows),
        "loop": loop_store_requests(iterations),
        "loop_metered": loop_profile(metered),
    }
