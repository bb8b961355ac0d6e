"""`make conformance`: the ASL conformance table; exit 1 on any failed case."""

from __future__ import annotations

import sys

from shepherd_asl_conformance import run_all, table


def main() -> int:
    results = run_all()
    print(table(results))
    return 1 if any(r.problem for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
