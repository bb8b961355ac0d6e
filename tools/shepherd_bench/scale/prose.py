"""The scale model's section of docs/benchmarks.md, from a run's numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Table = Callable[[list[str], list[list[Any]]], str]
RUN_HEADER = [
    "run", "groups, time", "starts/s", "open", "running", "steps/s", "detection (packers)",
    "detection (Lambda)", "hottest partition", "throttled", "lost", "sweeps",
    "invocations/tick", "$/hour",
]  # fmt: skip


def _verdict(holds: bool | None) -> str:
    return {True: "**holds**", False: "**missed**", None: "-"}[holds]


def _number(value: Any) -> str:
    """A figure for a table: thousands separated, small dollars in scientific notation."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and 0 < abs(value) < 0.01:
        return f"{value:.2e}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, str):
        return value
    return f"{value:g}"


def _rate_paragraph(rate: dict[str, Any], minutes: float) -> str:
    """The rate-limited run (issue 26.1): its claims a second against the limit."""
    per_minute = ", ".join(f"{m:,}" for m in rate["per_minute"])
    return (
        f"**rate_limited**: the `{rate['pool']}` pool limited to {rate['per_second']:,g} a "
        f"second (burst {rate['burst']}; {rate['shards']} bucket items, each handing out its "
        f"share f of its tokens in the subset) while the design load sends it 5,000 tasks a "
        f"second, for {minutes:g} simulated minutes: claims **{rate['achieved_per_second']:,} "
        f"a second** over {rate['whole_seconds']} whole seconds "
        f"({100 * rate['error_vs_limit']:.1f} % off the limit), "
        f"{rate['per_10s_min']:,}..{rate['per_10s_max']:,} a second over each 10 s, "
        f"by minute {per_minute} (single seconds {rate['per_second_min']:,}.."
        f"{rate['per_second_max']:,}: a subset's second holds about 2 slots of each item, "
        "so its single seconds are coarse where the whole system's, 250 a second an item, "
        f"are not). {rate['tasks']:,} tasks: {rate['messages_per_task']} messages and "
        f"{rate['limiter_writes_per_task']} limiter writes a task, {rate['held']:,} holds "
        f"with a ticket, {rate['dropped']:,} duplicates dropped."
    )


def _run_rows(runs: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for key, s in runs.items():
        c, w, d, sup, ddb = (
            s[k] for k in ("config", "workflows", "detection", "supervisor", "dynamodb")
        )
        rows.append(
            [
                f"`{key}`",
                f"{len(c['modelled_groups'])}/{c['sweep_groups']}, {c['simulated_minutes']:g} min",
                f"{w['starts_per_second']:,}",
                f"{w['open_workflows']:,}",
                f"{w['running_steps']:,}",
                f"{w['steps_succeeded_per_second']:,}",
                f"{d['packer']['last_sign_to_acted_s']['p99']} s ({d['packer']['found']}/{d['packer']['deaths']})",
                f"{d['lambda']['last_sign_to_acted_s']['p99']} s ({d['lambda']['found']}/{d['lambda']['deaths']})",
                f"{ddb['hottest_partition_utilization']} `{ddb['hottest_partition']}`",
                f"{ddb['throttled_requests']:,}",
                w["lost_workflows"],
                f"{sup['sweeps_per_group']:g} / {sup['sweeps_expected_per_group']:g}",
                sup["invocations_per_tick"],
                f"${s['cost']['usd_per_hour']:,.0f}",
            ]
        )
    return rows


def _findings(scale: dict[str, Any]) -> list[str]:
    """What the numbers say, computed (so a re-run keeps them true)."""
    runs = scale["runs"]
    out = []
    head = runs["design_load"]
    hsup = head["supervisor"]
    out.append(
        f"Design load (`design_load`): {head['workflows']['starts_per_second']:,} starts a "
        f"second accepted of 5,000 offered, {hsup['looks_per_second']:,} looks a second, a "
        f"sweep sees {hsup['due_per_sweep']['mean']} due entries on average (budget "
        f"{hsup['max_workflows']}, truncated in {hsup['truncated_share']:.0%} of sweeps), "
        f"detection lag p99 {head['detection']['packer']['last_sign_to_acted_s']['p99']} s, "
        f"the tick mapping (batch {hsup['tick_batch']}, MaximumConcurrency "
        f"{hsup['tick_concurrency']:g}) sweeps every group {hsup['sweeps_per_group']:g} times "
        f"in {hsup['sweeps_expected_per_group']:g} ticks."
    )
    unsharded = runs.get("list_unsharded")
    listing = {} if unsharded is None else unsharded["dynamodb"]["by_kind"].get("by_owner", {})
    if unsharded is not None and listing.get("peak_offered", 0) > 1:
        out.append(
            f"**The single caller's list partition caps the engine as it is on this branch** "
            f"(`list_unsharded`: one `OWNER#<owner>` partition). Its writes ask for "
            f"{listing['peak_offered']:.1f}x a partition's 1,000 WRU a second; of 5,000 starts "
            f"a second {unsharded['workflows']['starts_per_second']:,} are accepted; the rest "
            f"wait in SDK backoff (holding Lambda concurrency: peak "
            f"{unsharded['lambda']['account_peak_concurrency']:,} of 10,000) and are refused "
            f"({unsharded['workflows']['refused_starts']:,} gave up after 5 tries). Every "
            "write that changes a workflow's projected status (its finish) is throttled with "
            "it. The headline runs shard it per caller with the what-if (issue 23.7, on "
            "another branch)."
        )
    g32 = runs.get("groups_32")
    if g32 is not None:
        gsup = g32["supervisor"]
        out.append(
            f"32 sweep groups (`groups_32`): a sweep sees {gsup['due_per_sweep']['mean']} due "
            f"entries on average, lasts {gsup['sweep_duration_s']['p50']} s (p50), truncated "
            f"in {gsup['truncated_share']:.0%} of sweeps, oldest due age p99 "
            f"{gsup['oldest_due_age_s']['p99']} s, detection lag p99 "
            f"{g32['detection']['packer']['last_sign_to_acted_s']['p99']} s: at 256 MB a group "
            "of 8 shards takes longer than the 5-second interval to look at, hence 128 groups "
            "(`-c sweep_groups=128`) for the design load."
        )
    head_lag = head["detection"]["packer"]["last_sign_to_acted_s"]
    target = head["detection"]["packer"]["target_s"]
    quick = runs.get("interval_4s")
    interval = hsup.get("interval_s", 5)
    if head_lag["p99"] > target:
        line = (
            f"**Detection lag misses its target by {head_lag['p99'] - target:.2f} s** (p99 "
            f"{head_lag['p99']} s of {head_lag['count']:,} dead packers, target {target} s). "
            "A dead attempt's deadline is its last heartbeat + 60 s; the next sweep of its "
            f"group comes up to {interval:g} s later and its "
            "look takes its own latency, so the tick interval alone uses the 5 s the target "
            "leaves."
        )
    else:
        engine_lag = head["detection"].get("engine_detection_lag_s", {})
        line = (
            f"**Detection lag holds** (p99 {head_lag['p99']} s of {head_lag['count']:,} dead "
            f"packers, target {target} s; Lambda steps p99 "
            f"{head['detection']['lambda']['last_sign_to_acted_s']['p99']} s, target "
            f"{head['detection']['lambda']['target_s']} s). Each sweep looks ahead: it reads "
            "the entries due before the next sweep too and looks at each one at its due time "
            f"({hsup.get('looked_ahead', 0):,} of the run's looks were taken that way), so a "
            "deadline is acted on a look's latency after it passes (the engine's own "
            f"`DetectionLag` p99 {engine_lag.get('p99', 0)} s) instead of up to {interval:g} s "
            "later; an entry due in the last 0.5 s before the next sweep waits for it. A sweep "
            f"lasts {hsup['sweep_duration_s']['p50']} s (p50) of the {interval:g}-second "
            f"interval, {hsup.get('sweep_wait_s', {}).get('p50', 0)} s of it waiting."
        )
    if quick is not None:
        q = quick["detection"]["packer"]["last_sign_to_acted_s"]
        line += (
            f" With a sweep every 4 s (`interval_4s`, a what-if of the CDK app's "
            f"SWEEP_INTERVAL_SECONDS): p99 {q['p99']} s "
            f"({'holds' if q['p99'] <= target else 'still missed'}), at "
            f"${quick['cost']['usd_per_hour']:,.0f} an hour against "
            f"${head['cost']['usd_per_hour']:,.0f}."
        )
    out.append(line)
    return out


def section_text(
    scale: dict[str, Any], table: Table, assumptions: list[tuple[str, str, str]], wrong: list[str]
) -> str:
    sub, meta, runs = scale["subset"], scale["meta"], scale["runs"]
    f = sub["fraction"]
    groups = sub["sweep_groups"]
    lines = [
        "## Scale model (issue 23)",
        "",
        f"`make scale` (`python -m shepherd_bench.scale`; took {meta['wall_seconds']:,} s on "
        f"this machine, seed {meta['seed']}) runs the real engine — `build_engine` with "
        f"{sub['watch_shards']} watch shards, `Scheduler.start` behind the API function, "
        "`AgentRuntime.handle` behind each pool's event source mapping, `Callbacks.callback` "
        "behind the callback route, `Supervisor.sweep_group` behind the tick queue — over a "
        "store that models DynamoDB's partitions, over SQS and Lambda, in simulated time "
        "(greenlet tasks on a discrete-event loop, deterministic from the seed). **It runs a "
        f"subset: {sub['modelled_groups']} of {groups} shard groups at full density** "
        f"(f = 1/{round(1 / f)}: about {round(1_000_000 * f):,} open workflows and "
        f"{round(5000 * f):,} starts a second of the design load), divides counts by f to read "
        "as the whole design load, and keeps a shared partition's budget over 1/f seconds of "
        "the subset's requests (back to its first request at most: a short-lived key reads "
        "its rate over its life); the supervisor's tick fan-out runs at full size. "
        "Machine-readable: `scale`, `cost.at_load` and `cost.waiting_workflow_day_usd` in "
        "[`benchmarks.json`](benchmarks.json). **It exits non-zero when a target falls "
        f"short, naming it**: `scale.passed` is {str(scale.get('passed')).lower()}"
        + (f" (missed: {'; '.join(scale['missed'])})" if scale.get("missed") else "")
        + ".",
        "",
        f"**One caller, and its list index.** {scale['single_caller_list_index'][0].upper()}"
        f"{scale['single_caller_list_index'][1:]}: the headline keys come from `design_load`, "
        "where the single caller's list entries spread over 32 partitions as issue 23.7 asks "
        "(being built on another branch). `list_unsharded` is the same run without the "
        "what-if, as the engine on this branch stands; its figures are in the last column of "
        "the targets.",
        "",
        f"Runs: `design_load` is the engine and CDK app on this branch deployed with "
        f"`-c size=design_load` ({sub['watch_shards']} watch shards in {groups} sweep groups, "
        "1,000 concurrent batches a pool, the table's on-demand maximum, the stage throttle "
        "and the Lambda quota of `shepherd_infra.deployments.DESIGN_LOAD`: every limit is "
        "judged at exactly those values; the tick mapping as the CDK app deploys it for that "
        "many groups), "
        f"{runs['design_load']['config']['simulated_minutes']:g} simulated minutes of 5,000 "
        "starts a second; `subset_1`/`subset_2` repeat it shorter at 1 and 2 modelled groups (the "
        "per-group figures must not change); `stall` stops the inventory pool's mapping for 5 "
        "minutes; `overload_2x`/`_4x` cut the sweep budget to a half and a quarter of what the "
        "design-load sweeps needed, with ten times the packer deaths (the `_8_shards` ones with "
        "32 groups of 8 shards, at the same budget per shard); `list_unsharded` drops "
        "the list-index what-if (a no-op since the engine shards the list index itself: the "
        "same engine as `design_load`, shorter); `groups_32` deploys 32 sweep groups; "
        "`interval_4s` sweeps every 4 s instead of 5; `rate_limited` limits the checks pool to "
        "half the tasks it is sent (issue 26.1); `load10` is ten times the design load and "
        "`default_deployment` the design load, both against the default size (`-c "
        "size=default`: 100 requests a second at the stage, 40,000 units a second at the "
        "table, 1,000 concurrent Lambdas), which must fail and say what broke first. Every run "
        "applies the agent handler's time-left check as deployed, and every sweep looks ahead "
        "until just before the next one, as the supervisor handler does.",
        "",
        "**Probes** (`shepherd_bench.scale.probes`: the real engine on the in-memory store, "
        "metered as DynamoDB bills it, on a manual clock; what a subset run cannot show): "
        "`scale.reads_per_step` is the read units a step of a 90-step chain and of a 90-step "
        "fan-out with its join (the target, 12 at 90 wide, beside the chain's); "
        "`scale.map_items_per_second` the items a second one map can run with every partition "
        "it writes at most half full (from its write units per item on each partition); "
        "`scale.throttle_episode` what a 300 s throttling episode on a workflow's partition, "
        "from its agent's start, costs 20 one-step workflows (HeartbeatSeconds 20): attempts "
        "consumed, agents' successes lost, workflows unwound (all three must be 0).",
        "",
        "### Targets",
        "",
        table(
            ["target", "limit", "design load", "verdict", "list index unsharded"],
            [
                [
                    t["target"],
                    t["limit"],
                    _number(t["value"]),
                    _verdict(t["holds"]),
                    _number(t["list_unsharded"]),
                ]
                for t in scale["targets"]
            ],
        ),
        "",
        "### What the runs show",
        "",
        *[f"* {x}" for x in _findings(scale)],
        "",
        "### Runs",
        "",
        "Figures at the whole design load (subset counts / f). Detection lag: from the dead "
        "attempt's last sign of life (its last heartbeat, or its claim) to the supervisor's "
        "write that times it out, p99 (found / dead); packers have HeartbeatSeconds 60 "
        "(target 65 s), Lambda steps TimeoutSeconds 20 (25 s). Sweeps: per group, done / ticks.",
        "",
        table(RUN_HEADER, _run_rows(runs)),
    ]
    if scale.get("subset_check"):
        one = runs["subset_1"]["config"]
        lines += [
            "",
            f"### The subset at two sizes (1 and 2 of {one['sweep_groups']} groups, "
            f"{one['simulated_minutes']:g} minutes)",
            "",
            "Per group: a whole-system figure divided by the groups, a supervisor figure per "
            "modelled group.",
            "",
            table(
                ["per group", f"1 of {one['sweep_groups']}", f"2 of {one['sweep_groups']}"],
                [[r["figure"], r["1_group"], r["2_groups"]] for r in scale["subset_check"]],
            ),
        ]
    for key in ("overload_2x", "overload_4x", "overload_2x_8_shards", "overload_4x_8_shards"):
        if key in runs:
            s = runs[key]
            det = s["detection"]
            shards = det["by_shard"]
            found = sum(v["found"] for v in shards.values())
            dead = sum(v["dead"] for v in shards.values())
            lines += [
                "",
                f"**{key}** (budget {s['supervisor']['max_workflows']} looks a sweep): dead "
                f"attempts (packers and Lambda steps) found {found} of {dead} whose deadline "
                f"passed more than {det['grace_s']} s (a minute, or the sweeps' oldest due age "
                f"p99 if longer) before the end, over {len(shards)} shards "
                f"({'every shard' if det['shards_all_found'] else 'NOT every shard'}; not found: "
                f"{det['packer']['missed']} packers, {det['lambda']['missed']} Lambda steps); "
                "packers' "
                f"last sign to acted p50 {det['packer']['last_sign_to_acted_s']['p50']} s, p99 "
                f"{det['packer']['last_sign_to_acted_s']['p99']} s, max "
                f"{det['packer']['last_sign_to_acted_s']['max']} s; oldest due age p99 "
                f"{s['supervisor']['oldest_due_age_s']['p99']} s.",
            ]
    stall = runs.get("stall", {}).get("stall")
    if stall:
        lines += [
            "",
            f"**stall**: the `{stall['pool']}` pool's mapping stopped for {stall['stalled_seconds']:g} s: "
            f"{stall['tasks']:,} tasks sent during the stall (in the subset) took {stall['messages']:,} "
            f"messages: **{stall['extra_messages_per_task']} extra per task** (every task of the pool "
            f"in the run: {stall['all_tasks_extra']}).",
        ]
    rate = runs.get("rate_limited", {}).get("rate_limit")
    if rate:
        minutes = runs["rate_limited"]["config"]["simulated_minutes"]
        lines += ["", _rate_paragraph(rate, minutes)]
    cost = runs["design_load"]["cost"]
    other = runs.get("list_unsharded")
    ocost = None if other is None else other["cost"]
    kinds = sorted(cost["usd_per_hour_by_kind"])

    def both(key: str) -> list[Any]:
        return [_number(cost[key]), "-" if ocost is None else _number(ocost[key])]

    wait = cost["waiting_workflow_day"]
    lines += [
        "",
        "### Cost at load",
        "",
        "Priced with `prices.py` at the batching the model observed (the mean records per agent "
        "invocation are in `cost.at_load.mean_agent_batch`); the supervisor's invocations, its "
        "ticks and the schedule ran at full size, everything else is the subset's divided by f. "
        "`cost.at_load.usd_per_million_steps` is the design-load run's.",
        "",
        table(
            ["$ per hour", "design load", "list index unsharded"],
            [
                [
                    k,
                    cost["usd_per_hour_by_kind"][k],
                    "-" if ocost is None else ocost["usd_per_hour_by_kind"].get(k, 0),
                ]
                for k in kinds
            ]
            + [
                ["**total**", *both("usd_per_hour")],
                ["steps an hour", *both("steps_per_hour")],
                ["**$ per million steps**", *both("usd_per_million_steps")],
                [
                    "$ per million steps without the API ingress",
                    *both("usd_per_million_steps_without_ingress"),
                ],
            ],
        ),
        "",
        "A workflow waiting a day on a callback (`cost.waiting_workflow_day_usd`): the looks "
        "the deadline rule gives it (the one when its wait begins, measured per wait: "
        f"{wait['looks_when_a_wait_begins']}, and one at its TimeoutSeconds of a day), priced "
        "at what a look cost in the run (the supervisor's DynamoDB units, its invocations and "
        f"ticks, per look: ${wait['usd_per_look']:.2e}), plus a day of its items' and index "
        f"entries' storage (${wait['storage_usd_per_day']:.2e}): **${wait['usd']:.2e} a day** "
        f"({wait['looks_per_day']} looks; the target is $0.0001, the engine at 7e1e3db spent "
        "$0.003-0.005 in looks every G). Step Functions charges nothing while a task waits.",
        "",
        "### Assumptions",
        "",
        table(["what", "the model", "source or why"], [list(a) for a in assumptions]),
        "",
        "### Where the model could be wrong",
        "",
        *[f"* {w}" for w in wrong],
    ]
    return "\n".join(lines)
