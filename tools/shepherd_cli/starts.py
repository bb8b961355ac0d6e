"""`shepherd replay-starts`: make the starts that could not be made (docs/api.md, Events).

A start that failed lands in one of two queues: the start failures' queue (the events
function's on-failure destination: Lambda's record of an invocation that failed after its
retries, the event as `requestPayload`; and the start rule's DLQ: an event EventBridge could
not deliver, as it was) or the schedules' dead-letter queue (a firing Scheduler could not
deliver: the event as the schedule built it). Each message's event is handed to the events
function again, synchronously, through the one start path: its owner from its source, its
idempotency key from its detail or its id (`event:<id>`; a firing's `schedule:<name>:<time>`),
so an event whose workflow was in fact started returns that workflow and starts nothing new.
A message is deleted once the function answered it (accepted, skipped or rejected: a rejected
event would be rejected again); one whose invocation failed stays for the next replay.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

Event = dict[str, Any]


def event_of(body: str) -> Event | None:
    """The start event a failure message holds, or None (not one: left in the queue)."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    payload = value.get("requestPayload")  # Lambda's on-failure record
    if isinstance(payload, dict):
        value = payload
    if "detail-type" in value and "detail" in value:
        return value
    return None


@dataclass
class Replay:
    """What a replay did, message by message (`lines`) and in sum."""

    started: int = 0  # a new workflow
    already: int = 0  # its workflow had been started: nothing new
    skipped: int = 0  # a paused schedule's firing
    rejected: int = 0  # the event is bad: replaying it again would not help
    failed: int = 0  # the invocation failed again: the message stays
    unreadable: int = 0  # not a start event: the message stays
    lines: list[str] = field(default_factory=list)

    @property
    def messages(self) -> int:
        return (
            self.started + self.already + self.skipped + self.rejected + self.failed
        ) + self.unreadable


def invoker(lambda_client: Any, function: str) -> Callable[[Event], Event | None]:
    """Invoke the events function synchronously with one event: its reply, or None when the
    invocation failed (a function error)."""

    def invoke(event: Event) -> Event | None:
        response = lambda_client.invoke(
            FunctionName=function,
            InvocationType="RequestResponse",
            Payload=json.dumps(event).encode(),
        )
        payload = response["Payload"].read()
        if response.get("FunctionError"):
            return None
        reply = json.loads(payload or b"null")
        return reply if isinstance(reply, dict) else None

    return invoke


def _describe(event: Event) -> str:
    found = event.get("detail")
    detail: dict[str, Any] = found if isinstance(found, dict) else {}
    key = detail.get("idempotency_key") or f"event:{event.get('id')}"
    return f"{event.get('source')} {detail.get('type')} {key}"


def replay_starts(
    sqs: Any,
    queue_urls: Iterable[str],
    invoke: Callable[[Event], Event | None],
    *,
    limit: int = 1000,
) -> Replay:
    """Drain each queue (at most `limit` messages in all): invoke each message's event, delete
    the message once answered. Messages left (failed, unreadable) come back after their
    visibility timeout, for the next replay."""
    report = Replay()
    for url in queue_urls:
        seen: set[str] = set()
        while report.messages < limit:
            got = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=60
            )
            batch = [m for m in got.get("Messages", []) if m["MessageId"] not in seen]
            if not batch:
                break
            for message in batch:
                seen.add(message["MessageId"])
                _replay_one(sqs, url, message, invoke, report)
    return report


def _replay_one(
    sqs: Any,
    url: str,
    message: dict[str, Any],
    invoke: Callable[[Event], Event | None],
    report: Replay,
) -> None:
    event = event_of(message["Body"])
    if event is None:
        report.unreadable += 1
        report.lines.append(f"left    message {message['MessageId']}: not a start event")
        return
    what = _describe(event)
    reply = invoke(event)
    if reply is None:
        report.failed += 1
        report.lines.append(f"failed  {what}: the events function failed again (message kept)")
        return
    status = reply.get("status")
    if status == "accepted":
        if reply.get("created"):
            report.started += 1
            report.lines.append(f"started {what} -> {reply.get('workflow_id')}")
        else:
            report.already += 1
            report.lines.append(f"already {what} -> {reply.get('workflow_id')} (started before)")
    elif status == "skipped":
        report.skipped += 1
        report.lines.append(f"skipped {what}: its schedule is paused")
    else:
        report.rejected += 1
        report.lines.append(f"refused {what}: {reply.get('code')} {reply.get('message', '')}")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


__all__ = ["Replay", "event_of", "invoker", "replay_starts"]
