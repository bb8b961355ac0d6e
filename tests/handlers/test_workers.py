"""Agent batches, StartWorkflow events, the supervisor, callbacks and events out, via the handlers."""

from __future__ import annotations

import json
import time
from typing import Any

import fastjsonschema
import pytest
from aws_stack import LambdaContext, Stack, sqs_event
from shepherd_cli import lambda_kit
from support import ORDER, ROOT


def test_agent_batch_with_good_poison_and_duplicate_messages(stack: Stack) -> None:
    from shepherd_handlers import agent

    _status, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    (good,) = stack.receive("inventory")
    batch = sqs_event(
        [
            (good["MessageId"], good["Body"]),
            ("poison-1", "this is not a task"),
            ("dup-1", good["Body"]),
        ],
        "arn:aws:sqs:us-east-1:123456789012:shepherd-inventory",
    )
    reply = agent.handler(batch, LambdaContext())
    assert reply == {"batchItemFailures": [{"itemIdentifier": "poison-1"}]}
    view = stack.api("GET", accepted["location"])[2]
    reserve = view["steps"][0]
    (only,) = reserve["attempts"]
    assert reserve["status"] == "SUCCEEDED"
    assert {k: only[k] for k in ("attempt", "outcome", "error", "by")} == {
        "attempt": 1,
        "outcome": "ok",
        "error": None,
        "by": None,
    }
    assert only["started_at"] <= only["at"]


def test_a_task_whose_agent_the_pool_lacks_fails_logged_and_counted(
    stack: Stack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from shepherd import AgentRegistry
    from shepherd_handlers import agent
    from shepherd_handlers.runtime import engine

    # Given a pool whose deployed code registers no agent at all
    monkeypatch.setattr(engine().agent_runtime, "agents", AgentRegistry())
    _status, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    (task,) = stack.receive("inventory")
    capsys.readouterr()

    # When its task arrives
    with caplog.at_level("ERROR", logger="shepherd"):
        reply = agent.handler(
            sqs_event([(task["MessageId"], task["Body"])], "arn:q"), LambdaContext()
        )

    # Then the message is done with (no redelivery), the step failed for good, counted and logged
    assert reply == {"batchItemFailures": []}
    reserve = stack.api("GET", accepted["location"])[2]["steps"][0]
    assert reserve["status"] == "FAILED" and reserve["error"]["type"] == "AgentNotFound"
    assert [a["outcome"] for a in reserve["attempts"]] == ["error"]
    assert '"AgentNotFound":[1.0]' in capsys.readouterr().out
    (logged,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "agent 'reserve_inventory' is not registered in this worker" in logged.getMessage()


def test_an_all_poison_batch_is_item_failures_not_a_failed_batch(stack: Stack) -> None:
    from shepherd_handlers import agent

    reply = agent.handler(
        sqs_event([("p1", "{}"), ("p2", '{"w":"x","s":"y","a":0}')], "arn:q"), LambdaContext()
    )
    assert reply == {"batchItemFailures": [{"itemIdentifier": "p1"}, {"itemIdentifier": "p2"}]}


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _event(
    detail: Any,
    *,
    detail_type: str = "StartWorkflow",
    source: str = "acme.orders",
    account: str = "123456789012",
) -> dict[str, Any]:
    return lambda_kit.eventbridge_event(
        detail_type,
        detail,
        source=source,
        account=account,
        region="us-east-1",
        at="2026-11-21T17:00:00Z",
        resources=[],
        event_id="6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    )


ACME = "arn:aws:iam::123456789012:role/acme-orders"


def _map_sources(monkeypatch: pytest.MonkeyPatch, owners: dict[str, str]) -> None:
    from shepherd.settings import ENV_EVENT_OWNERS
    from shepherd_handlers import runtime

    monkeypatch.setenv(ENV_EVENT_OWNERS, json.dumps(owners))
    runtime.engine.cache_clear()


def test_start_workflow_events(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    from shepherd_handlers import events

    _map_sources(monkeypatch, {"acme.orders": ACME})
    detail = {"type": "order_fulfilment", "input": ORDER, "idempotency_key": "evt-1"}
    first = events.handler(_event(detail), LambdaContext())
    again = events.handler(_event(detail), LambdaContext())
    assert first["status"] == "accepted" and first["created"] is True
    assert again["workflow_id"] == first["workflow_id"] and again["created"] is False
    stack.run_agents()
    # Owned by the principal the source maps to: it sees it, nobody else does.
    assert stack.api("GET", f"/workflows/{first['workflow_id']}", caller=ACME)[0] == 200
    assert stack.api("GET", f"/workflows/{first['workflow_id']}")[0] == 404
    for bad, code in [
        ({"type": "nope", "input": {}}, "UnknownWorkflowType"),
        ({"type": "order_fulfilment", "input": {"order_id": 1}}, "InputInvalid"),
        ({"input": {}}, "InvalidEvent"),
        ({**detail, "input": {**ORDER, "amount": 3}}, "IdempotencyConflict"),
    ]:
        reply = events.handler(_event(bad), LambdaContext())
        assert reply["status"] == "rejected" and reply["code"] == code


def test_a_start_event_carries_tags_its_owner_finds_the_workflow_by(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37.5: a start may carry tags, from an event as from the API; a bad one is the
    API's `TagInvalid`, with nothing written."""
    from shepherd_handlers import events

    _map_sources(monkeypatch, {"acme.orders": ACME})
    detail = {"type": "order_fulfilment", "input": ORDER, "tags": {"order": "o-17"}}
    started = events.handler(_event(detail), LambdaContext())
    assert started["status"] == "accepted"
    status, _, found = stack.api("GET", "/workflows", query={"tag": "order:o-17"}, caller=ACME)
    assert status == 200
    assert [row["workflow_id"] for row in found["items"]] == [started["workflow_id"]]
    assert found["items"][0]["tags"] == {"order": "o-17"}
    before = stack.api("GET", "/workflows", caller=ACME)[2]["items"]
    for tags in ({"bad key!": "x"}, {"order": "x" * 257}, {f"k{i}": "v" for i in range(11)}):
        reply = events.handler(
            _event({**detail, "tags": tags, "idempotency_key": str(len(tags))}), LambdaContext()
        )
        assert reply["status"] == "rejected" and reply["code"] == "TagInvalid", reply
    assert stack.api("GET", "/workflows", caller=ACME)[2]["items"] == before


def test_an_event_cannot_claim_an_owner(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changed on purpose: `detail.owner` was trusted as sent, so anyone allowed to put
    events could start workflows as any principal and take its idempotency keys."""
    from shepherd_handlers import events

    _map_sources(monkeypatch, {"acme.orders": ACME})
    alice = "arn:aws:iam::123456789012:user/alice"
    claimed = {"type": "order_fulfilment", "input": ORDER, "idempotency_key": "k", "owner": alice}
    reply = events.handler(_event(claimed), LambdaContext())
    assert reply["status"] == "rejected" and reply["code"] == "OwnerNotAccepted"
    assert stack.api("GET", "/workflows", caller=alice)[2]["items"] == []
    # The same key from an event and from alice are two workflows: the owners differ.
    del claimed["owner"]
    by_event = events.handler(_event(claimed), LambdaContext())["workflow_id"]
    _, _, by_alice = stack.api(
        "POST",
        "/workflows",
        body={"type": "order_fulfilment", "input": ORDER, "idempotency_key": "k"},
        caller=alice,
    )
    assert by_alice["created"] is True and by_alice["workflow_id"] != by_event


def test_only_a_mapped_source_starts_workflows(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changed on purpose (a hostile caller): an unmapped source used to own its workflows as
    `events:<account>:<source>`, a namespace whoever puts the event chooses, so any bus writer
    could start workflows as another team's source and squat its idempotency keys. Now only a
    source the deployment maps starts anything (and the bus policy lets only the principal it
    maps to put events with it: tests/infra/test_infra_bus_policy.py)."""
    from shepherd_handlers import events

    _map_sources(monkeypatch, {"acme.orders": ACME})
    detail = {"type": "order_fulfilment", "input": ORDER, "idempotency_key": "team-key"}
    mapped = events.handler(_event(detail), LambdaContext())
    assert stack.api("GET", f"/workflows/{mapped['workflow_id']}", caller=ACME)[0] == 200
    for forged in (
        _event(detail, source="acme.other"),
        _event(detail, source="acme.other", account="210987654321"),
    ):
        reply = events.handler(forged, LambdaContext())
        assert reply["status"] == "rejected" and reply["code"] == "SourceNotMapped", reply
    # Nothing was started by the forged events: the team's list holds its one workflow.
    assert [w["workflow_id"] for w in stack.api("GET", "/workflows", caller=ACME)[2]["items"]] == [
        mapped["workflow_id"]
    ]


@pytest.mark.parametrize(
    ("event", "code"),
    [
        ({"detail": None}, "InvalidEvent"),
        ({"detail": "a string"}, "InvalidEvent"),
        ({"detail": [1, 2]}, "InvalidEvent"),
        ({"source": None}, "InvalidEvent"),
        (
            {"detail": {"type": "order_fulfilment", "input": {"amount": float("nan")}}},
            "NonFiniteNumber",
        ),
        ({"detail": {"type": "order_fulfilment", "input": {"x": float("inf")}}}, "NonFiniteNumber"),
        ({"detail": {"type": "order_fulfilment", "input": "\ud800"}}, "InvalidUnicode"),
        ({"detail": {"type": "order_fulfilment", "input": 10**400}}, "NumberOutOfRange"),
        ({"detail": {"type": "order_fulfilment", "input": _deep(200)}}, "JsonTooDeep"),
        (
            {"detail": {"type": "order_fulfilment", "input": {**ORDER, "note": "x" * 5_300_000}}},
            "InputTooLarge",
        ),
        ({"detail": {"type": "order_fulfilment", "input": ORDER, "extra": 1}}, "InvalidEvent"),
    ],
)
def test_invalid_events_are_logged_and_counted_never_raised(
    stack: Stack,
    event: dict[str, Any],
    code: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shepherd_handlers import events

    _map_sources(monkeypatch, {"acme.orders": ACME})
    with caplog.at_level("WARNING", logger="shepherd"):
        reply = events.handler({**_event({}), **event}, LambdaContext())
    assert reply["status"] == "rejected" and reply["code"] == code, reply
    assert '"StartEventsRejected":[1.0]' in capsys.readouterr().out
    (logged,) = [r for r in caplog.records if r.getMessage() == "StartWorkflow event rejected"]
    assert logged.code == code  # type: ignore[attr-defined]
    assert stack.api("GET", "/workflows")[2]["items"] == []


def test_supervisor_handler_recovers_lost_work_and_reports(
    stack: Stack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _status, _, _accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    (lost,) = stack.receive("inventory")
    stack.clients["sqs"].delete_message(
        QueueUrl=stack.queues["inventory"].url, ReceiptHandle=lost["ReceiptHandle"]
    )
    assert stack.sweep() == {"sweeps": 1, "due": 0, "actions": 0}  # nothing overdue yet
    from shepherd.clock import SystemClock

    later = SystemClock().now_ms() + 11_000  # past DispatchTimeoutSeconds (10 s)
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: later)
    report = stack.sweep()
    assert report["due"] == 1 and report["actions"] >= 1
    (again,) = stack.receive("inventory")
    assert json.loads(again["Body"]) == json.loads(lost["Body"])  # the same attempt, sent again
    out = capsys.readouterr().out
    assert '"LostMessagesRecovered":[1.0]' in out
    assert '"DetectionLag"' in out and '"SweepDuration"' in out


def test_supervisor_sweeps_several_times_within_one_invocation(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHEPHERD_SWEEP_INTERVAL_SECONDS", "0.05")
    monkeypatch.setenv("SHEPHERD_SWEEP_WINDOW_SECONDS", "0.2")
    from shepherd_handlers import runtime

    runtime.engine.cache_clear()  # settings are read once per sandbox
    assert stack.sweep()["sweeps"] == 5  # at 0, 0.05, 0.1, 0.15 and 0.2 s


def test_a_sweep_window_is_timed_on_the_engines_clock_not_the_wall(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness on a simulated clock (the bench, the simulator) gets the same sweeps and
    horizons on every run: the window waits on the engine's clock, so a 20 s window passes in
    no wall time, and a wall-clock read would have made the pinned request counts flaky."""
    from shepherd.clock import ManualClock

    monkeypatch.setenv("SHEPHERD_SWEEP_INTERVAL_SECONDS", "5")
    monkeypatch.setenv("SHEPHERD_SWEEP_WINDOW_SECONDS", "20")
    from shepherd_handlers import runtime

    runtime.engine.cache_clear()  # settings are read once per sandbox
    clock = ManualClock()
    monkeypatch.setattr(runtime.engine().supervisor.scheduler.ports, "clock", clock)
    before, started = clock.now_ms(), time.monotonic()
    assert stack.sweep()["sweeps"] == 5  # at 0, 5, 10, 15 and 20 s of the engine's clock
    assert clock.now_ms() - before == 20_000
    assert time.monotonic() - started < 15  # it never slept on the wall


def test_supervisor_ticks_replace_sleeping_between_sweeps(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.observability import ENV_SWEEP_TICKS
    from shepherd_handlers.supervisor import tick_delays

    assert tick_delays(5, 55) == [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55]
    assert tick_delays(2.5, 5) == [3, 5]  # whole seconds, never early
    sqs = stack.clients["sqs"]
    url = sqs.create_queue(QueueName="supervisor-ticks")["QueueUrl"]
    monkeypatch.setenv(ENV_SWEEP_TICKS, url)
    monkeypatch.setenv("SHEPHERD_SWEEP_INTERVAL_SECONDS", "5")
    monkeypatch.setenv("SHEPHERD_SWEEP_WINDOW_SECONDS", "55")
    from shepherd_handlers import runtime

    runtime.engine.cache_clear()  # settings are read once per sandbox
    started = time.monotonic()
    # The scheduled run sends the minute's 11 later sweeps as delayed ticks and sweeps once.
    assert stack.sweep() == {"sweeps": 1, "due": 0, "actions": 0, "busy": 0, "ticks_sent": 11}
    assert time.monotonic() - started < 5  # it did not sleep
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "11"
    # A tick (as the queue's event source mapping delivers it) sweeps once; so do several.
    from shepherd_handlers import supervisor

    tick = {"eventSource": "aws:sqs", "body": '{"tick":5,"group":0}'}
    reply = supervisor.handler({"Records": [tick, tick]}, LambdaContext())
    assert reply == {"sweeps": 1, "due": 0, "actions": 0, "busy": 0, "ticks": 2}


def test_each_group_of_shards_gets_its_own_ticks_and_sweeps_under_a_lease(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23: one tick per group and per sweep of the minute; a tick sweeps the groups it
    names; a group whose lease another sweeper holds is left to it (a duplicate or late
    tick does nothing); the sweep's metrics say how far behind it is."""
    from shepherd.clock import SystemClock
    from shepherd.conditions import Update
    from shepherd.keys import WATCH_PREFIX, lease_pk, watch_shard
    from shepherd.observability import ENV_SWEEP_TICKS
    from shepherd.settings import ENV_SWEEP_GROUPS, ENV_WATCH_SHARDS
    from shepherd_handlers import runtime, supervisor

    sqs = stack.clients["sqs"]
    url = sqs.create_queue(QueueName="supervisor-ticks")["QueueUrl"]
    monkeypatch.setenv(ENV_SWEEP_TICKS, url)
    monkeypatch.setenv(ENV_WATCH_SHARDS, "8")
    monkeypatch.setenv(ENV_SWEEP_GROUPS, "4")
    monkeypatch.setenv("SHEPHERD_SWEEP_INTERVAL_SECONDS", "5")
    monkeypatch.setenv("SHEPHERD_SWEEP_WINDOW_SECONDS", "55")
    # The clock stands still below: a sweep looking ahead would wait in vain (see
    # tests/handlers/test_supervisor_look_ahead.py).
    monkeypatch.setenv("SHEPHERD_SWEEP_LOOK_AHEAD", "false")
    runtime.engine.cache_clear()
    assert supervisor.ticks(4, [5, 10]) == [
        (1, 0), (2, 0), (3, 0), (0, 5), (1, 5), (2, 5), (3, 5), (0, 10), (1, 10), (2, 10), (3, 10),
    ]  # fmt: skip
    reply = stack.sweep()
    assert reply["ticks_sent"] == 3 + 4 * 11 and reply["sweeps"] == 1
    # Workflows whose roots' messages were lost: due in their shards after a while. Ids
    # are random, so start them until group 2 (shards 2 and 6) and another group hold one.
    groups: list[int] = []
    while len(groups) < 12 or (2 not in groups or set(groups) == {2}):
        assert len(groups) < 200, "no workflow landed in group 2's shards"
        created = stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
        shard = watch_shard(created[2]["workflow_id"], 8)
        groups.append(int(shard.removeprefix(WATCH_PREFIX)) % 4)
        for message in stack.receive("inventory"):
            sqs.delete_message(
                QueueUrl=stack.queues["inventory"].url, ReceiptHandle=message["ReceiptHandle"]
            )
    later = SystemClock().now_ms() + 11_000  # past DispatchTimeoutSeconds (10 s)
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: later)
    # Another sweeper holds group 2's lease: that group is left to it.
    store = runtime.engine().ports.store
    pk, sk = lease_pk(2)
    store.update(pk, sk, Update(set={"owner": "other", "expires_at": later + 5_000}), None)
    ticks = [{"eventSource": "aws:sqs", "body": f'{{"tick":5,"group":{g}}}'} for g in range(4)]
    capsys.readouterr()
    reply = supervisor.handler({"Records": ticks}, LambdaContext())
    assert reply["sweeps"] == 4 and reply["busy"] == 1
    assert reply["due"] == sum(g != 2 for g in groups)  # every due workflow but group 2's
    assert reply["actions"] == reply["due"]  # each re-sent
    out = capsys.readouterr().out
    assert '"OldestDueAgeMs":[' in out and '"Truncated":[0.0' in out and '"Due":[' in out
    # Its lease expired (a dead sweeper): the next tick sweeps group 2 too.
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: later + 6_000)
    reply = supervisor.handler({"Records": [ticks[2]]}, LambdaContext())
    assert reply["busy"] == 0 and reply["due"] == groups.count(2)


def test_callback_step_success_heartbeat_and_stale_tokens(
    stack: Stack, callback_ship: list[str]
) -> None:
    _status, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    stack.run_agents()
    view = stack.api("GET", accepted["location"])[2]
    assert view["status"] == "RUNNING"
    assert [(s["name"], s["status"]) for s in view["steps"]] == [
        ("reserve_inventory", "SUCCEEDED"),
        ("fraud_review", "SKIPPED"),  # a small order
        ("charge_payment", "SUCCEEDED"),
        ("ship_order", "WAITING"),
        ("notify_customer", "PENDING"),
        ("until_reminder", "PENDING"),
        ("send_reminder", "PENDING"),
    ]
    (token,) = callback_ship
    assert "callback_token" not in json.dumps(view) and token not in json.dumps(view)

    code, reply = stack.callback(token, "heartbeat", {"details": {"carrier": "picked up"}})
    assert code == 200 and reply["status"] == "WAITING" and reply["attempt"] == 1
    assert stack.callback("st1.bm90LWEtdG9rZW4", "success")[0] == 404  # malformed
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert stack.callback(forged, "success")[0] == 404

    code, reply = stack.callback(token, "success", {"output": {"tracking": "CARRIER-1"}})
    assert code == 200 and reply["status"] == "SUCCEEDED"
    stack.run_agents()
    done = stack.api("GET", accepted["location"])[2]
    assert done["status"] == "SUCCEEDED"
    assert done["output"]["notify_customer"]["tracking"] == "CARRIER-1"
    code, reply = stack.callback(token, "success", {"output": {"tracking": "AGAIN"}})
    assert code == 409 and reply["error"]["code"] == "TaskTokenStale"
    assert stack.callback(forged, "success")[0] == 404  # the attempt is over: still unknown
    assert stack.api("GET", accepted["location"])[2]["output"]["ship_order"] == {
        "tracking": "CARRIER-1"
    }


def test_callback_failure_retries_and_fences_the_old_token(
    stack: Stack, callback_ship: list[str]
) -> None:
    _status, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    stack.run_agents()
    (first,) = callback_ship
    code, reply = stack.callback(first, "failure", {"error": "CarrierBusy", "cause": "try later"})
    assert code == 200 and reply["status"] == "QUEUED" and reply["attempt"] == 2
    assert stack.callback(first, "heartbeat")[0] == 409  # attempt 1 is over
    assert stack.callback(first, "success", {"output": {}})[0] == 409
    import time

    time.sleep(1.1)  # the retry is delivered with its (whole-second) backoff delay
    stack.run_agents()
    second = callback_ship[1]
    assert second != first
    code, reply = stack.callback(second, "failure", {"error": "AddressInvalid"})  # non-retryable
    assert code == 200 and reply["status"] == "FAILED"
    stack.run_agents()
    assert stack.api("GET", accepted["location"])[2]["status"] == "COMPENSATED"
    assert stack.callback("st1.", "failure", {"error": ""})[0] == 400  # fails validation first


def _schemas() -> dict[str, Any]:
    found = {}
    for path in sorted((ROOT / "docs" / "events").glob("*.schema.json")):
        found[path.name.removesuffix(".schema.json")] = fastjsonschema.compile(
            json.loads(path.read_text())
        )
    return found


def test_events_out_match_their_documented_schemas(stack: Stack, callback_ship: list[str]) -> None:
    schemas = _schemas()
    # A clean run, a failing one with retries and a timeout, a cancelled one.
    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    stack.run_agents()
    (token,) = callback_ship
    stack.callback(token, "failure", {"error": "AddressInvalid"})
    stack.run_agents()
    cancelled = stack.api(
        "POST",
        "/workflows",
        body={"type": "provision_environment", "input": {"env_name": "abc", "region": "x"}},
    )[2]
    stack.api("POST", f"/workflows/{cancelled['workflow_id']}/cancel")
    stack.run_agents()
    published = stack.published()
    kinds = {e["detail-type"] for e in published}
    assert {
        "WorkflowStarted",
        "StepFailed",
        "StepCompensated",
        "WorkflowCompensated",
        "WorkflowCancelled",
    } <= kinds
    for event in published:
        assert event["source"] == "shepherd"
        schemas[event["detail-type"]](event["detail"])  # raises if the detail drifts


def test_every_event_type_the_engine_emits_has_a_schema() -> None:
    from shepherd.model import EVENT_TYPES, DomainEvent

    with pytest.raises(ValueError, match="undocumented"):
        DomainEvent("StepExploded", {})
    emitted = set(EVENT_TYPES)
    assert emitted == set(_schemas())
    bad = {"workflow_id": "w", "workflow_type": "t", "status": "RUNNING"}  # no "at"
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        _schemas()["WorkflowStarted"](bad)


def test_supervisor_logs_each_action_with_the_workflow(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    (lost,) = stack.receive("inventory")
    stack.clients["sqs"].delete_message(
        QueueUrl=stack.queues["inventory"].url, ReceiptHandle=lost["ReceiptHandle"]
    )
    from shepherd.clock import SystemClock

    later = SystemClock().now_ms() + 11_000
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: later)
    with caplog.at_level("INFO", logger="shepherd.supervisor"):
        stack.sweep()
    (record,) = [r for r in caplog.records if r.getMessage() == "supervisor acted"]
    assert record.workflow_id == accepted["workflow_id"]  # type: ignore[attr-defined]
    assert record.actions == ["Redispatch(reserve_inventory#1)"]  # type: ignore[attr-defined]


def test_the_supervisor_counts_failed_looks_and_parked_workflows(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workflow whose look raises is counted in LookFailures (alarmed) by the handler."""
    from shepherd.conditions import Update

    _status, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    pk = f"WF#{accepted['workflow_id']}"
    from shepherd_handlers.runtime import engine

    engine().ports.store.update(pk, "#WF", Update(set={"def_hash": "gone", "due_at": 0}), None)
    capsys.readouterr()
    assert stack.sweep()["due"] == 1
    assert '"LookFailures":[1.0]' in capsys.readouterr().out


def test_a_start_event_may_name_an_upload_of_its_mapped_owner(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input over an event's 256 KB: the principal the source maps to uploads it (POST
    /payloads), the event names it; anyone else's upload is refused like a bad input."""
    import hashlib

    import requests
    from aws_stack import ALICE, BOB
    from shepherd import jsonsafe
    from shepherd_handlers import events

    _map_sources(monkeypatch, {"acme.orders": ALICE})
    big = {**ORDER, "note": "n" * (300 * 1024)}
    data = jsonsafe.dumps(big).encode()

    def upload(caller: str) -> str:
        body = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        status, _, made = stack.api("POST", "/payloads", body=body, caller=caller)
        assert status == 201
        form = requests.post(made["url"], data=made["fields"], files={"file": data}, timeout=10)
        assert form.status_code in (200, 201, 204)
        return str(made["upload_id"])

    foreign = upload(BOB)
    detail = {"type": "order_fulfilment", "input_upload": foreign}
    reply = events.handler(_event(detail), LambdaContext())
    assert reply["status"] == "rejected" and reply["code"] == "UploadNotFound"
    both = {**detail, "input": ORDER}
    assert events.handler(_event(both), LambdaContext())["code"] == "InvalidEvent"
    mine = upload(ALICE)
    started = events.handler(_event({**detail, "input_upload": mine}), LambdaContext())
    assert started["status"] == "accepted", started
    _, _, view = stack.api("GET", f"/workflows/{started['workflow_id']}", caller=ALICE)
    assert view["input_ref"]["size"] == len(data)
    again = events.handler(
        _event({**detail, "input_upload": mine, "idempotency_key": "k2"}), LambdaContext()
    )
    assert again["status"] == "rejected" and again["code"] == "UploadUsed"


def test_a_record_whose_longest_attempt_does_not_fit_is_left_unclaimed_and_back_at_once(
    stack: Stack,
) -> None:
    """Issue 23: a batch claimed its next record without checking the time left, so under a
    backlog a long step was killed at the function's timeout, its attempt spent. A record is
    claimed only if its step's TimeoutSeconds fit in the time left; otherwise it is a batch
    item failure made visible again at once, its attempt untouched."""
    from shepherd_handlers import agent

    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    (msg,) = stack.receive("inventory")
    arn = "arn:aws:sqs:us-east-1:123456789012:" + stack.queues["inventory"].url.rsplit("/", 1)[-1]
    batch = sqs_event([(msg["MessageId"], msg["Body"])], arn)
    batch["Records"][0]["receiptHandle"] = msg["ReceiptHandle"]
    # reserve_inventory may take 8 s (TimeoutSeconds); 5 s are left.
    reply = agent.handler(batch, LambdaContext(remaining_ms=5_000))
    assert reply == {"batchItemFailures": [{"itemIdentifier": msg["MessageId"]}]}
    (again,) = stack.receive("inventory")  # visible at once, not after the visibility timeout
    assert again["Body"] == msg["Body"]
    view = stack.api("GET", f"/workflows/{json.loads(msg['Body'])['w']}")[2]
    assert view["steps"][0]["status"] == "PENDING" and view["steps"][0]["attempt"] == 0
    # With the time it needs, the same record runs.
    batch["Records"][0]["receiptHandle"] = again["ReceiptHandle"]
    assert agent.handler(batch, LambdaContext(remaining_ms=60_000)) == {"batchItemFailures": []}


def test_a_throttled_claim_is_a_batch_item_failure_back_within_a_second(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.errors import StoreUnavailable
    from shepherd_handlers import agent, runtime

    stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})
    (msg,) = stack.receive("inventory")
    arn = "arn:aws:sqs:us-east-1:123456789012:" + stack.queues["inventory"].url.rsplit("/", 1)[-1]
    batch = sqs_event([(msg["MessageId"], msg["Body"])], arn)
    batch["Records"][0]["receiptHandle"] = msg["ReceiptHandle"]
    store = runtime.engine().ports.store

    def throttled(*_: Any, **__: Any) -> Any:
        raise StoreUnavailable("UpdateItem: throttled", throttled=True)

    monkeypatch.setattr(store, "update", throttled)
    reply = agent.handler(batch, LambdaContext())
    assert reply == {"batchItemFailures": [{"itemIdentifier": msg["MessageId"]}]}
    attrs = stack.clients["sqs"].get_queue_attributes(
        QueueUrl=stack.queues["inventory"].url, AttributeNames=["All"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"  # back after 1 s, not 6 x timeout
    time.sleep(1.1)
    assert stack.receive("inventory")
