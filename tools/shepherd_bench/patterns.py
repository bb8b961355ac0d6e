"""Hostile patterns (issue 35.1): a `StringMatches` condition on a 5 MiB caller string, against
the worst patterns the language allows (at most `wildcard.MAX_PATTERN` characters), must be
decided in under a second. The match used to be a backtracking regular expression: two stars
on 40,000 characters took 4.2 s, 130,000 a 504 after 46 s.

Each case runs through the condition evaluator the scheduler and the supervisor call
(`choice.evaluate`), best of a few runs; the slowest case is the number. Prints every case and
exits 1 if the slowest is over the target: `python -m shepherd_bench.patterns` (also `make
bench-patterns`, and a line of `make bench`).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

from shepherd.decisions import choice, wildcard

MIB = 1 << 20
TARGET_SECONDS = 1.0
CAP = wildcard.MAX_PATTERN


@dataclass(frozen=True)
class Case:
    name: str
    pattern: str
    text: str


def cases(size: int = 5 * MIB) -> list[Case]:
    """Adversarial pairs: every one is a quadratic-or-worse input for a backtracking matcher,
    and the needles are built to defeat a naive substring search too."""
    a = "a" * size
    near = ("a" * (CAP - 3) + "b") * (size // (CAP - 2))  # a needle of CAP - 2 a's just misses
    wide = "😀" * (size // 4)  # 5 MiB of UTF-8 in 4-byte code points (Python's widest strings)
    half = CAP // 2
    return [
        Case("most stars, the last segment at the very end", "*a" * (half - 1) + "*b", a + "b"),
        Case("most stars, a match", "*a" * half, a),
        Case("one long near-miss segment", "*" + "a" * (CAP - 3) + "b*", a),
        Case("a periodic near-miss segment", "*" + "a" * (CAP - 2) + "*", near),
        Case("many long near-miss segments", ("*" + "a" * 14 + "b") * (CAP // 16 - 1) + "*", a),
        Case("many short near-miss segments", "*aaab" * (CAP // 5 - 1) + "*", a),
        Case("escapes, no match", "*\\*" * (CAP // 3 - 1) + "*", a),
        Case("wide characters, a long near-miss", "*" + "😀" * (CAP - 3) + "x*", wide),
        Case("prefix and suffix over the whole text", "a" * half + "*" + "a" * (half - 1), a),
    ]


def _evaluate(rule: choice.Condition, document: Any) -> tuple[bool, float]:
    started = time.perf_counter()
    result = choice.evaluate(rule, document)
    return result, time.perf_counter() - started


def run_patterns(size: int = 5 * MIB, runs: int = 3) -> dict[str, Any]:
    """Each case's best time (ms) and result, the slowest, and whether it met the target."""
    rows: list[dict[str, Any]] = []
    for case in cases(size):
        assert len(case.pattern) <= CAP, case.name
        rule = choice.Condition.model_validate(
            {"Variable": "$.input.s", "StringMatches": case.pattern}
        )
        document = choice.document({"s": case.text}, {})
        timings = [_evaluate(rule, document) for _ in range(runs)]
        rows.append(
            {
                "case": case.name,
                "pattern_chars": len(case.pattern),
                "stars": len(wildcard.segments(case.pattern)) - 1,
                "text_bytes": len(case.text.encode()),
                "matched": timings[0][0],
                "ms": min(t for _, t in timings) * 1000,
            }
        )
    slowest = max(float(r["ms"]) for r in rows)
    return {
        "rows": rows,
        "slowest_ms": slowest,
        "target_ms": TARGET_SECONDS * 1000,
        "met": slowest < TARGET_SECONDS * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shepherd_bench.patterns", description=__doc__)
    parser.add_argument("--mib", type=float, default=5.0, help="the caller string's size")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    result = run_patterns(int(args.mib * MIB), args.runs)
    for row in result["rows"]:
        print(
            f"[patterns] {row['case']}: {row['ms']:.1f} ms ({row['pattern_chars']}-char pattern, "
            f"{row['stars']} stars, {row['text_bytes'] / MIB:.1f} MiB, "
            f"{'match' if row['matched'] else 'no match'})"
        )
    verdict = "met" if result["met"] else "MISSED"
    print(
        f"[patterns] slowest {result['slowest_ms']:.1f} ms against a target of "
        f"{result['target_ms']:.0f} ms: {verdict}"
    )
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
