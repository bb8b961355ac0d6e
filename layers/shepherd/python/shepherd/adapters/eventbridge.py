"""The EventPublisher port on an EventBridge custom bus.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shepherd.errors import DeliveryError
from shepherd.model import DomainEvent

SOURCE = "shepherd"
PUT_EVENTS_BATCH = 10


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str) -> None:
        self._client = client
        self._bus = bus_name

    def publish(self, events: Sequence[DomainEvent]) -> None:
        failed = 0
        for start in range(0, len(events), PUT_EVENTS_BATCH):
            chunk = events[start : start + PUT_EVENTS_BATCH]
            entries = [
                {
                    "Source": SOURCE,
                    "DetailType": e.detail_type,
                    "Detail": json.dumps(e.detail, separators=(",", ":")),
                    "EventBusName": self._bus,
                }
                for e in chunk
            ]
            try:
                response = self._client.put_events(Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                raise DeliveryError(str(exc)) from exc
            failed += int(response.get("FailedEntryCount", 0))
        if failed:
            raise DeliveryError(f"{failed} event(s) not published")
