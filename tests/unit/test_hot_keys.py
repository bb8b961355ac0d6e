"""Write-sharded keys hold the design load (issue 41.2): at 5,000 starts a second from one
caller, each shard of a key one caller's every workflow writes takes at most half a
partition's 1,000 write units a second. The shard is a hash of the workflow id, so its share is
measured over many ids, not assumed even."""

from __future__ import annotations

from collections import Counter

from shepherd.ids import derived_id
from shepherd.keys import INBOX_SHARDS, inbox_pk, inbox_shard

STARTS_PER_SECOND = 5000
PARTITION_WCU = 1000
IDS = 50_000


def _busiest_share(shard_of: object) -> float:
    counts: Counter[int] = Counter(
        shard_of(derived_id("caller-1", f"order-{n}"))  # type: ignore[operator]
        for n in range(IDS)
    )
    return max(counts.values()) / IDS


def test_a_principal_on_every_approval_takes_at_most_half_an_inbox_partition() -> None:
    """Every start waits on an approval its owner may answer: one inbox entry added when the
    step starts waiting and taken out when it ends (2 index writes an approval)."""
    writes = 2 * STARTS_PER_SECOND
    busiest = writes * _busiest_share(inbox_shard)
    assert busiest <= PARTITION_WCU / 2, (INBOX_SHARDS, busiest)
    # Every shard is a partition key of its own.
    assert len({inbox_pk("owner", k) for k in range(INBOX_SHARDS)}) == INBOX_SHARDS
