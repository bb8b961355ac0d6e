"""When the supervisor sweeps: the deployed schedule, read from the CDK app's config.

EventBridge invokes the supervisor at the top of every minute; the handler sweeps at 0,
interval, 2 x interval, ... up to `SWEEP_WINDOW_SECONDS` in (inclusive; see
`functions/shepherd_handlers/supervisor.py`). The constants are read from
`infra/shepherd_infra/config.py` as text (importing it would start the CDK's jsii runtime).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "infra" / "shepherd_infra" / "config.py"
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Schedule:
    name: str
    interval_ms: int
    sweeps: int  # per invocation, at offsets 0, interval, ...

    @classmethod
    def from_window(cls, name: str, interval_s: float, window_s: float) -> Schedule:
        """The handler's rule: sweeps start at 0, interval, ... up to `window` (inclusive)."""
        return cls(name, round(interval_s * 1000), 1 + int(window_s / interval_s + 1e-9))

    @property
    def offsets_s(self) -> list[float]:
        return [k * self.interval_ms / 1000 for k in range(self.sweeps)]

    @property
    def invocation_seconds(self) -> float:
        """How long one invocation lasts: its last sweep starts here (plus the sweep itself)."""
        return (self.sweeps - 1) * self.interval_ms / 1000

    def next_sweep(self, now: int) -> int:
        """The first sweep strictly after `now` (one invocation per minute, at :00)."""
        minute = now - now % MINUTE_MS
        k = (now - minute) // self.interval_ms + 1
        return minute + k * self.interval_ms if k < self.sweeps else minute + MINUTE_MS

    def describe(self) -> str:
        last = self.offsets_s[-1]
        return (
            f"{self.name}: every {self.interval_ms / 1000:g} s, sweeps at :00 ... :{last:02.0f} "
            f"of each minute"
        )


def _constants(path: Path = CONFIG) -> dict[str, float]:
    tree = ast.parse(path.read_text())
    out: dict[str, float] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
                value = node.value.value
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out[target.id] = float(value)
    return out


def deployed() -> Schedule:
    """The schedule the CDK app deploys (SWEEP_INTERVAL_SECONDS, SWEEP_WINDOW_SECONDS)."""
    constants = _constants()
    return Schedule.from_window(
        "deployed", constants["SWEEP_INTERVAL_SECONDS"], constants["SWEEP_WINDOW_SECONDS"]
    )


# The schedule before commit 8ede75d (window 50 s: sweeps at :00 ... :45, then a 15 s gap).
PREVIOUS = Schedule.from_window("previous (window 50 s)", 5, 45)
