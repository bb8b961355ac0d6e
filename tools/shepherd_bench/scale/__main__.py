"""`make scale`: the scale model (docs/benchmarks.md, "Scale model").

Runs the real engine over the modelled AWS at the design load, a subset of its shard groups
at full density, in simulated time, and prints what it measured; the full run merges its
numbers into docs/benchmarks.json (`scale`, `cost.at_load`, `cost.waiting_workflow_day_usd`)
and its section into docs/benchmarks.md. `--quick`: a small subset for a minute or two of
simulated time, printed only. It exits non-zero when a target falls short, naming each
(`scale.passed` false). `--load N`: one run at N times the design load against the CDK app's
default deployment (`model.DEFAULT_DEPLOYMENT`), saying what broke first; the full run makes
one at 10x (`scale.load10`).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from shepherd_bench.scale import figures, probes, report
from shepherd_bench.scale.model import (
    DEFAULT_DEPLOYMENT,
    DESIGN_DEPLOYMENT,
    DESIGN_LOAD,
    Deployment,
    Run,
    RunConfig,
)

ROOT = Path(__file__).resolve().parents[3]
# The deployment the runs model: the CDK app's design-load size (`-c size=design_load`,
# infra/shepherd_infra/deployments.py): 256 watch shards in 128 sweep groups (32, the figure
# docs/architecture.md first gave, cannot keep up with the design load's looks at 256 MB: run
# `groups_32`), its pools' concurrency, table throughput, API throttle and Lambda quota. The
# tick mapping as the CDK app deploys it for that many groups.
DESIGN_GROUPS = DESIGN_DEPLOYMENT.sweep_groups
RATE_LIMITED_MINUTES = 6.0


def _log(message: str) -> None:
    print(f"[scale] {message}", flush=True)


def run(config: RunConfig) -> dict[str, Any]:
    """One run, measured; the process's garbage collector held back while it runs (millions
    of short-lived objects, few cycles)."""
    _log(
        f"{config.name}: {len(config.modelled)} of {config.groups} groups "
        f"(f = 1/{round(1 / config.fraction)}), {config.minutes:g} simulated minutes"
    )
    started = time.monotonic()
    gc.collect()
    gc.set_threshold(200_000, 50, 1000)
    model = Run(config)
    model.run()
    summary = figures.summary(model, time.monotonic() - started)
    del model
    gc.collect()
    _log(f"  {report.one_line(summary)} ({summary['wall_seconds']:.0f} s)")
    return summary


def scenarios(quick: bool, minutes: float) -> dict[str, RunConfig]:
    """The runs `make scale` makes (see docs/benchmarks.md for why each). `design_load` gives
    the headline keys: the engine on this branch at the design load, the list index sharded
    per caller by the what-if (whatif.py) until the engine shards it itself; `list_unsharded`
    is the same without the what-if: the single caller's one list partition as main has it."""
    if quick:
        base = RunConfig("quick", minutes=minutes, groups=256, shard_list=True)
        return {
            "design_load": base,
            "rate_limited": replace(rate_limited(base), minutes=minutes),
            "subset_1": replace(base, name="quick, 1 group"),
            "subset_2": replace(base, name="quick, 2 groups", modelled=(0, 1)),
            "list_unsharded": replace(base, name="quick, list unsharded", shard_list=False),
        }
    design = RunConfig("design load", minutes=minutes, groups=DESIGN_GROUPS, shard_list=True)
    short = max(1.0, minutes * 0.3)
    brief = max(1.0, minutes * 0.15)
    return {
        "design_load": design,
        "subset_1": replace(design, name="subset, 1 group", minutes=short),
        "subset_2": replace(design, name="subset, 2 groups", minutes=short, modelled=(0, 1)),
        "stall": replace(
            design, name="a pool stalled 5 minutes", minutes=7.0, stall=("inventory", 60.0, 300.0)
        ),
        "list_unsharded": replace(
            design, name="list index unsharded", minutes=2 * brief, shard_list=False
        ),
        "groups_32": replace(design, name="32 sweep groups", groups=32, minutes=brief),
        # What-if: a sweep every 4 s instead of 5 (the detection target leaves 5 s after a
        # deadline, which the tick interval alone can take).
        "interval_4s": replace(design, name="sweeps every 4 s", sweep_interval_s=4.0),
        "rate_limited": rate_limited(design),
    }


def rate_limited(design: RunConfig) -> RunConfig:
    """The design load with its first pool limited to half its 5,000 tasks a second (issue
    26.1): the limit binds every second, tasks wait for their slots with tickets, and the
    waits grow past DispatchTimeoutSeconds (60 s) after the first minutes (a backlog growing
    2,500 a second)."""
    return replace(
        design,
        name="checks limited to 2,500/s",
        minutes=RATE_LIMITED_MINUTES,
        rate_limit=("checks", 2500.0, 100),
    )


def overloads(designed: dict[str, Any], minutes: float) -> dict[str, RunConfig]:
    """2x and 4x the supervisor's capacity: its look budget per sweep cut to a half and a
    quarter of what the design-load run's sweeps needed (the entries due per sweep), with ten
    times as many packers dying, spread over every shard. The `_8_shards` runs deal the 256
    shards into 32 groups (8 a group, as the 8 shards of the sweep the issue found starving its
    last shards) at the same budget per shard: whether a rotating start degrades 8 shards
    evenly, not only 2."""
    due = designed["supervisor"]["due_per_sweep"]["mean"]
    out = {}
    for factor in (2, 4):
        over = RunConfig(
            f"overload {factor}x",
            minutes=minutes,
            groups=DESIGN_GROUPS,
            shard_list=True,
            max_workflows=max(1, math.floor(due / factor)),
            load=replace(DESIGN_LOAD, packer_death_rate=0.05),
        )
        out[f"overload_{factor}x"] = over
        per_group = DESIGN_GROUPS // 32
        out[f"overload_{factor}x_8_shards"] = replace(
            over,
            name=f"overload {factor}x, 8 shards a group",
            groups=32,
            max_workflows=max(1, math.floor(due * per_group / factor)),
        )
    return out


LOAD10_MINUTES = 1.0  # ten times the design load breaks in seconds; a minute says what


def at_load(
    factor: float,
    minutes: float,
    groups: int = 256,
    deployment: Deployment = DEFAULT_DEPLOYMENT,
) -> RunConfig:
    """`factor` times the design load (its starts, open workflows and running steps) against
    one of the CDK app's sizes (by default the default deployment), one group of `groups`
    modelled. The default size's 16 shards in one group cannot be cut into a subset: the run
    keeps 256 shards in `groups` groups (the design size's own 128 for it), and its pools'
    concurrency at the size's (10 a pool: at least one invocation in the subset, so more than
    the whole system's share); every other limit is the size's."""
    if deployment.sweep_groups > 1:
        groups = deployment.sweep_groups
    load = replace(
        DESIGN_LOAD,
        open_workflows=round(DESIGN_LOAD.open_workflows * factor),
        starts_per_second=DESIGN_LOAD.starts_per_second * factor,
        running_steps=round(DESIGN_LOAD.running_steps * factor),
    )
    return RunConfig(
        f"{factor:g}x the design load, {deployment.name} deployment",
        minutes=minutes,
        shards=max(deployment.watch_shards, 256),
        groups=groups,
        shard_list=True,
        load=load,
        pool_concurrency=deployment.pool_concurrency,
        deployment=deployment,
    )


def run_at_load(factor: float, minutes: float, seed: int, size: str) -> int:
    """`make scale LOAD=N SIZE=name`: one run, printed; non-zero when a target falls short
    (what broke first is named)."""
    summary = run(replace(at_load(factor, minutes, deployment=Deployment.of(size)), seed=seed))
    figures_ = report.load_figures(summary)
    print(f"LOAD={factor:g} SIZE={size}: passed {figures_['passed']}")
    print(f"  first bottleneck: {figures_['first_bottleneck']}")
    for name in figures_["missed"]:
        print(f"  MISSED: {name}")
    return 0 if figures_["passed"] else 1


def run_all(
    quick: bool,
    minutes: float,
    seed: int,
    only: set[str] | None,
    before: dict[str, Any],
    results: dict[str, Any],
) -> list[str]:
    """Make the runs (those in `only`, the others' figures kept from `before`) into
    `results`; the keys of the runs made."""

    def kept(key: str) -> bool:
        if only is None or key in only:
            return False
        if key in before.get("runs", {}):
            results[key] = before["runs"][key]
        return True

    made: list[tuple[RunConfig, dict[str, Any]]] = []
    ran: list[str] = []
    for key, planned in scenarios(quick, minutes).items():
        if kept(key):
            continue
        config = replace(planned, seed=seed)
        # A run the same as an earlier one but for its name is not run twice.
        same = [s for c, s in made if replace(c, name=config.name) == config]
        results[key] = same[0] if same else run(config)
        ran.append(key)
        made.append((config, results[key]))
    if quick:
        return ran
    later = {
        **overloads(results["design_load"], 4.0),
        report.LOAD_RUN: at_load(10, LOAD10_MINUTES),
        # The design load against the default deployment: it must fail (the table's quota).
        report.DEFAULT_RUN: at_load(1, LOAD10_MINUTES),
    }
    for key, config in later.items():
        if not kept(key):
            results[key] = run(replace(config, seed=seed))
            ran.append(key)
    return ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench.scale", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small subset, printed only")
    parser.add_argument("--minutes", type=float, default=None, help="simulated minutes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="docs folder to write to")
    parser.add_argument(
        "--only",
        default=None,
        help="run these runs alone (a,b) and keep every other run's figures from the "
        "benchmarks.json in --out (or docs/): for re-measuring one run",
    )
    parser.add_argument(
        "--load",
        type=float,
        default=None,
        help="one run at this many times the design load against the default deployment "
        "(printed only; exits non-zero naming what broke first)",
    )
    parser.add_argument(
        "--size",
        default="default",
        help="with --load: the CDK app's deployment size to run against (default, "
        "design_load; infra/shepherd_infra/deployments.py)",
    )
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the engine's warnings at load: counted, not printed
    if args.load is not None:
        return run_at_load(args.load, args.minutes or LOAD10_MINUTES, args.seed, args.size)
    minutes = args.minutes or (1.0 if args.quick else 10.0)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    results: dict[str, Any] = {}
    out = args.out if args.out is not None else (None if args.quick else ROOT / "docs")
    only = None if args.only is None else set(args.only.split(","))
    before: dict[str, Any] = {}
    if only is not None and out is not None and (out / "benchmarks.json").exists():
        before = json.loads((out / "benchmarks.json").read_text()).get("scale", {})
    ran = run_all(args.quick, minutes, args.seed, only, before, results)
    kept = {
        k: before.get(k) for k in ("reads_per_step", "map_items_per_second", "throttle_episode")
    }
    if only is not None and not ran and all(kept.values()):
        measured = kept  # a re-render: the probes' figures stay as measured
    else:
        _log("probes: reads a step (a chain, 90 wide), a map's items a second, a throttle episode")
        measured = probes.measure()
    wall = round(time.monotonic() - started)
    meta: dict[str, Any] = {
        "wall_seconds": wall,
        "load_average_1min": {"start": load_before, "end": os.getloadavg()[0]},
        "argv": sys.argv[1:] if argv is None else argv,
        "quick": args.quick,
        "seed": args.seed,
    }
    if only is not None and before.get("meta") and not ran:
        meta = before["meta"]  # a re-render: the figures' own record stays
    elif only is not None and before.get("meta"):
        # Re-measured runs on top of the last whole `make scale`: its time and load stay,
        # plus the re-measured runs' time.
        last = before["meta"]
        meta = {
            **last,
            "wall_seconds": last["wall_seconds"] - last.get("rerun_seconds", 0) + wall,
            "rerun": sorted(ran),
            "rerun_seconds": wall,
            "rerun_argv": meta["argv"],
        }
    scale = report.scale_section(results, meta, measured)
    print(report.render_text(scale))
    if out is not None:
        report.write(out, scale)
        _log(f"wrote {out / 'benchmarks.json'} (scale, cost.at_load) and benchmarks.md")
    _log(f"took {meta['wall_seconds']} s")
    if not scale["passed"]:
        _log("FAILED: " + "; ".join(scale["missed"]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
