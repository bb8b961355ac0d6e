"""`python -m shepherd_sim --seeds 1000 [--faults dup=0.1,lose=0.05] [--jobs 2]`, or
`--seed 1234` to replay one seed with its full trace."""

from __future__ import annotations

import argparse
import sys

from shepherd_sim.faults import FAULT_KINDS, Faults
from shepherd_sim.runner import replay_command, run_and_report
from shepherd_sim.sim import SimConfig, run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="shepherd_sim",
        description="Deterministic fault simulation of the Shepherd engine.",
        epilog="fault kinds: " + ", ".join(FAULT_KINDS),
    )
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to run")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--seed", type=int, help="replay one seed and print its whole trace")
    parser.add_argument(
        "--faults",
        default="",
        help="NAME=P,... on top of the defaults ('none,dup=0.2' injects duplicates only)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every probability")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--types", default="", help="workflow types to start (comma-separated; default all)"
    )
    parser.add_argument(
        "--no-breaker",
        action="store_true",
        help="the outage pools declare no circuit breaker (the same outages strike them)",
    )
    parser.add_argument("--digest", action="store_true", help="print only the run digest(s)")
    args = parser.parse_args(argv)

    try:
        faults = Faults.parse(args.faults, Faults().scaled(args.scale))
    except ValueError as exc:
        parser.error(str(exc))
    types = tuple(t for t in args.types.split(",") if t)
    config = SimConfig(workflow_types=types, breaker=not args.no_breaker)

    if args.seed is not None:
        result = run_seed(args.seed, faults, config)
        if args.digest:
            print(result.digest)
            return 1 if result.violations else 0
        for _, line in result.trace:
            print(line)
        print()
        print(f"seed {args.seed}: {result.events} events, {result.sim_seconds:.1f}s simulated")
        print("faults:", {k: v for k, v in result.faults.items() if v})
        print("outcomes:", dict(result.outcomes))
        print("digest:", result.digest)
        if result.violations:
            print(f"VIOLATIONS ({len(result.violations)}):")
            for v in result.violations:
                print(f"  {v}")
            print("replay:", replay_command(args.seed, faults, config))
            return 1
        print("violations: none")
        return 0

    totals, text = run_and_report(
        range(args.first, args.first + args.seeds), faults, config, args.jobs
    )
    print(text)
    return 1 if totals.failed else 0


if __name__ == "__main__":
    sys.exit(main())
