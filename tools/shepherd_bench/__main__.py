"""`make bench`: run every benchmark and write docs/benchmarks.md and docs/benchmarks.json."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from shepherd_bench import results as bench_results

ROOT = Path(__file__).resolve().parents[2]


def _log(message: str) -> None:
    print(f"[bench] {message}", flush=True)


# Sections of benchmarks.md that other benchmarks write (the local stack's, run on their own
# because they take an hour): kept from this marker on when `make bench` rewrites the file.
KEPT_MARKER = "<!-- kept by make bench:"


def _asl() -> dict[str, Any]:
    from shepherd_bench import asl

    _log("ASL state machines (issue 42)")
    measured = asl.run_asl()
    for line in asl.describe(measured):
        _log(f"  {line}")
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench", description=__doc__)
    parser.add_argument("--workflows", type=int, default=40, help="per cost scenario")
    parser.add_argument("--stalls", type=int, default=2000, help="per detection-lag case")
    parser.add_argument("--finished", default="10,1000,10000", help="finished workflows")
    parser.add_argument("--running", type=int, default=1000, help="running steps")
    parser.add_argument("--coldstart-runs", type=int, default=5)
    parser.add_argument(
        "--throughput", choices=["auto", "local", "inprocess", "skip"], default="auto"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument(
        "--refresh-capacity",
        action="store_true",
        help="measure only what one stack holds (pools per stack, a few minutes of synth) "
        "into the existing benchmarks.json and re-render its section of benchmarks.md",
    )
    parser.add_argument(
        "--refresh-maps",
        action="store_true",
        help="measure only the map items (issue 24) into the existing benchmarks.json and "
        "re-render their section of benchmarks.md",
    )
    parser.add_argument(
        "--refresh-asl",
        action="store_true",
        help="measure only the ASL state machines (issue 42) into the existing "
        "benchmarks.json and re-render their section of benchmarks.md",
    )
    parser.add_argument(
        "--refresh-fixed-cost",
        action="store_true",
        help="recompute only the fixed monthly cost (from the synthesized app) into the "
        "existing benchmarks.json and re-render benchmarks.md; every other number is kept",
    )
    parser.add_argument(
        "--refresh-pools",
        action="store_true",
        help="measure only the pools' rate limiter (simulated clock, seconds) into the "
        "existing benchmarks.json (pools.rate_limit); every other number is kept",
    )
    args = parser.parse_args(argv)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(key, value)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_ENDPOINT_URL", None)

    from shepherd.definitions import load_directory
    from shepherd.topology import pools

    if args.refresh_pools:
        return _refresh_pools(args.out)
    if args.refresh_fixed_cost or args.refresh_capacity or args.refresh_maps or args.refresh_asl:
        return _refresh(
            args.out,
            fixed=args.refresh_fixed_cost,
            capacity=args.refresh_capacity,
            maps=args.refresh_maps,
            asl=args.refresh_asl,
        )

    from shepherd_bench import (
        analysis,
        coldstart,
        cost,
        detection,
        running,
        scaling,
        throughput,
    )
    from shepherd_bench.schedule import deployed

    started = time.monotonic()
    load_before = os.getloadavg()[0]
    definitions = load_directory(ROOT / "statemachines")
    results: dict[str, Any] = {"schedule": deployed().describe()}

    _log(f"cost: {args.workflows} workflows x {len(cost.SCENARIOS)} scenarios")
    runs = cost.run_scenarios(args.workflows)
    summaries = [cost.summary(r) for r in runs]
    clean = {s["scenario"]: s for s in summaries if s["scenario"].endswith("clean")}
    slow = next(s for s in summaries if s["scenario"].startswith("order, a "))
    slow_case = next(x for x in cost.SCENARIOS if x.name == slow["scenario"])
    slow_seconds = slow_case.slow_seconds
    assert slow_case.slow_step is not None
    slow_heartbeat = definitions[slow_case.wf_type].by_name[slow_case.slow_step].heartbeat_seconds
    results["cost"] = {
        "scenarios": summaries,
        "pools": len(pools(definitions)),
        **fixed_cost(len(pools(definitions))),
        "floor": analysis.floor(summaries[0]),
        "running": analysis.running_cost(
            slow, clean["order clean"], slow_seconds, slow_heartbeat or 0
        ),
        "running_hours": running.run_running(),
        "what_if": {
            name: analysis.what_if(s, definitions[s["workflow_type"]]) for name, s in clean.items()
        },
    }
    for s in summaries:
        _log(
            f"  {s['scenario']}: ${s['worst']['usd_per_million_steps']['core_and_events']:.2f}"
            f"/M steps (core+events), Step Functions Standard "
            f"${s['step_functions']['standard_usd_per_million_steps']:.2f}"
        )

    from shepherd_bench import maps

    _log("map items")
    results["maps"] = maps.run_maps(clean["order clean"]["worst"]["usd_per_million_steps"]["core"])
    for row in results["maps"]["rows"]:
        _log(
            f"  {row['items']} items, MaxConcurrency {row['max_concurrency']}: "
            f"${row['usd_per_million_items']:.2f}/M items ({row['ratio_to_plain_step']:.2f}x a step)"
        )

    results["asl"] = _asl()
    r = results["cost"]["running"]
    _log(
        f"  a running step ({r['seconds']} s, HeartbeatSeconds {r['heartbeat_seconds']}): "
        f"{r['wru_per_heartbeat_seconds']:.2f} WRU per HeartbeatSeconds"
    )
    for row in results["cost"]["running_hours"]:
        _log(
            f"  HeartbeatSeconds {row['heartbeat_seconds']}: {row['wru_per_heartbeat_seconds']:.2f}"
            f" WRU per HeartbeatSeconds, ${row['usd_per_million_step_hours']:.0f}/M step-hours"
        )

    finished = tuple(int(x) for x in args.finished.split(","))
    _log(f"supervisor scaling: {finished} finished, {args.running} running")
    results["scaling"] = scaling.run_scaling(finished, args.running)
    for row in results["scaling"]:
        _log(f"  {row['case']}: {row['index_items_read'] + row['table_items_read']} items read")

    _log(f"detection lag: {args.stalls} stalls per case")
    results["detection"] = detection.run_detection(args.stalls)
    for row in results["detection"]:
        _log(
            f"  {row['schedule'][:22]} {row['workflow_type']} {row['stall']}: due->acted p99 "
            f"{row['due_to_acted_ms']['p99']:.0f} ms, over target {row['over_target']}"
        )

    if args.throughput != "skip":
        _log("throughput")
        results["throughput"] = throughput.run_throughput(args.throughput)
        for row in results["throughput"]["rows"]:
            _log(f"  x{row['concurrency']}: {row['workflows_per_s']:.1f} workflows/s")

    _log("pools: the rate limiter")
    from shepherd_bench import pools as pool_bench

    results["pools"] = pool_bench.run_pools()
    _log_pools(results["pools"])

    _log("what one stack holds")
    from shepherd_bench import capacity

    results["capacity"] = capacity.measure()
    _log(f"  {results['capacity']['most_pools']} pools")

    _log("cold start")
    results["coldstart"] = {
        **coldstart.run_coldstart(args.coldstart_runs),
        "heaviest": coldstart.heaviest_packages(),
    }
    _log(f"  bare import boto3: {results['coldstart']['boto3_import_ms_median']:.0f} ms")
    for row in results["coldstart"]["handlers"]:
        _log(
            f"  {row['handler']}: import {row['import_ms_median']:.0f} ms "
            f"({row['import_vs_boto3']:.2f}x boto3), first engine build "
            f"{row['engine_ms_median']:.0f} ms"
        )

    _log("hostile patterns: StringMatches on a 5 MiB value (issue 35.1)")
    from shepherd_bench import patterns

    results["patterns"] = patterns.run_patterns()
    _log(
        f"  slowest {results['patterns']['slowest_ms']:.1f} ms of "
        f"{len(results['patterns']['rows'])} worst cases (target "
        f"{results['patterns']['target_ms']:.0f} ms): "
        f"{'met' if results['patterns']['met'] else 'MISSED'}"
    )

    results["meta"] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "moto": version("moto"),
        "boto3": version("boto3"),
        "seconds": time.monotonic() - started,
        "load_average_1min": {"start": load_before, "end": os.getloadavg()[0]},
        "argv": sys.argv[1:] if argv is None else argv,
    }
    _write(args.out, results)
    _log(
        f"wrote {args.out / 'benchmarks.md'} and benchmarks.json in {results['meta']['seconds']:.0f} s"
    )
    over = _idle_checks(results)
    return 0 if results["patterns"]["met"] and not over else 1


def _idle_checks(results: dict[str, Any]) -> list[str]:
    """The idle bill prices a scheduled workflow at a bound per step: the measured scenarios
    above it (the bill would be understated; invariant 14, a figure that can fail). Logs them,
    and the idle targets the bill misses."""
    from shepherd_bench import idle_bill

    over = idle_bill.check_bound(results["cost"]["scenarios"])
    for name in over:
        _log(f"idle bill understated: {name} costs more per step than the bound it assumes")
    totals = {
        name: {"total": idle_bill.total(results["cost"][key])}
        for name, key in (("default", "fixed_monthly"), ("one pool", "fixed_monthly_one_pool"))
    }
    for line in idle_bill.missed(totals):
        _log(f"idle target missed: {line}")
    return over


def _write(out: Path, results: dict[str, Any]) -> None:
    """benchmarks.json and benchmarks.md; what other commands wrote there stays: the payloads
    run, the scale model (`make scale`) and its costs, and the scale model's section."""
    from shepherd_bench.report import render
    from shepherd_bench.scale.report import BEGIN, END
    from shepherd_bench.scale.report import splice as splice_scale

    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "benchmarks.json", out / "benchmarks.md"
    before = json.loads(json_path.read_text()) if json_path.exists() else {}
    for key in ("payloads", "scale"):
        if key in before:
            results[key] = before[key]
    bench_results.keep_hand_run(before, results)
    for key in ("at_load", "waiting_workflow_day_usd", "waiting_workflow_day"):
        if key in before.get("cost", {}):
            results["cost"][key] = before["cost"][key]
    json_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    markdown = render(results)
    old_md = md_path.read_text() if md_path.exists() else ""
    if BEGIN in old_md and END in old_md:
        markdown = splice_scale(markdown, BEGIN + old_md.split(BEGIN, 1)[1].split(END, 1)[0] + END)
    at = old_md.find(KEPT_MARKER)  # the local stack's sections, measured by hand
    md_path.write_text(markdown + ("\n" + old_md[at:] if at >= 0 else ""))


def fixed_cost(pools: int) -> dict[str, Any]:
    """The idle bill a month (`shepherd_bench.idle_bill`), computed from the example app's
    synthesized templates as deployed by default, with every paid option on, and with one
    pool (about 90 s of synth); printed as it is computed."""
    from shepherd_bench import idle_bill

    bills = idle_bill.example_bills()
    for name, entry in bills.items():
        _log(idle_bill.render(name, entry))
    return {
        "fixed_monthly": bills["default"]["bill"],
        "fixed_monthly_all_options": bills["all options"]["bill"],
        "fixed_monthly_one_pool": bills["one pool"]["bill"],
        "idle_monitoring": {
            name: entry["deployment"]["monitoring"] for name, entry in bills.items()
        },
        "idle_deployment": {name: entry["deployment"] for name, entry in bills.items()},
    }


def _log_pools(measured: dict[str, Any]) -> None:
    for name, row in measured["rate_limit"].items():
        _log(
            f"  {name}: limit {row['per_second']:.0f}/s, achieved "
            f"{row['achieved_per_second_min']:.0f}..{row['achieved_per_second_max']:.0f}/s "
            f"(worst second {100 * row['error_vs_limit']:.1f} % off)"
        )


def _refresh_pools(out: Path) -> int:
    """Re-measure the pools' rate limiter into the existing benchmarks.json."""
    from shepherd_bench import pools as pool_bench

    path = out / "benchmarks.json"
    results = json.loads(path.read_text())
    before = dict(results)
    results["pools"] = pool_bench.run_pools()
    bench_results.keep_hand_run(before, results)
    _log_pools(results["pools"])
    results["meta"]["pools_refreshed"] = datetime.datetime.now(datetime.UTC).strftime(
        "%Y-%m-%d %H:%M UTC"
    )
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    _log(f"refreshed pools in {path}")
    return 0


def _refresh(
    out: Path, *, fixed: bool, capacity: bool, maps: bool = False, asl: bool = False
) -> int:
    """Re-measure the fixed monthly cost and/or what one stack holds into the existing
    benchmarks.json, and re-render only their parts of benchmarks.md."""
    from shepherd.definitions import load_directory
    from shepherd.topology import pools

    from shepherd_bench import capacity as stack_capacity
    from shepherd_bench.report import render

    path = out / "benchmarks.json"
    results = json.loads(path.read_text())
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if fixed:
        count = len(pools(load_directory(ROOT / "statemachines")))
        results["cost"].update(fixed_cost(count))
        results["cost"]["pools"] = count
        results["meta"]["fixed_cost_refreshed"] = now
    if capacity:
        results["capacity"] = stack_capacity.measure()
        results["meta"]["capacity_refreshed"] = now
    if maps:
        from shepherd_bench import maps as map_items

        clean = next(s for s in results["cost"]["scenarios"] if s["scenario"] == "order clean")
        results["maps"] = map_items.run_maps(clean["worst"]["usd_per_million_steps"]["core"])
        results["meta"]["maps_refreshed"] = now
    if asl:
        results["asl"] = _asl()
        results["meta"]["asl_refreshed"] = now
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    page = out / "benchmarks.md"
    page.write_text(splice(page.read_text(), render(results)))
    _log(f"refreshed {page} and benchmarks.json")
    return 0


# What a refresh replaces in benchmarks.md: the headline's idle row, the prices table, the
# fixed cost section and what one stack holds; the rest (hand-merged sections too) stays. A
# section the page does not have yet goes in before the next one both have.
SPLICED = (
    ("| idle stack <= $3", "\n\n", None),  # the headline's last rows: idle, capacity
    ("### Prices", "### Results", None),
    ("### Fixed monthly cost", "\n#", None),
    ("## What one stack holds", "\n## ", "## Supervisor scaling"),
    ("## Map items (issue 24)", "\n## ", "## What one stack holds"),
    ("## ASL state machines (issue 42)", "\n## ", "## What one stack holds"),
)


def splice(old: str, new: str) -> str:
    for start, end, before in SPLICED:
        i, j = old.find(start), new.find(start)
        if j < 0:
            continue  # not measured in this run
        new_end = new.index(end, j + len(start))
        if i < 0 and before is not None and before in old:
            at = old.index(before)
            old = old[:at] + new[j : new_end + 1] + old[at:]
            continue
        if i < 0:
            raise SystemExit(f"benchmarks.md has no '{start}': run the whole `make bench`")
        old_end = old.index(end, i + len(start))
        old = old[:i] + new[j:new_end] + old[old_end:]
    return old


if __name__ == "__main__":
    sys.exit(main())
