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

BEGIN = "<!-- scale model: begin (make scale writes this section) -->"
END = "<!-- scale model: end -->"
TARGET_HOTTEST = 0.8
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


def headline(s: dict[str, Any], stall: dict[str, Any] | None) -> dict[str, Any]:
    """The issue's key paths, from one run (and the stall run's extra messages)."""
    w, det, sup, ddb, cost = (
        s[k] for k in ("workflows", "detection", "supervisor", "dynamodb", "cost")
    )
    return {
        "open_workflows": w["open_workflows"],
        "running_steps": w["running_steps"],
        "starts_per_second": w["starts_per_second"],
        "single_caller": True,
        "detection_lag_p99_seconds": det["packer"]["last_sign_to_acted_s"]["p99"],
        "detection_lag_target_seconds": det["packer"]["target_s"],
        "hottest_partition_utilization": ddb["hottest_partition_utilization"],
        "throttled_requests": ddb["throttled_requests"],
        "lost_workflows": w["lost_workflows"],
        "extra_messages_per_task": None if stall is None else stall["extra_messages_per_task"],
        "supervisor_invocations_per_tick": sup["invocations_per_tick"],
        "usd_per_hour": cost["usd_per_hour"],
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
    h: dict[str, Any], designed: dict[str, Any], waiting: float, waiting_designed: float
) -> list[dict[str, Any]]:
    def row(name: str, key: str, holds: bool | None, other: Any, target: str) -> dict[str, Any]:
        return {
            "target": name,
            "limit": target,
            "as_is": h[key] if key else None,
            "holds": holds,
            "as_designed": other,
        }

    return [
        row(
            "detection lag p99 within HeartbeatSeconds + 5 s",
            "detection_lag_p99_seconds",
            h["detection_lag_p99_seconds"] <= h["detection_lag_target_seconds"],
            designed["detection_lag_p99_seconds"],
            f"{h['detection_lag_target_seconds']} s",
        ),
        row(
            "hottest partition",
            "hottest_partition_utilization",
            h["hottest_partition_utilization"] <= TARGET_HOTTEST,
            designed["hottest_partition_utilization"],
            f"<= {TARGET_HOTTEST}",
        ),
        row(
            "lost workflows",
            "lost_workflows",
            h["lost_workflows"] == 0,
            designed["lost_workflows"],
            "0",
        ),
        row(
            "extra messages per task, a pool stalled 5 minutes",
            "extra_messages_per_task",
            None
            if h["extra_messages_per_task"] is None
            else h["extra_messages_per_task"] <= TARGET_EXTRA,
            h["extra_messages_per_task"],
            f"<= {TARGET_EXTRA}",
        ),
        {
            "target": "a workflow waiting a day on a callback",
            "limit": f"<= ${TARGET_WAITING_DAY_USD}",
            "as_is": waiting,
            "holds": waiting <= TARGET_WAITING_DAY_USD,
            "as_designed": waiting_designed,
        },
    ]


def scale_section(results: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    as_is = results["as_is"]
    designed = results["as_designed"]
    stall = results.get("stall", {}).get("stall") if "stall" in results else None
    h = headline(as_is, stall)
    d = headline(designed, stall)
    one = results.get("as_designed_1_short", designed)
    two = results.get("as_designed_2_short") or results.get("as_designed_2")
    waiting = as_is["cost"]["waiting_workflow_day"]["usd"]
    waiting_designed = designed["cost"]["waiting_workflow_day"]["usd"]
    return {
        **h,
        "subset": {
            "modelled_groups": len(as_is["config"]["modelled_groups"]),
            "sweep_groups": as_is["config"]["sweep_groups"],
            "watch_shards": as_is["config"]["watch_shards"],
            "fraction": as_is["config"]["fraction"],
            "note": "a subset of shard groups at full density; shared partitions at the full rate",
        },
        "as_designed": d,
        "subset_check": None if two is None else subset_check(one, two),
        "targets": targets(h, d, waiting, waiting_designed),
        "runs": results,
        "meta": meta,
    }


def one_line(s: dict[str, Any]) -> str:
    w, det, ddb = s["workflows"], s["detection"], s["dynamodb"]
    return (
        f"{w['starts_per_second']:,} starts/s, {w['open_workflows']:,} open, "
        f"{w['running_steps']:,} running, detection p99 "
        f"{det['packer']['last_sign_to_acted_s']['p99']} s, hottest {ddb['hottest_partition_utilization']}, "
        f"{ddb['throttled_requests']:,} throttled, {w['lost_workflows']} lost"
    )


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
        "detection_lag_p99_seconds", "detection_lag_target_seconds",
        "hottest_partition_utilization", "throttled_requests", "lost_workflows",
        "extra_messages_per_task", "supervisor_invocations_per_tick", "usd_per_hour",
    ):  # fmt: skip
        lines.append(f"  scale.{key}: {scale[key]}   (as designed: {scale['as_designed'][key]})")
    lines.append("  targets:")
    for t in scale["targets"]:
        verdict = {True: "holds", False: "MISSED", None: "-"}[t["holds"]]
        lines.append(f"    {t['target']} ({t['limit']}): {t['as_is']} -> {verdict}")
    if scale["subset_check"]:
        lines.append("  per group at two subset sizes (as designed):")
        for r in scale["subset_check"]:
            lines.append(f"    {r['figure']}: {r['1_group']} | {r['2_groups']}")
    lines.append("  runs:")
    for key, s in scale["runs"].items():
        lines.append(f"    {key}: {one_line(s)}")
    return "\n".join(lines)


def _merge(path: Path, scale: dict[str, Any]) -> None:
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    data["scale"] = scale
    cost = data.setdefault("cost", {})
    as_is = scale["runs"]["as_is"]["cost"]
    designed = scale["runs"]["as_designed"]["cost"]
    cost["at_load"] = {
        "usd_per_million_steps": as_is["usd_per_million_steps"],
        "usd_per_million_steps_without_ingress": as_is["usd_per_million_steps_without_ingress"],
        "usd_per_hour": as_is["usd_per_hour"],
        "usd_per_hour_by_kind": as_is["usd_per_hour_by_kind"],
        "mean_agent_batch": _batches(scale["runs"]["as_is"]),
        "as_designed": {
            "usd_per_million_steps": designed["usd_per_million_steps"],
            "usd_per_million_steps_without_ingress": designed[
                "usd_per_million_steps_without_ingress"
            ],
            "usd_per_hour": designed["usd_per_hour"],
            "usd_per_hour_by_kind": designed["usd_per_hour_by_kind"],
            "mean_agent_batch": _batches(scale["runs"]["as_designed"]),
        },
    }
    cost["waiting_workflow_day_usd"] = as_is["waiting_workflow_day"]["usd"]
    cost["waiting_workflow_day"] = {
        "as_is": as_is["waiting_workflow_day"],
        "as_designed": designed["waiting_workflow_day"],
    }
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def _batches(s: dict[str, Any]) -> dict[str, float]:
    return {k: v["mean_batch"] for k, v in s["lambda"].items() if isinstance(v, dict)}


def write(out: Path, scale: dict[str, Any]) -> None:
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
