"""A map's item units are read with consistent reads (issue 24): the process that counts a
map's last item assembles the step's output from every item unit right after that item's
result was written, and an unwinding chooses the items to undo from them. DynamoDB's Query is
eventually consistent unless asked: it may return an item unit as it was before its last
write, and the last item's output was then `null` in the map's output, as if it had failed
within the tolerance (found running the transcode example on DynamoDB's semantics).

The table here answers an eventually consistent Query as a replica that has not applied any
item's last write yet (allowed: DynamoDB bounds no staleness), and a consistent one as it is.
"""

from __future__ import annotations

from typing import Any

from shepherd.model import WorkflowStatus
from shepherd_examples.agents import ledger
from support import moto_harness

# The transcode example: 47 s in chunks of 6 s, eight items of its map step.
VIDEO = {"video_id": "keynote", "duration_seconds": 47, "chunk_seconds": 6}
MAP_STEP, VIDEO_CHUNKS = "encode_chunks", 8


class LaggingReplica:
    """A DynamoDB client whose eventually consistent queries miss each item's last write."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._before: dict[tuple[str, str], dict[str, Any] | None] = {}
        self.stale_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _remember(self, table: str, key: dict[str, Any]) -> None:
        old = self._client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        self._before[(key["pk"]["S"], key["sk"]["S"])] = old

    def update_item(self, **params: Any) -> Any:
        self._remember(params["TableName"], params["Key"])
        return self._client.update_item(**params)

    def put_item(self, **params: Any) -> Any:
        item = params["Item"]
        self._remember(params["TableName"], {"pk": item["pk"], "sk": item["sk"]})
        return self._client.put_item(**params)

    def query(self, **params: Any) -> Any:
        answer = self._client.query(**params)
        if params.get("ConsistentRead") or params.get("IndexName"):
            return answer
        stale = []
        for item in answer.get("Items", []):
            key = (item["pk"]["S"], item["sk"]["S"])
            if key in self._before:
                self.stale_reads += 1
                if self._before[key] is not None:
                    stale.append(self._before[key])
            else:
                stale.append(item)
        return {**answer, "Items": stale, "Count": len(stale)}


def test_a_maps_output_holds_every_items_result_however_late_a_replica_is() -> None:
    ledger.reset()
    with moto_harness() as h:
        replica = LaggingReplica(h.store._client)  # type: ignore[attr-defined]
        h.store._client = replica  # type: ignore[attr-defined]
        wf = h.start("transcode_video", VIDEO)
        state = h.run(wf)
        assert state.workflow.status is WorkflowStatus.SUCCEEDED
        output = h.output(wf)
        assert None not in output[MAP_STEP]  # every chunk succeeded: none may read as failed
        assert [chunk["chunk"] for chunk in output[MAP_STEP]] == list(range(VIDEO_CHUNKS))
        assert output["package_video"]["software_encoded"] == []  # no chunk taken for failed
