"""The supervisor handler looks ahead (issue 23's detection lag): every tick names the moment
it is due (`at`) and its group's next sweep (`next`: the next tick, or after the minute's last
the next scheduled run), and its sweep looks ahead until just before that (less the margin);
the scheduled run's own sweep until just before its group's first tick.
`SHEPHERD_SWEEP_LOOK_AHEAD=false` turns it off."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_stack import LambdaContext, Stack
from shepherd.engine.supervisor import LOOK_AHEAD_MARGIN_MS, Supervisor


def _tick(group: int, nxt: int | None = None, delay: int = 5) -> dict[str, Any]:
    body: dict[str, Any] = {"tick": delay, "group": group}
    if nxt is not None:
        body["at"], body["next"] = nxt - 5_000, nxt
    return {"eventSource": "aws:sqs", "body": json.dumps(body)}


@pytest.fixture
def horizons(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each sweep of the handler was asked: its groups and its horizon."""
    asked: list[dict[str, Any]] = []
    real = Supervisor.sweep_groups

    def sweep_groups(self: Supervisor, groups: Any, **kwargs: Any) -> Any:
        asked.append({"groups": list(groups), **kwargs})
        return real(self, groups, **kwargs)

    monkeypatch.setattr(Supervisor, "sweep_groups", sweep_groups)
    return asked


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    from shepherd_handlers import runtime

    monkeypatch.setenv("SHEPHERD_SWEEP_INTERVAL_SECONDS", "5")
    monkeypatch.setenv("SHEPHERD_SWEEP_WINDOW_SECONDS", "55")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runtime.engine.cache_clear()  # settings are read once per sandbox


def test_ticks_carry_their_planned_moment_and_the_scheduled_sweep_looks_ahead_from_its_start(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, horizons: list[dict[str, Any]]
) -> None:
    from shepherd.clock import SystemClock
    from shepherd.observability import ENV_SWEEP_TICKS
    from shepherd.settings import ENV_SWEEP_GROUPS, ENV_WATCH_SHARDS

    sqs = stack.clients["sqs"]
    url = sqs.create_queue(QueueName="supervisor-ticks")["QueueUrl"]
    _settings(monkeypatch, **{ENV_SWEEP_TICKS: url, ENV_WATCH_SHARDS: "4", ENV_SWEEP_GROUPS: "2"})
    start = SystemClock().now_ms() + 60_000
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: start)  # the clock stands still
    assert stack.sweep()["ticks_sent"] == 1 + 2 * 11
    (asked,) = horizons
    assert asked["groups"] == [0] and asked["until_ms"] == start + 5_000 - LOOK_AHEAD_MARGIN_MS
    bodies = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        bodies += [json.loads(m["Body"]) for m in got]
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
            ],
        )
    # The delayed ones come later.
    assert bodies == [{"tick": 0, "group": 1, "at": start, "next": start + 5_000}]


def test_send_ticks_names_each_ones_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    from shepherd_handlers import supervisor

    sent: list[dict[str, Any]] = []

    class Sqs:
        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:  # noqa: N803
            sent.extend(Entries)
            return {}

    from shepherd import wiring  # the handler imports it on first use

    monkeypatch.setattr(wiring, "client", lambda name: Sqs())
    clock = iter(range(1_000_000, 2_000_000, 10))  # each request 10 ms after the one before
    planned = supervisor.ticks(2, supervisor.tick_delays(5, 55))
    assert supervisor.send_ticks("url", planned, lambda: next(clock), 999_990) == 23
    assert len(sent) == len(planned) == 23
    for entry in sent:
        body = json.loads(entry["MessageBody"])
        sent_at = 1_000_000 + 10 * (int(entry["Id"]) // 10)
        assert body["at"] == sent_at + body["tick"] * 1000 == sent_at + entry["DelaySeconds"] * 1000
        # Its group's next sweep: the next tick (sent no earlier), or the next minute's run.
        if body["tick"] == 55:
            assert body["next"] == 999_990 + 60_000
        else:
            assert body["next"] == sent_at + (body["tick"] + 5) * 1000


def test_a_tick_looks_ahead_until_just_before_the_next_one(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, horizons: list[dict[str, Any]]
) -> None:
    from shepherd.clock import SystemClock
    from shepherd_handlers import supervisor

    _settings(monkeypatch)
    now = SystemClock().now_ms()
    nxt = now + 4_800  # delivered 200 ms after its moment
    supervisor.handler({"Records": [_tick(0, nxt)]}, LambdaContext())
    assert horizons[-1]["until_ms"] == nxt - LOOK_AHEAD_MARGIN_MS
    # Two ticks of one group (a backlog): until just before the later one's next.
    supervisor.handler({"Records": [_tick(0, nxt - 5_000), _tick(0, nxt)]}, LambdaContext())
    assert horizons[-1]["groups"] == [0]
    assert horizons[-1]["until_ms"] == nxt - LOOK_AHEAD_MARGIN_MS
    # A tick sent before ticks named their next sweep: an interval from now.
    supervisor.handler({"Records": [_tick(0)]}, LambdaContext())
    assert horizons[-1]["until_ms"] >= now + 5_000 - LOOK_AHEAD_MARGIN_MS
    # A tick too late for its horizon: no look-ahead at all (the sweep takes what is due).
    supervisor.handler({"Records": [_tick(0, now - 60_000)]}, LambdaContext())
    assert horizons[-1]["until_ms"] < now


def test_look_ahead_can_be_turned_off(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, horizons: list[dict[str, Any]]
) -> None:
    from shepherd.clock import SystemClock
    from shepherd_handlers import supervisor

    _settings(monkeypatch, SHEPHERD_SWEEP_LOOK_AHEAD="false")
    supervisor.handler({"Records": [_tick(0, SystemClock().now_ms() + 5_000)]}, LambdaContext())
    assert horizons[-1]["until_ms"] is None


def test_a_handler_sweep_acts_on_a_deadline_when_it_passes(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path on a real clock: a lost root's re-send is due 10 s after its start; a
    tick 9.6 s in (its next one at 10.6 s) waits for it and re-sends it at the deadline."""
    from shepherd.clock import SystemClock
    from shepherd_handlers import runtime, supervisor
    from support import ORDER

    _settings(monkeypatch, SHEPHERD_SWEEP_INTERVAL_SECONDS="1")
    accepted = stack.api("POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER})[2]
    (lost,) = stack.receive("inventory")
    stack.clients["sqs"].delete_message(
        QueueUrl=stack.queues["inventory"].url, ReceiptHandle=lost["ReceiptHandle"]
    )
    scheduler = runtime.engine().scheduler
    workflow_id = accepted["workflow_id"]
    deadline = scheduler.load(workflow_id)[0].workflow.created_at + 10_000
    # Move the clock to 0.4 s before the deadline; it runs on from there.
    offset = deadline - 400 - SystemClock().now_ms()
    real_now = SystemClock.now_ms
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: real_now(self) + offset)
    at = SystemClock().now_ms()
    reply = supervisor.handler({"Records": [_tick(0, at + 1_000)]}, LambdaContext())
    assert reply["actions"] >= 1
    (again,) = stack.receive("inventory")
    assert json.loads(again["Body"]) == json.loads(lost["Body"])
    step = scheduler.load(workflow_id)[0].steps["reserve_inventory"]
    assert step.resent_at is not None and deadline <= step.resent_at < deadline + 200
