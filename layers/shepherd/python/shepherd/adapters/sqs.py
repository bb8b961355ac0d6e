"""The TaskQueue port on SQS: one queue per agent pool, batched sends.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shepherd.errors import DeliveryError
from shepherd.model import OutgoingTask
from shepherd.ports import Backlog

SQS_BATCH = 10


class SqsQueue:
    def __init__(self, client: Any, queue_urls: Mapping[str, str]) -> None:
        self._client = client
        self._urls = dict(queue_urls)

    def send(self, tasks: Sequence[OutgoingTask]) -> None:
        by_pool: dict[str, list[OutgoingTask]] = defaultdict(list)
        for task in tasks:
            by_pool[task.pool].append(task)
        failed: list[str] = []
        for pool, group in by_pool.items():
            url = self._urls.get(pool)
            if url is None:
                failed.append(f"{pool}: no queue configured")
                continue
            for start in range(0, len(group), SQS_BATCH):
                chunk = group[start : start + SQS_BATCH]
                entries = [
                    {
                        "Id": str(i),
                        "MessageBody": t.message.to_body(),
                        "DelaySeconds": t.delay_seconds,
                    }
                    for i, t in enumerate(chunk)
                ]
                try:
                    response = self._client.send_message_batch(QueueUrl=url, Entries=entries)
                except (ClientError, BotoCoreError) as exc:
                    failed.append(f"{pool}: {exc}")
                    continue
                failed += [
                    f"{pool}: {f.get('Message', f.get('Code'))}" for f in response.get("Failed", [])
                ]
        if failed:
            raise DeliveryError("; ".join(failed))

    def has(self, pool: str) -> bool:
        return pool in self._urls

    def backlog(self, pool: str) -> Backlog | None:
        url = self._urls.get(pool)
        if url is None:
            return None
        try:
            attributes = self._client.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
        except (ClientError, BotoCoreError):
            return None
        return Backlog(
            visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
            in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
            delayed=int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        )
