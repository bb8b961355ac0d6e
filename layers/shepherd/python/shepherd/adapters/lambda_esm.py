"""The PoolControl port on AWS: a pool's Lambda SQS event source mapping, enabled or not.

Disabling a mapping stops its pollers (no invocations, no charge); the messages stay in the
queue until it is enabled again. A deployment names each pool's agent function
`<function prefix><pool>` and the mapping is found by that name (one lookup per pool and
sandbox), so no list of mapping ids grows in the environment; ids given directly (`mappings`)
are used as they are.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shepherd.errors import DeliveryError


class EventSourceMappingControl:
    def __init__(
        self, client: Any, mappings: Mapping[str, str], function_prefix: str | None = None
    ) -> None:
        self._client = client
        self._mappings = dict(mappings)
        self._function_prefix = function_prefix

    def set_enabled(self, pool: str, enabled: bool) -> None:
        uuid = self._mapping(pool)
        try:
            self._client.update_event_source_mapping(UUID=uuid, Enabled=enabled)
        except (ClientError, BotoCoreError) as exc:
            raise DeliveryError(f"pool '{pool}': {exc}") from exc

    def _mapping(self, pool: str) -> str:
        uuid = self._mappings.get(pool)
        if uuid is not None:
            return uuid
        if self._function_prefix is None:
            raise DeliveryError(f"no event source mapping configured for pool '{pool}'")
        function = self._function_prefix + pool
        try:
            found = self._client.list_event_source_mappings(FunctionName=function)
        except (ClientError, BotoCoreError) as exc:
            raise DeliveryError(f"pool '{pool}': mapping of {function} not found: {exc}") from exc
        uuids = [str(m["UUID"]) for m in found.get("EventSourceMappings", [])]
        if len(uuids) != 1:
            raise DeliveryError(
                f"pool '{pool}': expected one event source mapping on {function}, found "
                f"{len(uuids)}"
            )
        self._mappings[pool] = uuids[0]
        return uuids[0]
