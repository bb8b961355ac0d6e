"""The scale model's assumptions, each with its source or the reason for it, and where they
could be wrong: one list, printed in docs/benchmarks.md by `make scale`."""

from __future__ import annotations

# (what, the model's value, source or why)
ASSUMPTIONS: list[tuple[str, str, str]] = [
    (
        "The subset",
        "1 (and 2) of 128 shard groups, 256 watch shards, at the design load's per-group rate; "
        "counts divided by the fraction f to read as the whole system",
        "one process cannot hold a million workflows; a group's workflows, items and watch "
        "shards are its own, so a whole group is exact (the two-size check below)",
    ),
    (
        "Shared partitions",
        "a partition no group owns (list index, POOLS, CONFIG#, LEASE#, DEF#) keeps its "
        "1,000 / 3,000 budget over 1/f seconds of the subset's requests (128 s): the same count "
        "and spread as the whole system's in one second; a list partition's factor measured "
        "from the engine's own items for 50,000 sample ids of every group",
        "issue 23.9: their utilization must be the design load's. Counting each request 1/f "
        "times in one second would give the same mean but sqrt(1/f) times the noise",
    ),
    (
        "Partition limits",
        "1,000 WRU and 3,000 RRU a second per partition, per 1-second window; no burst credit; "
        "an item collection capped as one partition (no split for heat)",
        "DynamoDB Developer Guide (throttling); burst and split-for-heat left out on purpose "
        "(pessimistic; split for heat cannot help a growing sort key anyway)",
    ),
    (
        "Units",
        "1 WRU per started KB of the larger image (x2 in a transaction), a lost condition the "
        "existing item's size; 1 index WRU per entry added or removed, 2 when its key "
        "changes, 1 for a projected change; 1 RRU per 4 KB consistent (0.5 eventual), "
        "BatchGetItem per item",
        "DynamoDB Developer Guide; tools/shepherd_bench/units.py (the same rules, tested)",
    ),
    (
        "Throttling",
        "a request over budget is rejected whole, consumes nothing; a base write whose index "
        "partition is over budget is rejected too; the SDK's standard mode retries 5 attempts "
        "after rand(0,1)*min(2^i, 20) s; a transaction is not retried by the SDK, the adapter "
        "retries it 3 times (25 ms x 2^n, full jitter); then StoreUnavailable(throttled)",
        "botocore retries documentation; GSI back-pressure (DynamoDB knowledge centre); the "
        "engine's wiring (max_attempts 5) and DynamoStore._transact. The retry quota (500 "
        "tokens per client) is not modelled",
    ),
    (
        "DynamoDB latency",
        "lognormal: GetItem median 3 ms, Query 4 ms, PutItem/UpdateItem 5 ms (sigma 0.5), "
        "BatchGetItem 6 ms, TransactWriteItems 10 ms; index propagation median 100 ms "
        "(sigma 0.6), in order per item",
        "single-digit milliseconds as AWS states; *estimates*, not measured on AWS",
    ),
    (
        "Lambda CPU",
        "0.4 ms of client CPU per AWS call, 0.2 ms of engine logic per record, 0.1 ms per look, "
        "0.5 ms per API request, on one full core, divided by memory / 1,769 MB (agents and "
        "the supervisor 256 MB, API and callbacks 2,048 MB: one vCPU); one CPU per invocation, "
        "its looks queue for it",
        "measured on this machine (shared/reference/scale-and-load.md); memory from the CDK "
        "app's config; Lambda's CPU share by memory (Lambda docs)",
    ),
    (
        "Lambda concurrency",
        "account 10,000 (a raised quota; the default is 1,000); agent pools MaximumConcurrency "
        "1,000 (the largest allowed; the CDK default of 10 cannot carry the load); both x f; "
        "no cold starts; invocation time = the requests' latencies + CPU + the agent's own work",
        "Lambda quotas; issue 23.7 makes MaxConcurrency settable",
    ),
    (
        "SQS and event source mappings",
        "one queue per pool; batch size 10, batching window 0 (deployed): a free slot takes what "
        "is visible at once, so batches are as small as the load allows; +300 concurrent "
        "invocations a minute after a stop, starting from 5 (x f); visibility timeout 6 x the "
        "function timeout, DLQ after 5 receives; SQS requests 8 ms",
        "Lambda Developer Guide (SQS scaling); the CDK app (agent_pool.py, topology.py). "
        "Pollers are not modelled, which gives the smallest batches (the costliest)",
    ),
    (
        "The agent handler",
        "records one after another; NotEnoughTime back at once, StoreUnavailable after 1 s, "
        "any other failure after the visibility timeout; deletes in one request. Its time-left "
        "check as deployed, on every pool",
        "functions/shepherd_handlers/agent.py. A callback step longer than an invocation needs "
        "at most an invocation to fit (the model found every such record deferred until its DLQ "
        "before that fix: tests/integration/test_time_left.py)",
    ),
    (
        "The supervisor",
        "EventBridge Scheduler every minute; its run sends the minute's ticks (batches of 10, "
        "each naming the moment it is due) while it sweeps group 0; the tick queue's mapping "
        "(batch and concurrency as the CDK app deploys them for the run's groups: one tick per "
        "invocation with several groups) invokes it; each invocation sweeps its ticks' groups "
        "with the real Supervisor.sweep_groups, looking ahead until 0.5 s before the next "
        "sweep, 8 looks in flight; a group outside the subset is swept by a stand-in that "
        "takes as long as a recent real sweep (its time, not its CPU: in its own invocation, as "
        "deployed, a group's looks use that invocation's CPU alone)",
        "functions/shepherd_handlers/supervisor.py, infra/shepherd_infra/supervisor.py; the "
        "groups share the mapping's concurrency, so the fan-out runs at full size",
    ),
    (
        "The load",
        "one caller, 5,000 starts a second (Poisson), each with an idempotency key; refused "
        "starts retried 4 times after 1-2 s; 1,000,000 open at the start in steady state: "
        "100,000 packing (HeartbeatSeconds 60, mean 20 s, lognormal sigma 1), 60,000 on a "
        "20-minute timer (1 % of payments), the rest waiting for a payment callback (mean from "
        "Little's law, ~168 s; TimeoutSeconds a day)",
        "DESIGN.md invariant 10 and issue 23; Little's law fixes the means; the open population "
        "is cloned from workflows the engine wrote, waits length-biased",
    ),
    (
        "Outside workers",
        "packers heartbeat every 30 s through the callback route and succeed; 100,000 steps at "
        "once cannot run inside Lambda (account and mapping limits), so they are a callback "
        "step's workers",
        "issue 23.7's batched heartbeat route does not exist yet: one request per heartbeat",
    ),
    (
        "Faults",
        "Lambda attempts: 0.5 % fail (retryable), 0.05 % hang until the function's timeout, "
        "0.05 % crash; packers: 0.5 % die silently (5 % in the overload runs)",
        "small rates, so that dead attempts are found among live ones",
    ),
    (
        "Memory",
        "a finished workflow's items are dropped from memory 2 minutes after it ends",
        "only a late duplicate reads them, and finds nothing instead of a finished workflow: "
        "both are dropped",
    ),
]

WRONG: list[str] = [
    "Latencies are estimates; a slower DynamoDB (tens of ms at p99) slows every sweep and "
    "invocation proportionally, and the supervisor's looks a second with it.",
    "A fixed one-second window without burst credit throttles sooner than DynamoDB, which "
    "keeps up to 300 s of unused capacity; split for heat would rescue a hot *workflow* "
    "collection (not a growing index key). Hottest-partition figures are upper bounds.",
    "Concurrency limits shared by every group are split evenly (x f): a queue with 31 slots "
    "waits longer than one with 1,000 at the same utilization, so queueing delays are upper "
    "bounds; the mapping's real pollers would fill batches more than the model does.",
    "The stand-in sweeps assume every group sees the same load as the modelled one; a hot "
    "group would make its neighbours' ticks wait longer.",
    "Lambda cold starts, the SDK's retry quota and the event relay's stream shards are not "
    "modelled; the relay is priced, not run.",
    "The open population is cloned: its items are the engine's, but its history (attempts, "
    "retries) is the template's; their units and sizes may differ slightly from workflows "
    "that lived their lives.",
    "A shared partition's window reaches back to its first request only (a key that lives "
    "shorter than 1/f seconds, as a breaker's 10 s counter slot, reads its rate over its "
    "life), and says no rate for its first 10 s, counting its units over 10 s then: a key "
    "that lives shorter reads low by its life / 10 s, and a 10 s span at 1 of 256 groups "
    "holds some 25 requests per 600 WCU a second, so its peaks carry about 20 % of noise.",
    "The table's and each index's throughput quota (on-demand: 40,000 units a second unless "
    "configured) and API Gateway's stage throttle are accounted a second at a time (10 s "
    "means) against the deployment's configured values, not enforced: a run over them says "
    "so (`scale.passed` false, the figure named) but its later seconds are not throttled "
    "as AWS would throttle them. Lambda's concurrency is enforced.",
    "Detection lags rest on about a hundred dead packers per 10-minute run (1 of 128 groups): "
    "a p99 of about a hundred samples is near their maximum. Before sweeps looked ahead, the "
    "p99 was 65.13 s against the 65 s target, within the run's noise either way; looking "
    "ahead takes the sweep interval out of it, which no amount of noise puts back.",
    "Only group 0 is modelled, and the scheduled run sweeps it itself: its first sweep of a "
    "minute starts with the run, the others' a tick's delivery later. Before one tick per "
    "invocation, a batch of ten ticks swept ten groups one after another: the model's group "
    "came first, so it never saw that the tenth was swept about 18 s late at the design load "
    "(2 s a sweep).",
    "`missed` calls a dead attempt not found if its deadline passed more than the sweeps' "
    "oldest due age p99 (or a minute) before the end; under overload an attempt a little "
    "older than that p99 may only be late, not starved (`overload_2x_8_shards`: one Lambda "
    "attempt).",
    "Everything rides on the engine as it is on this branch; a change to a hot path moves "
    "these numbers, which is the point of re-running `make scale`.",
]
