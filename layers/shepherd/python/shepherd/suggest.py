"""The nearest name to a misspelt one, for error messages a person reads.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to `word`, if one is close enough to be a likely typo (case is
    ignored: `timeoutseconds` finds `TimeoutSeconds`)."""
    by_folded = {c.lower(): c for c in candidates}
    found = difflib.get_close_matches(word.lower(), list(by_folded), n=1, cutoff=0.6)
    return by_folded[found[0]] if found else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`; did you mean 'X'?`, or nothing when no candidate is close."""
    found = nearest(word, candidates)
    return f"; did you mean '{found}'?" if found else ""
