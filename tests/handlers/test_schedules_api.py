"""GET /schedules (issue 25.4): every schedule of the current definitions with its next
firing times, through the API handler on moto."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aws_stack import ALICE, LambdaContext, Stack, stack_with_definitions
from shepherd.definitions import load_directory
from support import ROOT

BOB = "arn:aws:iam::123456789012:user/bob"  # the operator here

NIGHTLY = """\
Name: nightly_check
Steps:
  - Name: hold
    Wait: {Seconds: 1}
Schedules:
  - {Name: nightly, Expression: "cron(0 2 * * ? *)", Timezone: Europe/Paris}
  - {Name: often, Expression: "rate(5 minutes)"}
  - {Name: dormant, Expression: "cron(0 3 * * ? *)", Enabled: false}
"""


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    with stack_with_definitions(monkeypatch, tmp_path, {"nightly_check.yaml": NIGHTLY}) as running:
        yield running


def test_schedules_are_listed_with_their_next_firing_times(stack: Stack) -> None:
    before = datetime.now(UTC)
    status, _, reply = stack.api("GET", "/schedules", caller=ALICE)
    assert status == 200, reply
    items = {i["name"]: i for i in reply["items"]}
    examples = {
        s.name for d in load_directory(ROOT / "statemachines").values() for s in d.schedules
    }
    assert examples == {"nightly-staging", "smoke-environment"}  # beside this test's own
    assert set(items) == {"nightly", "often", "dormant"} | examples
    nightly = items["nightly"]
    assert (nightly["workflow_type"], nightly["timezone"]) == ("nightly_check", "Europe/Paris")
    times = [datetime.strptime(t, "%Y-%m-%dT%H:%M:%S%z") for t in nightly["next"]]
    assert len(times) == 3 and times == sorted(times) and times[0] > before
    # 02:00 in Paris is 00:00 or 01:00 UTC, a day apart.
    assert all(t.hour in (0, 1) and t.minute == 0 for t in times)
    assert items["often"]["next"] == []  # a rate counts from its deploy
    assert items["dormant"]["enabled"] is False and items["dormant"]["next"] == []


def test_a_firing_delivered_twice_starts_one_workflow(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schedule starts its workflow through the StartWorkflow path with the idempotency key
    `schedule:<name>:<scheduled time>`: EventBridge Scheduler delivers at least once, and a
    duplicate derives the same workflow id."""
    import json

    from shepherd import schedules
    from shepherd.settings import ENV_EVENT_OWNERS
    from shepherd_cli import lambda_kit
    from shepherd_handlers import events, runtime

    monkeypatch.setenv(ENV_EVENT_OWNERS, json.dumps({schedules.SOURCE: ALICE}))
    runtime.engine.cache_clear()

    def fire(at: str) -> dict[str, object]:
        detail = schedules.start_detail("nightly_check", "nightly", None, at)
        event = lambda_kit.eventbridge_event(
            "StartWorkflow",
            detail,
            source=schedules.SOURCE,
            account="123456789012",
            region="us-east-1",
            at=at,
            resources=[],
            event_id="0b6c7ad5-1f43-4c3e-9b8e-4a0c1b8e9f10",
        )
        return dict(events.handler(event, LambdaContext()))

    first = fire("2026-11-26T01:00:00Z")
    again = fire("2026-11-26T01:00:00Z")
    assert first["created"] is True and again["created"] is False
    assert again["workflow_id"] == first["workflow_id"]
    next_night = fire("2026-11-27T01:00:00Z")
    assert next_night["created"] is True and next_night["workflow_id"] != first["workflow_id"]
    listed = stack.api("GET", "/workflows", query={"type": "nightly_check"}, caller=ALICE)[2]
    assert len(listed["items"]) == 2


def test_schedule_names_are_unique_across_definitions(tmp_path: Path) -> None:
    from shepherd.definitions import load_directory
    from shepherd.errors import DefinitionError

    (tmp_path / "nightly_check.yaml").write_text(NIGHTLY)
    (tmp_path / "other.yaml").write_text(
        NIGHTLY.replace("nightly_check", "other").split("  - {Name: often")[0]
    )
    with pytest.raises(DefinitionError) as err:
        load_directory(tmp_path)
    assert "other.yaml: Schedules[0] (nightly).Name: also a schedule of 'nightly_check'" in str(
        err.value
    )


# ------------------------------------------------------------------ pause and resume


def _operators(monkeypatch: pytest.MonkeyPatch, *who: str) -> None:
    from shepherd.settings import ENV_OPERATORS
    from shepherd_handlers import runtime

    monkeypatch.setenv(ENV_OPERATORS, ",".join(who))
    runtime.engine.cache_clear()


def _table() -> Any:
    import boto3

    return boto3.resource("dynamodb", region_name="us-east-1").Table("shepherd")


def _fire(at: str, name: str = "nightly") -> dict[str, object]:
    """One firing, exactly as the deployed schedule's target input is built (its
    placeholders filled in as Scheduler fills them)."""
    from shepherd import schedules
    from shepherd_handlers import events

    event = schedules.firing_event(
        "nightly_check",
        name,
        None,  # the definition's Input (none given)
        account="123456789012",
        region="us-east-1",
        scheduled_time=at,
        execution_id="0b6c7ad5-1f43-4c3e-9b8e-4a0c1b8e9f10",
        schedule_arn=f"arn:aws:scheduler:us-east-1:123456789012:schedule/g/{name}",
    )
    return dict(events.handler(event, LambdaContext()))


def test_only_an_operator_pauses_or_resumes_a_schedule(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.keys import SCHEDULES_PK

    _operators(monkeypatch, BOB)
    for action in ("pause", "resume"):
        status, _, reply = stack.api("POST", f"/schedules/nightly/{action}", caller=ALICE)
        assert status == 403 and reply["error"]["code"] == "OperatorOnly", reply
    assert (
        _table().get_item(Key={"pk": SCHEDULES_PK, "sk": "nightly_check#nightly"}).get("Item")
        is None
    )  # a refused pause writes nothing
    status, _, reply = stack.api("POST", "/schedules/nope/pause", caller=BOB)
    assert status == 404 and reply["error"]["code"] == "ScheduleNotFound", reply
    assert reply["error"]["field"] == "name"


def test_a_paused_schedule_is_listed_paused_until_resumed(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.keys import SCHEDULES_PK

    _operators(monkeypatch, BOB)
    status, _, reply = stack.api("POST", "/schedules/nightly/pause", caller=BOB)
    assert status == 200, reply
    assert (reply["name"], reply["paused"], reply["by"]) == ("nightly", True, BOB)
    assert reply["at"] and reply["next"] == []  # a paused schedule fires nothing
    item = _table().get_item(Key={"pk": SCHEDULES_PK, "sk": "nightly_check#nightly"})["Item"]
    assert (item["paused"], item["by"]) == (True, BOB) and int(item["at"]) > 0
    # Idempotent: pausing again leaves it paused.
    assert stack.api("POST", "/schedules/nightly/pause", caller=BOB)[2]["paused"] is True

    listed = {i["name"]: i for i in stack.api("GET", "/schedules", caller=BOB)[2]["items"]}
    assert listed["nightly"]["paused"] is True and listed["nightly"]["by"] == BOB
    assert listed["often"]["paused"] is False and listed["often"]["at"] is None
    # Who paused it (an IAM ARN) is shown to operators only, as for pools.
    seen = {i["name"]: i for i in stack.api("GET", "/schedules", caller=ALICE)[2]["items"]}
    assert seen["nightly"]["paused"] is True and seen["nightly"]["by"] is None

    status, _, reply = stack.api("POST", "/schedules/nightly/resume", caller=BOB)
    assert status == 200 and reply["paused"] is False and len(reply["next"]) == 3, reply
    listed = {i["name"]: i for i in stack.api("GET", "/schedules", caller=BOB)[2]["items"]}
    assert listed["nightly"]["paused"] is False and listed["nightly"]["by"] == BOB


def test_a_paused_schedules_firing_starts_nothing(
    stack: Stack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Acknowledged (Scheduler does not retry it), counted, and nothing started; once resumed,
    a firing delivered twice starts exactly one workflow, owned by the schedule owner."""
    from shepherd.settings import DEFAULT_SCHEDULE_OWNER

    _operators(monkeypatch, BOB)
    assert stack.api("POST", "/schedules/nightly/pause", caller=BOB)[0] == 200
    capsys.readouterr()
    skipped = _fire("2026-11-26T01:00:00Z")
    assert skipped == {"status": "skipped", "schedule": "nightly"}
    out = capsys.readouterr().out
    assert '"ScheduleSkipped":[1.0]' in out
    assert "schedule paused: its firing starts nothing" in caplog.text
    items = _table().scan()["Items"]
    assert not [i for i in items if i["sk"] == "#WF"], "a paused schedule started a workflow"
    # Another schedule of the same type is not paused by it.
    assert _fire("2026-11-26T01:00:00Z", name="often")["created"] is True

    assert stack.api("POST", "/schedules/nightly/resume", caller=BOB)[0] == 200
    first = _fire("2026-11-27T01:00:00Z")
    again = _fire("2026-11-27T01:00:00Z")
    assert first["created"] is True and again == {**first, "created": False}
    workflows = [i for i in _table().scan()["Items"] if i["sk"] == "#WF"]
    assert len(workflows) == 2
    assert {w["owner"] for w in workflows} == {DEFAULT_SCHEDULE_OWNER}


def test_a_schedule_firing_without_its_key_is_rejected(stack: Stack) -> None:
    from shepherd import schedules
    from shepherd_handlers import events

    event = schedules.firing_event(
        "nightly_check", "nightly", None, account="123456789012", region="us-east-1",
        scheduled_time="2026-11-26T01:00:00Z", execution_id="x", schedule_arn="arn",
    )  # fmt: skip
    event["detail"].pop("idempotency_key")
    reply = events.handler(event, LambdaContext())
    assert reply["status"] == "rejected" and reply["code"] == "InvalidEvent"


# ------------------------------------------------------------------ shepherd local's clock


def test_the_local_clock_starts_through_the_events_path_and_honours_a_pause(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control process's schedule thread (`control.fire_schedules`), on a fake clock: a
    `rate(5 minutes)` schedule fires five minutes after the stack's start through the events
    handler, owned by the schedule owner with the deployed key; paused, its next firing starts
    nothing; the thread stops with the stack."""
    import threading
    import time
    from datetime import timedelta

    from shepherd.settings import ENV_SCHEDULE_OWNER
    from shepherd_cli import control

    monkeypatch.setenv(ENV_SCHEDULE_OWNER, ALICE)
    _operators(monkeypatch, BOB)
    start = datetime(2026, 11, 26, 9, 0, 0, tzinfo=UTC)
    now = [start]
    stop = threading.Event()
    thread = threading.Thread(
        target=control.fire_schedules,
        args=(start, stop),
        kwargs={"interval": 0.01, "now": lambda: now[0]},
    )
    thread.start()

    def workflows(wait_for: int) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 10
        while True:
            # This test's own schedule (the examples' fire on the same clock too).
            found = [
                i
                for i in _table().scan()["Items"]
                if i["sk"] == "#WF" and i["wf_type"] == "nightly_check"
            ]
            if len(found) >= wait_for or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    try:
        time.sleep(0.1)
        assert workflows(0) == []  # nothing due at the start
        now[0] = start + timedelta(minutes=5, seconds=1)
        (started,) = workflows(1)
        assert started["owner"] == ALICE
        assert started["idempotency_key"] == "schedule:often:2026-11-26T09:05:00Z"
        assert stack.api("POST", "/schedules/often/pause", caller=BOB)[0] == 200
        now[0] = start + timedelta(minutes=10, seconds=1)
        time.sleep(0.5)  # fifty ticks
        assert len(workflows(0)) == 1, "a paused schedule's firing started a workflow"
        assert stack.api("POST", "/schedules/often/resume", caller=BOB)[0] == 200
        now[0] = start + timedelta(minutes=15, seconds=1)
        assert len(workflows(2)) == 2
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()


# ------------------------------------------------------------------ hostile (issue 35.1)


def _workflows() -> list[dict[str, Any]]:
    return [i for i in _table().scan()["Items"] if i["sk"] == "#WF"]


def _forge(**change: Any) -> dict[str, Any]:
    """A `shepherd.schedule` StartWorkflow event as anyone who can reach the events function
    (the local stack's bus takes any put) could write one, from a genuine firing."""
    from shepherd import schedules
    from shepherd_handlers import events

    at = change.pop("at", "2026-11-26T01:00:00Z")
    event = schedules.firing_event(
        "nightly_check", "nightly", None, account="123456789012", region="us-east-1",
        scheduled_time=at, execution_id="x", schedule_arn="arn",
    )  # fmt: skip
    event["detail"].update(change)
    return dict(events.handler(event, LambdaContext()))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"input": {"amount": 10**9}}, "carries the definition's Input"),
        ({"type": "order_fulfilment"}, "starts 'nightly_check', not 'order_fulfilment'"),
        ({"idempotency_key": "schedule:nope:2026-11-26T01:00:00Z"}, "has a schedule 'nope'"),
        # A real firing of the schedule, but in the future: its key would be taken over.
        ({"idempotency_key": "schedule:nightly:2199-11-26T01:00:00Z"}, "has not fired at"),
        # Not a time `cron(0 2 * * ? *)` in Paris produces (02:00 there is 01:00 UTC).
        ({"idempotency_key": "schedule:nightly:2026-11-26T02:00:00Z"}, "does not fire at"),
        ({"idempotency_key": "schedule:nightly:2026-11-26 01:00:00"}, "a firing's time"),
        # Tags would let a forger file a schedule's workflow under a business key of theirs.
        ({"tags": {"order": "o-1"}}, "carries no tags"),
    ],
)
def test_a_forged_schedule_firing_starts_nothing(
    stack: Stack, change: dict[str, Any], why: str
) -> None:
    """A firing is accepted only if it is one of the definition's own schedule: its type, its
    Input and a time the expression produces, not in the future."""
    reply = _forge(**change)
    assert reply["status"] == "rejected" and reply["code"] == "NotAFiring", reply
    assert why in reply["message"]
    assert _workflows() == []
    assert _forge()["created"] is True  # the genuine firing still starts its workflow


def test_an_uncomputable_stored_schedule_breaks_no_ones_reads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A definition validated before these schedules were refused (an `at` in year 10000 in
    UTC) is listed with no next firing, beside every other schedule; a resume of it answers;
    and the firings of the others still start (GET /schedules used to be a 500 for all)."""
    from shepherd import schedules

    bad = NIGHTLY + (
        '  - {Name: doomsday, Expression: "at(9999-12-31T23:59:59)", '
        "Timezone: America/Los_Angeles}\n"
    )
    # What an older release accepted, bypassing today's checks while the stack loads it.
    monkeypatch.setattr(schedules, "check", lambda e, t: None, raising=False)
    monkeypatch.setattr(schedules, "LAST_YEAR", 9999, raising=False)
    with stack_with_definitions(monkeypatch, tmp_path, {"nightly_check.yaml": bad}) as stack:
        _operators(monkeypatch, BOB)
        status, _, reply = stack.api("GET", "/schedules", caller=ALICE)
        assert status == 200, reply
        items = {i["name"]: i for i in reply["items"]}
        assert items["doomsday"]["next"] == []
        assert len(items["nightly"]["next"]) == 3
        for action in ("pause", "resume"):
            status, _, reply = stack.api("POST", f"/schedules/doomsday/{action}", caller=BOB)
            assert status == 200 and reply["next"] == [], reply
        assert _fire("2026-11-26T01:00:00Z")["created"] is True


def test_a_put_on_the_local_bus_cannot_forge_a_firing(stack: Stack) -> None:
    """Issue 35.1, locally: the local stack relays every StartWorkflow put on its bus (no
    authentication) to the events handler (`control.relay_start_events`). A forged
    `shepherd.schedule` event (another input, under the key of a real future firing) starts
    nothing; the genuine firing, relayed the same way, starts its workflow."""
    import json
    import threading
    import time

    import boto3
    from shepherd import schedules
    from shepherd_cli import control

    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="local-start-events")["QueueUrl"]

    def put(input_value: Any, at: str) -> None:
        event = schedules.firing_event(
            "nightly_check", "nightly", input_value, account="000000000000",
            region="us-east-1", scheduled_time=at, execution_id="x", schedule_arn="arn",
        )  # fmt: skip
        event.pop("account")  # as moto's EventBridge delivers it
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(event))

    def relayed() -> None:
        stop = threading.Event()
        thread = threading.Thread(target=control.relay_start_events, args=(url, stop))
        thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            attributes = sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )["Attributes"]
            if not any(int(v) for v in attributes.values()):
                break
            time.sleep(0.05)
        stop.set()
        thread.join(timeout=10)

    put({"amount": 10**9}, "2026-11-26T01:00:00Z")  # a past firing, forged input
    put(None, "2199-11-26T01:00:00Z")  # the key of a real future firing
    relayed()
    assert _workflows() == []
    put(None, "2026-11-26T01:00:00Z")
    relayed()
    (started,) = _workflows()
    assert started["idempotency_key"] == "schedule:nightly:2026-11-26T01:00:00Z"
