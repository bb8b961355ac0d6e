"""The scale model's numbers: printed, merged into docs/benchmarks.json, and its section of
docs/benchmarks.md (between markers, so `make bench` keeps it and `make scale` replaces it).

The headline keys (`scale.*`, `cost.at_load`, `cost.waiting_workflow_day_usd`) come from the
run of the engine as it is on this branch; every run's figures are kept beside them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shepherd_bench.scale.assumptions import ASSUMPTIONS, WRONG
from shepherd_bench.scale.prose import section_text
from shepherd_bench.scale.whatif import LIST_SHARDS

BEGIN = "<!-- scale model: begin (make scale writes this section) -->"
END = "<!-- scale model: end -->"
TARGET_STARTS = 5000
TARGET_OPEN = 1_000_000
TARGET_RUNNING = 100_000
TARGET_HOTTEST = 0.8
# Keys one caller's every workflow writes, write-sharded: each shard at most half a partition
# at the design load (issue 41.2), so a burst or an uneven hash has room. The list indexes
# (`OWNER#<owner>#<k>`) and the approval inbox (`INBOX#<principal>#<k>`), by index name.
TARGET_SHARDED = 0.5
SHARDED_FAMILIES = ("by_owner", "by_status", "by_type", "by_type_status", "inbox")
TARGET_EXTRA = 1.5
TARGET_WAITING_DAY_USD = 0.0001
PER_GROUP = (
    ("starts a second", ("workflows", "starts_per_second"), True),
    ("steps succeeded a second", ("workflows", "steps_succeeded_per_second"), True),
    ("looks a second", ("supervisor", "looks_per_second_per_group"), False),
    ("due per sweep (mean)", ("supervisor", "due_per_sweep", "mean"), False),
    ("sweep duration p50 (s)", ("supervisor", "sweep_duration_s", "p50"), False),
    ("oldest due age p99 (s)", ("supervisor", "oldest_due_age_s", "p99"), False),
    ("hottest watch shard", ("dynamodb", "by_kind", "watch", "peak"), False),
    ("hottest list partition", ("dynamodb", "by_kind", "by_owner", "peak"), False),
    ("DynamoDB WRU a second", ("dynamodb", "wru_per_second"), True),
    ("detection lag p99 (s)", ("detection", "packer", "last_sign_to_acted_s", "p99"), False),
)


def _get(d: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        d = d.get(key, {}) if isinstance(d, dict) else {}
    return d if d != {} else None


HEADLINE = "design_load"  # the run the key paths come from
COMPARED = "list_unsharded"  # the same, the list index as the engine keys it on main


def list_index(s: dict[str, Any]) -> str:
    """How a run keyed the single caller's list index (stated beside `scale.single_caller`)."""
    c = s["config"]
    if c.get("list_sharded_by_engine"):
        return "sharded per caller by the engine"
    if c.get("list_sharded_what_if"):
        return (
            f"sharded per caller by the what-if (OWNER#<owner>#<k>, {LIST_SHARDS} shards, "
            "applied in the model's process; the engine on this branch keys one OWNER#<owner> "
            "partition and another branch shards it)"
        )
    return "one OWNER#<owner> partition (the engine on this branch)"


def headline(s: dict[str, Any], stall: dict[str, Any] | None) -> dict[str, Any]:
    """The issue's key paths, from one run (and the stall run's extra messages)."""
    w, det, sup, ddb, cost = (
        s[k] for k in ("workflows", "detection", "supervisor", "dynamodb", "cost")
    )
    return {
        "open_workflows": w["open_workflows"],
        "running_steps": w["running_steps"],
        "starts_per_second": w["starts_per_second"],
        "single_caller": s["config"].get("single_caller", True),
        "single_caller_list_index": list_index(s),
        "detection_lag_p99_seconds": det["packer"]["last_sign_to_acted_s"]["p99"],
        "detection_lag_samples": det["packer"]["last_sign_to_acted_s"]["count"],
        "detection_lag_target_seconds": det["packer"]["target_s"],
        "hottest_partition_utilization": ddb["hottest_partition_utilization"],
        "throttled_requests": ddb["throttled_requests"],
        "lost_workflows": w["lost_workflows"],
        "extra_messages_per_task": None if stall is None else stall["extra_messages_per_task"],
        "supervisor_invocations_per_tick": sup["invocations_per_tick"],
        "usd_per_hour": cost["usd_per_hour"],
        **limit_figures(s),
    }


def limit_figures(s: dict[str, Any]) -> dict[str, Any]:
    """The issue's figures of the limits outside the engine and the hottest keys, from one
    run (older runs' figures have none: None)."""
    lim = s.get("limits")
    if lim is None:
        return {
            "hot_keys": None,
            "table_units_per_second": None,
            "first_bottleneck": None,
            "sharded_peaks": {},
        }
    by_kind = s["dynamodb"]["by_kind"]
    table = lim["table_units_per_second"]
    return {
        "hot_keys": s.get("hot_keys"),
        "table_units_per_second": {
            "write": table.get("table", {}).get("wru", {}).get("peak", 0),
            "read": table.get("table", {}).get("rru", {}).get("peak", 0),
            "write_max": s["config"]["deployment"]["table_wru"],
            "read_max": s["config"]["deployment"]["table_rru"],
            "indexes": {k: v for k, v in table.items() if k != "table"},
        },
        "api_requests_per_second": lim["api_requests_per_second"],
        "lambda_concurrency": lim["lambda_concurrency"],
        "first_bottleneck": lim["first_bottleneck"],
        # Each write-sharded family's busiest shard, what was asked of it (throttled included).
        "sharded_peaks": {k: by_kind[k]["peak_offered"] for k in SHARDED_FAMILIES if k in by_kind},
    }


def subset_check(one: dict[str, Any], two: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-group figures at two subset sizes (a whole-system figure divided by the groups)."""
    rows = []
    for label, path, whole in PER_GROUP:
        a, b = _get(one, path), _get(two, path)
        if whole and a is not None and b is not None:  # full-size figures: back to one group
            groups = one["config"]["sweep_groups"]
            a, b = round(a / groups, 1), round(b / groups, 1)
        rows.append({"figure": label, "1_group": a, "2_groups": b})
    return rows


def targets(
    h: dict[str, Any], other: dict[str, Any] | None, waiting: float, waiting_other: float | None
) -> list[dict[str, Any]]:
    """Each of the issue's targets: the headline run's figure, whether it holds, and the
    compared run's figure (the list index unsharded) beside it."""

    def row(name: str, key: str, holds: bool | None, target: str) -> dict[str, Any]:
        return {
            "target": name,
            "limit": target,
            "value": h[key],
            "holds": holds,
            "list_unsharded": None if other is None else other[key],
        }

    extra = h["extra_messages_per_task"]
    return [
        row(
            "one caller's starts a second (offered 5,000)",
            "starts_per_second",
            h["starts_per_second"] >= TARGET_STARTS * 0.98,
            f">= {TARGET_STARTS:,} (within 2 %, Poisson arrivals)",
        ),
        row(
            "open workflows",
            "open_workflows",
            h["open_workflows"] >= TARGET_OPEN * 0.98,
            f">= {TARGET_OPEN:,} (within 2 %)",
        ),
        row(
            "steps running",
            "running_steps",
            h["running_steps"] >= TARGET_RUNNING * 0.98,
            f">= {TARGET_RUNNING:,} (within 2 %)",
        ),
        row(
            "detection lag p99 within HeartbeatSeconds + 5 s",
            "detection_lag_p99_seconds",
            # No dead attempt whose deadline passed: nothing measured, nothing held.
            None
            if not h["detection_lag_samples"]
            else h["detection_lag_p99_seconds"] <= h["detection_lag_target_seconds"],
            f"<= {h['detection_lag_target_seconds']} s",
        ),
        row(
            "hottest partition",
            "hottest_partition_utilization",
            h["hottest_partition_utilization"] <= TARGET_HOTTEST,
            f"<= {TARGET_HOTTEST}",
        ),
        row("lost workflows", "lost_workflows", h["lost_workflows"] == 0, "0"),
        row(
            "extra messages per task, a pool stalled 5 minutes",
            "extra_messages_per_task",
            None if extra is None else extra <= TARGET_EXTRA,
            f"<= {TARGET_EXTRA}",
        ),
        {
            "target": "a workflow waiting a day on a callback",
            "limit": f"<= ${TARGET_WAITING_DAY_USD}",
            "value": waiting,
            "holds": waiting <= TARGET_WAITING_DAY_USD,
            "list_unsharded": waiting_other,
        },
        *limit_targets(h),
    ]


def limit_targets(h: dict[str, Any]) -> list[dict[str, Any]]:
    """The limits outside the engine at the deployment's configured values: the table's and
    each index's units a second, API Gateway's stage throttle, Lambda's concurrency."""
    table = h.get("table_units_per_second")
    if table is None:
        return []
    rows = [
        {
            "target": f"write-sharded key {family}: its busiest shard",
            "limit": f"<= {TARGET_SHARDED}",
            "value": peak,
            "holds": peak <= TARGET_SHARDED,
            "list_unsharded": None,
        }
        for family, peak in sorted((h.get("sharded_peaks") or {}).items())
    ]
    for kind, name in (("write", "write units"), ("read", "read units")):
        rows.append(
            _limit_row(
                f"the table's {name} a second (10 s mean)", table[kind], table[f"{kind}_max"]
            )
        )
    for index, row in sorted(table["indexes"].items()):
        for kind, name in (("wru", "write units"), ("rru", "read units")):
            if row[kind]["peak"]:
                rows.append(
                    _limit_row(
                        f"index {index}: {name} a second (10 s mean)",
                        row[kind]["peak"],
                        row[kind]["limit"],
                    )
                )
    api = h["api_requests_per_second"]
    rows.append(
        _limit_row(
            "API requests a second (10 s mean), the stage throttle", api["peak"], api["limit"]
        )
    )
    lam = h["lambda_concurrency"]
    rows.append(
        {
            "target": "Lambda concurrency, no invocation throttled",
            "limit": f"<= {lam['limit']:,}",
            "value": lam["peak"],
            "holds": lam["throttles"] == 0,
            "list_unsharded": None,
        }
    )
    return rows


def _limit_row(name: str, value: float, limit: float) -> dict[str, Any]:
    return {
        "target": name,
        "limit": f"<= {limit:,.0f}",
        "value": value,
        "holds": value <= limit,
        "list_unsharded": None,
    }


def verdict(targets_: list[dict[str, Any]]) -> tuple[bool, list[dict[str, Any]]]:
    """Whether every target holds (one not measured in this run holds no verdict) and the
    ones that fall short, in the order listed."""
    missed = [t for t in targets_ if t["holds"] is False]
    return not missed, missed


def probe_targets(probes: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The probes' targets (shepherd_bench.scale.probes): reads a step at 90 wide, one map's
    items a second with every partition at most half full, and a 5-minute throttling episode
    that consumes no attempt and unwinds no workflow (issue 41.2, 41.3)."""
    if not probes:
        return []
    reads, maps, episode = (
        probes.get(k) for k in ("reads_per_step", "map_items_per_second", "throttle_episode")
    )
    rows = []
    if reads:
        rows.append(
            {
                "target": "read units a step, 90 wide with its join (chain beside it)",
                "limit": f"<= {reads['target']}",
                "value": reads["width_90"],
                "holds": reads["width_90"] <= reads["target"],
                "list_unsharded": None,
            }
        )
    if maps:
        rows.append(
            {
                "target": "one map's items a second, every partition <= 50 %",
                "limit": f">= {maps['target']:,.0f}",
                "value": maps["items_per_second"],
                "holds": maps["items_per_second"] >= maps["target"],
                "list_unsharded": None,
            }
        )
    if episode:
        rows.append(
            {
                "target": f"a {episode['seconds']:g} s throttling episode: attempts consumed, "
                "successes lost, workflows unwound",
                "limit": "0, 0, 0",
                "value": f"{episode['attempts_consumed']}, {episode['successes_lost']}, "
                f"{episode['workflows_unwound']}",
                "holds": not (
                    episode["attempts_consumed"]
                    or episode["successes_lost"]
                    or episode["workflows_unwound"]
                ),
                "list_unsharded": None,
            }
        )
    return rows


def scale_section(
    results: dict[str, Any], meta: dict[str, Any], probes: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`scale` in benchmarks.json: the headline keys from the design-load run, the compared
    run's beside them, the subset check, the targets, every run's figures, and the probes'
    figures (reads a step, a map's items a second, a throttling episode)."""
    head = results[HEADLINE]
    other = results.get(COMPARED)
    stall = results["stall"]["stall"] if "stall" in results else None
    h = headline(head, stall)
    o = None if other is None else headline(other, None)  # the stall is the headline's
    one, two = results.get("subset_1"), results.get("subset_2")
    waiting = head["cost"]["waiting_workflow_day"]["usd"]
    waiting_other = None if other is None else other["cost"]["waiting_workflow_day"]["usd"]
    judged = targets(h, o, waiting, waiting_other) + probe_targets(probes)
    passed, missed = verdict(judged)
    load = results.get(LOAD_RUN)
    probed = probes or {}
    return {
        **h,
        "reads_per_step": probed.get("reads_per_step"),
        "map_items_per_second": probed.get("map_items_per_second"),
        "throttle_episode": probed.get("throttle_episode"),
        "passed": passed,
        "missed": [t["target"] for t in missed],
        "load10": None if load is None else load_figures(load),
        DEFAULT_RUN: None
        if results.get(DEFAULT_RUN) is None
        else load_figures(results[DEFAULT_RUN]),
        "subset": {
            "modelled_groups": len(head["config"]["modelled_groups"]),
            "sweep_groups": head["config"]["sweep_groups"],
            "watch_shards": head["config"]["watch_shards"],
            "fraction": head["config"]["fraction"],
            "note": "a subset of shard groups at full density (one process cannot hold a "
            "million workflows); counts divided by the fraction; shared partitions and the "
            "supervisor's tick fan-out at full size",
        },
        COMPARED: o,
        "subset_check": None if one is None or two is None else subset_check(one, two),
        "targets": judged,
        "runs": results,
        "meta": meta,
    }


LOAD_RUN = "load10"  # ten times the design load against the default deployment
DEFAULT_RUN = "default_deployment"  # the design load against the default deployment


def load_figures(s: dict[str, Any]) -> dict[str, Any]:
    """A run at a multiple of the design load: whether every target holds at it, and what
    broke first (the limit exceeded earliest in simulated time)."""
    h = headline(s, None)
    judged = [
        t
        for t in targets(h, None, s["cost"]["waiting_workflow_day"]["usd"], None)
        if t["holds"] is not None
    ]
    passed, missed = verdict(judged)
    return {
        "passed": passed,
        "first_bottleneck": h["first_bottleneck"] or (missed[0]["target"] if missed else None),
        "missed": [t["target"] for t in missed],
        "load": s["config"].get("load_factor"),
        "deployment": s["config"]["deployment"]["name"],
    }


def one_line(s: dict[str, Any]) -> str:
    w, det, ddb = s["workflows"], s["detection"], s["dynamodb"]
    return (
        f"{w['starts_per_second']:,} starts/s, {w['open_workflows']:,} open, "
        f"{w['running_steps']:,} running, detection p99 "
        f"{det['packer']['last_sign_to_acted_s']['p99']} s, hottest {ddb['hottest_partition_utilization']}, "
        f"{ddb['throttled_requests']:,} throttled, {w['lost_workflows']} lost"
    )


def _probe_lines(scale: dict[str, Any]) -> list[str]:
    """The probes' figures, the chain's reads a step beside 90 wide's."""
    lines = []
    reads = scale.get("reads_per_step")
    if reads:
        lines.append(
            f"  scale.reads_per_step: chain {reads['chain']} | width_90 {reads['width_90']} "
            f"read units a step (target <= {reads['target']} at 90 wide)"
        )
    for key in ("map_items_per_second", "throttle_episode", DEFAULT_RUN):
        if scale.get(key) is not None:
            lines.append(f"  scale.{key}: {scale[key]}")
    return lines


def render_text(scale: dict[str, Any]) -> str:
    """What `make scale` prints: the headline, the targets, each run in a line."""
    lines = ["", "Scale model (the real engine, simulated AWS and time)"]
    sub = scale["subset"]
    lines.append(
        f"  SUBSET: {sub['modelled_groups']} of {sub['sweep_groups']} shard groups "
        f"({sub['watch_shards']} watch shards) at full density; figures scaled to the whole "
        f"design load; shared partitions modelled at the full rate"
    )
    for key in (
        "open_workflows", "running_steps", "starts_per_second", "single_caller",
        "single_caller_list_index", "detection_lag_p99_seconds", "detection_lag_target_seconds",
        "hottest_partition_utilization", "throttled_requests", "lost_workflows",
        "extra_messages_per_task", "supervisor_invocations_per_tick", "usd_per_hour",
    ):  # fmt: skip
        other = scale[COMPARED]
        beside = "" if other is None else f"   (list index unsharded: {other[key]})"
        lines.append(f"  scale.{key}: {scale[key]}{beside}")
    for key in ("table_units_per_second", "first_bottleneck"):
        lines.append(f"  scale.{key}: {scale.get(key)}")
    lines += _probe_lines(scale)
    lines.append("  scale.hot_keys:")
    for row in scale.get("hot_keys") or []:
        lines.append(
            f"    {row['index']}:{row['pattern']} peak {row['peak']} "
            f"(asked {row['peak_offered']}, {row['throttled']} throttled) e.g. {row['key']}"
        )
    lines.append("  targets:")
    for t in scale["targets"]:
        verdict = {True: "holds", False: "MISSED", None: "-"}[t["holds"]]
        lines.append(f"    {t['target']} ({t['limit']}): {t['value']} -> {verdict}")
    if scale["subset_check"]:
        lines.append("  per group at two subset sizes (1 and 2 groups):")
        for r in scale["subset_check"]:
            lines.append(f"    {r['figure']}: {r['1_group']} | {r['2_groups']}")
    if scale.get("load10"):
        lines.append(f"  scale.load10: {scale['load10']}")
    lines.append(f"  scale.passed: {scale['passed']}")
    for name in scale["missed"]:
        lines.append(f"    MISSED: {name}")
    lines.append("  runs:")
    for key, s in scale["runs"].items():
        lines.append(f"    {key}: {one_line(s)}")
    return "\n".join(lines)


def _merge(path: Path, scale: dict[str, Any]) -> None:
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    data["scale"] = scale
    cost = data.setdefault("cost", {})
    head = scale["runs"][HEADLINE]
    c = head["cost"]
    cost["at_load"] = {
        "usd_per_million_steps": c["usd_per_million_steps"],
        "usd_per_million_steps_without_ingress": c["usd_per_million_steps_without_ingress"],
        "usd_per_hour": c["usd_per_hour"],
        "usd_per_hour_by_kind": c["usd_per_hour_by_kind"],
        "steps_per_hour": c["steps_per_hour"],
        "mean_agent_batch": _batches(head),
        "run": HEADLINE,
    }
    cost["waiting_workflow_day_usd"] = c["waiting_workflow_day"]["usd"]
    cost["waiting_workflow_day"] = c["waiting_workflow_day"]
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def _batches(s: dict[str, Any]) -> dict[str, float]:
    return {k: v["mean_batch"] for k, v in s["lambda"].items() if isinstance(v, dict)}


def write(out: Path, scale: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _merge(out / "benchmarks.json", scale)
    md = out / "benchmarks.md"
    text = md.read_text() if md.exists() else "# Benchmarks\n"
    md.write_text(splice(text, section(scale)))


def splice(text: str, block: str) -> str:
    """`text` with its scale section replaced (or put before "## Reproduce")."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    marker = "\n## Reproduce"
    if marker in text:
        head, tail = text.split(marker, 1)
        return head.rstrip("\n") + "\n\n" + block + "\n" + marker + tail
    return text.rstrip("\n") + "\n\n" + block + "\n"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def section(scale: dict[str, Any]) -> str:
    """The markdown section (its prose about assumptions lives in assumptions.py)."""
    return BEGIN + "\n" + section_text(scale, _table, ASSUMPTIONS, WRONG) + "\n" + END
