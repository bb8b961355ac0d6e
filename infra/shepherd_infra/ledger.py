"""The pool ledger: which pools a deployment holds, so that a pool no definition names any
more is retired, not deleted.

A synth knows only today's definitions, but a workflow runs to its end on the definition
version it started with (its snapshot is in the table): a pool that an edit renamed or removed
may still get tasks for hours or days. The ledger, a JSON file the app keeps beside its
definitions (and commits), remembers every pool deployed. A pool in the ledger that no
definition names is *retired*: it stays deployed as it was (queue, DLQ, function and mapping,
with its agent code) and every synth warns about it, until the operator releases it
(`release_pools`) once no running workflow's definition version uses it. Released, it leaves
the template; its queue and DLQ stay in the account with what they hold (the queues' removal
policy, `retain_data`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from shepherd.topology import PoolSpec

LEDGER_FILE = "shepherd-pools.lock"  # beside the definitions; not a definition's suffix
_HEADER = (
    "Pools this deployment holds, written by every synth (commit it): a pool no definition "
    "names is retired, not deleted, until released (docs/architecture.md, Retired pools)."
)


@dataclass(frozen=True)
class PoolPlan:
    """What a synth deploys: the pools the definitions name, and the retired ones."""

    named: Mapping[str, PoolSpec]
    retired: Mapping[str, PoolSpec]
    released: tuple[str, ...]

    @property
    def all(self) -> dict[str, PoolSpec]:
        return {**self.named, **self.retired}


def plan(
    ledger: Path | None, named: Mapping[str, PoolSpec], release: Collection[str] = ()
) -> PoolPlan:
    """The pools to deploy: those the definitions name, and those the ledger holds that they
    do not (retired) unless released. Releasing a pool that is not retired is an error."""
    known = read(ledger) if ledger is not None else {}
    retired = {n: s for n, s in known.items() if n not in named}
    wrong = sorted(set(release) - set(retired))
    if wrong:
        still = sorted(set(wrong) & set(named))
        raise ValueError(
            f"release_pools names {wrong}, which are not retired pools"
            + (f" ({still} are still named by a definition)" if still else "")
            + f"; the retired pools are {sorted(retired) or 'none'}"
        )
    kept = {n: s for n, s in sorted(retired.items()) if n not in release}
    return PoolPlan(named=dict(named), retired=kept, released=tuple(sorted(release)))


def read(path: Path) -> dict[str, PoolSpec]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {
            # A retired pool's agents are whatever its code registers; its timeout is kept.
            name: PoolSpec(name, frozenset(), int(entry["longest_task_seconds"]))
            for name, entry in data["pools"].items()
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{path}: not a pool ledger ({exc}); restore it from version control, or delete "
            "it to start a new one (pools it held and no definition names would then be "
            "removed from the stack; their queues stay, retained)"
        ) from exc


def write(path: Path, deployed: PoolPlan) -> None:
    """Record what this synth deploys; unchanged content is not rewritten."""
    pools = {
        name: {
            "longest_task_seconds": spec.longest_task_seconds,
            "retired": name in deployed.retired,
        }
        for name, spec in sorted(deployed.all.items())
    }
    text = json.dumps({"about": _HEADER, "pools": pools}, indent=2) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
