"""No supervisor tick runs while the watch index is empty, and a start in an idle minute still
gets its first look on time (issue 35 point 4; shepherd.engine.wakeup), through the real
handlers: the scheduled run (EventBridge Scheduler), the API's start, and the tick queue."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_stack import LambdaContext, Stack, sqs_event
from support import ORDER

GRACE_MS = 10_000  # order_fulfilment's DispatchTimeoutSeconds
TICKS_ARN = "arn:aws:sqs:us-east-1:123456789012:supervisor-ticks"


class Clock:
    """The engine's clock (SystemClock), moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from shepherd.clock import SystemClock

        self.now = SystemClock().now_ms()
        monkeypatch.setattr(SystemClock, "now_ms", lambda _: self.now)

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


@pytest.fixture
def ticks(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> str:
    """Deployed: the supervisor's tick queue (the functions that start workflows know it)."""
    from shepherd.observability import ENV_SWEEP_TICKS
    from shepherd_handlers import runtime

    url: str = stack.clients["sqs"].create_queue(QueueName="supervisor-ticks")["QueueUrl"]
    monkeypatch.setenv(ENV_SWEEP_TICKS, url)
    monkeypatch.setenv("SHEPHERD_SWEEP_INTERVAL_SECONDS", "5")
    monkeypatch.setenv("SHEPHERD_SWEEP_WINDOW_SECONDS", "55")
    monkeypatch.setenv("SHEPHERD_SWEEP_LOOK_AHEAD", "false")
    runtime.engine.cache_clear()
    return url


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[int, int]]]:
    """Every minute of ticks the supervisor sent: (group, delay) each."""
    from shepherd_handlers import supervisor

    minutes: list[list[tuple[int, int]]] = []
    real = supervisor.send_ticks

    def send_ticks(url: str, planned: list[tuple[int, int]], *args: Any, **kwargs: Any) -> int:
        minutes.append(list(planned))
        return real(url, planned, *args, **kwargs)

    monkeypatch.setattr(supervisor, "send_ticks", send_ticks)
    return minutes


def _queued(stack: Stack, url: str) -> list[str]:
    """The bodies waiting in a queue (received and deleted)."""
    sqs = stack.clients["sqs"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    bodies = []
    for m in got.get("Messages", []):
        bodies.append(m["Body"])
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return bodies


def _due_at(stack: Stack, workflow_id: str) -> int:
    from shepherd.keys import WF_SK, wf_pk

    item = stack.clients["dynamodb"].get_item(
        TableName="shepherd",
        Key={"pk": {"S": wf_pk(workflow_id)}, "sk": {"S": WF_SK}},
        ConsistentRead=True,
    )["Item"]
    return int(item["due_at"]["N"])


def _tick(body: dict[str, Any]) -> dict[str, Any]:
    from shepherd_handlers import supervisor

    reply: dict[str, Any] = supervisor.handler(
        sqs_event([("t-1", json.dumps(body))], TICKS_ARN), LambdaContext()
    )
    return reply


def _fall_asleep(stack: Stack, clock: Clock, sent: list[list[tuple[int, int]]]) -> None:
    assert stack.sweep()["ticks_sent"] == 11  # empty once: drowsy, the minute still ticks
    clock.advance(60)
    assert stack.sweep()["asleep"] is True
    assert len(sent) == 1


def test_no_tick_runs_while_the_watch_index_is_empty(
    stack: Stack, ticks: str, monkeypatch: pytest.MonkeyPatch, sent: list[list[tuple[int, int]]]
) -> None:
    from shepherd.engine.supervisor import Supervisor

    clock = Clock(monkeypatch)
    _fall_asleep(stack, clock, sent)
    swept: list[Any] = []
    monkeypatch.setattr(Supervisor, "sweep_groups", lambda *a, **k: swept.append(a) or [])
    for _ in range(10):  # ten idle minutes: ten scheduled runs, each a probe and nothing else
        clock.advance(60)
        reply = stack.sweep()
        assert reply == {"sweeps": 0, "due": 0, "actions": 0, "asleep": True, "ticks_sent": 0}
    assert sent == [sent[0]] and swept == []  # no tick sent, no sweep run


def test_a_start_in_an_idle_minute_gets_its_first_look_on_time(
    stack: Stack, ticks: str, monkeypatch: pytest.MonkeyPatch, sent: list[list[tuple[int, int]]]
) -> None:
    """Asleep; a start comes 17 s into a minute and its task message is lost (the doorbell:
    invariant 1). The start wakes the supervisor at once (a wake tick); that tick runs a
    minute of ticks from then, and the tick at or right after the workflow's due_at
    re-dispatches it: the look comes within a sweep interval of its deadline, not at the next
    scheduled run (43 s later) or never."""
    clock = Clock(monkeypatch)
    _fall_asleep(stack, clock, sent)
    _queued(stack, ticks)  # the drowsy minute's ticks, long past
    clock.advance(17)
    status, _, body = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    assert status == 202, body
    workflow_id = body["workflow_id"]
    woke = clock.now
    assert _queued(stack, ticks) == ['{"wake":true}']  # rung once, by the start
    pool_urls = [q.url for q in stack.queues.values()]
    lost = sum(len(_queued(stack, url)) for url in pool_urls)
    assert lost == 1  # the root's task message, lost
    reply = _tick({"wake": True})  # the wake: a minute starts now
    assert reply["ticks_sent"] == 11 and reply["actions"] == 0  # nothing due yet
    (minute,) = sent[1:]
    at_times = sorted(woke + d * 1000 for _, d in minute)
    assert _due_at(stack, workflow_id) <= woke + GRACE_MS  # findable before its deadline
    acted = 0
    for at in at_times:  # the wake's minute, tick by tick, until one re-dispatches
        clock.now = at
        acted = _tick({"tick": (at - woke) // 1000, "group": 0})["actions"]
        if acted:
            # the dispatch grace (DispatchTimeoutSeconds) passed less than an interval ago
            assert 0 <= at - (woke + GRACE_MS) < 5_000
            break
    assert acted >= 1  # the lost dispatch found and sent again
    assert clock.now - woke <= 15_000  # the grace (10 s) and one interval: not a minute later
    assert sum(len(_queued(stack, url)) for url in pool_urls) == 1


def test_an_operator_resume_wakes_it_too(
    stack: Stack, ticks: str, monkeypatch: pytest.MonkeyPatch, sent: list[list[tuple[int, int]]]
) -> None:
    """A paused workflow with no pause timeout rests outside the index: the supervisor may
    sleep; the resume that puts it back wakes it."""
    from shepherd.engine.wakeup import Wakeup
    from shepherd_handlers import runtime

    clock = Clock(monkeypatch)
    status, _, body = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    assert status == 202, body
    workflow_id = body["workflow_id"]
    assert stack.api("POST", f"/workflows/{workflow_id}/pause")[0] == 202
    wakeup = runtime.engine().scheduler.wakeup
    assert isinstance(wakeup, Wakeup)
    rung: list[int] = []
    monkeypatch.setattr(wakeup, "ring", lambda: rung.append(1))
    store = runtime.engine().ports.store
    from shepherd.conditions import Update
    from shepherd.keys import supervisor_rest_key

    store.update(*supervisor_rest_key(), Update(set={"state": "asleep", "since": 0}), None)
    wakeup._seen_awake = None
    clock.advance(30)
    assert stack.api("POST", f"/workflows/{workflow_id}/resume")[0] == 202
    assert rung == [1] and wakeup.read().state == "awake"


def test_a_state_that_cannot_be_read_ticks(
    stack: Stack, ticks: str, monkeypatch: pytest.MonkeyPatch, sent: list[list[tuple[int, int]]]
) -> None:
    """Sleeping is an economy, sweeping the duty: a store error deciding it sweeps and ticks."""
    from shepherd.engine.wakeup import Wakeup
    from shepherd.errors import StoreUnavailable

    clock = Clock(monkeypatch)
    _fall_asleep(stack, clock, sent)

    def unavailable(self: Wakeup) -> None:
        raise StoreUnavailable("throttled")

    monkeypatch.setattr(Wakeup, "read", unavailable)
    clock.advance(60)
    reply = stack.sweep()
    assert reply["ticks_sent"] == 11 and "asleep" not in reply
