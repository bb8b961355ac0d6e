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
    as_is, designed = runs["as_is"], runs["as_designed"]
    kinds = as_is["dynamodb"]["by_kind"]
    listing = kinds.get("by_owner", {})
    if listing.get("peak_offered", 0) > 1:
        out.append(
            f"**The single caller's list partition caps the engine as it is.** Its writes ask for "
            f"{listing['peak_offered']:.1f}x a partition's 1,000 WRU a second; what is left of "
            f"5,000 starts a second is {as_is['workflows']['starts_per_second']:,} accepted; the "
            f"rest wait in SDK backoff (holding Lambda concurrency: peak "
            f"{as_is['lambda']['account_peak_concurrency']:,} of 10,000) and are refused "
            f"({as_is['workflows']['refused_starts']:,} gave up after 5 tries). Every write that "
            "changes a workflow's projected status (its finish) is throttled with it."
        )
    sup = as_is["supervisor"]
    if sup["sweeps_per_group"] < 0.9 * sup["sweeps_expected_per_group"]:
        out.append(
            f"**The tick fan-out does not sweep every group every {5} s.** The tick queue's mapping "
            f"(batch {sup['tick_batch']}, MaximumConcurrency {sup['tick_concurrency']:g}) runs "
            f"{sup['invocations_per_tick']} invocations per tick, each sweeping "
            f"{sup['groups_per_invocation']} groups one after another: a group is swept "
            f"{sup['sweeps_per_group']:g} times in a run that has {sup['sweeps_expected_per_group']:g} ticks."
        )
    dsup = designed["supervisor"]
    out.append(
        f"As designed (list index sharded, tick concurrency = groups): "
        f"{designed['workflows']['starts_per_second']:,} starts a second, "
        f"{dsup['looks_per_second']:,} looks a second, a sweep sees {dsup['due_per_sweep']['mean']} "
        f"due entries on average (budget {dsup['max_workflows']}, truncated in "
        f"{dsup['truncated_share']:.0%} of sweeps), detection lag p99 "
        f"{designed['detection']['packer']['last_sign_to_acted_s']['p99']} s."
    )
    handler = runs.get("handler_as_deployed")
    if handler is not None:
        deferred = handler["workflows"]["agent_outcomes"].get("NotEnoughTime", 0)
        dead = sum(v["dead_lettered"] for v in handler["lambda"].values() if isinstance(v, dict))
        out.append(
            f"**The agent handler's time-left check never claims a long callback step** "
            f"(`handler_as_deployed`): `pack_order` (TimeoutSeconds 3,600) and `take_payment` "
            f"(86,400) need more than an invocation's 900 s, so their records are deferred "
            f"({deferred:,} NotEnoughTime in {handler['config']['simulated_minutes']:g} minutes) "
            f"until they reach the DLQ ({dead:,} dead-lettered); the other runs exempt those pools."
        )
    return out


def section_text(
    scale: dict[str, Any], table: Table, assumptions: list[tuple[str, str, str]], wrong: list[str]
) -> str:
    sub, meta, runs = scale["subset"], scale["meta"], scale["runs"]
    lines = [
        "## Scale model (issue 23)",
        "",
        f"`make scale` (`python -m shepherd_bench.scale`; took {meta['wall_seconds']} s on this "
        f"machine, seed {meta['seed']}) runs the real engine — `build_engine` with 256 watch "
        "shards, `Scheduler.start` behind the API function, `AgentRuntime.handle` behind each "
        "pool's event source mapping, `Callbacks.callback` behind the callback route, "
        "`Supervisor.sweep_group` behind the tick queue — over a store that models DynamoDB's "
        "partitions, over SQS and Lambda, in simulated time (greenlet tasks on a "
        "discrete-event loop, deterministic from the seed). **It runs a subset: "
        f"{sub['modelled_groups']} of {sub['sweep_groups']} shard groups at full density** in the "
        "headline run (f = 1/32: about 31,000 open workflows, 156 starts a second; 1 of 128 in "
        "the as-designed runs), divides counts by f to read as the whole design load, and keeps "
        "a shared partition's budget over 1/f seconds of the subset's requests. "
        "Machine-readable: `scale` and `cost.at_load` in [`benchmarks.json`](benchmarks.json).",
        "",
        "Runs: `as_is` is the engine and CDK app on this branch, 32 sweep groups (the headline "
        "keys). The `as_designed` runs add, in the model's process only, what the design "
        "describes and this branch does not have yet: the list index sharded 32 ways per caller "
        "(issue 23.7, being built) and one supervisor invocation per group and tick (tick batch "
        "1, `MaximumConcurrency` = groups; the CDK app deploys batch 10 and 2); "
        "`as_designed_32` keeps 32 groups, the others use 128. The short runs check the subset "
        "at two sizes; `stall` stops the inventory pool's mapping for 5 minutes; "
        "`overload_2x`/`_4x` cut the sweep budget to a half and a quarter of what the "
        "as-designed sweeps needed, with ten times the packer deaths; `handler_as_deployed` "
        "applies the agent handler's time-left check to every pool.",
        "",
        "### Targets",
        "",
        table(
            ["target", "limit", "as is", "verdict", "as designed"],
            [
                [t["target"], t["limit"], t["as_is"], _verdict(t["holds"]), t["as_designed"]]
                for t in scale["targets"]
            ],
        ),
        "",
        "### What the runs show",
        "",
        *[f"* {f}" for f in _findings(scale)],
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
        lines += [
            "",
            "### The subset at two sizes (as designed, 1 and 2 of 128 groups)",
            "",
            "Per group: a whole-system figure divided by the groups, a supervisor figure per "
            "modelled group.",
            "",
            table(
                ["per group", "1 of 32 groups", "2 of 32 groups"],
                [[r["figure"], r["1_group"], r["2_groups"]] for r in scale["subset_check"]],
            ),
        ]
    for key in ("overload_2x", "overload_4x"):
        if key in runs:
            s = runs[key]
            det = s["detection"]
            shards = det["by_shard"]
            found = sum(v["found"] for v in shards.values())
            dead = sum(v["dead"] for v in shards.values())
            lines += [
                "",
                f"**{key}** (budget {s['supervisor']['max_workflows']} looks a sweep): dead packer "
                f"attempts found {found} of {dead} whose deadline passed a minute before the end, "
                f"over {len(shards)} shards ({'every shard' if det['shards_all_found'] else 'NOT every shard'}); "
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
    cost = runs["as_is"]["cost"]
    dcost = runs["as_designed"]["cost"]
    kinds = sorted(set(cost["usd_per_hour_by_kind"]) | set(dcost["usd_per_hour_by_kind"]))
    lines += [
        "",
        "### Cost at load",
        "",
        "Priced with `prices.py` at the batching the model observed (the mean records per agent "
        "invocation are in `cost.at_load.mean_agent_batch`); the supervisor's invocations, its "
        "ticks and the schedule ran at full size, everything else is the subset's divided by f.",
        "",
        table(
            ["$ per hour", "as is", "as designed"],
            [
                [k, cost["usd_per_hour_by_kind"].get(k, 0), dcost["usd_per_hour_by_kind"].get(k, 0)]
                for k in kinds
            ]
            + [
                ["**total**", cost["usd_per_hour"], dcost["usd_per_hour"]],
                [
                    "$ per million steps",
                    cost["usd_per_million_steps"],
                    dcost["usd_per_million_steps"],
                ],
                [
                    "$ per million steps without the API ingress",
                    cost["usd_per_million_steps_without_ingress"],
                    dcost["usd_per_million_steps_without_ingress"],
                ],
            ],
        ),
        "",
        "A workflow waiting a day on a callback (`cost.waiting_workflow_day_usd`): the looks "
        "the deadline rule gives it (the one when its wait begins, measured per wait, and one "
        "at its TimeoutSeconds), priced at what a look cost in the run (the supervisor's "
        "DynamoDB units, its invocations and ticks, per look), plus a day of its items' and "
        "index entries' storage: "
        f"as is ${cost['waiting_workflow_day']['usd']:.2e} "
        f"({cost['waiting_workflow_day']['looks_per_day']} looks, "
        f"${cost['waiting_workflow_day']['usd_per_look']:.2e} a look), as designed "
        f"${dcost['waiting_workflow_day']['usd']:.2e}. Step Functions charges nothing while a task waits.",
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
