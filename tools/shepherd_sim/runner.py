"""Run many seeds and summarize: faults injected, outcomes, timing, every violation with the
seed, a trace trimmed to the affected workflow and the command that replays it."""

from __future__ import annotations

import multiprocessing
import shlex
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from shepherd_sim.faults import FAULT_KINDS, Faults, empty_counts
from shepherd_sim.invariants import Violation
from shepherd_sim.sim import SimConfig, SimResult, run_seed


@dataclass
class SeedSummary:
    """What a worker process sends back for one seed (the trace only when something broke)."""

    seed: int
    faults: Counter[str]
    outcomes: Counter[str]
    stats: Counter[str]
    sim_seconds: float
    events: int
    digest: str
    violations: list[Violation]
    traces: dict[str, list[str]] = field(default_factory=dict)


def summarize(result: SimResult, trace_limit: int = 200) -> SeedSummary:
    traces = {}
    for v in result.violations:
        key = v.workflow_id or ""
        if key not in traces:
            traces[key] = result.trace_for(v.workflow_id, trace_limit)
    return SeedSummary(
        result.seed,
        result.faults,
        result.outcomes,
        result.stats,
        result.sim_seconds,
        result.events,
        result.digest,
        result.violations,
        traces,
    )


_faults: Faults = Faults()
_config: SimConfig = SimConfig()


def _init(faults: Faults, config: SimConfig) -> None:
    global _faults, _config
    _faults, _config = faults, config


def _one(seed: int) -> SeedSummary:
    return summarize(run_seed(seed, _faults, _config))


def run_many(
    seeds: Iterable[int], faults: Faults, config: SimConfig, jobs: int = 1
) -> Iterator[SeedSummary]:
    """Summaries in seed order; `jobs` > 1 spreads seeds over processes (same results)."""
    if jobs <= 1:
        _init(faults, config)
        for seed in seeds:
            yield _one(seed)
        return
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(jobs, initializer=_init, initargs=(faults, config)) as pool:
        yield from pool.imap(_one, seeds, chunksize=16)


@dataclass
class Totals:
    seeds: int = 0
    faults: Counter[str] = field(default_factory=empty_counts)
    outcomes: Counter[str] = field(default_factory=Counter)
    stats: Counter[str] = field(default_factory=Counter)
    sim_seconds: float = 0.0
    events: int = 0
    failed: list[SeedSummary] = field(default_factory=list)
    wall_seconds: float = 0.0

    def add(self, s: SeedSummary) -> None:
        self.seeds += 1
        self.faults.update(s.faults)
        self.outcomes.update(s.outcomes)
        self.stats.update(s.stats)
        self.sim_seconds += s.sim_seconds
        self.events += s.events
        if s.violations:
            self.failed.append(s)


def replay_command(seed: int, faults: Faults, config: SimConfig | None = None) -> str:
    if config is not None and not config.breaker:
        cmd = f".venv/bin/python -m shepherd_sim --seed {seed} --no-breaker"
        return cmd + (f" --faults {shlex.quote(faults.describe())}" if faults != Faults() else "")
    cmd = f"make sim SEED={seed}"
    if faults != Faults():
        cmd += f" FAULTS={shlex.quote(faults.describe())}"
    return cmd


def report(
    totals: Totals, faults: Faults, *, max_failures: int = 20, config: SimConfig | None = None
) -> str:
    lines = [
        f"shepherd-sim: {totals.seeds} seeds in {totals.wall_seconds:.1f}s "
        f"({totals.seeds / max(totals.wall_seconds, 1e-9):.1f} seeds/s), "
        f"{totals.sim_seconds / 3600:.1f} simulated hours, {totals.events} events",
        f"faults: {faults.describe()}",
        "",
        "faults injected:",
    ]
    width = max(
        len(k)
        for k in [
            *FAULT_KINDS,
            *totals.stats,
            "COMPENSATED (not terminal!)",
            "of them terminal (a workflow, step or undo ended)",
        ]
    )
    for kind in FAULT_KINDS:
        lines.append(f"  {kind:<{width}} {totals.faults[kind]:>8}")
    lines += ["", "outcomes (terminal statuses):"]
    for status in ("SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"):
        lines.append(f"  {status:<{width}} {totals.outcomes[status]:>8}")
    others = sorted(set(totals.outcomes) - {"SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"})
    for status in others:
        lines.append(f"  {status + ' (not terminal!)':<{width}} {totals.outcomes[status]:>8}")
    lines += [
        "",
        "orphaned effects (a compensable step's effect never undone by a COMPENSATED or "
        "CANCELLED workflow):",
        f"  {'When: ATTEMPTED (a violation)':<{width}} "
        f"{totals.stats['orphaned_effects_attempted']:>8}",
        f"  {'When: SUCCEEDED (by design)':<{width}} "
        f"{totals.stats['orphaned_effects_succeeded']:>8}",
    ]
    st = totals.stats
    lines += [
        "",
        "events (announced by the table's writes, delivered through the stream by the "
        "simulated relay):",
        f"  {'announced':<{width}} {st['events_announced']:>8}",
        f"  {'of them terminal (a workflow, step or undo ended)':<{width}} "
        f"{st['events_announced_terminal']:>8}",
        f"  {'delivered again (duplicates)':<{width}} {st['events_delivered_again']:>8}",
        f"  {'replayed from the on-failure queue':<{width}} "
        f"{st['events_replayed_from_the_on_failure_queue']:>8}",
        f"  {'published more than 5 s after the write':<{width}} "
        f"{st['relay_published_after_5s']:>8}",
        f"missing events (announced, never delivered; a violation): {st['events_missing']} "
        f"(terminal: {st['events_missing_terminal']})",
    ]
    lines += [
        "",
        "dispatches and closes made by supervisor looks (the happy path's own work, taken over "
        "after a lost message or a dead writer; 0 with no fault):",
        f"  {'taken over by the supervisor':<{width}} {st['supervisor_took_over']:>8}",
    ]
    shown = ("orphaned_effects", "events_", "relay_published_after", "supervisor_took_over")
    observed = {k: n for k, n in totals.stats.items() if not k.startswith(shown)}
    if observed:
        lines += ["", "observed (not violations):"]
        for name, count in sorted(observed.items()):
            lines.append(f"  {name:<{width}} {count:>8}")
    lines.append("")
    if not totals.failed:
        lines.append("violations: none")
        return "\n".join(lines)
    kinds = Counter(v.invariant for s in totals.failed for v in s.violations)
    lines.append(
        f"VIOLATIONS in {len(totals.failed)} seed(s): "
        + ", ".join(f"{k}={n}" for k, n in sorted(kinds.items()))
    )
    for s in totals.failed[:max_failures]:
        lines += ["", f"--- seed {s.seed}: replay with: {replay_command(s.seed, faults, config)}"]
        lines += [f"  {v}" for v in s.violations]
        for wf, trace in s.traces.items():
            lines.append(f"  trace of {wf or 'the run'}:")
            lines += [f"    {line}" for line in trace]
    if len(totals.failed) > max_failures:
        lines.append(f"... and {len(totals.failed) - max_failures} more seeds")
    return "\n".join(lines)


def run_and_report(
    seeds: Iterable[int], faults: Faults, config: SimConfig, jobs: int = 1
) -> tuple[Totals, str]:
    totals = Totals()
    started = time.perf_counter()
    for summary in run_many(seeds, faults, config, jobs):
        totals.add(summary)
    totals.wall_seconds = time.perf_counter() - started
    return totals, report(totals, faults, config=config)
