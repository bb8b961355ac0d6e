"""Helpers of the console's browser tests (a module, so tests can import them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SCREENSHOTS = Path(__file__).parent / "screenshots"  # git-ignored
DESKTOP = {"width": 1280, "height": 800}
NARROW = {"width": 400, "height": 800}


def shot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """Save what the page shows, for a human to look at."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
