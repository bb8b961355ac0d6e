"""The PoolControl port on AWS: a pool's Lambda SQS event source mapping, enabled or not.

Disabling a mapping stops its pollers (no invocations, no charge); the messages stay in the
queue until it is enabled again. The mapping ids come from the deployment (settings).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shepherd.errors import DeliveryError


class EventSourceMappingControl:
    def __init__(self, client: Any, mappings: Mapping[str, str]) -> None:
        self._client = client
        self._mappings = dict(mappings)

    def set_enabled(self, pool: str, enabled: bool) -> None:
        uuid = self._mappings.get(pool)
        if uuid is None:
            raise DeliveryError(f"no event source mapping configured for pool '{pool}'")
        try:
            self._client.update_event_source_mapping(UUID=uuid, Enabled=enabled)
        except (ClientError, BotoCoreError) as exc:
            raise DeliveryError(f"pool '{pool}': {exc}") from exc
